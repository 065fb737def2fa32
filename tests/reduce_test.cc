// Tests for dtype names, the 16-bit float conversions and the reduction kernels.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "runtime/dtype.h"
#include "runtime/half.h"
#include "runtime/reduce.h"

namespace kf {

// Readable parameter names in gtest failure messages.
void PrintTo(DType t, std::ostream* os) {
  *os << dtype_name(t);
}
void PrintTo(ReduceOp op, std::ostream* os) {
  *os << reduce_op_name(op);
}

namespace {

constexpr std::size_t kSizes[] = {0, 1, 7, 255, 256, 257, 1000};

bool is_f16_nan(std::uint16_t h) {
  return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0;
}
bool is_bf16_nan(std::uint16_t h) {
  return (h & 0x7f80u) == 0x7f80u && (h & 0x7fu) != 0;
}

// ---- Scalar reference
// -----------------------------------------------------------------------------

// Integer reference through 64-bit unsigned arithmetic (defined wraparound), then truncated.
template <class T>
T ref_int(ReduceOp op, T a, T b) {
  const auto ua = static_cast<std::uint64_t>(a);
  const auto ub = static_cast<std::uint64_t>(b);
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg:
      return static_cast<T>(ua + ub);
    case ReduceOp::prod:
      return static_cast<T>(ua * ub);
    case ReduceOp::min:
      return std::min(a, b);
    case ReduceOp::max:
      return std::max(a, b);
  }
  return T{};
}

template <class T>
T ref_float(ReduceOp op, T a, T b) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg:
      return a + b;
    case ReduceOp::prod:
      return a * b;
    case ReduceOp::min:
      return std::min(a, b);
    case ReduceOp::max:
      return std::max(a, b);
  }
  return T{};
}

// Reference for one element of any dtype, on raw bytes.
void ref_elem(DType t, ReduceOp op, const void* a, const void* b, void* out) {
  auto run = [&]<class T>(T) {
    T x, y;
    std::memcpy(&x, a, sizeof(T));
    std::memcpy(&y, b, sizeof(T));
    T r;
    if constexpr (std::is_integral_v<T>) {
      r = ref_int(op, x, y);
    } else {
      r = ref_float(op, x, y);
    }
    std::memcpy(out, &r, sizeof(T));
  };
  std::uint16_t ha, hb, hr;
  switch (t) {
    case DType::u8:
      return run(std::uint8_t{});
    case DType::u16:
      return run(std::uint16_t{});
    case DType::u32:
      return run(std::uint32_t{});
    case DType::u64:
      return run(std::uint64_t{});
    case DType::i8:
      return run(std::int8_t{});
    case DType::i16:
      return run(std::int16_t{});
    case DType::i32:
      return run(std::int32_t{});
    case DType::i64:
      return run(std::int64_t{});
    case DType::f32:
      return run(float{});
    case DType::f64:
      return run(double{});
    case DType::f16:
      std::memcpy(&ha, a, 2);
      std::memcpy(&hb, b, 2);
      hr = float_to_f16(ref_float(op, f16_to_float(ha), f16_to_float(hb)));
      std::memcpy(out, &hr, 2);
      return;
    case DType::bf16:
      std::memcpy(&ha, a, 2);
      std::memcpy(&hb, b, 2);
      hr = float_to_bf16(ref_float(op, bf16_to_float(ha), bf16_to_float(hb)));
      std::memcpy(out, &hr, 2);
      return;
  }
}

// Random contents: integers get random bits (so sums and products overflow and wrap); floats get
// finite values of both signs and varied magnitude (16-bit floats via rounding from f32).
std::vector<std::uint8_t> random_bytes(DType t, std::size_t n, std::mt19937_64& rng) {
  const std::size_t sz = dtype_size(t);
  std::vector<std::uint8_t> v(n * sz);
  std::uniform_real_distribution<double> mag(-8.0, 8.0);
  std::uniform_int_distribution<int> bit(0, 1);
  auto value = [&] { return (bit(rng) ? -1.0 : 1.0) * std::exp2(mag(rng)); };
  for (std::size_t i = 0; i < n; ++i) {
    std::uint8_t* p = v.data() + i * sz;
    if (t == DType::f32) {
      const float f = static_cast<float>(value());
      std::memcpy(p, &f, 4);
    } else if (t == DType::f64) {
      const double d = value();
      std::memcpy(p, &d, 8);
    } else if (t == DType::f16) {
      const std::uint16_t h = float_to_f16(static_cast<float>(value()));
      std::memcpy(p, &h, 2);
    } else if (t == DType::bf16) {
      const std::uint16_t h = float_to_bf16(static_cast<float>(value()));
      std::memcpy(p, &h, 2);
    } else {
      const std::uint64_t r = rng();
      std::memcpy(p, &r, sz);
    }
  }
  return v;
}

