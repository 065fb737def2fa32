// Scenario: everything one kfsim run needs, read from a YAML file: the network, the workers, the
// workload, the strategy, and the timed events to inject. Parsing is strict: an unknown key, a
// wrong type, a value without its unit or an impossible value stops with "file:line:col: message"
// (ScenarioError), which kfsim turns into exit code 2.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "policies/registry.h"
#include "runtime/chunking.h"
#include "sim/sim_world.h"
#include "topology/physical.h"
#include "topology/strategy.h"
#include "workloads/bucketing.h"
#include "workloads/model.h"

namespace kf {

// Which simulated world runs the scenario.
enum class WorldKind : std::uint8_t {
  ns3,   // packet level: ns-3's TCP/IP over point-to-point links
  flow,  // flow level: fluid flows with TCP windows (sim/flow/)
};

// What a numeric workload's step costs the network.
enum class StepCost : std::uint8_t {
  profile,  // the workload model's gradient bytes (the numeric model standing in for it)
  numeric,  // the numeric model's own bytes
};

// The names a scenario file writes for the values of an option: one table per option, found by
// its enum type; the order is the order error messages list them in.
using WorldNames = std::array<std::pair<WorldKind, std::string_view>, 2>;
constexpr WorldNames option_table(WorldKind) {
  return {{{WorldKind::ns3, "ns3"}, {WorldKind::flow, "flow"}}};
}
using QdiscNames = std::array<std::pair<HostQdisc, std::string_view>, 3>;
constexpr QdiscNames option_table(HostQdisc) {
  return {{{HostQdisc::fq_codel, "fq_codel"}, {HostQdisc::none, "none"}, {HostQdisc::tsq, "tsq"}}};
}
using SharingNames = std::array<std::pair<FlowSharing, std::string_view>, 2>;
constexpr SharingNames option_table(FlowSharing) {
  return {{{FlowSharing::cubic, "cubic"}, {FlowSharing::fair, "fair"}}};
}
using RecoveryNames = std::array<std::pair<LossRecovery, std::string_view>, 2>;
constexpr RecoveryNames option_table(LossRecovery) {
  return {{{LossRecovery::rack, "rack"}, {LossRecovery::rfc6675, "rfc6675"}}};
}
using CostNames = std::array<std::pair<StepCost, std::string_view>, 2>;
constexpr CostNames option_table(StepCost) {
  return {{{StepCost::profile, "profile"}, {StepCost::numeric, "numeric"}}};
}

constexpr auto option_table(Bucketing) {
  return kBucketingNames;
}

template <typename E>
std::string option_name(E value) {
  for (const auto& [v, name] : option_table(E{}))
    if (v == value) return std::string(name);
  return "?";
}
template <typename E>
std::optional<E> parse_option(std::string_view name) {
  for (const auto& [v, n] : option_table(E{}))
    if (n == name) return v;
  return std::nullopt;
}
// "ns3, flow"
template <typename E>
std::string option_names() {
  std::string out;
  for (const auto& [v, name] : option_table(E{}))
    out += (out.empty() ? "" : ", ") + std::string(name);
  return out;
}

class ScenarioError : public std::runtime_error {
 public:
  ScenarioError(std::string file, int line, int column, const std::string& message);
  const std::string& file() const { return file_; }
  int line() const { return line_; }      // 1-based; 0 when unknown
  int column() const { return column_; }  // 1-based; 0 when unknown

