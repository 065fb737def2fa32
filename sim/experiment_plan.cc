#include "sim/experiment_plan.h"

#include <fmt/format.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include <nlohmann/json.hpp>

#include "workloads/model.h"

namespace kf {

namespace fs = std::filesystem;

namespace {

constexpr const char* kManifestFile = "experiment.json";
constexpr const char* kMarkerFile = "run.json";
constexpr int kManifestVersion = 1;

struct StateDeleter {
  void operator()(XXH3_state_t* s) const { XXH3_freeState(s); }
};

// XXH3-64 of a file's bytes; empty when it cannot be read.
std::optional<std::string> digest_of(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return std::nullopt;
  std::unique_ptr<XXH3_state_t, StateDeleter> state(XXH3_createState());
  XXH3_64bits_reset(state.get());
  std::vector<char> buf(1 << 16);
  while (f) {
    f.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    XXH3_64bits_update(state.get(), buf.data(), static_cast<std::size_t>(f.gcount()));
  }
  if (f.bad()) return std::nullopt;
  return fmt::format("{:016x}", XXH3_64bits_digest(state.get()));
}

// Everything a model profile read from a file says, one field per line.
std::string profile_text(const ModelProfile& p) {
  std::string text = fmt::format("profile={}\ngflops={:.17g}\n", p.name, p.forward_gflops);
  for (const auto& t : p.tensors)
    text += fmt::format("tensor={} {}\n", t.name, t.count);
  for (const auto& l : p.layers) {
    text += fmt::format("layer={} {} {} {:.17g}\n", l.name, l.first_tensor, l.tensor_count,
                        l.forward_gflops);
    for (const auto& [device, t] : l.times)
      text += fmt::format("time={} {} {}\n", device, t.forward.count(), t.backward.count());
  }
  return text;
}

std::string run_digest(const std::string& build, const std::string& file_digest,
                       const std::vector<std::string>& overrides, const Arm& arm,
                       std::uint64_t seed) {
  // One field per line, each named, so that no two different inputs read the same.
  std::string text = fmt::format("build={}\nfile={}\n", build, file_digest);
  for (const auto& o : overrides)
    text += fmt::format("override={}\n", o);
  text += fmt::format("arm.dir={}\narm.label={}\n", arm.dir, arm.label);
  for (const auto& o : arm.overrides)
    text += fmt::format("arm.override={}\n", o);
  text += fmt::format("seed={}\n", seed);
  // A profile file the scenario reads (workload.profile) is part of what the run simulates.
  if (const auto& profile = arm.scenario.workload.profile) text += profile_text(*profile);
  return fmt::format("{:016x}", XXH3_64bits(text.data(), text.size()));
}

void write_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!(f << text) || !f.flush()) throw std::runtime_error("cannot write " + tmp);
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) throw std::runtime_error("cannot rename " + tmp + " to " + path + ": " + ec.message());
}

std::optional<nlohmann::json> read_json(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return std::nullopt;
  auto j = nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

std::string relative_to(const std::string& dir, const std::string& out) {
  if (dir == out) return "";
  if (dir.size() > out.size() + 1 && dir.compare(0, out.size(), out) == 0 && dir[out.size()] == '/')
    return dir.substr(out.size() + 1);
  return dir;
}

}  // namespace

std::string build_digest() {
  static const std::string digest = [] {
    auto d = digest_of("/proc/self/exe");
    if (!d) throw std::runtime_error("cannot read /proc/self/exe to identify this kfsim build");
    return *d;
  }();
  return digest;
}

std::string file_digest(const std::string& path) {
  auto d = digest_of(path);
  if (!d) throw ExperimentError("kfsim: cannot read " + path);
  return *d;
}

std::vector<PlannedRun> plan_runs(const std::vector<Arm>& arms, int seeds, const std::string& out,
                                  const std::vector<std::string>& overrides,
                                  const std::string& build, const std::string& file_digest) {
  std::vector<PlannedRun> runs;
  for (std::size_t a = 0; a < arms.size(); ++a) {
    const std::string base = arms[a].dir.empty() ? out : out + "/" + arms[a].dir;
    for (int k = 0; k < seeds; ++k) {
      PlannedRun r;
      r.arm = a;
      r.seed = arms[a].scenario.seed + static_cast<std::uint64_t>(k);
      r.dir = seeds > 1 ? fmt::format("{}/seed={}", base, r.seed) : base;
      r.scenario = arms[a].scenario;
      r.scenario.seed = r.seed;
      r.digest = run_digest(build, file_digest, overrides, arms[a], r.seed);
      runs.push_back(std::move(r));
    }
  }
  return runs;
}

