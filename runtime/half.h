// IEEE binary16 and bfloat16 as 16-bit storage, converted through f32.
#pragma once

#include <bit>
#include <cstdint>

namespace kf {

struct f16 {
  std::uint16_t bits;
};
struct bf16 {
  std::uint16_t bits;
};

float f16_to_float(std::uint16_t h);
std::uint16_t float_to_f16(float f);  // round to nearest even; overflow -> inf; NaN kept

inline float bf16_to_float(std::uint16_t h) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
}
std::uint16_t float_to_bf16(float f);  // round to nearest even; NaN kept quiet

}  // namespace kf
