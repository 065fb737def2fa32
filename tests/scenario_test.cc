// Scenario files: the full schema, defaults, units, and every class of error with its position.
#include "sim/scenario/scenario.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "sim/scenario/profile_file.h"

namespace kf {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using std::chrono::seconds;

const std::string kData = KF_TEST_DATA_DIR "/scenarios/";

// A valid base to append to: 4 workers on one switch.
const std::string kBase = "steps: 10\ntopology: {hosts: 4}\n";

struct Expected {
  std::string file;
  int line;
  int column;
  std::string fragment;
};

// Runs `f`, expecting a ScenarioError at file:line:col whose message contains `fragment`.
template <typename F>
void expect_error(F f, const Expected& e) {
  try {
    f();
    ADD_FAILURE() << "no error; expected " << e.fragment;
  } catch (const ScenarioError& err) {
    EXPECT_EQ(err.file(), e.file) << err.what();
    EXPECT_EQ(err.line(), e.line) << err.what();
    EXPECT_EQ(err.column(), e.column) << err.what();
    EXPECT_NE(std::string(err.what()).find(e.fragment), std::string::npos)
        << err.what() << "\n  lacks: " << e.fragment;
  }
}

void expect_parse_error(const std::string& text, int line, int column,
                        const std::string& fragment) {
  expect_error([&] { parse_scenario(text, "s.yaml"); }, {"s.yaml", line, column, fragment});
}

void expect_set_error(const std::string& text, const std::vector<std::string>& overrides,
                      const std::string& fragment) {
  expect_error([&] { parse_scenario(text, "s.yaml", overrides); }, {"--set", 0, 0, fragment});
}

TEST(Scenario, FullFileSetsEveryField) {
  const Scenario s = load_scenario(kData + "full.yaml");
  EXPECT_EQ(s.file, kData + "full.yaml");
  EXPECT_EQ(s.name, "contention");
  EXPECT_EQ(s.description, "Background traffic on host0's link");
  EXPECT_EQ(s.seed, 7u);
  EXPECT_EQ(s.steps, 50);
  EXPECT_EQ(s.world, WorldKind::ns3);

  const TopologyConfig& t = s.topology;
  EXPECT_EQ(t.kind, TopologyConfig::Kind::star);
  EXPECT_EQ(t.hosts, 4);
  EXPECT_EQ(t.workers_per_host, 2);
  EXPECT_DOUBLE_EQ(t.link.bandwidth_bps, 10e9);
  EXPECT_EQ(t.link.latency, microseconds(25));
  EXPECT_EQ(t.link.mtu, 9000u);
  EXPECT_EQ(t.link.queue_packets, 500u);
  EXPECT_DOUBLE_EQ(t.intra_host.bandwidth_bps, 50e9);
  EXPECT_EQ(t.intra_host.latency, microseconds(2));
  EXPECT_EQ(t.intra_host.mtu, 65000u);
  EXPECT_EQ(t.intra_host.queue_packets, 100u);
  EXPECT_TRUE(t.outside_host);

  EXPECT_EQ(s.workload.model, "vgg16");
  EXPECT_EQ(s.workload.device, "v100");
  EXPECT_EQ(s.workload.batch_per_worker, 16);
  EXPECT_EQ(s.workload.fusion_bytes, 64u << 20);
  EXPECT_FALSE(s.workload.phantom);
  EXPECT_EQ(s.strategy, StrategyName::ring);
  EXPECT_EQ(s.optimizer, "ssgd");
  EXPECT_EQ(s.chunk_bytes, 512u << 10);
  EXPECT_EQ(s.auto_ring_part_bytes, 256u << 10);
  EXPECT_EQ(s.auto_local_ring_part_bytes, 8u << 10);
  EXPECT_EQ(s.auto_pair_doubling_bytes, 16u << 10);
  EXPECT_EQ(s.auto_halving_doubling_bytes, 0u);
  EXPECT_EQ(s.timeout, seconds(90));
  ASSERT_EQ(s.policies.size(), 1u);
  EXPECT_EQ(s.policies[0].name, "adaptive_strategy");
  EXPECT_EQ(s.policies[0].params.size(), 3u);
  EXPECT_EQ(s.elastic.initial_workers, 4);
  EXPECT_EQ(s.elastic.config_latency, std::chrono::milliseconds(2));
  EXPECT_EQ(s.elastic.spawn_delay, seconds(3));
  EXPECT_EQ(s.ping_every, 10);

  ASSERT_EQ(s.events.size(), 5u);
  const auto& c = std::get<ContentionEvent>(s.events[0].what);
  EXPECT_EQ(s.events[0].label, "contention#1 (line 28)");
  EXPECT_EQ(c.from, "host0");
  EXPECT_EQ(c.to, "outside");
  ASSERT_TRUE(c.rate_bps);
  EXPECT_DOUBLE_EQ(*c.rate_bps, 1e9);
  EXPECT_EQ(c.flows, 2);
  EXPECT_EQ(c.start.step, 30);
  EXPECT_FALSE(c.start.time);
  ASSERT_TRUE(c.stop);
  EXPECT_EQ(c.stop->step, 45);

  const auto& st = std::get<StragglerEvent>(s.events[1].what);
  EXPECT_EQ(s.events[1].label, "straggler#1 (line 29)");
  EXPECT_EQ(st.worker, 2);
  EXPECT_DOUBLE_EQ(st.factor, 3);
  EXPECT_EQ(st.start.time, milliseconds(1500));
  EXPECT_FALSE(st.start.step);
  ASSERT_TRUE(st.stop);
  EXPECT_EQ(st.stop->time, milliseconds(2500));

  const auto& l = std::get<LinkEvent>(s.events[2].what);
  EXPECT_EQ(s.events[2].label, "link#1 (line 30)");
  EXPECT_EQ(l.link, "host1-switch");
  EXPECT_EQ(l.bandwidth_bps, 100e6);
  EXPECT_EQ(l.latency, milliseconds(1));
  EXPECT_EQ(l.at.time, seconds(5));

  const auto& f = std::get<FailEvent>(s.events[3].what);
  EXPECT_EQ(s.events[3].label, "fail#1 (line 31)");
  EXPECT_EQ(f.worker, 7);
  EXPECT_EQ(f.at.step, 20);

  const auto& c2 = std::get<ContentionEvent>(s.events[4].what);
  EXPECT_EQ(s.events[4].label, "contention#2 (line 32)");
  EXPECT_EQ(c2.from, "w1");
  EXPECT_EQ(c2.to, "host3");
  EXPECT_FALSE(c2.rate_bps);
  EXPECT_EQ(c2.flows, 1);
  EXPECT_EQ(c2.start.time, milliseconds(10));
  EXPECT_FALSE(c2.stop);
}

TEST(Scenario, Defaults) {
  const Scenario s = parse_scenario("steps: 3\ntopology: {hosts: 2}\n", "some/dir/quick.yaml");
  const Scenario d;
  EXPECT_EQ(s.file, "some/dir/quick.yaml");
  EXPECT_EQ(s.name, "quick");  // the file stem
  EXPECT_EQ(s.description, "");
  EXPECT_EQ(s.seed, 1u);
  EXPECT_EQ(s.steps, 3);
  EXPECT_EQ(s.world, WorldKind::ns3);
  EXPECT_EQ(s.topology.kind, TopologyConfig::Kind::star);
  EXPECT_EQ(s.topology.hosts, 2);
  EXPECT_EQ(s.topology.workers_per_host, 1);
  EXPECT_DOUBLE_EQ(s.topology.link.bandwidth_bps, 1e9);
  EXPECT_EQ(s.topology.link.latency, microseconds(5));
  EXPECT_EQ(s.topology.link.mtu, 1500u);
  EXPECT_EQ(s.topology.link.queue_packets, 1000u);
  EXPECT_DOUBLE_EQ(s.topology.intra_host.bandwidth_bps, 100e9);
  EXPECT_EQ(s.topology.intra_host.latency, microseconds(1));
  EXPECT_EQ(s.topology.intra_host.mtu, 65000u);
  EXPECT_EQ(s.topology.intra_host.queue_packets, 1000u);
  EXPECT_FALSE(s.topology.outside_host);
  EXPECT_EQ(s.workload.model, "resnet50");
  EXPECT_EQ(s.workload.device, "k80");
  EXPECT_EQ(s.workload.batch_per_worker, 32);
  EXPECT_EQ(s.workload.fusion_bytes, 0u);
  EXPECT_TRUE(s.workload.phantom);
  EXPECT_EQ(s.strategy, StrategyName::binary_tree_star);
  EXPECT_EQ(s.optimizer, "ssgd");
  EXPECT_EQ(s.chunk_bytes, d.chunk_bytes);
  EXPECT_EQ(s.chunk_bytes, 1u << 20);
  EXPECT_EQ(s.auto_ring_part_bytes, 128u << 10);
  EXPECT_EQ(s.auto_local_ring_part_bytes, 32u << 10);
  EXPECT_EQ(s.auto_doubling_bytes, 0u);
  EXPECT_EQ(s.auto_pair_doubling_bytes, 64u << 10);
  EXPECT_EQ(s.auto_halving_doubling_bytes, 4u << 20);
  EXPECT_EQ(s.timeout, seconds(60));
  EXPECT_TRUE(s.policies.empty());
  EXPECT_TRUE(s.events.empty());

  // A partial link keeps the other defaults; "policy: none", "fusion: 0", an empty list.
  const Scenario p = parse_scenario(
      "steps: 1\ntopology: {hosts: 1, link: {latency: 1ms}}\npolicy: none\nworkload: {fusion: 0}\n"
      "events: []\n",
      "p.yaml");
  EXPECT_EQ(p.topology.link.latency, milliseconds(1));
  EXPECT_DOUBLE_EQ(p.topology.link.bandwidth_bps, 1e9);
  EXPECT_EQ(p.topology.link.mtu, 1500u);
  EXPECT_EQ(p.workload.fusion_bytes, 0u);
}

// workload.tensors / workload.compute: a bare allreduce benchmark (artifact/fidelity.sh).
TEST(Scenario, SyntheticWorkload) {
  const Scenario s =
      parse_scenario(kBase + "workload: {tensors: [1MiB, 64KiB], compute: 0s}\n", "s.yaml");
  EXPECT_EQ(s.workload.tensor_bytes, (std::vector<std::size_t>{1u << 20, 64u << 10}));
  ASSERT_TRUE(s.workload.compute.has_value());
  EXPECT_EQ(s.workload.compute->count(), 0);
  const Scenario d = parse_scenario(kBase, "s.yaml");
  EXPECT_TRUE(d.workload.tensor_bytes.empty());
  EXPECT_FALSE(d.workload.compute.has_value());
  expect_parse_error(kBase + "workload: {tensors: 64MiB}\n", 3, 21,
                     "workload.tensors: expected a non-empty list of sizes");
  expect_parse_error(kBase + "workload: {tensors: [1MiB, 6B]}\n", 3, 28,
                     "workload.tensors[1]: must be a positive multiple of 4 bytes");
  expect_parse_error(kBase + "workload: {tensors: [64]}\n", 3, 22,
                     "workload.tensors[0]: '64' has no unit");
  expect_parse_error(kBase + "workload: {compute: 5}\n", 3, 21,
                     "workload.compute: '5' has no unit");
}

TEST(ScenarioErrors, UnknownKeys) {
  expect_parse_error(kBase + "stepz: 4\n", 3, 1, "unknown key 'stepz' at top level (known: name,");
  expect_error(
      [] { load_scenario(kData + "bad_unknown_key.yaml"); },
      {kData + "bad_unknown_key.yaml", 5, 5,
       "unknown key 'bandwdith' in topology.link (known: bandwidth, latency, mtu, queue, burst, "
       "line_rate)"});
  // The whole what(): FILE:LINE:COL: message.
  try {
    parse_scenario("steps: 1\ntopology:\n  hosts: 4\n  link: {bandwdith: 1Gbps}\n", "x.yaml");
    FAIL();
  } catch (const ScenarioError& e) {
    EXPECT_STREQ(e.what(),
                 "x.yaml:4:10: unknown key 'bandwdith' in topology.link (known: bandwidth, "
                 "latency, mtu, queue, burst, line_rate)");
  }
  expect_parse_error(kBase + "steps: 4\n", 3, 1, "duplicate key 'steps' at top level");
  expect_parse_error(kBase + "workload: {modle: vgg16}\n", 3, 12,
                     "unknown key 'modle' in workload (known: model, device,");
  expect_parse_error(kBase + "events:\n  - fail: {worker: 1, at: {stp: 3}}\n", 4, 28,
                     "unknown key 'stp' in events[0].fail.at (known: step)");
}

TEST(ScenarioErrors, Units) {
  const std::string text = "steps: 1\ntopology:\n  hosts: 2\n  link: {bandwidth: 1G}\n";
  try {
    parse_scenario(text, "u.yaml");
    FAIL();
  } catch (const ScenarioError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(
                  "u.yaml:4:21: topology.link.bandwidth: '1G' has no unit; write e.g. 1Gbps, "
                  "100Mbps, 10Gbit/s",
                  0),
              0u)
        << e.what();
  }
  expect_parse_error("steps: 1\ntopology:\n  hosts: 2\n  link: {bandwidth: -1Gbps}\n", 4, 21,
                     "topology.link.bandwidth: must be positive, got -1Gbps");
  expect_parse_error(kBase + "timeout: 30\n", 3, 10, "timeout: '30' has no unit");
  expect_parse_error(kBase + "timeout: 0s\n", 3, 10, "timeout: must be positive, got 0s");
  expect_parse_error(kBase + "chunk: 0B\n", 3, 8, "chunk: must be positive, got 0B");
  expect_parse_error(kBase + "chunk: 1M\n", 3, 8, "chunk: '1M' has no unit");
  expect_parse_error(kBase + "auto_ring_part: 64k\n", 3, 17, "auto_ring_part: '64k' has no unit");
  expect_parse_error(kBase + "auto_doubling: 4k\n", 3, 16, "auto_doubling: '4k' has no unit");
  expect_parse_error(kBase + "auto_pair_doubling: -1KiB\n", 3, 21, "auto_pair_doubling: ");
  expect_parse_error(kBase + "auto_halving_doubling: 4M\n", 3, 24,
                     "auto_halving_doubling: '4M' has no unit");
  expect_parse_error(kBase + "workload: {fusion: 64}\n", 3, 20,
                     "workload.fusion: '64' has no unit");
  expect_parse_error("steps: 1\ntopology: {hosts: 2, link: {mtu: 100}}\n", 2, 34,
                     "topology.link.mtu: must be between 576 and 65535, got 100");
  expect_parse_error(kBase + "events:\n  - fail: {worker: 1, at: 20}\n", 4, 27,
                     "events[0].fail.at: '20' has no unit; write e.g. 5us");
  expect_parse_error(kBase + "events:\n  - fail: {worker: 1, at: {step: -2}}\n", 4, 34,
                     "events[0].fail.at.step: must be at least 0, got -2");
}

