// GPU reduction kernels (see reduce_kernels.h for the semantics).
//
// Every (dtype, op) pair is one template instance of two kernels: a vectorized one that moves 16
// bytes per load and store (when out, a and b are all 16-byte aligned; its tail handled element by
// element) and a plain element one for misaligned pointers. Both are grid-stride loops sized to
// fill the device (8 blocks of 256 threads per multiprocessor at most), so one launch covers any
// count. They are memory bound: the figure of merit is (2 reads + 1 write) x bytes / time against
// the card's memory bandwidth (bench/gpu_reduce_bench.cc).
#include "gpu/reduce_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace kf::gpu {
namespace {

constexpr int kThreads = 256;

// ---- f16 / bf16 <-> f32, bit-identical to runtime/half.cc (NaN payloads included) ---------------

struct F16Fmt {};
struct BF16Fmt {};

__device__ __forceinline__ float widen(F16Fmt, std::uint16_t h) {
  // The hardware conversion is exact for every value; only a NaN's payload needs care.
  const float f = __half2float(__ushort_as_half(h));
  const std::uint32_t mant = h & 0x3ffu;
  const std::uint32_t nan_bits =
      (static_cast<std::uint32_t>(h & 0x8000u) << 16) | 0x7f800000u | (mant << 13);
  return ((h & 0x7c00u) == 0x7c00u && mant != 0) ? __uint_as_float(nan_bits) : f;
}

__device__ __forceinline__ std::uint16_t narrow(F16Fmt, float f) {
  const std::uint32_t x = __float_as_uint(f);
  const std::uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) {  // NaN: keep the top payload bits, force the quiet bit
    return static_cast<std::uint16_t>(((x >> 16) & 0x8000u) | 0x7e00u | ((abs >> 13) & 0x3ffu));
  }
  return __half_as_ushort(__float2half_rn(f));  // round to nearest even, overflow -> inf
}

__device__ __forceinline__ float widen(BF16Fmt, std::uint16_t h) {
  return __uint_as_float(static_cast<std::uint32_t>(h) << 16);
}

__device__ __forceinline__ std::uint16_t narrow(BF16Fmt, float f) {
  const std::uint32_t x = __float_as_uint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x0040u);
  return static_cast<std::uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

// ---- element operations (as runtime/reduce.cc)
// ---------------------------------------------------

template <class T>
using WrapT = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

