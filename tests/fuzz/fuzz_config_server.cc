// Fuzzes the config server's request handling end to end (launch/config_server.h): a live
// ConfigServer on 127.0.0.1 in this process, driven over real connections. cpp-httplib is
// Debian's uninstrumented library, so coverage guides the fuzzer through the server's own
// handlers (auth, GET with ?version=, PUT, POST, DELETE) and the body parsing they share with
// fuzz_cluster_json; the HTTP parsing itself is only exercised.
//
// Input: byte 0 picks the server (bit 0: one that requires the token "fuzz-token") and the form
// (bit 1: raw). Raw: the rest is sent as is on one connection, which we then half-close so that
// an incomplete request ends at once; cpp-httplib answers nothing on a half-closed connection, so
// raw inputs only check that the server survives them with a valid state. Otherwise the rest is a
// list of requests separated by lines "%%"; each is a line "METHOD TARGET [noauth|badauth]"
// followed by its body, sent as one well-formed HTTP/1.1 request (see method_of, target_of) with
// the right token unless told otherwise. Every input starts from an empty server (an authorized
// DELETE first).
//
// Contract checked (beyond no crash, no sanitizer report, no hang):
//   - every request gets an answer and no answer is a 5xx (a handler that threw);
//   - the stored cluster is always valid (ClusterSpec::problem() empty);
//   - its version only moves forward: PUT stores the previous version + 1, POST the version it
//     was given and never an older one; only DELETE clears it;
//   - to a server with a token, a request without it changes nothing and is never served: 401,
//     or cpp-httplib's own 4xx for a request it cannot parse (only /health answers);
//   - GET /config answers what is stored.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "launch/cluster_json.h"
#include "launch/config_server.h"
#include "tests/fuzz/fuzz_check.h"

