#include "runtime/ring_collective.h"

#include <fmt/format.h>

#include "runtime/engine.h"
#include "runtime/op_helpers.h"

namespace kf {

namespace {

Status mismatch_status(const Operation& op, int rank, std::size_t chunk, std::uint32_t step,
                       const PayloadError& e) {
  return Status(e.code, fmt::format("{} '{}' on rank {}: chunk {} step {}: {}", op.kind(),
                                    op.name(), rank, chunk, step, e.why));
}

}  // namespace

// ---- RingAllreduce ----

RingAllreduce::RingAllreduce(Engine& engine, std::string name, ConstBufferView input,
                             BufferView output, ReduceOp op, DoneCallback done,
                             RingDirections directions)
    : Operation(engine, std::move(name), "allreduce", std::move(done)),
      n_(engine.size()),
      rank_(engine.rank()),
      input_(input),
      output_(output),
      op_(op),
      both_ways_(directions == RingDirections::both && n_ > 2) {
  const std::size_t slice_bytes = engine.options().chunk_bytes * static_cast<std::size_t>(n_);
  for (const Range& r : split_by_bytes(output_.count(), output_.elem_size(), slice_bytes)) {
    slices_.push_back(Slice{r});
  }
  remaining_ = n_ == 1 ? 0 : slices_.size();  // one rank: the copy is the result
}

void RingAllreduce::start() {
  if (remaining_ == 0) {
    copy_view(output_, input_);
    finish();
    return;
  }
  // No input -> output copy: every part of the output is written exactly once, either by its
  // reduce-scatter fold (out = in + arrival) or by the all-gather.
  for (std::size_t i = 0; i < slices_.size(); ++i) {
    const int at = place(i);
    const Range r = even_part(slices_[i].range.first, slices_[i].range.count, n_, at);
    send_part(rank_at(i, at + 1), i, 0, input_.slice(r.first, r.count));
  }
}

bool RingAllreduce::accepts(int source, const MessageHeader& h) const {
  return h.kind == MessageKind::collective && h.chunk < slices_.size() &&
         source == rank_at(h.chunk, place(h.chunk) - 1) && h.step == slices_[h.chunk].next_step &&
         h.step < steps();
}

Range RingAllreduce::part_at(std::size_t index, std::uint32_t step) const {
  const Slice& s = slices_[index];
  const int last = n_ - 2;  // the last step of each phase
  const bool scatter = static_cast<int>(step) <= last;
  const int s_local = scatter ? static_cast<int>(step) : static_cast<int>(step) - (n_ - 1);
  // Reduce-scatter step s brings part (i - 1 - s); all-gather step s brings part (i - s), i being
  // this rank's place on the slice's ring.
  const int at = place(index);
  const int p = scatter ? wrap(at - 1 - s_local) : wrap(at - s_local);
  return even_part(s.range.first, s.range.count, n_, p);
}

std::span<std::byte> RingAllreduce::landing(int /*source*/, const MessageHeader& header) {
  // A reduce-scatter step's arrival is folded with the input, so it has no place of its own.
  // An all-gather step's part is not touched here until it comes: what this rank sent from it
  // (its fold, a reduce-scatter step earlier) went round the ring before the part came back.
  if (static_cast<int>(header.step) <= n_ - 2 || output_.is_phantom()) return {};
  const Range r = part_at(header.chunk, header.step);
  const BufferView dst = output_.slice(r.first, r.count);
  return {dst.data(), dst.size_bytes()};
}

void RingAllreduce::on_message(int /*source*/, Message&& message) {
  const std::size_t index = message.header.chunk;
  const std::uint32_t step = message.header.step;
  Slice& s = slices_[index];
  const int last = n_ - 2;  // the last step of each phase
  const bool scatter = static_cast<int>(step) <= last;
  const int s_local = scatter ? static_cast<int>(step) : static_cast<int>(step) - (n_ - 1);
  const int at = place(index);
  const Range r = part_at(index, step);
  BufferView dst = output_.slice(r.first, r.count);
  if (const auto why = payload_mismatch(message.payload, dst)) {
    finish(mismatch_status(*this, rank_, index, step, *why));
    return;
  }
  ++s.next_step;
  const int right = rank_at(index, at + 1);
  if (scatter) {
    if (const auto why =
            reduce_payload_to(dst, input_.slice(r.first, r.count), message.payload, op_)) {
      finish(mismatch_status(*this, rank_, index, step, *why));
      return;
    }
    if (s_local < last) {
      send_part(right, index, step + 1, dst);
    } else {
      // Part p is complete here: finish the average, then start its trip around the ring.
      if (op_ == ReduceOp::avg) divide_view(dst, static_cast<std::size_t>(n_));
      send_part(right, index, static_cast<std::uint32_t>(n_ - 1), dst);
    }
  } else {
    if (const auto why = copy_payload(dst, message.payload)) {
      finish(mismatch_status(*this, rank_, index, step, *why));
      return;
    }
    if (s_local < last) send_part(right, index, step + 1, dst);
  }
  if (s.next_step == steps() && --remaining_ == 0) finish();
}

std::string RingAllreduce::waiting_for() const {
  for (std::size_t i = 0; i < slices_.size(); ++i) {
    if (slices_[i].next_step < steps()) {
      return fmt::format("slice {} step {} from rank {} ({} slices left)", i, slices_[i].next_step,
                         rank_at(i, place(i) - 1), remaining_);
    }
  }
  return "nothing";
}

// ---- RingAllgather ----

RingAllgather::RingAllgather(Engine& engine, std::string name, ConstBufferView input,
                             BufferView output, DoneCallback done)
    : Operation(engine, std::move(name), "allgather", std::move(done)),
      n_(engine.size()),
      rank_(engine.rank()),
      input_(input),
      output_(output),
      chunks_(split_by_bytes(input.count(), input.elem_size(), engine.options().chunk_bytes)) {
  arrived_.assign(chunks_.size() * static_cast<std::size_t>(n_ - 1), false);
  remaining_ = arrived_.size();
}

BufferView RingAllgather::piece(int block, std::size_t chunk) const {
  const Range& r = chunks_[chunk];
  return output_.slice(static_cast<std::size_t>(block) * input_.count() + r.first, r.count);
}

void RingAllgather::start() {
  copy_view(output_.slice(static_cast<std::size_t>(rank_) * input_.count(), input_.count()),
            input_);
  if (remaining_ == 0) {
    finish();
    return;
  }
  const int right = wrap(rank_ + 1);
  for (std::size_t c = 0; c < chunks_.size(); ++c) {
    send(right, c, 0, piece(rank_, c));
  }
}

bool RingAllgather::accepts(int source, const MessageHeader& h) const {
  if (h.kind != MessageKind::collective || source != wrap(rank_ - 1)) return false;
  if (h.chunk >= chunks_.size() || h.step >= static_cast<std::uint32_t>(n_ - 1)) return false;
  return !arrived_[h.step * chunks_.size() + h.chunk];
}

BufferView RingAllgather::arrival(std::size_t chunk, std::uint32_t step) const {
  // Step s brings block (i - 1 - s): the block that left its owner s + 1 hops ago.
  return piece(wrap(rank_ - 1 - static_cast<int>(step)), chunk);
}

std::span<std::byte> RingAllgather::landing(int /*source*/, const MessageHeader& header) {
  if (output_.is_phantom()) return {};
  const BufferView dst = arrival(header.chunk, header.step);  // written by this arrival only
  return {dst.data(), dst.size_bytes()};
}

void RingAllgather::on_message(int /*source*/, Message&& message) {
  const std::size_t chunk = message.header.chunk;
  const std::uint32_t step = message.header.step;
  BufferView dst = arrival(chunk, step);
  if (const auto why = payload_mismatch(message.payload, dst)) {
    finish(mismatch_status(*this, rank_, chunk, step, *why));
    return;
  }
  arrived_[step * chunks_.size() + chunk] = true;
  if (const auto why = copy_payload(dst, message.payload)) {
    finish(mismatch_status(*this, rank_, chunk, step, *why));
    return;
  }
  if (static_cast<int>(step) + 1 < n_ - 1) send(wrap(rank_ + 1), chunk, step + 1, dst);
  if (--remaining_ == 0) finish();
}

std::string RingAllgather::waiting_for() const {
  for (std::size_t i = 0; i < arrived_.size(); ++i) {
    if (!arrived_[i]) {
      return fmt::format("chunk {} step {} from rank {}", i % chunks_.size(), i / chunks_.size(),
                         wrap(rank_ - 1));
    }
  }
  return "nothing";
}

}  // namespace kf