TEST(Scenario, ShapedLinkIsATokenBucketOverAFasterWire) {
  const Scenario s = parse_scenario(
      "steps: 1\ntopology:\n  hosts: 2\n"
      "  link: {bandwidth: 1Gbps, mtu: 1500, burst: 256KiB, line_rate: 40Gbps}\n",
      "s.yaml");
  EXPECT_TRUE(s.topology.link.shaped());
  EXPECT_EQ(s.topology.link.burst_bytes, 256u << 10);
  EXPECT_DOUBLE_EQ(s.topology.link.line_rate_bps, 40e9);
  EXPECT_DOUBLE_EQ(s.topology.link.bandwidth_bps, 1e9);
  EXPECT_FALSE(parse_scenario("steps: 1\ntopology: {hosts: 2}\n", "s.yaml").topology.link.shaped());
}

TEST(ScenarioErrors, ShapedLinks) {
  expect_parse_error("steps: 1\ntopology:\n  hosts: 2\n  link: {burst: 256KiB}\n", 4, 9,
                     "topology.link: a shaped link needs both 'burst' and 'line_rate'");
  expect_parse_error("steps: 1\ntopology:\n  hosts: 2\n  link: {line_rate: 10Gbps}\n", 4, 9,
                     "topology.link: a shaped link needs both 'burst' and 'line_rate'");
  expect_parse_error(
      "steps: 1\ntopology:\n  hosts: 2\n  link: {bandwidth: 10Gbps, burst: 1MiB, line_rate: "
      "1Gbps}\n",
      4, 53, "topology.link.line_rate: the wire under a shaper must be at least as fast");
  expect_parse_error(
      "steps: 1\ntopology:\n  hosts: 2\n  link: {mtu: 9000, burst: 4KiB, line_rate: 10Gbps}\n", 4,
      28, "topology.link.burst: burst 4096 B is less than one packet (mtu 9000)");
  expect_parse_error("steps: 1\ntopology:\n  hosts: 2\n  link: {burst: 4GiB, line_rate: 10Gbps}\n",
                     4, 17, "topology.link.burst: burst must be below 4 GiB");
}

