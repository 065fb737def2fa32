// Fuzzes both sides of the connection handshake (real/handshake.h) with the functions the socket
// transport runs (decode_hello, judge_hello and the proof check on the accepting side;
// decode_welcome and judge_welcome on the connecting side), with and without a secret.
//
// Input layout (what each side would read from its socket, in order):
//   byte 0                 secrets: bit 0 the acceptor has one, bit 1 the connector has one,
//                          bit 2 they hold different ones
//   kHelloBytes            a Hello, as the acceptor reads it
//   kProofBytes            the proof that follows it
//   kWelcomeBytes          a Welcome, as the connector reads it (answering the connector's own
//                          fixed Hello below)
// A short input stops where its bytes end, like a connection closed mid-handshake. The
// acceptor's nonce is fixed rather than fresh so that a run is reproducible; seeds carry a real
// exchange for these identities (tests/fuzz/corpus/handshake).
//
// Contract checked (beyond no crash, no sanitizer report):
//   - a decoded Hello or Welcome encodes back to bytes that decode to the same thing;
//   - the acceptor says ok only to a Hello of our protocol and cluster version, addressed to
//     it, from another rank of the cluster; it accepts a proof only after ok and only when the
//     proof is the connector's MAC under the acceptor's secret;
//   - the connector accepts a Welcome only with verdict ok and the acceptor's MAC under its own
//     secret; it retries only on wrong_version from an older acceptor;
//   - an honest exchange (both sides built from the input's identities) succeeds exactly when
//     both sides hold the same secret, or both hold none.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "real/handshake.h"
#include "tests/fuzz/fuzz_check.h"