Manifest make_manifest(const std::string& file, const std::string& file_digest,
                       const std::vector<std::string>& overrides, const std::string& build,
                       const std::vector<Arm>& arms, const std::vector<PlannedRun>& runs,
                       const std::string& out) {
  Manifest m;
  m.file = fs::absolute(file).lexically_normal().string();
  m.file_digest = file_digest;
  m.overrides = overrides;
  m.build = build;
  for (const auto& r : runs)
    m.runs.push_back({relative_to(r.dir, out), arms[r.arm].label, r.seed, r.digest});
  return m;
}

bool has_manifest(const std::string& out) {
  return fs::exists(fs::path(out) / kManifestFile);
}

void write_manifest(const std::string& out, const Manifest& m) {
  nlohmann::json runs = nlohmann::json::array();
  for (const auto& r : m.runs)
    runs.push_back({{"dir", r.dir}, {"arm", r.arm}, {"seed", r.seed}, {"digest", r.digest}});
  nlohmann::json slurm = nlohmann::json::array();
  for (const auto& s : m.slurm)
    slurm.push_back({{"job", s.job}, {"tasks", s.tasks}});
  const nlohmann::json j = {{"kfsim_experiment", kManifestVersion},
                            {"file", m.file},
                            {"file_digest", m.file_digest},
                            {"overrides", m.overrides},
                            {"build", m.build},
                            {"runs", runs},
                            {"slurm_jobs", slurm}};
  fs::create_directories(out);
  write_atomically((fs::path(out) / kManifestFile).string(), j.dump(2) + "\n");
}

Manifest read_manifest(const std::string& out) {
  const std::string path = (fs::path(out) / kManifestFile).string();
  if (!fs::is_directory(out))
    throw ExperimentError(fmt::format("kfsim: {} is not a directory", out));
  if (!fs::exists(path)) {
    throw ExperimentError(fmt::format(
        "kfsim: {} holds no experiment: {} is missing (kfsim writes it for a sweep, variants, "
        "seeds > 1 or --slurm)",
        out, path));
  }
  const auto j = read_json(path);
  try {
    if (!j || !j->is_object() || j->value("kfsim_experiment", 0) != kManifestVersion)
      throw std::runtime_error("not a kfsim experiment manifest (version 1)");
    Manifest m;
    m.file = j->at("file").get<std::string>();
    m.file_digest = j->at("file_digest").get<std::string>();
    m.overrides = j->at("overrides").get<std::vector<std::string>>();
    m.build = j->at("build").get<std::string>();
    for (const auto& r : j->at("runs")) {
      m.runs.push_back({r.at("dir").get<std::string>(), r.at("arm").get<std::string>(),
                        r.at("seed").get<std::uint64_t>(), r.at("digest").get<std::string>()});
    }
    for (const auto& s : j->at("slurm_jobs"))
      m.slurm.push_back(
          {s.at("job").get<std::string>(), s.at("tasks").get<std::vector<std::size_t>>()});
    return m;
  } catch (const std::exception& e) {
    throw ExperimentError(fmt::format("kfsim: {}: {}", path, e.what()));
  }
}

void write_run_marker(const PlannedRun& run, int exit_code) {
  const nlohmann::json j = {{"digest", run.digest}, {"exit_code", exit_code}};
  write_atomically((fs::path(run.dir) / kMarkerFile).string(), j.dump(2) + "\n");
}

std::optional<int> completed_run(const PlannedRun& run) {
  const auto j = read_json((fs::path(run.dir) / kMarkerFile).string());
  if (!j || !j->is_object() || j->value("digest", "") != run.digest) return std::nullopt;
  const int code = j->value("exit_code", -1);
  if (code != 0 && code != 1) return std::nullopt;
  if (!fs::exists(fs::path(run.dir) / "summary.json")) return std::nullopt;
  return code;
}

std::string run_state(const PlannedRun& run) {
  if (completed_run(run)) return "complete";
  if (fs::exists(fs::path(run.dir) / kMarkerFile)) {
    const auto j = read_json((fs::path(run.dir) / kMarkerFile).string());
    if (j && j->is_object() && j->value("digest", "") != run.digest)
      return "records of a different scenario or kfsim build";
    return "incomplete records";
  }
  if (fs::exists(run.dir) && !fs::is_empty(run.dir)) return "incomplete records";
  return "no records";
}

}  // namespace kf
