// kftrain -gpu's step program on a real GPU: workloads/gpu_step_program.h's program over a backend
// made of cuBLAS SGEMMs, a fill kernel, and the device allreduce of a GpuContext (NCCL,
// NCCL_HIERARCHICAL or STAGED[:S]).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "gpu/gpu.h"
#include "workloads/bucketing.h"
#include "workloads/model.h"
#include "workloads/step_program.h"

namespace kf {

struct GpuProgramOptions {
  const ModelProfile* model = nullptr;
  std::size_t fusion_bytes = 0;  // 0: one allreduce per tensor
  bool verify = false;           // check every element of every allreduced bucket (slow)
  GpuOptions gpu;                // device (-1: local rank % devices) and strategy
  bool tf32 = false;             // let cuBLAS use TF32 tensor cores for the SGEMMs
  // The GEMMs are (m x gemm_dim) x (gemm_dim x gemm_dim), m <= gemm_dim (at least 64).
  std::size_t gemm_dim = 4096;
  double flops_scale = 1.0;  // scale the GEMM work (calibration against a measured step time)
  // none: compute, then every bucket; kungfu, ddp: buckets allreduced as the backward pass makes
  // them (workloads/gpu_step_program.h); horovod is refused.
  BucketingOptions bucketing;
  std::string device;  // picks a profile's per-layer times for the step's timeline
};

// Throws std::runtime_error with a clear message when no device can be used ("no CUDA device:
// ..." or "built without CUDA ...").
std::unique_ptr<StepProgram> make_gpu_gradient_program(const GpuProgramOptions& options, int rank,
                                                       int size);

}  // namespace kf
