// Small pieces every collective algorithm shares: turning a buffer slice into a payload and an
// arriving payload back into data, with the size checks that catch a peer speaking another
// protocol.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "runtime/buffer.h"
#include "runtime/message.h"
#include "runtime/reduce.h"
#include "runtime/status.h"

namespace kf {

// Steps of the graph-pair algorithm.
inline constexpr std::uint32_t kStepReduce = 0;
inline constexpr std::uint32_t kStepBroadcast = 1;

Payload payload_of(ConstBufferView view);  // a copy (or a phantom)
Message collective_message(const std::string& name, std::size_t chunk, std::uint32_t step,
                           ConstBufferView view);

// Why a payload cannot land. protocol: the sender sent what the operation does not expect (a size,
// a phantom) or took its lent bytes back early; peer_lost: the same-host peer that lent the bytes
// ended while they were read.
struct PayloadError {
  ErrorCode code = ErrorCode::protocol;
  std::string why;
};
// A failed() payload's error.
PayloadError payload_failure(const Payload& payload);

namespace detail {
// The out-of-line halves of the checks below: what is left once the common case is ruled out.
std::optional<PayloadError> describe_payload_mismatch(const Payload& payload, ConstBufferView dst);
std::optional<PayloadError> copy_payload_bytes(BufferView dst, const Payload& payload);
std::optional<PayloadError> reduce_payload_bytes(BufferView dst, const Payload& payload,
                                                 ReduceOp op);
std::optional<PayloadError> reduce_payload_bytes_to(BufferView dst, ConstBufferView a,
                                                    const Payload& payload, ReduceOp op);
// Phantoms and empty payloads carry no bytes to land.
inline bool no_bytes_to_land(ConstBufferView dst, const Payload& payload) {
  return dst.is_phantom() || payload.is_phantom() || payload.size() == 0;
}
}  // namespace detail

// The common case of each check is inline: a simulation at a thousand workers passes every one of
// its millions of messages through them, and nearly all are phantoms of the expected size.

// Empty when `payload` can land in `dst`; else the reason (size or phantom mismatch, or a remote
// payload that could not be read).
inline std::optional<PayloadError> payload_mismatch(const Payload& payload, ConstBufferView dst) {
  if (payload.size() == dst.size_bytes() && (dst.is_phantom() || !payload.is_phantom()) &&
      !payload.failed()) {
    return std::nullopt;
  }
  return detail::describe_payload_mismatch(payload, dst);
}
// Each lands a payload in `dst`, reading a remote one straight from its owner (no buffer in
// between); copy_payload leaves a payload placed at `dst` (Operation::landing) where it is. Empty
// on success; else why its bytes could not be read (dst is then unspecified).
[[nodiscard]] inline std::optional<PayloadError> copy_payload(BufferView dst,
                                                              const Payload& payload) {
  if (detail::no_bytes_to_land(dst, payload)) return std::nullopt;
  return detail::copy_payload_bytes(dst, payload);
}
[[nodiscard]] inline std::optional<PayloadError> reduce_payload(BufferView dst,
                                                                const Payload& payload,
                                                                ReduceOp op) {
  if (detail::no_bytes_to_land(dst, payload)) return std::nullopt;
  return detail::reduce_payload_bytes(dst, payload, op);
}
// dst = op(a, payload): folds an arrival into a fresh accumulator without copying `a` first.
[[nodiscard]] inline std::optional<PayloadError> reduce_payload_to(BufferView dst,
                                                                   ConstBufferView a,
                                                                   const Payload& payload,
                                                                   ReduceOp op) {
  if (detail::no_bytes_to_land(dst, payload)) return std::nullopt;
  return detail::reduce_payload_bytes_to(dst, a, payload, op);
}
void copy_view(BufferView dst, ConstBufferView src);  // no-op for phantoms and for dst == src
void divide_view(BufferView data, std::size_t divisor);

// invalid_argument status for a collective's bad arguments: "allreduce 'x' on rank 2: <what>".
Status bad_argument(std::string_view kind, const std::string& name, int rank,
                    const std::string& what);

}  // namespace kf
