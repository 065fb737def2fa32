// kungfu._core: the runtime's collectives for Python, on raw memory. The package's Python layer
// (kungfu/_collectives.py) turns numpy arrays and torch tensors into (address, count, dtype) and
// hands the array itself over as `keep`: this module holds it until the operation completes,
// whether or not anyone still holds the Operation, so the runtime never writes into freed memory.
//
// Waiting releases the GIL (and wakes every 50 ms for Ctrl-C); callbacks run on the session's
// completion thread with the GIL taken, never on the runtime's loop. Errors are exceptions of
// the kungfu.KungFuError family, chosen by the runtime's error code, with its message (which
// names the operation and, for network faults, the peer).
#include <fmt/format.h>
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <pybind11/numpy.h>

#include "gpu/gpu.h"
#include "launch/peer.h"
#include "python/src/policy_module.h"
#include "python/src/session.h"
#include "runtime/dtype.h"
#include "runtime/reduce.h"
#include "workloads/dataset.h"
#include "workloads/gradient_monitors.h"
#include "workloads/optimizer.h"

namespace py = pybind11;

namespace kf::python {
namespace {

// kf::LocalOptimizer with the number of parameters it was made for.
struct LocalOptimizerHandle {
  std::unique_ptr<kf::LocalOptimizer> optimizer;
  std::size_t parameters = 0;
};

// The exception classes, made once at import.
struct Errors {
  py::object base, invalid_argument, timeout, peer_lost, not_found, protocol, cancelled, device,
      unavailable, not_initialized;
};
Errors* g_errors = nullptr;

[[noreturn]] void raise(const Status& s) {
  py::object type = g_errors->base;
  switch (s.code()) {
    case ErrorCode::invalid_argument:
      type = g_errors->invalid_argument;
      break;
    case ErrorCode::timeout:
      type = g_errors->timeout;
      break;
    case ErrorCode::peer_lost:
      type = g_errors->peer_lost;
      break;
    case ErrorCode::not_found:
      type = g_errors->not_found;
      break;
    case ErrorCode::protocol:
      type = g_errors->protocol;
      break;
    case ErrorCode::cancelled:
      type = g_errors->cancelled;
      break;
    case ErrorCode::device:
      type = g_errors->device;
      break;
    case ErrorCode::unavailable:
      type = g_errors->unavailable;
      break;
    case ErrorCode::ok:
      break;
  }
  PyErr_SetString(type.ptr(), s.to_string().c_str());
  throw py::error_already_set();
}

// Python objects whose last C++ reference went on a thread without the GIL (the completion
// thread, once an operation no longer needs its memory). They are released by the next call into
// this module, which holds the GIL: taking the GIL on the completion thread for every operation
// would make each collective wait for the interpreter's switch interval.
class Graveyard {
 public:
  void bury(py::object* p) {
    std::lock_guard<std::mutex> lock(mu_);
    dead_.push_back(p);
  }
  // With the GIL held.
  void drain() {
    std::vector<py::object*> dead;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (dead_.empty()) return;
      dead.swap(dead_);
    }
    for (py::object* p : dead)
      delete p;
  }

 private:
  std::mutex mu_;
  std::vector<py::object*> dead_;
};
Graveyard* g_graveyard = nullptr;

// A Python object kept alive by C++ until the last owner lets go, on any thread.
using KeptObject = std::shared_ptr<py::object>;
KeptObject hold(py::object obj) {
  return KeptObject(new py::object(std::move(obj)), [](py::object* p) { g_graveyard->bury(p); });
}

// What Python callbacks need instead: the GIL, taken on whichever thread drops them.
using GilObject = std::shared_ptr<py::object>;
GilObject hold_with_gil(py::object obj) {
  return GilObject(new py::object(std::move(obj)), [](py::object* p) {
    py::gil_scoped_acquire gil;
    delete p;
  });
}

DType dtype_from(const std::string& name) {
  const auto t = parse_dtype(name);
  if (!t) throw py::value_error("kungfu: unknown dtype '" + name + "'");
  return *t;
}

ReduceOp op_from(const std::string& name) {
  const auto op = parse_reduce_op(name);
  if (!op) {
    throw py::value_error("kungfu: unknown reduce op '" + name +
                          "' (known: sum, min, max, prod, avg)");
  }
  return *op;
}

BufferView view(std::uintptr_t address, std::size_t count, const std::string& dtype) {
  return BufferView(reinterpret_cast<std::byte*>(address), count, dtype_from(dtype));
}

// What Python holds of an operation.
class PyOperation {
 public:
  // How often a wait looks for a signal (Ctrl-C) while the operation is pending.
  static constexpr Duration kSignalLook = std::chrono::milliseconds(50);

