#include "real/shm_ring.h"

#include <fcntl.h>
#include <linux/membarrier.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <new>
#include <stdexcept>
#include <system_error>

#include "real/sockets.h"

namespace kf {
namespace {

constexpr std::uint64_t kMagic = 0x474E4952464B;  // "KFRING"
constexpr std::size_t kHeaderBytes = 4096;        // the data starts on the next page
constexpr std::size_t kPageBytes = 4096;

// Each side of a ring takes its view's pages before the first frame: mapped with their pages in
// place (MAP_POPULATE), then touched once, written by the producer and read by the consumer.
// Left to the frames, the first access to each page from each process came a page's worth of
// frames apart all through the ring's first lap, and each cost a fault, and on a paravirtualized
// VM more besides that MAP_POPULATE alone did not take away: medium collectives ran several
// times slower until the ring had gone round once (docs/performance.md, "A ring's first lap").
constexpr int kMapFlags = MAP_SHARED | MAP_POPULATE;

void touch_for_writing(std::byte* data, std::size_t bytes) {
  std::memset(data, 0, bytes);  // a new memfd reads as zeros: nothing changes
}

void touch_for_reading(const std::byte* data, std::size_t bytes) {
  for (std::size_t at = 0; at < bytes; at += kPageBytes) {
    [[maybe_unused]] const std::byte b = *static_cast<const volatile std::byte*>(data + at);
  }
}

long membarrier(int cmd) {
  return ::syscall(__NR_membarrier, cmd, 0, 0);
}

// Whether this process may issue the consumer's side of the asymmetric fence.
bool can_fence_producers() {
  static const bool can = [] {
    const long cmds = membarrier(MEMBARRIER_CMD_QUERY);
    return cmds > 0 && (cmds & MEMBARRIER_CMD_GLOBAL_EXPEDITED) != 0;
  }();
  return can;
}

// Whether this process may publish lightly: its threads take the barriers a consumer's
// membarrier asks for only once it has registered. Registration belongs to the address space,
// so a child forked after it registers again.
bool may_publish_lightly() {
  static std::mutex mutex;
  static pid_t registered = 0;
  const std::lock_guard lock(mutex);
  const pid_t self = ::getpid();
  if (registered == self) return true;
  const long cmds = membarrier(MEMBARRIER_CMD_QUERY);
  if (cmds <= 0 || (cmds & MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) == 0 ||
      !can_fence_producers() || membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) != 0) {
    return false;
  }
  registered = self;
  return true;
}

}  // namespace

bool ShmRing::valid_capacity(std::size_t capacity) {
  return std::has_single_bit(capacity) && capacity >= kMinCapacity && capacity <= kMaxCapacity;
}

// The first page of the shared file. Each side's counter has a cache line of its own, so the
// producer's writes of the tail do not evict the consumer's head and the other way round.
struct ShmRing::Header {
  std::uint64_t magic;
  std::uint64_t capacity;
  std::byte tag[kTagBytes];
  std::uint32_t light;  // 1: the producer publishes with a plain store (see shm_ring.h, "Fences")
  alignas(64) std::atomic<std::uint64_t> tail;   // written by the producer: bytes published
  alignas(64) std::atomic<std::uint64_t> head;   // written by the consumer: bytes consumed
  alignas(64) std::atomic<std::uint32_t> armed;  // 1: the consumer sleeps, ring the doorbell
};
// The counters are shared between processes: they must be plain memory, never a lock.
static_assert(std::atomic<std::uint64_t>::is_always_lock_free);
static_assert(std::atomic<std::uint32_t>::is_always_lock_free);

ShmRing::ShmRing(void* map, std::size_t map_bytes, Fd fd, std::size_t capacity)
    : map_(map), map_bytes_(map_bytes), fd_(std::move(fd)), capacity_(capacity) {
  static_assert(sizeof(Header) <= kHeaderBytes);
}

ShmRing::~ShmRing() {
  if (map_ != nullptr) ::munmap(map_, map_bytes_);
}

ShmRing::Header& ShmRing::header() const {
  return *static_cast<Header*>(map_);
}

std::byte* ShmRing::data() const {
  return static_cast<std::byte*>(map_) + kHeaderBytes;
}

std::unique_ptr<ShmRing> ShmRing::create(std::size_t capacity, Tag tag) {
  if (!valid_capacity(capacity)) {
    throw std::invalid_argument(
        fmt::format("shared-memory ring of {} bytes: expected a power of two from {} to {}",
                    capacity, kMinCapacity, kMaxCapacity));
  }
  Fd fd(::memfd_create("kungfu-ring", MFD_CLOEXEC));
  if (!fd) throw std::system_error(errno, std::generic_category(), "memfd_create");
  const std::size_t bytes = kHeaderBytes + capacity;
  if (::ftruncate(fd.get(), static_cast<off_t>(bytes)) != 0)
    throw std::system_error(errno, std::generic_category(), "ftruncate of a ring");
  void* map = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, kMapFlags, fd.get(), 0);
  if (map == MAP_FAILED) throw std::system_error(errno, std::generic_category(), "mmap of a ring");
  touch_for_writing(static_cast<std::byte*>(map) + kHeaderBytes, capacity);
  auto* h = new (map) Header{};
  h->magic = kMagic;
  h->capacity = capacity;
  std::memcpy(h->tag, tag.data(), kTagBytes);
  h->light = may_publish_lightly() ? 1 : 0;
  std::unique_ptr<ShmRing> ring(new ShmRing(map, bytes, std::move(fd), capacity));
  ring->light_ = h->light != 0;
  return ring;
}

