// Training on real gradients: datasets and sharding, the models' gradients against finite
// differences, the gradient noise scale against its analytic value, and every distributed
// optimizer reaching a stated accuracy with 4 workers in the in-process world.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <random>
#include <set>
#include <sstream>

#include "real/inproc_world.h"
#include "real/local_compute.h"
#include "workloads/dataset.h"
#include "workloads/gradient_monitors.h"
#include "workloads/numeric_model.h"
#include "workloads/numeric_program.h"
#include "workloads/records.h"
#include "workloads/trainer.h"

namespace kf {
namespace {

TEST(Dataset, GaussianMixtureIsDeterministicPerSeed) {
  const auto [a, a_test] = gaussian_mixture({.train = 100, .test = 10, .seed = 7});
  const auto [b, b_test] = gaussian_mixture({.train = 100, .test = 10, .seed = 7});
  const auto [c, c_test] = gaussian_mixture({.train = 100, .test = 10, .seed = 8});
  EXPECT_EQ(a.x, b.x);
  EXPECT_EQ(a.y, b.y);
  EXPECT_NE(a.x, c.x);
  EXPECT_EQ(a.size(), 100u);
  EXPECT_EQ(a_test.size(), 10u);
}

TEST(ShardSampler, ShardsAreDisjointAndCoverEveryEpochInAFreshOrder) {
  const std::size_t n = 103;
  std::vector<std::size_t> first_epoch;
  std::multiset<std::size_t> seen;
  for (int r = 0; r < 4; ++r) {
    ShardSampler s(n, r, 4, 5);
    const auto batch = s.next_batch(static_cast<int>(s.shard_size()));
    seen.insert(batch.begin(), batch.end());
    if (r == 0) first_epoch = batch;
    EXPECT_EQ(s.epoch(), 1);
    const auto second = s.next_batch(static_cast<int>(s.shard_size()));
    if (r == 0) {
      EXPECT_NE(first_epoch, second);  // reshuffled
    }
  }
  EXPECT_EQ(seen.size(), n);
  EXPECT_EQ(std::set<std::size_t>(seen.begin(), seen.end()).size(), n);
}

void write_bytes(const std::string& path, const std::vector<unsigned char>& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
}

TEST(Dataset, MnistAndCifarFilesAreRead) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("kf_data_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  // 2 images of 2x3 and their labels, in IDX.
  write_bytes(dir / "img", {0, 0,   8, 3, 0, 0, 0,  2,  0,  0,  0,  2, 0, 0, 0, 3,  //
                            0, 255, 0, 0, 0, 0, 10, 20, 30, 40, 50, 60});
  write_bytes(dir / "lbl", {0, 0, 8, 1, 0, 0, 0, 2, 7, 3});
  const Dataset m = load_mnist(dir / "img", dir / "lbl");
  EXPECT_EQ(m.size(), 2u);
  EXPECT_EQ(m.features, 6);
  EXPECT_EQ(m.y, (std::vector<std::int32_t>{7, 3}));
  EXPECT_FLOAT_EQ(m.x[1], 1.0f);
  write_bytes(dir / "bad", {0, 0, 8, 4});
  EXPECT_THROW(load_mnist(dir / "bad", dir / "lbl"), std::runtime_error);
  std::vector<unsigned char> cifar(2 * 3073, 128);
  cifar[0] = 4;
  cifar[3073] = 9;
  write_bytes(dir / "c.bin", cifar);
  const Dataset c = load_cifar10({dir / "c.bin"});
  EXPECT_EQ(c.y, (std::vector<std::int32_t>{4, 9}));
  cifar.pop_back();
  write_bytes(dir / "c2.bin", cifar);
  EXPECT_THROW(load_cifar10({dir / "c2.bin"}), std::runtime_error);
  std::filesystem::remove_all(dir);
}

class Gradients : public ::testing::TestWithParam<std::string> {};

TEST_P(Gradients, MatchFiniteDifferences) {
  const auto [train, test] =
      gaussian_mixture({.features = 5, .classes = 3, .train = 16, .test = 4});
  const auto model = make_numeric_model(GetParam(), 5, 3, 4);
  std::vector<float> p = model->initial_parameters(3);
  std::vector<float> g(p.size());
  std::vector<std::size_t> batch{0, 1, 2, 3, 4, 5, 6, 7};
  model->loss_and_gradient(p, train, batch, g);
  std::vector<float> scratch(p.size());
  for (std::size_t i = 0; i < p.size(); i += 3) {
    const float h = 1e-2f;
    std::vector<float> up = p, down = p;
    up[i] += h;
    down[i] -= h;
    const double numeric = (model->loss_and_gradient(up, train, batch, scratch) -
                            model->loss_and_gradient(down, train, batch, scratch)) /
                           (2 * h);
    EXPECT_NEAR(g[i], numeric, 2e-3 + 2e-2 * std::abs(numeric)) << GetParam() << " parameter " << i;
  }
}
INSTANTIATE_TEST_SUITE_P(Models, Gradients, ::testing::Values("softmax", "mlp"));

// Per-sample gradients g = G + noise, noise ~ N(0, sigma^2 I): the noise scale is
// tr(Sigma) / |G|^2 = d sigma^2 / |G|^2.
TEST(GradientNoiseScale, WithinAQuarterOfTheAnalyticValue) {
  const int d = 50, workers = 4, b_small = 8;
  const double sigma = 2.0;
  std::mt19937_64 rng(11);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> true_g(d);
  for (auto& x : true_g)
    x = normal(rng);
  double g2 = 0;
  for (double x : true_g)
    g2 += x * x;
  const double analytic = d * sigma * sigma / g2;
  GnsEstimator gns(0.95);
  for (int step = 0; step < 400; ++step) {
    std::vector<double> big(d, 0.0), small(d, 0.0);
    for (int w = 0; w < workers; ++w) {
      std::vector<double> local(d, 0.0);
      for (int s = 0; s < b_small; ++s)
        for (int i = 0; i < d; ++i)
          local[static_cast<std::size_t>(i)] +=
              true_g[static_cast<std::size_t>(i)] + sigma * normal(rng);
      for (int i = 0; i < d; ++i) {
        local[static_cast<std::size_t>(i)] /= b_small;
        big[static_cast<std::size_t>(i)] += local[static_cast<std::size_t>(i)] / workers;
      }
      if (w == 0) small = local;
    }
    double s2 = 0, b2 = 0;
    for (int i = 0; i < d; ++i) {
      s2 += small[static_cast<std::size_t>(i)] * small[static_cast<std::size_t>(i)];
      b2 += big[static_cast<std::size_t>(i)] * big[static_cast<std::size_t>(i)];
    }
    gns.observe(s2, b2, b_small, b_small * workers);
  }
  ASSERT_TRUE(gns.noise_scale());
  EXPECT_NEAR(*gns.noise_scale(), analytic, 0.25 * analytic)
      << "estimated " << *gns.noise_scale() << ", analytic " << analytic;
}

TEST(GradientVariance, OfKnownValues) {
  // Two workers, two elements: g = (1, 3) and (3, 3): variance 1 + 0.
  const std::vector<float> sum{4, 6}, squares{10, 18};
  EXPECT_DOUBLE_EQ(gradient_variance(sum, squares, 2), 1.0);
}

// ---- every optimizer, 4 workers, the in-process world ----

struct Trained {
  double initial_accuracy = 0;   // the untrained model's
  std::vector<double> accuracy;  // last evaluation per rank
  std::vector<std::string> errors;
  std::vector<double> gns;
};

Trained train_inproc(const std::string& sync, int steps, double lr, int gns_every = 0) {
  const int n = 4;
  auto [train, test] = gaussian_mixture({.features = 16,
                                         .classes = 4,
                                         .train = 4096,
                                         .test = 1024,
                                         .separation = 1.0,
                                         .noise = 1.0,
                                         .seed = 3});
  NumericOptions o{.model = make_numeric_model("mlp", 16, 4, 32),
                   .train = std::make_shared<Dataset>(std::move(train)),
                   .test = std::make_shared<Dataset>(std::move(test)),
                   .sync = sync,
                   .ada_switch_step = steps / 2,
                   .eval_every = steps,
                   .gns_every = gns_every};
  Trained out;
  out.initial_accuracy = o.model->evaluate(o.model->initial_parameters(o.seed), *o.test).accuracy;
  InprocWorld world(n);
  std::vector<std::unique_ptr<LocalCompute>> computes;
  std::vector<std::unique_ptr<Trainer>> trainers(n);
  // One recorder per worker: each is used on its worker's loop only.
  std::vector<RunRecorder> recorders(static_cast<std::size_t>(n));
  std::promise<void> all_done;
  std::atomic<int> done{0};
  for (auto& recorder : recorders) {
    recorder.on_worker_finished = [&](int, const Status&, TimePoint) {
      if (++done == n) all_done.set_value();
    };
  }
  static const ModelProfile& unused = model_profile("resnet56");
  for (int r = 0; r < n; ++r) {
    computes.push_back(std::make_unique<LocalCompute>(world.loop(r)));
    world.loop(r).call([&, r] {
      TrainerOptions t{.model = &unused,
                       .batch_per_worker = 32,
                       .steps = steps,
                       .learning_rate = lr,
                       .program = [o](int rank, int size) {
                         return std::make_unique<NumericProgram>(o, rank, size);
                       }};
      trainers[static_cast<std::size_t>(r)] =
          std::make_unique<Trainer>(ClusterSpec::local(n), r,
                                    TrainerWorld{.executor = world.loop(r),
                                                 .compute = *computes.back(),
                                                 .transport = &world.transport(r)},
                                    t, PolicyRunner{}, recorders[static_cast<std::size_t>(r)]);
    });
  }
  // Every engine listens before anyone sends.
  for (int r = 0; r < n; ++r)
    world.loop(r).post([&trainers, r] { trainers[static_cast<std::size_t>(r)]->start(); });
  if (all_done.get_future().wait_for(std::chrono::seconds(120)) != std::future_status::ready) {
    out.errors.push_back("training did not finish");
  }
  for (int r = 0; r < n; ++r)
    world.loop(r).call([&, r] { trainers[static_cast<std::size_t>(r)].reset(); });
  out.accuracy.assign(n, 0.0);
  out.gns.assign(n, 0.0);
  for (const auto& recorder : recorders) {
    out.errors.insert(out.errors.end(), recorder.errors().begin(), recorder.errors().end());
    for (const auto& s : recorder.steps()) {
      if (const auto a = s.metrics.values.find("accuracy"); a != s.metrics.values.end())
        out.accuracy[static_cast<std::size_t>(s.rank)] = a->second;
      if (const auto g = s.metrics.values.find("gns"); g != s.metrics.values.end())
        out.gns[static_cast<std::size_t>(s.rank)] = g->second;
    }
  }
  return out;
}

class Optimizers : public ::testing::TestWithParam<std::string> {};

TEST_P(Optimizers, ReachNinetyPercentWithFourWorkers) {
  const Trained t = train_inproc(GetParam(), 200, 0.05);
  EXPECT_TRUE(t.errors.empty()) << t.errors.front();
  EXPECT_LT(t.initial_accuracy, 0.5);  // 4 classes: it learnt, it did not start there
  for (std::size_t r = 0; r < t.accuracy.size(); ++r) {
    EXPECT_GE(t.accuracy[r], 0.9) << GetParam() << " rank " << r;
    std::printf("%s rank %zu: accuracy %.3f (untrained %.3f)\n", GetParam().c_str(), r,
                t.accuracy[r], t.initial_accuracy);
  }
}
INSTANTIATE_TEST_SUITE_P(Sync, Optimizers, ::testing::Values("ssgd", "sma", "pair_avg", "ada_sgd"));

TEST(Optimizers, NoiseScaleIsMeasuredOnRealGradients) {
  const Trained t = train_inproc("ssgd", 40, 0.05, 1);
  EXPECT_TRUE(t.errors.empty());
  for (double g : t.gns)
    EXPECT_GT(g, 0);
}

}  // namespace
}  // namespace kf