namespace kf::fuzz {
namespace {

const std::string kToken = "fuzz-token";

ConfigServer& server(bool secured) {
  static std::unique_ptr<ConfigServer> open, closed;
  auto& s = secured ? closed : open;
  if (!s) s = std::make_unique<ConfigServer>(ConfigServerOptions{.token = secured ? kToken : ""});
  return *s;
}

// Does `raw` hold a whole response (headers, then Content-Length bytes of body)? A request the
// server cannot parse gets a 400 on a connection it keeps open for the next request, so the
// answer is complete before the server closes.
bool complete_response(const std::string& raw) {
  const auto end = raw.find("\r\n\r\n");
  if (end == std::string::npos) return false;
  std::size_t length = 0;
  for (std::size_t at = raw.find("\r\n"); at < end; at = raw.find("\r\n", at + 2)) {
    std::string line = raw.substr(at + 2, raw.find("\r\n", at + 2) - at - 2);
    for (char& c : line)
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (line.starts_with("content-length:")) length = std::strtoul(line.c_str() + 15, nullptr, 10);
  }
  return raw.size() >= end + 4 + length;
}

// Sends `bytes` on a fresh connection and returns the server's answer: one whole response, or
// what came before it closed. With
// `close_after`, our side is closed once the bytes are out, so that an incomplete request ends
// at once rather than at the server's read timeout; but cpp-httplib then writes no answer (it
// finds the connection closed before it writes), so complete requests with "Connection: close"
// go without.
// A connected socket to the server on 127.0.0.1:`port`. Hundreds of thousands of connections a
// run may briefly exhaust the host's ephemeral ports or the listen backlog: that is the machine,
// not the server, so a refused or unassignable connection is tried again for a second.
int connect_to(std::uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int err = 0;
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    KF_FUZZ_CHECK(fd >= 0, std::string("socket: ") + std::strerror(errno));
    // A server that neither answers nor closes within this long counts as hung.
    timeval tv{.tv_sec = 10, .tv_usec = 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    // Close with a reset: thousands of connections a second would otherwise fill the ephemeral
    // ports with TIME_WAIT within a minute.
    const linger reset{.l_onoff = 1, .l_linger = 0};
    ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) return fd;
    err = errno;
    ::close(fd);
    if (err != EADDRNOTAVAIL && err != ECONNREFUSED && err != EAGAIN && err != EINTR) break;
    ::usleep(10'000);
  }
  broken(std::string("cannot connect to the config server: ") + std::strerror(err));
}

std::string exchange(std::uint16_t port, std::string_view bytes, bool close_after = false) {
  const int fd = connect_to(port);
  // The server may answer and close before reading everything (413, a malformed request): a
  // failed send is not an error, the answer is what counts.
  for (std::size_t sent = 0; sent < bytes.size();) {
    const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<std::size_t>(n);
  }
  if (close_after) ::shutdown(fd, SHUT_WR);
  std::string out;
  char buf[4096];
  while (!complete_response(out)) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n > 0) {
      out.append(buf, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    KF_FUZZ_CHECK(n == 0 || errno == ECONNRESET, "the config server neither answers nor closes");
    break;
  }
  ::close(fd);
  return out;
}

struct Reply {
  int status = 0;  // 0: no answer
  std::string body;
};

// The first HTTP response in `raw`.
Reply first_reply(const std::string& raw) {
  Reply r;
  if (raw.size() < 12 || !raw.starts_with("HTTP/1.")) return r;
  r.status = std::atoi(raw.c_str() + 9);
  const auto end = raw.find("\r\n\r\n");
  if (end != std::string::npos) r.body = raw.substr(end + 4);
  return r;
}

struct Request {
  std::string method;
  std::string target;
  std::string auth = "good";  // good, noauth, badauth
  std::string body;
};

// The request line's tokens as a client would send them: one of HTTP's methods (GET for any
// other word), a target that starts with '/' and has every byte but visible ASCII
// percent-encoded. So each request is exactly one request the server can parse, which it answers
// and then closes. (A request it cannot parse gets a 400 on a connection it keeps open, and would
// read what follows as the next request, behind the checks' back; raw inputs cover such bytes.)
std::string method_of(const std::string& m) {
  for (const char* known : {"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH"})
    if (m == known) return m;
  return "GET";
}
std::string target_of(const std::string& t) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out = t.starts_with('/') ? "" : "/";
  for (const char c : t) {
    const auto b = static_cast<unsigned char>(c);
    if (b > ' ' && b < 0x7F) {
      out += c;
    } else {
      out += '%';
      out += kHex[b >> 4];
      out += kHex[b & 15];
    }
  }
  return out;
}

std::vector<Request> requests_of(std::string_view text) {
  std::vector<Request> out;
  while (!text.empty() && out.size() < 16) {
    const auto sep = text.find("\n%%\n");
    std::string_view item = text.substr(0, sep);
    text = sep == std::string_view::npos ? std::string_view{} : text.substr(sep + 4);
    const auto eol = item.find('\n');
    std::string_view line = item.substr(0, eol);
    Request r;
    r.body = eol == std::string_view::npos ? "" : std::string(item.substr(eol + 1));
    const auto sp1 = line.find(' ');
    r.method = method_of(std::string(line.substr(0, sp1)));
    line = sp1 == std::string_view::npos ? std::string_view{} : line.substr(sp1 + 1);
    const auto sp2 = line.find(' ');
    r.target = target_of(std::string(line.substr(0, sp2)));
    if (sp2 != std::string_view::npos) r.auth = std::string(line.substr(sp2 + 1));
    out.push_back(std::move(r));
  }
  return out;
}

std::string http_of(const Request& r) {
  std::string out = r.method + " " + r.target + " HTTP/1.1\r\n";
  out += "Host: 127.0.0.1\r\nConnection: close\r\n";
  if (r.auth == "good") out += "Authorization: Bearer " + kToken + "\r\n";
  if (r.auth == "badauth") out += "Authorization: Bearer not-" + kToken + "\r\n";
  out += "Content-Type: application/json\r\nContent-Length: " + std::to_string(r.body.size()) +
         "\r\n\r\n" + r.body;
  return out;
}

std::string describe(const std::optional<ClusterSpec>& spec) {
  return spec ? cluster_to_json(*spec) : "(none)";
}

void check_stored(const ConfigServer& s) {
  if (const auto now = s.current()) {
    KF_FUZZ_CHECK(!now->problem(), "the server stores an invalid cluster: " + *now->problem());
  }
}

void structured(ConfigServer& s, bool secured, std::string_view text) {
  std::optional<ClusterSpec> before = s.current();
  for (const Request& r : requests_of(text)) {
    const Reply reply = first_reply(exchange(s.port(), http_of(r)));
    const std::optional<ClusterSpec> after = s.current();
    const std::string what = r.method + " " + r.target + " (" + r.auth + ") -> " +
                             std::to_string(reply.status) + ": stored " + describe(before) +
                             ", then " + describe(after);
    KF_FUZZ_CHECK(reply.status >= 200 && reply.status < 500, "no answer or a 5xx: " + what);
    check_stored(s);
    const bool config = r.target == "/config" || r.target.starts_with("/config?");
    if (secured && r.auth != "good") {
      // Never served: 401 from the server, or a 4xx from cpp-httplib for a request it cannot
      // parse (before any route or token check); only /health answers without the token.
      KF_FUZZ_CHECK(before == after, "a request without the token changed the cluster: " + what);
      KF_FUZZ_CHECK(reply.status >= 400 || reply.body == "ok\n",
                    "a request without the token was served: " + what);
      KF_FUZZ_CHECK(!config || reply.status == 401 || reply.body.empty(),
                    "a request without the token reached a handler: " + what);
    }
    // By the answer, not the target: the server decodes %XX in paths ("/con%66ig").
    const bool cleared = reply.status == 200 && reply.body == "cleared\n";
    if (cleared) {
      KF_FUZZ_CHECK(!after, "DELETE left a cluster: " + what);
    } else if (before) {
      KF_FUZZ_CHECK(after && after->version() >= before->version(),
                    "the version went back (or the cluster vanished): " + what);
    }
    if (r.method == "PUT" && reply.status == 200) {
      KF_FUZZ_CHECK(after && after->version() == (before ? before->version() + 1 : 1),
                    "PUT did not store the next version: " + what);
    }
    if (r.method == "POST" && reply.status == 200) {
      KF_FUZZ_CHECK(after && *after == valid_cluster_from_json(r.body),
                    "POST did not store what it was given: " + what);
    }
    if (r.method == "GET" && r.target == "/config" && reply.status == 200) {
      KF_FUZZ_CHECK(after && reply.body == cluster_to_json(*after), "GET answers another: " + what);
    }
    before = after;
  }
}

void raw(ConfigServer& s, std::string_view bytes) {
  const std::string answer = exchange(s.port(), bytes, /*close_after=*/true);
  const Reply reply = first_reply(answer);
  KF_FUZZ_CHECK(reply.status == 0 || reply.status < 500,
                "a 5xx to a raw request: " + answer.substr(0, 300));
  check_stored(s);
}

}  // namespace
}  // namespace kf::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kf::fuzz;
  if (size == 0) return 0;
  const bool secured = (data[0] & 1) != 0;
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    kf::ConfigServer& s = server(secured);
    const Reply cleared = first_reply(exchange(
        s.port(), http_of(Request{.method = "DELETE", .target = "/config", .auth = "good"})));
    KF_FUZZ_CHECK(
        cleared.status == 200 && !s.current(),
        "cannot clear the server: " + std::to_string(cleared.status) + " " + cleared.body);
    if ((data[0] & 2) != 0) {
      raw(s, rest);
    } else {
      structured(s, secured, rest);
    }
  } catch (const std::exception& e) {
    unexpected(e);
  }
  return 0;
}
