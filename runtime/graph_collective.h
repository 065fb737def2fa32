// The graph-pair algorithm (KungFu's model): each chunk climbs its pair's reduce graph, where a
// node folds what its predecessors send into its own buffer (in rank order, so results are
// bit-reproducible) and passes the sum on; the root then sends the result down the broadcast
// graph. One class serves allreduce, reduce (stop at the root), broadcast (skip the climb) and
// subset allreduce (a forest: every tree runs independently).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/buffer.h"
#include "runtime/chunking.h"
#include "runtime/op_helpers.h"
#include "runtime/operation.h"
#include "runtime/reduce.h"
#include "runtime/routes.h"

namespace kf {

enum class GraphMode { allreduce, reduce, broadcast };

class GraphCollective final : public Operation {
 public:
  GraphCollective(Engine& engine, std::string name, std::string_view kind, GraphMode mode,
                  ConstBufferView input, BufferView output, ReduceOp op,
                  std::shared_ptr<const CompiledStrategy> strategy, DoneCallback done);

  void start() override;
  bool accepts(int source, const MessageHeader& header) const override;
  void on_message(int source, Message&& message) override;
  std::string waiting_for() const override;
  // A chunk's broadcast arrival: it is only copied into the output.
  std::span<std::byte> landing(int source, const MessageHeader& header) override;

 private:
  struct Chunk {
    Range range;
    const Routes* routes = nullptr;
    std::vector<bool> arrived;                  // per reduce prev
    std::vector<std::optional<Payload>> early;  // arrived ahead of its turn to be folded
    std::size_t folded = 0;
    bool broadcast_arrived = false;
    bool done = false;
  };

  BufferView out(const Chunk& c) const { return output_.slice(c.range.first, c.range.count); }
  ConstBufferView in(const Chunk& c) const { return input_.slice(c.range.first, c.range.count); }
  // Empty, or why the payload could not be read.
  std::optional<PayloadError> fold(std::size_t index, Chunk& c, const Payload& p);
  void reduced(std::size_t index, Chunk& c);    // every contribution folded in
  void broadcast(std::size_t index, Chunk& c);  // pass the final value down, chunk done
  void chunk_done(Chunk& c);

  GraphMode mode_;
  ConstBufferView input_;
  BufferView output_;
  ReduceOp op_;
  std::shared_ptr<const CompiledStrategy> strategy_;
  std::vector<Chunk> chunks_;
  std::size_t remaining_ = 0;
};

}  // namespace kf
