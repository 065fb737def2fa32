// The GPU workload for real runs (kftrain -gpu): a profiled model (workloads/model.h) turned into
// real GPU work. Each step runs cuBLAS SGEMMs whose FLOPs match the model's forward + backward
// cost for the local batch (3 x forward FLOPs per sample x batch, the usual estimate), writes
// gradient buckets of the model's real tensor sizes in device memory (each element
// rank + 1 + step % 5, so -verify can check the sums), then allreduces every bucket on the device
// by the selected device strategy (NCCL, NCCL_HIERARCHICAL or STAGED[:S]). The per-step GPU
// compute time and its TFLOP/s are reported as step values (gpu_compute_ms, gpu_tflops).
#pragma once

#include <cstddef>
#include <memory>

#include "gpu/gpu.h"
#include "workloads/model.h"
#include "workloads/step_program.h"

namespace kf {

struct GpuProgramOptions {
  const ModelProfile* model = nullptr;
  std::size_t fusion_bytes = 0;  // 0: one allreduce per tensor
  bool verify = false;           // check every element of every allreduced bucket (slow)
  GpuOptions gpu;                // device (-1: local rank % devices) and strategy
  bool tf32 = false;             // let cuBLAS use TF32 tensor cores for the SGEMMs
  std::size_t gemm_dim =
      4096;                  // the GEMMs are (m x gemm_dim) x (gemm_dim x gemm_dim), m <= gemm_dim
  double flops_scale = 1.0;  // scale the GEMM work (calibration against a measured step time)
};

// Throws std::runtime_error with a clear message when no device can be used ("no CUDA device:
// ..." or "built without CUDA ...").
std::unique_ptr<StepProgram> make_gpu_gradient_program(const GpuProgramOptions& options, int rank,
                                                       int size);

}  // namespace kf
