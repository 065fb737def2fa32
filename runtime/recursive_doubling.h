// Recursive-doubling allreduce: the latency-bound algorithm for small buffers, as MPI uses it.
//
// With p the largest power of two <= n and r = n - p, the first 2r ranks pair up: each odd one
// sends its whole buffer to its even partner (step 0) and sits out. The p active ranks then run
// log2(p) steps; at step s each exchanges its whole partial result with the partner at distance
// 2^(s-1) and folds the other's in. Finally each even rank of a pair sends the result to its odd
// partner (step log2(p) + 1). So an allreduce takes log2(p) steps in a row (plus 2 where n is not
// a power of two), where a tree takes 2 x depth and a ring 2(n - 1): at 2 ranks one message each
// way at once, instead of one up and then one down.
//
// Every rank ends with the same bits: both partners fold the same two operands, and every
// reduction is commutative. Each step sends the whole buffer, so this is for small buffers only
// (AUTO picks it below EngineOptions::auto_doubling_bytes); its messages are always copies,
// since the buffer changes as soon as the partner's part arrives.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "runtime/buffer.h"
#include "runtime/operation.h"
#include "runtime/power_of_two_fold.h"
#include "runtime/reduce.h"

namespace kf {

class RecursiveDoublingAllreduce final : public Operation {
 public:
  RecursiveDoublingAllreduce(Engine& engine, std::string name, ConstBufferView input,
                             BufferView output, ReduceOp op, DoneCallback done);

  void start() override;
  bool accepts(int source, const MessageHeader& header) const override;
  void on_message(int source, Message&& message) override;
  std::string waiting_for() const override;

 private:
  // Who sends this rank the message of `step`, or -1 if nobody does.
  int source_of(std::uint32_t step) const;
  void send_step(std::uint32_t step);  // sends what `step` sends and awaits its message
  bool apply(const Payload& payload);  // next_step_'s message; false when the operation failed
  void advance();                      // applies early messages whose turn has come

  int n_;
  int rank_;
  PowerOfTwoFold fold_;
  std::uint32_t last_step_;  // levels + 1: the result back to an odd rank
  ConstBufferView input_;
  BufferView output_;
  ReduceOp op_;
  std::uint32_t next_step_ = 0;             // the step whose message is awaited
  bool finished_ = false;                   // the result is in output_
  std::map<std::uint32_t, Payload> early_;  // later steps' messages, from faster partners
};

}  // namespace kf
