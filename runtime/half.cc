// Reference (scalar, branchy, easy to read) conversions between f32 and the 16-bit float formats.
// reduce.cc has branch-free twins of these for its vectorized block loops; the tests check that the
// two agree on every f16 bit pattern.
#include "runtime/half.h"

namespace kf {

float f16_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1fu;
  std::uint32_t mant = h & 0x3ffu;
  std::uint32_t bits;
  if (exp == 0x1f) {
    // Inf (mant == 0) or NaN (payload kept; mant != 0 so it stays a NaN).
    bits = sign | 0x7f800000u | (mant << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + (127 - 15)) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;  // +-0
  } else {
    // Subnormal: value = mant * 2^-24. Normalize so the leading 1 becomes the implicit bit.
    int e = 1;
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --e;
    }
    mant &= 0x3ffu;
    bits = sign | (static_cast<std::uint32_t>(e + (127 - 15)) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(bits);
}

std::uint16_t float_to_f16(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t abs = x & 0x7fffffffu;

  if (abs >= 0x7f800000u) {
    if (abs == 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // inf
    // NaN: keep the top payload bits and force the quiet bit so it cannot turn into inf.
    return static_cast<std::uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
  }

  const int exp = static_cast<int>(abs >> 23) - 127 + 15;  // biased f16 exponent
  const std::uint32_t mant = abs & 0x7fffffu;

  if (exp >= 0x1f) return static_cast<std::uint16_t>(sign | 0x7c00u);  // overflow -> inf

  if (exp <= 0) {
    // Result is subnormal or zero: value = m * 2^(exp - 14 - 10) in units of 2^-24 (f16 subnormal
    // step) is m >> (14 - exp), rounded to nearest even.
    if (exp < -10) return static_cast<std::uint16_t>(sign);  // below half the smallest subnormal
    const std::uint32_t m = mant | 0x800000u;
    const unsigned shift = static_cast<unsigned>(14 - exp);  // 14..24
    std::uint32_t r = m >> shift;
    const std::uint32_t rem = m & ((1u << shift) - 1);
    const std::uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (r & 1u))) ++r;  // may carry into the smallest normal
    return static_cast<std::uint16_t>(sign | r);
  }

  std::uint32_t r = (static_cast<std::uint32_t>(exp) << 10) | (mant >> 13);
  const std::uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;  // a carry may reach inf: correct
  return static_cast<std::uint16_t>(sign | r);
}

std::uint16_t float_to_bf16(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) {
    // NaN: truncate and set the quiet bit (truncation alone could leave an all-zero mantissa =
    // inf).
    return static_cast<std::uint16_t>((x >> 16) | 0x0040u);
  }
  // Round to nearest even: add 0x7fff plus the lowest kept bit, then truncate. Overflow of the
  // largest finite values correctly rounds to inf.
  const std::uint32_t rounded = x + 0x7fffu + ((x >> 16) & 1u);
  return static_cast<std::uint16_t>(rounded >> 16);
}

}  // namespace kf
