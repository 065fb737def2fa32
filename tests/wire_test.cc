// The frame decoder: round trips under every split of the byte stream, and rejection of
// malformed or oversized headers before anything is allocated for them (a property test over
// random and mutated streams stands in for a fuzzer: it must never crash or over-allocate).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <span>
#include <string>

#include "real/wire.h"

namespace kf::wire {
namespace {

Message make(std::uint32_t i, std::size_t payload) {
  Message m;
  m.header.kind = static_cast<MessageKind>(i % 5);
  m.header.flags = i * 7;
  m.header.name = "grad/" + std::to_string(i);
  m.header.chunk = i;
  m.header.step = i % 2;
  m.header.tag = 1000 + i;
  m.header.version = 99 + i;
  std::vector<std::byte> bytes(payload);
  for (std::size_t k = 0; k < payload; ++k)
    bytes[k] = static_cast<std::byte>((k * 31 + i) & 0xFF);
  m.payload = Payload(std::move(bytes));
  return m;
}

void expect_same(const Message& a, const Message& b) {
  EXPECT_EQ(a.header.kind, b.header.kind);
  EXPECT_EQ(a.header.flags, b.header.flags);
  EXPECT_EQ(a.header.name, b.header.name);
  EXPECT_EQ(a.header.chunk, b.header.chunk);
  EXPECT_EQ(a.header.step, b.header.step);
  EXPECT_EQ(a.header.tag, b.header.tag);
  EXPECT_EQ(a.header.version, b.header.version);
  EXPECT_EQ(a.payload.is_phantom(), b.payload.is_phantom());
  ASSERT_EQ(a.payload.size(), b.payload.size());
  if (!a.payload.is_phantom() && a.payload.size() > 0) {
    EXPECT_EQ(0, std::memcmp(a.payload.data(), b.payload.data(), a.payload.size()));
  }
}

// Every message of `sent` came back, in order, as it was sent.
void expect_all_same(const std::vector<Message>& sent, const std::vector<Message>& got) {
  ASSERT_EQ(got.size(), sent.size());
  for (std::size_t i = 0; i < sent.size(); ++i)
    expect_same(sent[i], got[i]);
}

// Takes payloads of at least min_bytes in place as borrowed views, recording where each pointed.
InPlace recording_in_place(std::vector<const std::byte*>& made, std::size_t min_bytes) {
  return InPlace{.min_bytes = min_bytes, .make = [&made](std::span<const std::byte> bytes) {
                   made.push_back(bytes.data());
                   return Payload::borrowed(bytes.data(), bytes.size(), std::make_shared<int>(0));
                 }};
}

// The messages of the round-trip tests: `count` of the sizes in turn, then a phantom.
std::vector<Message> sample_messages(std::span<const std::size_t> sizes, std::uint32_t count,
                                     bool varied_names) {
  std::vector<Message> sent;
  for (std::uint32_t i = 0; i < count; ++i) {
    Message m = make(i, sizes[i % sizes.size()]);
    if (varied_names) m.header.name = std::string(i % 9, 'n') + std::to_string(i);
    sent.push_back(std::move(m));
  }
  Message phantom = make(99, 0);
  phantom.payload = Payload::phantom(12345);
  sent.push_back(std::move(phantom));
  return sent;
}

std::vector<std::byte> stream_of(const std::vector<Message>& ms) {
  std::vector<std::byte> out;
  for (const auto& m : ms) {
    const auto e = encode(m);
    out.insert(out.end(), e.begin(), e.end());
  }
  return out;
}

// As a ring's writer frames them (kBitPadded): each frame's length a multiple of 8.
std::vector<std::byte> padded_stream_of(const std::vector<Message>& ms) {
  std::vector<std::byte> out;
  for (const auto& m : ms) {
    const auto prefix = encode_prefix(m, /*padded=*/true);
    const std::size_t start = out.size();
    out.insert(out.end(), prefix.begin(), prefix.end());
    if (!m.payload.is_phantom())
      out.insert(out.end(), m.payload.data(), m.payload.data() + m.payload.size());
    out.resize(out.size() + suffix_bytes(m, /*padded=*/true));
    EXPECT_EQ((out.size() - start) % 8, 0u) << m.header.name;
  }
  return out;
}

// Decodes `stream` in pieces of 1 to max_piece bytes, half the time through the direct path the
// socket reader takes for payloads; before each piece, before_piece(bytes decoded so far). A
// decoder error fails the test here: wrap the call in ASSERT_NO_FATAL_FAILURE.
void decode_in_random_pieces(FrameDecoder& d, std::span<const std::byte> stream, std::mt19937& rng,
                             std::size_t max_piece, std::vector<Message>& got,
                             const std::function<void(std::size_t)>& before_piece = {}) {
  std::size_t pos = 0;
  while (pos < stream.size()) {
    if (before_piece) before_piece(pos);
    const std::size_t n = std::min<std::size_t>(stream.size() - pos, 1 + rng() % max_piece);
    auto direct = d.direct_target();
    if (!direct.empty() && rng() % 2 == 0) {
      const std::size_t k = std::min(n, direct.size());
      std::memcpy(direct.data(), stream.data() + pos, k);
      d.commit(k, got);
      pos += k;
      continue;
    }
    ASSERT_TRUE(d.feed(stream.subspan(pos, n), got)) << d.error();
    pos += n;
  }
}

TEST(Wire, RoundTripUnderRandomSplits) {
  const std::size_t sizes[] = {0, 1, 7, 40, 4096, 100000};
  const std::vector<Message> sent = sample_messages(sizes, 24, /*varied_names=*/false);
  const auto stream = stream_of(sent);
  std::mt19937 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    FrameDecoder d;
    std::vector<Message> got;
    ASSERT_NO_FATAL_FAILURE(decode_in_random_pieces(d, stream, rng, trial % 2 ? 50 : 70000, got));
    expect_all_same(sent, got);
    EXPECT_TRUE(d.idle());
  }
}

// A ring's padded frames (names of every length mod 8, odd payloads, a phantom) decode the same
// under random splits, and every payload taken in place from a stream that starts on 8 bytes
// starts on 8 bytes too.
TEST(Wire, PaddedFramesRoundTripAndPutEveryPayloadOn8Bytes) {
  const std::size_t sizes[] = {0, 1, 7, 40, 4097, 20001, 100000};
  const std::vector<Message> sent = sample_messages(sizes, 28, /*varied_names=*/true);
  const auto stream = padded_stream_of(sent);
  std::mt19937 rng(11);
  for (int trial = 0; trial < 30; ++trial) {
    FrameDecoder d;
    std::vector<Message> got;
    for (std::size_t pos = 0; pos < stream.size();) {
      const std::size_t n =
          std::min<std::size_t>(stream.size() - pos, 1 + rng() % (trial % 2 ? 13 : 50000));
      ASSERT_TRUE(d.feed(std::span(stream.data() + pos, n), got)) << d.error();
      pos += n;
    }
    expect_all_same(sent, got);
    EXPECT_TRUE(d.idle());
  }
  std::vector<const std::byte*> made;
  const InPlace in_place = recording_in_place(made, 1);
  FrameDecoder whole;
  std::vector<Message> got;
  ASSERT_TRUE(whole.feed(stream, got, &in_place)) << whole.error();
  expect_all_same(sent, got);
  ASSERT_EQ(made.size(), 24u);  // every sent payload but the empty ones
  for (const std::byte* p : made)
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 8, 0u);
}

