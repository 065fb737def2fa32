// Reduction kernels.
//
// Every (dtype, op) pair is a template instance picked by a switch. The inner loops walk contiguous
// arrays through __restrict pointers with no calls and no branches the compiler cannot if-convert,
// so GCC vectorizes them at -O3 (this file is built with -O3 -funroll-loops). Checked with
// -fopt-info-vec-optimized: every 8/16/32-bit integer and f32/f64 op vectorizes, as do the f16/bf16
// conversions. 64-bit integer min/max/prod stay scalar at the x86-64 baseline (SSE2 has no 64-bit
// compare or multiply).
//
// Semantics:
//  - Integer sum and prod wrap modulo 2^bits (two's complement for signed types). The arithmetic is
//    done in an unsigned type at least as wide as `unsigned`, so there is no signed overflow and no
//    int-promotion overflow (u16 * u16 would overflow int): UBSan stays silent.
//  - min(a, b) is `b < a ? b : a` and max(a, b) is `a < b ? b : a`, exactly std::min / std::max.
//    With a NaN involved the comparison is false and the *first* operand wins. For reduce_into
//    (dst = op(dst, src)) that means a NaN already in dst is kept and a NaN arriving in src is
//    ignored. This matches x86 minps/maxps operand order, so the loops stay vectorizable.
//  - avg is reduced as sum; `divide` finishes it. `divide` is a no-op for integer dtypes (callers
//    reject avg on integers via reduce_op_supports) and for divisor 0 or 1.
//  - f16 / bf16 are processed in blocks of kBlock elements: converted to an f32 scratch array,
//    reduced in f32, and rounded back to nearest even once per element. The conversions used here
//    are branch-free twins of those in half.cc (so the block loops vectorize); tests check they
//    agree bit for bit.
//  - count == 0 is a no-op (null pointers allowed).
#include "runtime/reduce.h"

#include <bit>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "runtime/half.h"

namespace kf {

std::string_view reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return "sum";
    case ReduceOp::min:
      return "min";
    case ReduceOp::max:
      return "max";
    case ReduceOp::prod:
      return "prod";
    case ReduceOp::avg:
      return "avg";
  }
  return "unknown";
}

std::optional<ReduceOp> parse_reduce_op(std::string_view name) {
  for (ReduceOp op : kAllReduceOps) {
    if (name == reduce_op_name(op)) return op;
  }
  if (name == "mean") return ReduceOp::avg;
  if (name == "product") return ReduceOp::prod;
  return std::nullopt;
}

bool reduce_op_supports(ReduceOp op, DType t) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::min:
    case ReduceOp::max:
    case ReduceOp::prod:
      return true;
    case ReduceOp::avg:
      return is_floating(t);
  }
  return false;
}

namespace {

// ---- Element operations -------------------------------------------------------------------------

// Unsigned type used for wrapping integer arithmetic: never narrower than `unsigned`, so that the
// usual arithmetic conversions cannot promote to (signed) int.
template <class T>
using WrapT = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

struct OpSum {
  template <class T>
  static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      using U = WrapT<T>;
      return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
    } else {
      return a + b;
    }
  }
};

struct OpProd {
  template <class T>
  static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      using U = WrapT<T>;
      return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
    } else {
      return a * b;
    }
  }
};

struct OpMin {
  template <class T>
  static T apply(T a, T b) {
    return b < a ? b : a;  // std::min(a, b)
  }
};

struct OpMax {
  template <class T>
  static T apply(T a, T b) {
    return a < b ? b : a;  // std::max(a, b)
  }
};

// ---- Native-type kernels ------------------------------------------------------------------------

template <class T, class Op>
void kernel_into(T* __restrict dst, const T* __restrict src, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i)
    dst[i] = Op::apply(dst[i], src[i]);
}

// dst[i] = op(a[i], dst[i]): reduce_to with out == b.
template <class T, class Op>
void kernel_into_rev(T* __restrict dst, const T* __restrict a, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i)
    dst[i] = Op::apply(a[i], dst[i]);
}

template <class T, class Op>
void kernel_to(T* __restrict out, const T* __restrict a, const T* __restrict b, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i)
    out[i] = Op::apply(a[i], b[i]);
}

// dst[i] = op(dst[i], dst[i]): every pointer the same.
template <class T, class Op>
void kernel_self(T* dst, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i)
    dst[i] = Op::apply(dst[i], dst[i]);
}

// out = op(a, b) where out may equal a and/or b. __restrict is only promised where it holds.
template <class T, class Op>
void run_native(void* out_v, const void* a_v, const void* b_v, std::size_t n) {
  T* out = static_cast<T*>(out_v);
  const T* a = static_cast<const T*>(a_v);
  const T* b = static_cast<const T*>(b_v);
  if (out == a) {
    if (b == a) {
      kernel_self<T, Op>(out, n);
    } else {
      kernel_into<T, Op>(out, b, n);
    }
  } else if (out == b) {
    kernel_into_rev<T, Op>(out, a, n);
  } else {
    kernel_to<T, Op>(out, a, b, n);
  }
}

