// The shipped models as profile files (workloads/profiles/): each file is what
// `kfsim --write-profile` writes for the built-in model today, reads back as the same model, and a
// run of it gives the same records as the model by name.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "sim/scenario/profile_file.h"
#include "sim/scenario/profile_writer.h"
#include "sim/scenario/scenario.h"
#include "sim/simulation.h"

namespace kf {
namespace {

namespace fs = std::filesystem;

const std::string kProfiles = std::string(KF_SOURCE_DIR) + "/workloads/profiles/";

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  EXPECT_TRUE(in) << p;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(ProfileFiles, ShippedFilesAreWhatTheWriterWritesToday) {
  for (const auto& name : model_names()) {
    EXPECT_EQ(slurp(kProfiles + name + ".yaml"), shipped_profile(name))
        << "workloads/profiles/" << name
        << ".yaml has drifted from workloads/model.cc: regenerate it with "
           "`kfsim --write-profile "
        << name << " > workloads/profiles/" << name << ".yaml`";
  }
}

TEST(ProfileFiles, ShippedFilesReadBackAsTheBuiltInModels) {
  for (const auto& name : model_names()) {
    const ModelProfile& m = model_profile(name);
    const ModelProfile p = load_profile(kProfiles + name + ".yaml");
    EXPECT_EQ(p.name, m.name);
    ASSERT_EQ(p.tensors.size(), m.tensors.size()) << name;
    for (std::size_t i = 0; i < m.tensors.size(); ++i) {
      EXPECT_EQ(p.tensors[i].name, m.tensors[i].name) << name;
      EXPECT_EQ(p.tensors[i].count, m.tensors[i].count) << name;
    }
    ASSERT_EQ(p.layers.size(), m.layers.size()) << name;
    for (std::size_t i = 0; i < m.layers.size(); ++i) {
      EXPECT_EQ(p.layers[i].name, m.layers[i].name) << name;
      EXPECT_EQ(p.layers[i].first_tensor, m.layers[i].first_tensor) << name;
      EXPECT_EQ(p.layers[i].tensor_count, m.layers[i].tensor_count) << name;
      EXPECT_EQ(p.layers[i].forward_gflops, m.layers[i].forward_gflops) << name;  // bit for bit
      EXPECT_TRUE(p.layers[i].times.empty()) << name;
    }
    // The file's total is summed layer by layer, the built-in's from the walk's total: they may
    // differ in the last bits, never in a step's compute time.
    EXPECT_DOUBLE_EQ(p.forward_gflops, m.forward_gflops) << name;
    for (const auto& device : device_names())
      EXPECT_EQ(compute_time_per_sample(p, device), compute_time_per_sample(m, device))
          << name << " on " << device;
  }
}

TEST(ProfileFiles, WriterRoundTripsTimesTensorsAndQuotedNames) {
  const std::string text =
      "name: \"my model\"\n"
      "layers:\n"
      "  - {name: a, parameters: 3, times: {v100: {forward: 1500ns, backward: 3us}}}\n"
      "  - name: \"b: 1\"\n"
      "    tensors: [{name: b/kernel, parameters: 4}, {name: \"b#bias\", parameters: 2}]\n"
      "    times: {v100: {forward: 1ms, backward: 2ms}}\n";
  const ModelProfile p = parse_profile(text, "p.yaml");
  const std::string written = write_profile(p, "a comment\n\nof two paragraphs");
  EXPECT_EQ(written.rfind("# a comment\n#\n# of two paragraphs\nname: \"my model\"\n", 0), 0u)
      << written;
  EXPECT_EQ(write_profile(parse_profile(written, "w.yaml")), write_profile(p));
  const ModelProfile q = parse_profile(written, "w.yaml");
  ASSERT_EQ(q.tensors.size(), 3u);
  EXPECT_EQ(q.tensors[2].name, "b#bias");
  EXPECT_EQ(q.layers[1].name, "b: 1");
  EXPECT_EQ(q.layers[0].times.at("v100").forward.count(), 1500);
  EXPECT_THROW(write_profile(ModelProfile{.name = "synthetic"}), std::invalid_argument);
  EXPECT_THROW(shipped_profile("alexnet"), std::invalid_argument);
}

// Runs `yaml` (a scenario) and returns its records' directory.
fs::path run_into(const std::string& yaml, const fs::path& dir) {
  Simulation sim(parse_scenario(yaml, kProfiles + "s.yaml"));
  sim.run();
  EXPECT_TRUE(sim.recorder().errors().empty());
  sim.write(dir.string());
  return dir;
}

// 4 V100 workers (2 hosts x 2) in the flow world, 3 steps: VGG-16 by name and from its file.
TEST(ProfileFiles, Vgg16FromItsFileRunsAsVgg16ByName) {
  const fs::path tmp =
      fs::temp_directory_path() / ("kf_profile_test_" + std::to_string(::getpid()));
  for (const std::string bucketing : {"none", "ddp"}) {
    const std::string head =
        "steps: 3\nworld: flow\nstrategy: RING_RS_AG\n"
        "topology: {hosts: 2, workers_per_host: 2, link: {bandwidth: 25Gbps}}\n";
    const std::string rest =
        ", device: v100, batch_per_worker: 32, bucketing: " + bucketing + "}\n";
    const fs::path a = run_into(head + "workload: {model: vgg16" + rest, tmp / bucketing / "model");
    const fs::path b =
        run_into(head + "workload: {profile: vgg16.yaml" + rest, tmp / bucketing / "profile");
    const std::string steps = slurp(a / "steps.csv");
    EXPECT_EQ(std::count(steps.begin(), steps.end(), '\n'), 1 + 4 * 3) << bucketing;  // 4 x 3 steps
    // Every record but perf.json (wall-clock figures) byte for byte.
    for (const char* f : {"steps.csv", "collectives.csv", "events.csv", "peers.csv", "summary.json",
                          "trace.json"}) {
      EXPECT_EQ(slurp(a / f), slurp(b / f)) << bucketing << ": " << f << " differs";
    }
  }
  fs::remove_all(tmp);
}

}  // namespace
}  // namespace kf
