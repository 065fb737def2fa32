// SocketTransport's writing: send queues a message on the destination's connection (or until
// that connection is established), enqueue encodes it (lending its payload when the connection
// allows), and flush writes the queue by scatter/gather without copying payloads. A small message
// with nothing queued before it goes straight into its shared-memory ring or socket, its prefix
// encoded on the stack, so that it allocates nothing. During
// shutdown, a connection whose queue (its bye last) is out is shut for writing.
#include "real/socket_transport.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <utility>

#include "real/lend_slots.h"
#include "real/socket_conn.h"
#include "real/sockets.h"
#include "real/wire.h"

namespace kf {
namespace {

constexpr int kMaxIov = 64;
// Over TCP one flush writes at most this much; the rest goes at the next turn of the loop (the
// connection keeps its EPOLLOUT interest, which is level-triggered). One thread reads and writes
// every connection: a write of megabytes (a ring's queued chunks) would keep it from reading
// the other direction's bytes for a millisecond and more, and between hosts that slows both
// ways (docs/performance.md, "16 MiB between namespaces").
constexpr std::size_t kTcpWriteSlice = 512u << 10;
constexpr std::size_t kTcpShortTail = 64u << 10;
// How soon a writer whose ring was full tries again.
constexpr Duration kRingRetry = std::chrono::microseconds(20);
// A message to a ring with a name up to this long goes straight in, its prefix encoded on the
// stack, when nothing is queued before it.
constexpr std::size_t kStackNameBytes = 256;
// So does one to a socket, with a payload up to this size, in one write of its prefix and payload
// (a larger one goes by the queue, whose flushes share the loop's thread with the reading).
constexpr std::size_t kDirectPayloadBytes = kTcpShortTail;
// What pads a ring's frame after its payload (wire::kBitPadded).
constexpr std::array<std::byte, 8> kZeros{};

}  // namespace

void SocketTransport::send(int destination, Message&& message) {
  if (destination < 0 || destination >= cluster_.size()) return;
  const auto d = static_cast<std::size_t>(destination);
  if (shutting_down_ || lost_[d]) return;  // the engine has been told
  if (destination == rank_) {
    message.payload.own();  // reclaim() cannot reach it in the loop's queue
    loop_.post([this, alive = alive_, m = std::move(message)]() mutable {
      if (*alive && handlers_.on_message) handlers_.on_message(rank_, std::move(m));
    });
    return;
  }
  if (departed_[d]) {
    lose_peer(destination, "it has already shut down");
    return;
  }
  const auto it = conns_.find(sending_conn(destination));
  if (it == conns_.end() || it->second->phase != Conn::Phase::established) {
    waiting_[d].push_back(std::move(message));
    return;
  }
  Conn& c = *it->second;
  if (c.out.empty() && !lends(c, message) && message.header.name.size() <= kStackNameBytes) {
    if (c.writes_ring()) {
      write_ring(c, std::move(message));
      return;
    }
    if (message.payload.size() <= kDirectPayloadBytes) {
      write_socket(c, std::move(message));
      return;
    }
  }
  enqueue(c, std::move(message));
  if (c.out.size() == 1) flush(c);
}

bool SocketTransport::lends(const Conn& c, const Message& message) const {
  if (!c.lend || message.payload.is_phantom()) return false;
  std::size_t lend_min = options_.lend_min_bytes;
  if (c.writes_ring()) {
    const bool part =
        (message.header.flags & kFlagRingPart) != 0 && options_.ring_part_lend_min_bytes != 0;
    lend_min =
        std::max(lend_min, part ? options_.ring_part_lend_min_bytes : options_.ring_lend_min_bytes);
  }
  return message.payload.size() >= lend_min;
}

void SocketTransport::write_ring(Conn& c, Message&& message) {
  std::array<std::byte, wire::kHeaderBytes + kStackNameBytes + 8> buffer;
  const std::span<const std::byte> prefix(buffer.data(),
                                          wire::encode_prefix(message, buffer, /*padded=*/true));
  const std::span<const std::byte> payload =
      message.payload.is_phantom()
          ? std::span<const std::byte>()
          : std::span<const std::byte>(message.payload.data(), message.payload.size());
  const std::span<const std::byte> suffix(kZeros.data(), wire::suffix_bytes(message, true));
  ShmRing& ring = *c.ring;
  std::size_t written = ring.write(prefix);
  if (written == prefix.size() && !payload.empty()) written += ring.write(payload);
  if (written == prefix.size() + payload.size() && !suffix.empty()) written += ring.write(suffix);
  if (written < prefix.size() + payload.size() + suffix.size()) {
    // Full: the rest waits in the queue, as flush_ring would have left it.
    c.out.push_back(
        {std::vector<std::byte>(prefix.begin(), prefix.end()), std::move(message), suffix.size()});
    c.out_offset = written;
  }
  after_ring_write(c);
}

void SocketTransport::write_socket(Conn& c, Message&& message) {
  std::array<std::byte, wire::kHeaderBytes + kStackNameBytes> buffer;
  const std::size_t prefix_size = wire::encode_prefix(message, buffer);
  const std::size_t payload_size = message.payload.is_phantom() ? 0 : message.payload.size();
  iovec iov[2] = {{buffer.data(), prefix_size},
                  {const_cast<std::byte*>(message.payload.data()), payload_size}};
  ssize_t n;
  do {
    n = c.write_iov(iov, payload_size > 0 ? 2 : 1);
  } while (n < 0 && errno == EINTR);
  if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
    close(c.id, fmt::format("write to {} failed: {}", c.address, c.io_error(errno)));
    return;
  }
  const auto written = static_cast<std::size_t>(std::max<ssize_t>(n, 0));
  if (written == prefix_size + payload_size) return;
  // The socket is full: the rest waits in the queue, as flush would have left it.
  c.out.push_back(
      {std::vector<std::byte>(buffer.data(), buffer.data() + prefix_size), std::move(message)});
  c.out_offset = written;
  update_interest(c);
}

