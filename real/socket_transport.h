// SocketTransport: the real world's Transport. One persistent connection per ordered peer pair
// (the source connects to the destination and carries source -> destination; between machines
// see duplex below), so per-pair FIFO is the stream's order. Same-host peers use Unix sockets,
// others TCP with TCP_NODELAY. Between machines (TCP, not loopback) the lower rank's connection
// carries both directions (duplex): the higher rank sends its frames back on the connection it
// accepted, so each direction's data carries the other's acknowledgements, and its own connection
// to the lower rank carries nothing but its bye (it still tells the peer's death, and refusals, as
// before). Writes are non-blocking with a per-connection queue sent by scatter/gather (header and
// payload straight from the Message, never concatenated; over TCP at most a slice per turn of the
// loop, so that reads come between); reads parse frames incrementally and receive large payloads
// directly into the Message's buffer. Everything runs on the peer's EpollLoop.
//
// Zero copy: large payloads may be borrowed (the engine's buffers, written from where they are).
// Between same-host processes, large payloads are lent: only their address travels, and the
// receiver reads them with process_vm_readv when it uses them (an engine folds them straight from
// the sender's memory), then acks. Every lend has a slot in memory that is never freed; the
// sender clears it before the bytes may change (ack, withdrawal, loss), and the receiver trusts
// what it read only if the slot still held the lend's id afterwards.
//
// Between same-host peers that may read each other's memory, each connection's frames go through
// a shared-memory ring (real/shm_ring.h) instead of the socket: the receiver's loop polls it with
// no syscall while it spins, and only a receiver asleep is woken, by one byte on the socket,
// which also still tells a peer's death (its end closes) and carries the handshake.
//
// Connecting peers prove themselves with a handshake (cluster version, ranks, and mutual
// HMAC-SHA256 when a secret is set); anything that fails it is refused, logged, and never
// delivers a message. With a TLS context, every TCP connection is TLS 1.3 with mutual
// certificate authentication first (real/tls_session.h), and the handshake and frames run inside
// it; Unix-socket peers on the same host stay as they are (nothing they carry leaves the host). A
// connection to a known peer that breaks without an orderly "bye" turns into on_peer_lost for that
// peer, reported once.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "real/epoll_loop.h"
#include "real/rate_limited_log.h"
#include "real/sockets.h"
#include "real/tls_context.h"
#include "runtime/cluster_spec.h"
#include "runtime/transport.h"

