#include <algorithm>
#include <array>
#include <cctype>
#include <iterator>
#include <map>
#include <mutex>
#include <ostream>
#include <string>
#include <unordered_map>

#include "topology/forest.h"
#include "topology/strategy.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace kf {
namespace {

struct NamedStrategy {
  StrategyName id;
  std::string_view name;
};

constexpr std::array<NamedStrategy, std::size(kAllStrategyNames)> kNames = {{
    {StrategyName::star, "STAR"},
    {StrategyName::multi_star, "MULTI_STAR"},
    {StrategyName::tree, "TREE"},
    {StrategyName::binary_tree, "BINARY_TREE"},
    {StrategyName::binary_tree_star, "BINARY_TREE_STAR"},
    {StrategyName::multi_binary_tree_star, "MULTI_BINARY_TREE_STAR"},
    {StrategyName::clique, "CLIQUE"},
    {StrategyName::ring, "RING"},
    {StrategyName::automatic, "AUTO"},
    {StrategyName::ring_rs_ag, "RING_RS_AG"},
    {StrategyName::halving_doubling, "HALVING_DOUBLING"},
    {StrategyName::ring_rs_ag_bidir, "RING_RS_AG_BIDIR"},
}};

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::toupper(static_cast<unsigned char>(x)) ==
                  std::toupper(static_cast<unsigned char>(y));
         });
}

// Ranks grouped by host: masters[j] is the first rank of the j-th host (by first appearance),
// locals[j] the other ranks of that host, ascending.
struct HostLayout {
  std::vector<int> masters;
  std::vector<std::vector<int>> locals;
};

HostLayout host_layout(std::span<const int> host_of) {
  HostLayout layout;
  std::unordered_map<int, std::size_t> index_of_host;
  for (std::size_t r = 0; r < host_of.size(); ++r) {
    auto [it, inserted] = index_of_host.try_emplace(host_of[r], layout.masters.size());
    if (inserted) {
      layout.masters.push_back(static_cast<int>(r));
      layout.locals.emplace_back();
    } else {
      layout.locals[it->second].push_back(static_cast<int>(r));
    }
  }
  return layout;
}

void add_star(Graph& g, int root, std::span<const int> leaves) {
  for (int v : leaves) {
    if (v != root) g.add_edge(root, v);
  }
}

void add_intra_host_stars(Graph& g, const HostLayout& layout) {
  for (std::size_t j = 0; j < layout.masters.size(); ++j) {
    add_star(g, layout.masters[j], layout.locals[j]);
  }
}

// Heap-shaped binary tree over `nodes`: nodes[j] -> nodes[2j+1], nodes[2j+2].
void add_binary_tree(Graph& g, std::span<const int> nodes) {
  for (std::size_t j = 0; j < nodes.size(); ++j) {
    for (std::size_t child : {2 * j + 1, 2 * j + 2}) {
      if (child < nodes.size()) g.add_edge(nodes[j], nodes[child]);
    }
  }
}

std::vector<int> iota_ranks(int n) {
  std::vector<int> ranks(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r)
    ranks[static_cast<std::size_t>(r)] = r;
  return ranks;
}

GraphPair star_pair(int n, int root) {
  Graph b(n);
  add_star(b, root, iota_ranks(n));
  return pair_from_broadcast(std::move(b));
}

GraphPair multi_star_pair(int n, const HostLayout& layout, int root_master) {
  Graph b(n);
  add_star(b, root_master, layout.masters);
  add_intra_host_stars(b, layout);
  return pair_from_broadcast(std::move(b));
}

GraphPair tree_pair(int n, const HostLayout& layout) {
  Graph b(n);
  add_intra_host_stars(b, layout);
  add_star(b, layout.masters.front(), layout.masters);
  return pair_from_broadcast(std::move(b));
}

GraphPair binary_tree_pair(int n) {
  Graph b(n);
  add_binary_tree(b, iota_ranks(n));
  return pair_from_broadcast(std::move(b));
}

GraphPair binary_tree_star_pair(int n, const HostLayout& layout, std::span<const int> masters) {
  Graph b(n);
  add_intra_host_stars(b, layout);
  add_binary_tree(b, masters);
  return pair_from_broadcast(std::move(b));
}