void SocketTransport::enqueue(Conn& c, Message message) {
  if (lends(c, message)) {
    std::uint64_t id = 0;
    std::atomic<std::uint64_t>* slot = socket_detail::LendSlots::instance().take(&id);
    const wire::Lent lent{reinterpret_cast<std::uintptr_t>(message.payload.data()), id,
                          reinterpret_cast<std::uintptr_t>(slot)};
    auto prefix = wire::encode_lent_prefix(message, lent, /*padded=*/c.writes_ring());
    lent_.emplace(id, LentPayload{c.peer, std::move(message.payload),  // the bytes do not move
                                  std::unique_ptr<std::atomic<std::uint64_t>, SlotRelease>(slot)});
    ++stats_.lent;
    c.out.push_back({std::move(prefix), Message{}});
    return;
  }
  const bool padded = c.writes_ring();
  auto prefix = wire::encode_prefix(message, padded);
  const std::size_t suffix = wire::suffix_bytes(message, padded);
  c.out.push_back({std::move(prefix), std::move(message), suffix});
}

void SocketTransport::flush(Conn& c) {
  if (c.writes_ring()) {
    flush_ring(c);
    return;
  }
  std::size_t slice_left = c.tcp ? kTcpWriteSlice : std::numeric_limits<std::size_t>::max();
  while (!c.out.empty() && slice_left > 0) {
    iovec iov[kMaxIov];
    int count = 0;
    std::size_t skip = c.out_offset;
    std::size_t room = slice_left;
    for (auto& item : c.out) {
      if (count + 2 > kMaxIov || room == 0) break;
      auto add = [&](const std::byte* p, std::size_t len) {
        if (skip >= len) {
          skip -= len;
          return;
        }
        // A message's last bytes go with it where fewer than kTcpShortTail would be left.
        std::size_t n = std::min(len - skip, room);
        if (len - skip - n < kTcpShortTail) n = len - skip;
        if (n == 0) return;
        iov[count++] = iovec{const_cast<std::byte*>(p + skip), n};
        room -= std::min(room, n);
        skip = 0;
      };
      add(item.prefix.data(), item.prefix.size());
      if (!item.message.payload.is_phantom()) {
        add(item.message.payload.data(), item.message.payload.size());
      }
    }
    const ssize_t n = c.write_iov(iov, count);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      close(c.id, fmt::format("write to {} failed: {}", c.address, c.io_error(errno)));
      return;
    }
    auto left = static_cast<std::size_t>(n);
    slice_left -= std::min(slice_left, left);
    while (left > 0) {
      const std::size_t rest = c.out.front().wire_size() - c.out_offset;
      if (left < rest) {
        c.out_offset += left;
        left = 0;
      } else {
        left -= rest;
        c.out.pop_front();
        c.out_offset = 0;
      }
    }
    while (!c.out.empty() && c.out.front().wire_size() == c.out_offset) {  // empty items
      c.out.pop_front();
      c.out_offset = 0;
    }
  }
  if (c.out.empty() && shutting_down_ && !c.write_shut) {
    ::shutdown(c.fd.get(), SHUT_WR);  // our bye is out; wait for the peer's close
    c.write_shut = true;
  }
  update_interest(c);
}

