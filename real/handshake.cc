#include "real/handshake.h"

#include <openssl/crypto.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <fmt/format.h>

#include <cstring>
#include <stdexcept>

namespace kf::handshake {
namespace {

template <typename T>
void put(std::vector<std::byte>& out, T v) {
  const auto* p = reinterpret_cast<const std::byte*>(&v);
  out.insert(out.end(), p, p + sizeof(T));
}
template <typename T>
T get(std::span<const std::byte>& in) {
  T v;
  std::memcpy(&v, in.data(), sizeof(T));
  in = in.subspan(sizeof(T));
  return v;
}
template <std::size_t N>
void put_array(std::vector<std::byte>& out, const std::array<std::byte, N>& a) {
  out.insert(out.end(), a.begin(), a.end());
}
template <std::size_t N>
void get_array(std::span<const std::byte>& in, std::array<std::byte, N>& a) {
  std::memcpy(a.data(), in.data(), N);
  in = in.subspan(N);
}

Mac mac_of(const std::string& secret, std::string_view role, const Hello& hello,
           const Nonce& acceptor_nonce) {
  std::vector<std::byte> text(reinterpret_cast<const std::byte*>(role.data()),
                              reinterpret_cast<const std::byte*>(role.data()) + role.size());
  const auto h = encode(hello);
  text.insert(text.end(), h.begin(), h.end());
  text.insert(text.end(), acceptor_nonce.begin(), acceptor_nonce.end());
  Mac mac{};
  unsigned int len = 0;
  // An empty key is valid HMAC input: unsecured peers still run the exchange.
  static const unsigned char kEmpty = 0;
  const void* key = secret.empty() ? static_cast<const void*>(&kEmpty) : secret.data();
  if (HMAC(EVP_sha256(), key, static_cast<int>(secret.size()),
           reinterpret_cast<const unsigned char*>(text.data()), text.size(),
           reinterpret_cast<unsigned char*>(mac.data()), &len) == nullptr ||
      len != kMacBytes) {
    throw std::runtime_error("HMAC-SHA256 failed");
  }
  return mac;
}

}  // namespace

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::ok:
      return "ok";
    case Verdict::wrong_version:
      return "wrong cluster version";
    case Verdict::wrong_rank:
      return "wrong rank";
    case Verdict::wrong_protocol:
      return "wrong protocol";
  }
  return "unknown verdict";
}

std::vector<std::byte> encode(const Hello& h) {
  std::vector<std::byte> out;
  out.reserve(kHelloBytes);
  put<std::uint32_t>(out, kMagic);
  put<std::uint16_t>(out, h.protocol);
  put<std::uint16_t>(out, static_cast<std::uint16_t>((h.secured ? 1 : 0) | (h.duplex ? 2 : 0)));
  put<std::uint64_t>(out, h.cluster_version);
  put<std::uint32_t>(out, h.source_rank);
  put<std::uint32_t>(out, h.destination_rank);
  put_array(out, h.nonce);
  put<std::uint64_t>(out, h.nonce_address);
  put<std::uint32_t>(out, h.ring_fd);
  put<std::uint32_t>(out, h.ring_bytes);
  return out;
}

std::vector<std::byte> encode(const Welcome& w) {
  std::vector<std::byte> out;
  out.reserve(kWelcomeBytes);
  put<std::uint32_t>(out, kMagic);
  put<std::uint32_t>(out, static_cast<std::uint32_t>(w.verdict));
  put<std::uint32_t>(out, w.flags);
  put<std::uint64_t>(out, w.cluster_version);
  put_array(out, w.nonce);
  put_array(out, w.mac);
  return out;
}

std::optional<Hello> decode_hello(std::span<const std::byte> in) {
  if (in.size() != kHelloBytes || get<std::uint32_t>(in) != kMagic) return std::nullopt;
  Hello h;
  h.protocol = get<std::uint16_t>(in);
  const auto flags = get<std::uint16_t>(in);
  h.secured = (flags & 1) != 0;
  h.duplex = (flags & 2) != 0;
  h.cluster_version = get<std::uint64_t>(in);
  h.source_rank = get<std::uint32_t>(in);
  h.destination_rank = get<std::uint32_t>(in);
  get_array(in, h.nonce);
  h.nonce_address = get<std::uint64_t>(in);
  h.ring_fd = get<std::uint32_t>(in);
  h.ring_bytes = get<std::uint32_t>(in);
  return h;
}

std::optional<Welcome> decode_welcome(std::span<const std::byte> in) {
  if (in.size() != kWelcomeBytes || get<std::uint32_t>(in) != kMagic) return std::nullopt;
  Welcome w;
  const auto v = get<std::uint32_t>(in);
  if (v > static_cast<std::uint32_t>(Verdict::wrong_protocol)) return std::nullopt;
  w.verdict = static_cast<Verdict>(v);
  w.flags = get<std::uint32_t>(in);
  w.cluster_version = get<std::uint64_t>(in);
  get_array(in, w.nonce);
  get_array(in, w.mac);
  return w;
}

Nonce fresh_nonce() {
  Nonce n;
  if (RAND_bytes(reinterpret_cast<unsigned char*>(n.data()), static_cast<int>(n.size())) != 1) {
    throw std::runtime_error("RAND_bytes failed");
  }
  return n;
}

Mac acceptor_mac(const std::string& secret, const Hello& hello, const Nonce& acceptor_nonce) {
  return mac_of(secret, "kungfu-acceptor", hello, acceptor_nonce);
}

Mac connector_mac(const std::string& secret, const Hello& hello, const Nonce& acceptor_nonce) {
  return mac_of(secret, "kungfu-connector", hello, acceptor_nonce);
}

bool same_mac(const Mac& a, std::span<const std::byte> b) {
  return b.size() == a.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

HelloJudgement judge_hello(const Hello& h, std::uint64_t cluster_version, int rank,
                           int cluster_size) {
  if (h.protocol != kProtocol) {
    return {Verdict::wrong_protocol, fmt::format("protocol {} (ours {})", h.protocol, kProtocol)};
  }
  if (h.cluster_version != cluster_version) {
    return {Verdict::wrong_version, fmt::format("rank {} of cluster version {} (ours {})",
                                                h.source_rank, h.cluster_version, cluster_version)};
  }
  if (h.destination_rank != static_cast<std::uint32_t>(rank) ||
      h.source_rank >= static_cast<std::uint32_t>(cluster_size) ||
      h.source_rank == static_cast<std::uint32_t>(rank)) {
    return {Verdict::wrong_rank,
            fmt::format("claims rank {} -> {} (we are rank {} of {})", h.source_rank,
                        h.destination_rank, rank, cluster_size)};
  }
  return {};
}

WelcomeOutcome judge_welcome(const Welcome& w, const Hello& hello, std::uint64_t cluster_version,
                             const std::string& secret) {
  if (w.verdict == Verdict::wrong_version && w.cluster_version < cluster_version) {
    return WelcomeOutcome::retry;
  }
  if (w.verdict != Verdict::ok) return WelcomeOutcome::refused;
  if (!same_mac(acceptor_mac(secret, hello, w.nonce), w.mac)) return WelcomeOutcome::forged;
  return WelcomeOutcome::accept;
}

}  // namespace kf::handshake
