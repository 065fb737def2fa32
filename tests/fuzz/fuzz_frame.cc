// Fuzzes the socket transport's frame decoder (real/wire.h): the bytes a peer sends on a
// connection once the handshake is done. Input: one byte that picks how the stream is split,
// then the stream.
//
// Contract checked (beyond no crash, no sanitizer report):
//   - the decoder's result does not depend on how the stream arrives: fed whole, or in pieces of
//     any size with payloads written through direct_target()/commit() as the socket reader does,
//     it yields the same messages, acks, lent payloads, bye and error;
//   - nothing it yields exceeds its limits (name <= kMaxNameBytes, payload <= the limit given);
//   - every message it yields (lent ones aside) encodes back into bytes that decode to it.
// The payload limit is 64 KiB here rather than the transport's 1 GiB, so that the fuzzer spends
// its time on headers, not on zero pages; wire_test checks the real limit.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "real/wire.h"
#include "tests/fuzz/fuzz_check.h"

namespace kf::fuzz {
namespace {

constexpr std::uint64_t kMaxPayload = 64 * 1024;

struct Outcome {
  std::vector<Message> messages;
  std::vector<std::uint64_t> acks;
  std::vector<wire::LentRef> lent;
  bool failed = false;
  bool bye = false;
  std::string error;
};

// Fed in one call.
Outcome decode_whole(std::span<const std::byte> stream) {
  wire::FrameDecoder d(kMaxPayload);
  Outcome o;
  d.feed(stream, o.messages);
  o.acks = d.take_acks();
  o.lent = d.take_lent();
  o.failed = d.failed();
  o.bye = d.saw_bye();
  o.error = d.error();
  return o;
}

// Fed in pieces whose sizes come from a small generator seeded by `split`; while a payload is
// expected, every other piece goes through direct_target()/commit() instead of feed().
Outcome decode_split(std::span<const std::byte> stream, std::uint8_t split) {
  wire::FrameDecoder d(kMaxPayload);
  Outcome o;
  std::uint32_t state = 0x9E3779B9u ^ split;
  auto next = [&state] {
    state = state * 1664525u + 1013904223u;
    return state >> 16;
  };
  const std::size_t max_piece = 1 + (split & 0x3F);
  bool direct_turn = (split & 0x80) != 0;
  while (!stream.empty()) {
    const std::size_t n = std::min<std::size_t>(stream.size(), 1 + next() % max_piece);
    const auto target = d.direct_target();
    if (!target.empty() && direct_turn) {
      const std::size_t k = std::min(n, target.size());
      std::memcpy(target.data(), stream.data(), k);
      d.commit(k, o.messages);
      stream = stream.subspan(k);
    } else {
      const bool ok = d.feed(stream.first(n), o.messages);
      stream = stream.subspan(n);
      KF_FUZZ_CHECK(ok == !d.failed(), "feed's result disagrees with failed()");
      if (!ok) break;
    }
    direct_turn = !direct_turn;
  }
  o.acks = d.take_acks();
  o.lent = d.take_lent();
  o.failed = d.failed();
  o.bye = d.saw_bye();
  o.error = d.error();
  return o;
}

bool same_message(const Message& a, const Message& b) {
  const auto& x = a.header;
  const auto& y = b.header;
  if (x.kind != y.kind || x.flags != y.flags || x.name != y.name || x.chunk != y.chunk ||
      x.step != y.step || x.tag != y.tag || x.version != y.version) {
    return false;
  }
  if (a.payload.is_phantom() != b.payload.is_phantom() || a.payload.size() != b.payload.size()) {
    return false;
  }
  return a.payload.is_phantom() || a.payload.size() == 0 ||
         std::memcmp(a.payload.data(), b.payload.data(), a.payload.size()) == 0;
}

void check_same(const Outcome& a, const Outcome& b) {
  KF_FUZZ_CHECK(a.failed == b.failed, "failed differs between whole and split feeding: '" +
                                          a.error + "' vs '" + b.error + "'");
  KF_FUZZ_CHECK(a.error == b.error, "error differs: '" + a.error + "' vs '" + b.error + "'");
  KF_FUZZ_CHECK(a.bye == b.bye, "bye differs between whole and split feeding");
  KF_FUZZ_CHECK(a.messages.size() == b.messages.size(),
                "message count differs: " + std::to_string(a.messages.size()) + " vs " +
                    std::to_string(b.messages.size()));
  for (std::size_t i = 0; i < a.messages.size(); ++i) {
    KF_FUZZ_CHECK(same_message(a.messages[i], b.messages[i]),
                  "message " + std::to_string(i) + " differs between whole and split feeding");
  }
  KF_FUZZ_CHECK(a.acks == b.acks, "acks differ between whole and split feeding");
  KF_FUZZ_CHECK(a.lent.size() == b.lent.size(), "lent payloads differ in number");
  for (std::size_t i = 0; i < a.lent.size(); ++i) {
    const auto& x = a.lent[i];
    const auto& y = b.lent[i];
    KF_FUZZ_CHECK(x.index == y.index && x.size == y.size && x.lent.address == y.lent.address &&
                      x.lent.id == y.lent.id && x.lent.slot == y.lent.slot,
                  "lent payload " + std::to_string(i) + " differs");
  }
}

void check_limits_and_round_trip(const Outcome& o) {
  std::vector<bool> lent(o.messages.size(), false);
  for (const auto& l : o.lent) {
    KF_FUZZ_CHECK(l.index < o.messages.size(), "a lent payload refers to no message");
    KF_FUZZ_CHECK(l.size <= kMaxPayload, "a lent payload is over the limit");
    lent[l.index] = true;
  }
  for (std::size_t i = 0; i < o.messages.size(); ++i) {
    const Message& m = o.messages[i];
    KF_FUZZ_CHECK(m.header.name.size() <= wire::kMaxNameBytes, "a name is over the limit");
    KF_FUZZ_CHECK(m.payload.size() <= kMaxPayload, "a payload is over the limit");
    KF_FUZZ_CHECK(m.header.cluster_version == 0, "the cluster version is not on the wire");
    if (lent[i]) continue;  // its bytes are the sender's: encode() would send an empty payload
    const auto bytes = wire::encode(m);
    wire::FrameDecoder d(kMaxPayload);
    std::vector<Message> again;
    KF_FUZZ_CHECK(d.feed(bytes, again), "a decoded message does not decode again: " + d.error());
    KF_FUZZ_CHECK(again.size() == 1 && same_message(again[0], m) && d.idle(),
                  "message " + std::to_string(i) + " does not survive encode and decode");
  }
}

}  // namespace
}  // namespace kf::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kf::fuzz;
  if (size == 0) return 0;
  const std::uint8_t split = data[0];
  const std::span<const std::byte> stream(reinterpret_cast<const std::byte*>(data + 1), size - 1);
  try {
    const Outcome whole = decode_whole(stream);
    const Outcome pieces = decode_split(stream, split);
    check_same(whole, pieces);
    check_limits_and_round_trip(whole);
  } catch (const std::exception& e) {
    unexpected(e);  // the decoder reports malformed input through failed(), never by throwing
  }
  return 0;
}