  PyOperation(OperationPtr op, py::object keep, std::shared_ptr<bool> agreed = nullptr,
              std::shared_ptr<kf::Blob> blob = nullptr)
      : op_(std::move(op)), agreed_(std::move(agreed)), blob_(std::move(blob)) {
    // The memory stays alive until the operation completes, even if this wrapper goes first.
    op_->release_when_done(hold(std::move(keep)));
  }

  // Raises the operation's error; returns once it completed well. Signals are looked at every
  // kSignalLook. (The blocking calls wait in wait_blocking instead, on kf::Peer's own path.)
  void wait() {
    for (;;) {
      std::optional<Status> s;
      {
        py::gil_scoped_release release;
        s = wait_slice(kSignalLook);
      }
      if (s) {
        if (!s->ok()) raise(*s);
        return;
      }
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    }
  }

  // True once complete (raising its error if it failed); false when `seconds` passed first.
  bool wait_for(double seconds) {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(std::max(0.0, seconds));
    for (;;) {
      const auto left =
          std::chrono::duration_cast<Duration>(deadline - std::chrono::steady_clock::now());
      std::optional<Status> s;
      {
        py::gil_scoped_release release;
        s = wait_slice(std::clamp(left, Duration::zero(), kSignalLook));
      }
      if (s) {
        if (!s->ok()) raise(*s);
        return true;
      }
      if (left <= Duration::zero()) return false;
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    }
  }

  bool ready() const { return op_->ready(); }

  // Waits up to `slice` for the operation without the GIL.
  std::optional<Status> wait_slice(Duration slice) const { return op_->wait_for(slice); }

  // fn(error) once complete, on the completion thread: error is None, or the exception the
  // operation would raise.
  void add_done_callback(py::object fn) {
    op_->then([fn = hold_with_gil(std::move(fn))](const Status& s) {
      py::gil_scoped_acquire gil;
      py::object error = py::none();
      if (!s.ok()) {
        try {
          raise(s);
        } catch (py::error_already_set& e) {
          error = e.value();
        }
      }
      try {
        (*fn)(error);
      } catch (py::error_already_set& e) {
        e.discard_as_unraisable("kungfu: a done-callback");
      }
    });
  }

  bool agreed() const {
    if (!agreed_) throw py::value_error("kungfu: only a consensus has an agreement");
    if (!op_->ready()) throw py::value_error("kungfu: " + op_->what() + " is not complete");
    return *agreed_;
  }

  const std::string& what() const { return op_->what(); }

  // A request's blob: (version, bytes).
  py::tuple blob() const {
    if (!blob_) throw py::value_error("kungfu: only a request has a blob");
    if (!op_->ready()) throw py::value_error("kungfu: " + op_->what() + " is not complete");
    const auto& bytes = blob_->bytes;
    return py::make_tuple(
        blob_->version, bytes
                            ? py::bytes(reinterpret_cast<const char*>(bytes->data()), bytes->size())
                            : py::bytes());
  }

 private:
  OperationPtr op_;
  std::shared_ptr<bool> agreed_;
  std::shared_ptr<kf::Blob> blob_;
};

// Blocking calls whose caller stopped waiting before they completed (Ctrl-C, or the session
// closing): the runtime may still read or write their memory, so the arrays stay alive until
// then. Touched only with the GIL held; every call into this module lets go of what is done.
class Parked {
 public:
  void park(kf::Handle h, py::object keep) { calls_.push_back({std::move(h), std::move(keep)}); }
  void drain() {
    if (calls_.empty()) return;
    std::erase_if(calls_, [](const Call& c) { return c.handle.ready(); });
  }

