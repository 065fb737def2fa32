#include "launch/cluster_json.h"

#include <google/protobuf/util/json_util.h>

#include <stdexcept>

#include "proto/cluster.pb.h"

namespace kf {

std::string cluster_to_json(const ClusterSpec& spec) {
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;  // "version":"0" and empty lists are explicit
  options.preserve_proto_field_names = true;
  std::string out;
  const auto status = google::protobuf::util::MessageToJsonString(spec.to_proto(), &out, options);
  if (!status.ok()) throw std::runtime_error("cluster to JSON: " + status.ToString());
  return out;
}

ClusterSpec cluster_from_json(std::string_view json) {
  if (json.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    throw std::invalid_argument("malformed JSON: empty body");
  }
  proto::ClusterSpec p;
  const auto status = google::protobuf::util::JsonStringToMessage(
      std::string(json), &p, google::protobuf::util::JsonParseOptions{});
  if (!status.ok()) throw std::invalid_argument("malformed JSON: " + status.ToString());
  return ClusterSpec::from_proto(p);
}

ClusterSpec valid_cluster_from_json(std::string_view json) {
  ClusterSpec spec = cluster_from_json(json);
  if (const auto& problem = spec.problem()) {
    throw std::invalid_argument("invalid cluster: " + *problem);
  }
  return spec;
}

}  // namespace kf
