// HALVING_DOUBLING allreduce (Rabenseifner), for any n, not only powers of two.
//
// With p the largest power of two <= n and r = n - p, the first 2r ranks pair up: each odd one
// folds its whole slice into its even partner (step 0) and sits out. The p active ranks then run
// log2(p) recursive-halving steps (exchange half of the current range with the partner at
// distance p/2, p/4, ..., 1 and fold the half kept), ending with 1/p of the slice fully reduced,
// and log2(p) recursive-doubling steps that gather the reduced ranges back. Finally each odd rank
// gets the result from its partner. Steps of one slice are strictly ordered (each depends on the
// previous), so messages that arrive early wait in the slice until their turn.
#pragma once

#include <map>
#include <vector>

#include "runtime/buffer.h"
#include "runtime/chunking.h"
#include "runtime/operation.h"
#include "runtime/power_of_two_fold.h"
#include "runtime/reduce.h"

namespace kf {

class HalvingDoublingAllreduce final : public Operation {
 public:
  HalvingDoublingAllreduce(Engine& engine, std::string name, ConstBufferView input,
                           BufferView output, ReduceOp op, DoneCallback done);

  void start() override;
  bool accepts(int source, const MessageHeader& header) const override;
  void on_message(int source, Message&& message) override;
  std::string waiting_for() const override;
  // The next step's message of a slice, when it is only copied: a doubling step's range, or the
  // result back to an odd rank.
  std::span<std::byte> landing(int source, const MessageHeader& header) override;

 private:
  struct Slice {
    Range range;                  // the whole slice
    Range mine;                   // what this rank currently owns
    std::uint32_t next_step = 0;  // the step whose message is awaited
    std::map<std::uint32_t, Payload> early;
    std::vector<Range> history;  // `mine` before each halving step, to undo in doubling
    bool done = false;
  };

  // Who sends this rank the message of `step`, or -1 if nobody does.
  int source_of(std::uint32_t step) const;
  void advance(std::size_t index, Slice& s);  // runs every step whose message is here
  void send_step(std::size_t index, Slice& s, std::uint32_t step);
  bool apply(std::size_t index, Slice& s, std::uint32_t step, const Payload& p);
  void slice_done(Slice& s);
  Range halve(const Slice& s, bool lower) const;  // the lower or upper half of s.mine
  // What a doubling step brings: the other half of what this rank held before the matching
  // halving step.
  Range doubled(const Slice& s) const;

  int n_;
  int rank_;
  PowerOfTwoFold fold_;
  std::uint32_t last_step_;  // 2 * levels + 1: the result back to an odd rank
  ConstBufferView input_;
  BufferView output_;
  ReduceOp op_;
  std::vector<Slice> slices_;
  std::size_t remaining_ = 0;
};

}  // namespace kf