// ---- 16-bit float formats -----------------------------------------------------------------------

constexpr std::size_t kBlock = 256;

// All-ones if c, else zero; with it `select` is straight-line bit logic. (Plain ?: here lets GCC
// sink the f32 arithmetic into branches it then refuses to if-convert, killing vectorization.)
inline std::uint32_t mask_if(bool c) {
  return 0u - static_cast<std::uint32_t>(c);
}
inline std::uint32_t select(std::uint32_t mask, std::uint32_t a, std::uint32_t b) {
  return (a & mask) | (b & ~mask);
}

// The conversions below take and return 16-bit values widened to std::uint32_t (value in the low 16
// bits) so that vectorized loops stay in 32-bit lanes.

// Branch-free f16 -> f32 (exact). Subnormals are renormalized with one exact f32 subtraction.
inline float f16_bits_to_float(std::uint32_t h) {
  constexpr std::uint32_t kExpMask = 0x7c00u << 13;  // f16 exponent, shifted
  constexpr std::uint32_t kMagic = 113u << 23;       // 2^-14 as f32 bits
  std::uint32_t o = (h & 0x7fffu) << 13;             // exponent + mantissa
  const std::uint32_t exp = o & kExpMask;
  o += (127u - 15u) << 23;                                   // rebias
  const std::uint32_t o_special = o + ((128u - 16u) << 23);  // inf / NaN: max exponent
  const float sub = std::bit_cast<float>(o + (1u << 23)) - std::bit_cast<float>(kMagic);
  const std::uint32_t o_sub = std::bit_cast<std::uint32_t>(sub);  // zero / subnormal
  o = select(mask_if(exp == kExpMask), o_special, select(mask_if(exp == 0), o_sub, o));
  o |= (h & 0x8000u) << 16;
  return std::bit_cast<float>(o);
}

// Branch-free f32 -> f16, round to nearest even; overflow -> inf; NaN stays a (quiet) NaN.
inline std::uint32_t float_to_f16_bits(float f) {
  std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t sign = u & 0x80000000u;
  u ^= sign;
  constexpr std::uint32_t kF16Max = (127u + 16u) << 23;  // 2^16: at or above rounds to inf
  constexpr std::uint32_t kMinNormal = 113u << 23;       // 2^-14: below is f16 subnormal
  constexpr std::uint32_t kDenormMagic = 126u << 23;     // 0.5f: its ulp is 2^-24, f16's step
  const std::uint32_t r_special =
      select(mask_if(u > 0x7f800000u), 0x7e00u | ((u >> 13) & 0x3ffu), 0x7c00u);
  // Adding 0.5 rounds (nearest even, the FPU's mode) to a multiple of 2^-24 in the low mantissa.
  const float sub = std::bit_cast<float>(u) + std::bit_cast<float>(kDenormMagic);
  const std::uint32_t r_sub = std::bit_cast<std::uint32_t>(sub) - kDenormMagic;
  // Rebias and round: +0xfff plus the lowest kept bit is round-to-nearest-even on the 13 dropped
  // bits; a carry out of the mantissa bumps the exponent (up to inf), which is correct.
  const std::uint32_t r_norm = (u - ((127u - 15u) << 23) + 0xfffu + ((u >> 13) & 1u)) >> 13;
  const std::uint32_t r =
      select(mask_if(u >= kF16Max), r_special, select(mask_if(u < kMinNormal), r_sub, r_norm));
  return r | (sign >> 16);
}

// Branch-free f32 -> bf16, round to nearest even; NaN stays a quiet NaN.
inline std::uint32_t float_to_bf16_bits(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  return select(mask_if((u & 0x7fffffffu) > 0x7f800000u), (u >> 16) | 0x0040u, rounded);
}

struct F16Fmt {
  static float load(std::uint32_t h) { return f16_bits_to_float(h); }
  static std::uint32_t store(float f) { return float_to_f16_bits(f); }
};
struct BF16Fmt {
  static float load(std::uint32_t h) { return std::bit_cast<float>(h << 16); }
  static std::uint32_t store(float f) { return float_to_bf16_bits(f); }
};

// widen/narrow move m 16-bit values to/from f32 scratch. They work on pairs of elements read and
// written as one 32-bit word: narrowing element by element would need 32->16-bit packing, which
// x86-64's baseline SSE2 lacks and GCC emulates with a shuffle chain that made the kernel
// shuffle-bound (~3x slower). The scratch holds the pairs' halves in two runs: [0, m/2) and
// [m/2, 2*(m/2)), plus the odd last element at m-1. Which half of a word is which element depends
// on endianness, but a, b and out all use the same fixed permutation, so elementwise ops don't
// care.
template <class Fmt>
void widen(float* __restrict dst, const std::uint16_t* __restrict src, std::size_t m) {
  const std::size_t pairs = m / 2;
  for (std::size_t j = 0; j < pairs; ++j) {
    std::uint32_t w;
    std::memcpy(&w, src + 2 * j, sizeof w);
    dst[j] = Fmt::load(w & 0xffffu);
    dst[pairs + j] = Fmt::load(w >> 16);
  }
  if (m % 2 != 0) dst[m - 1] = Fmt::load(src[m - 1]);
}

