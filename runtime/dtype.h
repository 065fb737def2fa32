// Element types the runtime can move and reduce.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace kf {

enum class DType : std::uint8_t { u8, u16, u32, u64, i8, i16, i32, i64, f16, bf16, f32, f64 };

inline constexpr DType kAllDTypes[] = {DType::u8,  DType::u16,  DType::u32, DType::u64,
                                       DType::i8,  DType::i16,  DType::i32, DType::i64,
                                       DType::f16, DType::bf16, DType::f32, DType::f64};

std::size_t dtype_size(DType t);
std::string_view dtype_name(DType t);                     // "u8", ..., "bf16", "f32"
std::optional<DType> parse_dtype(std::string_view name);  // accepts the names above
bool is_floating(DType t);

}  // namespace kf
