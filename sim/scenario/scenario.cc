// Scenario files: the schema, what each key of a scenario file means and how it becomes a
// Scenario. The strict YAML reader (yaml_reader.h) does the rest: the types, the units, the
// --set overrides and the errors at file:line:col. Users' documentation: docs/scenarios.md.
//
// To add a key, add it to its section's known keys and read it in that section's function
// (ScenarioReader::topology, workload, numeric, ...; the top level in ScenarioReader::build). To
// add an event type, add it to ScenarioReader::kEventTypes with the function that reads its body
// (and to ScenarioEvent in scenario.h, and to sim/event_injector.cc, which plays it).
#include "sim/scenario/scenario.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <climits>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <map>
#include <sstream>
#include <string_view>

#include "runtime/units.h"
#include "sim/scenario/profile_file.h"
#include "sim/scenario/yaml_reader.h"
#include "workloads/model.h"

namespace kf {

ScenarioError::ScenarioError(std::string file, int line, int column, const std::string& message)
    : std::runtime_error(yaml::format_error(file, line, column, message)),
      file_(std::move(file)),
      line_(line),
      column_(column) {}

namespace {

using yaml::describe;
using yaml::join;
using yaml::MapView;
using YAML::Node;

constexpr std::int64_t kMaxWorkers = 65536;

std::string format_duration(std::chrono::nanoseconds d) {
  std::ostringstream os;
  os << static_cast<double>(d.count()) / 1e9 << "s";
  return os.str();
}

std::string describe_trigger(const Trigger& t) {
  if (t.step) return "step " + std::to_string(*t.step);
  return format_duration(t.time.value_or(std::chrono::nanoseconds(0)));
}

// The topology's worker slots.
std::int64_t worker_slots(const TopologyConfig& t) {
  if (t.kind == TopologyConfig::Kind::star) return std::int64_t{t.hosts} * t.workers_per_host;
  return std::int64_t{t.leaves} * t.hosts_per_leaf * t.workers_per_host;
}

std::string range_list(const std::string& prefix, int n) {
  if (n <= 0) return "";
  if (n > 6) return prefix + "0.." + prefix + std::to_string(n - 1);
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i)
    names.push_back(prefix + std::to_string(i));
  return join(names);
}

std::string node_list(const TopologyConfig& t) {
  const bool star = t.kind == TopologyConfig::Kind::star;
  const int hosts = star ? t.hosts : t.leaves * t.hosts_per_leaf;
  std::vector<std::string> parts = {range_list("w", hosts * t.workers_per_host)};
  if (t.workers_per_host > 1) parts.push_back(range_list("host", hosts));
  if (star) {
    parts.push_back("switch");
  } else {
    parts.push_back(range_list("leaf", t.leaves));
    parts.push_back(range_list("spine", t.spines));
  }
  parts.push_back("outside");
  return join(parts);
}

std::string link_list(const PhysicalTopology& p) {
  std::vector<std::string> names;
  for (const auto& l : p.links) {
    if (names.size() == 8) {
      names.push_back("... (" + std::to_string(p.links.size()) +
                      " links, named a-b after their end nodes)");
      break;
    }
    names.push_back(l.name);
  }
  return join(names);
}

// A name an event uses, checked once the whole topology (with or without "outside") is known.
struct NameRef {
  Node node;
  std::string path;
  std::string name;
  bool is_link;
};

// The schema: one function per section of the file, each reading its map through the reader.
class ScenarioReader : public yaml::Reader {
 public:
  explicit ScenarioReader(std::string file) : Reader(std::move(file), kMaxWorkers) {}

  // The whole file: the top-level keys, then each section's function.
  Scenario build(const Node& root) const;
  // Builds every variant of `sc` from a fresh parse of the file's text (so every node keeps its
  // position) with the same overrides, then the variant's keys; a variant that makes a bad
  // scenario is an error at the node at fault, named after the variant.
  void build_variants(Scenario& sc, const std::string& yaml_text,
                      const std::vector<std::string>& overrides) const;

 private:
  using EventWhat = decltype(ScenarioEvent::what);
  // One type of event: its name in the file (the list item's one key), the keys of its body, and
  // the function that reads the body.
  struct EventType {
    std::string_view name;
    std::vector<std::string> keys;
    EventWhat (ScenarioReader::*read)(const MapView& m, int workers,
                                      std::vector<NameRef>& refs) const;
  };
  static const std::array<EventType, 4> kEventTypes;

  // One of an option's names (option_table in scenario.h); `expected` for a node that is no scalar,
  // `what` names the option in "unknown WHAT 'x' (known: ...)".
  template <typename E>
  E option(const Node& n, const std::string& path, const std::string& expected,
           const std::string& what) const {
    std::vector<std::string> known;
    for (const auto& [value, name] : option_table(E{}))
      known.emplace_back(name);
    return *parse_option<E>(one_of(n, path, expected, what, known));
  }

  TopologyConfig topology(const Node& n) const;
  LinkSpec link_spec(const Node& n, const std::string& path, LinkSpec spec,
                     bool* bandwidth_given = nullptr) const;
  WorkloadConfig workload(const Node& n) const;
  NumericConfig numeric(const Node& n) const;
  NumericConfig torch(const Node& n) const;
  void learning(const MapView& m, NumericConfig& c) const;
  BucketingOptions bucketing(const Node& n) const;
  ModelProfile profile(const Node& n, const std::string& path) const;
  StrategyName strategy(const Node& n) const;
  std::string optimizer(const Node& n, const WorkloadConfig& workload) const;
  std::vector<PolicySpec> policies(const Node& n) const;
  int monitoring(const Node& n) const;
  Sweep sweep(const Node& n, const Node& root) const;
  std::vector<Variant> variants(const Node& n) const;
  ElasticConfig elastic(const Node& n, int workers) const;

