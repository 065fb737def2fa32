// The elastic config server, as KungFu's: one ClusterSpec behind REST on /config, so an elastic
// job has one place where a proposed membership is written (by rank 0 on resize) and read (by
// every peer and runner). GET (404 when none), PUT (validate, store with the version bumped;
// 409 once it is the largest), POST (reset: store as given, but never to a version older than the
// stored one: 409), DELETE (clear: the next POST starts a new history); GET /config?version=N
// answers a recent version (the latest 1,024 since the last DELETE are kept; 404 for others);
// GET /health answers "ok". With a token every /config request must carry "Authorization: Bearer
// <token>" (else 401). Serves on its own thread (cpp-httplib) until stop() or destruction. Bodies
// over 1 MiB get 413; every refused request (4xx) is logged to stderr, at most 10 lines a second
// with a count of those left out. Given a certificate and its key it serves HTTPS only (TLS 1.2 or
// later; the token rules unchanged, now over an encrypted connection).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "real/tls_context.h"
#include "runtime/cluster_spec.h"

namespace kf {

// Is `addr` one only this host reaches: 127.0.0.0/8, "localhost" or "::1"?
bool is_loopback_address(const std::string& addr);

struct ConfigServerOptions {
  std::string addr = "127.0.0.1";      // "0.0.0.0" to serve other hosts
  std::uint16_t port = 0;              // 0: an ephemeral port, see port()
  std::string token;                   // the job's secret; empty: no authentication
  bool verbose = false;                // one stderr line per request
  std::optional<ClusterSpec> initial;  // stored as given (validated)
  // Both set: serve HTTPS with this certificate chain (the leaf first) and unencrypted key, PEM.
  // Labels name the flags the paths came from, for errors.
  tls::PemFile tls_cert{.label = "-tls-cert"};
  tls::PemFile tls_key{.label = "-tls-key"};
};

class ConfigServer {
 public:
  // Binds and starts serving before returning. Throws std::runtime_error naming the address when
  // it cannot bind, std::invalid_argument when `initial` is not a valid cluster, or when a TLS
  // file cannot be used (naming it), or only one of the two is given.
  explicit ConfigServer(ConfigServerOptions options);
  ~ConfigServer();
  ConfigServer(const ConfigServer&) = delete;
  ConfigServer& operator=(const ConfigServer&) = delete;

  std::uint16_t port() const;
  // "https" with a certificate, else "http": how the server's URL starts.
  const char* scheme() const;
  // What GET /config would return now.
  std::optional<ClusterSpec> current() const;
  // Stops serving and joins the thread; idempotent.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kf
