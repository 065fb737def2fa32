// The machine's state, four ways, one line: the cost of a steady_clock reading, of one step of a
// dependent floating-point chain (the core's speed), of one load of a random pointer chase
// through 64 KiB, 512 KiB and 4 MiB (the caches' latencies), and how much slower a loop of
// independent integer work runs on CPU 0 while CPU 1 runs it too than alone (about 1 where the
// two CPUs are separate cores, up to 2 where they are two threads of one core). Prints
// clock_ns,fp_step_ns,chase64k_ns,chase512k_ns,chase4m_ns,shared_core_slowdown.
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

namespace {
using Clock = std::chrono::steady_clock;

double per(Clock::time_point a, Clock::time_point b, long n) {
  return std::chrono::duration<double, std::nano>(b - a).count() / static_cast<double>(n);
}

double chase(std::size_t bytes) {
  // One cycle through every 64-byte line of the buffer in a random order.
  const std::size_t lines = bytes / 64;
  std::vector<std::size_t> order(lines);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin() + 1, order.end(), std::mt19937_64(42));
  std::vector<std::size_t> next(lines * 8);
  for (std::size_t i = 0; i < lines; ++i)
    next[order[i] * 8] = order[(i + 1) % lines] * 8;
  std::size_t at = 0;
  for (std::size_t i = 0; i < lines; ++i)
    at = next[at];  // warm
  const long n = 20'000'000;
  const auto a = Clock::now();
  for (long i = 0; i < n; ++i)
    at = next[at];
  const auto b = Clock::now();
  if (at == 1) std::puts("");  // keeps the chase
  return per(a, b, n);
}

void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

// Eight independent integer chains: as many instructions a cycle as the core issues.
double integer_work_ns() {
  unsigned long a = 1, b = 2, c = 3, d = 4, e = 5, f = 6, g = 7, h = 8;
  const long n = 100'000'000;
  const auto t0 = Clock::now();
  for (long i = 0; i < n; ++i) {
    asm volatile("" : "+r"(a), "+r"(b), "+r"(c), "+r"(d), "+r"(e), "+r"(f), "+r"(g), "+r"(h));
    a += i, b ^= i, c += a, d ^= b, e += i, f ^= i, g += e, h ^= f;
  }
  const auto t1 = Clock::now();
  if (a + b + c + d + e + f + g + h == 42) std::puts("");
  return per(t0, t1, n);
}

double shared_core_slowdown() {
  pin(0);
  const double alone = integer_work_ns();
  std::atomic<bool> stop{false};
  std::thread other([&] {
    pin(1);
    while (!stop.load(std::memory_order_relaxed))
      integer_work_ns();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const double both = integer_work_ns();
  stop = true;
  other.join();
  return both / alone;
}
}  // namespace

int main() {
  long sink = 0;
  const long clocks = 5'000'000;
  const auto a = Clock::now();
  for (long i = 0; i < clocks; ++i)
    sink += Clock::now().time_since_epoch().count() & 1;
  const auto b = Clock::now();
  volatile double x = 1.0;
  const long steps = 50'000'000;
  const auto c = Clock::now();
  for (long i = 0; i < steps; ++i)
    x = x * 1.0000001 + 1e-9;
  const auto d = Clock::now();
  const double c64k = chase(64 << 10), c512k = chase(512 << 10), c4m = chase(4 << 20);
  std::printf("%.1f,%.2f,%.2f,%.2f,%.2f,%.3f\n", per(a, b, clocks), per(c, d, steps), c64k, c512k,
              c4m, shared_core_slowdown());
  return sink == -1;
}