  void events(const Node& n, int workers, Scenario& sc, std::vector<NameRef>& refs) const;
  ScenarioEvent event(const Node& item, const std::string& path, int workers,
                      std::vector<NameRef>& refs) const;
  EventWhat contention_event(const MapView& m, int workers, std::vector<NameRef>& refs) const;
  EventWhat straggler_event(const MapView& m, int workers, std::vector<NameRef>& refs) const;
  EventWhat link_event(const MapView& m, int workers, std::vector<NameRef>& refs) const;
  EventWhat fail_event(const MapView& m, int workers, std::vector<NameRef>& refs) const;
  Trigger trigger(const Node& n, const std::string& path) const;
  // An event's `start` (required) and `stop` (optional, after the start).
  void start_stop(const MapView& m, Trigger& start, std::optional<Trigger>& stop) const;
  void check_after(const Trigger& start, const Trigger& stop, const Node& stop_node,
                   const std::string& path) const;
  int worker(const Node& n, const std::string& path, int workers) const;
  // The names the events use: "outside" exists when one names it; every one must exist.
  void check_names(Scenario& sc, const std::vector<NameRef>& refs) const;
};

const std::array<ScenarioReader::EventType, 4> ScenarioReader::kEventTypes{{
    {"contention",
     {"from", "to", "rate", "flows", "start", "stop"},
     &ScenarioReader::contention_event},
    {"straggler", {"worker", "factor", "start", "stop"}, &ScenarioReader::straggler_event},
    {"link", {"link", "bandwidth", "latency", "at"}, &ScenarioReader::link_event},
    {"fail", {"worker", "at"}, &ScenarioReader::fail_event},
}};

Scenario ScenarioReader::build(const Node& root) const {
  if (!root.IsMap()) {
    fail(root, "",
         "expected a map of scenario settings (steps, topology, ...), got " + describe(root));
  }
  // clang-format off
  const MapView m(*this, root, "",
                  {"name", "description", "seed", "seeds", "steps", "world", "flow_tcp", "topology",
                   "workload", "strategy", "optimizer", "chunk", "auto_ring_part",
                   "auto_local_ring_part", "auto_doubling", "auto_pair_doubling",
                   "auto_halving_doubling", "timeout", "policy", "elastic", "monitoring",
                   "tcp_samples", "tcp_recovery", "events", "sweep", "variants"});
  // clang-format on
  Scenario sc;
  sc.file = file();
  sc.name = std::filesystem::path(file()).stem().string();
  if (const auto v = m.get("name")) sc.name = string(*v, "name");
  if (const auto v = m.get("description")) sc.description = string(*v, "description");
  if (const auto v = m.get("seed")) sc.seed = static_cast<std::uint64_t>(integer(*v, "seed", 0));
  if (const auto v = m.get("seeds")) sc.seeds = int32(*v, "seeds", 1);
  sc.steps = int32(m.require("steps"), "steps", 1);
  if (const auto v = m.get("world"))
    sc.world = option<WorldKind>(*v, "world", "a world name", "world");
  if (const auto v = m.get("flow_tcp"))
    sc.flow_tcp =
        option<FlowSharing>(*v, "flow_tcp", "a flow-world TCP model", "flow-world TCP model");
  sc.topology = topology(m.require("topology"));
  if (const auto v = m.get("workload")) sc.workload = workload(*v);
  if (const auto v = m.get("strategy")) sc.strategy = strategy(*v);
  if (const auto v = m.get("optimizer")) sc.optimizer = optimizer(*v, sc.workload);
  if (const auto v = m.get("chunk")) {
    sc.chunk_bytes = size(*v, "chunk");
    if (sc.chunk_bytes == 0) fail(*v, "chunk", "must be positive, got " + v->Scalar());
  }
  if (const auto v = m.get("auto_ring_part")) {
    sc.auto_ring_part_bytes = size(*v, "auto_ring_part");
  }
  if (const auto v = m.get("auto_local_ring_part"))
    sc.auto_local_ring_part_bytes = size(*v, "auto_local_ring_part");
  if (const auto v = m.get("auto_doubling")) sc.auto_doubling_bytes = size(*v, "auto_doubling");
  if (const auto v = m.get("auto_pair_doubling"))
    sc.auto_pair_doubling_bytes = size(*v, "auto_pair_doubling");
  if (const auto v = m.get("auto_halving_doubling"))
    sc.auto_halving_doubling_bytes = size(*v, "auto_halving_doubling");
  if (const auto v = m.get("timeout")) {
    sc.timeout = duration(*v, "timeout");
    if (sc.timeout.count() == 0) fail(*v, "timeout", "must be positive, got " + v->Scalar());
  }
  if (const auto v = m.get("tcp_samples")) {
    sc.tcp_samples = duration(*v, "tcp_samples");
    if (sc.tcp_samples.count() != 0 && sc.tcp_samples < std::chrono::milliseconds(1)) {
      fail(*v, "tcp_samples", "must be 0 (off) or at least 1ms, got " + v->Scalar());
    }
  }
  if (const auto v = m.get("tcp_recovery")) {
    sc.tcp_recovery =
        option<LossRecovery>(*v, "tcp_recovery", "a TCP loss recovery", "TCP loss recovery");
  }
  if (const auto v = m.get("policy")) sc.policies = policies(*v);
  if (const auto v = m.get("monitoring")) sc.ping_every = monitoring(*v);
  if (const auto v = m.get("sweep")) sc.sweep = sweep(*v, root);
  if (const auto v = m.get("variants")) {
    if (sc.sweep)
      fail(m.key_node("variants"), "variants", "give either sweep or variants, not both");
    sc.variants = variants(*v);
  }
  std::vector<NameRef> refs;
  const int workers = static_cast<int>(worker_slots(sc.topology));
  if (const auto v = m.get("events")) events(*v, workers, sc, refs);
  if (const auto v = m.get("elastic")) sc.elastic = elastic(*v, workers);
  check_names(sc, refs);
  return sc;
}

TopologyConfig ScenarioReader::topology(const Node& n) const {
  const MapView m(*this, n, "topology",
                  {"kind", "hosts", "workers_per_host", "link", "intra_host", "leaves", "spines",
                   "hosts_per_leaf", "uplink", "oversubscription", "host_qdisc"});
  TopologyConfig t;
  if (const auto q = m.get("host_qdisc"))
    t.host_qdisc = option<HostQdisc>(*q, m.child("host_qdisc"), "none, fq_codel or tsq", "qdisc");
  if (const auto k = m.get("kind")) {
    const std::string kind =
        one_of(*k, m.child("kind"), "star or leaf-spine", "kind", {"star", "leaf-spine"});
    t.kind = kind == "star" ? TopologyConfig::Kind::star : TopologyConfig::Kind::leaf_spine;
  }
  if (const auto w = m.get("workers_per_host")) {
    t.workers_per_host = int32(*w, m.child("workers_per_host"), 1, kMaxWorkers);
  }
  t.link = link_spec(m.get("link").value_or(Node(YAML::NodeType::Map)), m.child("link"), t.link);
  if (const auto ih = m.get("intra_host")) {
    t.intra_host = link_spec(*ih, m.child("intra_host"), t.intra_host);
  }
  if (t.kind == TopologyConfig::Kind::star) {
    for (const char* k : {"leaves", "spines", "hosts_per_leaf", "uplink", "oversubscription"}) {
      if (m.get(k)) {
        fail(m.key_node(k), m.child(k), "only for kind leaf-spine (this topology is a star)");
      }
    }
    t.hosts = int32(m.require("hosts"), m.child("hosts"), 1, kMaxWorkers);
  } else {
    if (m.get("hosts")) {
      fail(m.key_node("hosts"), m.child("hosts"),
           "not for kind leaf-spine; give leaves and hosts_per_leaf");
    }
    t.leaves = int32(m.require("leaves"), m.child("leaves"), 1, kMaxWorkers);
    t.spines = int32(m.require("spines"), m.child("spines"), 1, kMaxWorkers);
    t.hosts_per_leaf =
        int32(m.require("hosts_per_leaf"), m.child("hosts_per_leaf"), 1, kMaxWorkers);
    bool uplink_bandwidth = false;
    if (const auto u = m.get("uplink")) {
      t.uplink = link_spec(*u, m.child("uplink"), t.uplink, &uplink_bandwidth);
    }
    if (const auto o = m.get("oversubscription")) {
      if (uplink_bandwidth) {
        fail(m.key_node("oversubscription"), m.child("oversubscription"),
             "give either oversubscription or uplink.bandwidth, not both");
      }
      const double ratio = positive_number(*o, m.child("oversubscription"));
      t.uplink.bandwidth_bps = t.hosts_per_leaf * t.link.bandwidth_bps / (t.spines * ratio);
    }
  }
  if (const std::int64_t workers = worker_slots(t); workers > kMaxWorkers) {
    fail(n, "topology",
         std::to_string(workers) + " workers is too many (at most " + std::to_string(kMaxWorkers) +
             ")");
  }
  return t;
}

LinkSpec ScenarioReader::link_spec(const Node& n, const std::string& path, LinkSpec spec,
                                   bool* bandwidth_given) const {
  const MapView m(*this, n, path, {"bandwidth", "latency", "mtu", "queue", "burst", "line_rate"});
  if (const auto b = m.get("bandwidth")) {
    spec.bandwidth_bps = bandwidth(*b, m.child("bandwidth"));
    if (bandwidth_given != nullptr) *bandwidth_given = true;
  }
  if (const auto l = m.get("latency")) spec.latency = duration(*l, m.child("latency"));
  if (const auto mtu = m.get("mtu")) {
    spec.mtu = static_cast<std::uint32_t>(integer(*mtu, m.child("mtu"), 576, 65535));
  }
  if (const auto q = m.get("queue")) {
    spec.queue_packets = static_cast<std::uint32_t>(integer(*q, m.child("queue"), 1, INT_MAX));
  }
  const auto burst = m.get("burst");
  const auto line_rate = m.get("line_rate");
  if (burst.has_value() != line_rate.has_value()) {
    fail(n, path,
         "a shaped link needs both 'burst' and 'line_rate' (the token bucket's depth and the "
         "speed of the wire under it)");
  }
  if (burst) {
    spec.burst_bytes = size(*burst, m.child("burst"));
    if (spec.burst_bytes < spec.mtu) {
      fail(*burst, m.child("burst"),
           "burst " + std::to_string(spec.burst_bytes) + " B is less than one packet (mtu " +
               std::to_string(spec.mtu) + ")");
    }
    if (spec.burst_bytes > UINT32_MAX) {  // ns-3's TBF counts its tokens in 32 bits
      fail(*burst, m.child("burst"), "burst must be below 4 GiB");
    }
    spec.line_rate_bps = bandwidth(*line_rate, m.child("line_rate"));
    if (spec.line_rate_bps < spec.bandwidth_bps) {
      fail(*line_rate, m.child("line_rate"),
           "the wire under a shaper must be at least as fast as its bandwidth");
    }
  }
  return spec;
}

WorkloadConfig ScenarioReader::workload(const Node& n) const {
  const MapView m(*this, n, "workload",
                  {"model", "device", "batch_per_worker", "fusion", "phantom", "compute_jitter",
                   "numeric", "torch", "tensors", "compute", "bucketing", "profile"});
  WorkloadConfig w;
  if (const auto v = m.get("numeric")) w.numeric = numeric(*v);
  if (const auto v = m.get("torch")) {
    if (m.get("numeric")) {
      fail(m.key_node("torch"), m.child("torch"), "give either numeric or torch, not both");
    }
    w.numeric = torch(*v);
  }
  w.model_named = m.get("model") || m.get("profile");
  if (const auto v = m.get("model")) {
    w.model = string(*v, m.child("model"));
    try {
      model_profile(w.model);
    } catch (const std::invalid_argument& e) {
      fail(*v, m.child("model"), e.what());
    }
  }
  if (const auto v = m.get("profile")) {
    for (const char* other : {"model", "tensors"}) {
      if (m.get(other)) {
        fail(m.key_node(other), m.child(other),
             std::string("give either profile or ") + other + ", not both");
      }
    }
    w.profile = std::make_shared<const ModelProfile>(profile(*v, m.child("profile")));
    w.model = w.profile->name;
  }
  if (const auto v = m.get("device")) w.device = string(*v, m.child("device"));
  try {
    compute_time_per_sample(workload_model(w), w.device);
  } catch (const std::invalid_argument& e) {
    if (const auto v = m.get("device")) fail(*v, m.child("device"), e.what());
    fail(*m.get("profile"), m.child("profile"),
         std::string(e.what()) + " (workload.device is " + w.device + " by default)");
  }
  if (const auto v = m.get("batch_per_worker")) {
    w.batch_per_worker = int32(*v, m.child("batch_per_worker"), 1);
  }
  if (const auto v = m.get("fusion")) w.fusion_bytes = size(*v, m.child("fusion"));
  if (const auto v = m.get("phantom")) w.phantom = boolean(*v, m.child("phantom"));
  if (const auto v = m.get("compute_jitter")) {
    w.compute_jitter = number(*v, m.child("compute_jitter"));
    if (w.compute_jitter < 0 || w.compute_jitter >= 1) {
      fail(*v, m.child("compute_jitter"),
           "must be in [0, 1), got " + scalar(*v, m.child("compute_jitter"), "a number"));
    }
  }
  if (const auto v = m.get("tensors")) {
    const std::string path = m.child("tensors");
    if (!v->IsSequence() || v->size() == 0)
      fail(*v, path, "expected a non-empty list of sizes like [64MiB], got " + describe(*v));
    for (std::size_t i = 0; i < v->size(); ++i) {
      const Node t = (*v)[i];
      const std::string ipath = path + "[" + std::to_string(i) + "]";
      const std::size_t bytes = size(t, ipath);
      if (bytes == 0 || bytes % 4 != 0)
        fail(t, ipath, "must be a positive multiple of 4 bytes (f32 elements), got " + t.Scalar());
      w.tensor_bytes.push_back(bytes);
    }
  }
  if (const auto v = m.get("compute")) w.compute = duration(*v, m.child("compute"));
  if (const auto v = m.get("bucketing")) {
    w.bucketing = bucketing(*v);
    if (w.bucketing.mode != Bucketing::none) {
      if (w.numeric) {
        fail(*v, m.child("bucketing"),
             "bucketing " + option_name(w.bucketing.mode) +
                 " overlaps a profiled model's gradients with its backward pass; a numeric "
                 "workload communicates after its step (use none)");
      }
      if (w.fusion_bytes != 0) {
        fail(m.key_node("fusion"), m.child("fusion"),
             "only with bucketing none (bucketing " + option_name(w.bucketing.mode) +
                 " makes its own buckets)");
      }
    }
  }
  return w;
}

// A profile file, relative to the scenario file's directory unless absolute; its own errors
// point into it.
ModelProfile ScenarioReader::profile(const Node& n, const std::string& path) const {
  const std::string name = string(n, path);
  std::filesystem::path p(name);
  if (p.is_relative()) p = std::filesystem::path(file()).parent_path() / p;
  if (!std::filesystem::is_regular_file(p)) {
    fail(n, path, "no profile file '" + p.string() + "'");
  }
  return load_profile(p.string());
}

// A bucketing name, or {name: NAME, PARAM: VALUE, ...} with the parameters of that bucketing.
BucketingOptions ScenarioReader::bucketing(const Node& n) const {
  const std::string path = "workload.bucketing";
  BucketingOptions b;
  if (n.IsScalar()) {
    b.mode = option<Bucketing>(n, path, "a bucketing name", "bucketing");
    return b;
  }
  if (!n.IsMap()) {
    fail(n, path,
         "expected a bucketing name (" + option_names<Bucketing>() +
             ") or a map {name: NAME, PARAMETER: VALUE, ...}, got " + describe(n));
  }
  const MapView m(*this, n, path, {"name", "bucket_cap", "first_bucket", "fusion_bytes", "cycle"});
  b.mode = option<Bucketing>(m.require("name"), m.child("name"), "a bucketing name", "bucketing");
  const std::array<std::pair<const char*, Bucketing>, 4> owners{
      {{"bucket_cap", Bucketing::ddp},
       {"first_bucket", Bucketing::ddp},
       {"fusion_bytes", Bucketing::horovod},
       {"cycle", Bucketing::horovod}}};
  for (const auto& [key, owner] : owners) {
    if (m.get(key) && b.mode != owner) {
      fail(m.key_node(key), m.child(key),
           "a parameter of bucketing " + option_name(owner) + ", not of " + option_name(b.mode));
    }
  }
  const auto positive_size = [&](const char* key, std::size_t& out) {
    if (const auto v = m.get(key)) {
      out = size(*v, m.child(key));
      if (out == 0) fail(*v, m.child(key), "must be positive, got " + v->Scalar());
    }
  };
  positive_size("bucket_cap", b.bucket_cap);
  positive_size("first_bucket", b.first_bucket);
  positive_size("fusion_bytes", b.fusion_bytes);
  if (const auto v = m.get("cycle")) {
    b.cycle = duration(*v, m.child("cycle"));
    if (b.cycle.count() == 0) fail(*v, m.child("cycle"), "must be positive, got " + v->Scalar());
  }
  return b;
}

NumericConfig ScenarioReader::numeric(const Node& n) const {
  const MapView m(*this, n, "workload.numeric",
                  {"model",          "hidden",         "dataset",         "path",
                   "features",       "classes",        "train",           "test",
                   "separation",     "noise",          "optimizer",       "momentum",
                   "learning_rate",  "sma_alpha",      "ada_switch_step", "eval_every",
                   "gns_every",      "variance_every", "target_accuracy", "cost",
                   "save_parameters"});
  NumericConfig c;
  if (const auto v = m.get("model")) {
    c.model = one_of(*v, m.child("model"), "a string", "numeric model", {"softmax", "mlp"});
  }
  if (const auto v = m.get("hidden")) c.hidden = int32(*v, m.child("hidden"), 1, 1 << 16);
  if (const auto v = m.get("dataset")) {
    c.dataset = one_of(*v, m.child("dataset"), "a string", "dataset",
                       {"gaussian_mixture", "mnist", "cifar10"});
  }
  if (const auto v = m.get("path")) c.path = string(*v, m.child("path"));
  if (c.dataset != "gaussian_mixture" && c.path.empty())
    fail(n, "workload.numeric",
         "dataset " + c.dataset + " needs `path` (the directory of its files)");
  if (const auto v = m.get("features")) c.features = int32(*v, m.child("features"), 1, 1 << 20);
  if (const auto v = m.get("classes")) c.classes = int32(*v, m.child("classes"), 2, 1 << 16);
  if (const auto v = m.get("train"))
    c.train = static_cast<std::size_t>(integer(*v, m.child("train"), 1));
  if (const auto v = m.get("test"))
    c.test = static_cast<std::size_t>(integer(*v, m.child("test"), 1));
  if (const auto v = m.get("separation")) c.separation = positive_number(*v, m.child("separation"));
  if (const auto v = m.get("noise")) c.noise = number(*v, m.child("noise"));
  if (c.noise < 0) fail(n, "workload.numeric.noise", "must be >= 0");
  learning(m, c);
  return c;
}

// The keys workload.numeric and workload.torch share: how the model learns and what is measured.
void ScenarioReader::learning(const MapView& m, NumericConfig& c) const {
  if (const auto v = m.get("optimizer")) {
    c.local_optimizer =
        one_of(*v, m.child("optimizer"), "a string", "local optimizer", {"sgd", "adam"});
  }
  if (const auto v = m.get("momentum")) {
    c.momentum = number(*v, m.child("momentum"));
    if (c.momentum < 0 || c.momentum >= 1) fail(*v, m.child("momentum"), "must be in [0, 1)");
  }
  if (const auto v = m.get("learning_rate"))
    c.learning_rate = positive_number(*v, m.child("learning_rate"));
  if (const auto v = m.get("sma_alpha")) {
    c.sma_alpha = positive_number(*v, m.child("sma_alpha"));
    if (c.sma_alpha > 1) fail(*v, m.child("sma_alpha"), "must be in (0, 1]");
  }
  if (const auto v = m.get("ada_switch_step"))
    c.ada_switch_step = integer(*v, m.child("ada_switch_step"), 0);
  if (const auto v = m.get("eval_every")) c.eval_every = int32(*v, m.child("eval_every"), 0);
  if (const auto v = m.get("gns_every")) c.gns_every = int32(*v, m.child("gns_every"), 0);
  if (const auto v = m.get("variance_every"))
    c.variance_every = int32(*v, m.child("variance_every"), 0);
  if (const auto v = m.get("cost"))
    c.cost = option<StepCost>(*v, m.child("cost"), "profile or numeric", "step cost");
  if (const auto v = m.get("target_accuracy")) {
    c.target_accuracy = number(*v, m.child("target_accuracy"));
    if (c.target_accuracy < 0 || c.target_accuracy > 1)
      fail(*v, m.child("target_accuracy"), "must be in [0, 1]");
  }
  if (const auto v = m.get("save_parameters"))
    c.save_parameters = boolean(*v, m.child("save_parameters"));
}

// workload.torch: the user's PyTorch model (a task module, python/kungfu/torch/task.py) trained
// through the numeric workload's optimizers, monitors and policies.
NumericConfig ScenarioReader::torch(const Node& n) const {
  const std::string path = "workload.torch";
  if (!n.IsMap()) fail(n, path, "expected a map {module: FILE.py, ...}, got " + describe(n));
  const MapView m(*this, n, path,
                  {"module", "train", "test", "optimizer", "momentum", "learning_rate", "sma_alpha",
                   "ada_switch_step", "eval_every", "gns_every", "variance_every",
                   "target_accuracy", "cost", "save_parameters"});
  NumericConfig c;
  c.model = "torch";
  c.dataset = "torch";
  c.train = 0;
  c.test = 0;
  const Node module = m.require("module");
  c.module = string(module, m.child("module"));
  // A file (ends in .py or holds a slash) is relative to the scenario file; else a module name.
  if (c.module.ends_with(".py") || c.module.find('/') != std::string::npos) {
    std::filesystem::path p(c.module);
    if (p.is_relative()) p = std::filesystem::path(file()).parent_path() / p;
    if (!std::filesystem::is_regular_file(p))
      fail(module, m.child("module"), "no task module file '" + p.string() + "'");
    c.module = std::filesystem::absolute(p).lexically_normal().string();
  } else if (c.module.empty()) {
    fail(module, m.child("module"), "expected a task module's file or name");
  }
  if (const auto v = m.get("train"))
    c.train = static_cast<std::size_t>(integer(*v, m.child("train"), 0));
  if (const auto v = m.get("test"))
    c.test = static_cast<std::size_t>(integer(*v, m.child("test"), 0));
  learning(m, c);
  return c;
}

// Any case: "RING", "ring".
StrategyName ScenarioReader::strategy(const Node& n) const {
  const std::string s = scalar(n, "strategy", "a strategy name");
  const auto parsed = parse_strategy_name(s);
  if (!parsed) {
    std::vector<std::string> known;
    for (const auto k : kAllStrategyNames)
      known.emplace_back(strategy_name(k));
    fail(n, "strategy", "unknown strategy '" + s + "' (known: " + join(known) + ")");
  }
  return *parsed;
}

std::string ScenarioReader::optimizer(const Node& n, const WorkloadConfig& workload) const {
  const std::string o = one_of(n, "optimizer", "an optimizer name", "optimizer",
                               {"ssgd", "sma", "pair_avg", "ada_sgd"});
  if (o != "ssgd" && !workload.numeric) {
    // Refused rather than run as S-SGD: their traffic is the model, and it needs a model.
    fail(n, "optimizer", "'" + o + "' needs a real model: set workload.numeric");
  }
  return o;
}

// "none", a name, {name: ..., params...}, or a list of names and maps. Each policy is built once
// here so a bad parameter is reported at its place in the file.
std::vector<PolicySpec> ScenarioReader::policies(const Node& n) const {
  std::vector<PolicySpec> out;
  const auto one = [&](const Node& item, const std::string& path) {
    PolicySpec spec;
    if (item.IsScalar()) {
      spec.name = item.Scalar();
      if (spec.name == "none") return;
    } else if (item.IsMap()) {
      for (auto it = item.begin(); it != item.end(); ++it) {
        const std::string key = scalar(it->first, path, "a key name");
        if (key == "name") {
          spec.name = scalar(it->second, path + ".name", "a policy name");
        } else {
          spec.params.emplace_back(key, scalar(it->second, path + "." + key, "a scalar value"));
        }
      }
      if (spec.name.empty()) fail(item, path, "missing required key 'name'");
    } else {
      fail(item, path, "expected a policy name or {name: ..., parameters}, got " + describe(item));
    }
    try {
      (void)make_policy(spec);
    } catch (const std::invalid_argument& e) {
      fail(item, path, e.what());
    }
    out.push_back(std::move(spec));
  };
  if (n.IsSequence()) {
    for (std::size_t i = 0; i < n.size(); ++i)
      one(n[i], "policy[" + std::to_string(i) + "]");
  } else {
    one(n, "policy");
  }
  return out;
}

// Scenario::ping_every.
int ScenarioReader::monitoring(const Node& n) const {
  const MapView m(*this, n, "monitoring", {"ping_every"});
  if (const auto p = m.get("ping_every")) return int32(*p, "monitoring.ping_every", 0);
  return 0;
}

Sweep ScenarioReader::sweep(const Node& n, const Node& root) const {
  const MapView m(*this, n, "sweep", {"key", "values"});
  Sweep sw;
  sw.key = string(m.require("key"), "sweep.key");
  if (sw.key == "sweep" || sw.key.rfind("sweep.", 0) == 0) {
    fail(m.require("key"), "sweep.key", "a sweep cannot sweep itself");
  }
  if (sw.key == "seeds") {
    fail(m.require("key"), "sweep.key", "seeds is not a sweep key: every value runs at `seeds: N`");
  }
  const Node& values = m.require("values");
  if (!values.IsSequence() || values.size() == 0) {
    fail(values, "sweep.values", "expected a non-empty list of values, got " + describe(values));
  }
  for (std::size_t i = 0; i < values.size(); ++i) {
    const std::string path = "sweep.values[" + std::to_string(i) + "]";
    const std::string value = scalar(values[i], path, "a value");
    // Every variant must be a valid scenario: find out now, pointing at the value.
    Node variant = YAML::Clone(root);
    variant.remove("sweep");
    try {
      ScenarioReader variant_reader(*this);
      variant_reader.apply_override(variant, sw.key + "=" + value);
      variant_reader.build(variant);
    } catch (const yaml::Error& e) {
      std::string why = e.what();
      if (const auto at = why.find(": "); at != std::string::npos) why = why.substr(at + 2);
      fail(values[i], path, sw.key + "=" + value + " gives a bad scenario: " + why);
    }
    sw.values.push_back(value);
  }
  return sw;
}

// NAME: {key.path: value, ...} for each variant. Only the shape is checked here; what each variant
// makes of the scenario is checked by build_variants, once the whole file is known.
std::vector<Variant> ScenarioReader::variants(const Node& n) const {
  if (!n.IsMap() || n.size() == 0) {
    fail(n, "variants",
         "expected a map of named variants (NAME: {key.path: value, ...}), got " + describe(n));
  }
  std::vector<Variant> out;
  for (auto it = n.begin(); it != n.end(); ++it) {
    const std::string name = scalar(it->first, "variants", "a variant name");
    const std::string path = "variants." + name;
    // The name is a directory under kfsim's --out.
    const bool ok =
        !name.empty() && name != "." && name != ".." &&
        std::all_of(name.begin(), name.end(), [](char c) {
          return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
        });
    if (!ok) {
      fail(it->first, path,
           "a variant name becomes a directory: use letters, digits, '-', '_' and '.', got '" +
               name + "'",
           false);
    }
    for (const auto& v : out) {
      if (v.name == name) fail(it->first, path, "duplicate variant '" + name + "'", false);
    }
    Variant variant{.name = name, .overrides = {}, .scenario = nullptr};
    const Node body = it->second;
    if (!body.IsNull() && !body.IsMap()) {
      fail(body, path,
           "expected a map of overrides (key.path: value, as --set takes them), got " +
               describe(body));
    }
    std::vector<std::string> keys;
    if (body.IsMap()) {
      for (auto e = body.begin(); e != body.end(); ++e) {
        const std::string key = scalar(e->first, path, "a key path like workload.batch_per_worker");
        const auto parts = yaml::split_key(key);
        if (std::any_of(parts.begin(), parts.end(), [](const auto& p) { return p.empty(); })) {
          fail(e->first, path,
               "empty key in '" + key +
                   "'; expected a key path like steps or workload.batch_per_worker");
        }
        // Every arm runs at the experiment's seeds, so that their statistics compare.
        if (parts.front() == "variants" || parts.front() == "sweep" || parts.front() == "seeds") {
          fail(e->first, path + "." + key, "a variant cannot set '" + parts.front() + "'", false);
        }
        if (std::find(keys.begin(), keys.end(), key) != keys.end()) {
          fail(e->first, path + "." + key, "duplicate key '" + key + "' in " + path, false);
        }
        keys.push_back(key);
        variant.overrides.push_back(key + "=" + yaml::flow_yaml(e->second));
      }
    }
    out.push_back(std::move(variant));
  }
  return out;
}

void ScenarioReader::build_variants(Scenario& sc, const std::string& yaml_text,
                                    const std::vector<std::string>& overrides) const {
  for (Variant& variant : sc.variants) {
    ScenarioReader r(file());
    Node root = yaml::load(yaml_text, file());
    for (const auto& o : overrides)
      r.apply_override(root, o);
    const Node body = static_cast<const Node&>(root)["variants"][variant.name];
    std::vector<std::pair<Node, Node>> entries;
    if (body.IsMap()) {
      for (auto e = body.begin(); e != body.end(); ++e)
        entries.emplace_back(e->first, e->second);
    }
    root.remove("variants");
    for (const auto& [key, value] : entries) {
      const std::string path = "variants." + variant.name + "." + key.Scalar();
      try {
        // A variant key given by --set has no place in the file: its errors name the override.
        r.place(root, key.Scalar(), value, key.Mark(), from_override(path));
      } catch (const std::invalid_argument& e) {
        fail(key, path, e.what());
      }
    }
    try {
      variant.scenario = std::make_shared<const Scenario>(r.build(root));
    } catch (const yaml::Error& e) {
      // The node at fault may be the variant's or the base's: say which variant made it fail.
      if (e.line() > 0) {
        throw yaml::Error(e.file(), e.line(), e.column(),
                          "variant '" + variant.name + "': " + e.message());
      }
      throw yaml::Error(e.file(), 0, 0, e.what() + (" (in variant '" + variant.name + "')"));
    }
  }
}

ElasticConfig ScenarioReader::elastic(const Node& n, int workers) const {
  const MapView m(*this, n, "elastic", {"initial_workers", "config_latency", "spawn_delay"});
  ElasticConfig e;
  if (const auto w = m.get("initial_workers"))
    e.initial_workers = int32(*w, "elastic.initial_workers", 1, workers);
  if (const auto d = m.get("config_latency"))
    e.config_latency = duration(*d, "elastic.config_latency");
  if (const auto d = m.get("spawn_delay")) e.spawn_delay = duration(*d, "elastic.spawn_delay");
  return e;
}

void ScenarioReader::events(const Node& n, int workers, Scenario& sc,
                            std::vector<NameRef>& refs) const {
  if (!n.IsSequence()) fail(n, "events", "expected a list of events, got " + describe(n));
  std::map<std::string, int> counts;
  std::size_t i = 0;
  for (auto it = n.begin(); it != n.end(); ++it, ++i) {
    const Node item = *it;
    const std::string ipath = "events[" + std::to_string(i) + "]";
    ScenarioEvent ev = event(item, ipath, workers, refs);
    const std::string type = item.begin()->first.Scalar();
    const int line = item.Mark().line;
    ev.label = type + "#" + std::to_string(++counts[type]) +
               (from_override(ipath) || line < 0 ? " (--set)"
                                                 : " (line " + std::to_string(line + 1) + ")");
    sc.events.push_back(std::move(ev));
  }
}

// A list item {TYPE: {body}}: its one key names the event type, whose function reads the body.
ScenarioEvent ScenarioReader::event(const Node& item, const std::string& ipath, int workers,
                                    std::vector<NameRef>& refs) const {
  std::vector<std::string> names;
  for (const auto& t : kEventTypes)
    names.emplace_back(t.name);
  const std::string types = join(names);
  if (!item.IsMap()) {
    fail(
        item, ipath,
        "expected a map with one key naming the event type (" + types + "), got " + describe(item));
  }
  if (item.size() != 1) {
    std::vector<std::string> keys;
    for (auto it = item.begin(); it != item.end(); ++it)
      keys.push_back(describe(it->first));
    fail(item, ipath,
         "an event is a map with exactly one key naming its type (" + types + "), got " +
             std::to_string(item.size()) + " keys" + (keys.empty() ? "" : ": " + join(keys)));
  }
  const Node key = item.begin()->first;
  const std::string type = one_of(key, ipath, "an event type (" + types + ")", "event type", names);
  const auto& t = *std::find_if(kEventTypes.begin(), kEventTypes.end(),
                                [&](const EventType& e) { return e.name == type; });
  const MapView m(*this, item.begin()->second, ipath + "." + type, t.keys);
  ScenarioEvent ev;
  ev.what = (this->*t.read)(m, workers, refs);
  return ev;
}

ScenarioReader::EventWhat ScenarioReader::contention_event(const MapView& m, int /*workers*/,
                                                           std::vector<NameRef>& refs) const {
  ContentionEvent c;
  const Node from = m.require("from");
  const Node to = m.require("to");
  c.from = string(from, m.child("from"));
  c.to = string(to, m.child("to"));
  if (c.to == c.from) fail(to, m.child("to"), "same node as from ('" + c.from + "')");
  refs.push_back({from, m.child("from"), c.from, false});
  refs.push_back({to, m.child("to"), c.to, false});
  if (const auto r = m.get("rate")) c.rate_bps = bandwidth(*r, m.child("rate"));
  if (const auto f = m.get("flows")) c.flows = int32(*f, m.child("flows"), 1, 100000);
  start_stop(m, c.start, c.stop);
  return c;
}

ScenarioReader::EventWhat ScenarioReader::straggler_event(const MapView& m, int workers,
                                                          std::vector<NameRef>& /*refs*/) const {
  StragglerEvent s;
  s.worker = worker(m.require("worker"), m.child("worker"), workers);
  s.factor = positive_number(m.require("factor"), m.child("factor"));
  start_stop(m, s.start, s.stop);
  return s;
}

ScenarioReader::EventWhat ScenarioReader::link_event(const MapView& m, int /*workers*/,
                                                     std::vector<NameRef>& refs) const {
  LinkEvent l;
  const Node name = m.require("link");
  l.link = string(name, m.child("link"));
  refs.push_back({name, m.child("link"), l.link, true});
  if (const auto b = m.get("bandwidth")) l.bandwidth_bps = bandwidth(*b, m.child("bandwidth"));
  if (const auto d = m.get("latency")) l.latency = duration(*d, m.child("latency"));
  if (!l.bandwidth_bps && !l.latency) {
    fail(m.node(), m.path(), "give bandwidth and/or latency (what the link changes to)");
  }
  l.at = trigger(m.require("at"), m.child("at"));
  return l;
}

ScenarioReader::EventWhat ScenarioReader::fail_event(const MapView& m, int workers,
                                                     std::vector<NameRef>& /*refs*/) const {
  FailEvent f;
  f.worker = worker(m.require("worker"), m.child("worker"), workers);
  f.at = trigger(m.require("at"), m.child("at"));
  return f;
}

// A time ("12.5s") or a step ({step: 20}).
Trigger ScenarioReader::trigger(const Node& n, const std::string& path) const {
  Trigger t;
  if (n.IsMap()) {
    const MapView m(*this, n, path, {"step"});
    t.step = integer(m.require("step"), m.child("step"), 0);
    return t;
  }
  if (n.IsScalar()) {
    try {
      t.time = parse_duration(n.Scalar(), UnitStyle::strict);
    } catch (const std::invalid_argument& e) {
      fail(n, path, std::string(e.what()) + "; or give a step: {step: N}");
    }
    return t;
  }
  fail(n, path, "expected a time like 12.5s or a step like {step: 20}, got " + describe(n));
}

void ScenarioReader::start_stop(const MapView& m, Trigger& start,
                                std::optional<Trigger>& stop) const {
  start = trigger(m.require("start"), m.child("start"));
  if (const auto s = m.get("stop")) {
    stop = trigger(*s, m.child("stop"));
    check_after(start, *stop, *s, m.child("stop"));
  }
}

void ScenarioReader::check_after(const Trigger& start, const Trigger& stop, const Node& stop_node,
                                 const std::string& path) const {
  const bool steps = start.step && stop.step && *stop.step <= *start.step;
  const bool times = start.time && stop.time && *stop.time <= *start.time;
  if (steps || times) {
    fail(stop_node, path,
         "must be after start (" + describe_trigger(stop) + " is not after " +
             describe_trigger(start) + ")");
  }
}

int ScenarioReader::worker(const Node& n, const std::string& path, int workers) const {
  const std::int64_t w = integer(n, path, std::numeric_limits<std::int64_t>::min());
  if (w < 0 || w >= workers) {
    fail(n, path,
         "worker " + std::to_string(w) + " does not exist (" + std::to_string(workers) +
             (workers == 1 ? " worker: 0)" : " workers: 0.." + std::to_string(workers - 1) + ")"));
  }
  return static_cast<int>(w);
}

void ScenarioReader::check_names(Scenario& sc, const std::vector<NameRef>& refs) const {
  const bool star = sc.topology.kind == TopologyConfig::Kind::star;
  const std::string attach = star ? "switch" : "leaf0";
  for (const auto& r : refs) {
    if (r.is_link ? (r.name == "outside-" + attach || r.name == attach + "-outside")
                  : r.name == "outside") {
      sc.topology.outside_host = true;
    }
  }
  TopologyConfig with_outside = sc.topology;
  with_outside.outside_host = true;
  const PhysicalTopology p = build_topology(with_outside);
  for (const auto& r : refs) {
    if (r.is_link && p.find_link(r.name) < 0) {
      fail(r.node, r.path, "no link '" + r.name + "' (links: " + link_list(p) + ")");
    }
    if (!r.is_link && p.find_node(r.name) < 0) {
      fail(r.node, r.path, "no node '" + r.name + "' (nodes: " + node_list(sc.topology) + ")");
    }
  }
}

// The reader's errors leave the library as ScenarioErrors, with the same text and place.
template <typename F>
auto as_scenario_errors(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const yaml::Error& e) {
    throw ScenarioError(e.file(), e.line(), e.column(), e.message());
  }
}

}  // namespace

