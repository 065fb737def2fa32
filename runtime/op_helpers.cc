#include "runtime/op_helpers.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
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

PayloadError payload_failure(const Payload& payload) {
  return PayloadError{payload.lender_lost() ? ErrorCode::peer_lost : ErrorCode::protocol,
                      payload.error()};
}

namespace detail {

std::optional<PayloadError> describe_payload_mismatch(const Payload& payload, ConstBufferView dst) {
  if (payload.size() != dst.size_bytes()) {
    return PayloadError{
        .why = fmt::format("expected {} bytes, got {}", dst.size_bytes(), payload.size())};
  }
  if (!dst.is_phantom() && payload.is_phantom() && payload.size() > 0) {
    return PayloadError{.why = "expected data, got a phantom payload"};
  }
  if (payload.failed()) return payload_failure(payload);
  return std::nullopt;
}

}  // namespace detail

namespace {

// Remote payloads are folded in pieces read into this buffer: small enough to stay in cache
// between the read and the fold, large enough that the reads cost little.
constexpr std::size_t kPieceBytes = 256u << 10;

std::byte* scratch() {
  thread_local PayloadBytes piece(kPieceBytes);
  return piece.data();
}

std::optional<PayloadError> read_error(PayloadSource& source) {
  std::string why = source.error();
  if (why.empty()) why = "the lent payload could not be read";
  return PayloadError{source.lender_lost() ? ErrorCode::peer_lost : ErrorCode::protocol,
                      std::move(why)};
}

// Calls fold(offset, bytes, size) for consecutive pieces of a remote payload of elements of
// `elem` bytes. Bytes this process can read where they lie are folded from there when they are
// aligned for their elements (a ring's frames leave them wherever the name ends); otherwise, and
// for bytes that must be read, each piece is read into a buffer that stays in cache.
template <typename Fold>
std::optional<PayloadError> fold_remote(PayloadSource& source, std::size_t size, std::size_t elem,
                                        Fold fold) {
  if (const std::byte* here = source.bytes_here();
      here != nullptr && reinterpret_cast<std::uintptr_t>(here) % elem == 0) {
    fold(0, here, size);
    return std::nullopt;
  }
  std::byte* piece = scratch();
  for (std::size_t offset = 0; offset < size; offset += kPieceBytes) {
    const std::size_t n = std::min(kPieceBytes, size - offset);
    if (!source.read(offset, piece, n)) return read_error(source);
    fold(offset, piece, n);
  }
  if (!source.verify()) return read_error(source);
  return std::nullopt;
}

}  // namespace

namespace detail {

std::optional<PayloadError> copy_payload_bytes(BufferView dst, const Payload& payload) {
  if (payload.failed()) return payload_failure(payload);
  if (PayloadSource* source = payload.source()) {
    if (const std::byte* here = source->bytes_here()) {
      std::memcpy(dst.data(), here, payload.size());
      return std::nullopt;
    }
    if (!source->read(0, dst.data(), payload.size()) || !source->verify()) {
      return read_error(*source);
    }
    return std::nullopt;
  }
  // A placed payload (Operation::landing) was received where it belongs already.
  if (payload.data() != dst.data()) std::memcpy(dst.data(), payload.data(), payload.size());
  return std::nullopt;
}

std::optional<PayloadError> reduce_payload_bytes(BufferView dst, const Payload& payload,
                                                 ReduceOp op) {
  if (payload.failed()) return payload_failure(payload);
  if (PayloadSource* source = payload.source()) {
    const std::size_t elem = dst.elem_size();
    return fold_remote(*source, payload.size(), elem,
                       [&](std::size_t offset, const std::byte* bytes, std::size_t n) {
                         reduce_into(dst.data() + offset, bytes, n / elem, dst.dtype(), op);
                       });
  }
  reduce_into(dst.data(), payload.data(), dst.count(), dst.dtype(), op);
  return std::nullopt;
}

std::optional<PayloadError> reduce_payload_bytes_to(BufferView dst, ConstBufferView a,
                                                    const Payload& payload, ReduceOp op) {
  if (payload.failed()) return payload_failure(payload);
  if (PayloadSource* source = payload.source()) {
    const std::size_t elem = dst.elem_size();
    return fold_remote(*source, payload.size(), elem,
                       [&](std::size_t offset, const std::byte* bytes, std::size_t n) {
                         reduce_to(dst.data() + offset, a.data() + offset, bytes, n / elem,
                                   dst.dtype(), op);
                       });
  }
  reduce_to(dst.data(), a.data(), payload.data(), dst.count(), dst.dtype(), op);
  return std::nullopt;
}

}  // namespace detail

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
