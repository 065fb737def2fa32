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

// Empty when `payload` can land in `dst`; else the reason (size or phantom mismatch, or a remote
// payload that could not be read).
std::optional<std::string> payload_mismatch(const Payload& payload, ConstBufferView dst);
// Each lands a payload in `dst`, reading a remote one straight from its owner (no buffer in
// between). Empty on success; else why its bytes could not be read (dst is then unspecified).
[[nodiscard]] std::optional<std::string> copy_payload(BufferView dst, const Payload& payload);
[[nodiscard]] std::optional<std::string> reduce_payload(BufferView dst, const Payload& payload,
                                                        ReduceOp op);
// dst = op(a, payload): folds an arrival into a fresh accumulator without copying `a` first.
[[nodiscard]] std::optional<std::string> reduce_payload_to(BufferView dst, ConstBufferView a,
                                                           const Payload& payload, ReduceOp op);
void copy_view(BufferView dst, ConstBufferView src);  // no-op for phantoms and for dst == src
void divide_view(BufferView data, std::size_t divisor);

// invalid_argument status for a collective's bad arguments: "allreduce 'x' on rank 2: <what>".
Status bad_argument(std::string_view kind, const std::string& name, int rank,
                    const std::string& what);

}  // namespace kf
