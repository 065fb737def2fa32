// Wire format of the socket transport. After the handshake, a connection carries frames in one
// direction: a fixed 40-byte header, the name, then the payload. Integers are little-endian (every
// supported host is). FrameDecoder is incremental: it validates each header before allocating
// anything for it, and lets the reader receive large payloads straight into the Message.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "runtime/message.h"
#include "runtime/wire_size.h"

namespace kf::wire {

inline constexpr std::size_t kHeaderBytes = kFrameHeaderBytes;
inline constexpr std::size_t kMaxNameBytes = 4096;
inline constexpr std::uint64_t kMaxPayloadBytes = std::uint64_t{1} << 30;

// Transport-level frame types: the message kinds, plus "bye" (an orderly close follows) and
// "ack" (tag = the id of a lent payload the receiver has copied and the sender may free).
inline constexpr std::uint8_t kFrameBye = 0xFF;
inline constexpr std::uint8_t kFrameAck = 0xFE;
// Transport-level frame bits.
inline constexpr std::uint8_t kBitPhantom = 1u << 0;  // payload_len bytes are implied, not sent
// The payload stays in the sender's memory: 24 bytes follow the name (u64 address, u64 lend id,
// u64 address of the lend's slot) and the receiver copies it across processes (same host only),
// trusting the copy only if the slot still holds the id afterwards; then it acks the id.
inline constexpr std::uint8_t kBitLent = 1u << 1;
inline constexpr std::size_t kLentBytes = 24;
// A ring's frames: 0-7 bytes follow the name, so that what comes next lies on 8 bytes from the
// frame's start, and 0-7 follow a sent payload, so that the frame's length is a multiple of 8.
// Every frame of a ring then starts on 8 bytes, and so does every payload in it, which its reader
// folds where it lies (RingSlice): elements aligned as their type needs.
inline constexpr std::uint8_t kBitPadded = 1u << 2;
inline constexpr std::size_t padding_to_8(std::size_t n) {
  return (8 - n % 8) % 8;
}

struct Lent {
  std::uint64_t address = 0;
  std::uint64_t id = 0;
  std::uint64_t slot = 0;
};
// A lent message the decoder produced: its payload is left empty for the reader to fill.
struct LentRef {
  std::size_t index;  // into the decoder's output vector
  Lent lent;
  std::size_t size;  // of the payload
};

// Header of `message` followed by its name (and, `padded`, the name's padding, kBitPadded): what
// goes before the payload on the wire.
std::vector<std::byte> encode_prefix(const Message& message, bool padded = false);
// The same into `out`, which must hold prefix_bytes(message, padded); returns the bytes written.
std::size_t prefix_bytes(const Message& message, bool padded = false);
std::size_t encode_prefix(const Message& message, std::span<std::byte> out, bool padded = false);
// How many bytes of padding follow the payload of a `padded` frame of `message`.
std::size_t suffix_bytes(const Message& message, bool padded);
// The prefix of a message whose payload is lent rather than sent.
std::vector<std::byte> encode_lent_prefix(const Message& message, Lent lent, bool padded = false);
std::vector<std::byte> encode_bye();
std::vector<std::byte> encode_ack(std::uint64_t id);
// Prefix + payload in one buffer (tests, fuzzing).
std::vector<std::byte> encode(const Message& message);

// For a reader whose bytes stay put until it has delivered what it decoded from them (a
// shared-memory ring): a payload of min_bytes to max_bytes that lies whole in the bytes fed
// becomes make(its bytes), left where it is, instead of a copy. Other payloads, and those split
// between feeds, are copied as usual.
struct InPlace {
  std::size_t min_bytes = 0;
  std::size_t max_bytes = SIZE_MAX;
  std::function<Payload(std::span<const std::byte>)> make;
};

class FrameDecoder {
 public:
  // Largest payload accepted; a frame announcing more is a protocol error.
  explicit FrameDecoder(std::uint64_t max_payload = kMaxPayloadBytes) : max_payload_(max_payload) {}

