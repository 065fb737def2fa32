// kungfu.torch._c10d: the torch.distributed backend "kungfu", a c10d process group over the
// process's one runtime (python/src/session.h). torch.distributed calls it for allreduce (sum,
// avg, min, max, product), broadcast, reduce, allgather, gather and barrier on CPU tensors; each
// returns a Work whose future completes with the output tensors, never on the runtime's loop: on
// the thread that waits for the Work, or else on kungfu's completion thread, so
// DistributedDataParallel's comm hooks run as with Gloo. Calls
// torch.distributed makes on every rank in the same order; the backend names the collectives in
// that order. Anything else raises a c10::Error naming the call.
//
// The base class is c10d::ProcessGroup in torch 1.x and c10d::Backend from torch 2.0, where the
// collectives moved; the same source builds against both (TORCH_VERSION_MAJOR).
#include <torch/csrc/api/include/torch/version.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#endif

#include <fmt/format.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "python/src/session.h"
#include "runtime/dtype.h"

namespace kf::python {
namespace {

#if TORCH_VERSION_MAJOR >= 2
using Base = c10d::Backend;
#else
using Base = c10d::ProcessGroup;
#endif

DType dtype_of(const at::Tensor& t, const char* call) {
  switch (t.scalar_type()) {
    case at::kByte:
      return DType::u8;
    case at::kChar:
      return DType::i8;
    case at::kShort:
      return DType::i16;
    case at::kInt:
      return DType::i32;
    case at::kLong:
      return DType::i64;
    case at::kHalf:
      return DType::f16;
    case at::kBFloat16:
      return DType::bf16;
    case at::kFloat:
      return DType::f32;
    case at::kDouble:
      return DType::f64;
    default:
      TORCH_CHECK(false, "kungfu backend: ", call, ": dtype ", t.scalar_type(),
                  " is not one the runtime has");
  }
}

ReduceOp op_of(const c10d::ReduceOp& op, const char* call) {
  switch (static_cast<c10d::ReduceOp::RedOpType>(op)) {
    case c10d::ReduceOp::SUM:
      return ReduceOp::sum;
    case c10d::ReduceOp::AVG:
      return ReduceOp::avg;
    case c10d::ReduceOp::PRODUCT:
      return ReduceOp::prod;
    case c10d::ReduceOp::MIN:
      return ReduceOp::min;
    case c10d::ReduceOp::MAX:
      return ReduceOp::max;
    default:
      TORCH_CHECK(false, "kungfu backend: ", call,
                  ": reduce op not supported (sum, avg, min, max, product are)");
  }
}

// A CPU tensor's memory as the runtime sees it; the tensor must be dense and contiguous.
BufferView view_of(const at::Tensor& t, const char* call) {
  TORCH_CHECK(t.device().is_cpu(), "kungfu backend: ", call, ": a ", t.device(),
              " tensor; the kungfu backend takes CPU tensors");
  TORCH_CHECK(t.is_contiguous() && !t.is_sparse(), "kungfu backend: ", call,
              ": the tensor must be dense and contiguous");
  return BufferView(static_cast<std::byte*>(t.data_ptr()), static_cast<std::size_t>(t.numel()),
                    dtype_of(t, call));
}

const at::Tensor& only(const std::vector<at::Tensor>& tensors, const char* call) {
  TORCH_CHECK(tensors.size() == 1, "kungfu backend: ", call, ": one tensor per call, got ",
              tensors.size());
  return tensors.front();
}

// What marks a Work's future once its collective completes: the tensors it fills (and those it
// reads, kept alive until then), a step to run first (copying a staging buffer out), and the
// future. Whoever runs it first does it: a thread in Work::wait, Work::isCompleted, or, for a
// future DDP chains on (getFuture) or a Work dropped unfinished, kungfu's completion thread.
class Settle {
 public:
  Settle(std::vector<at::Tensor> outputs, std::vector<at::Tensor> keep,
         std::function<void()> finish_step)
      : outputs_(std::move(outputs)),
        keep_(std::move(keep)),
        finish_step_(std::move(finish_step)),
        future_(c10::make_intrusive<c10::ivalue::Future>(
            c10::ListType::create(c10::TensorType::get()))) {}

  const c10::intrusive_ptr<c10::ivalue::Future>& future() const { return future_; }
  const std::vector<at::Tensor>& outputs() const { return outputs_; }

