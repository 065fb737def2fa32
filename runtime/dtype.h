// Element types the runtime can move and reduce.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <span>
#include <string_view>

namespace kf {

enum class DType : std::uint8_t { u8, u16, u32, u64, i8, i16, i32, i64, f16, bf16, f32, f64 };

inline constexpr DType kAllDTypes[] = {DType::u8,  DType::u16,  DType::u32, DType::u64,
                                       DType::i8,  DType::i16,  DType::i32, DType::i64,
                                       DType::f16, DType::bf16, DType::f32, DType::f64};

// Inline: views size their slices with it on every message a collective handles.
constexpr std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::u8:
    case DType::i8:
      return 1;
    case DType::u16:
    case DType::i16:
    case DType::f16:
    case DType::bf16:
      return 2;
    case DType::u32:
    case DType::i32:
    case DType::f32:
      return 4;
    case DType::u64:
    case DType::i64:
    case DType::f64:
      return 8;
  }
  std::abort();  // not a DType
}
std::string_view dtype_name(DType t);                     // "u8", ..., "bf16", "f32"
std::optional<DType> parse_dtype(std::string_view name);  // accepts the names above
bool is_floating(DType t);

}  // namespace kf