template <class Fmt>
void narrow(std::uint16_t* __restrict dst, const float* __restrict src, std::size_t m) {
  const std::size_t pairs = m / 2;
  for (std::size_t j = 0; j < pairs; ++j) {
    const std::uint32_t w = Fmt::store(src[j]) | (Fmt::store(src[pairs + j]) << 16);
    std::memcpy(dst + 2 * j, &w, sizeof w);
  }
  if (m % 2 != 0) dst[m - 1] = static_cast<std::uint16_t>(Fmt::store(src[m - 1]));
}

// out = op(a, b) for 16-bit floats. Each block is read completely into scratch before any of it is
// written back, so out may equal a and/or b.
template <class Fmt, class Op>
void run_half(void* out_v, const void* a_v, const void* b_v, std::size_t n) {
  auto* out = static_cast<std::uint16_t*>(out_v);
  const auto* a = static_cast<const std::uint16_t*>(a_v);
  const auto* b = static_cast<const std::uint16_t*>(b_v);
  alignas(64) float fa[kBlock];
  alignas(64) float fb[kBlock];
  for (std::size_t base = 0; base < n; base += kBlock) {
    const std::size_t m = n - base < kBlock ? n - base : kBlock;
    widen<Fmt>(fa, a + base, m);
    widen<Fmt>(fb, b + base, m);
    kernel_into<float, Op>(fa, fb, m);
    narrow<Fmt>(out + base, fa, m);
  }
}

// ---- Dispatch -----------------------------------------------------------------------------------

template <class Op>
void dispatch_type(DType t, void* out, const void* a, const void* b, std::size_t n) {
  switch (t) {
    case DType::u8:
      return run_native<std::uint8_t, Op>(out, a, b, n);
    case DType::u16:
      return run_native<std::uint16_t, Op>(out, a, b, n);
    case DType::u32:
      return run_native<std::uint32_t, Op>(out, a, b, n);
    case DType::u64:
      return run_native<std::uint64_t, Op>(out, a, b, n);
    case DType::i8:
      return run_native<std::int8_t, Op>(out, a, b, n);
    case DType::i16:
      return run_native<std::int16_t, Op>(out, a, b, n);
    case DType::i32:
      return run_native<std::int32_t, Op>(out, a, b, n);
    case DType::i64:
      return run_native<std::int64_t, Op>(out, a, b, n);
    case DType::f16:
      return run_half<F16Fmt, Op>(out, a, b, n);
    case DType::bf16:
      return run_half<BF16Fmt, Op>(out, a, b, n);
    case DType::f32:
      return run_native<float, Op>(out, a, b, n);
    case DType::f64:
      return run_native<double, Op>(out, a, b, n);
  }
  std::abort();  // not a DType
}

void dispatch(ReduceOp op, DType t, void* out, const void* a, const void* b, std::size_t n) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg:
      return dispatch_type<OpSum>(t, out, a, b, n);
    case ReduceOp::min:
      return dispatch_type<OpMin>(t, out, a, b, n);
    case ReduceOp::max:
      return dispatch_type<OpMax>(t, out, a, b, n);
    case ReduceOp::prod:
      return dispatch_type<OpProd>(t, out, a, b, n);
  }
  std::abort();  // not a ReduceOp
}

template <class T>
void divide_native(T* data, std::size_t n, T d) {
  for (std::size_t i = 0; i < n; ++i)
    data[i] = data[i] / d;
}

template <class Fmt>
void divide_half(void* data_v, std::size_t n, float d) {
  auto* data = static_cast<std::uint16_t*>(data_v);
  alignas(64) float f[kBlock];
  for (std::size_t base = 0; base < n; base += kBlock) {
    const std::size_t m = n - base < kBlock ? n - base : kBlock;
    widen<Fmt>(f, data + base, m);
    divide_native<float>(f, m, d);
    narrow<Fmt>(data + base, f, m);
  }
}

}  // namespace

void reduce_into(void* dst, const void* src, std::size_t count, DType t, ReduceOp op) {
  if (count == 0) return;
  dispatch(op, t, dst, dst, src, count);
}

void reduce_to(void* out, const void* a, const void* b, std::size_t count, DType t, ReduceOp op) {
  if (count == 0) return;
  dispatch(op, t, out, a, b, count);
}

void divide(void* data, std::size_t count, DType t, std::size_t divisor) {
  if (count == 0 || divisor <= 1) return;
  switch (t) {
    case DType::f16:
      return divide_half<F16Fmt>(data, count, static_cast<float>(divisor));
    case DType::bf16:
      return divide_half<BF16Fmt>(data, count, static_cast<float>(divisor));
    case DType::f32:
      return divide_native<float>(static_cast<float*>(data), count, static_cast<float>(divisor));
    case DType::f64:
      return divide_native<double>(static_cast<double*>(data), count, static_cast<double>(divisor));
    default:
      return;  // integer dtypes: avg is not supported (see reduce_op_supports); no-op
  }
}

}  // namespace kf
