// Bandwidth-optimal ring collectives.
//
// RingAllreduce (RING_RS_AG): the buffer is cut into slices of n x chunk_bytes; each slice into n
// parts. Reduce-scatter: at step s rank i sends part (i - s) to its right neighbour, which folds
// it into its own copy and passes it on; after n - 1 steps rank i holds part (i + 1) fully
// reduced. All-gather: the finished parts travel n - 1 more steps around the ring. Every rank
// sends and receives 2(n - 1)/n of the buffer, the lower bound. Slices proceed independently, so
// large buffers pipeline.
//
// RingAllgather: block b (rank b's input) travels the ring in n - 1 steps, chunk by chunk.
#pragma once

#include <vector>

#include "runtime/buffer.h"
#include "runtime/chunking.h"
#include "runtime/operation.h"
#include "runtime/reduce.h"

namespace kf {

class RingAllreduce final : public Operation {
 public:
  RingAllreduce(Engine& engine, std::string name, ConstBufferView input, BufferView output,
                ReduceOp op, DoneCallback done);

  void start() override;
  bool accepts(int source, const MessageHeader& header) const override;
  void on_message(int source, Message message) override;
  std::string waiting_for() const override;

 private:
  struct Slice {
    std::vector<Range> parts;   // n parts, as even as possible
    std::vector<bool> arrived;  // per step, 2(n - 1) steps
    std::size_t remaining = 0;
  };
  BufferView part(const Slice& s, int p) const;
  int wrap(int v) const { return ((v % n_) + n_) % n_; }

  int n_;
  int rank_;
  ConstBufferView input_;
  BufferView output_;
  ReduceOp op_;
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
  void on_message(int source, Message message) override;
  std::string waiting_for() const override;

 private:
  BufferView piece(int block, std::size_t chunk) const;
  int wrap(int v) const { return ((v % n_) + n_) % n_; }

  int n_;
  int rank_;
  ConstBufferView input_;
  BufferView output_;
  std::vector<Range> chunks_;  // of one block
  std::vector<bool> arrived_;  // [step * chunks + chunk]
  std::size_t remaining_ = 0;
};

}  // namespace kf