struct OpSum {
  template <class T>
  __device__ __forceinline__ static T apply(T a, T b) {
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
  __device__ __forceinline__ static T apply(T a, T b) {
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
  __device__ __forceinline__ static T apply(T a, T b) {
    return b < a ? b : a;
  }
};
struct OpMax {
  template <class T>
  __device__ __forceinline__ static T apply(T a, T b) {
    return a < b ? b : a;
  }
};

// Storage type S and how two stored elements combine.
template <class T, class Op>
struct Native {
  using S = T;
  __device__ __forceinline__ static S apply(S a, S b) { return Op::apply(a, b); }
  __device__ __forceinline__ static S div(S a, double d) { return a / static_cast<T>(d); }
};
template <class Fmt, class Op>
struct Half {
  using S = std::uint16_t;
  __device__ __forceinline__ static S apply(S a, S b) {
    return narrow(Fmt{}, Op::apply(widen(Fmt{}, a), widen(Fmt{}, b)));
  }
  __device__ __forceinline__ static S div(S a, double d) {
    return narrow(Fmt{}, widen(Fmt{}, a) / static_cast<float>(d));
  }
};

template <class S>
union Pack {
  uint4 v;
  S e[16 / sizeof(S)];
};

// Two f16 elements packed in a word, through the paired conversions (one instruction per two
// elements each way): the element path spends most of its time converting, not moving bytes.
// The result is that of Half<F16Fmt, Op>::apply on each half (the same float arithmetic and
// rounding); words holding a NaN take that element path, which keeps NaN payloads.
template <class Op>
__device__ __forceinline__ std::uint32_t f16_pair(std::uint32_t a, std::uint32_t b) {
  if (__vcmpgtu2(a & 0x7fff7fffu, 0x7c007c00u) | __vcmpgtu2(b & 0x7fff7fffu, 0x7c007c00u)) {
    using E = Half<F16Fmt, Op>;
    const auto lo = E::apply(static_cast<std::uint16_t>(a), static_cast<std::uint16_t>(b));
    const auto hi =
        E::apply(static_cast<std::uint16_t>(a >> 16), static_cast<std::uint16_t>(b >> 16));
    return static_cast<std::uint32_t>(lo) | (static_cast<std::uint32_t>(hi) << 16);
  }
  __half2_raw ra, rb;
  ra.x = static_cast<unsigned short>(a);
  ra.y = static_cast<unsigned short>(a >> 16);
  rb.x = static_cast<unsigned short>(b);
  rb.y = static_cast<unsigned short>(b >> 16);
  const float2 fa = __half22float2(__half2(ra));
  const float2 fb = __half22float2(__half2(rb));
  const __half2_raw r = __floats2half2_rn(Op::apply(fa.x, fb.x), Op::apply(fa.y, fb.y));
  return static_cast<std::uint32_t>(r.x) | (static_cast<std::uint32_t>(r.y) << 16);
}

template <class E>
struct IsF16 : std::false_type {};
template <class Op>
struct IsF16<Half<F16Fmt, Op>> : std::true_type {
  using OpT = Op;
};

// out may alias a; b is only read.
template <class E>
__global__ void reduce_vec(typename E::S* out, const typename E::S* a,
                           const typename E::S* __restrict__ b, std::size_t n) {
  using S = typename E::S;
  constexpr int V = 16 / sizeof(S);
  const std::size_t nvec = n / V;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t tid = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const uint4* a4 = reinterpret_cast<const uint4*>(a);
  const uint4* b4 = reinterpret_cast<const uint4*>(b);
  uint4* o4 = reinterpret_cast<uint4*>(out);
  for (std::size_t i = tid; i < nvec; i += stride) {
    Pack<S> x, y;
    x.v = a4[i];
    y.v = __ldg(b4 + i);
    if constexpr (IsF16<E>::value) {
      using Op = typename IsF16<E>::OpT;
      x.v.x = f16_pair<Op>(x.v.x, y.v.x);
      x.v.y = f16_pair<Op>(x.v.y, y.v.y);
      x.v.z = f16_pair<Op>(x.v.z, y.v.z);
      x.v.w = f16_pair<Op>(x.v.w, y.v.w);
    } else {
#pragma unroll
      for (int k = 0; k < V; ++k)
        x.e[k] = E::apply(x.e[k], y.e[k]);
    }
    o4[i] = x.v;
  }
  for (std::size_t i = nvec * V + tid; i < n; i += stride)
    out[i] = E::apply(a[i], b[i]);
}

template <class E>
__global__ void reduce_elem(typename E::S* out, const typename E::S* a,
                            const typename E::S* __restrict__ b, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride)
    out[i] = E::apply(a[i], b[i]);
}

template <class E>
__global__ void divide_elem(typename E::S* data, std::size_t n, double d) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride)
    data[i] = E::div(data[i], d);
}

__global__ void fill_f32(float* data, std::size_t n, float value) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride)
    data[i] = value;
}

// The launch's own error comes from cudaGetLastError() right after it, so nothing stale may sit
// there first: the callers check every CUDA call's own result, so any error left there has been
// reported already (and a cudaErrorNotReady from polling an event is no error at all).
void clear_stale_error() {
  (void)cudaGetLastError();
}

unsigned blocks_for(std::size_t work, int multiprocessors) {
  const std::size_t cap = static_cast<std::size_t>(multiprocessors > 0 ? multiprocessors : 108) * 8;
  const std::size_t want = (work + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::max<std::size_t>(1, std::min(want, cap)));
}

template <class E>
cudaError_t launch(void* out, const void* a, const void* b, std::size_t n, cudaStream_t stream,
                   int sms) {
  using S = typename E::S;
  auto* o = static_cast<S*>(out);
  const auto* pa = static_cast<const S*>(a);
  const auto* pb = static_cast<const S*>(b);
  const auto bits = reinterpret_cast<std::uintptr_t>(out) | reinterpret_cast<std::uintptr_t>(a) |
                    reinterpret_cast<std::uintptr_t>(b);
  clear_stale_error();
  if (bits % 16 == 0) {
    reduce_vec<E><<<blocks_for(n / (16 / sizeof(S)) + 1, sms), kThreads, 0, stream>>>(o, pa, pb, n);
  } else {
    reduce_elem<E><<<blocks_for(n, sms), kThreads, 0, stream>>>(o, pa, pb, n);
  }
  return cudaGetLastError();
}