 private:
  struct Call {
    kf::Handle handle;
    py::object keep;
  };
  std::vector<Call> calls_;
};
Parked* g_parked = nullptr;

// Session::get(), raising kungfu.NotInitializedError before init().
Session& session() {
  g_graveyard->drain();
  g_parked->drain();
  if (!Session::initialized()) {
    PyErr_SetString(g_errors->not_initialized.ptr(),
                    "kungfu is not initialized: call kungfu.init() first");
    throw py::error_already_set();
  }
  return Session::get();
}

// Waits for a blocking call started through the session (Session::start_blocking_*) without the
// GIL, looking for signals every PyOperation::kSignalLook; raises its error. A signal's exception,
// or the session closing, ends the wait early: the call then keeps what keep() returns (its
// arrays) alive until it completes.
template <typename Keep>
void wait_blocking(const kf::Handle& h, Keep&& keep, const char* call) {
  for (;;) {
    std::optional<Status> s;
    {
      py::gil_scoped_release release;
      s = Session::wait_for(h, PyOperation::kSignalLook);
    }
    if (s) {
      if (!s->ok()) raise(*s);
      return;
    }
    if (Session::closing()) {
      g_parked->park(h, keep());
      raise(Status(ErrorCode::cancelled, fmt::format("{}: kungfu shut down", call)));
    }
    if (PyErr_CheckSignals() != 0) {
      g_parked->park(h, keep());
      throw py::error_already_set();
    }
  }
}

// The same, for a call whose arrays the caller gives as `keep`.
void wait_blocking(const kf::Handle& h, py::object keep, const char* call) {
  wait_blocking(
      h, [&keep] { return std::move(keep); }, call);
}

// Where an allgather or a gather at `out` puts every peer's `count` elements, in rank order.
BufferView stacked_view(const Session& s, std::uintptr_t out, std::size_t count,
                        const std::string& dtype) {
  return view(out, count * static_cast<std::size_t>(s.size()), dtype);
}

// The runtime's dtype of a numpy dtype in native byte order, if it has one.
std::optional<DType> dtype_of_numpy(const py::dtype& d) {
  struct Known {
    char kind;  // numpy's: 'f' floating, 'i' signed, 'u' unsigned
    py::ssize_t size;
    DType type;
  };
  static constexpr std::array<Known, 11> kKnown = {{{'f', 2, DType::f16},
                                                    {'f', 4, DType::f32},
                                                    {'f', 8, DType::f64},
                                                    {'i', 1, DType::i8},
                                                    {'i', 2, DType::i16},
                                                    {'i', 4, DType::i32},
                                                    {'i', 8, DType::i64},
                                                    {'u', 1, DType::u8},
                                                    {'u', 2, DType::u16},
                                                    {'u', 4, DType::u32},
                                                    {'u', 8, DType::u64}}};
  const char order = d.byteorder();
  if (order != '=' && order != '|' && !(order == '<' && std::endian::native == std::endian::little))
    return std::nullopt;
  for (const Known& k : kKnown)
    if (k.kind == d.kind() && k.size == d.itemsize()) return k.type;
  return std::nullopt;
}

// kungfu.allreduce of a numpy array in one call: the array as it is (C-contiguous, a dtype the
// runtime has, writable when in place), reduced into itself or into a new array of its shape,
// which it returns. NotImplemented for anything else (a copy to make, an unknown op, read-only
// memory in place), which the Python layer's general path then takes, with its errors.
py::object allreduce_array(const py::object& x, const std::string& op_name, bool inplace,
                           std::string name) {
  if (!py::isinstance<py::array>(x)) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
  const auto a = py::reinterpret_borrow<py::array>(x);
  const auto type = dtype_of_numpy(a.dtype());
  // The Python layer's names only (kungfu._collectives._OPS; the runtime knows aliases too).
  constexpr std::array<std::string_view, 5> kOps = {"sum", "min", "max", "prod", "avg"};
  const auto op =
      std::ranges::find(kOps, op_name) != kOps.end() ? parse_reduce_op(op_name) : std::nullopt;
  if (!type || !op || !(a.flags() & py::array::c_style) || (inplace && !a.writeable()))
    return py::reinterpret_borrow<py::object>(Py_NotImplemented);
  Session& s = session();
  py::array out =
      inplace ? a : py::array(a.dtype(), std::vector<py::ssize_t>(a.shape(), a.shape() + a.ndim()));
  const auto count = static_cast<std::size_t>(a.size());
  const ConstBufferView input(static_cast<const std::byte*>(a.data()), count, *type);
  const BufferView output(static_cast<std::byte*>(out.mutable_data()), count, *type);
  const kf::Handle h = s.start_blocking_allreduce(input, output, *op, std::move(name));
  wait_blocking(
      h, [&] { return py::make_tuple(a, out); }, "kungfu.allreduce");
  return out;
}

void init(double timeout_seconds, std::optional<std::string> strategy,
          std::optional<std::string> device_strategy) {
  SessionOptions o;
  if (device_strategy) {
    if (!kf::parse_device_strategy(*device_strategy)) {
      throw py::value_error("kungfu.init: unknown device strategy '" + *device_strategy +
                            "' (known: " + kf::device_strategy_names() + ")");
    }
    o.device_strategy = *device_strategy;
  }
  o.timeout = std::chrono::duration_cast<Duration>(std::chrono::duration<double>(timeout_seconds));
  if (strategy) {
    const auto s = parse_strategy_name(*strategy);
    if (!s) throw py::value_error("kungfu.init: unknown strategy '" + *strategy + "'");
    o.strategy = *s;
  }
  py::gil_scoped_release release;  // connecting to the peers takes a while
  Session::init(o);
}

}  // namespace
}  // namespace kf::python