void SocketTransport::flush_ring(Conn& c) {
  ShmRing& ring = *c.ring;
  bool full = false;
  while (!c.out.empty() && !full) {
    Conn::Out& item = c.out.front();
    const std::span<const std::byte> prefix(item.prefix);
    const std::span<const std::byte> payload =
        item.message.payload.is_phantom()
            ? std::span<const std::byte>()
            : std::span<const std::byte>(item.message.payload.data(), item.message.payload.size());
    const std::span<const std::byte> suffix(kZeros.data(), item.suffix);
    // The frame's bytes from out_offset on: the prefix's, the payload's, then the padding.
    while (c.out_offset < item.wire_size()) {
      const std::size_t body = prefix.size() + payload.size();
      const auto rest = c.out_offset < prefix.size() ? prefix.subspan(c.out_offset)
                        : c.out_offset < body        ? payload.subspan(c.out_offset - prefix.size())
                                                     : suffix.subspan(c.out_offset - body);
      const std::size_t n = ring.write(rest);
      c.out_offset += n;
      if (n < rest.size()) {
        full = true;
        break;
      }
    }
    if (full) break;
    c.out.pop_front();
    c.out_offset = 0;
  }
  after_ring_write(c);
}

void SocketTransport::after_ring_write(Conn& c) {
  ShmRing& ring = *c.ring;
  if (ring.publish()) {
    // The reader sleeps: one byte on the socket wakes it. EAGAIN means the socket already holds
    // unread doorbells, which wake it as well; a broken socket shows on the reading side.
    const char bell = 0;
    ++stats_.doorbells;
    [[maybe_unused]] const auto n = ::send(c.fd.get(), &bell, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
  }
  if (!c.out.empty()) {
    // Full: the reader frees room as it reads, with no word to us, so look again shortly.
    if (c.ring_retry == 0) {
      c.ring_retry = loop_.post_after(kRingRetry, [this, alive = alive_, id = c.id] {
        if (!*alive) return;
        const auto it = conns_.find(id);
        if (it == conns_.end()) return;
        it->second->ring_retry = 0;
        flush(*it->second);
      });
    }
    return;
  }
  if (shutting_down_ && !c.write_shut) {
    ::shutdown(c.fd.get(), SHUT_WR);  // our bye is in the ring: the reader drains it at the end
    c.write_shut = true;
  }
}

void SocketTransport::update_interest(Conn& c) {
  std::uint32_t want = EPOLLIN | EPOLLRDHUP;
  if (c.phase == Conn::Phase::connecting || (!c.out.empty() && !c.writes_ring())) want |= EPOLLOUT;
  if (want != c.interest) {
    c.interest = want;
    loop_.modify(c.watch, want);
  }
}

void SocketTransport::enqueue_bye(Conn& c) {
  c.out.push_back({wire::encode_bye(), Message{}});
  flush(c);
}

}  // namespace kf