// KungFu's rotating-root pipelined chain: the reduce chain starts right after the root and ends
// at it, the broadcast chain starts at the root. It is deliberately not the broadcast reversed, so
// that with n roots every link carries reduce and broadcast traffic in the same direction.
GraphPair ring_pair(int n, int root) {
  Graph b(n);
  Graph r(n);
  for (int i = 0; i + 1 < n; ++i) {
    b.add_edge((root + i) % n, (root + i + 1) % n);
    r.add_edge((root + 1 + i) % n, (root + 2 + i) % n);
  }
  for (int v = 0; v < n; ++v)
    r.add_edge(v, v);
  return GraphPair{std::move(r), std::move(b)};
}

std::vector<GraphPair> make_pairs(StrategyName name, int n, const HostLayout& layout) {
  std::vector<GraphPair> pairs;
  const auto hosts = layout.masters.size();
  switch (name) {
    case StrategyName::star:
      pairs.push_back(star_pair(n, 0));
      break;
    case StrategyName::multi_star:
      for (int m : layout.masters)
        pairs.push_back(multi_star_pair(n, layout, m));
      break;
    case StrategyName::tree:
      pairs.push_back(tree_pair(n, layout));
      break;
    case StrategyName::binary_tree:
      pairs.push_back(binary_tree_pair(n));
      break;
    case StrategyName::automatic:
      if (hosts == 1) {
        pairs.push_back(star_pair(n, 0));
        break;
      }
      [[fallthrough]];
    case StrategyName::binary_tree_star:
    case StrategyName::ring_rs_ag:
    case StrategyName::ring_rs_ag_bidir:
    case StrategyName::halving_doubling:
      pairs.push_back(binary_tree_star_pair(n, layout, layout.masters));
      break;
    case StrategyName::multi_binary_tree_star:
      for (std::size_t k = 0; k < hosts; ++k) {
        std::vector<int> rotated = layout.masters;
        std::rotate(rotated.begin(), rotated.begin() + static_cast<std::ptrdiff_t>(k),
                    rotated.end());
        pairs.push_back(binary_tree_star_pair(n, layout, rotated));
      }
      break;
    case StrategyName::clique:
      for (int r = 0; r < n; ++r)
        pairs.push_back(star_pair(n, r));
      break;
    case StrategyName::ring:
      for (int r = 0; r < n; ++r)
        pairs.push_back(ring_pair(n, r));
      break;
  }
  if (pairs.empty()) {
    throw GraphError("make_strategy: unknown strategy " + std::to_string(static_cast<int>(name)));
  }
  return pairs;
}

Algorithm algorithm_of(StrategyName name) {
  switch (name) {
    case StrategyName::automatic:
      return Algorithm::by_size;
    case StrategyName::ring_rs_ag:
      return Algorithm::ring_rs_ag;
    case StrategyName::halving_doubling:
      return Algorithm::halving_doubling;
    case StrategyName::ring_rs_ag_bidir:
      return Algorithm::ring_rs_ag_bidir;
    default:
      return Algorithm::graph_pairs;
  }
}

void validate_host_of(std::span<const int> host_of) {
  if (host_of.empty()) throw GraphError("make_strategy: no ranks (host_of is empty)");
  for (std::size_t r = 0; r < host_of.size(); ++r) {
    if (host_of[r] < 0) {
      throw GraphError("make_strategy: host of rank " + std::to_string(r) + " is " +
                       std::to_string(host_of[r]) + ", a negative host index");
    }
  }
}

// Little-endian, fixed-width serialization so the digest does not depend on the host's byte
// order or on the width of int.
class ByteWriter {
 public:
  void u8(std::uint8_t v) { bytes_.push_back(v); }
  void u32(std::uint32_t v) {
    for (int i = 0; i < 4; ++i)
      bytes_.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
  }
  void str(std::string_view s) {
    u32(static_cast<std::uint32_t>(s.size()));
    bytes_.insert(bytes_.end(), s.begin(), s.end());
  }
  void graph(const Graph& g) {
    const auto edges = g.edges();
    u32(static_cast<std::uint32_t>(g.size()));
    u32(static_cast<std::uint32_t>(edges.size()));
    for (const auto& [from, to] : edges) {
      u32(static_cast<std::uint32_t>(from));
      u32(static_cast<std::uint32_t>(to));
    }
  }
  const std::vector<std::uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<std::uint8_t> bytes_;
};

