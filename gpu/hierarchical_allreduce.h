// NCCL_HIERARCHICAL across several hosts (private to gpu/): the device pipeline
// (runtime/device_collectives.h) whose three steps, per piece of the buffer, are
//   1. reduce inside the host: ncclReduce over the host's communicator into its master's output;
//   2. allreduce across the host masters: each master's piece, staged through pinned host memory,
//      allreduced by the runtime over a binary tree of the masters;
//   3. broadcast inside the host: ncclBroadcast of the master's result to the host's ranks (then
//      the division for avg).
// avg reduces as sum in steps 1 and 2 and divides once, in step 3. One host alone needs no
// pipeline: an allreduce on the host's communicator does all three steps.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "gpu/cuda_device.h"
#include "gpu/nccl_comm.h"
#include "runtime/device_collectives.h"

namespace kf::gpu {

// A rank's host, as the pipeline sees it.
struct HostGroup {
  CudaDevice* device = nullptr;
  NcclComm* comm = nullptr;             // the host's communicator; null: the rank is alone
  DeviceStream* stream = nullptr;       // the communicator's stream: every device step runs on it
  PhaseSequencer* sequencer = nullptr;  // keeps the host's NCCL calls in one order on every rank
  bool master = false;                  // the host's first rank: it stages across hosts
};

// The pipeline of the allreduce `o` (a dtype NCCL has) on a cluster of `size` ranks whose host
// masters are `masters` (host_masters: each host's first rank; at least two), in pieces of
// `piece_bytes`; each host collective has `timeout`, and `wait` waits for the host's stream. Run it
// with run_device_pipeline.
DevicePipeline hierarchical_pipeline(const HostGroup& host, const DeviceAllreduceOptions& o,
                                     const std::vector<int>& masters, int size,
                                     std::size_t piece_bytes, Duration timeout,
                                     decltype(DevicePipeline::notify) wait);

}  // namespace kf::gpu
