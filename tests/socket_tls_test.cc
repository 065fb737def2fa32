// TLS on the socket transport's TCP connections: peers on loopback pseudo-hosts (127.0.0.1-3,
// so that they meet over TCP) deliver every message in order and run collectives over TLS 1.3
// with mutual certificate checks, same-host peers stay on plain Unix sockets, and a peer with a
// certificate from another CA, or one speaking plaintext, is refused with an error naming it.
// The loading of certificates, keys and CAs names the file at fault.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "launch/peer.h"
#include "net_helpers.h"
#include "real/tls_context.h"
#include "tls_test_pki.h"

namespace kf::testing {
namespace {

// Ranks on three loopback pseudo-hosts: every pair meets over TCP.
ClusterSpec three_hosts(std::uint16_t base) {
  return ClusterSpec(
      0, {},
      {PeerID{"127.0.0.1", base}, PeerID{"127.0.0.2", static_cast<std::uint16_t>(base + 1)},
       PeerID{"127.0.0.3", static_cast<std::uint16_t>(base + 2)}});
}

std::shared_ptr<const tls::Context> context(const std::string& cert, const std::string& key,
                                            const std::string& ca) {
  return std::make_shared<const tls::Context>(
      tls::Files{.cert = {cert, "cert"}, .key = {key, "key"}, .ca = {ca, "ca"}});
}

std::shared_ptr<const tls::Context> worker_context(const TestPki& pki) {
  return context(pki.cert_file(), pki.key_file(), pki.ca_file());
}

Message numbered(int source, int i, std::size_t size) {
  Message m;
  m.header.name = fmt::format("m{}.{}", source, i);
  m.header.chunk = static_cast<std::uint32_t>(i);
  std::vector<std::byte> b(size);
  for (std::size_t k = 0; k < size; ++k)
    b[k] = static_cast<std::byte>((k * 7 + static_cast<std::size_t>(i * 13 + source)) & 0xFF);
  m.payload = Payload(std::move(b));
  return m;
}

bool all_connected(std::vector<std::unique_ptr<Node>>& nodes) {
  for (auto& n : nodes)
    if (!n->connected()) return false;
  return true;
}

TEST(TlsTransport, DeliversEverythingInOrderOverTlsBetweenHosts) {
  const TestPki pki;
  const auto base = free_port_base(3);
  const auto cluster = three_hosts(base);
  // Small TCP buffers make writes stop part-way, so TLS writes are retried again and again.
  const SocketTransportOptions options{.tcp_buffer_bytes = 64u << 10, .tls = worker_context(pki)};
  std::vector<std::unique_ptr<Node>> nodes;
  for (int r = 0; r < 3; ++r)
    nodes.push_back(std::make_unique<Node>(cluster, r, options));
  ASSERT_TRUE(eventually([&] { return all_connected(nodes); }));
  const std::size_t sizes[] = {0, 1, 100, 5000, 70000, 3u << 20, 17, 16384};
  constexpr int kSizes = 8;
  constexpr int kPerPair = 48;
  for (int src = 0; src < 3; ++src)
    for (int i = 0; i < kPerPair; ++i)
      for (int dst = 0; dst < 3; ++dst)
        if (dst != src)
          nodes[static_cast<std::size_t>(src)]->send(dst, numbered(src, i, sizes[i % kSizes]));
  for (int dst = 0; dst < 3; ++dst) {
    auto& node = *nodes[static_cast<std::size_t>(dst)];
    ASSERT_TRUE(
        eventually([&] { return node.received_count() == 2 * kPerPair; }, std::chrono::seconds(30)))
        << "rank " << dst << " got " << node.received_count() << "\n"
        << node.logs();
    std::vector<int> next(3, 0);
    for (auto& [source, m] : node.take_received()) {
      const int i = next[static_cast<std::size_t>(source)]++;
      const Message want = numbered(source, i, sizes[i % kSizes]);
      ASSERT_EQ(m.header.name, want.header.name) << "out of order from " << source;
      ASSERT_EQ(m.payload.size(), want.payload.size());
      if (m.payload.size() > 0) {
        ASSERT_EQ(0, std::memcmp(m.payload.data(), want.payload.data(), m.payload.size()))
            << m.header.name;
      }
    }
    EXPECT_TRUE(node.lost().empty()) << node.logs();
    // Two connections out and two in, each through a TLS handshake.
    EXPECT_EQ(node.stats().tls, 4u);
    EXPECT_EQ(node.stats().refused, 0u);
  }
}

// Starts one Peer per rank of `cluster` in this process and runs fn(peer) on a thread each.
void on_every_peer(const ClusterSpec& cluster, const PeerOptions& options,
                   const std::function<void(Peer&)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < cluster.size(); ++r) {
    threads.emplace_back([&, r] {
      Peer peer(WorkerConfig{.cluster = cluster, .rank = r}, options);
      fn(peer);
    });
  }
  for (auto& t : threads)
    t.join();
}

TEST(TlsTransport, CollectivesOverTlsGiveExactResults) {
  const TestPki pki;
  const auto base = free_port_base(3);
  const auto cluster = three_hosts(base);
  for (const StrategyName strategy : {StrategyName::ring_rs_ag, StrategyName::star}) {
    PeerOptions options;
    options.engine.strategy = strategy;
    options.transport.tls = worker_context(pki);
    on_every_peer(cluster, options, [](Peer& peer) {
      const int r = peer.rank();
      constexpr std::size_t kCount = std::size_t{3} << 20;  // 12 MiB of floats
      std::vector<float> x(kCount);
      for (std::size_t i = 0; i < kCount; ++i)
        x[i] = static_cast<float>(r + 1) + static_cast<float>(i % 7);
      const Status s = peer.allreduce(std::span<float>(x));
      ASSERT_TRUE(s.ok()) << s.to_string();
      for (std::size_t i = 0; i < kCount; i += 4099)
        ASSERT_EQ(x[i], 6.0f + 3.0f * static_cast<float>(i % 7)) << "rank " << r << " at " << i;
      std::vector<std::int64_t> small{r, 10 * r};
      ASSERT_TRUE(peer.allreduce(std::span<std::int64_t>(small), ReduceOp::max).ok());
      EXPECT_EQ(small, (std::vector<std::int64_t>{2, 20}));
      // Two connections out and two in; the acceptor's side of a handshake may finish last.
      EXPECT_TRUE(eventually([&] { return peer.transport_stats().tls == 4u; }));
    });
  }
}

TEST(TlsTransport, SameHostPeersStayOnUnixSocketsAndStillLend) {
  const TestPki pki;
  const auto base = free_port_base(3);
  // Ranks 0 and 1 share 127.0.0.1 (Unix socket, plain, lending); rank 2 is on 127.0.0.2 (TLS).
  const ClusterSpec cluster(
      0, {},
      {PeerID{"127.0.0.1", base}, PeerID{"127.0.0.1", static_cast<std::uint16_t>(base + 1)},
       PeerID{"127.0.0.2", static_cast<std::uint16_t>(base + 2)}});
  PeerOptions options;
  options.engine.strategy = StrategyName::ring_rs_ag;
  options.transport.tls = worker_context(pki);
  std::vector<SocketTransportStats> stats(3);
  on_every_peer(cluster, options, [&](Peer& peer) {
    std::vector<float> x(std::size_t{1} << 20, static_cast<float>(peer.rank()));
    ASSERT_TRUE(peer.allreduce(std::span<float>(x)).ok());
    EXPECT_EQ(x[12345], 3.0f);
    const std::uint64_t want_tls = peer.rank() == 2 ? 4 : 2;  // 0 and 1: to and from rank 2
    EXPECT_TRUE(eventually([&] { return peer.transport_stats().tls == want_tls; }));
    stats[static_cast<std::size_t>(peer.rank())] = peer.transport_stats();
  });
  EXPECT_GT(stats[0].lent + stats[1].lent, 0u);  // between 0 and 1, by reference as before
}

TEST(TlsTransport, APeerWithACertificateFromAnotherCaIsRefusedAndNamed) {
  const TestPki pki;
  const auto base = free_port_base(3);
  const auto cluster = three_hosts(base);
  SocketTransportOptions good{.connect_timeout = std::chrono::seconds(5),
                              .tls = worker_context(pki)};
  // Rank 2 trusts the job's CA, but its own certificate comes from another one.
  SocketTransportOptions rogue = good;
  rogue.tls = context(pki.rogue_cert_file(), pki.rogue_key_file(), pki.ca_file());
  Node a(cluster, 0, good), b(cluster, 1, good), c(cluster, 2, rogue);
  for (Node* n : {&a, &b}) {
    ASSERT_TRUE(eventually([&] { return !n->lost().empty(); }, std::chrono::seconds(10)))
        << n->logs();
    const auto lost = n->lost();
    ASSERT_EQ(lost.size(), 1u);
    EXPECT_EQ(lost[0].peer, 2);
    // Our connection to it: its certificate is refused, the reason and the subject named.
    EXPECT_NE(lost[0].why.find(fmt::format("127.0.0.3:{}", base + 2)), std::string::npos)
        << lost[0].why;
    EXPECT_NE(lost[0].why.find("CN=rogue"), std::string::npos) << lost[0].why;
    EXPECT_NE(lost[0].why.find("unable to get local issuer certificate"), std::string::npos)
        << lost[0].why;
  }
  // Its connections to us are refused by TLS and logged with where they came from.
  ASSERT_TRUE(eventually([&] { return a.stats().refused + b.stats().refused > 0; }))
      << a.logs() << b.logs();
  const std::string refusals = a.logs() + b.logs();
  EXPECT_NE(refusals.find("refused TCP peer 127.0.0."), std::string::npos) << refusals;
  EXPECT_NE(refusals.find("CN=rogue refused"), std::string::npos) << refusals;
  ASSERT_TRUE(eventually([&] { return c.lost().size() == 2; }, std::chrono::seconds(10)))
      << c.logs();
  // Nothing flowed between the rogue and the others; the two good ones talk to each other.
  a.send(1, numbered(0, 0, 100));
  c.send(0, numbered(2, 0, 100));
  ASSERT_TRUE(eventually([&] { return b.received_count() == 1; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(a.received_count(), 0u);
  EXPECT_EQ(c.received_count(), 0u);
}

TEST(TlsTransport, APlaintextPeerIsRefusedNeverTalkedTo) {
  const TestPki pki;
  const auto base = free_port_base(3);
  const auto cluster = three_hosts(base);
  const SocketTransportOptions secured{.connect_timeout = std::chrono::seconds(2),
                                       .tls = worker_context(pki)};
  Node a(cluster, 0, secured), b(cluster, 1, secured);
  Node plain(cluster, 2, {.connect_timeout = std::chrono::seconds(2)});
  ASSERT_TRUE(eventually([&] { return !a.lost().empty() && !plain.lost().empty(); },
                         std::chrono::seconds(10)))
      << a.logs() << plain.logs();
  EXPECT_EQ(a.lost()[0].peer, 2);
  EXPECT_NE(a.lost()[0].why.find("KUNGFU_TLS=1"), std::string::npos) << a.lost()[0].why;
  EXPECT_GT(a.stats().refused, 0u);  // its plaintext hello was not a TLS handshake
  EXPECT_NE(a.logs().find("TLS handshake failed"), std::string::npos) << a.logs();
  plain.send(0, numbered(2, 0, 100));
  a.send(2, numbered(0, 0, 100));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(a.received_count(), 0u);
  EXPECT_EQ(plain.received_count(), 0u);
}

// ---- loading the files ----

void expect_invalid(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "no error";
  } catch (const std::invalid_argument& e) {
    for (const auto& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what() << " lacks " << p;
  }
}

TEST(TlsContext, MissingOrBadFilesAreErrorsNamingThem) {
  const TestPki pki;
  const std::string missing = pki.dir() + "/nowhere.pem";
  const std::string garbage = pki.dir() + "/garbage.pem";
  std::ofstream(garbage) << "not a certificate\n";
  const auto load = [](const std::string& cert, const std::string& key, const std::string& ca) {
    return [=] {
      tls::Context(tls::Files{.cert = {cert, "KUNGFU_TLS_CERT"},
                              .key = {key, "KUNGFU_TLS_KEY"},
                              .ca = {ca, "KUNGFU_TLS_CA"}});
    };
  };
  expect_invalid(load(missing, pki.key_file(), pki.ca_file()),
                 {"KUNGFU_TLS_CERT", missing, "cannot read", "No such file"});
  expect_invalid(load(garbage, pki.key_file(), pki.ca_file()),
                 {"KUNGFU_TLS_CERT", garbage, "not a PEM certificate"});
  expect_invalid(load(pki.cert_file(), missing, pki.ca_file()), {"KUNGFU_TLS_KEY", missing});
  expect_invalid(load(pki.cert_file(), garbage, pki.ca_file()),
                 {"KUNGFU_TLS_KEY", garbage, "private key"});
  expect_invalid(load(pki.cert_file(), pki.rogue_key_file(), pki.ca_file()),
                 {pki.rogue_key_file(), "not the key of the certificate", pki.cert_file()});
  expect_invalid(load(pki.cert_file(), pki.key_file(), missing), {"KUNGFU_TLS_CA", missing});
  expect_invalid(load(pki.cert_file(), pki.key_file(), garbage),
                 {"KUNGFU_TLS_CA", garbage, "no PEM CA certificate"});
  EXPECT_NO_THROW(load(pki.cert_file(), pki.key_file(), pki.ca_file())());
}

TEST(TlsContext, TheEnvironmentAsksForTlsWithAllThreeFiles) {
  const TestPki pki;
  EXPECT_EQ(tls::context_from_env({}), nullptr);
  EXPECT_EQ(tls::context_from_env({{"KUNGFU_TLS", "0"}}), nullptr);
  expect_invalid([] { tls::files_from_env({{"KUNGFU_TLS", "yes"}}); }, {"KUNGFU_TLS=yes"});
  expect_invalid(
      [&] {
        tls::files_from_env({{"KUNGFU_TLS", "1"}, {"KUNGFU_TLS_CA", "x"}});
      },
      {"KUNGFU_TLS_CERT"});
  tls::EnvMap env{{"KUNGFU_TLS", "1"},
                  {"KUNGFU_TLS_CERT", pki.cert_file()},
                  {"KUNGFU_TLS_KEY", pki.key_file()},
                  {"KUNGFU_TLS_CA", pki.dir() + "/missing-ca.pem"}};
  expect_invalid([&] { tls::context_from_env(env); }, {"KUNGFU_TLS_CA", "missing-ca.pem"});
  env["KUNGFU_TLS_CA"] = pki.ca_file();
  const auto ctx = tls::context_from_env(env);
  ASSERT_NE(ctx, nullptr);
  EXPECT_EQ(ctx->files().cert.path, pki.cert_file());
  EXPECT_EQ(ctx->files().cert.label, "KUNGFU_TLS_CERT");
}

// Sets variables for one test and unsets them after it, even when it fails.
class ScopedEnv {
 public:
  ~ScopedEnv() {
    for (const auto& name : names_)
      ::unsetenv(name.c_str());
  }
  void set(const std::string& name, const std::string& value) {
    names_.push_back(name);
    ::setenv(name.c_str(), value.c_str(), 1);
  }

 private:
  std::vector<std::string> names_;
};

TEST(TlsContext, ATransportBuiltWithoutTlsHonoursKungfuTls) {
  // A program that fills SocketTransportOptions itself (kftrain) still gets TLS, or an error.
  const TestPki pki;
  ScopedEnv env;
  env.set("KUNGFU_TLS", "1");
  env.set("KUNGFU_TLS_CERT", pki.dir() + "/absent.pem");
  env.set("KUNGFU_TLS_KEY", pki.key_file());
  env.set("KUNGFU_TLS_CA", pki.ca_file());
  const auto base = free_port_base(2);
  const ClusterSpec cluster(
      0, {},
      {PeerID{"127.0.0.1", base}, PeerID{"127.0.0.2", static_cast<std::uint16_t>(base + 1)}});
  expect_invalid([&] { Node n(cluster, 0); }, {"KUNGFU_TLS_CERT", "absent.pem"});
  env.set("KUNGFU_TLS_CERT", pki.cert_file());
  Node a(cluster, 0), b(cluster, 1);
  ASSERT_TRUE(eventually([&] { return a.connected() && b.connected(); })) << a.logs();
  EXPECT_TRUE(eventually([&] { return a.stats().tls == 2u && b.stats().tls == 2u; }));
}

}  // namespace
}  // namespace kf::testing