namespace kf {

struct SocketTransportOptions {
  std::string secret;  // empty: no secret (a secured peer refuses us)
  Duration connect_timeout = std::chrono::seconds(30);    // start-up retries give up after this
  Duration handshake_timeout = std::chrono::seconds(10);  // a silent stranger is dropped then
  bool unix_sockets = true;                               // same-host peers over Unix sockets
  std::size_t unix_buffer_bytes = 4u << 20;  // Unix socket buffers (TCP: kernel autotuning)
  std::size_t tcp_buffer_bytes = 0;          // 0: leave TCP buffers to autotuning
  // One TCP stream per pair carries both directions (above); false: one per direction. Both
  // peers must agree (the handshake asks), else each sends on its own connection. Not between
  // loopback addresses (pseudo-hosts on one machine) unless tcp_duplex_loopback: there one
  // kernel does both ends' work, and a socket shared by both directions made it slower.
  bool tcp_duplex = true;
  bool tcp_duplex_loopback = false;
  // Same-host peers that can read each other's memory (process_vm_readv, checked in the
  // handshake) pass payloads of at least lend_min_bytes by reference: one copy instead of two.
  bool lend_payloads = true;
  std::size_t lend_min_bytes = 64u << 10;
  // ... and, where the frames go through a shared-memory ring (below), only from this many bytes
  // as well: up to about the ring's size, a copy into it and one out cost less than the reader's
  // process_vm_readv and its ack (kf::Peer sets it by the host's cores; docs/performance.md has
  // the measurement). 0: lend_min_bytes alone. set_ring_lend_min_bytes changes it later.
  std::size_t ring_lend_min_bytes = 0;
  // ... but a ring collective's part (kFlagRingPart), which one peer reads for its next step, from
  // this many bytes instead (still at least lend_min_bytes): where workers share cores in turns,
  // a copy in and one out are a worker's whole step, and the reader's read of the lender's memory
  // halves them (kf::Peer sets it by the host's cores). 0: as ring_lend_min_bytes.
  // set_ring_part_lend_min_bytes changes it later.
  std::size_t ring_part_lend_min_bytes = 0;
  // Payloads of at least this many bytes are sent from the engine's buffers without a copy
  // (written or lent from there); 0: always copy.
  std::size_t borrow_min_bytes = 64u << 10;
  // Payloads of at least this many bytes that come through a socket are received straight into
  // the buffer of the operation taking them, where it has posted a place for them
  // (Handlers::landing: what an algorithm only copies into its output); 0: always into bytes of
  // their own.
  std::size_t land_min_bytes = 64u << 10;
  // Same-host peers that lend (above) write their frames into a shared-memory ring of this many
  // bytes per connection (a power of two from 4 KiB to 64 MiB); 0: through the socket.
  std::size_t shm_ring_bytes = 1u << 20;
  // TLS on every TCP connection (TLS 1.3, both sides' certificates verified against the CA); a
  // peer that fails it is refused or lost, never talked to in plaintext. null: KUNGFU_TLS=1 with
  // KUNGFU_TLS_CERT / _KEY / _CA in the environment, else none (tls::context_from_process_env).
  std::shared_ptr<const tls::Context> tls;
  std::function<void(const std::string&)> log;  // default: stderr, prefixed "[kf] "
};

struct SocketTransportStats {
  std::uint64_t refused = 0;           // inbound connections refused by the handshake or decoder
  std::uint64_t delivered = 0;         // messages handed to on_message
  std::uint64_t bytes_received = 0;    // payload bytes of those messages
  std::uint64_t lent = 0;              // payloads sent by reference (same host)
  std::uint64_t borrowed = 0;          // payloads received by reference
  std::uint64_t read_in_place = 0;     // payloads delivered where they lay in a ring (RingSlice)
  std::uint64_t kept_from_ring = 0;    // of those, copied out as kept past their round
  std::uint64_t landed = 0;            // payloads received straight into their operation's buffer
  std::uint64_t landings_dropped = 0;  // read into a landing whose operation ended: dropped
  std::uint64_t tls = 0;               // connections, either way, whose TLS handshake succeeded
  std::uint64_t rings = 0;             // connections, either way, whose frames go by shared memory
  std::uint64_t doorbells = 0;         // wake-ups written for a sleeping ring reader
  std::uint64_t duplex = 0;            // connections, either way, that carry both directions
  std::uint64_t delivered_duplex = 0;  // of `delivered`, those that came on a duplex we made
};

class SocketTransport final : public Transport, private EpollLoop::Poller {
 public:
  // Construct, use and destroy on `loop`'s thread. Throws std::invalid_argument naming the
  // variable or file when options.tls is null and the environment asks for TLS it cannot load.
  SocketTransport(EpollLoop& loop, ClusterSpec cluster, int rank, SocketTransportOptions options);
  ~SocketTransport() override;
  SocketTransport(const SocketTransport&) = delete;
  SocketTransport& operator=(const SocketTransport&) = delete;

  // Listens (throws std::system_error if the port is taken) and connects to every other peer
  // in the background.
  void start();
  void set_handlers(Handlers handlers) override;
  void send(int destination, Message&& message) override;
  std::size_t min_borrowed_bytes() const override;
  std::vector<int> reclaim(const void* lender) override;

  // Orderly close: a bye on every connection, the queues flushed, then `done` runs once every
  // peer has closed its side or `limit` has passed. Nothing is delivered afterwards.
  void shutdown(Duration limit, std::function<void()> done);

