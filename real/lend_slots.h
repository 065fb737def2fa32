// Internal to real/: the registry of lend slots behind SocketTransport's lending (see
// socket_transport.h, "Zero copy"). Defined in socket_transport_lend.cc.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <vector>

namespace kf::socket_detail {

// Lend slots: one per payload lent out, in memory that is never freed (a receiver may read a
// slot long after its lend ended, and must then find it cleared, never unmapped). Shared by every
// transport of the process; ids are never reused.
class LendSlots {
 public:
  static LendSlots& instance();
  // A free slot, now holding a fresh id (returned in *id).
  std::atomic<std::uint64_t>* take(std::uint64_t* id);
  // Clears the slot (before the owner may change the bytes), then frees it for another lend.
  void release(std::atomic<std::uint64_t>* slot);

 private:
  std::mutex mu_;
  std::uint64_t last_id_ = 0;
  std::deque<std::atomic<std::uint64_t>> slots_;  // a deque never moves its elements
  std::vector<std::atomic<std::uint64_t>*> free_;
};

}  // namespace kf::socket_detail