std::vector<std::uint8_t> reference(DType t, ReduceOp op, const std::vector<std::uint8_t>& a,
                                    const std::vector<std::uint8_t>& b) {
  const std::size_t sz = dtype_size(t);
  std::vector<std::uint8_t> out(a.size());
  for (std::size_t off = 0; off < a.size(); off += sz) {
    ref_elem(t, op, a.data() + off, b.data() + off, out.data() + off);
  }
  return out;
}

// First differing element, for readable failures.
std::string first_diff(DType t, const std::vector<std::uint8_t>& got,
                       const std::vector<std::uint8_t>& want) {
  const std::size_t sz = dtype_size(t);
  for (std::size_t off = 0; off < got.size(); off += sz) {
    if (std::memcmp(got.data() + off, want.data() + off, sz) != 0) {
      return "element " + std::to_string(off / sz) + " differs";
    }
  }
  return "equal";
}

void* data_or_null(std::vector<std::uint8_t>& v) {
  return v.empty() ? nullptr : v.data();
}

// ---- Every dtype x op x size
// ----------------------------------------------------------------------

class ReduceAll : public ::testing::TestWithParam<std::tuple<DType, ReduceOp>> {};

TEST_P(ReduceAll, MatchesScalarReference) {
  const auto [t, op] = GetParam();
  std::mt19937_64 rng(static_cast<std::uint64_t>(t) * 131 + static_cast<std::uint64_t>(op));
  for (std::size_t n : kSizes) {
    SCOPED_TRACE("n=" + std::to_string(n));
    auto a = random_bytes(t, n, rng);
    auto b = random_bytes(t, n, rng);
    const auto want = reference(t, op, a, b);

    // reduce_into: dst = op(dst, src)
    auto dst = a;
    reduce_into(data_or_null(dst), data_or_null(b), n, t, op);
    EXPECT_TRUE(dst == want) << "reduce_into: " << first_diff(t, dst, want);

    // reduce_to into a separate buffer; inputs untouched.
    std::vector<std::uint8_t> out(a.size(), 0xAB);
    const auto a0 = a, b0 = b;
    reduce_to(data_or_null(out), data_or_null(a), data_or_null(b), n, t, op);
    EXPECT_TRUE(out == want) << "reduce_to: " << first_diff(t, out, want);
    EXPECT_TRUE(a == a0 && b == b0) << "reduce_to modified an input";

    // reduce_to with out aliasing a.
    auto alias_a = a;
    reduce_to(data_or_null(alias_a), data_or_null(alias_a), data_or_null(b), n, t, op);
    EXPECT_TRUE(alias_a == want) << "reduce_to out==a: " << first_diff(t, alias_a, want);

    // reduce_to with out aliasing b (op order must still be op(a, b)).
    auto alias_b = b;
    reduce_to(data_or_null(alias_b), data_or_null(a), data_or_null(alias_b), n, t, op);
    EXPECT_TRUE(alias_b == want) << "reduce_to out==b: " << first_diff(t, alias_b, want);

    // out == a == b.
    auto self = a;
    const auto want_self = reference(t, op, a, a);
    reduce_to(data_or_null(self), data_or_null(self), data_or_null(self), n, t, op);
    EXPECT_TRUE(self == want_self) << "reduce_to out==a==b: " << first_diff(t, self, want_self);
  }
}

std::string param_name(const ::testing::TestParamInfo<ReduceAll::ParamType>& info) {
  return std::string(dtype_name(std::get<0>(info.param))) + "_" +
         std::string(reduce_op_name(std::get<1>(info.param)));
}

