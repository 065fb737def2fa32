// How a buffer is cut into the pieces that travel independently.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace kf {

// The size of the pieces a collective travels in, unless told otherwise (EngineOptions,
// a scenario's `chunk`, kfbench -chunk): large enough that a piece's header and per-message work
// are small beside its bytes, small enough that pieces pipeline through trees and rings.
inline constexpr std::size_t kDefaultChunkBytes = std::size_t{1} << 20;

// AUTO's allreduces across hosts go round a ring rather than over trees once each of the ring's n
// parts (the buffer / n) is at least this big (EngineOptions::auto_ring_part_bytes;
// docs/performance.md has the measurement behind it).
inline constexpr std::size_t kDefaultAutoRingPartBytes = std::size_t{128} << 10;

// ... and on one host once each part is at least this big, while every worker has a core
// (EngineOptions::auto_local_ring_part_bytes, host_cores). Lower: a step between processes of one
// host costs less than one across a link, and STAR's root, which reads and folds every other
// worker's buffer alone, falls further behind the more workers there are. With more workers than
// cores the ring's extra steps cost more than that (docs/performance.md has the measurements).
inline constexpr std::size_t kDefaultAutoLocalRingPartBytes = std::size_t{32} << 10;

// AUTO's allreduces of at most this size go by recursive doubling (EngineOptions::
// auto_doubling_bytes). Off (0) by default: on the 2-core development machine it was slower than
// the trees at 4 ranks (docs/performance.md has the measurement).
inline constexpr std::size_t kDefaultAutoDoublingBytes = 0;

// Between exactly two ranks, AUTO's allreduces of at most this size go by recursive doubling
// whatever kDefaultAutoDoublingBytes says (EngineOptions::auto_pair_doubling_bytes): it is then
// one simultaneous exchange, where the trees send the same two messages one after the other.
inline constexpr std::size_t kDefaultAutoPairDoublingBytes = std::size_t{64} << 10;

// Among a power of two of at least 4 ranks, each on a host of its own, AUTO's allreduces that would
// go round the ring go by HALVING_DOUBLING up to this size (EngineOptions::
// auto_halving_doubling_bytes): it sends the ring's bytes in 2 log2 n steps instead of 2(n - 1),
// and where a step's latency still counts beside its bytes the fewer steps pay; from here on the
// ring's even, pipelined steps do as well or better. With several ranks on a host its steps
// between hosts carry more than the ring's (docs/performance.md has the measurements).
inline constexpr std::size_t kDefaultAutoHalvingDoublingBytes = std::size_t{4} << 20;

// AUTO's recursive-doubling threshold for a peer that busy-polls (PeerOptions::busy_poll), unless
// told otherwise: every rank then has a core to poll on, which recursive doubling's steps, where
// every rank sends, need (docs/performance.md has the measurement).
inline constexpr std::size_t kBusyPollAutoDoublingBytes = std::size_t{4} << 10;

struct Range {
  std::size_t first = 0;  // in elements
  std::size_t count = 0;
};

// Consecutive ranges of at most max(1, chunk_bytes / elem_size) elements covering [0, count).
// count == 0 gives no ranges.
std::vector<Range> split_by_bytes(std::size_t count, std::size_t elem_size,
                                  std::size_t chunk_bytes);

// `parts` consecutive ranges covering [offset, offset + count), as even as possible: the first
// count % parts ranges hold one element more. Some ranges are empty when count < parts.
std::vector<Range> split_even(std::size_t offset, std::size_t count, int parts);

// Range `index` of split_even(offset, count, parts), computed rather than looked up: a ring of
// n workers would otherwise keep n ranges per slice and touch a different one per message.
// Inline: a ring locates each arriving message's part with it.
inline Range even_part(std::size_t offset, std::size_t count, int parts, int index) {
  const auto n = static_cast<std::size_t>(parts);
  const auto i = static_cast<std::size_t>(index);
  const std::size_t base = count / n;
  const std::size_t extra = count % n;
  return {offset + i * base + std::min(i, extra), base + (i < extra ? 1 : 0)};
}

}  // namespace kf
