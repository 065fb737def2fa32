// Bandwidth-optimal ring collectives.
//
// RingAllreduce (RING_RS_AG): the buffer is cut into slices of n x chunk_bytes; each slice into n
// parts. Reduce-scatter: at step s rank i sends part (i - s) to its right neighbour, which folds
// it into its own copy and passes it on; after n - 1 steps rank i holds part (i + 1) fully
// reduced. All-gather: the finished parts travel n - 1 more steps around the ring. Every rank
// sends and receives 2(n - 1)/n of the buffer, the lower bound. Slices proceed independently, so
// large buffers pipeline. allreduce() sends a buffer of fewer than n elements over the strategy's
// trees instead (collectives.cc): here most parts would be empty messages.
//
// RingAllgather: block b (rank b's input) travels the ring in n - 1 steps, chunk by chunk.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/buffer.h"
#include "runtime/chunking.h"
#include "runtime/operation.h"
#include "runtime/reduce.h"

namespace kf {

// v modulo n, in [0, n). Ring arithmetic stays within a lap of [0, n) per message, so two
// compare-and-adds do, where the two divisions of the general formula sat in every message's path.
inline int wrap_rank(int v, int n) {
  if (v < 0) v += n;
  if (v >= n) v -= n;
  return v >= 0 && v < n ? v : ((v % n) + n) % n;
}

// RingDirections::both (RING_RS_AG_BIDIR): among more than 2 ranks the odd slices go round the
// ring backwards, so every rank sends to and hears from both neighbours; the bytes per rank are
// the same. A buffer of one slice goes forwards: cut in two, it would send twice the messages,
// each half the size, where a medium buffer's messages are already latency-bound.
enum class RingDirections : std::uint8_t { one, both };

class RingAllreduce final : public Operation {
 public:
  RingAllreduce(Engine& engine, std::string name, ConstBufferView input, BufferView output,
                ReduceOp op, DoneCallback done, RingDirections directions = RingDirections::one);

  void start() override;
  bool accepts(int source, const MessageHeader& header) const override;
  void on_message(int source, Message&& message) override;
  std::string waiting_for() const override;
  // An all-gather step's part: copied into the output as it comes.
  std::span<std::byte> landing(int source, const MessageHeader& header) override;

 private:
  // One slice's whole state in 24 bytes: with a thousand workers every message lands on another
  // worker's operation, and each separately allocated piece of state would be one more cache miss.
  // A slice's steps arrive in order (they come from one neighbour, each sent only after the one
  // before it arrived there, and a transport keeps a pair's messages in order), so the next
  // expected step says which have arrived.
  struct Slice {
    Range range;                  // its n parts: even_part(range, n, p)
    std::uint32_t next_step = 0;  // of 2(n - 1)
  };
  std::uint32_t steps() const { return 2 * static_cast<std::uint32_t>(n_ - 1); }
  int wrap(int v) const { return wrap_rank(v, n_); }
  // Slice `index` goes round the ring backwards (RingDirections::both): the odd slices.
  bool backwards(std::size_t index) const { return both_ways_ && (index & 1) != 0; }
  // This rank's place on slice `index`'s ring, and the rank at place `at` there: a backwards
  // ring is the forward one on the mirrored ranks (n - rank), so its parts and steps are too.
  int place(std::size_t index) const { return backwards(index) ? wrap(-rank_) : rank_; }
  int rank_at(std::size_t index, int at) const { return backwards(index) ? wrap(-at) : wrap(at); }
  // The part of the output that step `step` of slice `index` brings (to fold, or to keep).
  Range part_at(std::size_t index, std::uint32_t step) const;
  // Sends a part of slice `index` at `step`, marked as a ring's part (kFlagRingPart).
  void send_part(int to, std::size_t index, std::uint32_t step, ConstBufferView part) {
    send(to, index, step, part, SendAs::borrowed_if_large, kFlagRingPart);
  }

  int n_;
  int rank_;
  ConstBufferView input_;
  BufferView output_;
  ReduceOp op_;
  bool both_ways_;
  std::vector<Slice> slices_;
  std::size_t remaining_ = 0;
};

class RingAllgather final : public Operation {
 public:
  // output holds n blocks of input.count() elements, block r = rank r's input.
  RingAllgather(Engine& engine, std::string name, ConstBufferView input, BufferView output,
                DoneCallback done);

  void start() override;
  bool accepts(int source, const MessageHeader& header) const override;
  void on_message(int source, Message&& message) override;
  std::string waiting_for() const override;
  std::span<std::byte> landing(int source, const MessageHeader& header) override;

 private:
  BufferView piece(int block, std::size_t chunk) const;
  // The piece step `step` of chunk `chunk` brings.
  BufferView arrival(std::size_t chunk, std::uint32_t step) const;
  int wrap(int v) const { return wrap_rank(v, n_); }

  int n_;
  int rank_;
  ConstBufferView input_;
  BufferView output_;
  std::vector<Range> chunks_;  // of one block
  std::vector<bool> arrived_;  // [step * chunks + chunk]
  std::size_t remaining_ = 0;
};

}  // namespace kf