TEST(ScenarioErrors, WrongTypes) {
  expect_parse_error("steps: ten\ntopology: {hosts: 1}\n", 1, 8,
                     "steps: expected an integer, got 'ten'");
  expect_parse_error("steps: 0\ntopology: {hosts: 1}\n", 1, 8, "steps: must be at least 1, got 0");
  expect_parse_error("steps: [1]\ntopology: {hosts: 1}\n", 1, 8,
                     "steps: expected an integer, got a list");
  expect_parse_error("steps: 1\ntopology: 4\n", 2, 11, "topology: expected a map, got '4'");
  expect_parse_error("steps: 1\ntopology: {hosts: 2, link: 1Gbps}\n", 2, 28,
                     "topology.link: expected a map, got '1Gbps'");
  expect_parse_error(kBase + "name: {a: 1}\n", 3, 7, "name: expected a string, got a map");
  expect_parse_error(kBase + "description:\n", 3, 1, "description: expected a string, got nothing");
  expect_parse_error(kBase + "workload: {phantom: maybe}\n", 3, 21,
                     "workload.phantom: expected true or false, got 'maybe'");
  expect_parse_error(kBase + "seed: -1\n", 3, 7, "seed: must be at least 0, got -1");
  expect_parse_error(kBase + "events: {fail: 1}\n", 3, 9,
                     "events: expected a list of events, got a map");
  expect_parse_error("- 1\n- 2\n", 1, 1, "expected a map of scenario settings");
  expect_parse_error("", 1, 1,
                     "expected a map of scenario settings (steps, topology, ...), got nothing");
}

TEST(ScenarioErrors, MissingRequiredKeyPointsAtParent) {
  expect_parse_error("# comment\nseed: 3\ntopology: {hosts: 1}\n", 2, 1,
                     "missing required key 'steps'");
  expect_parse_error("steps: 1\ntopology:\n  workers_per_host: 2\n", 3, 3,
                     "topology: missing required key 'hosts'");
  expect_parse_error(kBase + "events:\n  - straggler: {factor: 2, start: 1s}\n", 4, 16,
                     "events[0].straggler: missing required key 'worker'");
}

TEST(Scenario, Bucketing) {
  EXPECT_EQ(parse_scenario(kBase, "s.yaml").workload.bucketing.mode, Bucketing::none);
  const Scenario k = parse_scenario(kBase + "workload: {bucketing: kungfu}\n", "s.yaml");
  EXPECT_EQ(k.workload.bucketing.mode, Bucketing::kungfu);
  const Scenario d = parse_scenario(kBase + "workload: {bucketing: ddp}\n", "s.yaml");
  EXPECT_EQ(d.workload.bucketing.mode, Bucketing::ddp);
  EXPECT_EQ(d.workload.bucketing.bucket_cap, 25u << 20);  // PyTorch's defaults
  EXPECT_EQ(d.workload.bucketing.first_bucket, 1u << 20);
  const Scenario d2 = parse_scenario(
      kBase + "workload: {bucketing: {name: ddp, bucket_cap: 50MiB, first_bucket: 2MiB}}\n",
      "s.yaml");
  EXPECT_EQ(d2.workload.bucketing.bucket_cap, 50u << 20);
  EXPECT_EQ(d2.workload.bucketing.first_bucket, 2u << 20);
  const Scenario h = parse_scenario(
      kBase + "workload: {bucketing: {name: horovod, fusion_bytes: 32MiB, cycle: 1ms}}\n",
      "s.yaml");
  EXPECT_EQ(h.workload.bucketing.mode, Bucketing::horovod);
  EXPECT_EQ(h.workload.bucketing.fusion_bytes, 32u << 20);
  EXPECT_EQ(h.workload.bucketing.cycle, std::chrono::milliseconds(1));
  const Scenario h2 = parse_scenario(kBase + "workload: {bucketing: horovod}\n", "s.yaml");
  EXPECT_EQ(h2.workload.bucketing.fusion_bytes, 64u << 20);  // Horovod's defaults
  EXPECT_EQ(h2.workload.bucketing.cycle, std::chrono::milliseconds(5));
  EXPECT_EQ(parse_scenario(kBase, "s.yaml", {"workload.bucketing=ddp"}).workload.bucketing.mode,
            Bucketing::ddp);
}

