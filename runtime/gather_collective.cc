#include "runtime/gather_collective.h"

#include <fmt/format.h>

#include "runtime/engine.h"
#include "runtime/op_helpers.h"

namespace kf {

Gather::Gather(Engine& engine, std::string name, ConstBufferView input, BufferView output, int root,
               DoneCallback done)
    : Operation(engine, std::move(name), "gather", std::move(done)),
      n_(engine.size()),
      rank_(engine.rank()),
      root_(root),
      input_(input),
      output_(output),
      chunks_(split_by_bytes(input.count(), input.elem_size(), engine.options().chunk_bytes)) {
  if (rank_ == root_) {
    arrived_.assign(chunks_.size() * static_cast<std::size_t>(n_), false);
    remaining_ = chunks_.size() * static_cast<std::size_t>(n_ - 1);
  }
}

void Gather::start() {
  if (rank_ == root_) {
    copy_view(output_.slice(static_cast<std::size_t>(rank_) * input_.count(), input_.count()),
              input_);
  } else {
    for (std::size_t c = 0; c < chunks_.size(); ++c) {
      send(root_, c, 0, input_.slice(chunks_[c].first, chunks_[c].count));
    }
  }
  if (remaining_ == 0) finish();
}

bool Gather::accepts(int source, const MessageHeader& h) const {
  return rank_ == root_ && h.kind == MessageKind::collective && h.step == 0 &&
         h.chunk < chunks_.size() && source >= 0 && source < n_ && source != root_ &&
         !arrived_[static_cast<std::size_t>(source) * chunks_.size() + h.chunk];
}

BufferView Gather::block(int source, std::size_t chunk) const {
  return output_.slice(static_cast<std::size_t>(source) * input_.count() + chunks_[chunk].first,
                       chunks_[chunk].count);
}

std::span<std::byte> Gather::landing(int source, const MessageHeader& header) {
  if (output_.is_phantom()) return {};
  const BufferView dst = block(source, header.chunk);
  return {dst.data(), dst.size_bytes()};
}

void Gather::on_message(int source, Message&& message) {
  const std::size_t c = message.header.chunk;
  BufferView dst = block(source, c);
  if (const auto why = payload_mismatch(message.payload, dst)) {
    finish(Status(why->code, fmt::format("gather '{}' on rank {}: chunk {} from {}: {}", name(),
                                         rank_, c, engine().describe_peer(source), why->why)));
    return;
  }
  arrived_[static_cast<std::size_t>(source) * chunks_.size() + c] = true;
  if (const auto why = copy_payload(dst, message.payload)) {
    finish(Status(why->code, fmt::format("gather '{}' on rank {}: chunk {} from {}: {}", name(),
                                         rank_, c, engine().describe_peer(source), why->why)));
    return;
  }
  if (--remaining_ == 0) finish();
}

std::string Gather::waiting_for() const {
  for (std::size_t i = 0; i < arrived_.size(); ++i) {
    const int source = static_cast<int>(i / chunks_.size());
    if (source != root_ && !arrived_[i]) {
      return fmt::format("chunk {} from rank {} ({} chunks left)", i % chunks_.size(), source,
                         remaining_);
    }
  }
  return "nothing";
}

}  // namespace kf
