// The floor under a small message between two processes of one host: frames of one size bounced
// through a pair of shared-memory rings (real/shm_ring.h), with nothing of the transport or the
// engine around them. The parent writes and publishes a frame into one ring and polls the other
// for the child's echo; the child does the reverse. Each round trip is timed; half of it is one
// way. Prints one CSV row per round:
//   shm_ring_pingpong,frame_bytes,round,round_trips,one_way_p50_us,one_way_mean_us
// Compare kfbench's small allreduce (a message each way) against these in the same minute: the
// crossing's cost depends on where the two processes' CPUs are, which changes from run to run.
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <span>
#include <vector>

#include "real/shm_ring.h"

namespace {

using kf::ShmRing;

void send(ShmRing& ring, std::span<const std::byte> frame) {
  for (std::size_t done = 0; done < frame.size();)
    done += ring.write(frame.subspan(done));
  ring.publish();
}

// Polls until a whole frame is readable, copies it out (as a receiver decodes it) and consumes it.
void receive(ShmRing& ring, std::span<std::byte> frame) {
  for (;;) {
    const auto [first, second] = ring.readable();
    if (first.size() + second.size() < frame.size()) continue;
    const std::size_t a = std::min(first.size(), frame.size());
    std::copy_n(first.begin(), a, frame.begin());
    std::copy_n(second.begin(), frame.size() - a, frame.begin() + static_cast<std::ptrdiff_t>(a));
    ring.consume(frame.size());
    return;
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"shm_ring_pingpong: one-way time of a frame through a shared-memory ring"};
  std::size_t frame_bytes = 80;
  int round_trips = 100'000;
  int warmup = 1'000;
  int rounds = 3;
  app.add_option("--frame", frame_bytes, "bytes per frame (an 8-byte allreduce's is about 80)")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 16));
  app.add_option("--iters", round_trips, "timed round trips per round")->check(CLI::PositiveNumber);
  app.add_option("--warmup", warmup, "round trips before each round")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--rounds", rounds, "rounds, each a row")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  const std::array<std::byte, ShmRing::kTagBytes> tag{};
  auto there = ShmRing::create(1u << 20, tag);  // parent -> child
  auto back = ShmRing::create(1u << 20, tag);   // child -> parent
  std::vector<std::byte> frame(frame_bytes, std::byte{1});
  const long total = static_cast<long>(rounds) * (warmup + round_trips);
  const pid_t child = ::fork();
  if (child < 0) {
    std::perror("shm_ring_pingpong: fork");
    return 1;
  }
  if (child == 0) {  // the rings are mapped shared: both processes see the same bytes
    for (long i = 0; i < total; ++i) {
      receive(*there, frame);
      send(*back, frame);
    }
    ::_exit(0);
  }
  std::vector<double> one_way_us(static_cast<std::size_t>(round_trips));
  for (int r = 0; r < rounds; ++r) {
    for (int i = 0; i < warmup; ++i) {
      send(*there, frame);
      receive(*back, frame);
    }
    double sum = 0;
    for (auto& us : one_way_us) {
      const auto t0 = std::chrono::steady_clock::now();
      send(*there, frame);
      receive(*back, frame);
      us =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
          2;
      sum += us;
    }
    auto mid = one_way_us.begin() + static_cast<std::ptrdiff_t>(one_way_us.size() / 2);
    std::nth_element(one_way_us.begin(), mid, one_way_us.end());
    std::printf("shm_ring_pingpong,%zu,%d,%d,%.3f,%.3f\n", frame_bytes, r + 1, round_trips, *mid,
                sum / static_cast<double>(round_trips));
    std::fflush(stdout);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