TEST(ScenarioErrors, Bucketing) {
  expect_parse_error(kBase + "workload: {bucketing: byteps}\n", 3, 23,
                     "workload.bucketing: unknown bucketing 'byteps' (known: none, kungfu, ddp, "
                     "horovod)");
  expect_parse_error(kBase + "workload: {bucketing: {name: ddpp}}\n", 3, 30,
                     "workload.bucketing.name: unknown bucketing 'ddpp'");
  expect_parse_error(kBase + "workload: {bucketing: {bucket_cap: 1MiB}}\n", 3, 23,
                     "missing required key 'name'");
  expect_parse_error(kBase + "workload: {bucketing: {name: ddp, cycle: 1ms}}\n", 3, 35,
                     "workload.bucketing.cycle: a parameter of bucketing horovod, not of ddp");
  expect_parse_error(kBase + "workload: {bucketing: {name: kungfu, bucket_cap: 1MiB}}\n", 3, 38,
                     "workload.bucketing.bucket_cap: a parameter of bucketing ddp, not of kungfu");
  expect_parse_error(kBase + "workload: {bucketing: {name: ddp, bucket_cap: 0}}\n", 3, 47,
                     "workload.bucketing.bucket_cap: must be positive");
  expect_parse_error(kBase + "workload: {bucketing: {name: ddp, first_bucket: 25}}\n", 3, 49,
                     "workload.bucketing.first_bucket: '25' has no unit");
  expect_parse_error(kBase + "workload: {bucketing: {name: horovod, cycle: 0s}}\n", 3, 46,
                     "workload.bucketing.cycle: must be positive");
  expect_parse_error(kBase + "workload: {bucketing: {name: horovod, buffer: 1MiB}}\n", 3, 39,
                     "unknown key 'buffer' in workload.bucketing");
  expect_parse_error(kBase + "workload: {bucketing: [ddp]}\n", 3, 23,
                     "workload.bucketing: expected a bucketing name (none, kungfu, ddp, horovod)");
  expect_parse_error(kBase + "workload: {fusion: 64MiB, bucketing: ddp}\n", 3, 12,
                     "workload.fusion: only with bucketing none");
  expect_parse_error(kBase + "workload: {numeric: {}, bucketing: kungfu}\n", 3, 36,
                     "workload.bucketing: bucketing kungfu overlaps");
  // none keeps workload.fusion, as before bucketing existed.
  EXPECT_EQ(parse_scenario(kBase + "workload: {fusion: 64MiB, bucketing: none}\n", "s.yaml")
                .workload.fusion_bytes,
            64u << 20);
}

TEST(Scenario, ProfileFile) {
  const std::string dir = std::string(KF_TEST_DATA_DIR) + "/profiles/";
  const Scenario s = parse_scenario(
      kBase + "workload: {profile: toy3.yaml, device: v100, bucketing: kungfu}\n", dir + "s.yaml");
  ASSERT_NE(s.workload.profile, nullptr);
  EXPECT_EQ(s.workload.model, "toy3");
  const ModelProfile& p = workload_model(s.workload);
  ASSERT_EQ(p.tensors.size(), 3u);
  EXPECT_EQ(p.tensors[1].name, "tensor1");
  EXPECT_EQ(p.tensors[1].count, 2097152u);
  EXPECT_EQ(p.forward_gflops, 4);
  EXPECT_EQ(compute_time_per_sample(p, "v100"), std::chrono::milliseconds(12));
  // FLOPs on another device: scaled as any model's (ResNet-50's 8.2 GFLOPs take 1/51.9 s on a k80).
  EXPECT_GT(compute_time_per_sample(p, "k80").count(), 0);
  expect_error([&] { parse_scenario(kBase + "workload: {profile: nope.yaml}\n", dir + "s.yaml"); },
               {dir + "s.yaml", 3, 21, "workload.profile: no profile file"});
  expect_error(
      [&] {
        parse_scenario(kBase + "workload: {profile: toy3.yaml, model: vgg16}\n", dir + "s.yaml");
      },
      {dir + "s.yaml", 3, 32, "workload.model: give either profile or model, not both"});
}

TEST(ScenarioErrors, ProfileFiles) {
  const auto expect_profile_error = [](const std::string& text, int line, int column,
                                       const std::string& fragment) {
    expect_error([&] { parse_profile(text, "p.yaml"); }, {"p.yaml", line, column, fragment});
  };
  const std::string head = "name: m\nlayers:\n";
  EXPECT_EQ(parse_profile(head + "  - {name: a, parameters: 10, forward_gflops: 0.5}\n", "p.yaml")
                .parameter_count(),
            10u);
  // A missing field.
  expect_profile_error(head + "  - {name: a, forward_gflops: 1}\n", 3, 5,
                       "layers[0]: missing required key 'parameters'");
  expect_profile_error("layers: [{name: a, parameters: 1, forward_gflops: 1}]\n", 1, 1,
                       "missing required key 'name'");
  expect_profile_error(head + "  - {name: a, parameters: 10}\n", 3, 5,
                       "layers[0]: layer 'a' gives neither forward_gflops nor times");
  expect_profile_error(head + "  - {name: a, parameters: 1, times: {v100: {forward: 1ms}}}\n", 3,
                       44, "layers[0].times.v100: missing required key 'backward'");
  // A negative time or FLOPs.
  expect_profile_error(
      head + "  - {name: a, parameters: 1, times: {v100: {forward: -1ms, backward: 1ms}}}\n", 3, 54,
      "layers[0].times.v100.forward: must not be negative");
  expect_profile_error(head + "  - {name: a, parameters: 1, forward_gflops: -2}\n", 3, 46,
                       "layers[0].forward_gflops: must not be negative, got -2");
  // A layer of zero parameters.
  expect_profile_error(head + "  - {name: a, parameters: 0, forward_gflops: 1}\n", 3, 27,
                       "layers[0].parameters: must be at least 1, got 0");
  // Layers that disagree.
  expect_profile_error(head +
                           "  - {name: a, parameters: 1, forward_gflops: 1}\n"
                           "  - {name: a, parameters: 1, forward_gflops: 1}\n",
                       4, 12, "layers[1].name: duplicate layer 'a'");
  expect_profile_error(
      head +
          "  - {name: a, parameters: 1, forward_gflops: 1}\n"
          "  - {name: b, parameters: 1, times: {k80: {forward: 1ms, backward: 1ms}}}\n",
      4, 5, "forward_gflops is given on every layer before this one");
  expect_profile_error(
      head +
          "  - {name: a, parameters: 1, times: {k80: {forward: 1ms, backward: 1ms}}}\n"
          "  - {name: b, parameters: 1, times: {v100: {forward: 1ms, backward: 1ms}}}\n",
      4, 37, "layer 'b' gives times for other devices than the layers before it (k80)");
  expect_profile_error("name: m\nlayers: []\n", 2, 9, "layers: expected a non-empty list");
  // A layer's tensors.
  const ModelProfile t =
      parse_profile(head +
                        "  - {name: a, forward_gflops: 1, tensors: [{name: a/w, parameters: 6},\n"
                        "                                       {name: a/b, parameters: 2}]}\n"
                        "  - {name: b, parameters: 3, forward_gflops: 1}\n",
                    "p.yaml");
  ASSERT_EQ(t.tensors.size(), 3u);
  EXPECT_EQ(t.tensors[1].name, "a/b");
  EXPECT_EQ(t.layers[0].tensor_count, 2u);
  EXPECT_EQ(t.layers[1].first_tensor, 2u);
  EXPECT_EQ(t.tensors[2].name, "b");
  expect_profile_error(
      head +
          "  - {name: a, parameters: 1, forward_gflops: 1, tensors: [{name: w, parameters: 1}]}\n",
      3, 15, "layers[0].parameters: give either parameters or tensors, not both");
  expect_profile_error(
      head + "  - {name: a, forward_gflops: 1, tensors: []}\n", 3, 43,
      "layers[0].tensors: expected a non-empty list of {name: NAME, parameters: N}");
  expect_profile_error(
      head + "  - {name: a, forward_gflops: 1, tensors: [{name: w, parameters: 0}]}\n", 3, 66,
      "layers[0].tensors[0].parameters: must be at least 1, got 0");
  expect_profile_error(head +
                           "  - {name: a, forward_gflops: 1, tensors: [{name: b, parameters: 1}]}\n"
                           "  - {name: b, parameters: 1, forward_gflops: 1}\n",
                       4, 12, "layers[1].name: duplicate tensor 'b'");
  expect_profile_error(
      head + "  - {name: a, forward_gflops: 1, tensors: [{name: w, parameters: 1, bias: 2}]}\n", 3,
      69, "unknown key 'bias' in layers[0].tensors[0]");
  expect_profile_error(head + "  - {name: a, parameters: 1, forward_gflops: 1, flops: 2}\n", 3, 49,
                       "unknown key 'flops' in layers[0]");
}

