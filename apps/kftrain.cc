// kftrain: the training loop of kfsim (workloads/trainer.h) as a real worker program, with the
// same policies, so a scenario's adaptation runs unchanged on real processes under kfrun:
//   kfrun -np 4 -H ... ./kftrain -model resnet50 -steps 100 -policy adaptive_strategy -out runs/a
//   kfrun -w -np 2 -H 127.0.0.1:4 -builtin-config-port 9100 ./kftrain -policy
//   scheduled_resize:schedule=10:4,20:3
// Compute takes the model's profiled time per sample (or -compute-ms); gradients are real
// buffers of the model's tensor sizes, -verify checks every allreduce's sum. With -numeric MODEL
// the worker trains a real model (workloads/numeric_program.h) with -sync ssgd|sma|pair_avg|
// ada_sgd on a Gaussian-mixture task, or MNIST / CIFAR-10 files (-dataset, -data), and records
// loss, accuracy, gradient noise scale. Each worker writes the common records (steps.csv, ...)
// into DIR/<ip>.<port>/.
#include <fmt/format.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <thread>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "gpu/gpu_step_backend.h"
#include "launch/flags.h"
#include "launch/real_membership.h"
#include "launch/worker_env.h"
#include "policies/registry.h"
#include "real/cpu_cores.h"
#include "real/epoll_loop.h"
#include "real/local_compute.h"
#include "real/socket_transport.h"
#include "workloads/gradient_program.h"
#include "workloads/model.h"
#include "workloads/numeric_program.h"
#include "workloads/records.h"
#include "workloads/trainer.h"

namespace {

std::string env_or(const char* name, const std::string& fallback = "") {
  const char* v = std::getenv(name);
  return v != nullptr ? std::string(v) : fallback;
}

// A program whose state() (the model, or the allreduced gradients: what every worker of the
// cluster must hold alike after a step) is digested with XXH3 each time the trainer asks for
// the step's values, that is once per step after its communication; the digest goes to `sink`.
class DigestingProgram final : public kf::StepProgram {
 public:
  DigestingProgram(std::unique_ptr<kf::StepProgram> inner, std::shared_ptr<std::uint64_t> sink)
      : inner_(std::move(inner)), sink_(std::move(sink)) {}
  void start(kf::Engine& engine, kf::DoneCallback done) override {
    inner_->start(engine, std::move(done));
  }
  void begin(const kf::StepContext& context) override { inner_->begin(context); }
  std::function<void()> compute(std::int64_t step, int batch_per_worker) override {
    return inner_->compute(step, batch_per_worker);
  }
  std::vector<kf::Duration> ready_marks(kf::Duration compute) override {
    return inner_->ready_marks(compute);
  }
  void ready(const kf::StepContext& context, std::size_t mark) override {
    inner_->ready(context, mark);
  }
  std::shared_ptr<const kf::StepTimeline> timeline() const override { return inner_->timeline(); }
  void communicate(const kf::StepContext& context, kf::DoneCallback done) override {
    inner_->communicate(context, std::move(done));
  }
  std::vector<kf::BufferView> state() override { return inner_->state(); }
  void resized(int rank, int size) override { inner_->resized(rank, size); }
  void values(std::map<std::string, double>& out) const override {
    inner_->values(out);
    XXH3_state_t state;
    XXH3_64bits_reset(&state);
    for (const kf::BufferView& b : inner_->state())
      if (!b.is_phantom()) XXH3_64bits_update(&state, b.data(), b.size_bytes());
    *sink_ = XXH3_64bits_digest(&state);
  }

 private:
  std::unique_ptr<kf::StepProgram> inner_;
  std::shared_ptr<std::uint64_t> sink_;
};

// -journal: DIR/journal.csv gets one line per finished step, appended and flushed at once, so
// that it survives the worker being killed (a SIGKILL loses no step the worker finished): pid,
// rank, step, cluster size and the state's digest in hex. A worker started again on the same
// address appends, told apart by its pid. tests/chaos/ compares the workers step by step by it.
class StepJournal {
 public:
  explicit StepJournal(const std::string& dir) {
    std::filesystem::create_directories(dir);
    const std::string path = dir + "/journal.csv";
    const bool fresh = !std::filesystem::exists(path);
    file_ = std::fopen(path.c_str(), "a");
    if (file_ == nullptr) throw std::runtime_error("-journal: cannot open " + path);
    if (fresh) line("pid,rank,step,cluster_size,digest\n");
  }
  ~StepJournal() { std::fclose(file_); }
  StepJournal(const StepJournal&) = delete;
  StepJournal& operator=(const StepJournal&) = delete;