  // Marks the future with the collective's outcome `s`, once: false when another thread has
  // taken it (the future is then marked, or about to be).
  bool run(const Status& s) {
    if (claimed_.exchange(true, std::memory_order_acq_rel)) return false;
    if (!s.ok()) {
      future_->setError(std::make_exception_ptr(std::runtime_error(s.to_string())));
    } else {
      if (finish_step_) finish_step_();
      future_->markCompleted(c10::IValue(outputs_));
    }
    keep_.clear();
    return true;
  }

 private:
  std::vector<at::Tensor> outputs_;
  std::vector<at::Tensor> keep_;
  std::function<void()> finish_step_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::atomic<bool> claimed_{false};
};

// One collective's Work. A wait runs the runtime's loop on the waiting thread where a C++
// caller's would (Operation::wait) and marks the future itself, so a torch.distributed call
// waited for at once crosses no thread; the completion thread marks it only for a future asked
// for (DDP's comm hooks chain on it there, as with Gloo's worker threads) or a Work dropped
// before its collective completed, which then keeps the tensors alive until it does.
class KungFuWork : public c10d::Work {
 public:
  KungFuWork(OperationPtr op, c10d::OpType type, std::vector<at::Tensor> outputs,
             std::vector<at::Tensor> keep, std::function<void()> finish_step = {})
      : c10d::Work(-1, type),
        op_(std::move(op)),
        settle_(std::make_shared<Settle>(std::move(outputs), std::move(keep),
                                         std::move(finish_step))) {}
  ~KungFuWork() override {
    if (!settled()) settle_on_completion_thread();
  }

  bool isCompleted() override { return settled(); }
  bool isSuccess() const override {
    return settle_->future()->completed() && !settle_->future()->hasError();
  }
  std::vector<at::Tensor> result() override { return settle_->outputs(); }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override {
    settle_on_completion_thread();
    return settle_->future();
  }

  bool wait(std::chrono::milliseconds timeout) override {
    std::optional<Status> s;
    if (timeout == kNoTimeout) {  // c10d's "wait for ever" (Work.hpp)
      s = op_->wait();
    } else {
      s = op_->wait_for(timeout);
      TORCH_CHECK(s.has_value(), "kungfu backend: ", op_->what(), ": Work.wait timed out after ",
                  timeout.count(), " ms");
    }
    if (!settle_->run(*s)) settle_->future()->wait();
    if (settle_->future()->hasError()) std::rethrow_exception(settle_->future()->exception_ptr());
    return true;
  }

 private:
  // True once the future is marked; marks it here when the collective is done and no one has.
  bool settled() {
    if (!settle_->future()->completed() && op_->ready()) {
      if (const std::optional<Status> s = op_->wait_for(Duration::zero())) settle_->run(*s);
    }
    return settle_->future()->completed();
  }

  // The completion thread marks the future once the collective completes, unless someone did.
  void settle_on_completion_thread() {
    std::call_once(then_,
                   [this] { op_->then([settle = settle_](const Status& s) { settle->run(s); }); });
  }

  OperationPtr op_;
  std::shared_ptr<Settle> settle_;
  std::once_flag then_;
};

class ProcessGroupKungFu : public Base {
 public:
  ProcessGroupKungFu(int rank, int size) : Base(rank, size) {}

