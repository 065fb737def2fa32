// Connection handshake. The connecting peer (source of the data that will flow) sends Hello; the
// accepting peer answers Welcome; the connector sends Proof. Both sides prove they hold the job's
// secret with HMAC-SHA256 over both fresh nonces and the Hello, so neither a stranger nor a replay
// is accepted; without a secret the same exchange runs with an empty key (and a secured peer
// refuses it). The cluster version rides in Hello: a peer of another version is refused.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace kf::handshake {

inline constexpr std::uint32_t kMagic = 0x5346484B;  // "KHFS"
inline constexpr std::uint16_t kProtocol = 3;        // 3: a ring's frames padded (wire::kBitPadded)
inline constexpr std::size_t kNonceBytes = 32;
inline constexpr std::size_t kMacBytes = 32;

using Nonce = std::array<std::byte, kNonceBytes>;
using Mac = std::array<std::byte, kMacBytes>;

struct Hello {
  std::uint16_t protocol = kProtocol;
  bool secured = false;  // the connector has a secret (for the acceptor's log)
  // TCP: the connector (the lower rank) offers to carry the acceptor's frames back on this
  // connection as well, so that one stream carries both directions of the pair.
  bool duplex = false;
  std::uint64_t cluster_version = 0;
  std::uint32_t source_rank = 0;
  std::uint32_t destination_rank = 0;
  Nonce nonce{};
  // Where this nonce sits in the connector's memory: a same-host acceptor that can read it there
  // (process_vm_readv) proves that payloads can be lent instead of streamed. 0: do not lend.
  std::uint64_t nonce_address = 0;
  // A shared-memory ring for this connection's frames (real/shm_ring.h): the connector's file
  // descriptor of it and its capacity, tagged with this nonce. 0 bytes: no ring offered.
  std::uint32_t ring_fd = 0;
  std::uint32_t ring_bytes = 0;
};
inline constexpr std::size_t kHelloBytes = 4 + 2 + 2 + 8 + 4 + 4 + kNonceBytes + 8 + 4 + 4;

enum class Verdict : std::uint32_t {
  ok = 0,
  wrong_version = 1,  // cluster version differs
  wrong_rank = 2,     // the source is not a worker, or the acceptor is not the destination
  wrong_protocol = 3,
};
const char* verdict_name(Verdict v);

inline constexpr std::uint32_t kWelcomeLend = 1u << 0;  // "lend me large payloads"
inline constexpr std::uint32_t kWelcomeRing = 1u << 1;  // "I mapped your ring: write frames there"
inline constexpr std::uint32_t kWelcomeDuplex = 1u << 2;  // "my frames to you come on this one"

struct Welcome {
  Verdict verdict = Verdict::ok;
  std::uint32_t flags = 0;
  std::uint64_t cluster_version = 0;  // the acceptor's, to name in errors
  Nonce nonce{};
  Mac mac{};  // acceptor's proof
};
inline constexpr std::size_t kWelcomeBytes = 4 + 4 + 4 + 8 + kNonceBytes + kMacBytes;
inline constexpr std::size_t kProofBytes = kMacBytes;

std::vector<std::byte> encode(const Hello& h);
std::vector<std::byte> encode(const Welcome& w);
// nullopt on a wrong magic or size.
std::optional<Hello> decode_hello(std::span<const std::byte> bytes);
std::optional<Welcome> decode_welcome(std::span<const std::byte> bytes);

Nonce fresh_nonce();  // OpenSSL RAND_bytes; throws if the generator fails

// The acceptor's and the connector's proofs: HMAC-SHA256(secret, role | hello | acceptor nonce).
Mac acceptor_mac(const std::string& secret, const Hello& hello, const Nonce& acceptor_nonce);
Mac connector_mac(const std::string& secret, const Hello& hello, const Nonce& acceptor_nonce);
bool same_mac(const Mac& a, std::span<const std::byte> b);  // constant time

// The decisions of both sides, as pure functions of what was received and who this peer is, so
// the transport and the fuzzer (tests/fuzz/fuzz_handshake.cc) run the same code.

// The acceptor's verdict on a decoded Hello, being `rank` of a cluster of `cluster_size` workers
// at `cluster_version`: ok, or the verdict to answer and the reason to log (empty when ok).
struct HelloJudgement {
  Verdict verdict = Verdict::ok;
  std::string why;
};
HelloJudgement judge_hello(const Hello& hello, std::uint64_t cluster_version, int rank,
                           int cluster_size);

// What the connector that sent `hello` does with the Welcome it got back.
enum class WelcomeOutcome {
  accept,   // verdict ok and the acceptor proved the secret: send connector_mac as the proof
  retry,    // wrong_version from an acceptor on an older cluster version: it will catch up
  refused,  // any other verdict than ok
  forged,   // verdict ok, but the acceptor's MAC is wrong (another secret, or none)
};
WelcomeOutcome judge_welcome(const Welcome& welcome, const Hello& hello,
                             std::uint64_t cluster_version, const std::string& secret);

}  // namespace kf::handshake
