// Scenario files: strict YAML -> Scenario. Every problem is a ScenarioError pointing at the node
// that caused it (file:line:col), or at the --set override it came from. The schema is documented
// in scenarios/README.md.
#include "sim/scenario/scenario.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <string_view>

#include "runtime/units.h"
#include "workloads/model.h"

namespace kf {
namespace {

constexpr const char* kSetFile = "--set";
constexpr std::int64_t kMaxWorkers = 65536;

std::string format_error(const std::string& file, int line, int column,
                         const std::string& message) {
  if (line > 0) {
    return file + ":" + std::to_string(line) + ":" + std::to_string(column) + ": " + message;
  }
  // Unknown position: "FILE: message", unless the message already starts with FILE (the --set
  // errors read "--set key.path: ...").
  if (file.empty() || message.starts_with(file + " ")) return message;
  return file + ": " + message;
}

}  // namespace

ScenarioError::ScenarioError(std::string file, int line, int column, const std::string& message)
    : std::runtime_error(format_error(file, line, column, message)),
      file_(std::move(file)),
      line_(line),
      column_(column) {}

namespace {

using YAML::Node;

std::string join(const std::vector<std::string>& items, std::string_view sep = ", ") {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += sep;
    out += items[i];
  }
  return out;
}

std::string describe(const Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Scalar:
      return "'" + n.Scalar() + "'";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a map";
    default:
      return "nothing";
  }
}

std::string format_duration(std::chrono::nanoseconds d) {
  std::ostringstream os;
  os << static_cast<double>(d.count()) / 1e9 << "s";
  return os.str();
}

std::string describe_trigger(const Trigger& t) {
  if (t.step) return "step " + std::to_string(*t.step);
  return format_duration(t.time.value_or(std::chrono::nanoseconds(0)));
}

// A name an event uses, checked once the whole topology (with or without "outside") is known.
struct NameRef {
  Node node;
  std::string path;
  std::string name;
  bool is_link;
};

class Reader;

// A YAML map whose keys are checked against the known ones (and for duplicates) up front.
class MapView {
 public:
  MapView(const Reader& r, const Node& node, std::string path, std::vector<std::string> known);

  std::optional<Node> get(const std::string& key) const {
    const auto it = entries_.find(key);
    if (it == entries_.end()) return std::nullopt;
    return it->second.second;
  }
  Node key_node(const std::string& key) const { return entries_.at(key).first; }
  Node require(const std::string& key) const;
  std::string child(const std::string& key) const {
    return path_.empty() ? key : path_ + "." + key;
  }
  const Node& node() const { return node_; }
  const std::string& path() const { return path_; }

 private:
  const Reader& r_;
  Node node_;
  std::string path_;
  std::map<std::string, std::pair<Node, Node>> entries_;  // key -> (key node, value node)
};

class Reader {
 public:
  explicit Reader(std::string file) : file_(std::move(file)) {}

  const std::string& file() const { return file_; }

  // Throws ScenarioError at `node`; `body` is prefixed with "path: " when `with_path`.
  [[noreturn]] void fail(const Node& node, const std::string& path, const std::string& body,
                         bool with_path = true) const {
    YAML::Mark mark = node.Mark();
    // An empty value's own mark is wherever the next token is; its key is the better place.
    for (const auto& [value, key_mark] : empty_values_) {
      if (value.is(node)) mark = key_mark;
    }
    // A node a variant's key made on the way has no place: the variant's key is the place.
    for (const auto& [placed, key_mark] : placed_) {
      if (mark.line < 0 && (within(path, placed) || within(placed, path))) mark = key_mark;
    }
    if (from_override(path) || (mark.line < 0 && !path.empty())) {
      throw ScenarioError(kSetFile, 0, 0, std::string(kSetFile) + " " + path + ": " + body);
    }
    const std::string message = with_path && !path.empty() ? path + ": " + body : body;
    if (mark.line < 0) throw ScenarioError(file_, 1, 1, message);
    throw ScenarioError(file_, mark.line + 1, mark.column + 1, message);
  }

