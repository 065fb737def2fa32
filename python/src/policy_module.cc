// kungfu._core's policies: the C++ policy stack (kf::PolicyRunner over policies made by name, as
// kfsim and kftrain make them, and Python policies), the agreement round's phases, TrainingState,
// StepMetrics and the actions. kungfu/torch/policies.py runs the round with kungfu's collectives.
//
// Threads: a Python policy is a kf::Policy (PythonPolicy) that calls the Python object's hooks.
// Every method here runs on the Python caller's thread with the GIL held, never on the
// runtime's loop: the caller runs contributions(), the allreduce of the sums, decide() and the
// consensus itself, each collective waited for with the GIL released in between. A PythonPolicy
// called without the GIL refuses with std::logic_error rather than touch the interpreter.
#include "python/src/policy_module.h"

#include <fmt/format.h>
#include <pybind11/stl.h>

#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "policies/policy.h"
#include "policies/policy_runner.h"
#include "policies/registry.h"
#include "runtime/monitor.h"
#include "topology/strategy.h"

namespace py = pybind11;

namespace kf::python {
namespace {

std::string known_strategies() {
  std::string out;
  for (const StrategyName s : kAllStrategyNames)
    out += (out.empty() ? "" : ", ") + std::string(strategy_name(s));
  return out;
}

StrategyName strategy_from(const std::string& name, const char* call) {
  const auto s = parse_strategy_name(name);
  if (!s) {
    throw py::value_error(
        fmt::format("{}: unknown strategy '{}' (known: {})", call, name, known_strategies()));
  }
  return *s;
}

// ---- actions ----

std::optional<Action> to_action(py::handle h) {
  if (py::isinstance<SwitchStrategy>(h)) return Action(h.cast<SwitchStrategy>());
  if (py::isinstance<Resize>(h)) return Action(h.cast<Resize>());
  if (py::isinstance<SetBatchSize>(h)) return Action(h.cast<SetBatchSize>());
  if (py::isinstance<SetLearningRate>(h)) return Action(h.cast<SetLearningRate>());
  if (py::isinstance<StopTraining>(h)) return Action(h.cast<StopTraining>());
  return std::nullopt;
}

Action action_from(py::handle h, const std::string& what) {
  auto a = to_action(h);
  if (!a) {
    throw py::type_error(fmt::format(
        "{}: {} is not an action (SwitchStrategy, Resize, SetBatchSize, SetLearningRate, "
        "StopTraining)",
        what, py::repr(h).cast<std::string>()));
  }
  return std::move(*a);
}

py::object to_python(const Action& action) {
  return std::visit([](const auto& a) { return py::cast(a); }, action);
}

std::string repr(const Action& action) {
  return std::visit(
      Overloaded{
          [](const SwitchStrategy& a) {
            if (a.name) {
              return fmt::format("SwitchStrategy('{}', label='{}')", strategy_name(*a.name),
                                 a.label);
            }
            return fmt::format("SwitchStrategy(forest=[{}], label='{}')", fmt::join(a.forest, ", "),
                               a.label);
          },
          [](const Resize& a) { return fmt::format("Resize({})", a.workers); },
          [](const SetBatchSize& a) { return fmt::format("SetBatchSize({})", a.per_worker); },
          [](const SetLearningRate& a) { return fmt::format("SetLearningRate({})", a.value); },
          [](const StopTraining& a) { return fmt::format("StopTraining('{}')", a.reason); },
      },
      action);
}

py::bytes encoded(const std::vector<Action>& actions) {
  const auto bytes = encode(actions);
  return py::bytes(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

// describe, repr and equality (by the consensus's encoding) for one action type.
template <typename T>
void action_methods(py::class_<T>& c) {
  c.def(
      "describe", [](const T& a) { return describe(Action(a)); },
      "What the records call it: 'switch RING', 'resize 6', 'batch 64', 'lr 0.2', 'stop (why)'.");
  c.def("__repr__", [](const T& a) { return repr(Action(a)); });
  c.def("__eq__", [](const T& a, py::handle other) -> py::object {
    const auto b = to_action(other);
    if (!b) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
    return py::bool_(encode({Action(a)}) == encode({*b}));
  });
  c.attr("__hash__") = py::none();
}

// ---- Python policies ----

// A Python object with BasePolicy's methods (kungfu.torch.BasePolicy), as a kf::Policy.
class PythonPolicy final : public Policy {
 public:
  explicit PythonPolicy(py::object impl) : impl_(std::move(impl)) {
    const py::object name = py::getattr(impl_, "name", py::none());
    name_ = name.is_none() ? py::type::of(impl_).attr("__name__").cast<std::string>()
                           : py::str(name).cast<std::string>();
  }

  std::string name() const override { return name_; }

  void before_train(const TrainingState& s) override { call("before_train", s); }
  void before_epoch(const TrainingState& s) override { call("before_epoch", s); }
  void before_step(const TrainingState& s) override { call("before_step", s); }
  void after_epoch(const TrainingState& s) override { call("after_epoch", s); }
  void after_train(const TrainingState& s) override { call("after_train", s); }

  std::vector<double> contribute(const StepMetrics& local, const TrainingState& s) override {
    return numbers(call("contribute", local, s), "contribute");
  }

  void after_step(const StepMetrics& local, std::span<const double> sums, const TrainingState& s,
                  std::vector<Action>& actions) override {
    const py::object out =
        call("after_step", local, py::cast(std::vector<double>(sums.begin(), sums.end())), s);
    if (out.is_none()) return;
    if (!py::isinstance<py::iterable>(out)) {
      throw py::type_error(fmt::format("policy {}: after_step returned {}, not a list of actions",
                                       name_, py::repr(out).cast<std::string>()));
    }
    for (const py::handle item : out)
      actions.push_back(action_from(item, fmt::format("policy {}: after_step", name_)));
  }

  void applied(const Action& action, const TrainingState& s) override {
    call("applied", to_python(action), s);
  }

  std::vector<double> save_state() const override {
    return numbers(call("save_state"), "save_state");
  }

  void load_state(std::span<const double> state) override {
    call("load_state", py::cast(std::vector<double>(state.begin(), state.end())));
  }

 private:
  template <typename... Args>
  py::object call(const char* hook, const Args&... args) const {
    if (PyGILState_Check() == 0) {
      throw std::logic_error(fmt::format(
          "policy {}: {} called without the GIL (Python policies run only on the Python caller's "
          "thread, never on the runtime's loop)",
          name_, hook));
    }
    return impl_.attr(hook)(args...);
  }

  std::vector<double> numbers(const py::object& out, const char* hook) const {
    std::vector<double> v;
    if (out.is_none()) return v;
    try {
      for (const py::handle x : out)
        v.push_back(py::float_(py::reinterpret_borrow<py::object>(x)).cast<double>());
    } catch (const py::error_already_set&) {
      throw py::type_error(fmt::format("policy {}: {} returned {}, not a list of numbers", name_,
                                       hook, py::repr(out).cast<std::string>()));
    }
    return v;
  }

  py::object impl_;
  std::string name_;
};

// ---- the stack ----

// kf::PolicyRunner for Python: its hooks and the agreement round's phases.
class PolicyStack {
 public:
  explicit PolicyStack(const py::sequence& items) {
    std::vector<std::unique_ptr<Policy>> policies;
    for (const py::handle item : items) {
      if (py::isinstance<py::str>(item)) {
        // Throws std::invalid_argument (ValueError) naming the policy and the parameter.
        policies.push_back(make_policy(parse_policy_flag(item.cast<std::string>())));
      } else if (py::hasattr(item, "after_step") && py::hasattr(item, "contribute")) {
        policies.push_back(
            std::make_unique<PythonPolicy>(py::reinterpret_borrow<py::object>(item)));
      } else {
        throw py::type_error(
            fmt::format("kungfu policies: {} is neither a policy's name and parameters (e.g. "
                        "\"adaptive_batch_size:interval=10\") nor a kungfu.torch.BasePolicy",
                        py::repr(item).cast<std::string>()));
      }
    }
    runner_ = PolicyRunner(std::move(policies));
  }

  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& p : runner_.policies())
      out.push_back(p->name());
    return out;
  }

  PolicyRunner& runner() { return runner_; }
  const PolicyRunner& runner() const { return runner_; }

  // (actions, the index of the policy that asked for each, the actions' encoding)
  py::tuple decide(const StepMetrics& local, const std::vector<double>& sums,
                   const TrainingState& state) {
    const PolicyOutcome o = runner_.decide(local, sums, state);
    py::list actions;
    for (const Action& a : o.actions)
      actions.append(to_python(a));
    return py::make_tuple(actions, py::cast(o.asked_by), encoded(o.actions));
  }

 private:
  PolicyRunner runner_;
};

std::vector<Action> actions_from(const py::iterable& items, const char* call) {
  std::vector<Action> out;
  for (const py::handle item : items)
    out.push_back(action_from(item, call));
  return out;
}

py::dict peer_dict(const PeerValues<double>& v) {
  py::dict d;
  for (const auto& e : v)
    d[py::int_(e.peer)] = e.value;
  return d;
}

PeerValues<double> peer_values(const std::map<int, double>& m) {
  PeerValues<double> v;
  for (const auto& [peer, value] : m)
    v.set(peer, value);
  return v;
}

}  // namespace

void bind_policies(py::module_& m) {
  // -- TrainingState --
  py::class_<TrainingState>(m, "TrainingState",
                            "What a policy knows about the job at a hook (policies/policy.h).")
      .def(py::init<>())
      .def_readwrite("step", &TrainingState::step,
                     "The step about to run (before_*) or just finished (after_*).")
      .def_readwrite("epoch", &TrainingState::epoch)
      .def_readwrite("total_steps", &TrainingState::total_steps)
      .def_readwrite("rank", &TrainingState::rank)
      .def_readwrite("cluster_size", &TrainingState::cluster_size)
      .def_readwrite("max_cluster_size", &TrainingState::max_cluster_size,
                     "How many workers the world can hold.")
      .def_readwrite("host_of", &TrainingState::host_of, "The host index of every rank.")
      .def_readwrite("strategy", &TrainingState::strategy, "The current strategy's name.")
      .def_property(
          "configured_strategy",
          [](const TrainingState& s) { return std::string(strategy_name(s.configured_strategy)); },
          [](TrainingState& s, const std::string& name) {
            s.configured_strategy = strategy_from(name, "TrainingState.configured_strategy");
          },
          "The job's configured strategy (what a policy switches back to).")
      .def_readwrite("batch_per_worker", &TrainingState::batch_per_worker)
      .def_readwrite("learning_rate", &TrainingState::learning_rate)
      .def("__repr__", [](const TrainingState& s) {
        return fmt::format(
            "TrainingState(step={}, epoch={}, total_steps={}, rank={}, cluster_size={}, "
            "max_cluster_size={}, strategy='{}', batch_per_worker={}, learning_rate={})",
            s.step, s.epoch, s.total_steps, s.rank, s.cluster_size, s.max_cluster_size, s.strategy,
            s.batch_per_worker, s.learning_rate);
      });

  // -- StepMetrics --
  py::class_<StepMetrics>(
      m, "StepMetrics",
      "What a worker measured during one step (runtime/monitor.h). `values` holds other "
      "monitors by name, e.g. 'gns' (the gradient noise scale adaptive_batch_size reads); it is "
      "a copy: assign a whole dict or call set_value.")
      .def(py::init<>())
      .def_readwrite("step", &StepMetrics::step)
      .def_readwrite("rank", &StepMetrics::rank)
      .def_readwrite("cluster_size", &StepMetrics::cluster_size)
      .def_readwrite("strategy", &StepMetrics::strategy)
      .def_readwrite("batch_per_worker", &StepMetrics::batch_per_worker)
      .def_readwrite("learning_rate", &StepMetrics::learning_rate)
      .def_readwrite("samples", &StepMetrics::samples, "This worker's samples this step.")
      .def_readwrite("step_seconds", &StepMetrics::step_seconds)
      .def_readwrite("compute_seconds", &StepMetrics::compute_seconds)
      .def_readwrite("samples_per_second", &StepMetrics::samples_per_second)
      .def_readwrite("period_seconds", &StepMetrics::period_seconds,
                     "The whole cycle since the previous step ended (elastic_provisioning's "
                     "throughput divides by it).")
      .def_readwrite("collective_bytes", &StepMetrics::collective_bytes)
      .def_readwrite("collective_span_seconds", &StepMetrics::collective_span_seconds)
      .def_readwrite("collective_throughput", &StepMetrics::collective_throughput,
                     "Collective bytes / span, B/s (adaptive_strategy watches it).")
      .def_readwrite("values", &StepMetrics::values)
      .def(
          "set_value",
          [](StepMetrics& s, const std::string& name, double value) { s.values[name] = value; },
          py::arg("name"), py::arg("value"))
      .def_property(
          "latency_seconds", [](const StepMetrics& s) { return peer_dict(s.latency_seconds); },
          [](StepMetrics& s, const std::map<int, double>& v) {
            s.latency_seconds = peer_values(v);
          },
          "The last round trip to each peer measured, {peer: seconds}.")
      .def_property(
          "egress_bps", [](const StepMetrics& s) { return peer_dict(s.egress_bps); },
          [](StepMetrics& s, const std::map<int, double>& v) { s.egress_bps = peer_values(v); })
      .def_property(
          "ingress_bps", [](const StepMetrics& s) { return peer_dict(s.ingress_bps); },
          [](StepMetrics& s, const std::map<int, double>& v) { s.ingress_bps = peer_values(v); })
      .def("__repr__", [](const StepMetrics& s) {
        std::string values;
        for (const auto& [k, v] : s.values)
          values += fmt::format("{}'{}': {}", values.empty() ? "" : ", ", k, v);
        return fmt::format(
            "StepMetrics(step={}, rank={}, samples={}, step_seconds={}, samples_per_second={}, "
            "collective_throughput={}, values={{{}}})",
            s.step, s.rank, s.samples, s.step_seconds, s.samples_per_second,
            s.collective_throughput, values);
      });

  // -- actions --
  py::class_<SwitchStrategy> switch_strategy(
      m, "SwitchStrategy",
      "Switch every worker's strategy: to a named one (SwitchStrategy('RING')) or to a spanning "
      "tree given as a forest (parent of each rank, the root its own parent).");
  switch_strategy
      .def(py::init([](std::optional<std::string> name, std::optional<std::vector<int>> forest,
                       std::optional<std::string> label) {
             if (name.has_value() == forest.has_value()) {
               throw py::value_error("SwitchStrategy: give a strategy name or a forest, not both");
             }
             SwitchStrategy a;
             if (name) {
               a.name = strategy_from(*name, "SwitchStrategy");
               a.label = label.value_or(std::string(strategy_name(*a.name)));
             } else {
               const auto n = static_cast<int>(forest->size());
               for (const int parent : *forest) {
                 if (parent < 0 || parent >= n) {
                   throw py::value_error(fmt::format(
                       "SwitchStrategy: forest parent {} is not a rank of {} workers", parent, n));
                 }
               }
               a.forest = std::move(*forest);
               a.label = label.value_or("FOREST");
             }
             return a;
           }),
           py::arg("name") = py::none(), py::kw_only(), py::arg("forest") = py::none(),
           py::arg("label") = py::none())
      .def_property_readonly("name",
                             [](const SwitchStrategy& a) -> std::optional<std::string> {
                               if (!a.name) return std::nullopt;
                               return std::string(strategy_name(*a.name));
                             })
      .def_readonly("forest", &SwitchStrategy::forest)
      .def_readonly("label", &SwitchStrategy::label);
  action_methods(switch_strategy);

  py::class_<Resize> resize(m, "Resize", "Resize the cluster to `workers` workers.");
  resize.def(py::init([](int workers) { return Resize{.workers = workers}; }), py::arg("workers"))
      .def_readonly("workers", &Resize::workers);
  action_methods(resize);

  py::class_<SetBatchSize> batch(m, "SetBatchSize", "Set every worker's batch size.");
  batch
      .def(py::init([](int per_worker) { return SetBatchSize{.per_worker = per_worker}; }),
           py::arg("per_worker"))
      .def_readonly("per_worker", &SetBatchSize::per_worker);
  action_methods(batch);

  py::class_<SetLearningRate> lr(m, "SetLearningRate", "Set every worker's learning rate.");
  lr.def(py::init([](double value) { return SetLearningRate{.value = value}; }), py::arg("value"))
      .def_readonly("value", &SetLearningRate::value);
  action_methods(lr);

  py::class_<StopTraining> stop(m, "StopTraining", "Stop training on every worker.");
  stop.def(py::init([](std::string reason) { return StopTraining{.reason = std::move(reason)}; }),
           py::arg("reason") = "")
      .def_readonly("reason", &StopTraining::reason);
  action_methods(stop);

  m.def(
      "encode_actions",
      [](const py::iterable& actions) { return encoded(actions_from(actions, "encode_actions")); },
      py::arg("actions"),
      "The canonical bytes of a list of actions (policies/policy.h: kf::encode), what the "
      "agreement round's consensus compares.");
  m.def("policy_names", &policy_names, "The C++ policies' names (policies/registry.h).");

  // -- the stack --
  py::class_<PolicyStack>(
      m, "PolicyStack",
      "kf::PolicyRunner over policies given by name (\"adaptive_batch_size:interval=10\") or as "
      "Python objects (kungfu.torch.BasePolicy), in stack order. Use kungfu.torch.PolicyRunner.")
      .def(py::init<const py::sequence&>(), py::arg("policies"))
      .def_property_readonly("names", &PolicyStack::names)
      .def(
          "before_train",
          [](PolicyStack& p, const TrainingState& s) { p.runner().before_train(s); },
          py::arg("state"))
      .def(
          "before_epoch",
          [](PolicyStack& p, const TrainingState& s) { p.runner().before_epoch(s); },
          py::arg("state"))
      .def(
          "before_step", [](PolicyStack& p, const TrainingState& s) { p.runner().before_step(s); },
          py::arg("state"))
      .def(
          "after_epoch", [](PolicyStack& p, const TrainingState& s) { p.runner().after_epoch(s); },
          py::arg("state"))
      .def(
          "after_train", [](PolicyStack& p, const TrainingState& s) { p.runner().after_train(s); },
          py::arg("state"))
      .def(
          "applied",
          [](PolicyStack& p, const py::handle& action, const TrainingState& s) {
            p.runner().applied(action_from(action, "PolicyStack.applied"), s);
          },
          py::arg("action"), py::arg("state"))
      .def(
          "contributions",
          [](PolicyStack& p, const StepMetrics& metrics, const TrainingState& s) {
            return p.runner().contributions(metrics, s);
          },
          py::arg("metrics"), py::arg("state"),
          "Phase 1: every policy's contribution, concatenated in stack order.")
      .def("decide", &PolicyStack::decide, py::arg("metrics"), py::arg("sums"), py::arg("state"),
           "Phase 2, from the contributions summed over every worker: (actions, the index of "
           "the policy that asked for each, their encoding for the consensus).")
      .def(
          "save_state", [](const PolicyStack& p) { return p.runner().save_state(); },
          "Every policy's history, flattened (count, then length and values per policy).")
      .def(
          "load_state",
          [](PolicyStack& p, const std::vector<double>& state) { p.runner().load_state(state); },
          py::arg("state"))
      .def_static("sums_name", &PolicyRunner::sums_name, py::arg("step"))
      .def_static("agreement_name", &PolicyRunner::agreement_name, py::arg("step"))
      .def_static(
          "disagreement",
          [](int rank, const py::iterable& actions) {
            return PolicyRunner::disagreement(rank, actions_from(actions, "disagreement"))
                .message();
          },
          py::arg("rank"), py::arg("actions"),
          "The message of a round whose consensus found the workers' actions different.");
}

}  // namespace kf::python
