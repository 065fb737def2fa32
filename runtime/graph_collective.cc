#include "runtime/graph_collective.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "runtime/engine.h"
#include "runtime/op_helpers.h"

namespace kf {

GraphCollective::GraphCollective(Engine& engine, std::string name, std::string_view kind,
                                 GraphMode mode, ConstBufferView input, BufferView output,
                                 ReduceOp op, std::shared_ptr<const CompiledStrategy> strategy,
                                 DoneCallback done)
    : Operation(engine, std::move(name), kind, std::move(done)),
      mode_(mode),
      input_(input),
      output_(output),
      op_(op),
      strategy_(std::move(strategy)) {
  const auto ranges =
      split_by_bytes(output_.count(), output_.elem_size(), engine.options().chunk_bytes);
  chunks_.resize(ranges.size());
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    Chunk& c = chunks_[i];
    c.range = ranges[i];
    c.routes = &strategy_->routes(strategy_->pair_index(this->name(), i));
    c.arrived.assign(c.routes->reduce_prevs.size(), false);
    c.early.resize(c.routes->reduce_prevs.size());
  }
  remaining_ = chunks_.size();
}

void GraphCollective::start() {
  for (std::size_t i = 0; i < chunks_.size(); ++i) {
    Chunk& c = chunks_[i];
    if (mode_ == GraphMode::broadcast) {
      if (c.routes->is_root()) {
        copy_view(out(c), in(c));
        broadcast(i, c);
      }
      continue;
    }
    // Nodes with predecessors build their sum in the output (the first fold reads the input);
    // leaves send straight from the input. Only a lone root copies.
    if (c.routes->reduce_prevs.empty()) {
      if (c.routes->reduce_next < 0) copy_view(out(c), in(c));
      reduced(i, c);
    }
  }
  if (remaining_ == 0) finish();
}

bool GraphCollective::accepts(int source, const MessageHeader& h) const {
  if (h.kind != MessageKind::collective || h.chunk >= chunks_.size()) return false;
  const Chunk& c = chunks_[h.chunk];
  if (h.step == kStepReduce && mode_ != GraphMode::broadcast) {
    const auto& prevs = c.routes->reduce_prevs;
    const auto it = std::lower_bound(prevs.begin(), prevs.end(), source);
    return it != prevs.end() && *it == source &&
           !c.arrived[static_cast<std::size_t>(it - prevs.begin())];
  }
  if (h.step == kStepBroadcast && mode_ != GraphMode::reduce) {
    return source == c.routes->broadcast_prev && !c.broadcast_arrived;
  }
  return false;
}

std::span<std::byte> GraphCollective::landing(int /*source*/, const MessageHeader& h) {
  // In an allreduce this node's own sum went up before the final value could come down.
  if (h.step != kStepBroadcast || output_.is_phantom()) return {};
  const BufferView dst = out(chunks_[h.chunk]);
  return {dst.data(), dst.size_bytes()};
}

void GraphCollective::on_message(int source, Message&& message) {
  const std::size_t index = message.header.chunk;
  Chunk& c = chunks_[index];
  const auto error = [&](const PayloadError& e) {
    finish(
        Status(e.code, fmt::format("{} '{}' on rank {}: chunk {} from {}: {}", kind(), name(),
                                   engine().rank(), index, engine().describe_peer(source), e.why)));
  };
  if (const auto why = payload_mismatch(message.payload, out(c))) {
    error(*why);
    return;
  }
  if (message.header.step == kStepBroadcast) {
    c.broadcast_arrived = true;
    if (const auto why = copy_payload(out(c), message.payload)) {
      error(*why);
      return;
    }
    broadcast(index, c);
    if (remaining_ == 0) finish();
    return;
  }
  const auto& prevs = c.routes->reduce_prevs;
  const std::size_t k = static_cast<std::size_t>(
      std::lower_bound(prevs.begin(), prevs.end(), source) - prevs.begin());
  c.arrived[k] = true;
  if (k != c.folded) {
    // Kept until its turn: a remote payload is copied out now, so its owner is not held up.
    if (!message.payload.materialize()) {
      error(payload_failure(message.payload));
      return;
    }
    c.early[k] = std::move(message.payload);
    return;
  }
  if (const auto why = fold(index, c, message.payload)) {
    error(*why);
    return;
  }
  if (remaining_ == 0) finish();
}

std::optional<PayloadError> GraphCollective::fold(std::size_t index, Chunk& c, const Payload& p) {
  // The first fold starts the sum: out = in + p.
  if (auto why = c.folded == 0 ? reduce_payload_to(out(c), in(c), p, op_)
                               : reduce_payload(out(c), p, op_)) {
    return why;
  }
  ++c.folded;
  while (c.folded < c.early.size() && c.early[c.folded]) {
    if (auto why = reduce_payload(out(c), *c.early[c.folded], op_)) return why;
    c.early[c.folded].reset();
    ++c.folded;
  }
  if (c.folded == c.early.size()) reduced(index, c);
  return std::nullopt;
}

void GraphCollective::reduced(std::size_t index, Chunk& c) {
  if (c.routes->reduce_next >= 0) {
    const ConstBufferView sum = c.routes->reduce_prevs.empty() ? in(c) : out(c);
    send(c.routes->reduce_next, index, kStepReduce, sum);
    if (mode_ == GraphMode::reduce) chunk_done(c);
    return;
  }
  if (op_ == ReduceOp::avg) divide_view(out(c), static_cast<std::size_t>(c.routes->group_size));
  if (mode_ == GraphMode::reduce) {
    chunk_done(c);
  } else {
    broadcast(index, c);
  }
}

void GraphCollective::broadcast(std::size_t index, Chunk& c) {
  for (int next : c.routes->broadcast_nexts) {
    send(next, index, kStepBroadcast, out(c));
  }
  chunk_done(c);
}

void GraphCollective::chunk_done(Chunk& c) {
  if (c.done) return;
  c.done = true;
  --remaining_;
}

std::string GraphCollective::waiting_for() const {
  std::string what;
  int listed = 0;
  for (std::size_t i = 0; i < chunks_.size() && listed < 4; ++i) {
    const Chunk& c = chunks_[i];
    if (c.done) continue;
    ++listed;
    std::vector<int> missing;
    for (std::size_t k = 0; k < c.arrived.size(); ++k) {
      if (!c.arrived[k]) missing.push_back(c.routes->reduce_prevs[k]);
    }
    if (!missing.empty() && mode_ != GraphMode::broadcast) {
      what += fmt::format("chunk {} reduce from rank(s) {}; ", i, fmt::join(missing, ","));
    } else {
      what += fmt::format("chunk {} broadcast from rank {}; ", i, c.routes->broadcast_prev);
    }
  }
  return what.empty() ? "nothing" : what.substr(0, what.size() - 2);
}

}  // namespace kf