  // `path` is `prefix` or lies under it ("a.b" and "a.b[0].c" lie under "a.b").
  static bool within(const std::string& path, const std::string& prefix) {
    if (path == prefix) return true;
    return path.size() > prefix.size() && path.starts_with(prefix) &&
           (path[prefix.size()] == '.' || path[prefix.size()] == '[');
  }

  bool from_override(const std::string& path) const {
    return std::any_of(overridden_.begin(), overridden_.end(),
                       [&](const std::string& o) { return within(path, o); });
  }

  void apply_override(Node& root, const std::string& text);

  const std::string& scalar(const Node& n, const std::string& path, const std::string& what) const {
    if (!n.IsScalar()) fail(n, path, "expected " + what + ", got " + describe(n));
    return n.Scalar();
  }

  std::string string(const Node& n, const std::string& path) const {
    return scalar(n, path, "a string");
  }

  // One of an option's names (OptionNames<E>); `expected` for a node that is no scalar, `what`
  // names the option in "unknown WHAT 'x' (known: ...)".
  template <typename E>
  E option(const Node& n, const std::string& path, const std::string& expected,
           const std::string& what) const {
    const std::string& s = scalar(n, path, expected);
    if (const auto v = parse_option<E>(s)) return *v;
    fail(n, path, "unknown " + what + " '" + s + "' (known: " + option_names<E>() + ")");
  }

