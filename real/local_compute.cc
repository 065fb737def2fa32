#include "real/local_compute.h"

#include <chrono>

namespace kf {

void LocalCompute::run(ComputeWork work, std::function<void()> done) {
  // The marks are not timed here: they all run just before done (Compute's contract), so a real
  // step overlaps no gradient with its backward pass yet.
  if (!work.marks.empty()) {
    done = [n = work.marks.size(), at_mark = std::move(work.at_mark), then = std::move(done)] {
      for (std::size_t i = 0; i < n; ++i)
        at_mark(i);
      then();
    };
    work.marks.clear();
  }
  worker_.post([this, work = std::move(work), done = std::move(done)]() mutable {
    const auto begin = std::chrono::steady_clock::now();
    if (work.numeric) work.numeric();
    const auto spent =
        std::chrono::duration_cast<Duration>(std::chrono::steady_clock::now() - begin);
    const Duration rest = work.profiled > spent ? work.profiled - spent : Duration::zero();
    if (rest > Duration::zero()) {
      caller_.post_after(rest, std::move(done));
    } else {
      caller_.post(std::move(done));
    }
  });
}

}  // namespace kf