TEST(ScenarioErrors, NamedValues) {
  EXPECT_EQ(parse_scenario(kBase + "world: flow\n", "s.yaml").world, WorldKind::flow);
  expect_parse_error(kBase + "world: ns2\n", 3, 8, "world: unknown world 'ns2' (known: ns3, flow)");
  EXPECT_EQ(parse_scenario(kBase, "s.yaml").tcp_recovery, LossRecovery::rack);  // Linux's default
  EXPECT_EQ(parse_scenario(kBase + "tcp_recovery: rfc6675\n", "s.yaml").tcp_recovery,
            LossRecovery::rfc6675);
  expect_parse_error(kBase + "tcp_recovery: tlp\n", 3, 15,
                     "tcp_recovery: unknown TCP loss recovery 'tlp' (known: rack, rfc6675)");
  expect_parse_error(kBase + "strategy: STAAR\n", 3, 11,
                     "strategy: unknown strategy 'STAAR' (known: STAR, MULTI_STAR, TREE,");
  EXPECT_EQ(parse_scenario(kBase + "strategy: multi_binary_tree_star\n", "s.yaml").strategy,
            StrategyName::multi_binary_tree_star);
  expect_parse_error(kBase + "optimizer: adam\n", 3, 12,
                     "optimizer: unknown optimizer 'adam' (known: ssgd, sma, pair_avg, ada_sgd)");
  expect_parse_error(kBase + "optimizer: sma\n", 3, 12,
                     "optimizer: 'sma' needs a real model: set workload.numeric");
  expect_parse_error(kBase + "workload: {numeric: {model: cnn}}\n", 3, 29,
                     "workload.numeric.model: unknown numeric model 'cnn' (known: softmax, mlp)");
  expect_parse_error(kBase + "workload: {numeric: {dataset: mnist}}\n", 3, 21,
                     "dataset mnist needs `path`");
  expect_parse_error(kBase + "workload: {numeric: {target_accuracy: 2}}\n", 3, 39,
                     "workload.numeric.target_accuracy: must be in [0, 1]");
  expect_parse_error(
      kBase + "policy: greedy\n", 3, 9,
      "policy: unknown policy 'greedy' (known: adaptive_batch_size, adaptive_strategy,");
  expect_parse_error(kBase + "policy: {name: adaptive_strategy, threshold: 2}\n", 3, 9,
                     "policy: policy adaptive_strategy: interference: threshold must be in (0, 1)");
  expect_parse_error(
      kBase + "policy: [none, {name: adaptive_strategy, treshold: 0.5}]\n", 3, 16,
      "policy[1]: policy adaptive_strategy: unknown parameter 'treshold' (accepted:");
  expect_parse_error(kBase + "policy: {name: scheduled_resize, schedule: '5:x'}\n", 3, 9,
                     "'5:x' is not step:size");
  expect_parse_error(kBase + "policy: {threshold: 2}\n", 3, 9, "missing required key 'name'");
  expect_parse_error(kBase + "policy: {name: adaptive_strategy, alternative: mts}\n", 3, 9,
                     "parameter 'alternative': 'mts' is not star, mst or a strategy name");
  expect_parse_error(kBase + "elastic: {initial_workers: 0}\n", 3, 28,
                     "elastic.initial_workers: must be between 1 and");
  expect_parse_error(kBase + "elastic: {spawn: 1s}\n", 3, 11, "unknown key 'spawn' in elastic");
  expect_parse_error("steps: 1\ntopology: {hosts: 1, host_qdisc: red}\n", 2, 34,
                     "topology.host_qdisc: unknown qdisc 'red' (known: fq_codel, none, tsq)");
  {
    const Scenario p =
        parse_scenario("steps: 1\ntopology: {hosts: 2, host_qdisc: tsq}\n", "s.yaml");
    EXPECT_EQ(p.topology.host_qdisc, HostQdisc::tsq);
  }
  {
    // A Linux host's queue by default; none only when asked for.
    EXPECT_EQ(parse_scenario("steps: 1\ntopology: {hosts: 2}\n", "s.yaml").topology.host_qdisc,
              HostQdisc::tsq);
    const Scenario p =
        parse_scenario("steps: 1\ntopology: {hosts: 2, host_qdisc: none}\n", "s.yaml");
    EXPECT_EQ(p.topology.host_qdisc, HostQdisc::none);
  }
  {
    const Scenario p = parse_scenario(
        "steps: 2\ntopology: {hosts: 4, host_qdisc: fq_codel}\nelastic: {initial_workers: 2, "
        "spawn_delay: 500ms}\nmonitoring: {ping_every: 5}\npolicy:\n  - adaptive_strategy\n"
        "  - {name: scheduled_resize, schedule: \"3:4,6:2\"}\n",
        "s.yaml");
    ASSERT_EQ(p.policies.size(), 2u);
    EXPECT_EQ(p.policies[0].name, "adaptive_strategy");
    EXPECT_EQ(p.policies[1].params.at(0).second, "3:4,6:2");
    EXPECT_EQ(p.elastic.initial_workers, 2);
    EXPECT_EQ(p.elastic.spawn_delay, std::chrono::milliseconds(500));
    EXPECT_EQ(p.ping_every, 5);
    EXPECT_EQ(p.topology.host_qdisc, HostQdisc::fq_codel);
  }
  EXPECT_EQ(parse_scenario(kBase + "tcp_samples: 100ms\n", "s.yaml").tcp_samples,
            std::chrono::milliseconds(100));
  EXPECT_EQ(parse_scenario(kBase, "s.yaml").tcp_samples.count(), 0);  // off by default
  expect_parse_error(kBase + "tcp_samples: 10us\n", 3, 14,
                     "tcp_samples: must be 0 (off) or at least 1ms, got 10us");
  expect_parse_error(kBase + "workload: {model: resnet51}\n", 3, 19,
                     "workload.model: unknown model 'resnet51'");
  expect_parse_error(kBase + "workload: {device: tpu}\n", 3, 20,
                     "workload.device: unknown device 'tpu'");
  expect_parse_error(kBase + "topology: {kind: ring}\n", 3, 1, "duplicate key 'topology'");
  expect_parse_error("steps: 1\ntopology: {kind: ring, hosts: 2}\n", 2, 18,
                     "topology.kind: unknown kind 'ring' (known: star, leaf-spine)");
}

