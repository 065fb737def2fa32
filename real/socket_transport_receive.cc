// SocketTransport's reading: frames come off an established connection in rounds (small reads
// through the staging buffer, large payload remainders straight into the Message), bounded per
// readiness event so that one peer cannot hog the loop, and each round is delivered before the
// next. Data frames are taken on inbound connections, and on an outbound one only where it is
// duplex: any other brings back nothing but the peer's bye.
#include "real/socket_transport.h"

#include <sys/socket.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "real/ring_slice.h"
#include "real/socket_conn.h"
#include "real/sockets.h"

namespace kf {
namespace {

constexpr std::size_t kDirectMin = 64u << 10;  // smaller payload remainders go via staging
// Ring payloads from this size are read where they lie (RingSlice): a slice costs an allocation
// and, if kept past its round, a copy anyway; below it a copy costs less.
constexpr std::size_t kInPlaceMinBytes = 16u << 10;
// And up to a quarter of the ring: a payload read in place keeps its writer from its room until
// the round is delivered (its fold, say), and a larger one left the writer too little for the
// next frame meanwhile (2 ranks, 512 KiB parts in a 1 MiB ring: slower than copied out).
constexpr std::size_t kInPlaceMaxPerRing = 4;
constexpr std::size_t kReadBudget = 16u << 20;  // per readiness event, so one peer cannot hog

}  // namespace

void SocketTransport::read_frames(Conn& first) {
  if (first.ring && !first.outbound) {
    read_ring_socket(first);
    return;
  }
  const ConnId id = first.id;
  std::size_t budget = kReadBudget;
  // Reads in rounds of at most 64 messages, delivering each round before the next, until the
  // socket is drained or the budget (fairness between connections) is spent.
  while (budget > 0) {
    const auto it = conns_.find(id);
    if (it == conns_.end()) return;
    Conn& c = *it->second;
    RoundBuffer round(spare_round_);
    std::vector<Message>& messages = round.messages;
    bool drained = false;
    while (budget > 0) {
      ssize_t n;
      const auto direct = c.decoder.direct_target();
      const bool into_payload = direct.size() >= kDirectMin;
      const std::size_t asked = into_payload ? std::min(direct.size(), budget) : staging_.size();
      if (into_payload) {
        n = c.read_some(direct.data(), asked);
      } else {
        n = c.read_some(staging_.data(), asked);
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        drained = true;
        break;
      }
      if (n <= 0) {
        const bool orderly = c.decoder.saw_bye();
        const std::string why =
            orderly ? std::string()
                    : fmt::format("connection {} {} {}", c.outbound ? "to" : "from", c.address,
                                  n == 0 ? "closed without a bye" : c.io_error(errno));
        for (const auto ack : c.decoder.take_acks())
          lent_.erase(ack);
        if (!borrow(c, messages)) return;
        const int from = c.peer;
        deliver(from, messages);  // may close this connection: c is not used after it
        if (orderly && from >= 0) depart(from);
        close(id, why);
        return;
      }
      budget -= std::min(budget, static_cast<std::size_t>(n));
      if (into_payload) {
        c.decoder.commit(static_cast<std::size_t>(n), messages);
      } else {
        c.decoder.feed(std::span<const std::byte>(staging_.data(), static_cast<std::size_t>(n)),
                       messages);
      }
      if (c.decoder.failed() || c.decoder.saw_bye() || messages.size() >= 64) break;
      // A short read drained the socket: no second recv just to see EAGAIN (a small message
      // would pay a syscall for it). The watch is level-triggered, so bytes that arrive after
      // this read wake the loop again. Not through TLS: a session may hold decrypted records
      // the socket no longer shows.
      if (!c.tls && static_cast<std::size_t>(n) < asked) {
        drained = true;
        break;
      }
    }
    if (!finish_round(c, messages)) return;
    if (drained) return;
  }
}

void SocketTransport::land_payloads(Conn& c) {
  if (options_.land_min_bytes == 0) return;
  c.decoder.set_lander(
      [this, peer = c.peer](const MessageHeader& header, std::size_t bytes) -> Landing {
        if (!handlers_.landing || lost_[static_cast<std::size_t>(peer)]) return {};
        return handlers_.landing(peer, header, bytes);
      },
      options_.land_min_bytes);
}

bool SocketTransport::finish_round(Conn& c, std::vector<Message>& messages) {
  const ConnId id = c.id;
  const int peer = c.peer;
  stats_.landings_dropped += c.decoder.take_dropped_landings();
  for (const auto ack : c.decoder.take_acks())
    lent_.erase(ack);
  if (!borrow(c, messages)) return false;
  const bool bye = c.decoder.saw_bye();
  const std::string error = c.decoder.failed() ? c.decoder.error() : std::string();
  if (c.outbound && !c.duplex && !messages.empty()) {
    close(id, fmt::format("protocol error: data frames from {} on our outbound connection",
                          endpoint_of(peer).to_string()));
    return false;
  }
  if (c.duplex && c.outbound) stats_.delivered_duplex += messages.size();
  deliver(peer, messages);  // may close any connection, this one included
  if (!error.empty()) {
    ++stats_.refused;
    refusal_log_.log(fmt::format("dropping the connection from rank {}: {}", peer, error));
    close(id, "protocol error: " + error);
    return false;
  }
  if (bye) {
    depart(peer);
    close(id, "");
    return false;
  }
  return conns_.contains(id);
}

void SocketTransport::read_ring_socket(Conn& c) {
  const ConnId id = c.id;
  // Doorbells carry nothing: read them all (they are few: one per sleep of ours), to see the end.
  ssize_t n = 0;
  int err = EAGAIN;
  for (int reads = 0; reads < 16; ++reads) {  // a peer that floods its socket comes back later
    n = c.read_some(staging_.data(), staging_.size());
    if (n > 0) continue;
    if (n < 0 && errno == EINTR) continue;
    err = n == 0 ? 0 : errno;
    break;
  }
  const bool ended = n == 0 || (err != EAGAIN && err != EWOULDBLOCK);
  // What the peer wrote before its end is in the ring: deliver it first.
  bool found = false;
  if (!drain_ring(id, found)) return;
  if (!ended) return;
  const auto it = conns_.find(id);
  if (it == conns_.end()) return;
  const bool orderly = it->second->decoder.saw_bye();  // (a bye closes it in drain_ring)
  close(id, orderly ? std::string()
                    : fmt::format("connection from {} {}", it->second->address,
                                  n == 0 ? "closed without a bye" : net::errno_text(err)));
}

bool SocketTransport::drain_ring(ConnId id, bool& found) {
  // Bounded like a socket's reads, so that one peer cannot hog the loop.
  for (std::size_t budget = kReadBudget; budget > 0;) {
    const auto it = conns_.find(id);
    if (it == conns_.end()) return false;
    Conn& c = *it->second;
    if (c.ring_held) return true;  // being delivered in place, further up this thread's stack
    ShmRing& ring = *c.ring;
    const auto [first, second] = ring.readable();
    if (ring.corrupt()) {
      ++stats_.refused;
      close(id,
            fmt::format("protocol error: the shared-memory ring from {} is corrupt", c.address));
      return false;
    }
    if (first.empty()) return true;
    found = true;
    RoundBuffer round(spare_round_);
    std::vector<Message>& messages = round.messages;
    const std::size_t n = first.size() + second.size();
    budget -= std::min(budget, n);
    // Large payloads stay in the ring while their round is delivered (RingSlice), so the
    // operations fold and copy them from there. The ring gets the bytes back only afterwards,
    // once every slice still held is detached; until then nothing drains it again (ring_held:
    // its bytes are still unconsumed). Handlers that take bytes only get copies.
    std::vector<std::shared_ptr<RingSlice>> slices;
    const wire::InPlace in_place{.min_bytes = kInPlaceMinBytes,
                                 .max_bytes = ring.capacity() / kInPlaceMaxPerRing,
                                 .make = [&slices, &c](std::span<const std::byte> bytes) {
                                   // Each slice keeps the ring mapped while it points into it.
                                   auto slice = std::make_shared<RingSlice>(c.ring, bytes.data(),
                                                                            bytes.size());
                                   slices.push_back(slice);
                                   return Payload::remote(bytes.size(), std::move(slice));
                                 }};
    const wire::InPlace* place = handlers_.remote_payloads ? &in_place : nullptr;
    c.decoder.feed(first, messages, place);
    if (!second.empty() && !c.decoder.failed()) c.decoder.feed(second, messages, place);
    if (slices.empty()) {  // all copied out: the writer gets its room back before delivery
      ring.consume(n);
      if (!finish_round(c, messages)) return false;
      continue;
    }
    // Mapped until its bytes are given back below, even if delivery closes the connection (a
    // copy of the pointer only here: a round of small messages copies it nowhere).
    const std::shared_ptr<ShmRing> held = c.ring;
    c.ring_held = true;
    const bool open = finish_round(c, messages);  // may close this connection: c is not used
    stats_.read_in_place += slices.size();
    for (auto& slice : slices) {
      if (slice.use_count() == 1) continue;
      slice->detach();  // kept past its round
      ++stats_.kept_from_ring;
    }
    slices.clear();
    const auto still = conns_.find(id);
    if (still == conns_.end()) return false;
    still->second->ring_held = false;
    if (!open) return false;
    held->consume(n);
  }
  return true;
}

bool SocketTransport::poll() {
  bool found = false;
  // By index: delivering may close connections, and so shorten the list.
  for (std::size_t i = 0; i < ring_readers_.size(); ++i)
    drain_ring(ring_readers_[i], found);
  return found;
}

bool SocketTransport::arm() {
  // Every ring's request first, then one fence for them all (a membarrier where the producers
  // publish lightly), then every ring's last look.
  bool light = false;
  for (const ConnId id : ring_readers_) {
    const auto it = conns_.find(id);
    if (it == conns_.end()) continue;
    it->second->ring->request_doorbell();
    light = light || it->second->ring->publishes_lightly();
  }
  if (ring_readers_.empty()) return true;
  if (!ShmRing::fence_before_sleep(light)) return false;
  for (const ConnId id : ring_readers_) {
    const auto it = conns_.find(id);
    if (it != conns_.end() && it->second->ring->has_unread()) return false;
  }
  return true;
}

void SocketTransport::disarm() {
  for (const ConnId id : ring_readers_) {
    const auto it = conns_.find(id);
    if (it != conns_.end()) it->second->ring->disarm();
  }
}

void SocketTransport::deliver(int peer, std::vector<Message>& messages) {
  for (auto& m : messages) {
    if (lost_[static_cast<std::size_t>(peer)] || !handlers_.on_message) break;
    ++stats_.delivered;
    stats_.bytes_received += m.payload.size();
    if (m.payload.is_placed()) ++stats_.landed;
    handlers_.on_message(peer, std::move(m));
  }
  messages.clear();
}

}  // namespace kf
