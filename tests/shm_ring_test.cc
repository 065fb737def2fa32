// ShmRing, both ends in this process (the consumer maps the producer's memfd through /proc, as a
// peer process does): bytes in order across the wrap, a full ring taking what fits, the
// doorbell asked for once per sleep and never lost to a race with a publish, refusals of a
// file that is not the ring named, and the ring's pages in place before its first frame.
#include "real/shm_ring.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/membarrier.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fmt/format.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "real/fd.h"

namespace kf {
namespace {

std::array<std::byte, ShmRing::kTagBytes> tag_of(std::uint8_t seed) {
  std::array<std::byte, ShmRing::kTagBytes> t{};
  for (std::size_t i = 0; i < t.size(); ++i)
    t[i] = static_cast<std::byte>(seed + i);
  return t;
}

std::vector<std::byte> bytes(std::size_t n, std::uint8_t seed) {
  std::vector<std::byte> b(n);
  for (std::size_t i = 0; i < n; ++i)
    b[i] = static_cast<std::byte>((i * 7 + seed) & 0xFF);
  return b;
}

// Everything readable, both pieces, in order.
std::vector<std::byte> read_all(ShmRing& r) {
  const auto [first, second] = r.readable();
  std::vector<std::byte> out(first.begin(), first.end());
  out.insert(out.end(), second.begin(), second.end());
  return out;
}

struct Pair {
  std::unique_ptr<ShmRing> producer;
  std::unique_ptr<ShmRing> consumer;
};

Pair ring_pair(std::size_t capacity) {
  const auto tag = tag_of(3);
  Pair p;
  p.producer = ShmRing::create(capacity, tag);
  std::string why;
  p.consumer = ShmRing::open_peer(::getpid(), p.producer->fd(), capacity, tag, why);
  EXPECT_TRUE(p.consumer) << why;
  return p;
}

TEST(ShmRing, BytesArriveInOrderAcrossTheWrap) {
  auto [producer, consumer] = ring_pair(4096);
  ASSERT_TRUE(consumer);
  producer->close_fd();  // mapped on both sides: the file may go
  EXPECT_TRUE(read_all(*consumer).empty());
  for (int round = 0; round < 5; ++round) {
    const auto b = bytes(3000, static_cast<std::uint8_t>(round));
    ASSERT_EQ(producer->write(b), b.size());
    EXPECT_TRUE(read_all(*consumer).empty()) << "nothing shows before publish";
    producer->publish();
    const auto [first, second] = consumer->readable();
    EXPECT_EQ(first.size() + second.size(), b.size());
    if (round == 1) {
      EXPECT_FALSE(second.empty()) << "the second round wraps round";
    }
    EXPECT_EQ(read_all(*consumer), b);
    consumer->consume(b.size());
  }
}

// A ring's memory is in place when create() returns, not faulted in by the first lap's frames:
// a fresh view of its memfd (4 KiB header, then the data) finds every page resident.
TEST(ShmRing, ItsPagesAreInPlaceBeforeTheFirstFrame) {
  constexpr std::size_t kCapacity = 256u << 10;
  const auto ring = ShmRing::create(kCapacity, tag_of(5));
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const std::size_t bytes = 4096 + kCapacity;
  void* view = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, ring->fd(), 0);
  ASSERT_NE(view, MAP_FAILED) << std::strerror(errno);
  std::vector<unsigned char> resident((bytes + page - 1) / page);
  ASSERT_EQ(::mincore(view, bytes, resident.data()), 0) << std::strerror(errno);
  ::munmap(view, bytes);
  std::size_t in_place = 0;
  for (const unsigned char r : resident)
    in_place += r & 1;
  EXPECT_EQ(in_place, resident.size());
}

TEST(ShmRing, AFullRingTakesWhatFitsAndTheRestAfterTheReaderFreesRoom) {
  auto [producer, consumer] = ring_pair(4096);
  ASSERT_TRUE(consumer);
  const auto b = bytes(5000, 9);
  const std::size_t first = producer->write(b);
  EXPECT_EQ(first, 4096u);
  EXPECT_EQ(producer->write(std::span(b).subspan(first)), 0u);
  producer->publish();
  auto got = read_all(*consumer);
  consumer->consume(1000);
  const std::size_t second = producer->write(std::span(b).subspan(first));
  EXPECT_EQ(second, 904u);
  producer->publish();
  const auto rest = read_all(*consumer);
  ASSERT_EQ(rest.size(), 4000u);
  got.insert(got.end(), rest.begin() + 3096, rest.end());
  EXPECT_EQ(got, b);
}

TEST(ShmRing, AnArmedReaderAsksForOneDoorbellAndNoneWhenBytesWait) {
  auto [producer, consumer] = ring_pair(4096);
  ASSERT_TRUE(consumer);
  const auto b = bytes(10, 1);
  producer->write(b);
  EXPECT_FALSE(producer->publish()) << "a reader that polls needs no doorbell";
  EXPECT_FALSE(consumer->arm()) << "bytes wait: do not sleep";
  consumer->disarm();
  consumer->consume(read_all(*consumer).size());
  EXPECT_TRUE(consumer->arm()) << "empty: may sleep";
  producer->write(b);
  EXPECT_TRUE(producer->publish()) << "the sleeping reader must be woken";
  producer->write(b);
  EXPECT_FALSE(producer->publish()) << "one doorbell per sleep";
  consumer->disarm();
  EXPECT_EQ(read_all(*consumer).size(), 20u);
}

// The race the fences exist for, run many times: a consumer that arms and sleeps while the
// producer publishes must get a doorbell (here an eventfd) for every sleep whose last look saw
// nothing. A lost one leaves it asleep with bytes waiting: the bounded wait fails the test.
// (Thousands of sleeps a run; a missing fence loses a doorbell only when a publish lands in the
// few nanoseconds its store waits to be seen, so passing is evidence, not proof.)
TEST(ShmRing, NoDoorbellIsLostWhenAPublishRacesTheReaderGoingToSleep) {
  auto [producer, consumer] = ring_pair(4096);
  ASSERT_TRUE(consumer);
  const Fd bell(::eventfd(0, EFD_CLOEXEC));
  ASSERT_TRUE(bell);
  constexpr std::uint64_t kMessages = 100'000;
  std::atomic<bool> failed{false};
  std::atomic<std::uint64_t> pause{0};
  std::thread writer([&, &producer = producer] {
    std::uint64_t spin = 1;
    for (std::uint64_t i = 0; i < kMessages && !failed.load(std::memory_order_relaxed); ++i) {
      const std::byte b{static_cast<unsigned char>(i)};
      while (producer->write(std::span(&b, 1)) == 0 && !failed.load(std::memory_order_relaxed))
        std::this_thread::yield();
      if (producer->publish()) {
        const std::uint64_t one = 1;
        ASSERT_EQ(::write(bell.get(), &one, sizeof one), static_cast<ssize_t>(sizeof one));
      }
      // Pauses of varying length, so that the reader often reaches its sleep in the window.
      spin = spin * 6364136223846793005ULL + 1442695040888963407ULL;
      for (std::uint64_t k = spin >> 54; k > 0; --k)
        pause.fetch_add(1, std::memory_order_relaxed);
    }
  });
  // The writer is stopped and joined however the reader leaves (an ASSERT returns early).
  struct StopWriter {
    std::atomic<bool>& failed;
    std::thread& writer;
    ~StopWriter() {
      if (!writer.joinable()) return;
      failed = true;
      writer.join();
    }
  } stop_writer{failed, writer};
  std::uint64_t got = 0, sleeps = 0;
  while (got < kMessages) {
    const auto [first, second] = consumer->readable();
    if (!first.empty()) {
      for (const auto piece : {first, second}) {
        for (const std::byte b : piece) {
          ASSERT_EQ(b, std::byte{static_cast<unsigned char>(got)}) << "at byte " << got;
          ++got;
        }
      }
      consumer->consume(first.size() + second.size());
      continue;
    }
    if (consumer->arm()) {
      ++sleeps;
      pollfd p{.fd = bell.get(), .events = POLLIN, .revents = 0};
      if (::poll(&p, 1, 5000) != 1) {
        failed = true;
        consumer->disarm();
        break;
      }
      std::uint64_t n = 0;
      ASSERT_EQ(::read(bell.get(), &n, sizeof n), static_cast<ssize_t>(sizeof n));
    }
    consumer->disarm();
  }
  writer.join();
  EXPECT_FALSE(failed) << "asleep 5 s with bytes waiting after " << got << " bytes and " << sleeps
                       << " sleeps: a doorbell was lost";
  EXPECT_EQ(got, kMessages);
  RecordProperty("sleeps", std::to_string(sleeps));
}

TEST(ShmRing, ProducersPublishLightlyWhereTheKernelHasTheFence) {
  auto [producer, consumer] = ring_pair(4096);
  ASSERT_TRUE(consumer);
  EXPECT_EQ(consumer->publishes_lightly(), producer->publishes_lightly())
      << "the consumer reads how its producer publishes from the ring";
  const long cmds = ::syscall(__NR_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
  const bool kernel_has_it = cmds > 0 && (cmds & MEMBARRIER_CMD_GLOBAL_EXPEDITED) != 0 &&
                             (cmds & MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) != 0;
  EXPECT_EQ(producer->publishes_lightly(), kernel_has_it);
}

TEST(ShmRing, OpeningRefusesWhatIsNotTheRingTheHandshakeNames) {
  const auto tag = tag_of(5);
  auto producer = ShmRing::create(8192, tag);
  std::string why;
  EXPECT_FALSE(ShmRing::open_peer(::getpid(), producer->fd(), 8192, tag_of(6), why));
  EXPECT_NE(why.find("not the ring the handshake names"), std::string::npos) << why;
  EXPECT_FALSE(ShmRing::open_peer(::getpid(), producer->fd(), 4096, tag, why));
  EXPECT_NE(why.find("is not a ring of 4096 bytes"), std::string::npos) << why;
  EXPECT_FALSE(ShmRing::open_peer(::getpid(), 1 << 20, 8192, tag, why));
  EXPECT_NE(why.find("cannot open /proc/"), std::string::npos) << why;
  EXPECT_FALSE(ShmRing::open_peer(::getpid(), producer->fd(), 1000, tag, why));
  EXPECT_NE(why.find("out of bounds"), std::string::npos) << why;
  EXPECT_THROW(ShmRing::create(1000, tag), std::invalid_argument);
  EXPECT_THROW(ShmRing::create(128u << 20, tag), std::invalid_argument);
}

TEST(ShmRing, CountersNoProducerCouldWriteFailTheRing) {
  auto [producer, consumer] = ring_pair(4096);
  ASSERT_TRUE(consumer);
  // A hostile producer's own view of the file: its tail (the second cache line of the header
  // page) set past a whole ring ahead of the reader.
  const std::string path = fmt::format("/proc/self/fd/{}", producer->fd());
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  void* map = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  ASSERT_NE(map, MAP_FAILED);
  auto* tail = reinterpret_cast<std::atomic<std::uint64_t>*>(static_cast<std::byte*>(map) + 64);
  tail->store(4097);
  const auto [first, second] = consumer->readable();
  EXPECT_TRUE(first.empty() && second.empty());
  EXPECT_TRUE(consumer->corrupt());
  ::munmap(map, 4096);
}

}  // namespace
}  // namespace kf
