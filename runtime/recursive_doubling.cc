#include "runtime/recursive_doubling.h"

#include <fmt/format.h>

#include "runtime/engine.h"
#include "runtime/op_helpers.h"

namespace kf {

RecursiveDoublingAllreduce::RecursiveDoublingAllreduce(Engine& engine, std::string name,
                                                       ConstBufferView input, BufferView output,
                                                       ReduceOp op, DoneCallback done)
    : Operation(engine, std::move(name), "allreduce", std::move(done)),
      n_(engine.size()),
      rank_(engine.rank()),
      fold_(n_, rank_),
      input_(input),
      output_(output),
      op_(op) {
  last_step_ = static_cast<std::uint32_t>(fold_.levels + 1);
}

int RecursiveDoublingAllreduce::source_of(std::uint32_t step) const {
  if (fold_.virtual_rank < 0) return step == last_step_ ? rank_ - 1 : -1;
  if (step == 0) return rank_ < 2 * fold_.extra ? rank_ + 1 : -1;
  if (step <= static_cast<std::uint32_t>(fold_.levels)) {
    return fold_.rank_of_virtual(fold_.virtual_rank ^ (1 << (step - 1)));
  }
  return -1;
}

void RecursiveDoublingAllreduce::start() {
  if (output_.count() == 0) {  // every rank sees the same count: nobody sends anything
    finish();
    return;
  }
  if (fold_.virtual_rank < 0) {  // odd rank of a pair: hand the input over, wait for the result
    send(rank_ - 1, 0, 0, input_, SendAs::copy);
    next_step_ = last_step_;
    return;
  }
  copy_view(output_, input_);
  if (rank_ < 2 * fold_.extra) {
    next_step_ = 0;  // even rank of a pair: wait for the partner's input first
    return;
  }
  send_step(1);
  if (finished_) finish();  // a lone rank
}

void RecursiveDoublingAllreduce::send_step(std::uint32_t step) {
  if (step <= static_cast<std::uint32_t>(fold_.levels)) {
    send(source_of(step), 0, step, output_, SendAs::copy);
    next_step_ = step;
    return;
  }
  if (op_ == ReduceOp::avg) divide_view(output_, static_cast<std::size_t>(n_));
  if (fold_.virtual_rank < fold_.extra) send(rank_ + 1, 0, last_step_, output_, SendAs::copy);
  finished_ = true;
}

bool RecursiveDoublingAllreduce::accepts(int source, const MessageHeader& h) const {
  return h.kind == MessageKind::collective && h.chunk == 0 && !finished_ && h.step >= next_step_ &&
         h.step <= last_step_ && !early_.contains(h.step) && source == source_of(h.step);
}

void RecursiveDoublingAllreduce::on_message(int /*source*/, Message&& message) {
  const std::uint32_t step = message.header.step;
  if (step == next_step_) {
    if (apply(message.payload)) advance();
  } else if (!message.payload.materialize()) {
    // Kept until its turn, so a remote payload is copied out now: its owner is not held up.
    const PayloadError e = payload_failure(message.payload);
    finish(Status(
        e.code, fmt::format("allreduce '{}' on rank {}: step {}: {}", name(), rank_, step, e.why)));
    return;
  } else {
    early_.emplace(step, std::move(message.payload));
  }
  if (finished_ && !done()) finish();
}

void RecursiveDoublingAllreduce::advance() {
  while (!finished_ && !done()) {
    const auto it = early_.find(next_step_);
    if (it == early_.end()) return;
    const Payload payload = std::move(it->second);
    early_.erase(it);
    if (!apply(payload)) return;
  }
}

bool RecursiveDoublingAllreduce::apply(const Payload& p) {
  const std::uint32_t step = next_step_;
  const auto fail = [&](const PayloadError& e) {
    finish(
        Status(e.code, fmt::format("allreduce '{}' on rank {}: step {} from {}: {}", name(), rank_,
                                   step, engine().describe_peer(source_of(step)), e.why)));
    return false;
  };
  if (const auto why = payload_mismatch(p, output_)) return fail(*why);
  if (step == last_step_) {  // odd rank: the result
    if (const auto why = copy_payload(output_, p)) return fail(*why);
    finished_ = true;
    return true;
  }
  if (const auto why = reduce_payload(output_, p, op_)) return fail(*why);
  send_step(step + 1);
  return true;
}

std::string RecursiveDoublingAllreduce::waiting_for() const {
  if (finished_) return "nothing";
  return fmt::format("step {} from rank {}", next_step_, source_of(next_step_));
}

}  // namespace kf
