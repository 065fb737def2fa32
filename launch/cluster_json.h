// A ClusterSpec as JSON: the Protobuf JSON mapping of kf.proto.ClusterSpec, which is what the
// config server stores and serves and what `kfconfig -init` reads. One place, so the server, the
// client and the tools agree on the form.
#pragma once

#include <string>
#include <string_view>

#include "runtime/cluster_spec.h"

namespace kf {

// {"version":"3","runners":[{"host":"10.0.0.1","port":38080}],"workers":[...]}
std::string cluster_to_json(const ClusterSpec& spec);
// Throws std::invalid_argument with the parser's reason on malformed JSON, an unknown field or
// a port outside 1..65535. Does not check ClusterSpec::problem().
ClusterSpec cluster_from_json(std::string_view json);
// What the config server does with a PUT or POST body: cluster_from_json, then
// ClusterSpec::problem(). Throws std::invalid_argument with the reason its 400 answer gives.
ClusterSpec valid_cluster_from_json(std::string_view json);

}  // namespace kf
