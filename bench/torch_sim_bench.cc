// ./kf bench torch_sim, the embedding's side: a workload.torch training step as kfsim runs it
// (sim/torch/torch_task.h: rows gathered in C++, numpy views of kfsim's memory, parameters in,
// forward, loss, backward, gradient out), timed over many repetitions of one batch. Its twin,
// bench/torch_sim_ref.py, times the same forward and backward in plain Python; the difference is
// the embedding's round trip. One JSON line per run on stdout.
//
//   torch_sim_bench --module FILE.py [--batch 32] [--reps 200] [--warmup 20]
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <numeric>
#include <vector>

#include "sim/torch/torch_task.h"

int main(int argc, char** argv) {
  CLI::App app("workload.torch's training step through kfsim's embedded Python");
  std::string module;
  int batch = 32, reps = 200, warmup = 20;
  std::size_t train = 4096;
  app.add_option("--module", module, "task module (a .py file)")->required();
  app.add_option("--batch", batch, "samples per step");
  app.add_option("--reps", reps, "timed steps");
  app.add_option("--warmup", warmup, "untimed steps first");
  app.add_option("--train", train, "training samples to load");
  CLI11_PARSE(app, argc, argv);
  try {
    const kf::TorchWorkload w =
        kf::load_torch_workload({.module = module, .train = train, .test = 64, .seed = 1});
    const std::vector<float> params = w.model->initial_parameters(1);
    std::vector<float> grad(params.size());
    std::vector<std::size_t> rows(static_cast<std::size_t>(batch));
    std::iota(rows.begin(), rows.end(), std::size_t{0});
    for (auto& r : rows)
      r %= w.train->size();
    std::vector<double> ms;
    for (int i = 0; i < warmup + reps; ++i) {
      const auto begin = std::chrono::steady_clock::now();
      w.model->loss_and_gradient(params, *w.train, rows, grad);
      const auto end = std::chrono::steady_clock::now();
      if (i >= warmup) ms.push_back(std::chrono::duration<double, std::milli>(end - begin).count());
    }
    std::sort(ms.begin(), ms.end());
    fmt::print(
        "{{\"side\": \"embedded\", \"module\": \"{}\", \"batch\": {}, \"parameters\": {}, "
        "\"reps\": {}, \"median_ms\": {:.4f}, \"p10_ms\": {:.4f}, \"p90_ms\": {:.4f}}}\n",
        module, batch, params.size(), reps, ms[ms.size() / 2], ms[ms.size() / 10],
        ms[ms.size() * 9 / 10]);
  } catch (const kf::TorchTaskError& e) {
    fmt::print(stderr, "torch_sim_bench: {}\n", e.what());
    return 2;
  }
  return 0;
}