  // Consumes bytes; complete messages are appended to `out`. Returns false (and stays failed) on
  // a malformed frame; error() says why.
  bool feed(std::span<const std::byte> bytes, std::vector<Message>& out,
            const InPlace* in_place = nullptr);

  // Asked for every sent payload of at least `min_bytes`, once its frame's header and name have
  // come: where it belongs (Transport::Handlers::landing). A landing's payload is written there
  // while its lease is open and comes out placed (Payload::placed); one whose lease closes midway
  // is read to its end into bytes of its own and dropped (dropped_landings()).
  using Lander = std::function<Landing(const MessageHeader&, std::size_t)>;
  void set_lander(Lander lander, std::size_t min_bytes) {
    lander_ = std::move(lander);
    land_min_bytes_ = min_bytes;
  }

  // While a payload is being received: where the rest of it goes, so a reader can read into it
  // directly; commit(n) after writing n bytes there. Empty otherwise.
  std::span<std::byte> direct_target();
  void commit(std::size_t n, std::vector<Message>& out);

  bool failed() const { return !error_.empty(); }
  const std::string& error() const { return error_; }
  bool saw_bye() const { return bye_; }
  // Lent payloads and acks seen since the last take (indices refer to the `out` vector fed).
  std::vector<LentRef> take_lent() { return std::exchange(lent_, {}); }
  std::vector<std::uint64_t> take_acks() { return std::exchange(acks_, {}); }
  // Messages dropped since the last take because their landing's lease closed midway.
  std::uint64_t take_dropped_landings() { return std::exchange(dropped_landings_, 0); }
  // True between frames: nothing partial is buffered.
  bool idle() const { return state_ == State::header && header_fill_ == 0; }

 private:
  enum class State { header, name, name_padding, lent, payload, payload_padding, closed };
  void after_name(std::vector<Message>& out);
  void after_name_padding(std::vector<Message>& out);
  void finish_payload(std::vector<Message>& out);  // finish_message, then its padding
  bool take_header(std::vector<Message>& out);
  // A message frame that lies whole at the start of `bytes` (between frames), decoded straight
  // into `out`: the bytes it took, or 0 for a frame the states take (a bye, an ack, a lent payload,
  // a bad header, a frame cut short).
  std::size_t take_whole_frame(std::span<const std::byte> bytes, std::vector<Message>& out,
                               const InPlace* in_place);
  void finish_message(std::vector<Message>& out);
  // Where the lander puts a payload of `bytes` (the lease null for nowhere).
  Landing land(const MessageHeader& header, std::size_t bytes) const;
  void make_room();  // for the payload being received: a landing, or bytes of its own
  bool fail(std::string why);

  std::uint64_t max_payload_;
  State state_ = State::header;
  std::array<std::byte, kHeaderBytes> header_{};
  std::size_t header_fill_ = 0;
  std::size_t name_len_ = 0;
  // A sent payload's size, and whether current_ holds room for it yet: made when its first byte
  // comes (direct_target, feed), unless feed takes it in place.
  std::size_t payload_len_ = 0;
  bool payload_room_ = false;
  std::size_t name_padding_ = 0;     // kBitPadded: bytes to skip after the name
  std::size_t payload_padding_ = 0;  // and after a sent payload
  std::size_t padding_left_ = 0;     // of the padding being skipped
  std::size_t payload_fill_ = 0;
  Message current_;
  std::string error_;
  bool bye_ = false;
  bool lent_frame_ = false;
  std::array<std::byte, kLentBytes> lent_buf_{};
  std::size_t lent_fill_ = 0;
  std::size_t lent_size_ = 0;
  std::vector<LentRef> lent_;
  std::vector<std::uint64_t> acks_;
  Lander lander_;
  std::size_t land_min_bytes_ = 0;
  Landing landing_;            // of the payload being received, if it has one
  bool drop_current_ = false;  // its landing closed midway: read on, then dropped
  std::uint64_t dropped_landings_ = 0;
};

}  // namespace kf::wire
