// The measurements behind kfbench, run on every worker of a kfrun job through kf::Peer; rank 0
// writes the report.
#pragma once

#include <cstddef>
#include <ostream>
#include <string>

#include "launch/peer.h"
#include "runtime/dtype.h"
#include "runtime/reduce.h"

namespace kf::bench {

struct CollectiveBench {
  std::string collective = "allreduce";  // allreduce | broadcast | allgather | reduce
  std::size_t min_bytes = 8;
  std::size_t max_bytes = 64u << 20;
  double factor = 2;     // size multiplier between rows
  std::size_t step = 0;  // -i: fixed increment instead (0: use factor)
  int iters = 20;
  int warmup = 5;
  bool check = true;
  DType dtype = DType::f32;
  ReduceOp op = ReduceOp::sum;
  int root = 0;
  bool json = false;
  bool huge_pages = true;      // buffers on transparent huge pages (HostBuffer in kfbench_run.cc)
  std::string strategy_label;  // for the report
  // --device cuda: buffers in device memory, allreduce by a device strategy (NCCL,
  // NCCL_HIERARCHICAL, STAGED[:S]; runtime/device_collectives.h), run by kfbench_device.cc.
  std::string device = "host";
  std::string device_strategy = "NCCL";
};

// Returns 0, or 1 when a check found wrong elements or an operation failed.
int run_collective_bench(Peer& peer, const CollectiveBench& bench, std::ostream& out);

// --device cuda: the same table for device buffers (GPU = LOCAL_RANK % device count). Throws
// std::runtime_error("no CUDA device: ...") when there is no usable GPU.
int run_device_collective_bench(Peer& peer, const CollectiveBench& bench, std::ostream& out);

// The benchmark's input pattern and its check, shared with kfbench_device.cc: rank `rank`'s
// input, and the number of elements of an allreduce result over n ranks that are wrong.
void fill_bench_input(std::byte* data, std::size_t count, DType t, int rank, ReduceOp op);
std::uint64_t count_wrong_allreduce(const std::byte* data, std::size_t count, DType t, ReduceOp op,
                                    int n);

// Raw single-stream TCP from rank 1 to rank 0 over the workers' own addresses: the ceiling the
// collective figures are compared with.
int run_tcp_bench(Peer& peer, std::size_t bytes, int iters, bool json, std::ostream& out);

// nccl-tests' dtype names (float, half, bfloat16, double, int8, uint8, int32, uint32, int64,
// uint64) and kf's (f32, ...).
std::optional<DType> parse_bench_dtype(std::string_view name);
std::string bench_dtype_name(DType t);

}  // namespace kf::bench