std::vector<std::byte> header_with(std::uint8_t type, std::uint8_t bits, std::uint16_t name_len,
                                   std::uint64_t payload_len) {
  std::vector<std::byte> h(kHeaderBytes);
  std::memcpy(h.data() + 0, &type, 1);
  std::memcpy(h.data() + 1, &bits, 1);
  std::memcpy(h.data() + 2, &name_len, 2);
  std::memcpy(h.data() + 32, &payload_len, 8);
  return h;
}

// With InPlace, a payload of min_bytes to max_bytes that lies whole in the bytes fed becomes
// make's payload (here a borrowed view that records where it pointed); a smaller or larger one,
// or one split between two feeds, is copied as usual. Every message decodes the same either way.
TEST(Wire, APayloadWholeInTheBytesFedIsTakenInPlaceFromItsSize) {
  const std::vector<Message> sent = {make(1, 5000), make(2, 20000), make(3, 0), make(4, 30000)};
  const std::vector<std::byte> stream = stream_of(sent);
  std::vector<const std::byte*> made;
  const InPlace in_place = recording_in_place(made, 16384);
  // Whole: the two large payloads are views into the stream, at their place in it.
  FrameDecoder whole;
  std::vector<Message> got;
  ASSERT_TRUE(whole.feed(stream, got, &in_place));
  expect_all_same(sent, got);
  ASSERT_EQ(made.size(), 2u);
  EXPECT_EQ(got[1].payload.data(), made[0]);
  EXPECT_EQ(got[3].payload.data(), made[1]);
  EXPECT_GE(made[0], stream.data());
  EXPECT_LT(made[1], stream.data() + stream.size());
  EXPECT_NE(got[0].payload.data(), nullptr);
  EXPECT_FALSE(got[0].payload.is_borrowed());  // 5000 bytes: copied
  // Split inside the second payload: it is copied; the fourth, whole in the second feed, is not.
  made.clear();
  const std::size_t cut = encode(sent[0]).size() + encode_prefix(sent[1]).size() + 100;
  FrameDecoder split;
  std::vector<Message> again;
  ASSERT_TRUE(split.feed(std::span(stream).first(cut), again, &in_place));
  ASSERT_TRUE(split.feed(std::span(stream).subspan(cut), again, &in_place));
  ASSERT_EQ(again.size(), sent.size());
  for (std::size_t i = 0; i < sent.size(); ++i)
    expect_same(again[i], sent[i]);
  EXPECT_FALSE(again[1].payload.is_borrowed());
  EXPECT_TRUE(again[3].payload.is_borrowed());
  EXPECT_EQ(made.size(), 1u);
  // Past max_bytes: copied, though whole.
  made.clear();
  InPlace capped = in_place;
  capped.max_bytes = 25000;
  FrameDecoder limited;
  std::vector<Message> third;
  ASSERT_TRUE(limited.feed(stream, third, &capped));
  ASSERT_EQ(third.size(), sent.size());
  for (std::size_t i = 0; i < sent.size(); ++i)
    expect_same(third[i], sent[i]);
  EXPECT_TRUE(third[1].payload.is_borrowed());
  EXPECT_FALSE(third[3].payload.is_borrowed());
  EXPECT_EQ(made.size(), 1u);
}

