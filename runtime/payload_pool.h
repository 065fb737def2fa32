// PayloadPool: large payload buffers are kept for the next payload of their size instead of going
// back to the allocator. C++17: included by runtime/message.h, which world glue includes.
//
// Why: a steady run of collectives should allocate nothing. glibc may give a large block back to
// the system when it is freed (an mmap'd one at once, the heap's top past its trim threshold),
// and every page of the next block is then faulted in afresh. Which blocks go back depends on
// the thread's arena, so the same transport can pay, on one thread and not on another,
// hundreds of page faults per megabyte moved, far more than the copy (docs/performance.md,
// "A pool for payload buffers").
//
// Contract: take(n) returns at least n bytes, aligned to kAlignment; give(p, n) takes back a
// block that take(n) returned, with the same n, from any thread. Only sizes from kMinBytes up are
// pooled; callers route smaller ones elsewhere. The pool keeps at most blocks_per_class(size) of
// each size class and kMaxCachedBytes in all; the rest is freed.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kf::payload_pool {

inline constexpr std::size_t kMinBytes = std::size_t{64} << 10;
inline constexpr std::size_t kMaxCachedBytes = std::size_t{256} << 20;
// A class keeps kPerClassBytes' worth of blocks, and at least kMinPerClass. By bytes, not by
// count: a collective in small chunks has many payloads of one class in flight at once (a 16 MiB
// ring allreduce in 256 KiB chunks receives 32 per step at 2 ranks), and each one the pool could
// not keep was faulted in afresh next time.
inline constexpr std::size_t kPerClassBytes = std::size_t{64} << 20;
inline constexpr std::size_t kMinPerClass = 8;
inline constexpr std::size_t kAlignment = 64;

// The block size that serves n bytes: n rounded up to a quarter of its power of two (at most
// 25% more than asked).
std::size_t class_size(std::size_t n);

// How many blocks of class `size` (a class_size) the pool keeps at most.
constexpr std::size_t blocks_per_class(std::size_t size) {
  return kPerClassBytes / size > kMinPerClass ? kPerClassBytes / size : kMinPerClass;
}

void* take(std::size_t n);
void give(void* p, std::size_t n) noexcept;

struct Stats {
  std::uint64_t hits = 0;    // takes served from the pool
  std::uint64_t misses = 0;  // takes that allocated
  std::size_t cached_bytes = 0;
};
Stats stats();

}  // namespace kf::payload_pool
