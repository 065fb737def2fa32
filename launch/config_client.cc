#include "launch/config_client.h"

#include <fmt/format.h>
#include <httplib.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <thread>

#include "launch/cluster_json.h"
#include "real/tls_context.h"

namespace kf {
namespace {

constexpr const char* kJson = "application/json";

// Trims the body an error reply carries to one readable line.
std::string reason_of(const std::string& body) {
  std::string r = body.substr(0, 300);
  while (!r.empty() && (r.back() == '\n' || r.back() == '\r' || r.back() == ' '))
    r.pop_back();
  return r.empty() ? "no reason given" : r;
}

}  // namespace

ConfigClient::ConfigClient(const std::string& url, std::string token,
                           std::chrono::milliseconds timeout, std::string ca_file)
    : url_(url), token_(std::move(token)), timeout_(timeout) {
  const auto bad = [&](const char* why) {
    return std::invalid_argument(
        fmt::format("config server URL '{}': {} (want http[s]://host:port[/config])", url, why));
  };
  const auto scheme_end = url.find("://");
  if (scheme_end == std::string::npos) throw bad("no scheme");
  const std::string scheme = url.substr(0, scheme_end);
  if (scheme != "http" && scheme != "https") throw bad("only http and https are served");
  const auto rest_begin = scheme_end + 3;
  const auto slash = url.find('/', rest_begin);
  const std::string host_port = url.substr(rest_begin, slash - rest_begin);
  const auto colon = host_port.rfind(':');
  if (host_port.empty() || colon == 0) throw bad("no host");
  if (colon == std::string::npos) throw bad("no port");
  const std::string port = host_port.substr(colon + 1);
  if (port.empty() || port.find_first_not_of("0123456789") != std::string::npos ||
      port.size() > 5 || std::stoul(port) == 0 || std::stoul(port) > 65535) {
    throw bad("port must be 1..65535");
  }
  scheme_host_ = scheme + "://" + host_port;
  path_ = slash == std::string::npos ? "/" : url.substr(slash);
  if (path_ == "/") path_ = "/config";
  if (scheme == "https") {
    tls::PemFile ca{std::move(ca_file), "CA file"};
    if (ca.path.empty()) {
      if (const char* env = std::getenv("KUNGFU_TLS_CA"); env != nullptr && *env != '\0')
        ca = {env, "KUNGFU_TLS_CA"};
    }
    if (!ca.path.empty()) tls::check_ca_file(ca);  // a bad path fails here, not at each call
    ca_file_ = ca.path;
  }
}

namespace {

// Why an https server was not trusted, from OpenSSL's verdict on its certificate.
std::string untrusted(const char* method, const std::string& url, const std::string& ca_file,
                      long verify_result) {
  const std::string why = verify_result == X509_V_OK
                              ? std::string("it does not name the URL's host")
                              : std::string(X509_verify_cert_error_string(verify_result));
  return fmt::format(
      "config server {} {}: its TLS certificate is not trusted: {} (checked against {})", method,
      url, why,
      ca_file.empty() ? "the system's trust store; set KUNGFU_TLS_CA to the job's CA" : ca_file);
}

// One request on a fresh connection; returns the response or throws naming the URL.
template <class Send>
httplib::Response call(const std::string& scheme_host, const std::string& url,
                       const std::string& token, const std::string& ca_file,
                       std::chrono::milliseconds timeout, const char* method, Send send) {
  httplib::Client http(scheme_host);
  http.set_connection_timeout(timeout);
  http.set_read_timeout(timeout);
  http.set_write_timeout(timeout);
  http.set_keep_alive(false);
  if (!token.empty()) http.set_bearer_token_auth(token);
  if (scheme_host.starts_with("https:")) {
    http.enable_server_certificate_verification(true);
    if (!ca_file.empty()) http.set_ca_cert_path(ca_file);
    // OpenSSL checks the URL's host against the certificate during the chain's verification, so
    // the outcome does not rest on httplib's own comparison alone (0.11's reads an uninitialised
    // address for IPv4 hosts).
    const std::string host = scheme_host.substr(8, scheme_host.rfind(':') - 8);
    X509_VERIFY_PARAM* param = SSL_CTX_get0_param(http.ssl_context());
    if (param == nullptr || (X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str()) != 1 &&
                             X509_VERIFY_PARAM_set1_host(param, host.c_str(), 0) != 1)) {
      throw std::runtime_error(fmt::format("config server {} {}: cannot check the host {}: {}",
                                           method, url, host, tls::take_errors()));
    }
  }
  auto result = send(http);
  if (!result && result.error() == httplib::Error::SSLServerVerification) {
    throw std::runtime_error(untrusted(method, url, ca_file, http.get_openssl_verify_result()));
  }
  if (!result) {
    const bool https = scheme_host.starts_with("https:");
    const char* hint = "";
    if (result.error() == httplib::Error::SSLConnection) {
      hint = ": the TLS handshake failed (does it serve https on that port?)";
    } else if (!https && (result.error() == httplib::Error::Read ||
                          result.error() == httplib::Error::Write)) {
      // A TLS server reads the plain request as a bad handshake and closes the connection: the
      // client sees that while it reads the answer, or, with a body still going out, while it
      // writes.
      hint = ": no HTTP answer (a server that serves https needs an https:// URL)";
    }
    throw ConfigServerUnreachable(fmt::format("config server {} {}: {}{} (timeout {} ms)", method,
                                              url, httplib::to_string(result.error()), hint,
                                              timeout.count()));
  }
  return *result;
}

[[noreturn]] void throw_status(const char* method, const std::string& url,
                               const httplib::Response& res) {
  throw std::runtime_error(fmt::format("config server {} {}: HTTP {}: {}", method, url, res.status,
                                       reason_of(res.body)));
}

ClusterSpec parse_reply(const char* method, const std::string& url, const httplib::Response& res) {
  try {
    return cluster_from_json(res.body);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(
        fmt::format("config server {} {}: bad reply: {}", method, url, e.what()));
  }
}

}  // namespace

