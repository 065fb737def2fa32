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

std::vector<double> PolicyRunner::contributions(const StepMetrics& local,
                                                const TrainingState& state) {
  std::vector<double> values;
  std::vector<std::size_t> lengths;
  lengths.reserve(policies_.size());
  for (auto& p : policies_) {
    const auto mine = p->contribute(local, state);
    lengths.push_back(mine.size());
    values.insert(values.end(), mine.begin(), mine.end());
  }
  lengths_ = std::move(lengths);
  return values;
}

PolicyOutcome PolicyRunner::decide(const StepMetrics& local, std::span<const double> sums,
                                   const TrainingState& state) {
  std::size_t total = 0;
  for (const std::size_t n : lengths_)
    total += n;
  if (lengths_.size() != policies_.size() || total != sums.size()) {
    throw std::logic_error(fmt::format(
        "policy runner: decide() got {} sums, the last contributions() of this stack of {} "
        "policies gave {} (call contributions() first, and sum its whole vector)",
        sums.size(), policies_.size(), lengths_.size() == policies_.size() ? total : 0));
  }
  PolicyOutcome outcome;
  std::size_t offset = 0;
  for (std::size_t i = 0; i < policies_.size(); ++i) {
    policies_[i]->after_step(local, sums.subspan(offset, lengths_[i]), state, outcome.actions);
    outcome.asked_by.resize(outcome.actions.size(), i);
    offset += lengths_[i];
  }
  outcome.sums.assign(sums.begin(), sums.end());
  return outcome;
}

std::string PolicyRunner::sums_name(std::int64_t step) {
  return fmt::format("kf.policy/{}", step);
}

std::string PolicyRunner::agreement_name(std::int64_t step) {
  return fmt::format("kf.policy.agree/{}", step);
}

Status PolicyRunner::disagreement(int rank, const std::vector<Action>& actions) {
  const std::string what = actions.empty() ? "nothing" : describe(actions[0]);
  return Status(ErrorCode::protocol,
                fmt::format("policies decided differently across workers (rank {} decided {}): a "
                            "policy is not deterministic",
                            rank, what));
}

namespace {

struct Round {
  std::vector<double> values;      // contributions, then sums (in place)
  std::vector<std::byte> encoded;  // the decided actions, for the consensus
  PolicyOutcome outcome;
};

}  // namespace

void PolicyRunner::after_step(Engine& engine, const StepMetrics& local, const TrainingState& state,
                              std::function<void(Status, PolicyOutcome)> done) {
  auto round = std::make_shared<Round>();
  round->values = contributions(local, state);
  const auto decide_and_agree = [this, &engine, local, state, round,
                                 done = std::move(done)](Status s) {
    if (!s.ok()) {
      done(std::move(s), {});
      return;
    }
    round->outcome = decide(local, round->values, state);
    round->encoded = encode(round->outcome.actions);
    consensus(engine, agreement_name(state.step),
              ConstBufferView::of(std::span<const std::byte>(round->encoded), DType::u8),
              [round, &engine, done](Status cs, bool agreed) {
                if (cs.ok() && !agreed) cs = disagreement(engine.rank(), round->outcome.actions);
                const bool ok = cs.ok();  // before cs is moved from
                done(std::move(cs), ok ? std::move(round->outcome) : PolicyOutcome{});
              });
  };
  if (round->values.empty()) {
    decide_and_agree(Status{});
    return;
  }
  const auto view = BufferView::of(std::span<double>(round->values), DType::f64);
  allreduce(engine, {.name = sums_name(state.step), .input = view, .output = view},
            decide_and_agree);
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
