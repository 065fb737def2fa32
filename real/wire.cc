#include "real/wire.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace kf::wire {
namespace {

// Header layout (offsets in bytes):
//  0 u8 frame type (MessageKind or kFrameBye)   1 u8 bits   2 u16 name length
//  4 u32 flags   8 u32 chunk   12 u32 step   16 u64 tag   24 u64 version   32 u64 payload length
template <typename T>
void put(std::byte* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}
template <typename T>
T get(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

bool known_kind(std::uint8_t k) {
  return k == static_cast<std::uint8_t>(MessageKind::collective) ||
         k == static_cast<std::uint8_t>(MessageKind::p2p_request) ||
         k == static_cast<std::uint8_t>(MessageKind::p2p_response) ||
         k == static_cast<std::uint8_t>(MessageKind::ping) ||
         k == static_cast<std::uint8_t>(MessageKind::pong);
}

}  // namespace

std::size_t prefix_bytes(const Message& m, bool padded) {
  const std::size_t name = m.header.name.size();
  return kHeaderBytes + name + (padded ? padding_to_8(name) : 0);
}

std::size_t suffix_bytes(const Message& m, bool padded) {
  return padded && !m.payload.is_phantom() ? padding_to_8(m.payload.size()) : 0;
}

std::vector<std::byte> encode_prefix(const Message& m, bool padded) {
  std::vector<std::byte> out(prefix_bytes(m, padded));
  encode_prefix(m, out, padded);
  return out;
}

std::size_t encode_prefix(const Message& m, std::span<std::byte> out, bool padded) {
  const auto& h = m.header;
  const std::size_t size = prefix_bytes(m, padded);
  if (out.size() < size) {
    throw std::invalid_argument(
        fmt::format("encode_prefix: {} bytes cannot hold the prefix of {}", out.size(), size));
  }
  std::byte* p = out.data();
  const std::uint8_t bits = (m.payload.is_phantom() ? kBitPhantom : 0) | (padded ? kBitPadded : 0);
  put<std::uint8_t>(p + 0, static_cast<std::uint8_t>(h.kind));
  put<std::uint8_t>(p + 1, bits);
  put<std::uint16_t>(p + 2, static_cast<std::uint16_t>(h.name.size()));
  put<std::uint32_t>(p + 4, h.flags);
  put<std::uint32_t>(p + 8, h.chunk);
  put<std::uint32_t>(p + 12, h.step);
  put<std::uint64_t>(p + 16, h.tag);
  put<std::uint64_t>(p + 24, h.version);
  put<std::uint64_t>(p + 32, m.payload.size());
  std::memcpy(p + kHeaderBytes, h.name.data(), h.name.size());
  std::memset(p + kHeaderBytes + h.name.size(), 0, size - kHeaderBytes - h.name.size());
  return size;
}

std::vector<std::byte> encode_lent_prefix(const Message& m, Lent lent, bool padded) {
  auto out = encode_prefix(m, padded);
  out[1] = static_cast<std::byte>(kBitLent | (padded ? kBitPadded : 0));
  const std::size_t at = out.size();
  out.resize(at + kLentBytes);
  put<std::uint64_t>(out.data() + at, lent.address);
  put<std::uint64_t>(out.data() + at + 8, lent.id);
  put<std::uint64_t>(out.data() + at + 16, lent.slot);
  return out;
}

std::vector<std::byte> encode_ack(std::uint64_t id) {
  std::vector<std::byte> out(kHeaderBytes);
  put<std::uint8_t>(out.data(), kFrameAck);
  put<std::uint64_t>(out.data() + 16, id);
  return out;
}

std::vector<std::byte> encode_bye() {
  std::vector<std::byte> out(kHeaderBytes);
  put<std::uint8_t>(out.data(), kFrameBye);
  return out;
}

std::vector<std::byte> encode(const Message& m) {
  auto out = encode_prefix(m);
  if (!m.payload.is_phantom()) {
    out.insert(out.end(), m.payload.data(), m.payload.data() + m.payload.size());
  }
  return out;
}

bool FrameDecoder::fail(std::string why) {
  error_ = std::move(why);
  state_ = State::closed;
  return false;
}

namespace {

// A frame header's fixed fields that say what follows it.
struct Framing {
  std::uint8_t type;
  std::uint8_t bits;
  std::uint16_t name_len;
  std::uint64_t payload_len;
};

Framing read_framing(const std::byte* p) {
  return {get<std::uint8_t>(p + 0), get<std::uint8_t>(p + 1), get<std::uint16_t>(p + 2),
          get<std::uint64_t>(p + 32)};
}

// Why a message frame (not a bye or an ack) cannot be taken; empty if it can.
std::string framing_problem(const Framing& f, std::uint64_t max_payload) {
  if (!known_kind(f.type)) return fmt::format("unknown frame type {}", f.type);
  if ((f.bits & ~(kBitPhantom | kBitLent | kBitPadded)) != 0 ||
      (f.bits & (kBitPhantom | kBitLent)) == (kBitPhantom | kBitLent)) {
    return fmt::format("unknown frame bits {:#x}", f.bits);
  }
  if (f.name_len > kMaxNameBytes) return fmt::format("name of {} bytes is too long", f.name_len);
  if (f.payload_len > max_payload) {
    return fmt::format("payload of {} bytes is over the limit of {}", f.payload_len, max_payload);
  }
  return {};
}

// The header fields a message frame carries besides its framing.
void read_fields(const std::byte* p, std::uint8_t type, MessageHeader& h) {
  h.kind = static_cast<MessageKind>(type);
  h.flags = get<std::uint32_t>(p + 4);
  h.chunk = get<std::uint32_t>(p + 8);
  h.step = get<std::uint32_t>(p + 12);
  h.tag = get<std::uint64_t>(p + 16);
  h.version = get<std::uint64_t>(p + 24);
}

}  // namespace

bool FrameDecoder::take_header(std::vector<Message>& out) {
  const std::byte* p = header_.data();
  const Framing f = read_framing(p);
  header_fill_ = 0;
  if (f.type == kFrameBye) {
    bye_ = true;
    state_ = State::closed;  // nothing may follow a bye
    return true;
  }
  if (f.type == kFrameAck) {
    acks_.push_back(get<std::uint64_t>(p + 16));
    return true;
  }
  if (std::string why = framing_problem(f, max_payload_); !why.empty()) return fail(std::move(why));
  lent_frame_ = (f.bits & kBitLent) != 0;
  const bool padded = (f.bits & kBitPadded) != 0;
  current_ = Message{};
  read_fields(p, f.type, current_.header);
  current_.header.name.reserve(f.name_len);
  name_len_ = f.name_len;
  payload_fill_ = 0;
  payload_len_ = 0;
  payload_room_ = false;
  landing_ = {};
  drop_current_ = false;
  name_padding_ = padded ? padding_to_8(f.name_len) : 0;
  payload_padding_ = 0;
  if ((f.bits & kBitPhantom) != 0) {
    current_.payload = Payload::phantom(static_cast<std::size_t>(f.payload_len));
  } else if (lent_frame_) {
    lent_size_ = static_cast<std::size_t>(f.payload_len);  // the bytes stay with the sender
  } else {
    payload_len_ = static_cast<std::size_t>(f.payload_len);  // room for it once its bytes come
    payload_padding_ = padded ? padding_to_8(payload_len_) : 0;
  }
  state_ = State::name;
  if (name_len_ == 0) after_name(out);
  return true;
}

std::size_t FrameDecoder::take_whole_frame(std::span<const std::byte> bytes,
                                           std::vector<Message>& out, const InPlace* in_place) {
  if (bytes.size() < kHeaderBytes) return 0;
  const std::byte* p = bytes.data();
  const Framing f = read_framing(p);
  // A bye, an ack, a lent payload or a bad header: the frame goes by the states.
  if (f.type == kFrameBye || f.type == kFrameAck || (f.bits & kBitLent) != 0 ||
      !framing_problem(f, max_payload_).empty()) {
    return 0;
  }
  const bool padded = (f.bits & kBitPadded) != 0;
  const bool phantom = (f.bits & kBitPhantom) != 0;
  const std::size_t name_end = kHeaderBytes + f.name_len + (padded ? padding_to_8(f.name_len) : 0);
  const std::size_t payload_len = static_cast<std::size_t>(f.payload_len);
  const std::size_t sent = phantom ? 0 : payload_len;
  const std::size_t end = name_end + sent + (padded && !phantom ? padding_to_8(sent) : 0);
  if (bytes.size() < end) return 0;
  Message& m = out.emplace_back();
  read_fields(p, f.type, m.header);
  m.header.name = std::string_view(reinterpret_cast<const char*>(p + kHeaderBytes), f.name_len);
  const std::span<const std::byte> payload = bytes.subspan(name_end, sent);
  if (phantom) {
    m.payload = Payload::phantom(payload_len);
  } else if (in_place != nullptr && sent >= in_place->min_bytes && sent <= in_place->max_bytes) {
    m.payload = in_place->make(payload);
  } else if (Landing l = land(m.header, sent); l.lease) {
    std::memcpy(l.at, payload.data(), sent);
    m.payload = Payload::placed(l.at, sent, std::move(l.lease));
  } else if (sent > 0) {
    m.payload.fill(sent);
    std::memcpy(m.payload.own_data(), payload.data(), sent);
  }
  return end;
}

void FrameDecoder::after_name(std::vector<Message>& out) {
  if (name_padding_ > 0) {
    state_ = State::name_padding;
    padding_left_ = name_padding_;
    return;
  }
  after_name_padding(out);
}

void FrameDecoder::after_name_padding(std::vector<Message>& out) {
  if (lent_frame_) {
    state_ = State::lent;
    lent_fill_ = 0;
    return;
  }
  state_ = State::payload;
  if (current_.payload.is_phantom() || payload_len_ == 0) finish_message(out);
}

void FrameDecoder::finish_message(std::vector<Message>& out) {
  out.push_back(std::move(current_));
  current_ = Message{};
  state_ = State::header;
}

void FrameDecoder::finish_payload(std::vector<Message>& out) {
  if (landing_.lease) {
    if (landing_.lease->open) {
      current_.payload = Payload::placed(landing_.at, payload_len_, std::move(landing_.lease));
    } else {
      drop_current_ = true;  // closed after the last write: its operation has gone
    }
    landing_ = {};
  }
  if (drop_current_) {
    ++dropped_landings_;
    drop_current_ = false;
    current_ = Message{};
    state_ = State::header;
  } else {
    finish_message(out);
  }
  if (payload_padding_ > 0) {
    state_ = State::payload_padding;
    padding_left_ = payload_padding_;
  }
}

bool FrameDecoder::feed(std::span<const std::byte> bytes, std::vector<Message>& out,
                        const InPlace* in_place) {
  while (!bytes.empty()) {
    switch (state_) {
      case State::closed:
        if (failed()) return false;
        return fail("bytes after bye");
      case State::header: {
        if (header_fill_ == 0) {
          if (const std::size_t whole = take_whole_frame(bytes, out, in_place); whole > 0) {
            bytes = bytes.subspan(whole);
            break;
          }
        }
        const std::size_t n = std::min(bytes.size(), kHeaderBytes - header_fill_);
        std::memcpy(header_.data() + header_fill_, bytes.data(), n);
        header_fill_ += n;
        bytes = bytes.subspan(n);
        if (header_fill_ == kHeaderBytes && !take_header(out)) return false;
        break;
      }
      case State::name: {
        const std::size_t n = std::min(bytes.size(), name_len_ - current_.header.name.size());
        current_.header.name.append(reinterpret_cast<const char*>(bytes.data()), n);
        bytes = bytes.subspan(n);
        if (current_.header.name.size() == name_len_) after_name(out);
        break;
      }
      case State::name_padding:
      case State::payload_padding: {
        const std::size_t n = std::min(bytes.size(), padding_left_);
        bytes = bytes.subspan(n);
        padding_left_ -= n;
        if (padding_left_ > 0) break;
        if (state_ == State::name_padding) {
          after_name_padding(out);
        } else {
          state_ = State::header;
        }
        break;
      }
      case State::lent: {
        const std::size_t n = std::min(bytes.size(), kLentBytes - lent_fill_);
        std::memcpy(lent_buf_.data() + lent_fill_, bytes.data(), n);
        lent_fill_ += n;
        bytes = bytes.subspan(n);
        if (lent_fill_ == kLentBytes) {
          lent_.push_back(
              {out.size(),
               Lent{get<std::uint64_t>(lent_buf_.data()), get<std::uint64_t>(lent_buf_.data() + 8),
                    get<std::uint64_t>(lent_buf_.data() + 16)},
               lent_size_});
          finish_message(out);  // the payload is filled by the caller, from the sender's memory
        }
        break;
      }
      case State::payload: {
        if (!payload_room_ && in_place != nullptr && payload_len_ >= in_place->min_bytes &&
            payload_len_ <= in_place->max_bytes && bytes.size() >= payload_len_) {
          current_.payload = in_place->make(bytes.first(payload_len_));
          bytes = bytes.subspan(payload_len_);
          finish_payload(out);
          break;
        }
        auto target = direct_target();
        const std::size_t n = std::min(bytes.size(), target.size());
        std::memcpy(target.data(), bytes.data(), n);
        bytes = bytes.subspan(n);
        commit(n, out);
        break;
      }
    }
  }
  return !failed();
}

Landing FrameDecoder::land(const MessageHeader& header, std::size_t bytes) const {
  if (!lander_ || bytes == 0 || bytes < land_min_bytes_) return {};
  Landing l = lander_(header, bytes);
  if (l.size != bytes || !l.lease || !l.lease->open) return {};
  return l;
}

void FrameDecoder::make_room() {
  payload_room_ = true;
  landing_ = land(current_.header, payload_len_);
  if (!landing_.lease) current_.payload.fill(payload_len_);
}

std::span<std::byte> FrameDecoder::direct_target() {
  if (state_ != State::payload || current_.payload.is_phantom()) return {};
  if (!payload_room_) make_room();
  if (landing_.lease) {
    if (landing_.lease->open) return {landing_.at + payload_fill_, payload_len_ - payload_fill_};
    // Its operation ended midway: nothing more is written there. The rest is read into bytes
    // of its own (the stream goes on behind it), and the message is dropped.
    landing_ = {};
    drop_current_ = true;
    current_.payload.fill(payload_len_);
  }
  return std::span<std::byte>(current_.payload.own_data(), current_.payload.size())
      .subspan(payload_fill_);
}

void FrameDecoder::commit(std::size_t n, std::vector<Message>& out) {
  payload_fill_ += n;
  if (payload_fill_ == payload_len_) finish_payload(out);
}

}  // namespace kf::wire