// Bump when the serialization changes, so old and new peers never agree by accident.
constexpr std::uint8_t kDigestFormat = 1;

}  // namespace

// For a forest (subset collectives) there are several roots; the smallest one is returned so the
// answer is deterministic on every peer.
int GraphPair::root() const {
  for (int v = 0; v < broadcast.size(); ++v) {
    if (broadcast.prevs(v).empty()) return v;
  }
  throw GraphError("graph pair: broadcast graph of " + std::to_string(broadcast.size()) +
                   " nodes has no root (every node has a prev)");
}

std::string_view strategy_name(StrategyName s) {
  for (const auto& entry : kNames) {
    if (entry.id == s) return entry.name;
  }
  return "UNKNOWN";
}

std::optional<StrategyName> parse_strategy_name(std::string_view name) {
  for (const auto& entry : kNames) {
    if (iequals(entry.name, name)) return entry.id;
  }
  return std::nullopt;
}

std::uint64_t Strategy::digest() const {
  ByteWriter w;
  w.u8(kDigestFormat);
  w.str(name);
  w.u8(static_cast<std::uint8_t>(algorithm));
  w.u32(static_cast<std::uint32_t>(pairs.size()));
  for (const auto& pair : pairs) {
    w.graph(pair.reduce);
    w.graph(pair.broadcast);
  }
  return XXH3_64bits(w.bytes().data(), w.bytes().size());
}

std::vector<int> host_masters(std::span<const int> host_of) {
  return host_layout(host_of).masters;
}

Strategy make_strategy(StrategyName name, std::span<const int> host_of) {
  validate_host_of(host_of);
  const int n = static_cast<int>(host_of.size());
  Strategy s;
  s.name = std::string(strategy_name(name));
  s.algorithm = algorithm_of(name);
  s.pairs = make_pairs(name, n, host_layout(host_of));
  for (const auto& pair : s.pairs)
    validate_graph_pair(pair);
  return s;
}

std::shared_ptr<const Strategy> shared_strategy(StrategyName name, std::span<const int> host_of) {
  using Key = std::pair<StrategyName, std::vector<int>>;
  static std::mutex mutex;
  static std::map<Key, std::weak_ptr<const Strategy>> cache;
  Key key{name, std::vector<int>(host_of.begin(), host_of.end())};
  const std::lock_guard lock(mutex);
  if (const auto it = cache.find(key); it != cache.end()) {
    if (auto kept = it->second.lock()) return kept;
  }
  std::erase_if(cache, [](const auto& entry) { return entry.second.expired(); });
  auto built = std::make_shared<const Strategy>(make_strategy(name, host_of));
  cache[std::move(key)] = built;
  return built;
}

std::shared_ptr<const Strategy> shared_with_algorithm(
    const std::shared_ptr<const Strategy>& strategy, Algorithm algorithm) {
  struct Entry {
    std::weak_ptr<const Strategy> source;  // the key's owner: an address can be reused
    std::weak_ptr<const Strategy> built;
  };
  using Key = std::pair<const Strategy*, Algorithm>;
  static std::mutex mutex;
  static std::map<Key, Entry> cache;
  const std::lock_guard lock(mutex);
  const Key key{strategy.get(), algorithm};
  if (const auto it = cache.find(key); it != cache.end()) {
    auto kept = it->second.built.lock();
    if (kept && it->second.source.lock() == strategy) return kept;
  }
  std::erase_if(cache, [](const auto& entry) {
    return entry.second.source.expired() || entry.second.built.expired();
  });
  Strategy s = *strategy;
  s.algorithm = algorithm;
  auto built = std::make_shared<const Strategy>(std::move(s));
  cache[key] = {strategy, built};
  return built;
}

GraphPair pair_from_broadcast(Graph broadcast) {
  Graph reduce = broadcast.reversed();
  for (int v = 0; v < reduce.size(); ++v)
    reduce.add_edge(v, v);
  return GraphPair{std::move(reduce), std::move(broadcast)};
}

std::ostream& operator<<(std::ostream& os, StrategyName s) {
  return os << strategy_name(s);
}

}  // namespace kf