std::unique_ptr<ShmRing> ShmRing::open_peer(pid_t pid, int fd, std::size_t capacity, Tag tag,
                                            std::string& why) {
  if (!valid_capacity(capacity)) {
    why = fmt::format("a ring of {} bytes is out of bounds", capacity);
    return nullptr;
  }
  const std::string path = fmt::format("/proc/{}/fd/{}", pid, fd);
  Fd file(::open(path.c_str(), O_RDWR | O_CLOEXEC));
  if (!file) {
    why = fmt::format("cannot open {}: {}", path, net::errno_text(errno));
    return nullptr;
  }
  const std::size_t bytes = kHeaderBytes + capacity;
  struct stat st {};
  if (::fstat(file.get(), &st) != 0 || !S_ISREG(st.st_mode) ||
      static_cast<std::size_t>(st.st_size) != bytes) {
    why = fmt::format("{} is not a ring of {} bytes", path, capacity);
    return nullptr;
  }
  void* map = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, kMapFlags, file.get(), 0);
  if (map == MAP_FAILED) {
    why = fmt::format("cannot map {}: {}", path, net::errno_text(errno));
    return nullptr;
  }
  // Owned from here: an early return unmaps it.
  std::unique_ptr<ShmRing> ring(new ShmRing(map, bytes, Fd(), capacity));
  const Header& h = ring->header();
  if (h.magic != kMagic || h.capacity != capacity ||
      std::memcmp(h.tag, tag.data(), kTagBytes) != 0) {
    why = fmt::format("{} is not the ring the handshake names", path);
    return nullptr;
  }
  ring->light_ = h.light != 0;
  if (ring->light_ && !can_fence_producers()) {
    why =
        "its producer publishes without a fence, and this process cannot issue the "
        "membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) that asks for";
    return nullptr;
  }
  // Before the welcome: the producer writes no frame until it has it.
  touch_for_reading(ring->data(), capacity);
  ring->head_ = h.head.load(std::memory_order_acquire);
  ring->tail_ = ring->head_;
  return ring;
}

std::size_t ShmRing::write(std::span<const std::byte> bytes) {
  std::size_t free = capacity_ - static_cast<std::size_t>(tail_ - head_seen_);
  if (free < bytes.size()) {
    head_seen_ = header().head.load(std::memory_order_acquire);
    free = capacity_ - static_cast<std::size_t>(tail_ - head_seen_);
  }
  const std::size_t n = std::min(free, bytes.size());
  const std::size_t at = static_cast<std::size_t>(tail_) & (capacity_ - 1);
  const std::size_t first = std::min(n, capacity_ - at);
  std::memcpy(data() + at, bytes.data(), first);
  std::memcpy(data(), bytes.data() + first, n - first);
  tail_ += n;
  return n;
}

bool ShmRing::publish() {
  Header& h = header();
  if (light_) {
    // A plain store, and the request read after it in program order only: the consumer's
    // membarrier before it sleeps orders the two against its own (fence_before_sleep).
    h.tail.store(tail_, std::memory_order_release);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (h.armed.load(std::memory_order_relaxed) == 0) return false;
    return h.armed.exchange(0, std::memory_order_acq_rel) != 0;
  }
  // Sequentially consistent, against arm(): either the consumer sees this tail before it sleeps,
  // or this sees its request for a doorbell.
  h.tail.store(tail_, std::memory_order_seq_cst);
  if (h.armed.load(std::memory_order_seq_cst) == 0) return false;
  return h.armed.exchange(0, std::memory_order_seq_cst) != 0;
}

std::pair<std::span<const std::byte>, std::span<const std::byte>> ShmRing::readable() {
  if (corrupt_) return {};
  tail_ = header().tail.load(std::memory_order_acquire);
  const std::uint64_t length = tail_ - head_;
  if (length > capacity_) {
    corrupt_ = true;
    return {};
  }
  const std::size_t at = static_cast<std::size_t>(head_) & (capacity_ - 1);
  const std::size_t first = std::min(static_cast<std::size_t>(length), capacity_ - at);
  return {std::span<const std::byte>(data() + at, first),
          std::span<const std::byte>(data(), static_cast<std::size_t>(length) - first)};
}

void ShmRing::consume(std::size_t n) {
  head_ += n;
  header().head.store(head_, std::memory_order_release);
}

bool ShmRing::arm() {
  request_doorbell();
  return fence_before_sleep(light_) && !has_unread();
}

void ShmRing::request_doorbell() {
  header().armed.store(1, std::memory_order_seq_cst);
}

bool ShmRing::fence_before_sleep(bool light) {
  // Fenced producers: the requests' stores and has_unread()'s loads are sequentially consistent,
  // which orders them against each other and against the producers' as they are.
  if (!light) return true;
  // After this returns, every thread of a registered process that was running has taken a full
  // barrier since the requests above were visible, and one not running takes it as it is
  // scheduled: a tail it published before reading the request is seen by has_unread().
  return membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) == 0;
}

bool ShmRing::has_unread() {
  return header().tail.load(std::memory_order_seq_cst) != head_;
}

void ShmRing::disarm() {
  Header& h = header();
  if (h.armed.load(std::memory_order_relaxed) != 0) h.armed.store(0, std::memory_order_relaxed);
}

}  // namespace kf
