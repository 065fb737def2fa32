// A message's name and payload hold small ones inline: MessageName up to kInlineChars characters,
// Payload's own bytes up to kInlineBytes. Both must behave as the owning types they stand for
// (copies are equal and independent, a move leaves the source empty, growth keeps what is held)
// on either side of the inline limit.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <numeric>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "runtime/message.h"

namespace kf {
namespace {

std::string text(std::size_t n) {
  std::string s(n, ' ');
  for (std::size_t i = 0; i < n; ++i)
    s[i] = static_cast<char>('a' + i % 26);
  return s;
}

// The first bytes.size() bytes at `at` are bytes.
bool holds(const std::byte* at, const std::vector<std::byte>& bytes) {
  return bytes.empty() || std::memcmp(at, bytes.data(), bytes.size()) == 0;
}

TEST(MessageName, CopiesMovesAndComparesOnEitherSideOfTheInlineLimit) {
  for (const std::size_t n : {std::size_t{0}, std::size_t{1}, MessageName::kInlineChars,
                              MessageName::kInlineChars + 1, std::size_t{1000}}) {
    SCOPED_TRACE(n);
    const std::string want = text(n);
    MessageName a;
    a = want;
    EXPECT_EQ(a.size(), n);
    EXPECT_EQ(a, want);
    EXPECT_EQ(a.str(), want);
    EXPECT_EQ(a.empty(), n == 0);

    MessageName copy(a);
    EXPECT_EQ(copy, a);
    if (n > 0) {
      EXPECT_NE(copy.data(), a.data());  // its own characters
    }
    MessageName assigned;
    assigned = "x";
    assigned = a;
    EXPECT_EQ(assigned, want);

    MessageName moved(std::move(copy));
    EXPECT_EQ(moved, want);
    EXPECT_TRUE(copy.empty());  // NOLINT(bugprone-use-after-move): a moved-from name is empty
    copy = "reused";            // and usable
    EXPECT_EQ(copy, "reused");

    MessageName target(std::string_view("something else, long enough to be on the heap here"));
    target = std::move(moved);
    EXPECT_EQ(target, want);
    EXPECT_TRUE(moved.empty());  // NOLINT(bugprone-use-after-move)

    std::ostringstream printed;
    printed << target;
    EXPECT_EQ(printed.str(), want);
  }
}

TEST(MessageName, AppendsPastTheInlineLimitKeepingWhatItHolds) {
  MessageName name;
  std::string want;
  for (int i = 0; i < 200; ++i) {
    const std::string piece = std::to_string(i) + "/";
    name.append(piece.data(), piece.size());
    want += piece;
    ASSERT_EQ(name, want);
  }
  name = name.view().substr(1, 30);  // a view of itself, heap to heap
  EXPECT_EQ(name, want.substr(1, 30));
  MessageName small;
  small = "abcdef";
  small = small.view().substr(2);  // inline, overlapping
  EXPECT_EQ(small, "cdef");
  name.clear();
  EXPECT_TRUE(name.empty());
  name.reserve(10);  // keeps its room; holds nothing
  EXPECT_EQ(name, "");
  name.append("grad", 4);
  EXPECT_EQ(name, "grad");
  EXPECT_NE(name, MessageName(std::string_view("grad2")));
}

TEST(Payload, SmallOwnBytesAreHeldInlineAndBehaveAsOwnBytes) {
  for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{8}, Payload::kInlineBytes,
                              Payload::kInlineBytes + 1, std::size_t{4096}}) {
    SCOPED_TRACE(n);
    std::vector<std::byte> bytes(n);
    std::iota(reinterpret_cast<unsigned char*>(bytes.data()),
              reinterpret_cast<unsigned char*>(bytes.data()) + n, static_cast<unsigned char>(1));
    Payload p = Payload::copy_of(bytes.data(), n);
    EXPECT_EQ(p.size(), n);
    EXPECT_FALSE(p.is_phantom() || p.is_borrowed() || p.is_remote() || p.failed());
    if (n > 0) {
      EXPECT_NE(p.data(), bytes.data());  // a copy
    }
    EXPECT_TRUE(holds(p.data(), bytes));

    Payload copy = p;  // NOLINT(performance-unnecessary-copy-initialization): the copy is tested
    EXPECT_EQ(copy.size(), n);
    EXPECT_TRUE(holds(copy.data(), bytes));

    Message m;
    m.payload = std::move(copy);
    std::vector<Message> queue;
    queue.push_back(std::move(m));  // the bytes travel with the message
    queue.resize(8);
    EXPECT_EQ(queue[0].payload.size(), n);
    EXPECT_TRUE(holds(queue[0].payload.data(), bytes));
    EXPECT_TRUE(queue[0].payload.materialize());  // own bytes: nothing to read

    Payload filled;
    std::byte* into = filled.fill(n);
    EXPECT_EQ(filled.own_data(), into);
    if (n > 0) std::memcpy(into, bytes.data(), n);  // n == 0: bytes.data() may be null
    EXPECT_EQ(filled.size(), n);
    EXPECT_TRUE(holds(filled.data(), bytes));
  }
}

TEST(Payload, OwnDataIsNullForBytesItDoesNotOwn) {
  Payload phantom = Payload::phantom(16);
  EXPECT_EQ(phantom.own_data(), nullptr);
  const std::byte lent[4]{};
  Payload borrowed = Payload::borrowed(lent, sizeof lent, std::make_shared<int>(0));
  EXPECT_EQ(borrowed.own_data(), nullptr);
  EXPECT_EQ(borrowed.data(), lent);
  borrowed.own();  // a copy, small enough to be inline
  EXPECT_NE(borrowed.own_data(), nullptr);
  EXPECT_NE(borrowed.data(), lent);
  EXPECT_EQ(borrowed.size(), sizeof lent);
}

}  // namespace
}  // namespace kf
