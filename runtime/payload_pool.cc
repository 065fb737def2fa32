#include "runtime/payload_pool.h"

#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KF_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define KF_ASAN 1
#endif
#ifdef KF_ASAN
#include <sanitizer/asan_interface.h>
#endif

namespace kf::payload_pool {
namespace {

// A cached block is poisoned under ASan, so that a use after give() is still reported.
void poison([[maybe_unused]] void* p, [[maybe_unused]] std::size_t n) {
#ifdef KF_ASAN
  ASAN_POISON_MEMORY_REGION(p, n);
#endif
}
void unpoison([[maybe_unused]] void* p, [[maybe_unused]] std::size_t n) {
#ifdef KF_ASAN
  ASAN_UNPOISON_MEMORY_REGION(p, n);
#endif
}

class Pool {
 public:
  void* take(std::size_t n) {
    const std::size_t size = class_size(n);
    {
      const std::lock_guard lock(mu_);
      auto it = free_.find(size);
      if (it != free_.end() && !it->second.empty()) {
        void* p = it->second.back();
        it->second.pop_back();
        cached_ -= size;
        ++hits_;
        unpoison(p, size);
        return p;
      }
      ++misses_;
    }
    return ::operator new (size, std::align_val_t{kAlignment});
  }

  void give(void* p, std::size_t n) noexcept {
    if (!keep(p, class_size(n))) ::operator delete (p, std::align_val_t{kAlignment});
  }

  Stats stats() {
    const std::lock_guard lock(mu_);
    return Stats{hits_, misses_, cached_};
  }

 private:
  bool keep(void* p, std::size_t size) noexcept {
    try {
      const std::lock_guard lock(mu_);
      if (cached_ + size > kMaxCachedBytes) return false;
      auto& blocks = free_[size];
      if (blocks.size() >= blocks_per_class(size)) return false;
      blocks.push_back(p);
      cached_ += size;
      poison(p, size);  // under mu_: once listed, another thread may take it
      return true;
    } catch (...) {  // no room to list it: freed instead
      return false;
    }
  }

  std::mutex mu_;
  std::unordered_map<std::size_t, std::vector<void*>> free_;  // by class_size
  std::size_t cached_ = 0;
  std::uint64_t hits_ = 0;
  std::uint64_t misses_ = 0;
};

// Never destroyed: payloads may be freed by other static destructors or by threads still running
// at exit. The blocks it holds stay reachable, so leak checkers do not report them.
Pool& pool() {
  static Pool* const instance = new Pool;  // NOLINT(cppcoreguidelines-owning-memory)
  return *instance;
}

}  // namespace

std::size_t class_size(std::size_t n) {
  if (n < 4) return 4;
  const int k = 63 - __builtin_clzll(static_cast<unsigned long long>(n));  // 2^k <= n
  const std::size_t quarter = std::size_t{1} << (k - 2);
  return (n + quarter - 1) / quarter * quarter;
}

void* take(std::size_t n) {
  return pool().take(n);
}
void give(void* p, std::size_t n) noexcept {
  pool().give(p, n);
}
Stats stats() {
  return pool().stats();
}

}  // namespace kf::payload_pool
