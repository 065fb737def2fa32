#include "policies/policy_runner.h"

#include <fmt/format.h>

#include <stdexcept>

#include "runtime/collectives.h"

namespace kf {

PolicyRunner::PolicyRunner(std::vector<std::unique_ptr<Policy>> policies)
    : policies_(std::move(policies)) {}

void PolicyRunner::before_train(const TrainingState& s) {
  for (auto& p : policies_)
    p->before_train(s);
}
void PolicyRunner::before_epoch(const TrainingState& s) {
  for (auto& p : policies_)
    p->before_epoch(s);
}
void PolicyRunner::before_step(const TrainingState& s) {
  for (auto& p : policies_)
    p->before_step(s);
}
void PolicyRunner::after_epoch(const TrainingState& s) {
  for (auto& p : policies_)
    p->after_epoch(s);
}
void PolicyRunner::after_train(const TrainingState& s) {
  for (auto& p : policies_)
    p->after_train(s);
}
void PolicyRunner::applied(const Action& a, const TrainingState& s) {
  for (auto& p : policies_)
    p->applied(a, s);
}

namespace {

struct Round {
  std::vector<double> values;         // contributions, then sums (in place)
  std::vector<std::size_t> lengths;   // per policy
  std::vector<std::byte> encoded;     // the decided actions, for the consensus
  PolicyOutcome outcome;
};

}  // namespace

void PolicyRunner::after_step(Engine& engine, const StepMetrics& local, const TrainingState& state,
                              std::function<void(Status, PolicyOutcome)> done) {
  auto round = std::make_shared<Round>();
  for (auto& p : policies_) {
    const auto mine = p->contribute(local, state);
    round->lengths.push_back(mine.size());
    round->values.insert(round->values.end(), mine.begin(), mine.end());
  }
  const auto decide = [this, &engine, local, state, round, done = std::move(done)](Status s) {
    if (!s.ok()) {
      done(std::move(s), {});
      return;
    }
    std::size_t offset = 0;
    for (std::size_t i = 0; i < policies_.size(); ++i) {
      const std::span<const double> sums(round->values.data() + offset, round->lengths[i]);
      policies_[i]->after_step(local, sums, state, round->outcome.actions);
      offset += round->lengths[i];
    }
    round->outcome.sums = round->values;
    round->encoded = encode(round->outcome.actions);
    consensus(engine, fmt::format("kf.policy.agree/{}", state.step),
              ConstBufferView::of(std::span<const std::byte>(round->encoded), DType::u8),
              [round, &engine, done](Status cs, bool agreed) {
                if (cs.ok() && !agreed) {
                  std::string what = "nothing";
                  if (!round->outcome.actions.empty()) what = describe(round->outcome.actions[0]);
                  cs = Status(ErrorCode::protocol,
                              fmt::format("policies decided differently across workers (rank {} "
                                          "decided {}): a policy is not deterministic",
                                          engine.rank(), what));
                }
                done(std::move(cs), cs.ok() ? std::move(round->outcome) : PolicyOutcome{});
              });
  };
  if (round->values.empty()) {
    decide(Status{});
    return;
  }
  const auto view = BufferView::of(std::span<double>(round->values), DType::f64);
  allreduce(engine, {.name = fmt::format("kf.policy/{}", state.step), .input = view, .output = view},
            decide);
}

std::vector<double> PolicyRunner::save_state() const {
  std::vector<double> out{static_cast<double>(policies_.size())};
  for (const auto& p : policies_) {
    const auto s = p->save_state();
    out.push_back(static_cast<double>(s.size()));
    out.insert(out.end(), s.begin(), s.end());
  }
  return out;
}

void PolicyRunner::load_state(std::span<const double> state) {
  if (state.empty() || static_cast<std::size_t>(state[0]) != policies_.size()) {
    throw std::invalid_argument("policy state: a different stack of policies");
  }
  std::size_t at = 1;
  for (auto& p : policies_) {
    if (at >= state.size()) throw std::invalid_argument("policy state: truncated");
    const auto n = static_cast<std::size_t>(state[at++]);
    if (at + n > state.size()) throw std::invalid_argument("policy state: truncated");
    p->load_state(state.subspan(at, n));
    at += n;
  }
}

}  // namespace kf