namespace kf {
namespace {

std::string read_file_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The recorder keeps per-peer metrics sparsely: only peers that carried traffic or were probed
// reach peers.csv (a peer named with nothing this step is left out), the totals in steps.csv are
// over every peer, and steps() keeps none of them.
TEST(RunRecorder, KeepsPerPeerMetricsSparselyAndWritesThem) {
  RunRecorder recorder;
  StepRecord r{.rank = 1, .step = 3, .samples = 32, .strategy = "RING", .cluster_size = 4};
  r.begin = TimePoint(std::chrono::milliseconds(10));
  r.compute_end = TimePoint(std::chrono::milliseconds(15));
  r.end = TimePoint(std::chrono::milliseconds(20));
  r.metrics.egress_bps = {{2, 800}, {1, 0}};  // peer 1: bytes in an earlier step, none in this
  r.metrics.ingress_bps = {{0, 100}, {1, 0}};
  r.metrics.latency_seconds = {{3, 0.25}};
  recorder.step_finished(r);

  ASSERT_EQ(recorder.steps().size(), 1u);
  EXPECT_TRUE(recorder.steps()[0].metrics.egress_bps.empty());
  EXPECT_TRUE(recorder.steps()[0].metrics.latency_seconds.empty());
  const auto& peers = recorder.peer_samples().at(0);
  EXPECT_EQ(peers.egress_total_bps, 800);
  EXPECT_EQ(peers.ingress_total_bps, 100);
  EXPECT_EQ(peers.max_latency_seconds, 0.25);
  ASSERT_EQ(peers.peers.size(), 3u);  // peer 1 did nothing
  EXPECT_EQ(peers.peers[0].peer, 0);
  EXPECT_EQ(peers.peers[1].peer, 2);
  EXPECT_EQ(peers.peers[2].peer, 3);

  char dir[] = "/tmp/kf-records-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  recorder.write(dir, nlohmann::json::object());
  EXPECT_EQ(read_file_text(std::string(dir) + "/peers.csv"),
            "rank,step,peer,egress_bps,ingress_bps,latency_s\n"
            "1,3,0,0.0,100.0,-1.000000000\n"
            "1,3,2,800.0,0.0,-1.000000000\n"
            "1,3,3,0.0,0.0,0.250000000\n");
  const std::string steps = read_file_text(std::string(dir) + "/steps.csv");
  EXPECT_NE(steps.find(",800.0,100.0,0.250000000,"), std::string::npos) << steps;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kf