  void write(const kf::StepRecord& s, std::uint64_t digest) {
    line(fmt::format("{},{},{},{},{:016x}\n", ::getpid(), s.rank, s.step, s.cluster_size, digest));
  }

 private:
  void line(const std::string& text) {
    std::fputs(text.c_str(), file_);
    std::fflush(file_);
  }
  std::FILE* file_;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kftrain: a data-parallel training worker (run it under kfrun)"};
  std::string model_name = "resnet50", device = "k80", out, timeout_text = "60s";
  int batch = 32, steps = 20, ping_every = 0;
  double compute_ms = -1;
  std::size_t fusion = 0;
  std::string bucketing_name = "none", horovod_cycle = "5ms";
  kf::BucketingOptions bucketing;
  bool verify = false, quiet = false, journal = false;
  std::vector<std::string> policy_flags;
  // Numeric training.
  std::string numeric, sync = "ssgd", dataset = "gaussian_mixture", data_dir,
                       local_optimizer = "sgd";
  double learning_rate = 0.1, sma_alpha = 0.1;
  int hidden = 64, eval_every = 10, gns_every = 0, variance_every = 0;
  std::int64_t ada_switch_step = 100;
  std::uint64_t seed = 1;
  kf::GaussianMixtureOptions mixture;
  app.add_option("--model", model_name, "model profile (resnet50, resnet56, mobilenet_v2, ...)");
  app.add_option("--device", device,
                 "device whose profiled speed the compute takes (k80, v100, h100)");
  app.add_option("--batch", batch, "samples per worker per step");
  app.add_option("--steps", steps, "training steps");
  app.add_option("--fusion", fusion, "fuse gradients into buckets of this many bytes (0: none)");
  std::map<std::string, kf::Bucketing> bucketing_modes;
  for (const auto& [mode, name] : kf::kBucketingNames)
    bucketing_modes.emplace(name, mode);
  app.add_option("--bucketing", bucketing_name,
                 "when gradients start: none (after the compute), kungfu (each tensor as it is "
                 "ready), ddp (25 MiB buckets) or horovod (fused every cycle); with -gpu: none, "
                 "kungfu or ddp")
      ->check(CLI::IsMember(bucketing_modes));
  app.add_option("--bucket-cap", bucketing.bucket_cap, "ddp: bytes per bucket after the first");
  app.add_option("--first-bucket", bucketing.first_bucket, "ddp: bytes of the first bucket");
  app.add_option("--horovod-fusion", bucketing.fusion_bytes, "horovod: fusion buffer bytes");
  app.add_option("--horovod-cycle", horovod_cycle, "horovod: cycle time (5ms)");
  app.add_option("--compute-ms", compute_ms,
                 "compute time per step in ms (default: the profile's)");
  app.add_option("--policy", policy_flags,
                 "a policy, e.g. adaptive_strategy:threshold=0.8 (repeatable; default: "
                 "KUNGFU_POLICY, specs separated by ';')")
      ->allow_extra_args(false);
  app.add_option("--ping-every", ping_every, "probe peer latencies every N steps (0: never)");
  app.add_option("--timeout", timeout_text, "deadline of every collective (30s, 2m)");
  app.add_flag("--verify", verify, "check every allreduce's result");
  app.add_option("--numeric", numeric, "train a real model: softmax or mlp");
  app.add_option("--sync", sync, "distributed optimizer: ssgd, sma, pair_avg, ada_sgd");
  app.add_option("--lr", learning_rate, "learning rate");
  app.add_option("--local-optimizer", local_optimizer, "sgd (momentum 0.9) or adam");
  app.add_option("--sma-alpha", sma_alpha, "SMA's alpha");
  app.add_option("--ada-switch-step", ada_switch_step, "AdaSGD: SMA before, S-SGD from this step");
  app.add_option("--hidden", hidden, "mlp: hidden units");
  app.add_option("--dataset", dataset, "gaussian_mixture, mnist or cifar10");
  app.add_option("--data", data_dir, "mnist / cifar10: the directory of the files");
  app.add_option("--features", mixture.features, "gaussian_mixture: features");
  app.add_option("--classes", mixture.classes, "gaussian_mixture: classes");
  app.add_option("--noise", mixture.noise, "gaussian_mixture: within-class standard deviation");
  app.add_option("--separation", mixture.separation, "gaussian_mixture: spread of the class means");
  app.add_option("--train", mixture.train, "gaussian_mixture: training samples");
  app.add_option("--test", mixture.test, "gaussian_mixture: test samples");
  app.add_option("--eval-every", eval_every, "test accuracy every N steps (0: never)");
  app.add_option("--gns-every", gns_every, "gradient noise scale every N steps (0: off)");
  app.add_option("--variance-every", variance_every, "gradient variance every N steps (0: off)");
  app.add_option("--seed", seed, "data, initial model and peer choices");
  app.add_option("--out", out, "write records into OUT/<ip>.<port>/");
  app.add_flag("--journal", journal,
               "with -out: append each finished step at once to OUT/<ip>.<port>/journal.csv "
               "(pid, rank, step, cluster size, digest of the model or allreduced gradients)");
  app.add_flag("--q", quiet, "no per-step lines");
  // GPU: real GPU compute and device-buffer allreduce.
  bool use_gpu = false, gpu_tf32 = false;
  std::string gpu_strategy = "NCCL";
  double gpu_flops_scale = 1.0;
  app.add_flag("--gpu", use_gpu,
               "real GPU work: cuBLAS SGEMMs sized to the model's FLOPs x batch, gradients of the "
               "model's tensor sizes in device memory, allreduced by -gpu-strategy (GPU = "
               "LOCAL_RANK % devices)");
  app.add_option("--gpu-strategy", gpu_strategy, "NCCL, NCCL_HIERARCHICAL, STAGED or STAGED:<S>");
  app.add_flag("--gpu-tf32", gpu_tf32, "let cuBLAS use TF32 tensor cores");
  app.add_option("--gpu-flops-scale", gpu_flops_scale, "scale the GEMM work per step");
  auto args = kf::go_style_args(argc, argv, {"verify", "q", "journal", "gpu", "gpu-tf32"}, false);
  try {
    app.parse(static_cast<int>(args.argv.size()), args.argv.data());
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help is 0; a bad flag is 2, as every input error
  }