TEST(ScenarioErrors, Workers) {
  expect_parse_error(kBase + "events:\n  - straggler: {worker: 9, factor: 3, start: {step: 1}}\n",
                     4, 25,
                     "events[0].straggler.worker: worker 9 does not exist (4 workers: 0..3)");
  expect_parse_error(kBase + "events:\n  - fail: {worker: -1, at: 1s}\n", 4, 20,
                     "events[0].fail.worker: worker -1 does not exist (4 workers: 0..3)");
  expect_parse_error(kBase + "events:\n  - straggler: {worker: 1, factor: 0, start: 1s}\n", 4, 36,
                     "events[0].straggler.factor: must be positive, got 0");
  // Workers counted across hosts: 4 hosts x 2.
  EXPECT_NO_THROW(parse_scenario(
      "steps: 1\ntopology: {hosts: 4, workers_per_host: 2}\nevents: [fail: {worker: 7, at: 1s}]\n",
      "s.yaml"));
}

TEST(ScenarioErrors, NodesAndLinks) {
  expect_parse_error(
      kBase + "events:\n  - contention: {from: w9, to: outside, start: 1s}\n", 4, 24,
      "events[0].contention.from: no node 'w9' (nodes: w0, w1, w2, w3, switch, outside)");
  expect_parse_error(kBase + "events:\n  - contention: {from: w0, to: w0, start: 1s}\n", 4, 32,
                     "events[0].contention.to: same node as from ('w0')");
  expect_parse_error(kBase + "events:\n  - link: {link: w1-w2, latency: 1ms, at: 1s}\n", 4, 18,
                     "events[0].link.link: no link 'w1-w2' (links: w0-switch, w1-switch,");
  expect_parse_error(kBase + "events:\n  - link: {link: w1-switch, at: 1s}\n", 4, 11,
                     "events[0].link: give bandwidth and/or latency");
  // host nodes exist only with several workers per host.
  expect_parse_error(kBase + "events:\n  - contention: {from: host0, to: switch, start: 1s}\n", 4,
                     24, "no node 'host0'");
  // Long lists are shortened.
  expect_parse_error(
      "steps: 1\ntopology: {hosts: 10, workers_per_host: 2}\n"
      "events: [contention: {from: x, to: switch, start: 1s}]\n",
      3, 29, "no node 'x' (nodes: w0..w19, host0..host9, switch, outside)");
}

TEST(ScenarioErrors, Events) {
  expect_parse_error(
      kBase + "events:\n  - crash: {worker: 1, at: 1s}\n", 4, 5,
      "events[0]: unknown event type 'crash' (known: contention, straggler, link, fail)");
  expect_parse_error(
      kBase + "events:\n  - fail: {worker: 1, at: 1s}\n    straggler: {worker: 1}\n", 4, 5,
      "events[0]: an event is a map with exactly one key naming its type (contention, straggler, "
      "link, fail), got 2 keys: 'fail', 'straggler'");
  expect_parse_error(kBase + "events:\n  - fail\n", 4, 5,
                     "events[0]: expected a map with one key naming the event type");
  expect_parse_error(kBase + "events:\n  - {}\n", 4, 5, "got 0 keys");
  // Stop not after start: steps, times; equal is not after.
  expect_parse_error(
      kBase + "events:\n  - straggler: {worker: 1, factor: 2, start: {step: 9}, stop: {step: 3}}\n",
      4, 63, "events[0].straggler.stop: must be after start (step 3 is not after step 9)");
  expect_parse_error(
      kBase + "events:\n  - contention: {from: w0, to: w1, start: 2s, stop: 1500ms}\n", 4, 53,
      "events[0].contention.stop: must be after start (1.5s is not after 2s)");
  expect_parse_error(
      kBase + "events:\n  - straggler: {worker: 1, factor: 2, start: {step: 4}, stop: {step: 4}}\n",
      4, 63, "must be after start");
  // Mixed kinds are not compared.
  EXPECT_NO_THROW(parse_scenario(
      kBase + "events:\n  - straggler: {worker: 1, factor: 2, start: 5s, stop: {step: 1}}\n",
      "s.yaml"));
}

TEST(Scenario, OutsideHost) {
  EXPECT_FALSE(parse_scenario(kBase + "events: [contention: {from: w0, to: w1, start: 0s}]\n", "s")
                   .topology.outside_host);
  EXPECT_TRUE(
      parse_scenario(kBase + "events: [contention: {from: outside, to: w1, start: 0s}]\n", "s")
          .topology.outside_host);
  EXPECT_TRUE(parse_scenario(
                  kBase + "events: [link: {link: switch-outside, bandwidth: 1Mbps, at: 0s}]\n", "s")
                  .topology.outside_host);
  // "outside-leaf0" is not a star link.
  expect_parse_error(kBase + "events: [link: {link: outside-leaf0, latency: 1ms, at: 0s}]\n", 3, 23,
                     "no link 'outside-leaf0'");
}

TEST(Scenario, LeafSpine) {
  const Scenario s = load_scenario(kData + "leaf_spine.yaml");
  const TopologyConfig& t = s.topology;
  EXPECT_EQ(t.kind, TopologyConfig::Kind::leaf_spine);
  EXPECT_EQ(t.leaves, 2);
  EXPECT_EQ(t.spines, 2);
  EXPECT_EQ(t.hosts_per_leaf, 4);
  EXPECT_DOUBLE_EQ(t.link.bandwidth_bps, 10e9);
  // 4 hosts x 10Gbps / (2 spines x 2).
  EXPECT_DOUBLE_EQ(t.uplink.bandwidth_bps, 10e9);
  EXPECT_EQ(t.uplink.latency, microseconds(2));
  EXPECT_EQ(t.uplink.mtu, 1500u);
  EXPECT_TRUE(t.outside_host);  // named by its link "outside-leaf0"
  ASSERT_EQ(s.events.size(), 2u);
  EXPECT_EQ(std::get<ContentionEvent>(s.events[1].what).to, "spine1");

  const std::string ls = "steps: 1\ntopology:\n  kind: leaf-spine\n";
  expect_parse_error(ls + "  hosts: 4\n  leaves: 1\n  spines: 1\n  hosts_per_leaf: 1\n", 4, 3,
                     "topology.hosts: not for kind leaf-spine; give leaves and hosts_per_leaf");
  expect_parse_error(ls + "  spines: 1\n  hosts_per_leaf: 1\n", 3, 3,
                     "topology: missing required key 'leaves'");
  expect_parse_error("steps: 1\ntopology: {hosts: 2, spines: 2}\n", 2, 22,
                     "topology.spines: only for kind leaf-spine (this topology is a star)");
  expect_parse_error(ls + "  leaves: 1\n  spines: 1\n  hosts_per_leaf: 2\n  uplink: {bandwidth: "
                          "1Gbps}\n  oversubscription: 2\n",
                     8, 3,
                     "topology.oversubscription: give either oversubscription or uplink.bandwidth");
  expect_parse_error(ls + "  leaves: 1\n  spines: 1\n  hosts_per_leaf: 2\n  oversubscription: 0\n",
                     7, 21, "topology.oversubscription: must be positive, got 0");
  expect_parse_error(
      ls + "  leaves: 2\n  spines: 3\n  hosts_per_leaf: 2\nevents: [fail: {worker: 4, at: 0s}]\n",
      7, 25, "worker 4 does not exist (4 workers: 0..3)");
  expect_parse_error(ls + "  leaves: 2\n  spines: 3\n  hosts_per_leaf: 2\n"
                          "events: [contention: {from: switch, to: w0, start: 0s}]\n",
                     7, 29,
                     "no node 'switch' (nodes: w0, w1, w2, w3, leaf0, leaf1, spine0, spine1, "
                     "spine2, outside)");
  // Without oversubscription or uplink.bandwidth the uplink has the link defaults.
  const Scenario d =
      parse_scenario(ls + "  leaves: 1\n  spines: 1\n  hosts_per_leaf: 2\n", "d.yaml");
  EXPECT_DOUBLE_EQ(d.topology.uplink.bandwidth_bps, 1e9);
}