// Payloads of at least min_bytes land where the lander says, under random splits of the stream
// and through both the fed and the direct path, and come out placed there. A landing whose lease
// closes while its payload is being read takes nothing more; the message is dropped and the
// stream goes on behind it.
TEST(Wire, LargePayloadsLandWhereTheLanderSaysAndAClosedLeaseDropsTheMessage) {
  const std::size_t sizes[] = {40, 70000, 300000, 5000};
  const std::vector<Message> sent = sample_messages(sizes, 12, /*varied_names=*/false);
  const auto stream = stream_of(sent);
  std::mt19937 rng(11);
  for (int trial = 0; trial < 40; ++trial) {
    // Every fourth message's landing closes once some of its bytes have come (trial-dependent).
    std::vector<std::vector<std::byte>> places(sent.size());
    std::vector<std::shared_ptr<LandingLease>> leases(sent.size());
    FrameDecoder d;
    d.set_lander(
        [&](const MessageHeader& h, std::size_t bytes) -> Landing {
          const std::size_t i = h.chunk;
          EXPECT_EQ(bytes, sent.at(i).payload.size());
          places[i].assign(bytes, std::byte{0});
          leases[i] = std::make_shared<LandingLease>();
          return {.at = places[i].data(), .size = bytes, .lease = leases[i]};
        },
        65536);
    std::vector<Message> got;
    const auto close_some = [&](std::size_t pos) {
      for (std::size_t i = 3; i < sent.size(); i += 4) {
        if (leases[i] && pos > stream.size() * static_cast<std::size_t>(trial % 4) / 4)
          leases[i]->open = false;
      }
    };
    ASSERT_NO_FATAL_FAILURE(
        decode_in_random_pieces(d, stream, rng, trial % 2 ? 5000 : 400000, got, close_some));
    EXPECT_TRUE(d.idle());
    std::size_t next = 0;
    std::uint64_t dropped = 0;
    for (std::size_t i = 0; i < sent.size(); ++i) {
      const bool lands = !sent[i].payload.is_phantom() && sent[i].payload.size() >= 65536;
      if (lands && !leases[i]->open) {  // closed: dropped, whatever came before the close
        ++dropped;
        continue;
      }
      ASSERT_LT(next, got.size());
      const Message& m = got[next++];
      expect_same(sent[i], m);
      EXPECT_EQ(m.payload.is_placed(), lands) << i;
      if (lands) {
        EXPECT_EQ(m.payload.data(), places[i].data()) << i;
        EXPECT_EQ(0, std::memcmp(places[i].data(), sent[i].payload.data(), places[i].size()));
      }
    }
    EXPECT_EQ(next, got.size());
    EXPECT_EQ(d.take_dropped_landings(), dropped);
  }
}

// A closed lease is never written through: the bytes after its close go elsewhere.
TEST(Wire, NothingIsWrittenIntoALandingAfterItsLeaseCloses) {
  const std::vector<Message> sent = {make(0, 200000), make(1, 8)};
  const auto stream = stream_of(sent);
  std::vector<std::byte> place(200000, std::byte{0});
  auto lease = std::make_shared<LandingLease>();
  FrameDecoder d;
  d.set_lander(
      [&](const MessageHeader&, std::size_t bytes) -> Landing {
        return {.at = place.data(), .size = bytes, .lease = lease};
      },
      1);
  std::vector<Message> got;
  const std::size_t first = encode_prefix(sent[0]).size() + 1000;
  ASSERT_TRUE(d.feed(std::span(stream).first(first), got));
  lease->open = false;
  ASSERT_TRUE(d.feed(std::span(stream).subspan(first), got));
  ASSERT_EQ(got.size(), 1u);
  expect_same(sent[1], got[0]);
  EXPECT_EQ(d.take_dropped_landings(), 1u);
  EXPECT_EQ(0, std::memcmp(place.data(), sent[0].payload.data(), 1000));
  for (std::size_t k = 1000; k < place.size(); ++k)
    ASSERT_EQ(place[k], std::byte{0}) << k;
}

