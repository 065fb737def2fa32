#include "launch/config_server.h"

#include <fmt/format.h>
#include <httplib.h>
#include <openssl/crypto.h>
#include <openssl/ssl.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <limits>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "launch/cluster_json.h"
#include "real/rate_limited_log.h"
#include "real/tls_context.h"

namespace kf {
namespace {

constexpr const char* kJson = "application/json";
constexpr const char* kText = "text/plain";

// Parses and validates a request body (valid_cluster_from_json, which tests/fuzz fuzzes); the
// reason on failure.
std::optional<std::string> parse_spec(const std::string& body, ClusterSpec& out) {
  try {
    out = valid_cluster_from_json(body);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return std::nullopt;
}

void fail(httplib::Response& res, int status, const std::string& reason) {
  res.status = status;
  res.set_content(reason + "\n", kText);
}

std::string reason_line(const std::string& body) {
  std::string r = body.substr(0, 200);
  while (!r.empty() && (r.back() == '\n' || r.back() == ' '))
    r.pop_back();
  return r;
}

// Plain HTTP, or HTTPS (TLS 1.2 or later) with the options' certificate and key.
std::unique_ptr<httplib::Server> make_http(const ConfigServerOptions& o) {
  const bool cert = !o.tls_cert.path.empty(), key = !o.tls_key.path.empty();
  if (!cert && !key) return std::make_unique<httplib::Server>();
  if (cert != key) {
    throw std::invalid_argument(fmt::format("HTTPS needs a certificate and its key: {} without {}",
                                            cert ? o.tls_cert.label : o.tls_key.label,
                                            cert ? o.tls_key.label : o.tls_cert.label));
  }
  std::string error;
  auto server = std::make_unique<httplib::SSLServer>([&](SSL_CTX& ctx) {
    try {  // called from inside the constructor: the error is picked up below
      if (SSL_CTX_set_min_proto_version(&ctx, TLS1_2_VERSION) != 1)
        throw std::runtime_error("cannot require TLS 1.2: " + tls::take_errors());
      tls::use_certificate(ctx, o.tls_cert, o.tls_key);
      return true;
    } catch (const std::exception& e) {
      error = e.what();
      return false;
    }
  });
  if (!server->is_valid()) {
    throw std::invalid_argument(error.empty() ? "cannot serve HTTPS: " + tls::take_errors()
                                              : error);
  }
  return server;
}

}  // namespace

bool is_loopback_address(const std::string& addr) {
  return addr == "localhost" || addr == "::1" || addr.starts_with("127.");
}

struct ConfigServer::Impl {
  ConfigServerOptions options;
  std::string expected_auth;              // "Bearer <token>", empty without a token
  std::unique_ptr<httplib::Server> http;  // an httplib::SSLServer for HTTPS
  std::thread thread;
  std::atomic<bool> finished{false};
  int port = 0;
  std::mutex stop_mu;

  RateLimitedLog refusals{
      [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); },
      "refused requests", "[kfconfig] "};

  mutable std::mutex mu;
  std::optional<ClusterSpec> spec;
  // The latest kKeptVersions clusters stored, by version: runners that polled past a version
  // (two resizes within one poll) fetch it, so they start and stop workers version by version.
  static constexpr std::size_t kKeptVersions = 1024;
  std::map<std::uint64_t, ClusterSpec> history;

  void store(ClusterSpec next) {  // with mu held
    spec = next;
    history.insert_or_assign(next.version(), std::move(next));
    while (history.size() > kKeptVersions)
      history.erase(history.begin());
  }

  bool authorized(const httplib::Request& req) const {
    if (expected_auth.empty()) return true;
    const std::string got = req.get_header_value("Authorization");
    // Lengths may differ in the open; the bytes are compared in constant time.
    return got.size() == expected_auth.size() &&
           CRYPTO_memcmp(got.data(), expected_auth.data(), got.size()) == 0;
  }