 private:
  std::string file_;
  int line_;
  int column_;
};

// When an event starts or stops: at a training step (when the first worker begins it) or at a
// simulated time.
struct Trigger {
  std::optional<std::int64_t> step;
  std::optional<std::chrono::nanoseconds> time;
};

// Background traffic between two nodes (by node name: "w0", "host1", "switch", "leaf0", or the
// extra node "outside", a host on the switch that runs no worker). `rate_bps` paces each flow;
// without it each of the `flows` parallel TCP flows sends as fast as TCP allows.
struct ContentionEvent {
  std::string from;
  std::string to;
  std::optional<double> rate_bps;
  int flows = 1;
  Trigger start;
  std::optional<Trigger> stop;  // none: until the end of the run
};

// Worker `worker` computes `factor` times slower from `start` until `stop`.
struct StragglerEvent {
  int worker = 0;
  double factor = 1;
  Trigger start;
  std::optional<Trigger> stop;
};

// Link `link` (named "a-b" by its end nodes, either order) changes bandwidth and/or latency.
struct LinkEvent {
  std::string link;
  std::optional<double> bandwidth_bps;
  std::optional<std::chrono::nanoseconds> latency;
  Trigger at;
};

// Worker `worker` dies (its process is gone; its connections close).
struct FailEvent {
  int worker = 0;
  Trigger at;
};

struct ScenarioEvent {
  std::variant<ContentionEvent, StragglerEvent, LinkEvent, FailEvent> what;
  std::string label;  // "contention#1 (line 42)"
};

struct TopologyConfig {
  enum class Kind { star, leaf_spine } kind = Kind::star;
  int hosts = 1;  // star
  int workers_per_host = 1;
  LinkSpec link;  // host <-> switch (star) or host <-> leaf (leaf-spine)
  LinkSpec intra_host{.bandwidth_bps = 100e9,
                      .latency = std::chrono::microseconds(1),
                      .mtu = 65000,
                      .queue_packets = 1000};
  int leaves = 1;  // leaf-spine
  int spines = 1;
  int hosts_per_leaf = 1;
  LinkSpec uplink;            // leaf <-> spine
  bool outside_host = false;  // add node "outside" on the switch (set when an event names it)
  // Hosts' NIC qdisc (Ns3Options::host_qdisc). tsq by default: it is what a Linux host does,
  // whichever qdisc it runs (artifact/README.md, Fidelity, compares the three with a real cluster).
  HostQdisc host_qdisc = HostQdisc::tsq;
};

// Real math in the simulation: a numeric model trained on a dataset, its gradients (real bytes)
// moved by the optimizer's collectives, its accuracy recorded, while compute time still comes
// from the workload's profile (model x device).
struct NumericConfig {
  std::string model = "mlp";  // softmax or mlp (workloads/numeric_model.h); torch: workload.torch
  // Model "torch" (workload.torch): the user's task module (python/kungfu/torch/task.py), an
  // absolute path (a relative one in the file is relative to the scenario file's directory) or an
  // importable module name. Its data replace `dataset`; train and test then cap the number of
  // samples taken from the start of each set (0: all of them).
  std::string module;
  int hidden = 64;
  std::string dataset = "gaussian_mixture";  // or mnist / cifar10 (files under `path`)
  std::string path;
  int features = 32;  // gaussian_mixture
  int classes = 8;
  std::size_t train = 16384;
  std::size_t test = 4096;
  double separation = 2.0;
  double noise = 1.0;
  std::string local_optimizer = "sgd";  // sgd (momentum) or adam
  double momentum = 0.9;
  double learning_rate = 0.1;
  double sma_alpha = 0.1;
  std::int64_t ada_switch_step = 100;
  int eval_every = 10;
  int gns_every = 0;
  int variance_every = 0;
  double target_accuracy = 0;  // > 0: summary.json reports the time to reach it
  // Write rank 0's final parameters into the run's parameters.f32 (raw little-endian float32,
  // tensor by tensor): to compare a run with a reference computation.
  bool save_parameters = false;
  StepCost cost = StepCost::profile;
};

struct WorkloadConfig {
  std::string model = "resnet50";  // see workloads/model.h; a profile file's name with `profile`
  // A user's model read from a profile file (workload.profile; sim/scenario/profile_file.h), used
  // instead of the shipped model named `model`.
  std::shared_ptr<const ModelProfile> profile;
  std::string device = "k80";
  int batch_per_worker = 32;
  std::size_t fusion_bytes = 0;  // 0: one allreduce per gradient tensor
  bool phantom = true;           // gradients as phantoms (sizes only)
  // Each step's compute time is scaled by a factor drawn uniformly from [1 - j, 1 + j] by a
  // generator seeded from the scenario seed and the rank: real GPUs vary a few percent step to
  // step, and it is what the seed drives.
  double compute_jitter = 0.02;
  std::optional<NumericConfig> numeric;
  // Whether the file names `model` or `profile`: a torch workload that names neither takes its
  // compute time from its task's profile() file (sim/torch/torch_task.h).
  bool model_named = false;
  // A synthetic workload (`tensors`, `compute`): allreduce exactly these tensors (bytes each, moved
  // as f32) every step instead of the model's gradients, and/or take this long to compute a step
  // instead of the model x device profile's time; e.g. a bare allreduce benchmark, as kfbench's.
  std::vector<std::size_t> tensor_bytes;            // empty: the model's gradient tensors
  std::optional<std::chrono::nanoseconds> compute;  // unset: the profile's time per sample x batch
  // How gradients are bucketed and when each bucket starts (workloads/bucketing.h). none, the
  // default, computes the whole step first: the records of every scenario written before
  // bucketing existed.
  BucketingOptions bucketing;
};

// Elastic membership in the simulation: how many of the topology's worker slots run at the start,
// and how long the in-simulation config service and runners take.
struct ElasticConfig {
  int initial_workers = 0;                                                 // 0: every slot
  std::chrono::nanoseconds config_latency = std::chrono::milliseconds(1);  // per GET / PUT
  std::chrono::nanoseconds spawn_delay = std::chrono::seconds(1);  // a runner starting a worker
};

// Run the scenario once per value of one key (a --set path), e.g. key: topology.hosts,
// values: [2, 4, 8]: a scaling curve or a strategy comparison from one file.
struct Sweep {
  std::string key;
  std::vector<std::string> values;
};

struct Scenario;

// One named arm of a comparison (`variants:` in the file): the base scenario with some keys
// overridden, e.g. fixed-small / fixed-large / adaptive batch size on the same task. kfsim runs
// each into OUT/NAME/ and compares them (sim/variants.h).
struct Variant {
  std::string name;
  std::vector<std::string> overrides;        // "key.path=value", in file order, for the records
  std::shared_ptr<const Scenario> scenario;  // the base with the overrides, validated
};

struct Scenario {
  std::string file;  // where it came from
  std::string name;
  std::string description;
  std::uint64_t seed = 1;
  // Runs of each arm (sweep value, variant), at seeds seed, seed + 1, ..., seed + seeds - 1; the
  // experiment reports each figure's mean and 95% interval over them (sim/seed_stats.h).
  int seeds = 1;
  int steps = 10;
  WorldKind world = WorldKind::ns3;
  FlowSharing flow_tcp = FlowSharing::cubic;  // the flow world's sharing
  TopologyConfig topology;
  WorkloadConfig workload;
  StrategyName strategy = StrategyName::binary_tree_star;
  std::string optimizer = "ssgd";  // ssgd; sma, pair_avg and ada_sgd need workload.numeric
  std::size_t chunk_bytes = kDefaultChunkBytes;
  // AUTO (EngineOptions): a ring from buffers of this size per worker across hosts, and of the
  // second on one host; recursive doubling up to this size (0: never), and between two workers up
  // to the second; among 4, 8, 16... workers on a host each halving-doubling instead of the ring
  // up to the last (0: never).
  std::size_t auto_ring_part_bytes = kDefaultAutoRingPartBytes;
  std::size_t auto_local_ring_part_bytes = kDefaultAutoLocalRingPartBytes;
  std::size_t auto_doubling_bytes = kDefaultAutoDoublingBytes;
  std::size_t auto_pair_doubling_bytes = kDefaultAutoPairDoublingBytes;
  std::size_t auto_halving_doubling_bytes = kDefaultAutoHalvingDoublingBytes;
  std::chrono::nanoseconds timeout = std::chrono::seconds(60);  // per collective, simulated
  std::vector<ScenarioEvent> events;
  // Adaptation policies, stacked in this order (policies/registry.h); empty: none.
  std::vector<PolicySpec> policies;
  ElasticConfig elastic;
  int ping_every = 0;  // monitoring: probe every peer's latency every N steps (0: never)
  // ns-3 world: every TCP sender's state (cwnd, ssthresh, srtt, bytes in flight, bytes acked)
  // every this often into tcp.csv; 0: never. The flow world has no TCP and ignores it.
  std::chrono::nanoseconds tcp_samples{0};
  // ns-3 world: how a TCP sender finds losses. rack: as Linux does by default, a segment is lost
  // once one sent after it has arrived, and a silent tail is probed. The flow world ignores it.
  LossRecovery tcp_recovery = LossRecovery::rack;
  std::optional<Sweep> sweep;
  std::vector<Variant> variants;  // empty: one run of this scenario
};

// The workload's model: its profile file's, or the shipped model it names.
const ModelProfile& workload_model(const WorkloadConfig& workload);

// The physical network a scenario describes, with the "outside" host (a machine with no worker,
// on the star's switch or on leaf0) when an event names it.
PhysicalTopology build_topology(const TopologyConfig& config);

// Reads and validates `path`, then applies each "key.path=value" override (as if written in the
// file) before validation. Throws ScenarioError.
Scenario load_scenario(const std::string& path, const std::vector<std::string>& overrides = {});

// The same from YAML text; `file` is used in error messages.
Scenario parse_scenario(const std::string& yaml_text, const std::string& file,
                        const std::vector<std::string>& overrides = {});

}  // namespace kf
