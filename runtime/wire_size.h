// A message's size on the wire: the one definition every world uses. The real transport frames a
// message as a fixed header, its name and its payload (real/wire.h lays the header out), and both
// simulated worlds charge the network for exactly those bytes, carried in TCP segments over
// point-to-point links. C++17: included by the ns-3 glue.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/message.h"

namespace kf {

// The fixed part of a frame (real/wire.h: kind, bits, name length, chunk, step, tag, version,
// payload length).
inline constexpr std::size_t kFrameHeaderBytes = 40;

// Bytes a message occupies in a connection's byte stream.
inline std::uint64_t frame_bytes(const Message& m) {
  return kFrameHeaderBytes + m.header.name.size() + m.payload.size();
}

// Per TCP segment: IPv4 (20) + TCP (20) + the timestamp option (12), as Linux sends by default.
inline constexpr std::uint32_t kTcpIpHeaderBytes = 52;
// Per packet on a point-to-point link: PPP (2), as ns-3's point-to-point devices frame it.
inline constexpr std::uint32_t kPppHeaderBytes = 2;

// The payload of a full TCP segment on a path whose smallest MTU is `mtu`.
inline constexpr std::uint32_t tcp_segment_bytes(std::uint32_t mtu) {
  return mtu - kTcpIpHeaderBytes;
}

}  // namespace kf
