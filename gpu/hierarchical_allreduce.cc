// NCCL_HIERARCHICAL across several hosts: its three steps and the pipeline that runs them.
#include "gpu/hierarchical_allreduce.h"

#include <fmt/format.h>

#include <utility>

#include "runtime/collectives.h"

namespace kf::gpu {

namespace {

using PieceStep = decltype(DevicePipeline::before);  // (first, count, stream) -> Status
using HostStep = decltype(DevicePipeline::host_collective);

// Step 1, reduce inside the host: elements [first, first + count) of every host rank's input,
// reduced by `op` into the master's output (ncclReduce to group rank 0), queued on the given
// stream. Alone on its host, a rank copies its input to its output (nothing when they are one
// buffer).
PieceStep reduce_in_host(const HostGroup& host, const DeviceAllreduceOptions& o, ReduceOp op) {
  CudaDevice* dev = host.device;
  NcclComm* comm = host.comm;
  const auto* in = static_cast<const std::byte*>(o.input);
  auto* out = static_cast<std::byte*>(o.output);
  const std::size_t elem = dtype_size(o.dtype);
  const ncclDataType_t dt = *nccl_dtype(o.dtype);
  return [dev, comm, in, out, elem, dt, op](std::size_t first, std::size_t count,
                                            DeviceStream& st) -> Status {
    if (comm == nullptr) {  // alone on the host
      if (in == out) return Status{};
      return dev->copy(out + first * elem, in + first * elem, count * elem,
                       CopyKind::device_to_device, st);
    }
    if (Status b = dev->bind(); !b.ok()) return b;
    return nccl_status(ncclReduce(in + first * elem, out + first * elem, count, dt, nccl_op(op), 0,
                                  comm->get(), native(st)),
                       fmt::format("ncclReduce({} elements at {}, root 0)", count, first),
                       comm->where(), comm->get());
  };
}

// Step 2, allreduce across the host masters: the staged piece (the master's reduced output,
// copied to pinned host memory; a phantom on the other ranks) allreduced by `op` in place, over
// a binary tree of `masters` (master j's parent is master (j - 1) / 2). Every one of the `size`
// ranks calls it with that forest, as subset_allreduce requires; a rank that is no master is
// alone in its tree.
HostStep allreduce_across_masters(const std::vector<int>& masters, int size, ReduceOp op,
                                  Duration timeout) {
  std::vector<int> forest(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r)
    forest[static_cast<std::size_t>(r)] = r;
  for (std::size_t j = 1; j < masters.size(); ++j)
    forest[static_cast<std::size_t>(masters[j])] = masters[(j - 1) / 2];
  return
      [forest, op, timeout](Engine& en, const std::string& name, BufferView host, DoneCallback d) {
        ::kf::subset_allreduce(en,
                               {.name = name,
                                .input = host,
                                .output = host,
                                .op = op,
                                .forest = forest,
                                .timeout = timeout},
                               std::move(d));
      };
}

// Step 3, broadcast inside the host: elements [first, first + count) of the master's output
// (the cluster's result, copied back up from the host) broadcast into every host rank's output
// (ncclBroadcast from group rank 0), then divided by the `size` ranks for avg; queued on the
// given stream.
PieceStep broadcast_in_host(const HostGroup& host, const DeviceAllreduceOptions& o, int size) {
  CudaDevice* dev = host.device;
  NcclComm* comm = host.comm;
  auto* out = static_cast<std::byte*>(o.output);
  const std::size_t elem = dtype_size(o.dtype);
  const ncclDataType_t dt = *nccl_dtype(o.dtype);
  const bool avg = o.op == ReduceOp::avg;
  return [dev, comm, out, elem, dt, avg, n = size, dtype = o.dtype](
             std::size_t first, std::size_t count, DeviceStream& st) -> Status {
    if (comm != nullptr) {
      if (Status b = dev->bind(); !b.ok()) return b;
      if (Status b =
              nccl_status(ncclBroadcast(out + first * elem, out + first * elem, count, dt, 0,
                                        comm->get(), native(st)),
                          fmt::format("ncclBroadcast({} elements at {}, root 0)", count, first),
                          comm->where(), comm->get());
          !b.ok())
        return b;
    }
    if (avg) return dev->divide(out + first * elem, count, dtype, static_cast<std::size_t>(n), st);
    return Status{};
  };
}

}  // namespace

DevicePipeline hierarchical_pipeline(const HostGroup& host, const DeviceAllreduceOptions& o,
                                     const std::vector<int>& masters, int size,
                                     std::size_t piece_bytes, Duration timeout,
                                     decltype(DevicePipeline::notify) wait) {
  // avg sums across everything and divides once, at the end (step 3).
  const ReduceOp op = o.op == ReduceOp::avg ? ReduceOp::sum : o.op;
  DevicePipeline p;
  p.op = o;
  p.op.op = op;
  p.piece_bytes = piece_bytes;
  p.stage = host.master;       // only a master's bytes cross hosts
  p.stage_from_output = true;  // what crosses is step 1's result, in the output
  p.down = host.stream;
  p.up = host.stream;
  p.sequencer = host.sequencer;
  p.before = reduce_in_host(host, o, op);
  p.host_collective = allreduce_across_masters(masters, size, op, timeout);
  p.after = broadcast_in_host(host, o, size);
  p.notify = std::move(wait);
  return p;
}

}  // namespace kf::gpu
