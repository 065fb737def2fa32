// MessageName: the name a message carries (its collective's, or a blob's), held inline up to
// kInlineChars characters. C++17: included by runtime/message.h, which world glue includes.
//
// Why not std::string: every message copies its operation's name on the way out and builds one
// on the way in, and std::string holds only 15 characters inline. The names a job sends are
// mostly longer ("kf.allreduce.1234", "kf.py.allreduce.56", "grad/layer3.weight"), so each
// message cost its sender and its receiver a call into the allocator. A MessageName is as large
// as a std::string (32 bytes), and the simulated worlds move millions of messages a step.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <stdexcept>
#include <string>
#include <string_view>

namespace kf {

// Up to kInlineChars characters inside, more on the heap. A moved-from name is empty.
class MessageName {
 public:
  static constexpr std::size_t kInlineChars = 24;

  MessageName() noexcept {}  // NOLINT: the union's inline_ is filled before it is read
  explicit MessageName(std::string_view s) { append(s.data(), s.size()); }
  MessageName(const MessageName& other) { append(other.data(), other.size()); }
  MessageName(MessageName&& other) noexcept { take(other); }
  MessageName& operator=(const MessageName& other) {
    if (this != &other) assign(other.view());
    return *this;
  }
  MessageName& operator=(MessageName&& other) noexcept {
    if (this != &other) {
      release();
      take(other);
    }
    return *this;
  }
  MessageName& operator=(std::string_view s) {
    assign(s);
    return *this;
  }
  MessageName& operator=(const std::string& s) { return *this = std::string_view(s); }
  MessageName& operator=(const char* s) { return *this = std::string_view(s); }
  ~MessageName() { release(); }

  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  const char* data() const noexcept { return on_heap() ? heap_ : inline_; }
  std::string_view view() const noexcept { return {data(), size_}; }
  operator std::string_view() const noexcept { return view(); }  // NOLINT: a name reads as text
  std::string str() const { return std::string(view()); }

  // Room for n characters, keeping those held.
  void reserve(std::size_t n) {
    if (n <= capacity_) return;
    if (n > UINT32_MAX) throw std::length_error("a message name over 4 GiB");
    char* bigger = new char[n];  // NOLINT(cppcoreguidelines-owning-memory): release() frees it
    std::memcpy(bigger, data(), size_);
    release();
    heap_ = bigger;
    capacity_ = static_cast<std::uint32_t>(n);
  }
  void append(const char* s, std::size_t n) {
    if (size_ + n > capacity_)
      reserve(std::max<std::size_t>(size_ + n, 2 * std::size_t{capacity_}));
    std::memmove(writable() + size_, s, n);  // s may lie in this name (an assigned view of it)
    size_ += static_cast<std::uint32_t>(n);
  }
  void clear() noexcept { size_ = 0; }

  friend bool operator==(const MessageName& a, const MessageName& b) noexcept {
    return a.view() == b.view();
  }
  friend bool operator==(const MessageName& a, std::string_view b) noexcept {
    return a.view() == b;
  }
#if __cplusplus < 202002L
  friend bool operator==(std::string_view a, const MessageName& b) noexcept {
    return b == a;
  }
  friend bool operator!=(const MessageName& a, const MessageName& b) noexcept {
    return !(a == b);
  }
  friend bool operator!=(const MessageName& a, std::string_view b) noexcept {
    return !(a == b);
  }
  friend bool operator!=(std::string_view a, const MessageName& b) noexcept {
    return !(b == a);
  }
#endif
  friend std::ostream& operator<<(std::ostream& out, const MessageName& name) {
    return out << name.view();
  }

 private:
  bool on_heap() const noexcept {
    return capacity_ > kInlineChars;
  }
  char* writable() noexcept {
    return on_heap() ? heap_ : inline_;
  }
  void assign(std::string_view s) {
    size_ = 0;
    append(s.data(), s.size());
  }
  // Takes other's characters, leaving it empty (and inline).
  void take(MessageName& other) noexcept {
    size_ = other.size_;
    capacity_ = other.capacity_;
    if (other.on_heap()) {
      heap_ = other.heap_;
    } else {
      std::memcpy(inline_, other.inline_, size_);
    }
    other.size_ = 0;
    other.capacity_ = kInlineChars;
  }
  void release() noexcept {
    if (on_heap()) delete[] heap_;  // NOLINT(cppcoreguidelines-owning-memory)
    capacity_ = kInlineChars;
  }

  std::uint32_t size_ = 0;
  std::uint32_t capacity_ = kInlineChars;  // over kInlineChars: the characters are in heap_
  union {
    char inline_[kInlineChars];
    char* heap_;
  };
};

}  // namespace kf