  // True once the connection to every other peer has been established (and authenticated).
  bool all_connected() const;
  // True once no connection is still being made: every other peer is connected, lost or gone.
  bool connecting_settled() const;
  // The other peers whose connection from this one is not (or no longer) established, lost ones
  // included and departed ones not, in rank order: whom a starting peer still waits for.
  std::vector<int> unconnected() const;
  const SocketTransportStats& stats() const { return stats_; }
  void set_ring_lend_min_bytes(std::size_t bytes) { options_.ring_lend_min_bytes = bytes; }
  void set_ring_part_lend_min_bytes(std::size_t bytes) {
    options_.ring_part_lend_min_bytes = bytes;
  }
  std::size_t lent_outstanding() const { return lent_.size(); }  // lent, not yet acked
  net::Endpoint endpoint_of(int rank) const;

 private:
  struct Conn;
  class LentSource;
  using ConnId = std::uint64_t;

  // How this peer's frames reach a peer: on its own connection to it, or (TCP, the higher rank
  // of the pair) on the duplex connection the peer made to us, awaited until it is accepted.
  enum class Route { own, awaiting_theirs, theirs };
  // Our frames to `rank` and its frames to us share one TCP connection, if it agrees (decided
  // once, in start(), before anyone can connect).
  bool wants_duplex(int rank) const { return wants_duplex_[static_cast<std::size_t>(rank)]; }
  // The connection that carries our frames to `rank` once established; 0 while there is none.
  ConnId sending_conn(int rank) const;
  bool can_send_to(int rank) const;  // sending_conn(rank) is established
  // Once c (established, to c.peer) carries our frames: what waited for it is queued on it.
  void start_sending(Conn& c);
  // The higher rank of a duplex pair: the peer is lost if its connection never came.
  void await_duplex(int rank);

  void on_accept(const Fd& listener);
  void connect_to(int rank);
  void retry_connect(int rank, int err);
  void on_event(ConnId id, std::uint32_t events);
  void on_connected(Conn& c);
  void send_hello(Conn& c);
  // TLS on a fresh TCP connection (socket_transport_tls.cc): start, and step it on every event;
  // once done the KungFu handshake follows inside it.
  void start_tls(Conn& c);
  void continue_tls(Conn& c);
  bool read_handshake(Conn& c);  // false: the connection was closed
  void accept_hello(Conn& c);
  void accept_proof(Conn& c);
  // Lets c's decoder write the large payloads of data frames from c's peer straight into the
  // operations taking them (Handlers::landing); for a connection that carries data frames.
  void land_payloads(Conn& c);
  void take_welcome(Conn& c);
  void read_frames(Conn& c);
  void deliver(int peer, std::vector<Message>& messages);
  void flush(Conn& c);
  void flush_ring(Conn& c);  // flush for a connection whose frames go by shared memory
  // Into c's ring at once, without a queue entry (c's queue is empty and the payload not lent);
  // what does not fit is queued.
  void write_ring(Conn& c, Message&& message);
  // The same for a socket: one write of the prefix and the payload; what the socket does not take
  // is queued. May close c (a failed write).
  void write_socket(Conn& c, Message&& message);
  // After writing to c's ring: publishes, rings the doorbell of a sleeping reader, and looks
  // again soon if the ring was full.
  void after_ring_write(Conn& c);
  bool lends(const Conn& c, const Message& message) const;  // the payload goes lent
  // After a round of bytes fed to c's decoder: acks taken, lent payloads borrowed, the messages
  // delivered, then a bye or a protocol error acted on. False: the connection is closed.
  bool finish_round(Conn& c, std::vector<Message>& messages);
  // An inbound ring connection: the doorbells (and the end) on its socket, then its ring.
  void read_ring_socket(Conn& c);
  // Feeds what the ring of inbound connection `id` holds to its decoder and delivers it; false
  // if the connection is gone (closed for a corrupt ring, a protocol error or a bye).
  bool drain_ring(ConnId id, bool& found);
  // EpollLoop::Poller: the rings of established inbound connections.
  bool poll() override;
  bool arm() override;
  void disarm() override;
  void update_interest(Conn& c);
  void enqueue_bye(Conn& c);
  void enqueue(Conn& c, Message message);  // lends the payload when the connection allows
  void send_ack(int rank, std::uint64_t id);
  // Turns lent frames into remote payloads (copied in unless the handler reads them itself);
  // false: the connection was closed.
  bool borrow(Conn& c, std::vector<Message>& messages);
  // Closes the connection; `why` non-empty and the peer known and not departed -> peer lost.
  void close(ConnId id, const std::string& why);
  void refuse(ConnId id, const std::string& why);
  void lose_peer(int rank, const std::string& why);
  // A peer said bye: it reads nothing of ours any more, so what we lent it comes back.
  void depart(int rank);
  void maybe_finish_shutdown();
  void log(const std::string& line) const;

