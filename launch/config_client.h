// The client side of the elastic config server (config_server.h): what rank 0 uses to propose a
// resized cluster and what peers and runners use to read it. Every call opens its own connection
// with connection and read timeouts, so a dead or silent server costs at most about `timeout`
// per call, and a client is safe to share between threads. An https URL is checked like a
// browser would: the server's certificate must chain to the trusted CA and name the URL's host.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

#include "runtime/cluster_spec.h"

namespace kf {

// The server could not be reached at all (refused, timed out, name not resolved), as opposed to
// an HTTP answer refusing the request (std::runtime_error).
class ConfigServerUnreachable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class ConfigClient {
 public:
  // `url`: "http[s]://host:port" or "http[s]://host:port/config" (KUNGFU_CONFIG_SERVER's
  // form). Throws std::invalid_argument on another form. `token`: sent as "Authorization: Bearer
  // <token>". `ca_file`, for https: the CA (PEM) the server's certificate must chain to; empty:
  // KUNGFU_TLS_CA when set (the job's CA, which kfrun -tls-ca sets for every worker), else the
  // system's trust store. A CA file that cannot be used throws std::invalid_argument naming it.
  explicit ConfigClient(const std::string& url, std::string token = "",
                        std::chrono::milliseconds timeout = std::chrono::seconds(5),
                        std::string ca_file = "");

  // Each throws std::runtime_error naming the URL and the HTTP status and reason on a refusal, or
  // why the server's certificate is not trusted; ConfigServerUnreachable naming the connection
  // error when there is no answer (a TLS handshake that fails included).
  std::optional<ClusterSpec> get() const;  // nullopt when none is stored (404)
  // A past version, nullopt when the server does not keep it (404).
  std::optional<ClusterSpec> get_version(std::uint64_t version) const;
  ClusterSpec put(const ClusterSpec& spec) const;    // the stored spec, with its new version
  ClusterSpec reset(const ClusterSpec& spec) const;  // stored as given
  void clear() const;

  const std::string& url() const { return url_; }

 private:
  std::string url_;          // as given, for messages
  std::string scheme_host_;  // "http://host:port" or "https://host:port"
  std::string path_;         // "/config"
  std::string token_;
  std::string ca_file_;  // https: the trusted CA; empty: the system's trust store
  std::chrono::milliseconds timeout_;
};

// Polls GET every `poll_interval` until the stored version is >= min_version and returns that
// spec. A missing config or a failing call is retried until `timeout`; then throws
// std::runtime_error saying what was seen last.
ClusterSpec wait_for_version(
    const ConfigClient& client, std::uint64_t min_version, std::chrono::milliseconds timeout,
    std::chrono::milliseconds poll_interval = std::chrono::milliseconds(100));

}  // namespace kf
