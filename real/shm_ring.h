// ShmRing: a single-producer single-consumer byte ring in memory shared by two processes of one
// host, for the frames of one connection (real/socket_transport.h). The producer creates it (a
// memfd) and names it in its handshake; the consumer maps the same file through /proc/PID/fd/N,
// which the kernel allows only to a process that may inspect the producer's (the same right that
// lending payloads needs). Bytes go in and out as a stream, so a frame larger than the ring just
// takes several turns.
//
// No syscall on either side while the consumer polls (its loop spins, or busy-polls). Before
// its loop sleeps, the consumer arms the ring (arm()); a producer that then publishes bytes is
// told to ring the doorbell (one byte on the connection's socket), and only once per sleep.
//
// Fences: publishing the tail and then reading the consumer's request for a doorbell must not be
// reordered, nor must the consumer's request and its last look at the tail, or a doorbell is
// lost. Where the kernel offers membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED), the producer
// publishes with a plain store and the consumer, only when about to sleep, makes every running
// thread of the producer's process take a full barrier (an asymmetric fence): a publish then
// costs no locked instruction, which would stall the producer until the consumer's cache gives up
// the tail's line. Elsewhere both sides take a sequentially consistent fence.
//
// Lifetimes: the producer keeps the memfd open until the consumer has mapped it (the welcome);
// each side unmaps its view when the connection closes. The consumer never trusts the producer's
// counters: a tail behind the head or more than the capacity ahead of it fails the ring.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "real/fd.h"

namespace kf {

class ShmRing {
 public:
  static constexpr std::size_t kTagBytes = 32;
  using Tag = std::span<const std::byte, kTagBytes>;
  static constexpr std::size_t kMinCapacity = 4u << 10;
  static constexpr std::size_t kMaxCapacity = 64u << 20;
  // A power of two from kMinCapacity to kMaxCapacity.
  static bool valid_capacity(std::size_t capacity);

  // A fresh ring of `capacity` bytes tagged with `tag`, which the consumer checks. Throws
  // std::invalid_argument for a capacity valid_capacity refuses, std::system_error if the memory
  // cannot be had.
  static std::unique_ptr<ShmRing> create(std::size_t capacity, Tag tag);
  // The producer's ring `fd` of process `pid`, mapped here; on failure, nullptr and `why` says
  // what failed (no such process or file, not ours to open, not a ring, another tag).
  static std::unique_ptr<ShmRing> open_peer(pid_t pid, int fd, std::size_t capacity, Tag tag,
                                            std::string& why);

  ShmRing(const ShmRing&) = delete;
  ShmRing& operator=(const ShmRing&) = delete;
  ~ShmRing();

  std::size_t capacity() const { return capacity_; }
  // The producer's memfd, until close_fd(): the number its handshake names.
  int fd() const { return fd_.get(); }
  void close_fd() { fd_.reset(); }

  // Producer. write copies what fits of `bytes` and returns how many it copied; nothing is
  // visible to the consumer before publish(), which returns true when the consumer armed the
  // ring before sleeping (the caller must then wake it, once).
  std::size_t write(std::span<const std::byte> bytes);
  bool publish();

  // Consumer. readable() is what has been published and not consumed, in at most two pieces
  // (the second when it wraps round); an empty first piece means nothing. A corrupt ring
  // (counters no producer of ours could write) gives corrupt() true and nothing to read.
  // consume(n) gives back the first n bytes. (open_peer refuses a ring whose producer publishes
  // lightly where this process cannot make the fence that asks for.)
  std::pair<std::span<const std::byte>, std::span<const std::byte>> readable();
  void consume(std::size_t n);
  bool corrupt() const { return corrupt_; }
  // Before the consumer's loop sleeps: asks the producer for a doorbell, and returns false if
  // bytes are already waiting (then do not sleep). disarm() after waking.
  bool arm();
  void disarm();
  // arm() for several rings with one fence: request_doorbell() on each, then
  // fence_before_sleep(any of them publishes_lightly()), then has_unread() on each. A false
  // fence_before_sleep means it could not be made: do not sleep.
  void request_doorbell();
  bool publishes_lightly() const { return light_; }
  static bool fence_before_sleep(bool light);
  bool has_unread();

 private:
  struct Header;
  ShmRing(void* map, std::size_t map_bytes, Fd fd, std::size_t capacity);
  Header& header() const;
  std::byte* data() const;

  void* map_ = nullptr;
  std::size_t map_bytes_ = 0;
  Fd fd_;
  std::size_t capacity_ = 0;
  // Producer: the head as last read (its bytes are free) and the tail written so far.
  // Consumer: tail_ is the tail as last read; head_seen_ unused.
  std::uint64_t head_seen_ = 0;
  std::uint64_t tail_ = 0;
  std::uint64_t head_ = 0;  // consumer: the next byte to read
  bool corrupt_ = false;
  bool light_ = false;  // the producer publishes with a plain store (see "Fences" above)
};

}  // namespace kf