std::optional<ClusterSpec> ConfigClient::get() const {
  const auto res = call(scheme_host_, url_, token_, ca_file_, timeout_, "GET",
                        [&](httplib::Client& c) { return c.Get(path_); });
  if (res.status == 404) return std::nullopt;
  if (res.status != 200) throw_status("GET", url_, res);
  return parse_reply("GET", url_, res);
}

std::optional<ClusterSpec> ConfigClient::get_version(std::uint64_t version) const {
  const auto res =
      call(scheme_host_, url_, token_, ca_file_, timeout_, "GET", [&](httplib::Client& c) {
        return c.Get(path_, httplib::Params{{"version", std::to_string(version)}},
                     httplib::Headers{});
      });
  if (res.status == 404) return std::nullopt;
  if (res.status != 200) throw_status("GET", url_, res);
  return parse_reply("GET", url_, res);
}

ClusterSpec ConfigClient::put(const ClusterSpec& spec) const {
  const auto body = cluster_to_json(spec);
  const auto res = call(scheme_host_, url_, token_, ca_file_, timeout_, "PUT",
                        [&](httplib::Client& c) { return c.Put(path_, body, kJson); });
  if (res.status != 200) throw_status("PUT", url_, res);
  return parse_reply("PUT", url_, res);
}

ClusterSpec ConfigClient::reset(const ClusterSpec& spec) const {
  const auto body = cluster_to_json(spec);
  const auto res = call(scheme_host_, url_, token_, ca_file_, timeout_, "POST",
                        [&](httplib::Client& c) { return c.Post(path_, body, kJson); });
  if (res.status != 200) throw_status("POST", url_, res);
  return parse_reply("POST", url_, res);
}

void ConfigClient::clear() const {
  const auto res = call(scheme_host_, url_, token_, ca_file_, timeout_, "DELETE",
                        [&](httplib::Client& c) { return c.Delete(path_); });
  if (res.status != 200) throw_status("DELETE", url_, res);
}

ClusterSpec wait_for_version(const ConfigClient& client, std::uint64_t min_version,
                             std::chrono::milliseconds timeout,
                             std::chrono::milliseconds poll_interval) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string last = "nothing yet";
  while (true) {
    try {
      if (auto spec = client.get()) {
        if (spec->version() >= min_version) return *spec;
        last = fmt::format("version {}", spec->version());
      } else {
        last = "no config stored";
      }
    } catch (const std::runtime_error& e) {
      last = e.what();
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) break;
    std::this_thread::sleep_for(
        std::min<std::chrono::steady_clock::duration>(poll_interval, deadline - now));
  }
  throw std::runtime_error(fmt::format("config server {}: no version >= {} within {} ms (last: {})",
                                       client.url(), min_version, timeout.count(), last));
}

}  // namespace kf