  std::int64_t integer(const Node& n, const std::string& path, std::int64_t lo,
                       std::int64_t hi = std::numeric_limits<std::int64_t>::max()) const {
    const std::string& s = scalar(n, path, "an integer");
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec == std::errc::result_out_of_range) fail(n, path, "too large, got " + s);
    if (ec != std::errc() || end != s.data() + s.size()) {
      fail(n, path, "expected an integer, got '" + s + "'");
    }
    const bool bounded =
        hi < std::numeric_limits<std::int64_t>::max() && hi != INT_MAX && hi != kMaxWorkers;
    if (v < lo || (bounded && v > hi)) {
      if (bounded) {
        fail(n, path,
             "must be between " + std::to_string(lo) + " and " + std::to_string(hi) + ", got " + s);
      }
      fail(n, path, "must be at least " + std::to_string(lo) + ", got " + s);
    }
    if (v > hi) fail(n, path, "too large (at most " + std::to_string(hi) + "), got " + s);
    return v;
  }

  int int32(const Node& n, const std::string& path, int lo, int hi = INT_MAX) const {
    return static_cast<int>(integer(n, path, lo, hi));
  }

  double number(const Node& n, const std::string& path) const {
    const std::string& s = scalar(n, path, "a number");
    double v = 0;
    const char* begin = s.data();
    if (!s.empty() && s.front() == '+') ++begin;
    const auto [end, ec] = std::from_chars(begin, s.data() + s.size(), v);
    if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v)) {
      fail(n, path, "expected a number, got '" + s + "'");
    }
    return v;
  }

  double positive_number(const Node& n, const std::string& path) const {
    const double v = number(n, path);
    if (!(v > 0)) fail(n, path, "must be positive, got " + scalar(n, path, "a number"));
    return v;
  }

  bool boolean(const Node& n, const std::string& path) const {
    const std::string& s = scalar(n, path, "true or false");
    for (const char* t : {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON"}) {
      if (s == t) return true;
    }
    for (const char* f : {"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF"}) {
      if (s == f) return false;
    }
    fail(n, path, "expected true or false, got '" + s + "'");
  }

  double bandwidth(const Node& n, const std::string& path) const {
    const std::string& s = scalar(n, path, "a bandwidth like 1Gbps");
    try {
      return parse_bandwidth(s);
    } catch (const std::invalid_argument& e) {
      fail(n, path, e.what());
    }
  }

  std::chrono::nanoseconds duration(const Node& n, const std::string& path) const {
    const std::string& s = scalar(n, path, "a duration like 5us");
    try {
      return parse_duration(s, UnitStyle::strict);
    } catch (const std::invalid_argument& e) {
      fail(n, path, e.what());
    }
  }

  std::size_t size(const Node& n, const std::string& path) const {
    const std::string& s = scalar(n, path, "a size like 1MiB");
    try {
      return parse_size(s, UnitStyle::strict);
    } catch (const std::invalid_argument& e) {
      fail(n, path, e.what());
    }
  }

  LinkSpec link_spec(const Node& n, const std::string& path, LinkSpec spec,
                     bool* bandwidth_given = nullptr) const {
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

  Trigger trigger(const Node& n, const std::string& path) const {
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

  void check_after(const Trigger& start, const Trigger& stop, const Node& stop_node,
                   const std::string& path) const {
    const bool steps = start.step && stop.step && *stop.step <= *start.step;
    const bool times = start.time && stop.time && *stop.time <= *start.time;
    if (steps || times) {
      fail(stop_node, path,
           "must be after start (" + describe_trigger(stop) + " is not after " +
               describe_trigger(start) + ")");
    }
  }

  Scenario build(const Node& root) const;
  Sweep sweep(const Node& n, const Node& root) const;
  std::vector<Variant> variants(const Node& n) const;
  // Builds every variant of `sc` from a fresh parse of the file's text (so every node keeps its
  // position) with the same overrides, then the variant's keys; a variant that makes a bad
  // scenario is an error at the node at fault, named after the variant.
  void build_variants(Scenario& sc, const std::string& yaml_text,
                      const std::vector<std::string>& overrides) const;

  void note_empty_value(const Node& value, const YAML::Mark& key_mark) const {
    empty_values_.emplace_back(value, key_mark);
  }

 private:
  TopologyConfig topology(const Node& n) const;
  WorkloadConfig workload(const Node& n) const;
  NumericConfig numeric(const Node& n) const;
  std::vector<PolicySpec> policies(const Node& n) const;
  void events(const Node& n, int workers, Scenario& sc, std::vector<NameRef>& refs) const;
  ScenarioEvent event(const Node& item, const std::string& path, int workers,
                      std::vector<NameRef>& refs) const;
  int worker(const Node& n, const std::string& path, int workers) const;

  std::string file_;
  std::vector<std::string> overridden_;  // key paths set by --set, as "a.b[0].c"
  // Key paths a variant set, and where its key is in the file (build_variants).
  std::vector<std::pair<std::string, YAML::Mark>> placed_;
  mutable std::vector<std::pair<Node, YAML::Mark>> empty_values_;
};

MapView::MapView(const Reader& r, const Node& node, std::string path,
                 std::vector<std::string> known)
    : r_(r), node_(node), path_(std::move(path)) {
  if (!node.IsMap()) r.fail(node, path_, "expected a map, got " + describe(node));
  const std::string where = path_.empty() ? "at top level" : "in " + path_;
  for (auto it = node.begin(); it != node.end(); ++it) {
    const Node key = it->first;
    if (!key.IsScalar()) r.fail(key, path_, "expected a key name, got " + describe(key));
    const std::string& k = key.Scalar();
    if (std::find(known.begin(), known.end(), k) == known.end()) {
      r.fail(key, child(k), "unknown key '" + k + "' " + where + " (known: " + join(known) + ")",
             false);
    }
    if (entries_.contains(k)) r.fail(key, child(k), "duplicate key '" + k + "' " + where, false);
    if (it->second.IsNull()) r.note_empty_value(it->second, key.Mark());
    entries_.emplace(k, std::make_pair(key, it->second));
  }
}

Node MapView::require(const std::string& key) const {
  if (const auto v = get(key)) return *v;
  r_.fail(node_, path_, "missing required key '" + key + "'");
}

// "a.b.0.c" -> {"a", "b", "0", "c"}; a part may be empty (the callers refuse that).
std::vector<std::string> split_key(const std::string& key) {
  std::vector<std::string> parts;
  for (std::size_t begin = 0;;) {
    const auto dot = key.find('.', begin);
    parts.push_back(key.substr(begin, dot == std::string::npos ? std::string::npos : dot - begin));
    if (dot == std::string::npos) break;
    begin = dot + 1;
  }
  return parts;
}

// Sets the key path `parts` in `root` to `v` (maps are made on the way; a list takes an index)
// and returns the path as messages name it ("events[0].fail.worker"). The node `v` itself is
// placed, so it keeps its position in the file, if it has one. Throws std::invalid_argument.
std::string set_path(Node& root, const std::vector<std::string>& parts, const Node& v) {
  if (!root.IsMap()) root.reset(Node(YAML::NodeType::Map));
  Node cur = root;
  std::string norm;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const std::string& part = parts[i];
    const bool last = i + 1 == parts.size();
    if (cur.IsSequence()) {
      std::size_t idx = 0;
      const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), idx);
      if (ec != std::errc() || end != part.data() + part.size() || idx >= cur.size()) {
        throw std::invalid_argument("'" + norm + "' is a list; '" + part + "' is not an index 0.." +
                                    std::to_string(static_cast<long>(cur.size()) - 1));
      }
      norm += "[" + std::to_string(idx) + "]";
      if (last) {
        cur[idx] = v;
      } else {
        Node next = cur[idx];
        cur.reset(next);
      }
    } else if (cur.IsScalar()) {
      throw std::invalid_argument("'" + norm + "' is a value, not a map");
    } else {  // map, or null (becomes a map)
      norm += (norm.empty() ? "" : ".") + part;
      if (last) {
        cur[part] = v;
      } else {
        Node next = cur[part];
        cur.reset(next);
      }
    }
  }
  return norm;
}