  try {
    const kf::WorkerConfig config = kf::worker_config_from(kf::current_environment());
    const kf::ModelProfile& model = kf::model_profile(model_name);
    std::vector<std::unique_ptr<kf::Policy>> policies;
    if (policy_flags.empty()) {
      // kfrun -policy hands policies to every worker as KUNGFU_POLICY="spec;spec".
      const std::string from_env = env_or("KUNGFU_POLICY");
      for (std::size_t begin = 0; begin < from_env.size();) {
        const auto end = std::min(from_env.find(';', begin), from_env.size());
        if (end > begin) policy_flags.push_back(from_env.substr(begin, end - begin));
        begin = end + 1;
      }
    }
    for (const auto& text : policy_flags)
      policies.push_back(kf::make_policy(kf::parse_policy_flag(text)));
    kf::SocketTransportOptions transport_options;
    transport_options.secret = env_or("KUNGFU_SECRET");
    std::optional<kf::RealMembershipOptions> elastic =
        kf::elastic_membership_options(kf::current_environment(), config, transport_options);

    kf::TrainerOptions options{
        .model = &model,
        .batch_per_worker = batch,
        .fusion_bytes = fusion,
        .phantom = false,
        .steps = steps,
        .compute_per_sample = compute_ms >= 0 ? std::chrono::nanoseconds(static_cast<std::int64_t>(
                                                    compute_ms * 1e6 / std::max(batch, 1)))
                                              : kf::compute_time_per_sample(model, device),
        .engine = {.timeout = kf::parse_flag_duration(timeout_text)},
        .ping_every = ping_every,
        .joining = env_or("KUNGFU_JOINING") == "1",
        .verify = verify};
    bucketing.mode = bucketing_modes.at(bucketing_name);
    bucketing.cycle = kf::parse_flag_duration(horovod_cycle);
    if (bucketing.mode != kf::Bucketing::none) {
      if (fusion != 0) {
        throw std::invalid_argument("--fusion: only with --bucketing none (" + bucketing_name +
                                    " makes its own buckets)");
      }
      if (use_gpu && bucketing.mode == kf::Bucketing::horovod) {
        throw std::invalid_argument(
            "--bucketing horovod: not with -gpu (Horovod fuses what is ready at each cycle of "
            "real time, which on a GPU differs from rank to rank, while every rank must allreduce "
            "the same buffers in the same order); use kungfu or ddp");
      }
      if (!numeric.empty()) {
        throw std::invalid_argument("--bucketing " + bucketing_name +
                                    ": not with --numeric (its models compute every gradient at "
                                    "once)");
      }
    }
    options.bucketing = bucketing;
    options.device = device;
    if (config.strategy) options.engine.strategy = *config.strategy;
    // Every worker of a host counts the same cores, so all of them choose alike (AUTO).
    options.engine.host_cores = kf::usable_cores();
    if (use_gpu) {
      if (!numeric.empty()) throw std::invalid_argument("-gpu and -numeric do not go together");
      if (const auto why = kf::gpu_unavailable()) throw std::runtime_error("-gpu: " + *why);
      const auto device_strategy = kf::parse_device_strategy(gpu_strategy);
      if (!device_strategy) {
        throw std::invalid_argument("-gpu-strategy " + gpu_strategy +
                                    ": unknown; known: " + kf::device_strategy_names());
      }
      kf::GpuProgramOptions g{
          .model = &model,
          .fusion_bytes = fusion,
          .verify = verify,
          .gpu = {.device = kf::gpu_default_device(config.cluster.local_rank(config.rank)),
                  .strategy = *device_strategy,
                  .timeout = options.engine.timeout},
          .tf32 = gpu_tf32,
          .flops_scale = gpu_flops_scale,
          .bucketing = bucketing,
          .device = device};
      // The GEMMs take what they take: no profiled time on top (unless -compute-ms says so).
      if (compute_ms < 0) options.compute_per_sample = std::chrono::nanoseconds(0);
      options.program = [g](int rank, int size) {
        return kf::make_gpu_gradient_program(g, rank, size);
      };
    }
    if (!numeric.empty()) {
      mixture.seed = seed;
      auto [train, test] = kf::load_dataset(dataset, data_dir, mixture);
      kf::NumericOptions n{
          .model = kf::make_numeric_model(numeric, train.features, train.classes, hidden),
          .train = std::make_shared<kf::Dataset>(std::move(train)),
          .test = std::make_shared<kf::Dataset>(std::move(test)),
          .sync = sync,
          .sma_alpha = sma_alpha,
          .ada_switch_step = ada_switch_step,
          .optimizer = {.name = local_optimizer},
          .seed = seed,
          .eval_every = eval_every,
          .gns_every = gns_every,
          .variance_every = variance_every};
      kf::validate(n);
      options.learning_rate = learning_rate;
      options.program = [n](int rank, int size) {
        return std::make_unique<kf::NumericProgram>(n, rank, size);
      };
    }

    const kf::PeerID& me = config.cluster.worker(config.rank);
    const std::string record_dir = fmt::format("{}/{}.{}", out, me.host, me.port);
    std::unique_ptr<StepJournal> step_journal;
    auto digest = std::make_shared<std::uint64_t>(0);
    if (journal) {
      if (out.empty()) throw std::invalid_argument("-journal needs -out");
      step_journal = std::make_unique<StepJournal>(record_dir);
      if (!options.program) {
        options.program = [&model, fusion, verify, bucketing, device](int, int) {
          return std::make_unique<kf::GradientProgram>(model, fusion, false, verify, bucketing,
                                                       device);
        };
      }
      options.program = [inner = options.program, digest](int rank, int size) {
        return std::make_unique<DigestingProgram>(inner(rank, size), digest);
      };
    }

    kf::EpollLoop loop;
    kf::LocalCompute compute(loop);
    kf::RunRecorder recorder;
    std::promise<kf::Status> finished;
    bool detached = false;
    std::unique_ptr<kf::RealMembership> membership;
    std::unique_ptr<kf::SocketTransport> fixed;
    std::unique_ptr<kf::Trainer> trainer;
    recorder.on_worker_finished = [&](int, const kf::Status& s, kf::TimePoint) {
      detached = trainer && trainer->detached();
      finished.set_value(s);
    };
    recorder.on_step_finished = [&](const kf::StepRecord& s) {
      if (step_journal) step_journal->write(s, *digest);
      if (quiet || s.rank != 0) return;
      std::string values;
      for (const auto& [name, value] : s.metrics.values)
        values += fmt::format(" {}={:.4g}", name, value);
      // With -gpu the gradients go by the device strategy; the engine's own strategy then
      // carries only the host stage of STAGED (and the runtime's small control collectives).
      const std::string strategy =
          use_gpu ? fmt::format("device {} (host {})", gpu_strategy, s.strategy) : s.strategy;
      std::printf("step %lld: %d workers, %s, %.1f samples/s (this worker)%s%s%s\n",
                  static_cast<long long>(s.step), s.cluster_size, strategy.c_str(),
                  s.metrics.samples_per_second, values.c_str(), s.actions.empty() ? "" : " -> ",
                  s.actions.c_str());
      std::fflush(stdout);
    };
    loop.call([&] {
      kf::TrainerWorld world{.executor = loop, .compute = compute};
      if (elastic) {
        membership = std::make_unique<kf::RealMembership>(loop, std::move(*elastic));
        world.membership = membership.get();
      } else {
        fixed = std::make_unique<kf::SocketTransport>(loop, config.cluster, config.rank,
                                                      transport_options);
        if (config.cluster.size() > 1) fixed->start();
        world.transport = fixed.get();
      }
      trainer = std::make_unique<kf::Trainer>(config.cluster, config.rank, world, options,
                                              kf::PolicyRunner(std::move(policies)), recorder);
      trainer->start();
    });
    const kf::Status status = finished.get_future().get();

    // The failure is reported at once, not after the close below.
    if (!status.ok()) std::fprintf(stderr, "kftrain: %s\n", status.to_string().c_str());

    // Orderly close: the last messages out, a bye to every peer. After a failure it waits only
    // briefly: a stopped or vanished peer never answers, and the launcher should learn of the
    // failure within the operation's timeout.
    const auto close_limit = status.ok() ? std::chrono::seconds(10) : std::chrono::seconds(1);
    std::promise<void> closed;
    loop.call([&] {
      trainer.reset();
      if (membership) {
        membership->limit_close(close_limit);
        membership->leave([&closed] { closed.set_value(); });
      } else if (fixed) {
        fixed->shutdown(close_limit, [&closed] { closed.set_value(); });
      } else {
        closed.set_value();
      }
    });
    closed.get_future().wait_for(close_limit + std::chrono::seconds(2));
    loop.call([&] {
      membership.reset();
      fixed.reset();
    });
    loop.stop();

    if (!out.empty()) {
      nlohmann::json run = {{"program", "kftrain"}, {"model", model_name},
                            {"device", device},     {"batch_per_worker", batch},
                            {"steps", steps},       {"detached", detached}};
      if (journal) run["pid"] = ::getpid();  // which run of this address wrote the records
      recorder.write(record_dir, recorder.summary(run, {}));
    }
    if (!status.ok()) return 1;
    if (detached) std::printf("kftrain: detached (not in the new cluster): exiting\n");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kftrain: %s\n", e.what());
    return 2;
  }
}