// Every dtype x every op it supports (avg only on floating types).
std::vector<std::tuple<DType, ReduceOp>> supported_pairs() {
  std::vector<std::tuple<DType, ReduceOp>> v;
  for (DType t : kAllDTypes) {
    for (ReduceOp op : kAllReduceOps) {
      if (reduce_op_supports(op, t)) v.emplace_back(t, op);
    }
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(AllTypesAllOps, ReduceAll, ::testing::ValuesIn(supported_pairs()),
                         param_name);

TEST(Reduce, ZeroCountIsNoOpWithNullPointers) {
  for (DType t : kAllDTypes) {
    for (ReduceOp op : kAllReduceOps) {
      reduce_into(nullptr, nullptr, 0, t, op);
      reduce_to(nullptr, nullptr, nullptr, 0, t, op);
    }
    divide(nullptr, 0, t, 4);
  }
  float x = 3.0f;
  const float y = 4.0f;
  reduce_into(&x, &y, 0, DType::f32, ReduceOp::sum);
  EXPECT_EQ(x, 3.0f);
}

// ---- Integer wraparound
// ---------------------------------------------------------------------------

template <class T>
T reduce1(ReduceOp op, T a, T b, DType t) {
  reduce_into(&a, &b, 1, t, op);
  return a;
}

TEST(ReduceWrap, IntegersWrapWithoutUB) {
  EXPECT_EQ(reduce1<std::int8_t>(ReduceOp::sum, 127, 1, DType::i8), -128);
  EXPECT_EQ(reduce1<std::int8_t>(ReduceOp::sum, -128, -1, DType::i8), 127);
  EXPECT_EQ(reduce1<std::uint8_t>(ReduceOp::sum, 255, 1, DType::u8), 0);
  EXPECT_EQ(reduce1<std::int8_t>(ReduceOp::prod, 16, 16, DType::i8), 0);
  EXPECT_EQ(reduce1<std::int8_t>(ReduceOp::prod, -128, -1, DType::i8), -128);
  EXPECT_EQ(reduce1<std::int16_t>(ReduceOp::sum, 32767, 1, DType::i16), -32768);
  EXPECT_EQ(reduce1<std::int16_t>(ReduceOp::prod, 300, 300, DType::i16), 24464);  // 90000 - 65536
  // u16 * u16 would overflow int if promoted naively.
  EXPECT_EQ(reduce1<std::uint16_t>(ReduceOp::prod, 65535, 65535, DType::u16), 1);
  EXPECT_EQ(reduce1<std::int32_t>(ReduceOp::prod, 65536, 65536, DType::i32), 0);
  EXPECT_EQ(reduce1<std::int32_t>(ReduceOp::prod, std::numeric_limits<std::int32_t>::max(), 2,
                                  DType::i32),
            -2);
  EXPECT_EQ(reduce1<std::int32_t>(ReduceOp::prod, std::numeric_limits<std::int32_t>::min(), -1,
                                  DType::i32),
            std::numeric_limits<std::int32_t>::min());
  EXPECT_EQ(
      reduce1<std::int32_t>(ReduceOp::sum, std::numeric_limits<std::int32_t>::max(), 1, DType::i32),
      std::numeric_limits<std::int32_t>::min());
  EXPECT_EQ(reduce1<std::uint32_t>(ReduceOp::prod, 0xffffffffu, 0xffffffffu, DType::u32), 1u);
  EXPECT_EQ(reduce1<std::int64_t>(ReduceOp::sum, std::numeric_limits<std::int64_t>::min(), -1,
                                  DType::i64),
            std::numeric_limits<std::int64_t>::max());
  EXPECT_EQ(reduce1<std::int64_t>(ReduceOp::prod, std::int64_t{1} << 62, 4, DType::i64), 0);
  EXPECT_EQ(reduce1<std::uint64_t>(ReduceOp::sum, ~std::uint64_t{0}, 2, DType::u64), 1u);

  // The same through a long (vectorized) loop.
  std::vector<std::int32_t> a(1000, std::numeric_limits<std::int32_t>::max());
  std::vector<std::int32_t> b(1000, 3);
  reduce_into(a.data(), b.data(), a.size(), DType::i32, ReduceOp::prod);
  for (std::int32_t v : a)
    ASSERT_EQ(v, std::numeric_limits<std::int32_t>::max() - 2);  // 3*MAX mod 2^32
  std::vector<std::int8_t> c(1000, 100), d(1000, 100);
  reduce_into(c.data(), d.data(), c.size(), DType::i8, ReduceOp::sum);
  for (std::int8_t v : c)
    ASSERT_EQ(v, -56);
}

TEST(ReduceMinMax, SignedAndUnsignedOrdering) {
  EXPECT_EQ(reduce1<std::int8_t>(ReduceOp::min, -1, 1, DType::i8), -1);
  EXPECT_EQ(reduce1<std::uint8_t>(ReduceOp::min, 255, 1, DType::u8), 1);
  EXPECT_EQ(reduce1<std::int64_t>(ReduceOp::max, -5, -7, DType::i64), -5);
  EXPECT_EQ(reduce1<std::uint64_t>(ReduceOp::max, 1, ~std::uint64_t{0}, DType::u64),
            ~std::uint64_t{0});
}

TEST(ReduceMinMax, NaNSemanticsFollowStdMinMax) {
  // min(dst, src) = src < dst ? src : dst: a NaN in dst is kept, a NaN in src is ignored.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(reduce1<float>(ReduceOp::min, nan, 1.0f, DType::f32)));
  EXPECT_EQ(reduce1<float>(ReduceOp::min, 1.0f, nan, DType::f32), 1.0f);
  EXPECT_TRUE(std::isnan(reduce1<float>(ReduceOp::max, nan, 1.0f, DType::f32)));
  EXPECT_EQ(reduce1<float>(ReduceOp::max, 1.0f, nan, DType::f32), 1.0f);
  const double dnan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(std::isnan(reduce1<double>(ReduceOp::max, dnan, 1.0, DType::f64)));
  EXPECT_EQ(reduce1<double>(ReduceOp::max, 1.0, dnan, DType::f64), 1.0);
  // Sum and prod propagate NaN from either side.
  EXPECT_TRUE(std::isnan(reduce1<float>(ReduceOp::sum, 1.0f, nan, DType::f32)));
  // Same rules for 16-bit floats (reduced in f32).
  EXPECT_TRUE(is_f16_nan(reduce1<std::uint16_t>(ReduceOp::min, 0x7e00, 0x3c00, DType::f16)));
  EXPECT_EQ(reduce1<std::uint16_t>(ReduceOp::min, 0x3c00, 0x7e00, DType::f16), 0x3c00);
  EXPECT_TRUE(is_bf16_nan(reduce1<std::uint16_t>(ReduceOp::max, 0x7fc0, 0x3f80, DType::bf16)));
}

// ---- f16 / bf16 conversions
// -----------------------------------------------------------------------

float from_bits(std::uint32_t u) {
  return std::bit_cast<float>(u);
}

TEST(Half, KnownF16Patterns) {
  EXPECT_EQ(float_to_f16(1.0f), 0x3C00);
  EXPECT_EQ(float_to_f16(-2.0f), 0xC000);
  EXPECT_EQ(float_to_f16(65504.0f), 0x7BFF);
  EXPECT_EQ(float_to_f16(65519.0f), 0x7BFF);  // just below the halfway point to 65536
  EXPECT_EQ(float_to_f16(65520.0f), 0x7C00);  // halfway: rounds to even = inf
  EXPECT_EQ(float_to_f16(1e10f), 0x7C00);
  EXPECT_EQ(float_to_f16(-1e10f), 0xFC00);
  EXPECT_EQ(float_to_f16(std::numeric_limits<float>::infinity()), 0x7C00);
  EXPECT_EQ(float_to_f16(-std::numeric_limits<float>::infinity()), 0xFC00);
  EXPECT_EQ(float_to_f16(0.0f), 0x0000);
  EXPECT_EQ(float_to_f16(-0.0f), 0x8000);
  EXPECT_EQ(float_to_f16(std::ldexp(1.0f, -24)), 0x0001);            // smallest subnormal
  EXPECT_EQ(float_to_f16(std::ldexp(1.0f, -14)), 0x0400);            // smallest normal
  EXPECT_EQ(float_to_f16(std::ldexp(1023.0f, -24)), 0x03FF);         // largest subnormal
  EXPECT_EQ(float_to_f16(std::ldexp(1.0f, -25)), 0x0000);            // halfway to 2^-24: even is 0
  EXPECT_EQ(float_to_f16(std::ldexp(1.0f, -25) * 1.0001f), 0x0001);  // above halfway
  EXPECT_EQ(float_to_f16(std::ldexp(3.0f, -25)), 0x0002);            // 1.5 steps: even is 2
  EXPECT_EQ(float_to_f16(std::ldexp(2047.0f, -25)), 0x0400);         // rounds up into the normals
  EXPECT_EQ(float_to_f16(std::ldexp(1.0f, -30)), 0x0000);
  EXPECT_EQ(float_to_f16(-std::ldexp(1.0f, -30)), 0x8000);
  // Round to nearest even at a normal halfway case: 1 + 2^-11 -> 1.0; 1 + 3*2^-11 -> 1 + 2^-9.
  EXPECT_EQ(float_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);
  EXPECT_EQ(float_to_f16(1.0f + std::ldexp(3.0f, -11)), 0x3C02);
  EXPECT_EQ(float_to_f16(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3C01);
  // NaN stays NaN, including a NaN whose payload lives only in bits f16 drops.
  EXPECT_TRUE(is_f16_nan(float_to_f16(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(is_f16_nan(float_to_f16(from_bits(0x7f800001u))));
  EXPECT_TRUE(is_f16_nan(float_to_f16(from_bits(0xff800001u))));

  EXPECT_EQ(f16_to_float(0x3C00), 1.0f);
  EXPECT_EQ(f16_to_float(0x7BFF), 65504.0f);
  EXPECT_EQ(f16_to_float(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f16_to_float(0x03FF), std::ldexp(1023.0f, -24));
  EXPECT_EQ(std::bit_cast<std::uint32_t>(f16_to_float(0x8000)), 0x80000000u);
  EXPECT_EQ(f16_to_float(0x7C00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(f16_to_float(0xFC00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(f16_to_float(0x7E00)));
  EXPECT_TRUE(std::isnan(f16_to_float(0x7C01)));
}

TEST(Half, F16RoundTripEveryPattern) {
  for (std::uint32_t h = 0; h <= 0xffff; ++h) {
    const auto bits = static_cast<std::uint16_t>(h);
    const float f = f16_to_float(bits);
    if (is_f16_nan(bits)) {
      ASSERT_TRUE(std::isnan(f)) << h;
      ASSERT_TRUE(is_f16_nan(float_to_f16(f))) << h;
    } else {
      ASSERT_EQ(float_to_f16(f), bits) << h;
    }
  }
}

TEST(Half, KnownBF16Patterns) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(float_to_bf16(-0.0f), 0x8000);
  EXPECT_EQ(float_to_bf16(from_bits(0x3F808000u)), 0x3F80);  // halfway, even stays
  EXPECT_EQ(float_to_bf16(from_bits(0x3F818000u)), 0x3F82);  // halfway, odd rounds up
  EXPECT_EQ(float_to_bf16(from_bits(0x3F808001u)), 0x3F81);  // above halfway
  EXPECT_EQ(float_to_bf16(from_bits(0x3F807FFFu)), 0x3F80);  // below halfway
  EXPECT_EQ(float_to_bf16(from_bits(0x7F7FFFFFu)), 0x7F80);  // max float rounds to inf
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::infinity()), 0x7F80);
  EXPECT_EQ(float_to_bf16(from_bits(0x00000001u)), 0x0000);  // tiny subnormal
  EXPECT_TRUE(is_bf16_nan(float_to_bf16(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(is_bf16_nan(float_to_bf16(from_bits(0x7f800001u))));  // payload only in low bits
  EXPECT_TRUE(is_bf16_nan(float_to_bf16(from_bits(0xff800001u))));
  EXPECT_EQ(bf16_to_float(0x3F80), 1.0f);
  for (std::uint32_t h = 0; h <= 0xffff; ++h) {
    const auto bits = static_cast<std::uint16_t>(h);
    if (is_bf16_nan(bits)) {
      ASSERT_TRUE(is_bf16_nan(float_to_bf16(bf16_to_float(bits)))) << h;
    } else {
      ASSERT_EQ(float_to_bf16(bf16_to_float(bits)), bits) << h;
    }
  }
}

// The kernels use their own branch-free conversions; check them against half.cc on every f16
// pattern (as dst) against a spread of src values, which exercises both widening and rounding.
TEST(Half, KernelConversionsAgreeWithReference) {
  std::vector<std::uint16_t> all(65536);
  for (std::uint32_t h = 0; h <= 0xffff; ++h)
    all[h] = static_cast<std::uint16_t>(h);
  const std::uint16_t srcs[] = {0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x3C00, 0xBC00,
                                0x3555, 0x7BFF, 0x7C00, 0x1400, 0x9400, 0x4248};
  for (DType t : {DType::f16, DType::bf16}) {
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max}) {
      for (std::uint16_t s : srcs) {
        std::vector<std::uint16_t> dst = all;
        const std::vector<std::uint16_t> src(all.size(), s);
        reduce_into(dst.data(), src.data(), dst.size(), t, op);
        for (std::uint32_t h = 0; h <= 0xffff; ++h) {
          std::uint16_t want;
          ref_elem(t, op, &all[h], &s, &want);
          const bool nan = t == DType::f16 ? is_f16_nan(want) : is_bf16_nan(want);
          if (nan) {
            ASSERT_TRUE(t == DType::f16 ? is_f16_nan(dst[h]) : is_bf16_nan(dst[h]));
          } else {
            ASSERT_EQ(dst[h], want)
                << dtype_name(t) << " " << reduce_op_name(op) << " " << h << " with " << s;
          }
        }
      }
    }
    // divide covers rounding of results into the subnormal range.
    for (std::size_t d : {3u, 7u, 1000u, 100000u}) {
      std::vector<std::uint16_t> v = all;
      divide(v.data(), v.size(), t, d);
      for (std::uint32_t h = 0; h <= 0xffff; ++h) {
        const auto bits = static_cast<std::uint16_t>(h);
        const float q =
            (t == DType::f16 ? f16_to_float(bits) : bf16_to_float(bits)) / static_cast<float>(d);
        const std::uint16_t want = t == DType::f16 ? float_to_f16(q) : float_to_bf16(q);
        if (t == DType::f16 ? is_f16_nan(want) : is_bf16_nan(want)) {
          ASSERT_TRUE(t == DType::f16 ? is_f16_nan(v[h]) : is_bf16_nan(v[h]));
        } else {
          ASSERT_EQ(v[h], want) << dtype_name(t) << " /" << d << " " << h;
        }
      }
    }
  }
}

// ---- divide
// ---------------------------------------------------------------------------------------

TEST(Divide, AveragesOfFloatingTypes) {
  constexpr std::size_t kN = 1000;
  constexpr int kPeers = 4;
  // Peer p contributes p + i % 10; the average is 1.5 + i % 10.
  auto value = [](int p, std::size_t i) {
    return static_cast<double>(p) + static_cast<double>(i % 10);
  };
  auto expected = [](std::size_t i) { return 1.5 + static_cast<double>(i % 10); };

  {
    std::vector<float> acc(kN, 0.0f);
    for (int p = 0; p < kPeers; ++p) {
      std::vector<float> in(kN);
      for (std::size_t i = 0; i < kN; ++i)
        in[i] = static_cast<float>(value(p, i));
      reduce_into(acc.data(), in.data(), kN, DType::f32, ReduceOp::avg);
    }
    divide(acc.data(), kN, DType::f32, kPeers);
    for (std::size_t i = 0; i < kN; ++i)
      ASSERT_EQ(acc[i], static_cast<float>(expected(i))) << i;
  }
  {
    std::vector<double> acc(kN, 0.0);
    for (int p = 0; p < kPeers; ++p) {
      std::vector<double> in(kN);
      for (std::size_t i = 0; i < kN; ++i)
        in[i] = value(p, i);
      reduce_into(acc.data(), in.data(), kN, DType::f64, ReduceOp::avg);
    }
    divide(acc.data(), kN, DType::f64, kPeers);
    for (std::size_t i = 0; i < kN; ++i)
      ASSERT_EQ(acc[i], expected(i)) << i;
  }
  for (DType t : {DType::f16, DType::bf16}) {
    auto to16 = [t](double v) {
      return t == DType::f16 ? float_to_f16(static_cast<float>(v))
                             : float_to_bf16(static_cast<float>(v));
    };
    std::vector<std::uint16_t> acc(kN, to16(0.0));
    for (int p = 0; p < kPeers; ++p) {
      std::vector<std::uint16_t> in(kN);
      for (std::size_t i = 0; i < kN; ++i)
        in[i] = to16(value(p, i));
      reduce_into(acc.data(), in.data(), kN, t, ReduceOp::avg);
    }
    divide(acc.data(), kN, t, kPeers);
    for (std::size_t i = 0; i < kN; ++i)
      ASSERT_EQ(acc[i], to16(expected(i))) << i;
  }
  // Non-exact quotient rounds like the scalar division does.
  float third = 1.0f;
  divide(&third, 1, DType::f32, 3);
  EXPECT_EQ(third, 1.0f / 3.0f);
  double dthird = 1.0;
  divide(&dthird, 1, DType::f64, 3);
  EXPECT_EQ(dthird, 1.0 / 3.0);
}

TEST(Divide, IntegerDTypesAreLeftAlone) {
  std::int32_t v[3] = {10, 20, 30};
  divide(v, 3, DType::i32, 10);
  EXPECT_EQ(v[0], 10);
  EXPECT_EQ(v[2], 30);
  float f = 5.0f;
  divide(&f, 1, DType::f32, 1);
  EXPECT_EQ(f, 5.0f);
}

// ---- Names
// ----------------------------------------------------------------------------------------

TEST(Names, DTypeRoundTrip) {
  const char* names[] = {"u8",  "u16", "u32", "u64",  "i8",  "i16",
                         "i32", "i64", "f16", "bf16", "f32", "f64"};
  std::size_t k = 0;
  for (DType t : kAllDTypes) {
    EXPECT_EQ(dtype_name(t), names[k++]);
    EXPECT_EQ(parse_dtype(dtype_name(t)), t);
  }
  EXPECT_EQ(dtype_size(DType::u8), 1u);
  EXPECT_EQ(dtype_size(DType::i16), 2u);
  EXPECT_EQ(dtype_size(DType::f16), 2u);
  EXPECT_EQ(dtype_size(DType::bf16), 2u);
  EXPECT_EQ(dtype_size(DType::f32), 4u);
  EXPECT_EQ(dtype_size(DType::u32), 4u);
  EXPECT_EQ(dtype_size(DType::i64), 8u);
  EXPECT_EQ(dtype_size(DType::f64), 8u);
  EXPECT_EQ(parse_dtype("float32"), DType::f32);
  EXPECT_EQ(parse_dtype("float"), DType::f32);
  EXPECT_EQ(parse_dtype("float64"), DType::f64);
  EXPECT_EQ(parse_dtype("double"), DType::f64);
  EXPECT_EQ(parse_dtype("float16"), DType::f16);
  EXPECT_EQ(parse_dtype("half"), DType::f16);
  EXPECT_EQ(parse_dtype("bfloat16"), DType::bf16);
  EXPECT_EQ(parse_dtype("int32"), DType::i32);
  EXPECT_EQ(parse_dtype("uint8"), DType::u8);
  EXPECT_EQ(parse_dtype("int64"), DType::i64);
  EXPECT_EQ(parse_dtype("f8"), std::nullopt);
  EXPECT_EQ(parse_dtype(""), std::nullopt);
  EXPECT_EQ(parse_dtype("F32"), std::nullopt);
  EXPECT_TRUE(is_floating(DType::f16));
  EXPECT_TRUE(is_floating(DType::bf16));
  EXPECT_TRUE(is_floating(DType::f32));
  EXPECT_TRUE(is_floating(DType::f64));
  EXPECT_FALSE(is_floating(DType::i32));
  EXPECT_FALSE(is_floating(DType::u8));
}

TEST(Names, ReduceOpRoundTrip) {
  const char* names[] = {"sum", "min", "max", "prod", "avg"};
  std::size_t k = 0;
  for (ReduceOp op : kAllReduceOps) {
    EXPECT_EQ(reduce_op_name(op), names[k++]);
    EXPECT_EQ(parse_reduce_op(reduce_op_name(op)), op);
  }
  EXPECT_EQ(parse_reduce_op("median"), std::nullopt);
  EXPECT_EQ(parse_reduce_op(""), std::nullopt);
  EXPECT_EQ(parse_reduce_op("SUM"), std::nullopt);
}

TEST(Names, OpSupport) {
  EXPECT_FALSE(reduce_op_supports(ReduceOp::avg, DType::i32));
  EXPECT_FALSE(reduce_op_supports(ReduceOp::avg, DType::u8));
  EXPECT_TRUE(reduce_op_supports(ReduceOp::avg, DType::f32));
  EXPECT_TRUE(reduce_op_supports(ReduceOp::avg, DType::bf16));
  for (DType t : kAllDTypes) {
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::min, ReduceOp::max, ReduceOp::prod}) {
      EXPECT_TRUE(reduce_op_supports(op, t));
    }
  }
}

}  // namespace
}  // namespace kf