TEST(ScenarioErrors, MalformedYaml) {
  expect_error([] { load_scenario(kData + "bad_malformed.yaml"); },
               {kData + "bad_malformed.yaml", 3, 7, "invalid YAML:"});
  expect_parse_error("steps: 1\n  topology: 2\n", 2, 11, "invalid YAML:");
  expect_error([] { load_scenario(kData + "no_such_file.yaml"); },
               {kData + "no_such_file.yaml", 0, 0, "cannot read file"});
}

TEST(Scenario, Overrides) {
  const Scenario s =
      parse_scenario(kBase + "events:\n  - fail: {worker: 3, at: 1s}\n", "s.yaml",
                     {"steps=20", "topology.link.bandwidth=10Gbps", "events.0.fail.worker=1",
                      "workload.model=vgg16", "name = spaced"});
  EXPECT_EQ(s.steps, 20);
  EXPECT_DOUBLE_EQ(s.topology.link.bandwidth_bps, 10e9);
  EXPECT_EQ(s.topology.hosts, 4);  // untouched siblings stay
  EXPECT_EQ(std::get<FailEvent>(s.events.at(0).what).worker, 1);
  EXPECT_EQ(s.events.at(0).label, "fail#1 (line 4)");
  EXPECT_EQ(s.workload.model, "vgg16");
  EXPECT_EQ(s.name, "spaced");

  EXPECT_TRUE(
      parse_scenario(kBase + "events:\n  - fail: {worker: 3, at: 1s}\n", "s.yaml", {"events=[]"})
          .events.empty());
  const Scenario e = parse_scenario(kBase, "s.yaml", {"events=[fail: {worker: 0, at: 2s}]"});
  ASSERT_EQ(e.events.size(), 1u);
  EXPECT_EQ(e.events[0].label, "fail#1 (--set)");
  // An override can supply what the file lacks.
  EXPECT_EQ(parse_scenario("topology: {hosts: 1}\n", "s.yaml", {"steps=5"}).steps, 5);
  EXPECT_EQ(parse_scenario("", "s.yaml", {"steps=5", "topology.hosts=3"}).topology.hosts, 3);
  // A later override wins.
  EXPECT_EQ(parse_scenario(kBase, "s.yaml", {"steps=5", "steps=6"}).steps, 6);
}

TEST(ScenarioErrors, Overrides) {
  expect_set_error(kBase, {"noequals"}, "--set 'noequals': expected key.path=value");
  expect_set_error(kBase, {"=5"}, "--set '=5': empty key");
  expect_set_error(kBase, {"topology..hosts=5"}, "--set 'topology..hosts=5': empty key");
  expect_set_error(kBase, {"steps.x=1"}, "--set 'steps.x=1': 'steps' is a value, not a map");
  expect_set_error(kBase + "events: []\n", {"events.0.fail.worker=1"},
                   "--set 'events.0.fail.worker=1': 'events' is a list; '0' is not an index");
  expect_set_error(kBase, {"steps=[1"}, "--set steps: invalid YAML value '[1'");
  // Errors in an overridden value name the override, not a file position.
  try {
    parse_scenario(kBase, "s.yaml", {"topology.link.bandwidth=1G"});
    FAIL();
  } catch (const ScenarioError& e) {
    EXPECT_EQ(e.file(), "--set");
    EXPECT_EQ(e.line(), 0);
    EXPECT_EQ(e.column(), 0);
    EXPECT_EQ(std::string(e.what()).rfind("--set topology.link.bandwidth: '1G' has no unit", 0), 0u)
        << e.what();
  }
  expect_set_error(kBase, {"steps=ten"}, "--set steps: expected an integer, got 'ten'");
  expect_set_error(kBase, {"topology.link.bandwdith=1Gbps"},
                   "--set topology.link.bandwdith: unknown key 'bandwdith' in topology.link");
  expect_set_error(kBase, {"events=[fail: {worker: 9, at: 1s}]"},
                   "--set events[0].fail.worker: worker 9 does not exist");
  expect_set_error(kBase, {"topology={kind: star}"},
                   "--set topology: missing required key 'hosts'");
  // A problem in the file itself still points at the file.
  expect_error(
      [] {
        parse_scenario(kBase + "events: [fail: {worker: 3, at: 1s}]\n", "s.yaml",
                       {"topology.hosts=2"});
      },
      {"s.yaml", 3, 25, "worker 3 does not exist (2 workers: 0..1)"});
}

// ---- variants: named arms of one comparison ----

const std::string kVariants = kBase +  // lines 1-2
                              "workload: {batch_per_worker: 32}\n"
                              "variants:\n"
                              "  small:\n"
                              "  large: {workload.batch_per_worker: 1024, steps: 3}\n"
                              "  adaptive:\n"
                              "    policy: {name: adaptive_batch_size, lr_rule: none}\n";

TEST(Scenario, VariantsAreBuiltInFileOrder) {
  const Scenario s = parse_scenario(kVariants, "s.yaml");
  EXPECT_EQ(s.workload.batch_per_worker, 32);  // the base stays the base
  ASSERT_EQ(s.variants.size(), 3u);
  EXPECT_EQ(s.variants[0].name, "small");
  EXPECT_EQ(s.variants[1].name, "large");
  EXPECT_EQ(s.variants[2].name, "adaptive");
  EXPECT_TRUE(s.variants[0].overrides.empty());
  EXPECT_EQ(s.variants[1].overrides,
            (std::vector<std::string>{"workload.batch_per_worker=1024", "steps=3"}));
  EXPECT_EQ(s.variants[2].overrides,
            (std::vector<std::string>{"policy={name: adaptive_batch_size, lr_rule: none}"}));
  for (const auto& v : s.variants) {
    ASSERT_NE(v.scenario, nullptr) << v.name;
    EXPECT_TRUE(v.scenario->variants.empty()) << v.name;
    EXPECT_EQ(v.scenario->topology.hosts, 4) << v.name;
  }
  EXPECT_EQ(s.variants[0].scenario->workload.batch_per_worker, 32);
  EXPECT_EQ(s.variants[0].scenario->steps, 10);
  EXPECT_EQ(s.variants[1].scenario->workload.batch_per_worker, 1024);
  EXPECT_EQ(s.variants[1].scenario->steps, 3);
  ASSERT_EQ(s.variants[2].scenario->policies.size(), 1u);
  EXPECT_EQ(s.variants[2].scenario->policies[0].name, "adaptive_batch_size");
  EXPECT_TRUE(s.variants[1].scenario->policies.empty());
  // An override text is what --set takes: the same scenario from the command line.
  const Scenario by_set = parse_scenario(kBase, "s.yaml", s.variants[2].overrides);
  EXPECT_EQ(by_set.policies.at(0).params, s.variants[2].scenario->policies.at(0).params);
}

TEST(Scenario, VariantsStartFromTheOverriddenBase) {
  // --set applies to every variant; a variant's own key wins over it.
  const Scenario s = parse_scenario(kVariants, "s.yaml", {"steps=7", "seed=3"});
  EXPECT_EQ(s.variants[0].scenario->steps, 7);
  EXPECT_EQ(s.variants[1].scenario->steps, 3);
  for (const auto& v : s.variants)
    EXPECT_EQ(v.scenario->seed, 3u) << v.name;
  // --set can reach into a variant too.
  const Scenario t = parse_scenario(kVariants, "s.yaml", {"variants.large.steps=5"});
  EXPECT_EQ(t.variants[1].scenario->steps, 5);
  EXPECT_EQ(t.variants[1].overrides.back(), "steps=5");
}