namespace kf::fuzz {
namespace {

using namespace kf::handshake;

// The acceptor: rank 1 of 4 at cluster version 7. The connector: rank 2, speaking to rank 1.
constexpr std::uint64_t kVersion = 7;
constexpr int kAcceptorRank = 1;
constexpr int kClusterSize = 4;

Nonce pattern(std::uint8_t seed) {
  Nonce n{};
  for (std::size_t i = 0; i < n.size(); ++i)
    n[i] = static_cast<std::byte>(seed + 13 * i);
  return n;
}

Hello connector_hello(bool secured) {
  return Hello{.secured = secured,
               .cluster_version = kVersion,
               .source_rank = 2,
               .destination_rank = kAcceptorRank,
               .nonce = pattern(0x21)};
}

bool same_hello(const Hello& a, const Hello& b) {
  return a.protocol == b.protocol && a.secured == b.secured &&
         a.cluster_version == b.cluster_version && a.source_rank == b.source_rank &&
         a.destination_rank == b.destination_rank && a.nonce == b.nonce &&
         a.nonce_address == b.nonce_address && a.ring_fd == b.ring_fd &&
         a.ring_bytes == b.ring_bytes;
}

bool same_welcome(const Welcome& a, const Welcome& b) {
  return a.verdict == b.verdict && a.flags == b.flags && a.cluster_version == b.cluster_version &&
         a.nonce == b.nonce && a.mac == b.mac;
}

// The accepting side: a Hello, then (after ok) a proof.
void acceptor(std::span<const std::byte> in, const std::string& secret) {
  if (in.size() < kHelloBytes) return;  // the connection closed before a whole Hello
  const auto hello = decode_hello(in.first(kHelloBytes));
  in = in.subspan(kHelloBytes);
  if (!hello) return;  // refused: "not a KungFu handshake"
  const auto again = decode_hello(encode(*hello));
  KF_FUZZ_CHECK(again && same_hello(*again, *hello), "a Hello does not survive encode and decode");

  const auto judgement = judge_hello(*hello, kVersion, kAcceptorRank, kClusterSize);
  const bool fits = hello->protocol == kProtocol && hello->cluster_version == kVersion &&
                    hello->destination_rank == static_cast<std::uint32_t>(kAcceptorRank) &&
                    hello->source_rank < static_cast<std::uint32_t>(kClusterSize) &&
                    hello->source_rank != static_cast<std::uint32_t>(kAcceptorRank);
  KF_FUZZ_CHECK((judgement.verdict == Verdict::ok) == fits,
                std::string("judge_hello says ") + verdict_name(judgement.verdict) +
                    " to a Hello that " + (fits ? "fits" : "does not fit"));
  KF_FUZZ_CHECK(judgement.why.empty() == (judgement.verdict == Verdict::ok),
                "a refusal without a reason, or a reason without a refusal");

  Welcome w{.verdict = judgement.verdict, .cluster_version = kVersion};
  const Nonce nonce = pattern(0x5A);
  if (judgement.verdict == Verdict::ok) {
    w.nonce = nonce;
    w.mac = acceptor_mac(secret, *hello, nonce);
  }
  const auto welcome = decode_welcome(encode(w));
  KF_FUZZ_CHECK(welcome && same_welcome(*welcome, w), "our Welcome does not decode");
  if (judgement.verdict != Verdict::ok) return;  // refused: nothing more is read

  if (in.size() < kProofBytes) return;
  const auto proof = in.first(kProofBytes);
  const bool accepted = same_mac(connector_mac(secret, *hello, nonce), proof);
  const Mac want = connector_mac(secret, *hello, nonce);
  KF_FUZZ_CHECK(accepted == (std::memcmp(want.data(), proof.data(), kProofBytes) == 0),
                "same_mac disagrees with the bytes");
}

// The connecting side: its own Hello went out; a Welcome comes back.
void connector(std::span<const std::byte> in, const std::string& secret) {
  if (in.size() < kWelcomeBytes) return;
  const auto welcome = decode_welcome(in.first(kWelcomeBytes));
  if (!welcome) return;  // closed: "answered with something that is not a KungFu handshake"
  const auto again = decode_welcome(encode(*welcome));
  KF_FUZZ_CHECK(again && same_welcome(*again, *welcome),
                "a Welcome does not survive encode and decode");
  const Hello hello = connector_hello(!secret.empty());
  const auto outcome = judge_welcome(*welcome, hello, kVersion, secret);
  const bool proven = welcome->mac == acceptor_mac(secret, hello, welcome->nonce);
  switch (outcome) {
    case WelcomeOutcome::accept:
      KF_FUZZ_CHECK(welcome->verdict == Verdict::ok && proven,
                    "accepted a Welcome that is not ok or not proven");
      break;
    case WelcomeOutcome::retry:
      KF_FUZZ_CHECK(
          welcome->verdict == Verdict::wrong_version && welcome->cluster_version < kVersion,
          "retries on something other than an older acceptor's wrong_version");
      break;
    case WelcomeOutcome::refused:
      KF_FUZZ_CHECK(welcome->verdict != Verdict::ok, "refused an ok Welcome");
      break;
    case WelcomeOutcome::forged:
      KF_FUZZ_CHECK(welcome->verdict == Verdict::ok && !proven, "forged, yet proven or not ok");
      break;
  }
}

// Both sides honest, each with its own secret: the exchange must succeed exactly when the
// secrets are equal. The Hello is the connector's fixed one with the input's nonce.
void honest_exchange(const std::string& acceptor_secret, const std::string& connector_secret,
                     const Nonce& connector_nonce) {
  Hello hello = connector_hello(!connector_secret.empty());
  hello.nonce = connector_nonce;
  const auto received = decode_hello(encode(hello));
  KF_FUZZ_CHECK(received.has_value(), "an honest Hello does not decode");
  const auto judgement = judge_hello(*received, kVersion, kAcceptorRank, kClusterSize);
  KF_FUZZ_CHECK(judgement.verdict == Verdict::ok, "an honest Hello is refused: " + judgement.why);
  const Nonce nonce = pattern(0x77);
  const Welcome w{.verdict = Verdict::ok,
                  .cluster_version = kVersion,
                  .nonce = nonce,
                  .mac = acceptor_mac(acceptor_secret, *received, nonce)};
  const auto welcome = decode_welcome(encode(w));
  KF_FUZZ_CHECK(welcome.has_value(), "an honest Welcome does not decode");
  const bool same = acceptor_secret == connector_secret;
  const auto outcome = judge_welcome(*welcome, hello, kVersion, connector_secret);
  KF_FUZZ_CHECK((outcome == WelcomeOutcome::accept) == same,
                same ? "the connector refuses an honest acceptor with its secret"
                     : "the connector accepts an acceptor with another secret");
  const Mac proof = connector_mac(connector_secret, hello, welcome->nonce);
  const bool accepted = same_mac(connector_mac(acceptor_secret, *received, nonce), proof);
  KF_FUZZ_CHECK(accepted == same, same ? "the acceptor refuses an honest proof"
                                       : "the acceptor accepts a proof under another secret");
}

}  // namespace
}  // namespace kf::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kf::fuzz;
  if (size == 0) return 0;
  const std::uint8_t mode = data[0];
  const std::string job_secret = "0123456789abcdef0123456789abcdef";
  const std::string other_secret = "fedcba9876543210fedcba9876543210";
  const std::string acceptor_secret = (mode & 1) != 0 ? job_secret : "";
  const std::string connector_secret = (mode & 2) == 0   ? ""
                                       : (mode & 4) != 0 ? other_secret
                                                         : job_secret;
  std::span<const std::byte> in(reinterpret_cast<const std::byte*>(data + 1), size - 1);
  try {
    acceptor(in, acceptor_secret);
    const std::size_t acceptor_bytes = kf::handshake::kHelloBytes + kf::handshake::kProofBytes;
    if (in.size() > acceptor_bytes) connector(in.subspan(acceptor_bytes), connector_secret);
    kf::handshake::Nonce nonce{};
    std::memcpy(nonce.data(), in.data(), std::min(in.size(), nonce.size()));
    honest_exchange(acceptor_secret, connector_secret, nonce);
  } catch (const std::exception& e) {
    unexpected(e);  // decoding refuses with nullopt; only a failing HMAC may throw
  }
  return 0;
}
