#include "topology/physical.h"

#include <stdexcept>

namespace kf {

namespace {

// Built with append: GCC 12 warns falsely (-Wrestrict) on chained std::string operator+ at -O3.
std::string joined(const std::string& a, char sep, const std::string& b) {
  std::string out;
  out.reserve(a.size() + 1 + b.size());
  out.append(a).push_back(sep);
  out.append(b);
  return out;
}

std::string numbered(const char* prefix, std::size_t i) {
  std::string out(prefix);
  out.append(std::to_string(i));
  return out;
}

}  // namespace

int PhysicalTopology::add_node(NodeKind kind, std::string name) {
  nodes.push_back({kind, std::move(name)});
  return static_cast<int>(nodes.size()) - 1;
}

int PhysicalTopology::add_link(int a, int b, const LinkSpec& spec) {
  links.push_back({a, b, spec,
                   joined(nodes.at(static_cast<std::size_t>(a)).name, '-',
                          nodes.at(static_cast<std::size_t>(b)).name)});
  return static_cast<int>(links.size()) - 1;
}

int PhysicalTopology::find_node(const std::string& name) const {
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

int PhysicalTopology::find_link(const std::string& name) const {
  for (std::size_t i = 0; i < links.size(); ++i) {
    const auto& l = links[i];
    const std::string reverse = joined(nodes[static_cast<std::size_t>(l.b)].name, '-',
                                       nodes[static_cast<std::size_t>(l.a)].name);
    if (l.name == name || reverse == name) return static_cast<int>(i);
  }
  return -1;
}

namespace {

// Adds one host's workers under `uplink_to` and returns the node that carries the host's uplink.
void add_host(PhysicalTopology& t, int host, int workers_per_host, int attach_to,
              const LinkSpec& link, const LinkSpec& intra_host) {
  if (workers_per_host == 1) {
    const int w = t.add_node(NodeKind::worker, numbered("w", t.worker_node.size()));
    t.worker_node.push_back(w);
    t.worker_host.push_back(host);
    t.add_link(w, attach_to, link);
    return;
  }
  const int h = t.add_node(NodeKind::host, numbered("host", static_cast<std::size_t>(host)));
  t.add_link(h, attach_to, link);
  for (int j = 0; j < workers_per_host; ++j) {
    const int w = t.add_node(NodeKind::worker, numbered("w", t.worker_node.size()));
    t.worker_node.push_back(w);
    t.worker_host.push_back(host);
    t.add_link(w, h, intra_host);
  }
}

void check_counts(int a, const char* what) {
  if (a < 1) throw std::invalid_argument(std::string(what) + " must be at least 1");
}

}  // namespace

PhysicalTopology star_topology(int hosts, int workers_per_host, const LinkSpec& link,
                               const LinkSpec& intra_host) {
  check_counts(hosts, "hosts");
  check_counts(workers_per_host, "workers per host");
  PhysicalTopology t;
  const int sw = t.add_node(NodeKind::switch_, "switch");
  for (int h = 0; h < hosts; ++h)
    add_host(t, h, workers_per_host, sw, link, intra_host);
  return t;
}

PhysicalTopology leaf_spine_topology(int leaves, int spines, int hosts_per_leaf,
                                     int workers_per_host, const LinkSpec& host_link,
                                     const LinkSpec& uplink, const LinkSpec& intra_host) {
  check_counts(leaves, "leaves");
  check_counts(spines, "spines");
  check_counts(hosts_per_leaf, "hosts per leaf");
  check_counts(workers_per_host, "workers per host");
  PhysicalTopology t;
  std::vector<int> spine_nodes;
  for (int s = 0; s < spines; ++s) {
    spine_nodes.push_back(
        t.add_node(NodeKind::switch_, numbered("spine", static_cast<std::size_t>(s))));
  }
  int host = 0;
  for (int l = 0; l < leaves; ++l) {
    const int leaf = t.add_node(NodeKind::switch_, numbered("leaf", static_cast<std::size_t>(l)));
    for (int s : spine_nodes)
      t.add_link(leaf, s, uplink);
    for (int h = 0; h < hosts_per_leaf; ++h) {
      add_host(t, host++, workers_per_host, leaf, host_link, intra_host);
    }
  }
  return t;
}

}  // namespace kf