  const std::string getBackendName() const override { return "kungfu"; }

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override {
    const at::Tensor& t = only(tensors, "allreduce");
    const BufferView v = view_of(t, "allreduce");
    return work(Session::get().allreduce(v, v, op_of(opts.reduceOp, "allreduce"), {}),
                c10d::OpType::ALLREDUCE, {t});
  }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override {
    const at::Tensor& t = only(tensors, "broadcast");
    return work(
        Session::get().broadcast(view_of(t, "broadcast"), static_cast<int>(opts.rootRank), {}),
        c10d::OpType::BROADCAST, {t});
  }

  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override {
    const at::Tensor& t = only(tensors, "reduce");
    // The runtime reduces into another buffer; the root's tensor takes the result.
    at::Tensor staging = at::empty_like(t);
    const BufferView in = view_of(t, "reduce"), out = view_of(staging, "reduce");
    const bool root = static_cast<int>(opts.rootRank) == getRank();
    return work(Session::get().reduce(in, out, op_of(opts.reduceOp, "reduce"),
                                      static_cast<int>(opts.rootRank), {}),
                c10d::OpType::REDUCE, {t}, {staging}, [t, staging, root]() mutable {
                  if (root) t.copy_(staging);
                });
  }

  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions&) override {
    const at::Tensor& in = only(inputs, "allgather");
    TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == getSize(),
                "kungfu backend: allgather: one list of ", getSize(), " output tensors");
    at::Tensor staging = at::empty({getSize(), in.numel()}, in.options());
    std::vector<at::Tensor> outs = outputs[0];
    for (const auto& o : outs) {
      TORCH_CHECK(o.numel() == in.numel() && o.scalar_type() == in.scalar_type(),
                  "kungfu backend: allgather: every output must match the input's size and dtype");
    }
    return work(
        Session::get().allgather(view_of(in, "allgather"), view_of(staging, "allgather"), {}),
        c10d::OpType::ALLGATHER, outs, {in, staging}, [outs, staging]() mutable {
          for (std::size_t r = 0; r < outs.size(); ++r)
            outs[r].view(-1).copy_(staging[static_cast<std::int64_t>(r)]);
        });
  }

  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions&) override {
    TORCH_CHECK(output.numel() == input.numel() * getSize(),
                "kungfu backend: _allgather_base: the output must hold ", getSize(),
                " x the input's elements");
    return work(
        Session::get().allgather(view_of(input, "allgather"), view_of(output, "allgather"), {}),
        c10d::OpType::_ALLGATHER_BASE, {output}, {input});
  }

  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override {
    const at::Tensor& in = only(inputs, "gather");
    const bool root = static_cast<int>(opts.rootRank) == getRank();
    TORCH_CHECK(!root || (outputs.size() == 1 && static_cast<int>(outputs[0].size()) == getSize()),
                "kungfu backend: gather: the root passes one list of ", getSize(), " tensors");
    at::Tensor staging = at::empty({getSize(), in.numel()}, in.options());
    std::vector<at::Tensor> outs = root ? outputs[0] : std::vector<at::Tensor>{};
    return work(Session::get().gather(view_of(in, "gather"), view_of(staging, "gather"),
                                      static_cast<int>(opts.rootRank), {}),
                c10d::OpType::GATHER, outs, {in, staging}, [outs, staging]() mutable {
                  for (std::size_t r = 0; r < outs.size(); ++r)
                    outs[r].view(-1).copy_(staging[static_cast<std::int64_t>(r)]);
                });
  }

  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions&) override {
    return work(Session::get().barrier({}), c10d::OpType::BARRIER, {});
  }

 private:
  static c10::intrusive_ptr<c10d::Work> work(OperationPtr op, c10d::OpType type,
                                             std::vector<at::Tensor> outputs,
                                             std::vector<at::Tensor> keep = {},
                                             std::function<void()> finish_step = {}) {
    return c10::make_intrusive<KungFuWork>(std::move(op), type, std::move(outputs), std::move(keep),
                                           std::move(finish_step));
  }
};

}  // namespace
}  // namespace kf::python

PYBIND11_MODULE(_c10d, m) {
  using kf::python::ProcessGroupKungFu;
  using kf::python::Session;
  m.doc() = "The torch.distributed backend 'kungfu' (use kungfu.torch.distributed).";
  py::module_::import("torch.distributed");  // registers the base class with pybind11
  py::class_<ProcessGroupKungFu, kf::python::Base, c10::intrusive_ptr<ProcessGroupKungFu>>(
      m, "ProcessGroupKungFu")
      .def(py::init([](int rank, int size) {
             if (!Session::initialized()) {
               throw py::value_error(
                   "kungfu backend: kungfu is not initialized: call kungfu.init() first");
             }
             Session& s = Session::get();
             if (rank != s.rank() || size != s.size()) {
               throw py::value_error(fmt::format(
                   "kungfu backend: torch.distributed says rank {} of {}, kungfu's launcher rank "
                   "{} of {}: start the workers with one launcher (kfrun or torchrun)",
                   rank, size, s.rank(), s.size()));
             }
             return c10::make_intrusive<ProcessGroupKungFu>(rank, size);
           }),
           py::arg("rank"), py::arg("size"));
}