void Reader::apply_override(Node& root, const std::string& text) {
  const auto eq = text.find('=');
  if (eq == std::string::npos) {
    throw ScenarioError(kSetFile, 0, 0,
                        std::string(kSetFile) + " '" + text + "': expected key.path=value");
  }
  std::string key = text.substr(0, eq);
  while (!key.empty() && (key.back() == ' ' || key.back() == '\t'))
    key.pop_back();
  while (!key.empty() && (key.front() == ' ' || key.front() == '\t'))
    key.erase(0, 1);
  const std::string value = text.substr(eq + 1);
  const std::vector<std::string> parts = split_key(key);
  for (const auto& p : parts) {
    if (p.empty()) {
      throw ScenarioError(kSetFile, 0, 0,
                          std::string(kSetFile) + " '" + text + "': empty key in '" + key +
                              "'; expected key.path=value");
    }
  }
  Node v;
  try {
    v = YAML::Load(value);
  } catch (const YAML::Exception& e) {
    throw ScenarioError(
        kSetFile, 0, 0,
        std::string(kSetFile) + " " + key + ": invalid YAML value '" + value + "': " + e.msg);
  }
  try {
    overridden_.push_back(set_path(root, parts, v));
  } catch (const std::invalid_argument& e) {
    throw ScenarioError(kSetFile, 0, 0, std::string(kSetFile) + " '" + text + "': " + e.what());
  }
}

TopologyConfig Reader::topology(const Node& n) const {
  const MapView m(*this, n, "topology",
                  {"kind", "hosts", "workers_per_host", "link", "intra_host", "leaves", "spines",
                   "hosts_per_leaf", "uplink", "oversubscription", "host_qdisc"});
  TopologyConfig t;
  if (const auto q = m.get("host_qdisc"))
    t.host_qdisc = option<HostQdisc>(*q, m.child("host_qdisc"), "none, fq_codel or tsq", "qdisc");
  if (const auto k = m.get("kind")) {
    const std::string kind = scalar(*k, m.child("kind"), "star or leaf-spine");
    if (kind == "star") {
      t.kind = TopologyConfig::Kind::star;
    } else if (kind == "leaf-spine") {
      t.kind = TopologyConfig::Kind::leaf_spine;
    } else {
      fail(*k, m.child("kind"), "unknown kind '" + kind + "' (known: star, leaf-spine)");
    }
  }
  if (const auto w = m.get("workers_per_host")) {
    t.workers_per_host = int32(*w, m.child("workers_per_host"), 1, kMaxWorkers);
  }
  t.link = link_spec(m.get("link").value_or(Node(YAML::NodeType::Map)), m.child("link"), t.link);
  if (const auto ih = m.get("intra_host")) {
    t.intra_host = link_spec(*ih, m.child("intra_host"), t.intra_host);
  }
  std::int64_t workers = 0;
  if (t.kind == TopologyConfig::Kind::star) {
    for (const char* k : {"leaves", "spines", "hosts_per_leaf", "uplink", "oversubscription"}) {
      if (m.get(k)) {
        fail(m.key_node(k), m.child(k), "only for kind leaf-spine (this topology is a star)");
      }
    }
    t.hosts = int32(m.require("hosts"), m.child("hosts"), 1, kMaxWorkers);
    workers = std::int64_t{t.hosts} * t.workers_per_host;
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
    workers = std::int64_t{t.leaves} * t.hosts_per_leaf * t.workers_per_host;
  }
  if (workers > kMaxWorkers) {
    fail(n, "topology",
         std::to_string(workers) + " workers is too many (at most " + std::to_string(kMaxWorkers) +
             ")");
  }
  return t;
}

