// The socket transport between peers of one process (separate loops, real sockets): delivery
// and order over Unix sockets and TCP, loss detection, orderly shutdown, and refusal of
// connections with the wrong secret, no secret, the wrong cluster version or garbage.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <system_error>
#include <thread>

#include "launch/peer.h"
#include "net_helpers.h"
#include "real/cpu_cores.h"
#include "real/handshake.h"
#include "real/shm_ring.h"
#include "real/sockets.h"
#include "real/wire.h"

namespace kf::testing {
namespace {

void on_every_peer(const ClusterSpec& cluster, PeerOptions options,
                   const std::function<void(Peer&)>& fn);

// Ranks 0 and 1 share host 127.0.0.1 (Unix socket); rank 2 is on 127.0.0.2 (TCP, still loopback).
ClusterSpec mixed_cluster(std::uint16_t base, std::uint64_t version = 0) {
  return ClusterSpec(
      version, {},
      {PeerID{"127.0.0.1", base}, PeerID{"127.0.0.1", static_cast<std::uint16_t>(base + 1)},
       PeerID{"127.0.0.2", static_cast<std::uint16_t>(base + 2)}});
}

Message numbered(int source, int i, std::size_t size) {
  Message m;
  m.header.name = "m" + std::to_string(source) + "." + std::to_string(i);
  m.header.chunk = static_cast<std::uint32_t>(i);
  std::vector<std::byte> b(size);
  for (std::size_t k = 0; k < size; ++k)
    b[k] = static_cast<std::byte>((k + static_cast<std::size_t>(i * 13 + source)) & 0xFF);
  m.payload = Payload(std::move(b));
  return m;
}

TEST(SocketTransport, DeliversEverythingInOrderOverUnixAndTcp) {
  const auto base = free_port_base(3);
  ASSERT_NE(base, 0);
  const auto cluster = mixed_cluster(base);
  std::vector<std::unique_ptr<Node>> nodes;
  for (int r = 0; r < 3; ++r)
    nodes.push_back(std::make_unique<Node>(cluster, r));
  ASSERT_TRUE(eventually([&] {
    for (auto& n : nodes)
      if (!n->connected()) return false;
    return true;
  }));
  const std::size_t sizes[] = {0, 1, 100, 70000, 3u << 20};
  constexpr int kPerPair = 60;
  for (int src = 0; src < 3; ++src)
    for (int i = 0; i < kPerPair; ++i)
      for (int dst = 0; dst < 3; ++dst)
        if (dst != src)
          nodes[static_cast<std::size_t>(src)]->send(dst, numbered(src, i, sizes[i % 5]));
  for (int dst = 0; dst < 3; ++dst) {
    auto& node = *nodes[static_cast<std::size_t>(dst)];
    ASSERT_TRUE(eventually([&] { return node.received_count() == 2 * kPerPair; }))
        << "rank " << dst << " got " << node.received_count();
    std::vector<int> next(3, 0);
    for (auto& [source, m] : node.take_received()) {
      const int i = next[static_cast<std::size_t>(source)]++;
      const Message want = numbered(source, i, sizes[i % 5]);
      ASSERT_EQ(m.header.name, want.header.name) << "out of order from " << source;
      ASSERT_EQ(m.payload.size(), want.payload.size());
      if (m.payload.size() > 0) {
        ASSERT_EQ(0, std::memcmp(m.payload.data(), want.payload.data(), m.payload.size()));
      }
    }
    EXPECT_TRUE(node.lost().empty());
  }
  // Ranks 0 and 1 share a host: their large payloads were lent (one copy) and all acked; rank 2
  // is reached over TCP and lends nothing.
  EXPECT_GT(nodes[0]->stats().lent, 0u);
  EXPECT_EQ(nodes[0]->stats().borrowed, nodes[1]->stats().lent);
  EXPECT_EQ(nodes[2]->stats().lent, 0u);
  EXPECT_EQ(nodes[2]->stats().borrowed, 0u);
  EXPECT_TRUE(eventually([&] { return nodes[0]->lent_outstanding() == 0; }));
  EXPECT_TRUE(eventually([&] { return nodes[1]->lent_outstanding() == 0; }));
  // Their frames went by shared memory both ways (a ring to write, a ring to read); rank 2 has
  // none.
  EXPECT_EQ(nodes[0]->stats().rings, 2u);
  EXPECT_EQ(nodes[1]->stats().rings, 2u);
  EXPECT_EQ(nodes[2]->stats().rings, 0u);
  // Over TCP one connection per pair carries both ways: rank 2's with each of the others.
  EXPECT_EQ(nodes[0]->stats().duplex, 1u);
  EXPECT_EQ(nodes[1]->stats().duplex, 1u);
  EXPECT_EQ(nodes[2]->stats().duplex, 2u);
}

TEST(SocketTransport, AFullRingIsWrittenInTurnsAndKeepsTheOrder) {
  const auto base = free_port_base(2);
  const ClusterSpec cluster = ClusterSpec::local(2, base);
  Node a(cluster, 0, {.shm_ring_bytes = 4096});
  Node b(cluster, 1, {.shm_ring_bytes = 4096});
  ASSERT_TRUE(eventually([&] { return a.connected() && b.connected(); }));
  // Small frames, frames larger than the ring (streamed through it), lent ones (a reference).
  const std::size_t sizes[] = {10, 3000, 9000, 70000};
  constexpr int kCount = 300;
  for (int i = 0; i < kCount; ++i)
    a.send(1, numbered(0, i, sizes[i % 4]));
  ASSERT_TRUE(eventually([&] { return b.received_count() == kCount; }))
      << "got " << b.received_count();
  int i = 0;
  for (auto& [source, m] : b.take_received()) {
    const Message want = numbered(0, i, sizes[i % 4]);
    ASSERT_EQ(m.header.name, want.header.name) << "out of order";
    ASSERT_EQ(m.payload.size(), want.payload.size());
    ASSERT_EQ(0, std::memcmp(m.payload.data(), want.payload.data(), m.payload.size())) << i;
    ++i;
  }
  EXPECT_EQ(a.stats().rings, 2u);
  EXPECT_TRUE(b.lost().empty());
}

TEST(SocketTransport, ASleepingRingReaderIsWokenByItsDoorbell) {
  const auto base = free_port_base(2);
  const ClusterSpec cluster = ClusterSpec::local(2, base);
  Node a(cluster, 0), b(cluster, 1);
  ASSERT_TRUE(eventually([&] { return a.connected() && b.connected(); }));
  for (int i = 0; i < 3; ++i) {
    // Long enough for b's loop to stop spinning and sleep: only the doorbell wakes it.
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    a.send(1, numbered(0, i, 8));
    ASSERT_TRUE(eventually([&] { return b.received_count() == static_cast<std::size_t>(i + 1); }));
  }
  EXPECT_GE(a.stats().doorbells, 1u);
  EXPECT_LE(a.stats().doorbells, 3u) << "one per message at most: b slept between them";
}

TEST(SocketTransport, RingsTurnedOffOnEitherSideLeaveFramesOnTheSocket) {
  const auto base = free_port_base(2);
  const ClusterSpec cluster = ClusterSpec::local(2, base);
  Node a(cluster, 0, {.shm_ring_bytes = 0});
  Node b(cluster, 1);
  a.send(1, numbered(0, 0, 100));
  b.send(0, numbered(1, 0, 100));
  ASSERT_TRUE(eventually([&] { return a.received_count() == 1 && b.received_count() == 1; }));
  EXPECT_EQ(a.stats().rings + b.stats().rings, 0u);
}

TEST(SocketTransport, WhatASameHostPeerWroteBeforeItDiedArrivesThenItIsLost) {
  const auto base = free_port_base(2);
  const ClusterSpec cluster = ClusterSpec::local(2, base);
  Node a(cluster, 0), b(cluster, 1);
  ASSERT_TRUE(eventually([&] { return a.connected() && b.connected(); }));
  ASSERT_EQ(b.stats().rings, 2u);
  b.send(0, numbered(1, 0, 100));
  b.crash();  // runs after the send on b's loop: the frame is in the ring, then the socket shuts
  ASSERT_TRUE(eventually([&] { return !a.lost().empty(); }));
  EXPECT_EQ(a.received_count(), 1u);
  EXPECT_EQ(a.lost()[0].peer, 1);
  EXPECT_NE(a.lost()[0].why.find("closed without a bye"), std::string::npos) << a.lost()[0].why;
}

// A large payload that lies whole in the ring is delivered where it lies (RingSlice); one its
// receiver keeps past the round (as the engine keeps a message for a later step) is copied out
// before the ring takes the bytes back. Here every payload is kept while the sender wraps a
// 256 KiB ring ten times, one message at a time (so that each lies whole in the ring when it is
// read, unless it straddles the ring's end), and each still reads as sent.
TEST(SocketTransport, PayloadsReadInPlaceAndKeptPastTheirRoundKeepTheirBytes) {
  const auto base = free_port_base(2);
  const ClusterSpec cluster = ClusterSpec::local(2, base);
  const SocketTransportOptions streamed{.ring_lend_min_bytes = 1u << 30,
                                        .shm_ring_bytes = 256u << 10};
  Node a(cluster, 0, streamed);
  Node b(cluster, 1, streamed, /*keep_lends_unread=*/true);
  ASSERT_TRUE(eventually([&] { return a.connected() && b.connected(); }));
  // Past a quarter of the ring (80000) a payload is copied out at once: still delivered intact.
  const std::size_t sizes[] = {20000, 100, 30000, 17000, 40000, 80000};
  constexpr int kCount = 120;
  for (int i = 0; i < kCount; ++i) {
    a.send(1, numbered(0, i, sizes[i % 6]));
    ASSERT_TRUE(eventually([&] { return b.received_count() == static_cast<std::size_t>(i) + 1; }))
        << "got " << b.received_count() << " of " << i + 1;
  }
  int i = 0;
  for (auto& [source, m] : b.take_received()) {
    const Message want = numbered(0, i, sizes[i % 6]);
    ASSERT_EQ(m.header.name, want.header.name) << "out of order";
    ASSERT_EQ(m.payload.size(), want.payload.size());
    ASSERT_TRUE(m.payload.materialize()) << m.payload.error();
    ASSERT_EQ(0, std::memcmp(m.payload.data(), want.payload.data(), m.payload.size())) << i;
    ++i;
  }
  const SocketTransportStats stats = b.stats();
  // Not the 100-byte ones or the 80000-byte ones, nor those that straddle the ring's end.
  EXPECT_GT(stats.read_in_place, 0u);
  EXPECT_LE(stats.read_in_place, static_cast<std::uint64_t>(kCount) * 4 / 6);
  EXPECT_EQ(stats.kept_from_ring, stats.read_in_place);
  EXPECT_EQ(stats.rings, 2u);
  EXPECT_EQ(stats.borrowed, 0u);
}

TEST(SocketTransport, StreamsEverythingWhenLendingIsOff) {
  const auto base = free_port_base(2);
  const ClusterSpec cluster = ClusterSpec::local(2, base);
  Node a(cluster, 0, {.lend_payloads = false});
  Node b(cluster, 1);
  a.send(1, numbered(0, 0, 1u << 20));
  b.send(0, numbered(1, 0, 1u << 20));
  ASSERT_TRUE(eventually([&] { return a.received_count() == 1 && b.received_count() == 1; }));
  // Either side turning it off is enough: a neither lends nor lets b lend to it.
  EXPECT_EQ(a.stats().lent + a.stats().borrowed + b.stats().lent + b.stats().borrowed, 0u);
  const auto got = b.take_received();
  const Message want = numbered(0, 0, 1u << 20);
  EXPECT_EQ(0, std::memcmp(got[0].message.payload.data(), want.payload.data(), 1u << 20));
}

TEST(SocketTransport, CrashIsReportedAsLostPeerNamingIt) {
  const auto base = free_port_base(3);
  const auto cluster = mixed_cluster(base);
  Node a(cluster, 0), b(cluster, 1), c(cluster, 2);
  ASSERT_TRUE(eventually([&] { return a.connected() && b.connected() && c.connected(); }));
  c.crash();
  for (Node* n : {&a, &b}) {
    ASSERT_TRUE(eventually([&] { return !n->lost().empty(); }, std::chrono::milliseconds(3000)));
    const auto lost = n->lost();
    ASSERT_EQ(lost.size(), 1u);  // reported once, though two connections broke
    EXPECT_EQ(lost[0].peer, 2);
  }
}

TEST(SocketTransport, OrderlyShutdownIsNoLoss) {
  const auto base = free_port_base(3);
  const auto cluster = mixed_cluster(base);
  Node a(cluster, 0), b(cluster, 1), c(cluster, 2);
  ASSERT_TRUE(eventually([&] { return a.connected() && b.connected() && c.connected(); }));
  c.send(0, numbered(2, 0, 5u << 20));  // queued before the bye: must still arrive
  c.shut_down();
  ASSERT_TRUE(eventually([&] { return a.received_count() == 1; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_TRUE(a.lost().empty());
  EXPECT_TRUE(b.lost().empty());
}

TEST(ZeroCopy, WhatWasLentToAPeerThatSaidByeComesBack) {
  const auto base = free_port_base(2);
  const ClusterSpec cluster = ClusterSpec::local(2, base);
  Node a(cluster, 0);
  Node b(cluster, 1, {}, /*keep_lends_unread=*/true);
  ASSERT_TRUE(eventually([&] { return a.connected() && b.connected(); }));
  a.send(1, numbered(0, 0, 4u << 20));
  ASSERT_TRUE(eventually([&] { return b.received_count() == 1; }));
  EXPECT_EQ(a.stats().lent, 1u);
  EXPECT_EQ(a.lent_outstanding(), 1u);  // b holds it unread
  b.shut_down();                        // a bye, with the lend never taken
  EXPECT_TRUE(eventually([&] { return a.lent_outstanding() == 0; }, std::chrono::seconds(3)));
  EXPECT_TRUE(a.lost().empty());
}

// Through a shared-memory ring, a ring collective's part (kFlagRingPart) is lent from
// ring_part_lend_min_bytes, any other payload only from ring_lend_min_bytes; a part threshold of
// 0 leaves parts to the other. What arrives is what was sent, lent or streamed.
TEST(ZeroCopy, ARingsPartsAreLentFromTheirOwnThreshold) {
  const auto base = free_port_base(2);
  const ClusterSpec cluster = ClusterSpec::local(2, base);
  auto lent = [&](std::size_t part_min, bool part, std::size_t bytes) -> std::uint64_t {
    SocketTransportOptions options;
    options.ring_lend_min_bytes = 512u << 10;
    options.ring_part_lend_min_bytes = part_min;
    Node a(cluster, 0, options), b(cluster, 1, options);
    EXPECT_TRUE(eventually([&] { return a.connected() && b.connected(); }));
    Message m = numbered(0, 0, bytes);
    if (part) m.header.flags |= kFlagRingPart;
    a.send(1, std::move(m));
    EXPECT_TRUE(eventually([&] { return b.received_count() == 1; }));
    const auto got = b.take_received();
    const Message want = numbered(0, 0, bytes);
    if (got.size() != 1 || got[0].message.payload.size() != bytes ||
        std::memcmp(got[0].message.payload.data(), want.payload.data(), bytes) != 0) {
      ADD_FAILURE() << "the payload did not arrive intact";
    }
    EXPECT_TRUE(eventually([&] { return a.lent_outstanding() == 0; }));
    return a.stats().lent;
  };
  EXPECT_EQ(lent(128u << 10, true, 256u << 10), 1u);
  EXPECT_EQ(lent(128u << 10, true, 128u << 10), 1u);
  EXPECT_EQ(lent(128u << 10, true, 96u << 10), 0u);
  EXPECT_EQ(lent(128u << 10, false, 256u << 10), 0u);
  EXPECT_EQ(lent(0, true, 256u << 10), 0u);
  EXPECT_EQ(lent(0, true, 512u << 10), 1u);
}

TEST(SocketTransport, StartUpRetriesUntilThePeerListens) {
  const auto base = free_port_base(2);
  const ClusterSpec cluster = ClusterSpec::local(2, base);
  Node a(cluster, 0);
  a.send(1, numbered(0, 0, 10));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  Node b(cluster, 1);  // starts late: a's connects were refused meanwhile
  ASSERT_TRUE(eventually([&] { return b.received_count() == 1; }));
  EXPECT_TRUE(a.lost().empty());
}

TEST(SocketTransport, GivesUpConnectingAfterTheTimeout) {
  const auto base = free_port_base(2);
  const ClusterSpec cluster = ClusterSpec::local(2, base);
  Node a(cluster, 0, {.connect_timeout = std::chrono::milliseconds(300)});
  ASSERT_TRUE(eventually([&] { return !a.lost().empty(); }, std::chrono::milliseconds(3000)));
  EXPECT_EQ(a.lost()[0].peer, 1);
  EXPECT_NE(a.lost()[0].why.find("cannot connect"), std::string::npos) << a.lost()[0].why;
}

// Two hosts (loopback pseudo-hosts), so the pair talks TCP.
ClusterSpec two_hosts(std::uint16_t base) {
  return ClusterSpec(
      0, {},
      {PeerID{"127.0.0.1", base}, PeerID{"127.0.0.2", static_cast<std::uint16_t>(base + 1)}});
}

// Sends kCount messages each way and checks that each side got the other's, in order.
void exchange_in_order(Node& a, Node& b) {
  const std::size_t sizes[] = {8, 70000, 3u << 20};
  constexpr int kCount = 30;
  for (int i = 0; i < kCount; ++i) {
    a.send(1, numbered(0, i, sizes[i % 3]));
    b.send(0, numbered(1, i, sizes[i % 3]));
  }
  for (Node* n : {&a, &b}) {
    ASSERT_TRUE(eventually([&] { return n->received_count() == kCount; }))
        << "got " << n->received_count();
    int i = 0;
    for (auto& [source, m] : n->take_received()) {
      const Message want = numbered(source, i, sizes[i % 3]);
      ASSERT_EQ(m.header.name, want.header.name) << "out of order";
      ASSERT_EQ(0, std::memcmp(m.payload.data(), want.payload.data(), m.payload.size())) << i;
      ++i;
    }
    EXPECT_TRUE(n->lost().empty());
  }
}

TEST(SocketTransport, OverTcpTheLowerRanksConnectionCarriesBothDirections) {
  const auto base = free_port_base(2);
  Node a(two_hosts(base), 0), b(two_hosts(base), 1);
  ASSERT_TRUE(eventually([&] { return a.connected() && b.connected(); }));
  exchange_in_order(a, b);
  EXPECT_EQ(a.stats().duplex, 1u);
  EXPECT_EQ(b.stats().duplex, 1u);
  // Everything b sent came back on the connection a made; b's own carried nothing to a.
  EXPECT_EQ(a.stats().delivered_duplex, 30u);
  EXPECT_EQ(a.stats().delivered, 30u);
  EXPECT_EQ(b.stats().delivered_duplex, 0u);
}

TEST(SocketTransport, APairWhereEitherSideTurnedDuplexOffSendsEachWayOnItsOwnConnection) {
  for (const int off : {0, 1}) {
    SCOPED_TRACE(fmt::format("rank {} has tcp_duplex = false", off));
    const auto base = free_port_base(2);
    Node a(two_hosts(base), 0, {.tcp_duplex = off != 0});
    Node b(two_hosts(base), 1, {.tcp_duplex = off != 1});
    ASSERT_TRUE(eventually([&] { return a.connected() && b.connected(); }));
    exchange_in_order(a, b);
    EXPECT_EQ(a.stats().duplex, 0u);
    EXPECT_EQ(b.stats().duplex, 0u);
    EXPECT_EQ(a.stats().delivered_duplex, 0u);
  }
}

TEST(SocketTransport, LoopbackPseudoHostsKeepAConnectionPerDirectionUnlessAsked) {
  const auto base = free_port_base(2);
  Node a(two_hosts(base), 0, {}, false, /*as_deployed=*/true);
  Node b(two_hosts(base), 1, {}, false, /*as_deployed=*/true);
  ASSERT_TRUE(eventually([&] { return a.connected() && b.connected(); }));
  exchange_in_order(a, b);
  EXPECT_EQ(a.stats().duplex, 0u);
  EXPECT_EQ(b.stats().duplex, 0u);
  EXPECT_TRUE(net::is_loopback("127.0.0.2"));
  EXPECT_TRUE(net::is_loopback("localhost"));
  EXPECT_FALSE(net::is_loopback("10.0.0.1"));
  EXPECT_FALSE(net::is_loopback("no-such-host.invalid"));
}

TEST(SocketTransport, TheHigherRankLosesALowerOneWhoseConnectionNeverComes) {
  const auto base = free_port_base(2);
  // Rank 0's port listens but nobody answers: rank 1's own connection hangs in its handshake,
  // and rank 0's duplex connection, which would carry rank 0's frames, never comes.
  const Fd mute = net::listen_on(net::Endpoint{"127.0.0.1", base, false});
  Node b(two_hosts(base), 1, {.connect_timeout = std::chrono::milliseconds(300)});
  b.send(0, numbered(1, 0, 10));
  ASSERT_TRUE(eventually([&] { return !b.lost().empty(); }, std::chrono::milliseconds(3000)));
  EXPECT_EQ(b.lost()[0].peer, 0);
  EXPECT_NE(b.lost()[0].why.find(fmt::format("127.0.0.1:{} did not connect to us", base)),
            std::string::npos)
      << b.lost()[0].why;
  EXPECT_FALSE(b.connected());
}

struct SecurityCase {
  const char* server_secret;
  const char* client_secret;
  bool tcp;
};

class Security : public ::testing::TestWithParam<SecurityCase> {};

TEST_P(Security, WrongOrMissingSecretDeliversNothingAndIsRefused) {
  const auto p = GetParam();
  const auto base = free_port_base(2);
  const ClusterSpec cluster =
      p.tcp ? ClusterSpec(0, {},
                          {PeerID{"127.0.0.1", base},
                           PeerID{"127.0.0.2", static_cast<std::uint16_t>(base + 1)}})
            : ClusterSpec::local(2, base);
  Node server(cluster, 0, {.secret = p.server_secret});
  Node client(cluster, 1, {.secret = p.client_secret});
  for (int i = 0; i < 5; ++i)
    client.send(0, numbered(1, i, 100));
  ASSERT_TRUE(eventually([&] { return server.stats().refused >= 1; })) << "server logs:\n"
                                                                       << server.logs();
  ASSERT_TRUE(eventually([&] { return !client.lost().empty(); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(server.received_count(), 0u);
  EXPECT_EQ(server.stats().delivered, 0u);
  EXPECT_NE(server.logs().find("failed authentication"), std::string::npos) << server.logs();
}

INSTANTIATE_TEST_SUITE_P(SocketTransport, Security,
                         ::testing::Values(SecurityCase{"right", "wrong", false},
                                           SecurityCase{"right", "", false},
                                           SecurityCase{"right", "wrong", true},
                                           SecurityCase{"right", "", true},
                                           SecurityCase{"", "secret", true}));

TEST(SocketTransport, SameSecretWorks) {
  const auto base = free_port_base(2);
  const ClusterSpec cluster = ClusterSpec::local(2, base);
  Node server(cluster, 0, {.secret = "s3cret"});
  Node client(cluster, 1, {.secret = "s3cret"});
  client.send(0, numbered(1, 0, 100));
  ASSERT_TRUE(eventually([&] { return server.received_count() == 1; }));
  EXPECT_EQ(server.stats().refused, 0u);
}

TEST(SocketTransport, OtherClusterVersionIsRefused) {
  const auto base = free_port_base(2);
  Node server(ClusterSpec(3, {}, ClusterSpec::local(2, base).workers()), 0);
  // A newer client waits for the server to catch up (an elastic resize in progress), within its
  // connect deadline; then the refusal is the error.
  Node client(ClusterSpec(4, {}, ClusterSpec::local(2, base).workers()), 1,
              {.connect_timeout = std::chrono::seconds(1)});
  client.send(0, numbered(1, 0, 100));
  ASSERT_TRUE(eventually([&] { return !client.lost().empty(); }));
  EXPECT_NE(client.lost()[0].why.find("wrong cluster version"), std::string::npos)
      << client.lost()[0].why;
  EXPECT_EQ(server.received_count(), 0u);
  EXPECT_NE(server.logs().find("cluster version 4 (ours 3)"), std::string::npos) << server.logs();
}

TEST(SocketTransport, AnOlderClientIsRefusedAtOnce) {
  const auto base = free_port_base(2);
  Node server(ClusterSpec(4, {}, ClusterSpec::local(2, base).workers()), 0);
  Node client(ClusterSpec(3, {}, ClusterSpec::local(2, base).workers()), 1);
  client.send(0, numbered(1, 0, 100));
  ASSERT_TRUE(eventually([&] { return !client.lost().empty(); }));
  EXPECT_NE(client.lost()[0].why.find("wrong cluster version"), std::string::npos)
      << client.lost()[0].why;
  EXPECT_EQ(server.received_count(), 0u);
}

TEST(Peer, PortAlreadyTakenIsAClearError) {
  const auto base = free_port_base(2);
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  // SO_REUSEADDR, as the lease checks and the runtime binds: an earlier test in this leased block
  // may have left connections in TIME_WAIT on the port, which refuse a plain bind but not this
  // one. A listener still refuses the Peer's bind below, SO_REUSEADDR or not.
  const int one = 1;
  ASSERT_EQ(::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one), 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(base);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  WorkerConfig config{.cluster = ClusterSpec::local(2, base), .rank = 0};
  try {
    Peer peer(config);
    FAIL() << "no error";
  } catch (const std::system_error& e) {
    EXPECT_NE(std::string(e.what()).find(fmt::format("cannot listen on 127.0.0.1:{}", base)),
              std::string::npos)
        << e.what();
  }
  ::close(fd);
}

TEST(Peer, TwoPeersInOneProcessRunCollectives) {
  const auto base = free_port_base(2);
  const ClusterSpec cluster = ClusterSpec::local(2, base);
  std::vector<float> x0(1000, 1.0f), x1(1000, 2.0f);
  auto run = [&](int rank, std::vector<float>& x) {
    Peer peer(WorkerConfig{.cluster = cluster, .rank = rank});
    EXPECT_TRUE(peer.allreduce(std::span<float>(x)).ok());
    auto h = peer.barrier_async();
    const auto s = h.wait_for(std::chrono::seconds(10));
    ASSERT_TRUE(s.has_value());
    EXPECT_TRUE(s->ok()) << s->to_string();
  };
  std::thread t([&] { run(1, x1); });
  run(0, x0);
  t.join();
  EXPECT_EQ(x0[999], 3.0f);
  EXPECT_EQ(x1[0], 3.0f);
}

// A collective without a name is "kf.<kind>.<n>", n counting every kind's unnamed calls from 1
// (docs/cpp-api.md): a peer that names its calls so meets one that does not, into two digits.
TEST(Peer, AutomaticNamesAreTheKindAndOneCounterOverAllKinds) {
  const auto base = free_port_base(2);
  const ClusterSpec cluster = ClusterSpec::local(2, base);
  PeerOptions options;
  options.engine.timeout = std::chrono::seconds(20);  // a name that does not meet fails, named
  std::vector<std::string> errors(2);
  auto run = [&](int rank) {
    Peer peer(WorkerConfig{.cluster = cluster, .rank = rank}, options);
    const bool named = rank == 1;
    for (int n = 1; n <= 12; ++n) {
      std::vector<float> x(4, static_cast<float>(rank + n));
      const Status s = n % 5 == 0
                           ? peer.broadcast(BufferView::of(std::span<float>(x), DType::f32), 0,
                                            named ? fmt::format("kf.broadcast.{}", n) : "")
                           : peer.allreduce(std::span<float>(x), ReduceOp::sum,
                                            named ? fmt::format("kf.allreduce.{}", n) : "");
      const float want = n % 5 == 0 ? static_cast<float>(n) : static_cast<float>(2 * n + 1);
      if (!s.ok() || x[3] != want) {
        errors[static_cast<std::size_t>(rank)] =
            fmt::format("call {}: {}, {}", n, s.to_string(), x[3]);
        return;
      }
    }
  };
  std::thread t([&] { run(1); });
  run(0);
  t.join();
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
}

// Busy polling (KUNGFU_BUSY_POLL=1): the loops never sleep and waits spin, and every collective
// still completes with the right values, small ones and a large one, over a Unix socket and TCP.
TEST(Peer, BusyPollingRunsCollectivesOverUnixAndTcp) {
  const auto base = free_port_base(3);
  const ClusterSpec cluster = mixed_cluster(base);
  PeerOptions options;
  options.busy_poll = true;
  std::atomic<int> wrong{0};
  on_every_peer(cluster, options, [&](Peer& peer) {
    const float me = static_cast<float>(peer.rank() + 1);
    for (int i = 0; i < 200; ++i) {
      std::vector<float> x(2, me * static_cast<float>(i));
      if (!peer.allreduce(std::span<float>(x)).ok() || x[1] != 6.0f * static_cast<float>(i))
        ++wrong;
    }
    std::vector<float> big(1u << 20, me);
    if (!peer.allreduce(std::span<float>(big)).ok() || big.back() != 6.0f) ++wrong;
    if (!peer.barrier().ok()) ++wrong;
  });
  EXPECT_EQ(wrong, 0);
}

// Between same-host peers with shared-memory rings, payloads stream through the ring up to its
// size where every worker has a core, up to half of it where they share cores, and are lent
// above that; the sums are right either way. A 1.5 MiB allreduce at 2 ranks goes round the ring
// in two parts of 768 KiB: streamed on 2 cores, lent on 1.
TEST(Peer, RingPeersLendOnlyWhatTheRingWouldCarrySlowly) {
  const auto base = free_port_base(2);
  const ClusterSpec cluster = ClusterSpec::local(2, base);
  auto lent_with_cores = [&](int cores) {
    PeerOptions options;
    options.engine.host_cores = cores;
    options.engine.strategy = StrategyName::ring_rs_ag;
    std::atomic<std::uint64_t> lent{0};
    std::atomic<int> wrong{0};
    on_every_peer(cluster, options, [&](Peer& peer) {
      const float me = static_cast<float>(peer.rank() + 1);
      std::vector<float> x((std::size_t{3} << 20) / 2 / sizeof(float), me);
      for (int i = 0; i < 3; ++i) {
        std::fill(x.begin(), x.end(), me);
        if (!peer.allreduce(std::span<float>(x)).ok() || x.front() != 3.0f || x.back() != 3.0f)
          ++wrong;
      }
      if (!peer.barrier().ok()) ++wrong;
      lent += peer.transport_stats().lent;
    });
    EXPECT_EQ(wrong, 0) << cores << " cores";
    return lent.load();
  };
  EXPECT_EQ(lent_with_cores(2), 0u);
  EXPECT_GT(lent_with_cores(1), 0u);
}

// What one allreduce of `bytes` on every peer of `cluster` moved how (lent from the sender's
// memory, read in place from a ring), after checking its sums.
struct HowMoved {
  std::uint64_t lent = 0;
  std::uint64_t in_place = 0;
};
HowMoved allreduce_moved(const ClusterSpec& cluster, const PeerOptions& options,
                         std::size_t bytes) {
  std::atomic<std::uint64_t> lent{0};
  std::atomic<std::uint64_t> in_place{0};
  std::atomic<int> wrong{0};
  on_every_peer(cluster, options, [&](Peer& peer) {
    const float me = static_cast<float>(peer.rank() + 1);
    std::vector<float> x(bytes / sizeof(float), me);
    for (std::size_t i = 0; i < x.size(); ++i)
      x[i] = me * static_cast<float>(i % 1000);
    if (!peer.allreduce(std::span<float>(x)).ok()) ++wrong;
    for (std::size_t i = 0; i < x.size(); ++i)
      if (x[i] != 3.0f * static_cast<float>(i % 1000)) ++wrong;
    if (!peer.barrier().ok()) ++wrong;
    lent += peer.transport_stats().lent;
    in_place += peer.transport_stats().read_in_place;
  });
  EXPECT_EQ(wrong, 0) << options.engine.host_cores << " cores, " << bytes << " bytes";
  return HowMoved{lent.load(), in_place.load()};
}

// With two workers a core (in turns), a ring's parts are lent from half the ring; smaller ones
// stream, and their reader folds them where they lie in the ring (up to a quarter of it). With a
// core each the ring's parts stream up to the whole ring.
TEST(Peer, WhereWorkersTakeTurnsARingsLargePartsAreLentAndSmallerOnesReadInPlace) {
  const ClusterSpec cluster = ClusterSpec::local(2, free_port_base(2));
  auto run = [&](int cores, StrategyName strategy, std::size_t bytes) {
    PeerOptions options;
    options.engine.host_cores = cores;
    options.engine.strategy = strategy;
    return allreduce_moved(cluster, options, bytes);
  };
  const HowMoved halves = run(1, StrategyName::ring_rs_ag, 1u << 20);  // parts of 512 KiB
  EXPECT_GT(halves.lent, 0u);
  const HowMoved quarters = run(1, StrategyName::ring_rs_ag, 512u << 10);  // parts of 256 KiB
  EXPECT_EQ(quarters.lent, 0u);
  EXPECT_GT(quarters.in_place, 0u);
  EXPECT_EQ(run(1, StrategyName::star, 256u << 10).lent, 0u);
  const HowMoved own_cores = run(2, StrategyName::ring_rs_ag, 512u << 10);
  EXPECT_EQ(own_cores.lent, 0u);
  EXPECT_GT(own_cores.in_place, 0u);
}

// Over TCP (a pseudo-host each) what an algorithm only copies into the output is read straight
// there (SocketTransportOptions::land_min_bytes): a ring's all-gather parts (either way round),
// halving-doubling's doubling steps and a tree's broadcast, an allgather's and a gather's blocks.
// The results are the same with it off, where nothing lands.
TEST(Peer, OverTcpWhatIsOnlyCopiedLandsInTheOutput) {
  const auto base = free_port_base(3);
  const ClusterSpec cluster(
      0, {},
      {PeerID{"127.0.0.1", base}, PeerID{"127.0.0.2", static_cast<std::uint16_t>(base + 1)},
       PeerID{"127.0.0.3", static_cast<std::uint16_t>(base + 2)}});
  auto run = [&](StrategyName strategy, std::size_t land_min_bytes) {
    PeerOptions options;
    options.engine.strategy = strategy;
    options.transport.land_min_bytes = land_min_bytes;
    std::atomic<int> wrong{0};
    std::atomic<std::uint64_t> by_allreduce{0}, by_allgather{0}, by_gather{0};
    on_every_peer(cluster, options, [&](Peer& peer) {
      const float me = static_cast<float>(peer.rank() + 1);
      for (int i = 1; i <= 3; ++i) {
        const float f = static_cast<float>(i);
        std::vector<float> x(3u << 19, me * f);  // 6 MiB: two slices, one backwards in a bidir ring
        x[12345] = me;
        if (!peer.allreduce(std::span<float>(x)).ok() || x.front() != 6.0f * f ||
            x[12345] != 6.0f || x.back() != 6.0f * f) {
          ++wrong;
        }
      }
      const std::uint64_t after_allreduce = peer.transport_stats().landed;
      by_allreduce += after_allreduce;
      std::vector<float> block(1u << 17, me), all(3u << 17, 0.0f);  // 512 KiB each
      if (!peer.allgather(ConstBufferView::of(std::span<const float>(block), DType::f32),
                          BufferView::of(std::span<float>(all), DType::f32))
               .ok() ||
          all[0] != 1.0f || all[1u << 17] != 2.0f || all.back() != 3.0f) {
        ++wrong;
      }
      const std::uint64_t after_allgather = peer.transport_stats().landed;
      by_allgather += after_allgather - after_allreduce;
      // The root starts its gather before the barrier, so the blocks find it running (a block
      // that comes before its operation waits in the mailbox, landing nowhere). Named: the
      // automatic names count calls in order, and the root's order differs.
      std::vector<float> gathered(peer.rank() == 0 ? 3u << 17 : 0, 0.0f);
      const ConstBufferView mine = ConstBufferView::of(std::span<const float>(block), DType::f32);
      const BufferView into = BufferView::of(std::span<float>(gathered), DType::f32);
      Handle gathering;
      if (peer.rank() == 0) gathering = peer.gather_async(mine, into, 0, "gather");
      if (!peer.barrier("gather started").ok()) ++wrong;
      const Status g = peer.rank() == 0 ? gathering.wait() : peer.gather(mine, into, 0, "gather");
      if (!g.ok() ||
          (peer.rank() == 0 && (gathered[1u << 17] != 2.0f || gathered.back() != 3.0f))) {
        ++wrong;
      }
      if (!peer.barrier().ok()) ++wrong;
      by_gather += peer.transport_stats().landed - after_allgather;
    });
    EXPECT_EQ(wrong, 0) << static_cast<int>(strategy) << ", land_min_bytes " << land_min_bytes;
    return std::array{by_allreduce.load(), by_allgather.load(), by_gather.load()};
  };
  for (const StrategyName s : {StrategyName::ring_rs_ag, StrategyName::ring_rs_ag_bidir,
                               StrategyName::halving_doubling, StrategyName::binary_tree_star}) {
    const auto [by_allreduce, by_allgather, by_gather] = run(s, 64u << 10);
    EXPECT_GT(by_allreduce, 0u) << static_cast<int>(s);
    EXPECT_GT(by_allgather, 0u) << static_cast<int>(s);
    EXPECT_GT(by_gather, 0u) << static_cast<int>(s);
  }
  EXPECT_EQ(run(StrategyName::ring_rs_ag, 0), (std::array<std::uint64_t, 3>{}));
}

// Workers confined to one core (taskset, a cpuset) take turns on it, however many the machine
// has: the peer counts the cores of its affinity mask, and lends a ring's large parts as above.
TEST(Peer, CountsTheCoresOfItsAffinityMaskNotTheMachines) {
  cpu_set_t mask;
  ASSERT_EQ(::sched_getaffinity(0, sizeof(mask), &mask), 0);
  if (CPU_COUNT(&mask) < 2) GTEST_SKIP() << "needs two cores in this process's mask";
  EXPECT_EQ(usable_cores(), CPU_COUNT(&mask));
  int first = 0;
  while (!CPU_ISSET(first, &mask))
    ++first;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  PeerOptions options;
  options.engine.strategy = StrategyName::ring_rs_ag;
  int pinned_count = 0;
  HowMoved pinned;
  {
    // The peers' threads inherit the mask of this thread, which starts them. The whole mask comes
    // back however the block ends, for the tests after this one.
    struct Restore {
      const cpu_set_t& mask;
      ~Restore() { ::sched_setaffinity(0, sizeof(mask), &mask); }
    } restore{mask};
    ASSERT_EQ(::sched_setaffinity(0, sizeof(one), &one), 0);
    pinned_count = usable_cores();
    pinned = allreduce_moved(ClusterSpec::local(2, free_port_base(2)), options, 1u << 20);
  }
  ASSERT_EQ(usable_cores(), CPU_COUNT(&mask));
  EXPECT_EQ(pinned_count, 1);
  EXPECT_GT(pinned.lent, 0u);  // parts of 512 KiB, lent from half the ring: workers take turns
  const HowMoved own_cores =
      allreduce_moved(ClusterSpec::local(2, free_port_base(2)), options, 1u << 20);
  EXPECT_EQ(own_cores.lent, 0u);  // a core each: streamed through the ring
}

// A busy-polling peer sends AUTO's small allreduces by recursive doubling unless told otherwise;
// KUNGFU_AUTO_DOUBLING tells it, and a flag's value (PeerOptions) wins over the variable.
TEST(Peer, BusyPollingTurnsOnRecursiveDoublingForSmallAllreduces) {
  const auto base = free_port_base(2);
  const ClusterSpec cluster = ClusterSpec::local(2, base);
  auto threshold = [&](PeerOptions options) {
    std::atomic<std::size_t> seen[2];
    auto run = [&](int rank) {
      Peer peer(WorkerConfig{.cluster = cluster, .rank = rank}, options);
      std::promise<std::size_t> got;
      peer.post([&](Engine& e) { got.set_value(e.options().auto_doubling_bytes); });
      seen[rank] = got.get_future().get();
      std::vector<float> x(3, static_cast<float>(rank + 1));
      EXPECT_TRUE(peer.allreduce(std::span<float>(x)).ok());
      EXPECT_EQ(x[2], 3.0f);
    };
    std::thread t([&] { run(1); });
    run(0);
    t.join();
    EXPECT_EQ(seen[0].load(), seen[1].load());
    return seen[0].load();
  };
  EXPECT_EQ(threshold({}), kDefaultAutoDoublingBytes);
  EXPECT_EQ(threshold({.busy_poll = true}), kBusyPollAutoDoublingBytes);
  EXPECT_EQ(threshold({.busy_poll = true, .auto_doubling_bytes = 0}), 0u);
  EXPECT_EQ(threshold({.auto_doubling_bytes = 256}), 256u);
}

// Peer::from_env with `name`=`value` fails naming both and `why`.
void expect_env_error(const char* name, const char* value, const std::string& why) {
  ::setenv(name, value, 1);
  try {
    Peer::from_env();
    ADD_FAILURE() << name << "=" << value << ": no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(fmt::format("{}={}: {}", name, value, why)),
              std::string::npos)
        << e.what();
  }
  ::unsetenv(name);
}

TEST(Peer, ABadAutoDoublingSettingIsAClearError) {
  expect_env_error("KUNGFU_AUTO_DOUBLING", "4 kilobytes", "");
}

TEST(Peer, ABadBusyPollSettingIsAClearError) {
  expect_env_error("KUNGFU_BUSY_POLL", "yes", "expected 0 or 1");
}

TEST(Peer, ABadPollBeforeSleepSettingIsAClearError) {
  expect_env_error("KUNGFU_POLL_BEFORE_SLEEP", "200", "");  // a unit is required
  expect_env_error("KUNGFU_POLL_BEFORE_SLEEP", "5s", "at most 1s");
  PeerOptions options;
  options.poll_before_sleep = std::chrono::microseconds(-1);
  EXPECT_THROW(Peer(WorkerConfig{.cluster = ClusterSpec::local(1, 1), .rank = 0}, options),
               std::invalid_argument);
}

TEST(Peer, ABadTcpDuplexSettingIsAClearError) {
  expect_env_error("KUNGFU_TCP_DUPLEX", "on", "expected 0 or 1");
}

TEST(Peer, ABadSharedMemoryRingSettingIsAClearError) {
  expect_env_error("KUNGFU_SHM_RING", "big", "");
  expect_env_error("KUNGFU_SHM_RING", "3000", "expected 0 (off) or a power of two from 4K to 64M");
}

TEST(Peer, ABadLandingSettingIsAClearError) {
  expect_env_error("KUNGFU_LAND", "lots", "");
}

TEST(Peer, SavedBlobsAreFetchedByVersionAndAMissingOneIsNotFound) {
  const auto base = free_port_base(2);
  const ClusterSpec cluster = ClusterSpec::local(2, base);
  auto run = [&](int rank) {
    Peer peer(WorkerConfig{.cluster = cluster, .rank = rank});
    Blob missing;
    EXPECT_EQ(peer.request(1 - rank, "model", &missing).code(), ErrorCode::not_found);
    ASSERT_TRUE(peer.barrier().ok());
    for (std::uint8_t v = 1; v <= 2; ++v) {
      const std::vector<std::uint8_t> bytes(5, static_cast<std::uint8_t>(10 * rank + v));
      EXPECT_EQ(peer.save("model", ConstBufferView(reinterpret_cast<const std::byte*>(bytes.data()),
                                                   bytes.size(), DType::u8)),
                v);
    }
    ASSERT_TRUE(peer.barrier().ok());
    Blob latest, first;
    ASSERT_TRUE(peer.request(1 - rank, "model", &latest).ok());
    ASSERT_TRUE(peer.request(1 - rank, "model", &first, 1).ok());
    EXPECT_EQ(latest.version, 2u);
    ASSERT_EQ(latest.bytes->size(), 5u);
    EXPECT_EQ(std::to_integer<int>((*latest.bytes)[0]), 10 * (1 - rank) + 2);
    EXPECT_EQ(std::to_integer<int>((*first.bytes)[4]), 10 * (1 - rank) + 1);
    ASSERT_TRUE(peer.barrier().ok());
  };
  std::thread t([&] { run(1); });
  run(0);
  t.join();
}

// A busy loop needs no wake-up: a post from another thread and a timer both run.
TEST(EpollLoop, ABusyLoopRunsPostsAndTimers) {
  EpollLoop loop;
  loop.set_busy_poll(true);
  std::promise<void> posted, timed;
  std::thread([&] { loop.post([&] { posted.set_value(); }); }).join();
  loop.post_after(std::chrono::milliseconds(5), [&] { timed.set_value(); });
  EXPECT_EQ(posted.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(timed.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
}

TEST(EpollLoop, ATimerCancelledByTheOneBeforeItNeverFires) {
  // Both are due in the same turn of the loop; the first cancels the second (as an engine's
  // destructor cancels its timers), which therefore must not run.
  EpollLoop loop;
  std::atomic<bool> fired{false};
  Executor::TimerId second = 0;
  std::promise<void> done;
  loop.call([&] {
    loop.post_after(std::chrono::milliseconds(5), [&] { loop.cancel(second); });
    second = loop.post_after(std::chrono::milliseconds(5), [&] { fired = true; });
    loop.post_after(std::chrono::milliseconds(30), [&] { done.set_value(); });
  });
  done.get_future().wait();
  EXPECT_FALSE(fired);
}

// A caller may run the loop's work itself while it waits (Peer's caller_drives): work posted
// while it drives runs on its thread, a timer due after it leaves still fires (it re-arms the
// loop's timerfd), and the loop's own thread takes posts again afterwards.
TEST(EpollLoop, ACallerDrivesTheLoopAndHandsItBack) {
  EpollLoop loop;
  const auto me = std::this_thread::get_id();
  std::atomic<bool> ran{false}, on_me{false}, ours{false};
  std::promise<std::thread::id> later;
  int looks = 0;
  const bool done = loop.drive_until(
      [&] {
        // The second look is inside drive_until, after the loop's thread was told to stand aside.
        if (++looks == 2) {
          loop.post_after(std::chrono::milliseconds(20), [&] {
            on_me = std::this_thread::get_id() == me;
            ours = loop.in_loop_thread();
            ran = true;
          });
          loop.post_after(std::chrono::milliseconds(60),
                          [&] { later.set_value(std::this_thread::get_id()); });
        }
        return ran.load();
      },
      std::chrono::steady_clock::now() + std::chrono::seconds(10));
  EXPECT_TRUE(done);
  EXPECT_TRUE(on_me);
  EXPECT_TRUE(ours);
  EXPECT_FALSE(loop.in_loop_thread());
  auto f = later.get_future();
  ASSERT_EQ(f.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_NE(f.get(), me);
  std::promise<bool> posted;
  std::thread([&] { loop.post([&] { posted.set_value(loop.in_loop_thread()); }); }).join();
  EXPECT_TRUE(posted.get_future().get());
}

// Past its spin a driver sleeps in the loop's own wait: a post from another thread wakes it, and
// it runs the task itself.
TEST(EpollLoop, ADriverPastItsSpinSleepsUntilAPostWakesIt) {
  EpollLoop loop;
  std::atomic<bool> ran{false};
  std::thread::id ran_on;
  std::thread poster([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    loop.post([&] {
      ran_on = std::this_thread::get_id();
      ran = true;
    });
  });
  // 10 ms to take the loop from its thread (on a loaded machine that thread may be descheduled
  // in its first turn), well before the post.
  const bool done = loop.drive_until(
      [&] { return ran.load(); }, std::chrono::steady_clock::now() + std::chrono::milliseconds(10));
  poster.join();
  EXPECT_TRUE(done);
  EXPECT_EQ(ran_on, std::this_thread::get_id());
}

// A driver that spins throughout looks at the queue and the timers without the loop's mutex
// (EpollLoop::queued_, next_due_): a post and a timer from another thread still reach it, and
// run on its thread.
TEST(EpollLoop, ASpinningDriverRunsPostsAndTimersFromOtherThreads) {
  EpollLoop loop;
  const auto me = std::this_thread::get_id();
  std::atomic<bool> posted{false}, timed{false}, started{false};
  std::atomic<bool> posted_here{false}, timed_here{false};
  std::thread other([&] {
    while (!started)  // the driver holds the loop, and spins until both have run
      std::this_thread::yield();
    loop.post([&] {
      posted_here = std::this_thread::get_id() == me;
      posted = true;
    });
    loop.post_after(std::chrono::milliseconds(5), [&] {
      timed_here = std::this_thread::get_id() == me;
      timed = true;
    });
  });
  const bool done = loop.drive_until(
      [&] {
        if (loop.in_loop_thread()) started = true;
        return posted && timed;
      },
      std::nullopt, std::chrono::steady_clock::now() + std::chrono::seconds(10));
  other.join();
  EXPECT_TRUE(done);
  EXPECT_TRUE(posted_here);
  EXPECT_TRUE(timed_here);
}

// A caller that finds the loop free may start its own work on it (drive_first, as a blocking
// Peer call does): the work runs on the caller's thread, after the tasks queued before it, and the
// caller drives until it is done. While another thread holds the loop, drive_first runs nothing
// and says so (nullopt); the caller then posts its work as before.
TEST(EpollLoop, ADriverStartsItsOwnWorkAfterWhatWasQueuedOrStepsAsideForAnother) {
  EpollLoop loop;
  loop.set_driver_linger(std::chrono::seconds(30));  // the loop's thread keeps out of the way
  const auto me = std::this_thread::get_id();
  // Driven once (done once this thread holds the loop): the loop's thread then stands aside.
  ASSERT_TRUE(loop.drive_until([&] { return loop.in_loop_thread(); },
                               std::chrono::steady_clock::now() + std::chrono::seconds(10)));
  std::vector<std::string> order;  // on the loop only
  std::atomic<bool> done{false};
  std::thread::id first_on;
  loop.post_for_driver([&] { order.push_back("queued"); });
  auto first = [&] {
    order.push_back("first");
    first_on = std::this_thread::get_id();
    loop.post_after(std::chrono::milliseconds(2), [&] {
      order.push_back("timer");
      done = true;
    });
  };
  const std::optional<bool> drove = loop.drive_first(
      first, [&] { return done.load(); }, std::nullopt);
  ASSERT_TRUE(drove.has_value());
  EXPECT_TRUE(*drove);
  EXPECT_EQ(order, (std::vector<std::string>{"queued", "first", "timer"}));
  EXPECT_EQ(first_on, me);
  EXPECT_FALSE(loop.in_loop_thread());

  std::atomic<bool> release{false}, holding{false};
  std::thread other([&] {
    loop.drive_until(
        [&] {
          if (loop.in_loop_thread()) holding = true;
          return release.load();
        },
        std::nullopt);
  });
  while (!holding)
    std::this_thread::yield();
  bool ran = false;
  auto never = [&] { ran = true; };
  EXPECT_FALSE(loop.drive_first(
                       never, [] { return true; }, std::nullopt)
                   .has_value());
  EXPECT_FALSE(ran);
  release = true;
  other.join();
}

// While one caller drives, another gives up at the end of its spin and gets its result from the
// one driving; afterwards the loop's thread runs posts again.
TEST(EpollLoop, ACallerThatCannotDriveGivesUpAtTheEndOfItsSpin) {
  EpollLoop loop;
  std::atomic<bool> release{false}, second{false};
  std::promise<void> driving;
  std::thread first([&] {
    bool signalled = false;
    loop.drive_until(
        [&] {
          if (loop.in_loop_thread() && !signalled) {  // holding the loop now
            signalled = true;
            driving.set_value();
          }
          return release.load();
        },
        std::nullopt);  // spins throughout
  });
  driving.get_future().wait();
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(loop.drive_until([&] { return false; }, start + std::chrono::milliseconds(20)));
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(20));
  loop.post([&] { second = true; });  // run by the first driver
  while (!second)
    std::this_thread::yield();
  release = true;
  first.join();
  EXPECT_EQ(loop.call([&] { return loop.in_loop_thread(); }), true);
}

// A driver spinning on a core of its own looks at quiet descriptors only every so often, but it
// does look: an event on a quiet watch reaches its callback, on the driver, while it spins.
TEST(EpollLoop, ASpinningDriverStillServesQuietDescriptors) {
  EpollLoop loop;
  loop.set_dedicated_core(true);
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC | O_NONBLOCK), 0);
  const Fd read_end(fds[0]), write_end(fds[1]);
  std::atomic<bool> called{false};
  std::thread::id called_on;
  loop.call([&] {
    const auto id = loop.watch(read_end.get(), EPOLLIN, [&](std::uint32_t) {
      char c;
      [[maybe_unused]] const auto n = ::read(read_end.get(), &c, 1);
      called_on = std::this_thread::get_id();
      called = true;
    });
    loop.set_quiet(id, true);
  });
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    [[maybe_unused]] const auto n = ::write(write_end.get(), "x", 1);
  });
  const bool done = loop.drive_until([&] { return called.load(); }, std::nullopt);  // spins
  writer.join();
  EXPECT_TRUE(done);
  EXPECT_EQ(called_on, std::this_thread::get_id());
}

// Busy polling on a core of its own, the loop's thread still sleeps while a caller drives: it
// could run nothing meanwhile, and spinning beside the driver it took the loop's mutex from it
// on every look. The CPU time of the process's other threads (the loop's) over a 300 ms drive
// says which: a spinning thread takes a core's share of it, a sleeping one next to nothing. A
// plain post from another thread afterwards, while the loop lingers for the next driver, still
// wakes the loop's thread.
TEST(EpollLoop, ABusyLoopsThreadSleepsWhileACallerDrives) {
  EpollLoop loop;
  loop.set_busy_poll(true);
  loop.set_dedicated_core(true);
  loop.set_driver_linger(std::chrono::hours(1));
  const auto cpu = [](clockid_t clock) {
    timespec t{};
    ::clock_gettime(clock, &t);
    return std::chrono::seconds(t.tv_sec) + std::chrono::nanoseconds(t.tv_nsec);
  };
  const auto others = [&] { return cpu(CLOCK_PROCESS_CPUTIME_ID) - cpu(CLOCK_THREAD_CPUTIME_ID); };
  const auto before = others();
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  EXPECT_FALSE(loop.drive_until([] { return false; }, std::nullopt, end));  // spins to the end
  const auto loop_thread = others() - before;
  EXPECT_LT(loop_thread, std::chrono::milliseconds(30))
      << "the loop's thread ran " << loop_thread.count() << " ns of 300 ms";
  std::promise<bool> plain;
  std::thread([&] { loop.post([&] { plain.set_value(loop.in_loop_thread()); }); }).join();
  auto f = plain.get_future();
  ASSERT_EQ(f.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_TRUE(f.get());
}

// The loop's thread polls for poll_before_sleep() after work before it sleeps: 1 s set, it is
// still polling 100 ms after it began; with the default 50 us it stops. Read from the loop's own
// state, not from its thread's CPU time: a polling thread yields its core, so on a loaded machine
// its CPU time says little (it fell to 2 ms of 150 while fuzzers ran beside it).
TEST(EpollLoop, TheLoopPollsAfterWorkForItsPollBeforeSleep) {
  EXPECT_EQ(EpollLoop().poll_before_sleep(), EpollLoop::kPollBeforeSleep);
  {
    EpollLoop loop;
    loop.set_poll_before_sleep(std::chrono::seconds(1));
    loop.call([] {});
    ASSERT_TRUE(eventually([&] { return loop.polling(); }, std::chrono::seconds(5)));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_TRUE(loop.polling()) << "the loop stopped polling before its second was out";
  }
  {
    EpollLoop loop;
    loop.call([] {});
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_TRUE(eventually([&] { return !loop.polling(); }, std::chrono::seconds(5)))
        << "the loop still polls long after its 50 us";
  }
}

// A driver polls after work for driver_poll_before_sleep(), which set_poll_before_sleep sets too
// and set_driver_poll_before_sleep alone changes (kf::Peer's drivers on one host poll longer
// than its loop's thread there). With 1 s, a driver is still polling 100 ms after its work;
// with the loop's 50 us, it falls asleep. A post wakes it either way.
TEST(EpollLoop, ADriverPollsAfterWorkForItsOwnPollBeforeSleep) {
  for (const bool long_poll : {true, false}) {
    EpollLoop loop;
    loop.set_poll_before_sleep(std::chrono::microseconds(50));
    if (long_poll) loop.set_driver_poll_before_sleep(std::chrono::seconds(1));
    EXPECT_EQ(loop.poll_before_sleep(), std::chrono::microseconds(50));
    EXPECT_EQ(loop.driver_poll_before_sleep(), long_poll ? Duration(std::chrono::seconds(1))
                                                         : Duration(std::chrono::microseconds(50)));
    std::atomic<bool> posted{false}, worked{false}, stop{false};
    bool saw_work = false, asleep_at_100ms = false, fell_asleep = false;
    std::thread observer([&] {
      saw_work = eventually([&] { return worked.load(); }, std::chrono::seconds(10));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      asleep_at_100ms = loop.driver_asleep();
      fell_asleep = eventually([&] { return loop.driver_asleep(); }, std::chrono::seconds(5));
      loop.post([&] { stop = true; });
    });
    // 1 s to take the loop from its thread (on a loaded machine that thread may be descheduled
    // in its first turn); the work then sets the driver's poll from its own setting.
    const auto start = std::chrono::steady_clock::now();
    const bool done = loop.drive_until(
        [&] {
          // The driver's work: a post from its own thread, run on its next turn.
          if (loop.in_loop_thread() && !posted.exchange(true)) loop.post([&] { worked = true; });
          return stop.load();
        },
        start + std::chrono::seconds(1), start + std::chrono::seconds(20));
    observer.join();
    EXPECT_TRUE(saw_work);
    EXPECT_TRUE(done);
    if (long_poll) {
      EXPECT_FALSE(asleep_at_100ms);
    } else {
      EXPECT_TRUE(fell_asleep);
    }
  }
}

// After a caller drove, the loop lingers for the next driver: a post marked for a driver waits
// for one (and runs on it), while a plain post (an async call nobody waits for yet) wakes the
// loop's own thread.
TEST(EpollLoop, ALingeringLoopRunsAPlainPostItselfAndLeavesADriversPostToTheDriver) {
  EpollLoop loop;
  ASSERT_TRUE(loop.drive_until([] { return true; }, std::nullopt));  // done at once: no drive
  // Turns counted only while this thread drives: a caller waiting for its turn (the loop's
  // thread still spinning after work) reads done() too, and leaves no linger if it never drove.
  std::atomic<int> drove{0};
  const auto three_turns = [&] { return loop.in_loop_thread() && ++drove > 3; };
  ASSERT_TRUE(loop.drive_until(three_turns, std::nullopt));  // drives, leaves
  std::promise<bool> plain;
  loop.post([&] { plain.set_value(loop.in_loop_thread()); });
  auto f = plain.get_future();
  ASSERT_EQ(f.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_TRUE(f.get());
  // Drive once more so the loop lingers again, then post for a driver and drive.
  drove = 0;
  ASSERT_TRUE(loop.drive_until(three_turns, std::nullopt));
  std::atomic<bool> ran{false};
  std::thread::id ran_on;
  loop.post_for_driver([&] {
    ran_on = std::this_thread::get_id();
    ran = true;
  });
  ASSERT_TRUE(loop.drive_until([&] { return ran.load(); },
                               std::chrono::steady_clock::now() + std::chrono::seconds(10)));
  EXPECT_EQ(ran_on, std::this_thread::get_id());
}

// A drive with an end stops there, spinning or asleep in the loop's wait with no timer to wake it
// (Handle::wait_for's slices), and the caller's next wait drives again: a post for a driver made
// just after it runs on that next driver.
TEST(EpollLoop, ADriveEndsAtItsEndSpinningOrAsleep) {
  EpollLoop loop;
  loop.set_driver_linger(std::chrono::hours(1));
  for (const bool spins : {true, false}) {
    const auto start = std::chrono::steady_clock::now();
    const auto end = start + std::chrono::milliseconds(30);
    // Else it sleeps after 1 ms (a spin_until already past would not let it drive at all).
    const auto spin_until =
        spins ? std::nullopt : std::optional(start + std::chrono::milliseconds(1));
    EXPECT_FALSE(loop.drive_until([] { return false; }, spin_until, end)) << "spins " << spins;
    const auto took = std::chrono::steady_clock::now() - start;
    EXPECT_GE(took, std::chrono::milliseconds(30)) << "spins " << spins;
    EXPECT_LT(took, std::chrono::seconds(5)) << "spins " << spins;
    std::atomic<bool> ran{false};
    std::thread::id ran_on;
    loop.post_for_driver([&] {
      ran_on = std::this_thread::get_id();
      ran = true;
    });
    ASSERT_TRUE(loop.drive_until([&] { return ran.load(); }, std::nullopt,
                                 std::chrono::steady_clock::now() + std::chrono::seconds(10)));
    EXPECT_EQ(ran_on, std::this_thread::get_id()) << "spins " << spins;
  }
}

// A driver that leaves bytes waiting for room in a socket (a TCP peer's last chunk) hands the
// loop back at once instead of lingering: the peer waiting for those bytes must not wait for this
// caller's next blocking call. The linger is an hour here, so only the hand-back serves the write.
TEST(EpollLoop, ADriverLeavingUnwrittenBytesHandsTheLoopBackAtOnce) {
  EpollLoop loop;
  loop.set_driver_linger(std::chrono::hours(1));
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds), 0);
  const Fd writer(fds[0]), reader(fds[1]);
  std::vector<char> block(1 << 16, 'x');
  while (::write(writer.get(), block.data(), block.size()) > 0) {
  }
  ASSERT_EQ(errno, EAGAIN);  // full: the watch below waits for room
  std::promise<std::thread::id> wrote_on;
  loop.call([&] {
    auto id = std::make_shared<EpollLoop::WatchId>();
    *id = loop.watch(writer.get(), EPOLLOUT, [&, id](std::uint32_t) {
      loop.unwatch(*id);  // once: the ends' closing at the test's end must not call it again
      wrote_on.set_value(std::this_thread::get_id());
    });
  });
  std::atomic<int> turns{0};
  ASSERT_TRUE(loop.drive_until([&] { return ++turns > 3; }, std::nullopt));  // drives, leaves
  while (::read(reader.get(), block.data(), block.size()) > 0) {             // room again
  }
  auto f = wrote_on.get_future();
  ASSERT_EQ(f.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_NE(f.get(), std::this_thread::get_id());  // the loop's own thread served it
}

// Collectives with and without the caller driving, small and large, over a Unix socket (its
// frames through a ring) and TCP, and with several threads of one peer waiting at once (they take
// turns driving). On shared cores (one core: ranks 0 and 1 share it), and as if each had a
// core of its own: a driver then keeps its core, and where all its connections are rings (one
// host) it looks at their quiet sockets only now and then; a TCP connection keeps it looking at
// every turn. Unset, across hosts, the small calls drive and the large one and the async ones
// run on the loop's thread, handing the loop over between them; on one host with two workers a
// core every blocking call drives, and the async ones run on the loop's thread.
TEST(Peer, CallersDrivingTheLoopRunCollectivesOverUnixAndTcp) {
  struct Mode {
    std::optional<bool> drives;
    int host_cores;
    bool one_host;
  };
  for (const Mode mode : {Mode{true, 1, false}, Mode{false, 1, false}, Mode{true, 64, false},
                          Mode{std::nullopt, 64, true}, Mode{std::nullopt, 2, true},
                          Mode{std::nullopt, 1, false}, Mode{std::nullopt, 64, false}}) {
    const bool drives = mode.drives.value_or(true);
    const auto base = free_port_base(3);
    ClusterSpec cluster = mixed_cluster(base);
    if (mode.one_host) cluster = ClusterSpec::local(3, base);
    PeerOptions options;
    options.caller_drives = mode.drives;
    options.engine.host_cores = mode.host_cores;
    std::atomic<int> wrong{0};
    on_every_peer(cluster, options, [&](Peer& peer) {
      const float me = static_cast<float>(peer.rank() + 1);
      for (int i = 0; i < 100; ++i) {
        std::vector<float> x(2, me * static_cast<float>(i));
        if (!peer.allreduce(std::span<float>(x)).ok() || x[1] != 6.0f * static_cast<float>(i))
          ++wrong;
      }
      std::vector<float> big(1u << 20, me);
      if (!peer.allreduce(std::span<float>(big)).ok() || big.back() != 6.0f) ++wrong;
      std::vector<std::vector<float>> xs(4, std::vector<float>(16, me));
      std::vector<Handle> handles;
      for (int k = 0; k < 4; ++k) {
        handles.push_back(
            peer.allreduce_async(ConstBufferView::of(std::span<const float>(xs[k]), DType::f32),
                                 BufferView::of(std::span<float>(xs[k]), DType::f32), ReduceOp::sum,
                                 fmt::format("concurrent.{}", k)));
      }
      std::vector<std::thread> waiters;
      for (auto& h : handles)
        waiters.emplace_back([&h, &wrong] {
          if (!h.wait().ok()) ++wrong;
        });
      for (auto& t : waiters)
        t.join();
      for (const auto& x : xs)
        if (x.back() != 6.0f) ++wrong;
    });
    EXPECT_EQ(wrong, 0) << "caller_drives " << drives << ", host_cores " << mode.host_cores
                        << (mode.one_host ? ", one host" : "");
  }
}

// Several threads of each peer make blocking calls at once, each under its own names: one
// thread at a time holds the loop and starts its call there (Peer::Impl::run_blocking), the others
// find it held and post theirs, which the holder runs; every call still gets its own result, and
// a bad call among them fails alone. Busy polling and not, on one host (rings) and over TCP.
TEST(Peer, BlockingCallsFromSeveralThreadsAtOnceEachGetTheirOwnResult) {
  for (const bool busy : {true, false}) {
    for (const bool one_host : {true, false}) {
      const auto base = free_port_base(2);
      const ClusterSpec cluster =
          one_host ? ClusterSpec::local(2, base)
                   : ClusterSpec(0, {},
                                 {PeerID{"127.0.0.1", base},
                                  PeerID{"127.0.0.2", static_cast<std::uint16_t>(base + 1)}});
      PeerOptions options;
      options.busy_poll = busy;
      std::atomic<int> wrong{0};
      std::atomic<bool> rejected{false};
      on_every_peer(cluster, options, [&](Peer& peer) {
        constexpr int kThreads = 4;
        constexpr int kCalls = 200;
        std::vector<std::thread> threads;
        for (int t = 0; t < kThreads; ++t) {
          threads.emplace_back([&, t] {
            for (int i = 0; i < kCalls; ++i) {
              const float v =
                  static_cast<float>(peer.rank() + 1) * static_cast<float>(t * 1000 + i);
              std::vector<float> x(2, v);
              const Status s =
                  peer.allreduce(std::span<float>(x), ReduceOp::sum, fmt::format("t{}.{}", t, i));
              if (!s.ok() || x[1] != 3.0f * static_cast<float>(t * 1000 + i)) ++wrong;
            }
            // A name already in flight on rank 0 (rank 1 starts it only afterwards) fails a
            // second call of it there alone, in place.
            if (t == 0) {
              if (peer.rank() == 1) {
                while (!rejected.load())
                  std::this_thread::sleep_for(std::chrono::milliseconds(1));
              }
              std::vector<float> held(2, 1.0f);
              const Handle pending = peer.allreduce_async(
                  ConstBufferView::of(std::span<const float>(held), DType::f32),
                  BufferView::of(std::span<float>(held), DType::f32), ReduceOp::sum, "twice");
              if (peer.rank() == 0) {
                std::vector<float> again(2, 1.0f);
                const Status s = peer.allreduce(std::span<float>(again), ReduceOp::sum, "twice");
                if (s.code() != ErrorCode::invalid_argument) ++wrong;
                rejected = true;
              }
              if (!pending.wait().ok() || held[1] != 2.0f) ++wrong;
            }
          });
        }
        for (auto& th : threads)
          th.join();
      });
      EXPECT_EQ(wrong, 0) << "busy polling " << busy << (one_host ? ", one host" : ", TCP");
    }
  }
}

// A call started under a Peer::BlockingCall mark and waited for in slices (as the Python binding
// waits, looking for Ctrl-C between them): while its peer has not joined, each wait_for returns
// nullopt once its limit passes, and meanwhile it drives the loop (spinning throughout when busy
// polling): work posted during a slice runs on the waiting thread. Once the peer joins, a later
// slice returns the collective's result.
TEST(Peer, ABlockingCallWaitedForInSlicesEndsEachSliceAndThenCompletes) {
  for (const bool busy : {false, true}) {
    const auto base = free_port_base(2);
    const ClusterSpec cluster = ClusterSpec::local(2, base);
    PeerOptions options;
    options.caller_drives = true;
    options.busy_poll = busy;
    std::atomic<bool> join{false};
    std::atomic<int> wrong{0};
    on_every_peer(cluster, options, [&](Peer& peer) {
      std::vector<float> x(4, static_cast<float>(peer.rank() + 1));
      const auto in = ConstBufferView::of(std::span<const float>(x), DType::f32);
      const auto out = BufferView::of(std::span<float>(x), DType::f32);
      if (peer.rank() == 1) {
        while (!join.load())
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        if (!peer.allreduce(in, out, ReduceOp::sum, "late").ok()) ++wrong;
      } else {
        Handle h;
        {
          const Peer::BlockingCall marked(x.size() * sizeof(float));
          h = peer.allreduce_async(in, out, ReduceOp::sum, "late");
        }
        // Posted 5 ms into a 1 s slice, a task runs on the waiter where it drives. A waiter that
        // finds the loop's thread busy with the loop gives up driving after its spin, as
        // Handle::wait does (on a slow machine the first slices may): one slice of five must.
        int driven = 0;
        for (int slice = 0; slice < 5; ++slice) {
          std::atomic<bool> in_slice{true};
          std::promise<bool> ran;  // on the waiting thread, during the slice
          const auto waiter = std::this_thread::get_id();
          std::thread poster([&] {
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
            peer.post([&](Engine&) {
              ran.set_value(in_slice.load() && std::this_thread::get_id() == waiter);
            });
          });
          const auto start = std::chrono::steady_clock::now();
          if (h.wait_for(std::chrono::seconds(1)).has_value()) ++wrong;  // alone: not done
          if (std::chrono::steady_clock::now() - start > std::chrono::seconds(10)) ++wrong;
          in_slice = false;
          poster.join();
          if (ran.get_future().get()) ++driven;
        }
        if (driven == 0) ++wrong;
        join = true;
        std::optional<Status> s;
        for (int slice = 0; slice < 500 && !s; ++slice)
          s = h.wait_for(std::chrono::milliseconds(20));
        if (!s || !s->ok()) ++wrong;
      }
      if (x[3] != 3.0f) ++wrong;
    });
    EXPECT_EQ(wrong, 0) << "busy polling " << busy;
  }
}

// Where every wait drives (a core per worker), a small async call is left for the next wait
// rather than waking the loop's thread (Peer::start, as the *_async methods start theirs): one
// waited for a little later, within the linger of the last driver, starts on the waiting thread;
// one never waited for still starts, on the loop's thread once the linger ends, and completes.
// On shared cores async calls do not drive, and one never waited for completes as well.
TEST(Peer, ASmallAsyncCallStartsAtTheNextWaitOrWhenTheLoopsThreadTakesOver) {
  for (const int host_cores : {2, 1}) {  // a core per worker (every wait drives), shared cores
    const auto base = free_port_base(2);
    const ClusterSpec cluster = ClusterSpec::local(2, base);
    PeerOptions options;
    options.engine.host_cores = host_cores;
    std::atomic<int> wrong{0};
    // Waits for a call that completes 1 ms after it starts: the wait drives, and leaves the loop
    // to linger for the next driver.
    const auto drive_a_while = [&wrong](Peer& peer) {
      DoneCallback finish;
      const Handle pending =
          peer.start([&finish](Engine&, DoneCallback done) { finish = std::move(done); }, 8);
      std::thread later([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        // The callback moves to the thread that runs it: the waiter may return (and this frame
        // go) before the call into it has.
        peer.post([&finish](Engine&) { DoneCallback{std::move(finish)}(Status{}); });
      });
      if (!pending.wait().ok()) ++wrong;
      later.join();
    };
    on_every_peer(cluster, options, [&](Peer& peer) {
      int on_waiter = 0;
      for (int attempt = 0; attempt < 20; ++attempt) {
        drive_a_while(peer);
        std::thread::id ran_on;
        const Handle h = peer.start(
            [&ran_on](Engine&, DoneCallback done) {
              ran_on = std::this_thread::get_id();
              done(Status{});
            },
            8);
        std::this_thread::sleep_for(std::chrono::microseconds(300));
        if (!h.wait().ok()) ++wrong;
        if (ran_on == std::this_thread::get_id()) ++on_waiter;
      }
      // Twenty tries: on a loaded machine the linger may end before the wait, or the loop's
      // thread still hold the loop when the first driver comes.
      if (host_cores == 2 && on_waiter == 0) ++wrong;
      drive_a_while(peer);
      // Never waited for (ready() does not drive), after a driver left.
      std::vector<float> x(2, static_cast<float>(peer.rank() + 1));
      const auto v = BufferView::of(std::span<float>(x), DType::f32);
      const Handle h = peer.allreduce_async(v, v, ReduceOp::sum, "unwaited");
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (!h.ready() && std::chrono::steady_clock::now() < give_up)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (!h.ready() || !h.wait().ok() || x[1] != 3.0f) ++wrong;
    });
    EXPECT_EQ(wrong, 0) << "host_cores " << host_cores;
  }
}

// Who runs the loop while a call is waited for, by default (Handle::drives()): on one host whose
// workers each have a core, every wait; on one host with two workers a core at most, every
// blocking call (a Peer::BlockingCall mark sizes it), not an async call's wait; across hosts, or
// with more workers a core, only blocking calls of at most 64 KiB. Every call completes.
TEST(Peer, WhoDrivesTheLoopByDefaultFollowsTheHostsAndTheirCores) {
  struct Mode {
    int host_cores;  // for 3 workers
    bool one_host;
  };
  for (const Mode mode :
       {Mode{64, true}, Mode{2, true}, Mode{1, true}, Mode{64, false}, Mode{1, false}}) {
    const bool every_wait = mode.one_host && mode.host_cores >= 3;
    const bool every_blocking_call = mode.one_host && mode.host_cores >= 2;
    const auto base = free_port_base(3);
    const ClusterSpec cluster = mode.one_host ? ClusterSpec::local(3, base) : mixed_cluster(base);
    PeerOptions options;
    options.engine.host_cores = mode.host_cores;
    std::atomic<int> wrong{0};
    on_every_peer(cluster, options, [&](Peer& peer) {
      std::vector<float> x(1u << 16, 1.0f);  // 256 KiB
      const auto v = BufferView::of(std::span<float>(x), DType::f32);
      const auto small = BufferView::of(std::span<float>(x).first(2), DType::f32);
      Handle large_blocking, small_blocking;
      {
        const Peer::BlockingCall marked(x.size() * sizeof(float));
        large_blocking = peer.allreduce_async(v, v, ReduceOp::sum, "large-blocking");
      }
      if (large_blocking.drives() != every_blocking_call) ++wrong;
      if (!large_blocking.wait().ok() || x.back() != 3.0f) ++wrong;
      {
        const Peer::BlockingCall marked(2 * sizeof(float));
        small_blocking = peer.allreduce_async(small, small, ReduceOp::sum, "small-blocking");
      }
      if (!small_blocking.drives()) ++wrong;
      if (!small_blocking.wait().ok() || x[0] != 9.0f) ++wrong;
      const Handle async = peer.allreduce_async(v, v, ReduceOp::sum, "async");
      if (async.drives() != every_wait) ++wrong;
      if (!async.wait().ok() || x.back() != 9.0f) ++wrong;
    });
    EXPECT_EQ(wrong, 0) << "host_cores " << mode.host_cores
                        << (mode.one_host ? ", one host" : ", hosts apart");
  }
}

TEST(Peer, ABadCallerDrivesSettingIsAClearError) {
  expect_env_error("KUNGFU_CALLER_DRIVES", "maybe", "expected 0 or 1");
}

// ---- zero copy: engines over real sockets, payloads borrowed and lent ----

// Starts one Peer per rank of `cluster` in this process, then runs fn(peer) for every rank on a
// thread of its own (each peer shuts down when its fn returns).
void on_every_peer(const ClusterSpec& cluster, PeerOptions options,
                   const std::function<void(Peer&)>& fn) {
  options.wait_for_peers = false;
  std::vector<std::unique_ptr<Peer>> peers;
  for (int r = 0; r < cluster.size(); ++r)
    peers.push_back(std::make_unique<Peer>(WorkerConfig{.cluster = cluster, .rank = r}, options));
  std::vector<std::thread> threads;
  for (auto& p : peers) {
    threads.emplace_back([&fn, &p] {
      fn(*p);
      p.reset();
    });
  }
  for (auto& t : threads)
    t.join();
}

TEST(ZeroCopy, CollectivesOverUnixAndTcpLendAndBorrowTheCallersBuffers) {
  const auto base = free_port_base(3);
  const auto cluster = mixed_cluster(base);
  constexpr std::size_t kCount = std::size_t{3} << 20;  // 12 MiB of floats
  PeerOptions options;
  options.engine.strategy = StrategyName::ring_rs_ag;
  std::vector<SocketTransportStats> stats(3);
  on_every_peer(cluster, options, [&](Peer& peer) {
    const int r = peer.rank();
    std::vector<float> x(kCount);
    for (std::size_t i = 0; i < kCount; ++i)
      x[i] = static_cast<float>(r + 1) + static_cast<float>(i % 7);
    ASSERT_TRUE(peer.allreduce(std::span<float>(x)).ok());
    for (std::size_t i = 0; i < kCount; i += 4099)
      ASSERT_EQ(x[i], 6.0f + 3.0f * static_cast<float>(i % 7)) << "rank " << r << " at " << i;
    std::vector<float> w(kCount, r == 2 ? 42.0f : 0.0f);
    ASSERT_TRUE(peer.broadcast(BufferView::of(std::span<float>(w), DType::f32), 2).ok());
    EXPECT_EQ(w[kCount - 1], 42.0f);
    std::vector<float> mine(kCount / 4, static_cast<float>(r)), all(kCount / 4 * 3);
    ASSERT_TRUE(peer.allgather(ConstBufferView::of(std::span<const float>(mine), DType::f32),
                               BufferView::of(std::span<float>(all), DType::f32))
                    .ok());
    for (int q = 0; q < 3; ++q)
      EXPECT_EQ(all[static_cast<std::size_t>(q) * (kCount / 4) + 5], static_cast<float>(q));
    ASSERT_TRUE(peer.barrier().ok());
    stats[static_cast<std::size_t>(r)] = peer.transport_stats();
  });
  // Ranks 0 and 1 share a host and lend each other their buffers; rank 2 (TCP) lends nothing.
  EXPECT_GT(stats[0].lent, 0u);  // the ring runs 0 -> 1 -> 2 -> 0
  EXPECT_EQ(stats[1].borrowed, stats[0].lent);
  EXPECT_EQ(stats[0].borrowed, stats[1].lent);
  EXPECT_EQ(stats[2].lent + stats[2].borrowed, 0u);
}

TEST(ZeroCopy, ALendTakenBackFailsItsReaderInsteadOfFeedingItGarbage) {
  // Rank 0's part of a reduce is not read before rank 0's deadline: rank 0 takes its buffer back
  // (and completes: its part is done) and scribbles on it. Rank 1 starts later and must fail,
  // naming rank 0, rather than fold the scribbles.
  const auto base = free_port_base(2);
  PeerOptions options;
  options.engine.timeout = std::chrono::milliseconds(300);
  options.engine.remote_hold = std::chrono::seconds(30);
  options.engine.strategy = StrategyName::star;
  std::promise<void> leaf_done;
  auto leaf_future = leaf_done.get_future().share();
  on_every_peer(ClusterSpec::local(2, base), options, [&](Peer& peer) {
    std::vector<float> x(1 << 18, 1.0f), out(1 << 18, 0.0f);
    const auto in = BufferView::of(std::span<float>(x), DType::f32);
    const auto o = BufferView::of(std::span<float>(out), DType::f32);
    if (peer.rank() == 0) {
      const Status s = peer.reduce(in, o, ReduceOp::sum, 1, "r");
      EXPECT_TRUE(s.ok()) << s.to_string();
      std::fill(x.begin(), x.end(), -1.0f);
      leaf_done.set_value();
      // Stay until rank 1 is done: its read must fail because the lend was withdrawn, not
      // because this process is gone.
      std::this_thread::sleep_for(std::chrono::milliseconds(600));
    } else {
      leaf_future.wait();
      const Status s = peer.reduce(in, o, ReduceOp::sum, 1, "r");
      EXPECT_EQ(s.code(), ErrorCode::protocol) << s.to_string();
      EXPECT_NE(s.message().find(fmt::format("rank 0 (127.0.0.1:{}) took back", base)),
                std::string::npos)
          << s.message();
    }
  });
}

TEST(ZeroCopy, ASenderPastItsDeadlineWritesCopiesOfWhatItStillHadQueued) {
  // Rank 1 reaches rank 0 over TCP, so its pieces go out by writev straight from its buffer.
  // Rank 0 is busy and reads nothing: most pieces are still queued when rank 1's deadline
  // passes. Rank 1 then copies them and gets its buffer back; rank 0 still receives the values
  // the buffer had when they were sent.
  const auto base = free_port_base(2);
  const ClusterSpec cluster(
      0, {},
      {PeerID{"127.0.0.1", base}, PeerID{"127.0.0.2", static_cast<std::uint16_t>(base + 1)}});
  PeerOptions options;
  options.engine.timeout = std::chrono::seconds(1);
  options.engine.strategy = StrategyName::star;
  constexpr std::size_t kCount = std::size_t{6} << 20;  // 24 MiB: more than sockets buffer
  std::promise<void> sent;
  auto sent_future = sent.get_future().share();
  on_every_peer(cluster, options, [&](Peer& peer) {
    std::vector<float> x(kCount, static_cast<float>(peer.rank() + 1)), out(kCount, 0.0f);
    const auto in = BufferView::of(std::span<float>(x), DType::f32);
    const auto o = BufferView::of(std::span<float>(out), DType::f32);
    if (peer.rank() == 1) {
      const Status s = peer.reduce(in, o, ReduceOp::sum, 0, "r");
      EXPECT_TRUE(s.ok()) << s.to_string();
      std::fill(x.begin(), x.end(), -100.0f);
      sent.set_value();
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    } else {
      peer.post([sent_future](Engine&) { sent_future.wait(); });  // the loop reads nothing
      const Status s = peer.reduce(in, o, ReduceOp::sum, 0, "r");
      EXPECT_TRUE(s.ok()) << s.to_string();
      for (std::size_t i = 0; i < kCount; i += 65521)
        ASSERT_EQ(out[i], 3.0f) << "at " << i;
    }
  });
}

// A raw TCP client that is not a KungFu peer.
int raw_connect(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

bool closed_by_peer(int fd) {
  char buf[256];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n == 0) return true;
    if (n < 0) return errno == ECONNRESET;
  }
}

TEST(SocketTransport, StrangersAreDroppedAndDeliverNothing) {
  const auto base = free_port_base(2);
  const ClusterSpec cluster = ClusterSpec::local(2, base);
  Node server(cluster, 0, {.secret = "k"});
  // 1. Garbage instead of a handshake.
  {
    const int fd = raw_connect(base);
    ASSERT_GE(fd, 0);
    std::vector<std::byte> junk(handshake::kHelloBytes, std::byte{0x41});
    ASSERT_GT(::send(fd, junk.data(), junk.size(), 0), 0);
    EXPECT_TRUE(closed_by_peer(fd));
    ::close(fd);
  }
  // 2. A well-formed hello, then a forged proof and frames behind it.
  {
    const int fd = raw_connect(base);
    ASSERT_GE(fd, 0);
    handshake::Hello h{.secured = true,
                       .source_rank = 1,
                       .destination_rank = 0,
                       .nonce = handshake::fresh_nonce()};
    auto bytes = handshake::encode(h);
    bytes.resize(bytes.size() + handshake::kProofBytes, std::byte{0});  // forged proof
    Message m;
    m.header.name = "evil";
    const auto frame = wire::encode(m);
    bytes.insert(bytes.end(), frame.begin(), frame.end());
    ASSERT_GT(::send(fd, bytes.data(), bytes.size(), 0), 0);
    EXPECT_TRUE(closed_by_peer(fd));
    ::close(fd);
  }
  // 3. Silence: dropped after the handshake timeout (not waited for here), and harmless.
  EXPECT_TRUE(eventually([&] { return server.stats().refused >= 2; }));
  EXPECT_EQ(server.received_count(), 0u);
  EXPECT_TRUE(server.lost().empty());  // a stranger is not a peer
}

TEST(SocketTransport, AFloodOfStrangersIsLoggedAtARateLimitWithACount) {
  constexpr int kStrangers = 300;
  const auto base = free_port_base(2);
  const ClusterSpec cluster = ClusterSpec::local(2, base);
  std::vector<std::string> lines;
  std::mutex mu;
  {
    Node server(cluster, 0, {.secret = "k", .log = [&](const std::string& line) {
                               std::lock_guard lock(mu);
                               lines.push_back(line);
                             }});
    const std::vector<std::byte> junk(handshake::kHelloBytes, std::byte{0x41});
    for (int i = 0; i < kStrangers; ++i) {
      const int fd = raw_connect(base);
      ASSERT_GE(fd, 0);
      ASSERT_GT(::send(fd, junk.data(), junk.size(), 0), 0);
      ::close(fd);
    }
    ASSERT_TRUE(eventually([&] { return server.stats().refused >= kStrangers; }));
  }  // the count of lines left out is logged when the transport goes
  int shown = 0, counted = 0;
  for (const auto& line : lines) {
    if (line.rfind("refused ", 0) == 0) ++shown;
    unsigned n = 0;
    if (std::sscanf(line.c_str(), "(%u more refused connections not shown)", &n) == 1)
      counted += static_cast<int>(n);
  }
  EXPECT_LT(shown, 100) << "not rate-limited";
  EXPECT_EQ(shown + counted, kStrangers) << "every refusal is shown or counted";
}

// Sends `hello` on a raw connection and reads the Welcome; nullopt if none came.
std::optional<handshake::Welcome> say_hello(int fd, const handshake::Hello& hello) {
  const auto bytes = handshake::encode(hello);
  if (::send(fd, bytes.data(), bytes.size(), 0) != static_cast<ssize_t>(bytes.size())) return {};
  std::vector<std::byte> welcome(handshake::kWelcomeBytes);
  if (::recv(fd, welcome.data(), welcome.size(), MSG_WAITALL) !=
      static_cast<ssize_t>(welcome.size()))
    return {};
  return handshake::decode_welcome(welcome);
}

// A good frame ("fine"), then a header of an unknown frame type.
std::vector<std::byte> good_then_bad_frames() {
  Message good;
  good.header.name = "fine";
  auto frames = wire::encode(good);
  std::vector<std::byte> bad(wire::kHeaderBytes, std::byte{0});
  bad[0] = std::byte{9};  // unknown frame type
  frames.insert(frames.end(), bad.begin(), bad.end());
  return frames;
}

// A raw Unix-socket client on this host, at the worker 127.0.0.1:port.
int raw_unix_connect(std::uint16_t port) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  const std::string name = net::unix_name("127.0.0.1", port);
  std::memcpy(a.sun_path + 1, name.data(), name.size());
  const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), len) != 0) {
    ::close(fd);
    return -1;
  }
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

TEST(SocketTransport, AMalformedFrameInARingDropsItsConnection) {
  const auto base = free_port_base(2);
  const ClusterSpec cluster = ClusterSpec::local(2, base);
  Node server(cluster, 0);
  const int fd = raw_unix_connect(base);  // plays rank 1 on this host, with a ring
  ASSERT_GE(fd, 0);
  handshake::Hello h{.source_rank = 1, .destination_rank = 0, .nonce = handshake::fresh_nonce()};
  h.nonce_address = reinterpret_cast<std::uintptr_t>(h.nonce.data());
  auto ring = ShmRing::create(4096, h.nonce);
  h.ring_fd = static_cast<std::uint32_t>(ring->fd());
  h.ring_bytes = 4096;
  const auto w = say_hello(fd, h);
  ASSERT_TRUE(w);
  ASSERT_NE(w->flags & handshake::kWelcomeRing, 0u) << "the server mapped our ring";
  const auto mac = handshake::connector_mac("", h, w->nonce);
  ASSERT_EQ(::send(fd, mac.data(), mac.size(), 0), static_cast<ssize_t>(mac.size()));
  const auto frames = good_then_bad_frames();
  ASSERT_EQ(ring->write(frames), frames.size());
  if (ring->publish()) {
    const char bell = 0;
    ASSERT_EQ(::send(fd, &bell, 1, 0), 1);
  }
  EXPECT_TRUE(closed_by_peer(fd));
  ::close(fd);
  ASSERT_TRUE(eventually([&] { return !server.lost().empty(); }));
  EXPECT_EQ(server.received_count(), 1u);  // the good frame before the bad one
  EXPECT_NE(server.lost()[0].why.find("unknown frame type"), std::string::npos);
}

TEST(SocketTransport, MalformedFrameFromAPeerDropsItsConnection) {
  const auto base = free_port_base(2);
  const ClusterSpec cluster = ClusterSpec::local(2, base);
  Node server(cluster, 0);
  const int fd = raw_connect(base);  // plays rank 1 with no secret, honestly
  ASSERT_GE(fd, 0);
  handshake::Hello h{.source_rank = 1, .destination_rank = 0, .nonce = handshake::fresh_nonce()};
  const auto w = say_hello(fd, h);
  ASSERT_TRUE(w);
  const auto mac = handshake::connector_mac("", h, w->nonce);
  std::vector<std::byte> rest(mac.begin(), mac.end());
  const auto frames = good_then_bad_frames();
  rest.insert(rest.end(), frames.begin(), frames.end());
  ASSERT_GT(::send(fd, rest.data(), rest.size(), 0), 0);
  EXPECT_TRUE(closed_by_peer(fd));
  ::close(fd);
  ASSERT_TRUE(eventually([&] { return !server.lost().empty(); }));
  EXPECT_EQ(server.received_count(), 1u);  // the good frame before the bad one
  EXPECT_NE(server.lost()[0].why.find("unknown frame type"), std::string::npos);
}

}  // namespace
}  // namespace kf::testing
