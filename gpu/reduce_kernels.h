// Reduction kernels on the GPU for every dtype and op of the runtime, with the semantics of the
// CPU kernels (runtime/reduce.h) bit for bit on non-NaN values: integers wrap, min/max keep the
// first operand on NaN, avg is a sum (divide finishes it), f16/bf16 are reduced in f32 and rounded
// to nearest even once per element. Vectorized grid-stride loops: 16-byte loads and stores when
// both pointers are 16-byte aligned (an element loop otherwise and for the tail).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "runtime/dtype.h"
#include "runtime/reduce.h"

namespace kf::gpu {

// dst[i] = op(dst[i], src[i]) for i < count, queued on `stream`. Returns the launch's error.
// `multiprocessors` sizes the grid (0: a default).
cudaError_t launch_reduce(void* dst, const void* src, std::size_t count, DType dtype, ReduceOp op,
                          cudaStream_t stream, int multiprocessors);
// out[i] = op(a[i], b[i]); out may alias a.
cudaError_t launch_reduce_to(void* out, const void* a, const void* b, std::size_t count,
                             DType dtype, ReduceOp op, cudaStream_t stream, int multiprocessors);
// data[i] /= divisor for the floating dtypes; nothing for the others or divisor <= 1.
cudaError_t launch_divide(void* data, std::size_t count, DType dtype, std::size_t divisor,
                          cudaStream_t stream, int multiprocessors);
// data[i] = value.
cudaError_t launch_fill_f32(float* data, std::size_t count, float value, cudaStream_t stream,
                            int multiprocessors);

}  // namespace kf::gpu