NumericConfig Reader::numeric(const Node& n) const {
  const MapView m(*this, n, "workload.numeric",
                  {"model",         "hidden",         "dataset",         "path",
                   "features",      "classes",        "train",           "test",
                   "separation",    "noise",          "optimizer",       "momentum",
                   "learning_rate", "sma_alpha",      "ada_switch_step", "eval_every",
                   "gns_every",     "variance_every", "target_accuracy", "cost"});
  NumericConfig c;
  if (const auto v = m.get("model")) {
    c.model = string(*v, m.child("model"));
    if (c.model != "softmax" && c.model != "mlp")
      fail(*v, m.child("model"), "unknown numeric model '" + c.model + "' (known: softmax, mlp)");
  }
  if (const auto v = m.get("hidden")) c.hidden = int32(*v, m.child("hidden"), 1, 1 << 16);
  if (const auto v = m.get("dataset")) {
    c.dataset = string(*v, m.child("dataset"));
    if (c.dataset != "gaussian_mixture" && c.dataset != "mnist" && c.dataset != "cifar10") {
      fail(*v, m.child("dataset"),
           "unknown dataset '" + c.dataset + "' (known: gaussian_mixture, mnist, cifar10)");
    }
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
  if (const auto v = m.get("optimizer")) {
    c.local_optimizer = string(*v, m.child("optimizer"));
    if (c.local_optimizer != "sgd" && c.local_optimizer != "adam")
      fail(*v, m.child("optimizer"),
           "unknown local optimizer '" + c.local_optimizer + "' (known: sgd, adam)");
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
  return c;
}

WorkloadConfig Reader::workload(const Node& n) const {
  const MapView m(*this, n, "workload",
                  {"model", "device", "batch_per_worker", "fusion", "phantom", "compute_jitter",
                   "numeric", "tensors", "compute"});
  WorkloadConfig w;
  if (const auto v = m.get("numeric")) w.numeric = numeric(*v);
  if (const auto v = m.get("model")) {
    w.model = string(*v, m.child("model"));
    try {
      model_profile(w.model);
    } catch (const std::invalid_argument& e) {
      fail(*v, m.child("model"), e.what());
    }
  }
  if (const auto v = m.get("device")) {
    w.device = string(*v, m.child("device"));
    try {
      compute_time_per_sample(model_profile(w.model), w.device);
    } catch (const std::invalid_argument& e) {
      fail(*v, m.child("device"), e.what());
    }
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
  return w;
}

int Reader::worker(const Node& n, const std::string& path, int workers) const {
  const std::int64_t w = integer(n, path, std::numeric_limits<std::int64_t>::min());
  if (w < 0 || w >= workers) {
    fail(n, path,
         "worker " + std::to_string(w) + " does not exist (" + std::to_string(workers) +
             (workers == 1 ? " worker: 0)" : " workers: 0.." + std::to_string(workers - 1) + ")"));
  }
  return static_cast<int>(w);
}

ScenarioEvent Reader::event(const Node& item, const std::string& ipath, int workers,
                            std::vector<NameRef>& refs) const {
  const std::string kTypes = "contention, straggler, link, fail";
  if (!item.IsMap()) {
    fail(item, ipath,
         "expected a map with one key naming the event type (" + kTypes + "), got " +
             describe(item));
  }
  if (item.size() != 1) {
    std::vector<std::string> keys;
    for (auto it = item.begin(); it != item.end(); ++it)
      keys.push_back(describe(it->first));
    fail(item, ipath,
         "an event is a map with exactly one key naming its type (" + kTypes + "), got " +
             std::to_string(item.size()) + " keys" + (keys.empty() ? "" : ": " + join(keys)));
  }
  const Node key = item.begin()->first;
  const Node body = item.begin()->second;
  if (!key.IsScalar())
    fail(key, ipath, "expected an event type (" + kTypes + "), got " + describe(key));
  const std::string type = key.Scalar();
  const std::string path = ipath + "." + type;
  ScenarioEvent ev;
  if (type == "contention") {
    const MapView m(*this, body, path, {"from", "to", "rate", "flows", "start", "stop"});
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
    c.start = trigger(m.require("start"), m.child("start"));
    if (const auto s = m.get("stop")) {
      c.stop = trigger(*s, m.child("stop"));
      check_after(c.start, *c.stop, *s, m.child("stop"));
    }
    ev.what = std::move(c);
  } else if (type == "straggler") {
    const MapView m(*this, body, path, {"worker", "factor", "start", "stop"});
    StragglerEvent s;
    s.worker = worker(m.require("worker"), m.child("worker"), workers);
    s.factor = positive_number(m.require("factor"), m.child("factor"));
    s.start = trigger(m.require("start"), m.child("start"));
    if (const auto st = m.get("stop")) {
      s.stop = trigger(*st, m.child("stop"));
      check_after(s.start, *s.stop, *st, m.child("stop"));
    }
    ev.what = s;
  } else if (type == "link") {
    const MapView m(*this, body, path, {"link", "bandwidth", "latency", "at"});
    LinkEvent l;
    const Node name = m.require("link");
    l.link = string(name, m.child("link"));
    refs.push_back({name, m.child("link"), l.link, true});
    if (const auto b = m.get("bandwidth")) l.bandwidth_bps = bandwidth(*b, m.child("bandwidth"));
    if (const auto d = m.get("latency")) l.latency = duration(*d, m.child("latency"));
    if (!l.bandwidth_bps && !l.latency) {
      fail(body, path, "give bandwidth and/or latency (what the link changes to)");
    }
    l.at = trigger(m.require("at"), m.child("at"));
    ev.what = std::move(l);
  } else if (type == "fail") {
    const MapView m(*this, body, path, {"worker", "at"});
    FailEvent f;
    f.worker = worker(m.require("worker"), m.child("worker"), workers);
    f.at = trigger(m.require("at"), m.child("at"));
    ev.what = f;
  } else {
    fail(key, ipath, "unknown event type '" + type + "' (known: " + kTypes + ")");
  }
  return ev;
}

void Reader::events(const Node& n, int workers, Scenario& sc, std::vector<NameRef>& refs) const {
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

Sweep Reader::sweep(const Node& n, const Node& root) const {
  const MapView m(*this, n, "sweep", {"key", "values"});
  Sweep sw;
  sw.key = string(m.require("key"), "sweep.key");
  if (sw.key == "sweep" || sw.key.rfind("sweep.", 0) == 0) {
    fail(m.require("key"), "sweep.key", "a sweep cannot sweep itself");
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
      Reader variant_reader(*this);
      variant_reader.apply_override(variant, sw.key + "=" + value);
      variant_reader.build(variant);
    } catch (const ScenarioError& e) {
      std::string why = e.what();
      if (const auto at = why.find(": "); at != std::string::npos) why = why.substr(at + 2);
      fail(values[i], path, sw.key + "=" + value + " gives a bad scenario: " + why);
    }
    sw.values.push_back(value);
  }
  return sw;
}

// A YAML value on one line, as --set would take it: "1024", "{name: adaptive_batch_size, ...}".
std::string flow_yaml(const Node& n) {
  YAML::Emitter out;
  out.SetMapFormat(YAML::Flow);
  out.SetSeqFormat(YAML::Flow);
  out << n;
  return out.c_str();
}

// NAME: {key.path: value, ...} for each variant. Only the shape is checked here; what each variant
// makes of the scenario is checked by build_variants, once the whole file is known.
std::vector<Variant> Reader::variants(const Node& n) const {
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
        const auto parts = split_key(key);
        if (std::any_of(parts.begin(), parts.end(), [](const auto& p) { return p.empty(); })) {
          fail(e->first, path,
               "empty key in '" + key +
                   "'; expected a key path like steps or workload.batch_per_worker");
        }
        if (parts.front() == "variants" || parts.front() == "sweep") {
          fail(e->first, path + "." + key, "a variant cannot set '" + parts.front() + "'", false);
        }
        if (std::find(keys.begin(), keys.end(), key) != keys.end()) {
          fail(e->first, path + "." + key, "duplicate key '" + key + "' in " + path, false);
        }
        keys.push_back(key);
        variant.overrides.push_back(key + "=" + flow_yaml(e->second));
      }
    }
    out.push_back(std::move(variant));
  }
  return out;
}

