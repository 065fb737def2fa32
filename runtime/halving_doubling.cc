#include "runtime/halving_doubling.h"

#include <fmt/format.h>

#include "runtime/engine.h"
#include "runtime/op_helpers.h"

namespace kf {

HalvingDoublingAllreduce::HalvingDoublingAllreduce(Engine& engine, std::string name,
                                                   ConstBufferView input, BufferView output,
                                                   ReduceOp op, DoneCallback done)
    : Operation(engine, std::move(name), "allreduce", std::move(done)),
      n_(engine.size()),
      rank_(engine.rank()),
      fold_(n_, rank_),
      input_(input),
      output_(output),
      op_(op) {
  last_step_ = static_cast<std::uint32_t>(2 * fold_.levels + 1);
  // Slices of two chunks: the first halving step then sends about one chunk.
  for (const Range& r :
       split_by_bytes(output_.count(), output_.elem_size(), 2 * engine.options().chunk_bytes)) {
    Slice s;
    s.range = r;
    s.mine = r;
    slices_.push_back(std::move(s));
  }
  remaining_ = slices_.size();
}

int HalvingDoublingAllreduce::source_of(std::uint32_t step) const {
  if (fold_.virtual_rank < 0) return step == last_step_ ? rank_ - 1 : -1;
  if (step == 0) return rank_ < 2 * fold_.extra ? rank_ + 1 : -1;
  if (step <= static_cast<std::uint32_t>(fold_.levels)) {
    return fold_.rank_of_virtual(fold_.virtual_rank ^ (fold_.pow2 >> step));
  }
  if (step < last_step_) {
    return fold_.rank_of_virtual(fold_.virtual_rank ^
                                 (1 << (step - static_cast<std::uint32_t>(fold_.levels) - 1)));
  }
  return -1;
}

void HalvingDoublingAllreduce::start() {
  copy_view(output_, input_);
  for (std::size_t i = 0; i < slices_.size(); ++i) {
    Slice& s = slices_[i];
    send_step(i, s, fold_.virtual_rank < 0 || rank_ < 2 * fold_.extra ? 0 : 1);
  }
  if (remaining_ == 0) finish();
}

// Does the sending part of `step` and records that its message is now awaited.
void HalvingDoublingAllreduce::send_step(std::size_t index, Slice& s, std::uint32_t step) {
  const auto view = [&](Range r) { return output_.slice(r.first, r.count); };
  s.next_step = step;
  if (fold_.virtual_rank < 0) {  // odd rank of a pair: hand everything over, wait for the result
    send(rank_ - 1, index, 0, view(s.range));
    s.next_step = last_step_;
    return;
  }
  if (step == 0) return;  // even rank of a pair: wait for the partner's slice
  if (step <= static_cast<std::uint32_t>(fold_.levels)) {
    const int distance = fold_.pow2 >> step;
    const bool keep_lower = (fold_.virtual_rank & distance) == 0;
    s.history.push_back(s.mine);
    const Range give = halve(s, !keep_lower);
    s.mine = halve(s, keep_lower);
    send(fold_.rank_of_virtual(fold_.virtual_rank ^ distance), index, step, view(give));
    return;
  }
  if (step < last_step_) {
    send(source_of(step), index, step, view(s.mine));
    return;
  }
  if (fold_.virtual_rank < fold_.extra) {  // give the odd partner its result
    send(rank_ + 1, index, last_step_, view(s.range));
  }
  slice_done(s);
}

Range HalvingDoublingAllreduce::halve(const Slice& s, bool lower) const {
  const std::size_t half = s.mine.count / 2;
  if (lower) return {s.mine.first, half};
  return {s.mine.first + half, s.mine.count - half};
}

Range HalvingDoublingAllreduce::doubled(const Slice& s) const {
  const Range whole = s.history.back();
  return s.mine.first == whole.first
             ? Range{s.mine.first + s.mine.count, whole.count - s.mine.count}
             : Range{whole.first, s.mine.first - whole.first};
}

std::span<std::byte> HalvingDoublingAllreduce::landing(int /*source*/, const MessageHeader& h) {
  const Slice& s = slices_[h.chunk];
  // Only the step due (a later one waits in the slice); the folding steps have no place. What
  // this rank sent from the range a doubling step brings (its halving step's half) reached the
  // partner before the partner could send the range back.
  if (output_.is_phantom() || h.step != s.next_step) return {};
  Range r;
  if (h.step == last_step_) {
    r = s.range;
  } else if (h.step > static_cast<std::uint32_t>(fold_.levels) && !s.history.empty()) {
    r = doubled(s);
  } else {
    return {};
  }
  const BufferView dst = output_.slice(r.first, r.count);
  return {dst.data(), dst.size_bytes()};
}

bool HalvingDoublingAllreduce::accepts(int source, const MessageHeader& h) const {
  if (h.kind != MessageKind::collective || h.chunk >= slices_.size()) return false;
  const Slice& s = slices_[h.chunk];
  return !s.done && h.step >= s.next_step && h.step <= last_step_ && !s.early.contains(h.step) &&
         source == source_of(h.step);
}

void HalvingDoublingAllreduce::on_message(int /*source*/, Message&& message) {
  const std::size_t index = message.header.chunk;
  Slice& s = slices_[index];
  if (message.header.step == s.next_step) {
    if (apply(index, s, s.next_step, message.payload)) advance(index, s);
  } else if (!message.payload.materialize()) {
    // Kept until its turn, so a remote payload is copied out now: its owner is not held up.
    const PayloadError e = payload_failure(message.payload);
    finish(Status(e.code, fmt::format("allreduce '{}' on rank {}: slice {} step {}: {}", name(),
                                      rank_, index, message.header.step, e.why)));
    return;
  } else {
    s.early.emplace(message.header.step, std::move(message.payload));
  }
  if (remaining_ == 0 && !done()) finish();
}

void HalvingDoublingAllreduce::advance(std::size_t index, Slice& s) {
  while (!s.done && !done()) {
    const auto it = s.early.find(s.next_step);
    if (it == s.early.end()) return;
    const Payload payload = std::move(it->second);
    s.early.erase(it);
    if (!apply(index, s, s.next_step, payload)) return;
  }
}

bool HalvingDoublingAllreduce::apply(std::size_t index, Slice& s, std::uint32_t step,
                                     const Payload& p) {
  const auto view = [&](Range r) { return output_.slice(r.first, r.count); };
  const auto fail = [&](const PayloadError& e) {
    finish(Status(e.code, fmt::format("allreduce '{}' on rank {}: slice {} step {}: {}", name(),
                                      rank_, index, step, e.why)));
    return false;
  };
  const auto check = [&](Range r) {
    if (const auto why = payload_mismatch(p, view(r))) return fail(*why);
    return true;
  };
  if (step == last_step_) {  // odd rank: the result
    if (!check(s.range)) return false;
    if (const auto why = copy_payload(view(s.range), p)) return fail(*why);
    slice_done(s);
    return true;
  }
  if (step == 0) {  // even rank: fold the odd partner's slice in
    if (!check(s.range)) return false;
    if (const auto why = reduce_payload(view(s.range), p, op_)) return fail(*why);
    send_step(index, s, 1);
    return true;
  }
  if (step <= static_cast<std::uint32_t>(fold_.levels)) {
    if (!check(s.mine)) return false;
    if (const auto why = reduce_payload(view(s.mine), p, op_)) return fail(*why);
    if (step == static_cast<std::uint32_t>(fold_.levels) && op_ == ReduceOp::avg) {
      divide_view(view(s.mine), static_cast<std::size_t>(n_));
    }
    send_step(index, s, step + 1);
    return true;
  }
  // Recursive doubling.
  const Range other = doubled(s);
  if (!check(other)) return false;
  if (const auto why = copy_payload(view(other), p)) return fail(*why);
  s.mine = s.history.back();
  s.history.pop_back();
  send_step(index, s, step + 1);
  return true;
}

void HalvingDoublingAllreduce::slice_done(Slice& s) {
  if (s.done) return;
  s.done = true;
  --remaining_;
}

std::string HalvingDoublingAllreduce::waiting_for() const {
  for (std::size_t i = 0; i < slices_.size(); ++i) {
    const Slice& s = slices_[i];
    if (!s.done) {
      return fmt::format("slice {} step {} from rank {} ({} slices left)", i, s.next_step,
                         source_of(s.next_step), remaining_);
    }
  }
  return "nothing";
}

}  // namespace kf
