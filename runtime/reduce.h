// Reduction kernels: elementwise, contiguous, written so the compiler vectorizes them.
// f16 and bf16 are reduced in f32 and rounded back (round to nearest even) once per element.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include "runtime/dtype.h"

namespace kf {

// avg is sum followed by a division by the number of contributors (floating types only); the
// kernels below treat it as sum and `divide` does the rest once the sum is complete.
enum class ReduceOp : std::uint8_t { sum, min, max, prod, avg };

inline constexpr ReduceOp kAllReduceOps[] = {ReduceOp::sum, ReduceOp::min, ReduceOp::max,
                                             ReduceOp::prod, ReduceOp::avg};

std::string_view reduce_op_name(ReduceOp op);
std::optional<ReduceOp> parse_reduce_op(std::string_view name);
// avg needs a floating type; every other op works on every dtype.
bool reduce_op_supports(ReduceOp op, DType t);

// dst[i] = op(dst[i], src[i]) for i < count. dst and src must not overlap.
void reduce_into(void* dst, const void* src, std::size_t count, DType t, ReduceOp op);
// out[i] = op(a[i], b[i]). out may alias a (but not b unless a == b == out).
void reduce_to(void* out, const void* a, const void* b, std::size_t count, DType t, ReduceOp op);
// data[i] /= divisor, for the floating types (avg's last step).
void divide(void* data, std::size_t count, DType t, std::size_t divisor);

}  // namespace kf
