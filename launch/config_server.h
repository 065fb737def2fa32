// The elastic config server, as KungFu's: one ClusterSpec behind REST on /config, so an elastic
// job has one place where a proposed membership is written (by rank 0 on resize) and read (by
// every peer and runner). GET (404 when none), PUT (validate, store with the version bumped),
// POST (reset: store as given), DELETE (clear); GET /config?version=N answers a recent version
// (the latest 1,024 since the last reset are kept; 404 for others); GET /health answers "ok". With a token every
// /config request must carry "Authorization: Bearer <token>" (else 401). Serves on its own
// thread (cpp-httplib) until stop() or destruction.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "runtime/cluster_spec.h"

namespace kf {

struct ConfigServerOptions {
  std::string addr = "127.0.0.1";      // "0.0.0.0" to serve other hosts
  std::uint16_t port = 0;              // 0: an ephemeral port, see port()
  std::string token;                   // the job's secret; empty: no authentication
  bool verbose = false;                // one stderr line per request
  std::optional<ClusterSpec> initial;  // stored as given (validated)
};

class ConfigServer {
 public:
  // Binds and starts serving before returning. Throws std::runtime_error naming the address when
  // it cannot bind, std::invalid_argument when `initial` is not a valid cluster.
  explicit ConfigServer(ConfigServerOptions options);
  ~ConfigServer();
  ConfigServer(const ConfigServer&) = delete;
  ConfigServer& operator=(const ConfigServer&) = delete;

  std::uint16_t port() const;
  // What GET /config would return now.
  std::optional<ClusterSpec> current() const;
  // Stops serving and joins the thread; idempotent.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kf
