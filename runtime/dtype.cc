#include "runtime/dtype.h"

namespace kf {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::u8:
      return "u8";
    case DType::u16:
      return "u16";
    case DType::u32:
      return "u32";
    case DType::u64:
      return "u64";
    case DType::i8:
      return "i8";
    case DType::i16:
      return "i16";
    case DType::i32:
      return "i32";
    case DType::i64:
      return "i64";
    case DType::f16:
      return "f16";
    case DType::bf16:
      return "bf16";
    case DType::f32:
      return "f32";
    case DType::f64:
      return "f64";
  }
  return "unknown";
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (DType t : kAllDTypes) {
    if (name == dtype_name(t)) return t;
  }
  // Common long-hand spellings (numpy / torch / C).
  struct Alias {
    std::string_view name;
    DType type;
  };
  static constexpr Alias kAliases[] = {
      {"uint8", DType::u8},    {"uint16", DType::u16}, {"uint32", DType::u32},
      {"uint64", DType::u64},  {"int8", DType::i8},    {"int16", DType::i16},
      {"int32", DType::i32},   {"int", DType::i32},    {"int64", DType::i64},
      {"float16", DType::f16}, {"half", DType::f16},   {"bfloat16", DType::bf16},
      {"float32", DType::f32}, {"float", DType::f32},  {"float64", DType::f64},
      {"double", DType::f64},
  };
  for (const Alias& a : kAliases) {
    if (name == a.name) return a.type;
  }
  return std::nullopt;
}

bool is_floating(DType t) {
  switch (t) {
    case DType::f16:
    case DType::bf16:
    case DType::f32:
    case DType::f64:
      return true;
    default:
      return false;
  }
}

}  // namespace kf