template <class Op>
cudaError_t launch_op(void* out, const void* a, const void* b, std::size_t n, DType t,
                      cudaStream_t s, int sms) {
  switch (t) {
    case DType::u8:
      return launch<Native<std::uint8_t, Op>>(out, a, b, n, s, sms);
    case DType::u16:
      return launch<Native<std::uint16_t, Op>>(out, a, b, n, s, sms);
    case DType::u32:
      return launch<Native<std::uint32_t, Op>>(out, a, b, n, s, sms);
    case DType::u64:
      return launch<Native<std::uint64_t, Op>>(out, a, b, n, s, sms);
    case DType::i8:
      return launch<Native<std::int8_t, Op>>(out, a, b, n, s, sms);
    case DType::i16:
      return launch<Native<std::int16_t, Op>>(out, a, b, n, s, sms);
    case DType::i32:
      return launch<Native<std::int32_t, Op>>(out, a, b, n, s, sms);
    case DType::i64:
      return launch<Native<std::int64_t, Op>>(out, a, b, n, s, sms);
    case DType::f16:
      return launch<Half<F16Fmt, Op>>(out, a, b, n, s, sms);
    case DType::bf16:
      return launch<Half<BF16Fmt, Op>>(out, a, b, n, s, sms);
    case DType::f32:
      return launch<Native<float, Op>>(out, a, b, n, s, sms);
    case DType::f64:
      return launch<Native<double, Op>>(out, a, b, n, s, sms);
  }
  return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t launch_reduce_to(void* out, const void* a, const void* b, std::size_t count,
                             DType dtype, ReduceOp op, cudaStream_t stream, int multiprocessors) {
  if (count == 0) return cudaSuccess;
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg:
      return launch_op<OpSum>(out, a, b, count, dtype, stream, multiprocessors);
    case ReduceOp::prod:
      return launch_op<OpProd>(out, a, b, count, dtype, stream, multiprocessors);
    case ReduceOp::min:
      return launch_op<OpMin>(out, a, b, count, dtype, stream, multiprocessors);
    case ReduceOp::max:
      return launch_op<OpMax>(out, a, b, count, dtype, stream, multiprocessors);
  }
  return cudaErrorInvalidValue;
}

cudaError_t launch_reduce(void* dst, const void* src, std::size_t count, DType dtype, ReduceOp op,
                          cudaStream_t stream, int multiprocessors) {
  return launch_reduce_to(dst, dst, src, count, dtype, op, stream, multiprocessors);
}

cudaError_t launch_divide(void* data, std::size_t count, DType dtype, std::size_t divisor,
                          cudaStream_t stream, int multiprocessors) {
  if (count == 0 || divisor <= 1) return cudaSuccess;
  const unsigned blocks = blocks_for(count, multiprocessors);
  const double d = static_cast<double>(divisor);
  clear_stale_error();
  switch (dtype) {
    case DType::f16:
      divide_elem<Half<F16Fmt, OpSum>>
          <<<blocks, kThreads, 0, stream>>>(static_cast<std::uint16_t*>(data), count, d);
      break;
    case DType::bf16:
      divide_elem<Half<BF16Fmt, OpSum>>
          <<<blocks, kThreads, 0, stream>>>(static_cast<std::uint16_t*>(data), count, d);
      break;
    case DType::f32:
      divide_elem<Native<float, OpSum>>
          <<<blocks, kThreads, 0, stream>>>(static_cast<float*>(data), count, d);
      break;
    case DType::f64:
      divide_elem<Native<double, OpSum>>
          <<<blocks, kThreads, 0, stream>>>(static_cast<double*>(data), count, d);
      break;
    default:
      return cudaSuccess;  // integers: avg is not supported, as on the CPU
  }
  return cudaGetLastError();
}

cudaError_t launch_fill_f32(float* data, std::size_t count, float value, cudaStream_t stream,
                            int multiprocessors) {
  if (count == 0) return cudaSuccess;
  clear_stale_error();
  fill_f32<<<blocks_for(count, multiprocessors), kThreads, 0, stream>>>(data, count, value);
  return cudaGetLastError();
}

}  // namespace kf::gpu