  EpollLoop& loop_;
  ClusterSpec cluster_;
  int rank_;
  SocketTransportOptions options_;
  Handlers handlers_;
  SocketTransportStats stats_;

  std::vector<Fd> listeners_;
  std::vector<EpollLoop::WatchId> listener_watches_;
  std::map<ConnId, std::unique_ptr<Conn>> conns_;
  ConnId next_conn_ = 1;
  std::vector<ConnId> outbound_;              // by rank; 0 = none
  std::vector<ConnId> inbound_;               // by rank; 0 = none
  std::vector<Route> route_;                  // by rank
  std::vector<bool> wants_duplex_;            // by rank
  std::vector<std::deque<Message>> waiting_;  // sends before the connection is up, by rank
  std::vector<TimePoint> connect_deadline_;
  std::vector<Duration> backoff_;
  std::vector<std::string> last_refusal_;  // why the peer last turned us away, for the final error
  std::vector<bool> lost_;
  std::vector<bool> departed_;  // said bye: its connections closing is no loss
  struct SlotRelease {
    void operator()(std::atomic<std::uint64_t>* slot) const;
  };
  struct LentPayload {
    int rank;
    Payload payload;  // its bytes stay put while the receiver copies them
    // Members go in reverse: the slot is cleared before the payload is let go.
    std::unique_ptr<std::atomic<std::uint64_t>, SlotRelease> slot;
  };
  std::map<std::uint64_t, LentPayload> lent_;
  // A round of received messages is gathered in a vector taken from here and put back after, so
  // that a steady stream allocates none. (A delivery that reads again meanwhile gets a fresh one.)
  std::vector<Message> spare_round_;
  struct RoundBuffer {
    explicit RoundBuffer(std::vector<Message>& kept) : spare(kept), messages(std::move(kept)) {
      messages.clear();
    }
    ~RoundBuffer() {
      messages.clear();
      if (messages.capacity() > spare.capacity()) spare = std::move(messages);
    }
    RoundBuffer(const RoundBuffer&) = delete;
    RoundBuffer& operator=(const RoundBuffer&) = delete;
    std::vector<Message>& spare;
    std::vector<Message> messages;
  };
  std::vector<std::vector<std::uint64_t>> pending_acks_;  // by rank, until connected
  bool started_ = false;
  bool shutting_down_ = false;
  std::function<void()> shutdown_done_;
  Executor::TimerId shutdown_timer_ = 0;
  // Refusals of strangers and broken peers, which a scan or a flood sends in bursts.
  RateLimitedLog refusal_log_{[this](const std::string& line) { log(line); },
                              "refused connections"};
  std::vector<ConnId> ring_readers_;  // established inbound connections with a ring
  std::vector<std::byte> staging_;    // small reads land here, then the decoder copies them out
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // guards timers past our death
};

}  // namespace kf