  void get(const httplib::Request& req, httplib::Response& res) {
    std::lock_guard lock(mu);
    if (req.has_param("version")) {
      const std::string text = req.get_param_value("version");
      std::uint64_t version = 0;
      const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), version);
      if (error != std::errc() || end != text.data() + text.size())
        return fail(res, 400, "version '" + text + "': not a number");
      const auto it = history.find(version);
      if (it == history.end())
        return fail(res, 404, fmt::format("version {} is not kept", version));
      return res.set_content(cluster_to_json(it->second), kJson);
    }
    if (!spec) return fail(res, 404, "no cluster config");
    res.set_content(cluster_to_json(*spec), kJson);
  }

  void put(const httplib::Request& req, httplib::Response& res) {
    ClusterSpec next;
    if (auto reason = parse_spec(req.body, next)) return fail(res, 400, *reason);
    std::lock_guard lock(mu);
    const std::uint64_t old = spec ? spec->version() : 0;
    // A POST may store the largest version; bumping it would wrap to 1 and move the version
    // back (tests/fuzz found it).
    if (old == std::numeric_limits<std::uint64_t>::max()) {
      return fail(res, 409,
                  fmt::format("version {} is the last: the cluster version cannot move forward "
                              "(DELETE first to start a new job)",
                              old));
    }
    store(ClusterSpec(std::max<std::uint64_t>(old + 1, 1), next.runners(), next.workers()));
    res.set_content(cluster_to_json(*spec), kJson);
  }

  void reset(const httplib::Request& req, httplib::Response& res) {
    ClusterSpec next;
    if (auto reason = parse_spec(req.body, next)) return fail(res, 400, *reason);
    std::lock_guard lock(mu);
    if (spec && next.version() < spec->version()) {
      return fail(res, 409,
                  fmt::format("version {} is older than the stored {}: the cluster version only "
                              "moves forward (DELETE first to start a new job)",
                              next.version(), spec->version()));
    }
    store(next);
    res.set_content(cluster_to_json(*spec), kJson);
  }

  void clear(httplib::Response& res) {
    std::lock_guard lock(mu);
    spec.reset();
    history.clear();  // the next POST starts a new history
    res.set_content("cleared\n", kText);
  }

  void routes() {
    http->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (req.path == "/health" || authorized(req))
        return httplib::Server::HandlerResponse::Unhandled;
      fail(res, 401, "missing or wrong bearer token");
      return httplib::Server::HandlerResponse::Handled;
    });
    http->Get("/health", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("ok\n", kText);
    });
    http->Get("/config",
              [this](const httplib::Request& req, httplib::Response& res) { get(req, res); });
    http->Put("/config",
              [this](const httplib::Request& req, httplib::Response& res) { put(req, res); });
    http->Post("/config",
               [this](const httplib::Request& req, httplib::Response& res) { reset(req, res); });
    http->Delete("/config",
                 [this](const httplib::Request&, httplib::Response& res) { clear(res); });
    http->set_logger([this](const httplib::Request& req, const httplib::Response& res) {
      const bool refused = res.status >= 400;
      if (!options.verbose && !refused) return;
      const std::string line = fmt::format(
          "[kfconfig] {}:{} {} {} -> {}{}", req.remote_addr, req.remote_port, req.method, req.path,
          res.status,
          refused ? ": " + reason_line(res.body) : fmt::format(" ({} bytes)", res.body.size()));
      if (refused) {
        refusals.log(line);
      } else {
        std::fprintf(stderr, "%s\n", line.c_str());
      }
    });
  }
};

ConfigServer::ConfigServer(ConfigServerOptions options) : impl_(std::make_unique<Impl>()) {
  auto& s = *impl_;
  if (options.initial) {
    if (auto problem = options.initial->problem()) {
      throw std::invalid_argument("initial cluster config: " + *problem);
    }
    s.store(*options.initial);
  }
  if (!options.token.empty()) s.expected_auth = "Bearer " + options.token;
  s.http = make_http(options);
  s.options = std::move(options);
  s.routes();
  // Short timeouts so stop() never waits long on an idle keep-alive or a silent client.
  s.http->set_keep_alive_timeout(1);
  s.http->set_read_timeout(std::chrono::seconds(2));
  s.http->set_write_timeout(std::chrono::seconds(2));
  s.http->set_payload_max_length(1 << 20);
  // httplib's default is SO_REUSEPORT, which lets a second server share a taken port silently;
  // SO_REUSEADDR only allows a restart over TIME_WAIT.
  s.http->set_socket_options([](int fd) {
    const int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  const auto& addr = s.options.addr;
  if (s.options.port == 0) {
    s.port = s.http->bind_to_any_port(addr);
  } else {
    s.port = s.http->bind_to_port(addr, s.options.port) ? s.options.port : -1;
  }
  if (s.port <= 0) {
    throw std::runtime_error(
        fmt::format("config server: cannot listen on {}:{}", addr, s.options.port));
  }
  s.thread = std::thread([&s] {
    s.http->listen_after_bind();
    s.finished = true;
  });
  // httplib's stop() is a no-op until the loop runs, so be sure it does before handing out.
  while (!s.http->is_running() && !s.finished) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

ConfigServer::~ConfigServer() {
  stop();
}

std::uint16_t ConfigServer::port() const {
  return static_cast<std::uint16_t>(impl_->port);
}

const char* ConfigServer::scheme() const {
  return impl_->options.tls_cert.path.empty() ? "http" : "https";
}

std::optional<ClusterSpec> ConfigServer::current() const {
  std::lock_guard lock(impl_->mu);
  return impl_->spec;
}

void ConfigServer::stop() {
  std::lock_guard lock(impl_->stop_mu);
  impl_->http->stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

}  // namespace kf