TEST(Wire, RejectsUnknownKind) {
  FrameDecoder d;
  std::vector<Message> got;
  EXPECT_FALSE(d.feed(header_with(7, 0, 0, 0), got));
  EXPECT_NE(d.error().find("unknown frame type"), std::string::npos);
  EXPECT_TRUE(got.empty());
  // Stays failed.
  EXPECT_FALSE(d.feed(encode(make(0, 3)), got));
  EXPECT_TRUE(got.empty());
}

TEST(Wire, RejectsUnknownBits) {
  FrameDecoder d;
  std::vector<Message> got;
  EXPECT_FALSE(d.feed(header_with(0, 0x80, 0, 0), got));
}

TEST(Wire, RejectsLongName) {
  FrameDecoder d;
  std::vector<Message> got;
  EXPECT_FALSE(d.feed(header_with(0, 0, kMaxNameBytes + 1, 0), got));
  EXPECT_NE(d.error().find("too long"), std::string::npos);
}

TEST(Wire, RejectsHugePayloadBeforeAllocating) {
  FrameDecoder d;
  std::vector<Message> got;
  // 2^62 bytes: resizing would throw bad_alloc or kill the process; the check must come first.
  EXPECT_FALSE(d.feed(header_with(0, 0, 4, std::uint64_t{1} << 62), got));
  EXPECT_NE(d.error().find("over the limit"), std::string::npos);
  FrameDecoder small(1000);
  EXPECT_FALSE(small.feed(header_with(0, 0, 0, 1001), got));
  EXPECT_FALSE(small.feed(std::vector<std::byte>(0), got));  // stays failed
  EXPECT_TRUE(small.failed());
}

TEST(Wire, ByeEndsTheStream) {
  FrameDecoder d;
  std::vector<Message> got;
  auto s = encode(make(1, 10));
  const auto bye = encode_bye();
  s.insert(s.end(), bye.begin(), bye.end());
  EXPECT_TRUE(d.feed(s, got));
  EXPECT_EQ(got.size(), 1u);
  EXPECT_TRUE(d.saw_bye());
  EXPECT_FALSE(d.feed(encode(make(2, 1)), got));  // nothing may follow a bye
  EXPECT_EQ(got.size(), 1u);
}

// Property: any byte stream, random or a mutated valid one, fed in random pieces, ends either in
// failure or in whole messages; never a crash, never a payload over the cap.
TEST(Wire, PropertyRandomAndMutatedStreamsAreSafe) {
  std::mt19937_64 rng(12345);
  const auto valid = stream_of({make(1, 10), make(2, 0), make(3, 300), make(4, 5000)});
  constexpr std::uint64_t kCap = 1u << 20;
  int failures = 0;
  int successes = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    std::vector<std::byte> s;
    if (trial % 2 == 0) {
      s.resize(rng() % 200);
      for (auto& b : s)
        b = static_cast<std::byte>(rng());
      // Bias towards plausible headers: a known kind and a small name length.
      if (!s.empty()) s[0] = static_cast<std::byte>(rng() % 4);
      if (s.size() > 3 && rng() % 2) s[2] = s[3] = std::byte{0};
    } else {
      s = valid;
      const int flips = 1 + static_cast<int>(rng() % 4);
      for (int f = 0; f < flips; ++f)
        s[rng() % s.size()] = static_cast<std::byte>(rng());
      if (rng() % 4 == 0) s.resize(rng() % s.size());
    }
    FrameDecoder d(kCap);
    std::vector<Message> got;
    std::size_t pos = 0;
    bool ok = true;
    while (pos < s.size() && ok) {
      const std::size_t n = std::min<std::size_t>(s.size() - pos, 1 + rng() % 64);
      ok = d.feed(std::span(s.data() + pos, n), got);
      pos += n;
    }
    for (const auto& m : got) {
      ASSERT_LE(m.payload.size(), kCap);
      ASSERT_LE(m.header.name.size(), kMaxNameBytes);
    }
    (ok ? successes : failures)++;
  }
  EXPECT_GT(failures, 0);
  EXPECT_GT(successes, 0);
}

}  // namespace
}  // namespace kf::wire