TEST(Scenario, SeedsDefaultToOneAndAreReadAtTheTopLevel) {
  EXPECT_EQ(parse_scenario(kBase, "s.yaml").seeds, 1);
  EXPECT_EQ(parse_scenario(kBase + "seeds: 3\n", "s.yaml").seeds, 3);
  EXPECT_EQ(parse_scenario(kBase, "s.yaml", {"seeds=4"}).seeds, 4);
}

TEST(ScenarioErrors, Seeds) {
  expect_parse_error(kBase + "seeds: 0\n", 3, 8, "seeds: must be at least 1, got 0");
  expect_parse_error(kBase + "seeds: two\n", 3, 8, "seeds: expected an integer, got 'two'");
  expect_parse_error(kBase + "sweep: {key: seeds, values: [1, 2]}\n", 3, 14,
                     "sweep.key: seeds is not a sweep key");
  expect_parse_error(kBase + "variants:\n  a: {seeds: 2}\n", 4, 7, "a variant cannot set 'seeds'");
}

TEST(ScenarioErrors, Variants) {
  const std::string v = kBase + "variants:";  // "variants:" is line 3
  expect_parse_error(v + " []\n", 3, 11, "variants: expected a map of named variants");
  expect_parse_error(v + " {}\n", 3, 11, "variants: expected a map of named variants");
  expect_parse_error(v + "\n  a/b: {}\n", 4, 3, "a variant name becomes a directory");
  expect_parse_error(v + "\n  ..: {}\n", 4, 3, "a variant name becomes a directory");
  expect_parse_error(v + "\n  a: {}\n  a: {}\n", 5, 3, "duplicate variant 'a'");
  expect_parse_error(v + "\n  a: 5\n", 4, 6, "variants.a: expected a map of overrides");
  expect_parse_error(v + "\n  a: {sweep.key: steps}\n", 4, 7, "a variant cannot set 'sweep'");
  expect_parse_error(v + "\n  a: {variants.b: {}}\n", 4, 7, "a variant cannot set 'variants'");
  expect_parse_error(v + "\n  a: {workload..model: vgg16}\n", 4, 7,
                     "empty key in 'workload..model'");
  expect_parse_error(v + "\n  a: {steps: 1, steps: 2}\n", 4, 17, "duplicate key 'steps'");
  expect_parse_error(v + "\n  a: {}\nsweep: {key: steps, values: [1, 2]}\n", 3, 1,
                     "give either sweep or variants, not both");
  // A bad value points at itself, in the variant, and names the variant.
  expect_parse_error(v + "\n  ok: {steps: 2}\n  big: {workload.batch_per_worker: 0}\n", 5, 36,
                     "variant 'big': workload.batch_per_worker: must be at least 1, got 0");
  const std::string bad_policy = v + "\n  p:\n    policy: {name: adaptive_batch_size, scale: -1}\n";
  expect_parse_error(bad_policy, 5, 13, "variant 'p': policy: ");
  expect_parse_error(bad_policy, 5, 13, "scale must be > 0");
  expect_parse_error(v + "\n  a: {steps.x: 1}\n", 4, 7, "'steps' is a value, not a map");
  // A key the variant's path makes (no place of its own in the file) points at the variant's key.
  expect_parse_error(v + "\n  a: {topology.link.bandwdith: 1Gbps}\n", 4, 7,
                     "variant 'a': unknown key 'bandwdith' in topology.link");
  expect_parse_error(v + "\n  a: {topolgy.hosts: 3}\n", 4, 7,
                     "variant 'a': unknown key 'topolgy' at top level");
  // A base key that the variant's change makes wrong points at the base, naming the variant.
  expect_parse_error(v + "\n  ls: {topology.kind: leaf-spine}\n", 2, 12,
                     "variant 'ls': topology.hosts: not for kind leaf-spine");
  // Overridden from the command line: the error names the override and the variant.
  expect_set_error(kVariants, {"variants.large.steps=0"}, "steps: must be at least 1");
  expect_set_error(kVariants, {"variants.large.steps=0"}, "(in variant 'large')");
}

TEST(ScenarioError, Format) {
  EXPECT_STREQ(ScenarioError("a.yaml", 3, 4, "bad").what(), "a.yaml:3:4: bad");
  EXPECT_STREQ(ScenarioError("a.yaml", 0, 0, "bad").what(), "a.yaml: bad");
  EXPECT_STREQ(ScenarioError("--set", 0, 0, "--set steps: bad").what(), "--set steps: bad");
}

// workload.torch: the user's PyTorch task module, a numeric workload of model "torch"; its file
// is relative to the scenario file's directory. (Running it: python/tests/test_torch_sim.py.)
TEST(Scenario, TorchWorkload) {
  const std::string dir = KF_TEST_DATA_DIR;
  const Scenario s =
      parse_scenario(kBase +
                         "optimizer: sma\n"
                         "workload:\n"
                         "  torch: {module: ../torch/tiny_task.py, train: 100, "
                         "learning_rate: 0.2, gns_every: 3, save_parameters: true}\n",
                     dir + "/s.yaml");
  ASSERT_TRUE(s.workload.numeric);
  const NumericConfig& c = *s.workload.numeric;
  EXPECT_EQ(c.model, "torch");
  EXPECT_TRUE(c.module.ends_with("/tests/torch/tiny_task.py")) << c.module;
  EXPECT_EQ(c.module.find(".."), std::string::npos) << c.module;
  EXPECT_EQ(c.train, 100u);
  EXPECT_EQ(c.test, 0u);  // all
  EXPECT_EQ(c.learning_rate, 0.2);
  EXPECT_EQ(c.gns_every, 3);
  EXPECT_TRUE(c.save_parameters);
  EXPECT_FALSE(s.workload.model_named);
  EXPECT_EQ(s.optimizer, "sma");
  // A module name (no .py, no slash) is imported by name when the run starts.
  EXPECT_EQ(parse_scenario(kBase + "workload: {torch: {module: my_task}}\n", "s.yaml")
                .workload.numeric->module,
            "my_task");
  EXPECT_TRUE(parse_scenario(kBase + "workload: {model: resnet56, torch: {module: m}}\n", "s.yaml")
                  .workload.model_named);
}

TEST(ScenarioErrors, TorchWorkload) {
  expect_parse_error(kBase + "workload: {torch: {module: nowhere/task.py}}\n", 3, 28,
                     "workload.torch.module: no task module file");
  expect_parse_error(kBase + "workload: {torch: {learning_rate: 1}}\n", 3, 19,
                     "missing required key 'module'");
  expect_parse_error(kBase + "workload: {torch: {module: m, colour: blue}}\n", 3, 31,
                     "unknown key 'colour' in workload.torch");
  expect_parse_error(kBase + "workload: {torch: {module: m, train: -1}}\n", 3, 38,
                     "workload.torch.train");
  expect_parse_error(kBase + "workload: {torch: m}\n", 3, 19, "workload.torch: expected a map");
  expect_parse_error(kBase + "workload: {numeric: {}, torch: {module: m}}\n", 3, 25,
                     "give either numeric or torch, not both");
}

}  // namespace
}  // namespace kf