void Reader::build_variants(Scenario& sc, const std::string& yaml_text,
                            const std::vector<std::string>& overrides) const {
  for (Variant& variant : sc.variants) {
    Reader r(file_);
    Node root = YAML::Load(yaml_text);
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
        const std::string target = set_path(root, split_key(key.Scalar()), value);
        // A variant key given by --set has no place in the file: its errors name the override.
        if (from_override(path)) r.overridden_.push_back(target);
        r.placed_.emplace_back(target, key.Mark());
      } catch (const std::invalid_argument& e) {
        fail(key, path, e.what());
      }
    }
    try {
      variant.scenario = std::make_shared<const Scenario>(r.build(root));
    } catch (const ScenarioError& e) {
      // The node at fault may be the variant's or the base's: say which variant made it fail.
      std::string what = e.what();
      if (e.line() > 0) {
        const auto at = what.find(": ", e.file().size());
        what = what.substr(at == std::string::npos ? 0 : at + 2);
        throw ScenarioError(e.file(), e.line(), e.column(),
                            "variant '" + variant.name + "': " + what);
      }
      throw ScenarioError(e.file(), 0, 0, what + " (in variant '" + variant.name + "')");
    }
  }
}

// "none", a name, {name: ..., params...}, or a list of names and maps. Each policy is built once
// here so a bad parameter is reported at its place in the file.
std::vector<PolicySpec> Reader::policies(const Node& n) const {
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

Scenario Reader::build(const Node& root) const {
  if (!root.IsMap()) {
    fail(root, "",
         "expected a map of scenario settings (steps, topology, ...), got " + describe(root));
  }
  // clang-format off
  const MapView m(*this, root, "",
                  {"name", "description", "seed", "steps", "world", "flow_tcp", "topology",
                   "workload", "strategy", "optimizer", "chunk", "timeout", "policy", "elastic",
                   "monitoring", "tcp_samples", "tcp_recovery", "events", "sweep", "variants"});
  // clang-format on
  Scenario sc;
  sc.file = file_;
  sc.name = std::filesystem::path(file_).stem().string();
  if (const auto v = m.get("name")) sc.name = string(*v, "name");
  if (const auto v = m.get("description")) sc.description = string(*v, "description");
  if (const auto v = m.get("seed")) sc.seed = static_cast<std::uint64_t>(integer(*v, "seed", 0));
  sc.steps = int32(m.require("steps"), "steps", 1);
  if (const auto v = m.get("world")) sc.world = option<WorldKind>(*v, "world", "a world name", "world");
  if (const auto v = m.get("flow_tcp"))
    sc.flow_tcp = option<FlowSharing>(*v, "flow_tcp", "a flow-world TCP model", "flow-world TCP model");
  sc.topology = topology(m.require("topology"));
  if (const auto v = m.get("workload")) sc.workload = workload(*v);
  if (const auto v = m.get("strategy")) {
    const std::string s = scalar(*v, "strategy", "a strategy name");
    const auto parsed = parse_strategy_name(s);
    if (!parsed) {
      std::vector<std::string> known;
      for (const auto k : kAllStrategyNames)
        known.emplace_back(strategy_name(k));
      fail(*v, "strategy", "unknown strategy '" + s + "' (known: " + join(known) + ")");
    }
    sc.strategy = *parsed;
  }
  if (const auto v = m.get("optimizer")) {
    const std::string o = scalar(*v, "optimizer", "an optimizer name");
    if (o != "ssgd" && o != "sma" && o != "pair_avg" && o != "ada_sgd")
      fail(*v, "optimizer", "unknown optimizer '" + o + "' (known: ssgd, sma, pair_avg, ada_sgd)");
    if (o != "ssgd" && !sc.workload.numeric) {
      // Refused rather than run as S-SGD: their traffic is the model, and it needs a model.
      fail(*v, "optimizer", "'" + o + "' needs a real model: set workload.numeric");
    }
    sc.optimizer = o;
  }
  if (const auto v = m.get("chunk")) {
    sc.chunk_bytes = size(*v, "chunk");
    if (sc.chunk_bytes == 0) fail(*v, "chunk", "must be positive, got " + v->Scalar());
  }
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
  if (const auto v = m.get("monitoring")) {
    const MapView mm(*this, *v, "monitoring", {"ping_every"});
    if (const auto p = mm.get("ping_every")) sc.ping_every = int32(*p, "monitoring.ping_every", 0);
  }
  if (const auto v = m.get("sweep")) sc.sweep = sweep(*v, root);
  if (const auto v = m.get("variants")) {
    if (sc.sweep)
      fail(m.key_node("variants"), "variants", "give either sweep or variants, not both");
    sc.variants = variants(*v);
  }
  std::vector<NameRef> refs;
  const bool star = sc.topology.kind == TopologyConfig::Kind::star;
  const int workers =
      static_cast<int>(star ? std::int64_t{sc.topology.hosts} * sc.topology.workers_per_host
                            : std::int64_t{sc.topology.leaves} * sc.topology.hosts_per_leaf *
                                  sc.topology.workers_per_host);
  if (const auto v = m.get("events")) events(*v, workers, sc, refs);
  if (const auto v = m.get("elastic")) {
    const MapView em(*this, *v, "elastic", {"initial_workers", "config_latency", "spawn_delay"});
    if (const auto w = em.get("initial_workers"))
      sc.elastic.initial_workers = int32(*w, "elastic.initial_workers", 1, workers);
    if (const auto d = em.get("config_latency"))
      sc.elastic.config_latency = duration(*d, "elastic.config_latency");
    if (const auto d = em.get("spawn_delay"))
      sc.elastic.spawn_delay = duration(*d, "elastic.spawn_delay");
  }

  // Names: "outside" exists when something names it (the host, or its link).
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
  return sc;
}

}  // namespace

Scenario parse_scenario(const std::string& yaml_text, const std::string& file,
                        const std::vector<std::string>& overrides) {
  Reader reader(file);
  Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    const int line = e.mark.line < 0 ? 0 : e.mark.line + 1;
    const int column = e.mark.line < 0 ? 0 : e.mark.column + 1;
    throw ScenarioError(file, line, column, "invalid YAML: " + e.msg);
  }
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
    const int line = e.mark.line < 0 ? 0 : e.mark.line + 1;
    const int column = e.mark.line < 0 ? 0 : e.mark.column + 1;
    throw ScenarioError(file, line, column, e.msg);
  }
}

Scenario load_scenario(const std::string& path, const std::vector<std::string>& overrides) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw ScenarioError(path, 0, 0, "cannot read file: " + std::string(std::strerror(errno)));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw ScenarioError(path, 0, 0, "cannot read file");
  return parse_scenario(text.str(), path, overrides);
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