Scenario parse_scenario(const std::string& yaml_text, const std::string& file,
                        const std::vector<std::string>& overrides) {
  return as_scenario_errors([&] {
    Node root = yaml::load(yaml_text, file);
    ScenarioReader reader(file);
    try {
      if (!overrides.empty() && !root.IsMap() && !root.IsNull()) {
        reader.build(root);  // reports the root's type
      }
      for (const auto& o : overrides)
        reader.apply_override(root, o);
      Scenario sc = reader.build(root);
      if (!sc.variants.empty()) reader.build_variants(sc, yaml_text, overrides);
      return sc;
    } catch (const YAML::Exception& e) {  // should not happen: every access is checked first
      throw yaml::error_at(file, e, e.msg);
    }
  });
}

Scenario load_scenario(const std::string& path, const std::vector<std::string>& overrides) {
  return parse_scenario(as_scenario_errors([&] { return yaml::read_file(path); }), path, overrides);
}

const ModelProfile& workload_model(const WorkloadConfig& workload) {
  return workload.profile ? *workload.profile : model_profile(workload.model);
}

// The topology the scenario's names refer to, with the "outside" host when asked for.
PhysicalTopology build_topology(const TopologyConfig& t) {
  const bool star = t.kind == TopologyConfig::Kind::star;
  PhysicalTopology p =
      star ? star_topology(t.hosts, t.workers_per_host, t.link, t.intra_host)
           : leaf_spine_topology(t.leaves, t.spines, t.hosts_per_leaf, t.workers_per_host, t.link,
                                 t.uplink, t.intra_host);
  if (t.outside_host) {
    const int attach = p.find_node(star ? "switch" : "leaf0");
    const int outside = p.add_node(NodeKind::host, "outside");
    p.add_link(outside, attach, t.link);
  }
  return p;
}

}  // namespace kf
