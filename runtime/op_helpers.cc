#include "runtime/op_helpers.h"

#include <fmt/format.h>

#include <cstring>

namespace kf {

Payload payload_of(ConstBufferView view) {
  if (view.is_phantom()) return Payload::phantom(view.size_bytes());
  return Payload::copy_of(view.data(), view.size_bytes());
}

Message collective_message(const std::string& name, std::size_t chunk, std::uint32_t step,
                           ConstBufferView view) {
  Message m;
  m.header.kind = MessageKind::collective;
  m.header.name = name;
  m.header.chunk = static_cast<std::uint32_t>(chunk);
  m.header.step = step;
  m.payload = payload_of(view);
  return m;
}

std::optional<std::string> payload_mismatch(const Payload& payload, ConstBufferView dst) {
  if (payload.size() != dst.size_bytes()) {
    return fmt::format("expected {} bytes, got {}", dst.size_bytes(), payload.size());
  }
  if (!dst.is_phantom() && payload.is_phantom() && payload.size() > 0) {
    return "expected data, got a phantom payload";
  }
  return std::nullopt;
}

void copy_payload(BufferView dst, const Payload& payload) {
  if (dst.is_phantom() || payload.is_phantom() || payload.size() == 0) return;
  std::memcpy(dst.data(), payload.data(), payload.size());
}

void reduce_payload(BufferView dst, const Payload& payload, ReduceOp op) {
  if (dst.is_phantom() || payload.is_phantom() || payload.size() == 0) return;
  reduce_into(dst.data(), payload.data(), dst.count(), dst.dtype(), op);
}

void reduce_payload_to(BufferView dst, ConstBufferView a, const Payload& payload, ReduceOp op) {
  if (dst.is_phantom() || payload.is_phantom() || payload.size() == 0) return;
  reduce_to(dst.data(), a.data(), payload.data(), dst.count(), dst.dtype(), op);
}

void copy_view(BufferView dst, ConstBufferView src) {
  if (dst.is_phantom() || src.is_phantom() || dst.size_bytes() == 0 || dst.data() == src.data()) {
    return;
  }
  std::memmove(dst.data(), src.data(), dst.size_bytes());
}

void divide_view(BufferView data, std::size_t divisor) {
  if (data.is_phantom() || data.count() == 0 || divisor <= 1) return;
  divide(data.data(), data.count(), data.dtype(), divisor);
}

Status bad_argument(std::string_view kind, const std::string& name, int rank,
                    const std::string& what) {
  return Status(ErrorCode::invalid_argument,
                fmt::format("{} '{}' on rank {}: {}", kind, name, rank, what));
}

}  // namespace kf