PYBIND11_MODULE(_core, m) {
  using namespace kf::python;
  using kf::ConstBufferView;
  m.doc() = "The KungFu runtime's collectives on raw memory (use the kungfu package instead).";

  static Errors errors;
  g_errors = &errors;
  static Graveyard graveyard;
  g_graveyard = &graveyard;
  // Never destroyed: what it holds must not be released after the interpreter has gone.
  g_parked = new Parked();  // NOLINT(cppcoreguidelines-owning-memory)
  errors.base = py::reinterpret_borrow<py::object>(
      PyErr_NewExceptionWithDoc("kungfu.KungFuError",
                                "A collective or the runtime failed; the message names the "
                                "operation and, for network faults, the peer.",
                                PyExc_RuntimeError, nullptr));
  const auto sub = [&](const char* name, const char* doc, py::object also = py::none()) {
    py::object bases = also.is_none() ? errors.base : py::make_tuple(errors.base, also);
    return py::reinterpret_steal<py::object>(PyErr_NewExceptionWithDoc(
        (std::string("kungfu.") + name).c_str(), doc, bases.ptr(), nullptr));
  };
  errors.invalid_argument = sub("InvalidArgumentError", "A call the runtime cannot carry out.",
                                py::reinterpret_borrow<py::object>(PyExc_ValueError));
  errors.timeout = sub("CollectiveTimeoutError", "A collective did not finish in time.",
                       py::reinterpret_borrow<py::object>(PyExc_TimeoutError));
  errors.peer_lost = sub("PeerLostError", "A peer the collective needs went away.");
  errors.not_found = sub("NotFoundError", "A peer does not hold the blob asked for.");
  errors.protocol = sub("ProtocolError", "A peer sent what the protocol does not allow.");
  errors.cancelled = sub("CancelledError", "The runtime shut down with the collective pending.");
  errors.device = sub("DeviceError", "A device (GPU) call failed.");
  errors.unavailable =
      sub("UnavailableError", "A service the call needs (kfrun's config server) is unreachable.");
  errors.not_initialized = sub("NotInitializedError", "kungfu.init() has not been called.");
  for (const auto& [name, e] : {std::pair{"KungFuError", errors.base},
                                {"InvalidArgumentError", errors.invalid_argument},
                                {"CollectiveTimeoutError", errors.timeout},
                                {"PeerLostError", errors.peer_lost},
                                {"NotFoundError", errors.not_found},
                                {"ProtocolError", errors.protocol},
                                {"CancelledError", errors.cancelled},
                                {"DeviceError", errors.device},
                                {"UnavailableError", errors.unavailable},
                                {"NotInitializedError", errors.not_initialized}}) {
    m.attr(name) = e;
  }

  m.def("init", &init, py::arg("timeout_seconds") = 30.0, py::arg("strategy") = py::none(),
        py::arg("device_strategy") = py::none(),
        "Starts this process's runtime (identity from kfrun, torchrun, mpirun or srun).");
  m.def(
      "shutdown",
      [] {
        {
          py::gil_scoped_release release;
          Session::shutdown();
        }
        g_graveyard->drain();
      },
      "Stops the runtime: pending collectives fail as cancelled, connections close in order.");
  m.def("initialized", &Session::initialized);
  m.def("rank", [] { return session().rank(); });
  m.def("size", [] { return session().size(); });
  m.def("local_rank", [] { return session().local_rank(); });
  m.def("local_size", [] { return session().local_size(); });
  m.def("strategy", [] { return session().strategy(); });
  m.def(
      "named_strategy", [] { return session().named_strategy(); },
      "The named strategy in use, or the one a forest switch replaced.");
  m.def(
      "set_strategy",
      [](const std::string& name) {
        const auto s = kf::parse_strategy_name(name);
        if (!s) throw py::value_error("kungfu.set_strategy: unknown strategy '" + name + "'");
        session().set_strategy(*s);
      },
      py::arg("name"));
  m.def(
      "set_strategy_forest",
      [](std::vector<int> forest, std::string label) {
        const kf::Status s = session().set_strategy_forest(std::move(forest), std::move(label));
        if (!s.ok()) raise(s);
      },
      py::arg("forest"), py::arg("label"),
      "This worker's collectives go over a spanning tree of the current cluster (forest[i] = "
      "parent of i); agreeing on it is the caller's business.");
  m.def(
      "host_of", [] { return session().host_of(); },
      "The host index of every rank, hosts numbered by first appearance.");
  m.def(
      "resize",
      [](std::optional<int> workers) {
        if (workers && *workers < 1)
          throw py::value_error(fmt::format("kungfu.resize: {} workers: at least 1", *workers));
        Session& s = session();
        Session::Resized r;
        {
          py::gil_scoped_release release;
          r = s.resize(workers);
        }
        if (!r.status.ok()) raise(r.status);
        return py::make_tuple(r.changed, r.detached);
      },
      py::arg("workers") = py::none(),
      "Every worker: resize the cluster (to `workers`, proposed by rank 0; or, when None, to what "
      "the config server holds). Returns (changed, detached).");
  m.def(
      "propose_new_size",
      [](int workers) {
        if (workers < 1)
          throw py::value_error(
              fmt::format("kungfu.propose_new_size: {} workers: at least 1", workers));
        Session& s = session();
        kf::Status status;
        {
          py::gil_scoped_release release;
          status = s.propose_new_size(workers);
        }
        if (!status.ok()) raise(status);
      },
      py::arg("workers"));
  m.def("elastic", [] { return session().elastic(); });
  m.def("joining", [] { return session().joining(); });
  m.def("detached", [] { return session().detached(); });

  py::class_<PyOperation>(m, "Operation",
                          "A collective in flight: wait(), wait_for(seconds), ready().")
      .def("wait", &PyOperation::wait)
      .def("wait_for", &PyOperation::wait_for, py::arg("seconds"))
      .def("ready", &PyOperation::ready)
      .def("add_done_callback", &PyOperation::add_done_callback, py::arg("fn"))
      .def_property_readonly("agreed", &PyOperation::agreed)
      .def_property_readonly("what", &PyOperation::what)
      .def_property_readonly("blob", &PyOperation::blob);

  py::class_<kf::GnsEstimator>(
      m, "GnsEstimator", "The gradient noise scale estimator (workloads/gradient_monitors.h).")
      .def(py::init<double>(), py::arg("ema") = 0.9)
      .def("observe", &kf::GnsEstimator::observe, py::arg("small_norm2"), py::arg("big_norm2"),
           py::arg("b_small"), py::arg("b_big"))
      .def("noise_scale", &kf::GnsEstimator::noise_scale)
      .def_property_readonly("true_norm2", &kf::GnsEstimator::true_norm2)
      .def_property_readonly("noise_trace", &kf::GnsEstimator::noise_trace);
  py::class_<kf::ShardSampler>(
      m, "ShardSampler",
      "kfsim's sampler (workloads/dataset.h): every epoch a permutation of the data set from seed "
      "and epoch, of which rank r takes positions r, r + size, ...; batches continue where the "
      "last one ended.")
      .def(py::init<std::size_t, int, int, std::uint64_t, std::uint64_t>(), py::arg("dataset_size"),
           py::arg("rank"), py::arg("size"), py::arg("seed"), py::arg("cursor") = 0)
      .def("next_batch", &kf::ShardSampler::next_batch, py::arg("batch_size"))
      .def_property_readonly("cursor", &kf::ShardSampler::cursor)
      .def_property_readonly("epoch", &kf::ShardSampler::epoch)
      .def_property_readonly("shard_size", &kf::ShardSampler::shard_size);
  py::class_<LocalOptimizerHandle>(
      m, "LocalOptimizer",
      "kfsim's local update rule (workloads/optimizer.h): sgd (heavy-ball momentum) or adam, on "
      "one flat float32 vector of parameters.")
      .def(py::init([](const std::string& name, std::size_t parameters, double momentum,
                       double beta1, double beta2, double epsilon) {
             kf::OptimizerOptions options{.name = name,
                                          .momentum = momentum,
                                          .beta1 = beta1,
                                          .beta2 = beta2,
                                          .epsilon = epsilon};
             try {
               return LocalOptimizerHandle{kf::make_local_optimizer(options, parameters),
                                           parameters};
             } catch (const std::invalid_argument& e) {
               throw py::value_error(e.what());
             }
           }),
           py::arg("name"), py::arg("parameters"), py::arg("momentum") = 0.9,
           py::arg("beta1") = 0.9, py::arg("beta2") = 0.999, py::arg("epsilon") = 1e-8)
      .def_property_readonly("name",
                             [](const LocalOptimizerHandle& h) { return h.optimizer->name(); })
      .def(
          "step",
          [](LocalOptimizerHandle& h, py::array_t<float, py::array::c_style> parameters,
             py::array_t<float, py::array::c_style> gradient, double lr) {
            if (static_cast<std::size_t>(parameters.size()) != h.parameters ||
                static_cast<std::size_t>(gradient.size()) != h.parameters) {
              throw py::value_error(fmt::format(
                  "LocalOptimizer.step: {} parameters and {} gradients, the optimizer has {}",
                  parameters.size(), gradient.size(), h.parameters));
            }
            h.optimizer->step(std::span<float>(parameters.mutable_data(), h.parameters),
                              std::span<const float>(gradient.data(), h.parameters), lr);
          },
          py::arg("parameters").noconvert(), py::arg("gradient").noconvert(), py::arg("lr"),
          "parameters -= update(gradient), in place (float32 C-contiguous arrays).")
      .def(
          "state",
          [](py::object self) {
            auto& h = self.cast<LocalOptimizerHandle&>();
            const std::span<float> s = h.optimizer->state();
            // A writable view of the optimizer's own state that keeps the optimizer alive.
            return py::array_t<float>({s.size()}, {sizeof(float)}, s.data(), self);
          },
          "The state (momentum; Adam's moments and step count) as a writable float32 view.");
  m.def(
      "gradient_variance",
      [](py::array_t<float, py::array::c_style | py::array::forcecast> sum,
         py::array_t<float, py::array::c_style | py::array::forcecast> squares, int workers) {
        if (sum.size() != squares.size())
          throw py::value_error("gradient_variance: the sums differ in size");
        return kf::gradient_variance(std::span<const float>(sum.data(), sum.size()),
                                     std::span<const float>(squares.data(), squares.size()),
                                     workers);
      },
      py::arg("sum"), py::arg("squares"), py::arg("workers"));

  m.def(
      "allreduce",
      [](std::uintptr_t in, std::uintptr_t out, std::size_t count, const std::string& dtype,
         const std::string& op, const std::string& name, py::object keep) {
        const auto input = view(in, count, dtype);
        return PyOperation(session().allreduce(input, view(out, count, dtype), op_from(op), name),
                           std::move(keep));
      },
      py::arg("input"), py::arg("output"), py::arg("count"), py::arg("dtype"), py::arg("op"),
      py::arg("name"), py::arg("keep"));
  m.def("allreduce_array", &allreduce_array, py::arg("x"), py::arg("op"), py::arg("inplace"),
        py::arg("name"),
        "kungfu.allreduce of a numpy array as it is, blocking; NotImplemented where it would need "
        "a copy or would raise.");
  m.def(
      "allreduce_wait",
      [](std::uintptr_t in, std::uintptr_t out, std::size_t count, const std::string& dtype,
         const std::string& op, std::string name, py::object keep) {
        const auto input = view(in, count, dtype);
        const kf::Handle h = session().start_blocking_allreduce(input, view(out, count, dtype),
                                                                op_from(op), std::move(name));
        wait_blocking(h, std::move(keep), "kungfu.allreduce");
      },
      py::arg("input"), py::arg("output"), py::arg("count"), py::arg("dtype"), py::arg("op"),
      py::arg("name"), py::arg("keep"),
      "A blocking allreduce on raw memory; `keep` stays alive while the runtime may use it.");
  m.def(
      "broadcast_wait",
      [](std::uintptr_t data, std::size_t count, const std::string& dtype, int root,
         std::string name, py::object keep) {
        const kf::Handle h =
            session().start_blocking_broadcast(view(data, count, dtype), root, std::move(name));
        wait_blocking(h, std::move(keep), "kungfu.broadcast");
      },
      py::arg("data"), py::arg("count"), py::arg("dtype"), py::arg("root"), py::arg("name"),
      py::arg("keep"),
      "A blocking broadcast on raw memory; `keep` stays alive while the runtime may use it.");
  m.def(
      "reduce_wait",
      [](std::uintptr_t in, std::uintptr_t out, std::size_t count, const std::string& dtype,
         const std::string& op, int root, std::string name, py::object keep) {
        const kf::Handle h = session().start_blocking_reduce(
            view(in, count, dtype), view(out, count, dtype), op_from(op), root, std::move(name));
        wait_blocking(h, std::move(keep), "kungfu.reduce");
      },
      py::arg("input"), py::arg("output"), py::arg("count"), py::arg("dtype"), py::arg("op"),
      py::arg("root"), py::arg("name"), py::arg("keep"),
      "A blocking reduce on raw memory; `keep` stays alive while the runtime may use it.");
  m.def(
      "allgather_wait",
      [](std::uintptr_t in, std::uintptr_t out, std::size_t count, const std::string& dtype,
         std::string name, py::object keep) {
        Session& s = session();
        const kf::Handle h = s.start_blocking_allgather(
            view(in, count, dtype), stacked_view(s, out, count, dtype), std::move(name));
        wait_blocking(h, std::move(keep), "kungfu.allgather");
      },
      py::arg("input"), py::arg("output"), py::arg("count"), py::arg("dtype"), py::arg("name"),
      py::arg("keep"),
      "A blocking allgather on raw memory; `keep` stays alive while the runtime may use it.");
  m.def(
      "gather_wait",
      [](std::uintptr_t in, std::uintptr_t out, std::size_t count, const std::string& dtype,
         int root, std::string name, py::object keep) {
        Session& s = session();
        const kf::Handle h = s.start_blocking_gather(
            view(in, count, dtype), stacked_view(s, out, count, dtype), root, std::move(name));
        wait_blocking(h, std::move(keep), "kungfu.gather");
      },
      py::arg("input"), py::arg("output"), py::arg("count"), py::arg("dtype"), py::arg("root"),
      py::arg("name"), py::arg("keep"),
      "A blocking gather on raw memory; `keep` stays alive while the runtime may use it.");
  m.def(
      "consensus_wait",
      [](std::uintptr_t data, std::size_t bytes, std::string name, py::object keep) {
        ConstBufferView v(reinterpret_cast<const std::byte*>(data), bytes, kf::DType::u8);
        auto agreed = std::make_shared<bool>(false);
        const kf::Handle h = session().start_blocking_consensus(v, agreed, std::move(name));
        wait_blocking(h, std::move(keep), "kungfu.consensus");
        return *agreed;
      },
      py::arg("data"), py::arg("bytes"), py::arg("name"), py::arg("keep"),
      "A blocking consensus: are the bytes the same on every peer?");
  m.def(
      "barrier_wait",
      [](std::string name) {
        const kf::Handle h = session().start_blocking_barrier(std::move(name));
        wait_blocking(h, py::none(), "kungfu.barrier");
      },
      py::arg("name"), "A blocking barrier.");
  m.def(
      "device_allreduce",
      [](std::uintptr_t in, std::uintptr_t out, std::size_t count, const std::string& dtype,
         const std::string& op, int device, std::uintptr_t stream, const std::string& name,
         py::object keep) {
        Session& s = session();
        const kf::DType type = view(in, count, dtype).dtype();
        if (device < 0) device = kf::gpu_default_device(s.local_rank());
        OperationPtr started;
        {
          py::gil_scoped_release release;  // waits for the producer's stream
          started =
              s.device_allreduce(reinterpret_cast<const void*>(in), reinterpret_cast<void*>(out),
                                 count, type, op_from(op), device, stream, name);
        }
        return PyOperation(std::move(started), std::move(keep));
      },
      py::arg("input"), py::arg("output"), py::arg("count"), py::arg("dtype"), py::arg("op"),
      py::arg("device"), py::arg("stream"), py::arg("name"), py::arg("keep"));
  m.def(
      "gpu_unavailable", [] { return kf::gpu_unavailable(); },
      "None when this process can use a CUDA device, else why not.");
  m.def(
      "broadcast",
      [](std::uintptr_t data, std::size_t count, const std::string& dtype, int root,
         const std::string& name, py::object keep) {
        const auto buffer = view(data, count, dtype);
        return PyOperation(session().broadcast(buffer, root, name), std::move(keep));
      },
      py::arg("data"), py::arg("count"), py::arg("dtype"), py::arg("root"), py::arg("name"),
      py::arg("keep"));
  m.def(
      "reduce",
      [](std::uintptr_t in, std::uintptr_t out, std::size_t count, const std::string& dtype,
         const std::string& op, int root, const std::string& name, py::object keep) {
        const auto input = view(in, count, dtype);
        return PyOperation(
            session().reduce(input, view(out, count, dtype), op_from(op), root, name),
            std::move(keep));
      },
      py::arg("input"), py::arg("output"), py::arg("count"), py::arg("dtype"), py::arg("op"),
      py::arg("root"), py::arg("name"), py::arg("keep"));
  m.def(
      "allgather",
      [](std::uintptr_t in, std::uintptr_t out, std::size_t count, const std::string& dtype,
         const std::string& name, py::object keep) {
        auto& s = session();
        const auto output = stacked_view(s, out, count, dtype);
        return PyOperation(s.allgather(view(in, count, dtype), output, name), std::move(keep));
      },
      py::arg("input"), py::arg("output"), py::arg("count"), py::arg("dtype"), py::arg("name"),
      py::arg("keep"));
  m.def(
      "gather",
      [](std::uintptr_t in, std::uintptr_t out, std::size_t count, const std::string& dtype,
         int root, const std::string& name, py::object keep) {
        auto& s = session();
        const auto output = stacked_view(s, out, count, dtype);
        return PyOperation(s.gather(view(in, count, dtype), output, root, name), std::move(keep));
      },
      py::arg("input"), py::arg("output"), py::arg("count"), py::arg("dtype"), py::arg("root"),
      py::arg("name"), py::arg("keep"));
  m.def(
      "barrier",
      [](const std::string& name) { return PyOperation(session().barrier(name), py::none()); },
      py::arg("name"));
  m.def(
      "save",
      [](const std::string& name, std::uintptr_t data, std::size_t bytes) {
        ConstBufferView v(reinterpret_cast<const std::byte*>(data), bytes, kf::DType::u8);
        return session().save(name, v);
      },
      py::arg("name"), py::arg("data"), py::arg("bytes"),
      "Keeps a copy of the bytes as the next version of `name` in this peer's store.");
  m.def(
      "request",
      [](int peer, const std::string& name, std::uint64_t version) {
        auto blob = std::make_shared<kf::Blob>();
        return PyOperation(session().request(peer, name, version, blob), py::none(), nullptr, blob);
      },
      py::arg("peer"), py::arg("name"), py::arg("version") = 0,
      "Starts fetching a peer's blob; the Operation's `blob` holds it once complete.");
  m.def(
      "consensus",
      [](std::uintptr_t data, std::size_t bytes, const std::string& name, py::object keep) {
        auto agreed = std::make_shared<bool>(false);
        ConstBufferView v(reinterpret_cast<const std::byte*>(data), bytes, kf::DType::u8);
        return PyOperation(session().consensus(v, agreed, name), std::move(keep), agreed);
      },
      py::arg("data"), py::arg("bytes"), py::arg("name"), py::arg("keep"));

  bind_policies(m);  // policy_module.cc
}
