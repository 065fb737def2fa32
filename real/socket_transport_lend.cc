// SocketTransport's lending, both ways. As the lender: the lend slots (a lend holds while its slot
// holds its id; SlotRelease clears it) and the engine's buffers lent to us (min_borrowed_bytes;
// reclaim hands them back, withdrawing what was lent from them). As the receiver: LentSource
// reads a lent payload from the peer's memory and acks the lend when dropped (send_ack), and
// borrow turns lent frames into such payloads.
#include "real/socket_transport.h"

#include <sys/uio.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "real/lend_slots.h"
#include "real/socket_conn.h"
#include "real/sockets.h"
#include "real/wire.h"

namespace kf {
namespace socket_detail {

LendSlots& LendSlots::instance() {
  static auto* slots = new LendSlots;  // never destroyed: peers may read slots until we exit
  return *slots;
}

std::atomic<std::uint64_t>* LendSlots::take(std::uint64_t* id) {
  std::lock_guard lock(mu_);
  *id = ++last_id_;
  std::atomic<std::uint64_t>* slot;
  if (free_.empty()) {
    slot = &slots_.emplace_back(0);
  } else {
    slot = free_.back();
    free_.pop_back();
  }
  slot->store(*id, std::memory_order_seq_cst);
  return slot;
}

void LendSlots::release(std::atomic<std::uint64_t>* slot) {
  slot->store(0, std::memory_order_seq_cst);  // before the owner may change the bytes
  std::lock_guard lock(mu_);
  free_.push_back(slot);
}

}  // namespace socket_detail

void SocketTransport::SlotRelease::operator()(std::atomic<std::uint64_t>* slot) const {
  socket_detail::LendSlots::instance().release(slot);
}

// A payload a same-host peer lent us, read from its memory on demand. Dropping it acks the lend.
class SocketTransport::LentSource final : public PayloadSource {
 public:
  LentSource(SocketTransport& transport, const Conn& c, const wire::Lent& lent)
      : transport_(transport),
        alive_(transport.alive_),
        conn_(c.id),
        peer_(c.peer),
        pid_(c.peer_pid),
        who_(fmt::format("rank {} ({})", c.peer, transport.cluster_.worker(c.peer).to_string())),
        lent_(lent) {}
  ~LentSource() override {
    if (*alive_) transport_.send_ack(peer_, lent_.id);
  }
  LentSource(const LentSource&) = delete;
  LentSource& operator=(const LentSource&) = delete;

  bool read(std::size_t offset, std::byte* into, std::size_t size) override {
    for (std::size_t done = 0; done < size;) {
      iovec local{into + done, size - done};
      iovec remote{reinterpret_cast<void*>(lent_.address + offset + done), size - done};
      const ssize_t n = pid_ > 0 ? ::process_vm_readv(pid_, &local, 1, &remote, 1, 0) : -1;
      if (n <= 0) {
        const int err = pid_ > 0 ? errno : EPERM;
        if (!verify()) return false;  // withdrawn, or gone: that says more than this error
        broken(err);
        return false;
      }
      done += static_cast<std::size_t>(n);
    }
    return true;
  }

  bool verify() override {
    // The payload's reads come first. (TSan cannot model fences; it never sees these reads
    // anyway: the kernel makes them.)
#if defined(__SANITIZE_THREAD__)
    std::atomic_signal_fence(std::memory_order_seq_cst);
#else
    std::atomic_thread_fence(std::memory_order_acquire);
#endif
    std::uint64_t now = 0;
    iovec local{&now, sizeof now};
    iovec remote{reinterpret_cast<void*>(lent_.slot), sizeof now};
    const ssize_t n = pid_ > 0 ? ::process_vm_readv(pid_, &local, 1, &remote, 1, 0) : -1;
    if (n != static_cast<ssize_t>(sizeof now)) {
      broken(pid_ > 0 ? errno : EPERM);
      return false;
    }
    if (now != lent_.id) {
      error_ = fmt::format("{} took back the payload it lent (its operation ended first)", who_);
      return false;
    }
    return true;
  }

  std::string error() const override {
    return error_;
  }

  bool lender_lost() const override {
    return lender_lost_;
  }

 private:
  // The peer's memory cannot be read (it died: ESRCH, its process or memory is gone; or it broke
  // the protocol: an address it does not map): the connection goes too, so every pending
  // operation learns that the peer is lost. Posted: we are inside a reader.
  void broken(int err) {
    lender_lost_ = err == ESRCH;
    error_ =
        lender_lost_
            ? fmt::format("{} is gone (its memory cannot be read: {})", who_, net::errno_text(err))
            : fmt::format("cannot copy a lent payload from {}: {}", who_, net::errno_text(err));
    if (!*alive_) return;
    transport_.loop_.post([t = &transport_, alive = alive_, conn = conn_, error = error_] {
      if (*alive) t->close(conn, error);
    });
  }

  SocketTransport& transport_;
  std::shared_ptr<bool> alive_;
  ConnId conn_;
  int peer_;
  pid_t pid_;
  std::string who_;  // "rank 2 (127.0.0.1:10002)"
  wire::Lent lent_;
  std::string error_;
  bool lender_lost_ = false;
};

bool SocketTransport::borrow(Conn& c, std::vector<Message>& messages) {
  for (const auto& ref : c.decoder.take_lent()) {
    ++stats_.borrowed;
    Payload& p = messages[ref.index].payload;
    p = Payload::remote(ref.size, std::make_shared<LentSource>(*this, c, ref.lent));
    if (handlers_.remote_payloads) continue;  // read where it is used
    if (!p.materialize()) {
      close(c.id, p.error());
      return false;
    }
  }
  return true;
}

void SocketTransport::send_ack(int rank, std::uint64_t id) {
  if (lost_[static_cast<std::size_t>(rank)] || shutting_down_) return;
  const auto it = conns_.find(sending_conn(rank));
  if (it == conns_.end() || it->second->phase != Conn::Phase::established) {
    pending_acks_[static_cast<std::size_t>(rank)].push_back(id);
    return;
  }
  Conn& c = *it->second;
  c.out.push_back({wire::encode_ack(id), Message{}});
  if (c.out.size() == 1) flush(c);
}

std::size_t SocketTransport::min_borrowed_bytes() const {
  return options_.borrow_min_bytes == 0 ? std::numeric_limits<std::size_t>::max()
                                        : options_.borrow_min_bytes;
}

std::vector<int> SocketTransport::reclaim(const void* lender) {
  if (lender == nullptr) return {};
  const auto own = [lender](Message& m) {
    if (m.payload.lender() == lender) m.payload.own();  // same bytes: a partial write goes on
  };
  for (auto& [id, c] : conns_)
    for (auto& item : c->out)
      own(item.message);
  for (auto& queue : waiting_)
    for (auto& m : queue)
      own(m);
  // Withdrawn: the slot is cleared, so a peer reading them later fails that message.
  std::vector<int> unread;
  std::erase_if(lent_, [lender, &unread](const auto& kv) {
    if (kv.second.payload.lender() != lender) return false;
    if (std::find(unread.begin(), unread.end(), kv.second.rank) == unread.end())
      unread.push_back(kv.second.rank);
    return true;
  });
  return unread;
}

}  // namespace kf
