// The elastic config server against real sockets on 127.0.0.1: REST semantics (404, version bump,
// validation reasons, reset, clear), bearer-token auth, client timeouts, wait_for_version, and
// the kfconfig binary (start, serve, SIGTERM; bad -init) and kfrun -builtin-config-port.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "launch/cluster_json.h"
#include "launch/config_client.h"
#include "launch/config_server.h"
#include "port_lease.h"

namespace kf {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

ClusterSpec two_hosts(std::uint64_t version = 0) {
  return ClusterSpec(version, {{"10.0.0.1", 38080}, {"10.0.0.2", 38080}},
                     {{"10.0.0.1", 10000}, {"10.0.0.1", 10001}, {"10.0.0.2", 10000}});
}

std::string url_of(std::uint16_t port) {
  return fmt::format("http://127.0.0.1:{}/config", port);
}

struct RawReply {
  int status = 0;
  std::string body;
};

// One HTTP/1.0 request over a plain socket (so malformed bodies and headers can be sent as is).
RawReply raw_http(std::uint16_t port, const std::string& method, const std::string& path,
                  const std::string& body = "", const std::string& headers = "") {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  timeval tv{.tv_sec = 5, .tv_usec = 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  RawReply r;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return r;
  }
  const std::string req =
      fmt::format("{} {} HTTP/1.0\r\nHost: 127.0.0.1\r\n{}Content-Length: {}\r\n\r\n{}", method,
                  path, headers, body.size(), body);
  [[maybe_unused]] const auto sent = ::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  std::string reply;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;)
    reply.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  if (reply.rfind("HTTP/1.", 0) == 0 && reply.size() > 12) r.status = std::stoi(reply.substr(9, 3));
  const auto split = reply.find("\r\n\r\n");
  if (split != std::string::npos) r.body = reply.substr(split + 4);
  return r;
}

// Expects `f` to throw std::runtime_error whose message holds every one of `parts`.
template <class F>
void expect_error(F f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no exception; wanted one mentioning " << parts.front();
  } catch (const std::runtime_error& e) {
    for (const auto& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what() << " lacks " << p;
  }
}

class ConfigServerTest : public ::testing::Test {
 protected:
  ConfigServer server{{}};
  ConfigClient client{url_of(server.port()), "", 3s};
};

TEST_F(ConfigServerTest, GetIs404WhenEmpty) {
  EXPECT_EQ(client.get(), std::nullopt);
  EXPECT_EQ(raw_http(server.port(), "GET", "/config").status, 404);
  const auto health = raw_http(server.port(), "GET", "/health");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.body, "ok\n");
}

TEST_F(ConfigServerTest, PutBumpsTheVersionEveryTime) {
  for (std::uint64_t v = 1; v <= 3; ++v) {
    // The version sent does not matter: stored = previous + 1.
    const auto stored = client.put(two_hosts(v == 2 ? 100 : 0));
    EXPECT_EQ(stored.version(), v);
    EXPECT_EQ(stored.workers(), two_hosts().workers());
    EXPECT_EQ(stored.runners(), two_hosts().runners());
  }
  EXPECT_EQ(client.get(), two_hosts(3));
  EXPECT_EQ(server.current(), two_hosts(3));
  const auto raw = raw_http(server.port(), "GET", "/config");
  EXPECT_EQ(raw.status, 200);
  EXPECT_EQ(cluster_from_json(raw.body), two_hosts(3));
}

TEST_F(ConfigServerTest, PastVersionsAreKeptForRunnersThatPolledPastThem) {
  ClusterSpec small(0, two_hosts().runners(), {{"10.0.0.1", 10000}});
  client.put(two_hosts());  // 1
  client.put(small);        // 2
  client.put(two_hosts());  // 3
  EXPECT_EQ(client.get_version(2), ClusterSpec(2, small.runners(), small.workers()));
  EXPECT_EQ(client.get_version(1), two_hosts(1));
  EXPECT_EQ(client.get_version(3), two_hosts(3));
  EXPECT_EQ(client.get_version(4), std::nullopt);
  EXPECT_EQ(raw_http(server.port(), "GET", "/config?version=x2").status, 400);
  client.reset(two_hosts(10));
  EXPECT_EQ(client.get_version(10), two_hosts(10));
  // DELETE starts a new history.
  client.clear();
  EXPECT_EQ(client.get_version(2), std::nullopt);
}

TEST_F(ConfigServerTest, BothUrlFormsWork) {
  client.put(two_hosts());
  ConfigClient bare(fmt::format("http://127.0.0.1:{}", server.port()), "", 3s);
  EXPECT_EQ(bare.get(), two_hosts(1));
  EXPECT_THROW(ConfigClient("127.0.0.1:9100"), std::invalid_argument);
  EXPECT_THROW(ConfigClient("http://127.0.0.1"), std::invalid_argument);
  EXPECT_THROW(ConfigClient("http://127.0.0.1:0/config"), std::invalid_argument);
  EXPECT_THROW(ConfigClient("ftp://127.0.0.1:21"), std::invalid_argument);
}

TEST_F(ConfigServerTest, MalformedJsonIs400WithAReason) {
  client.put(two_hosts());
  for (const std::string body : {"{not json", "", "[1,2]", R"({"workers": 5})"}) {
    const auto r = raw_http(server.port(), "PUT", "/config", body);
    EXPECT_EQ(r.status, 400) << body;
    EXPECT_NE(r.body.find("malformed JSON"), std::string::npos) << r.body;
  }
  const auto port0 = raw_http(server.port(), "PUT", "/config",
                              R"({"workers":[{"host":"10.0.0.1","port":70000}]})");
  EXPECT_EQ(port0.status, 400);
  EXPECT_NE(port0.body.find("port must be 1..65535"), std::string::npos) << port0.body;
  EXPECT_EQ(server.current(), two_hosts(1));  // unchanged
}

TEST_F(ConfigServerTest, InvalidClustersAre400NamingTheProblem) {
  client.put(two_hosts());
  const ClusterSpec duplicate(0, {{"10.0.0.1", 38080}}, {{"10.0.0.1", 10000}, {"10.0.0.1", 10000}});
  expect_error([&] { client.put(duplicate); },
               {url_of(server.port()), "HTTP 400", "duplicate worker 10.0.0.1:10000"});
  const ClusterSpec no_runner(0, {{"10.0.0.1", 38080}}, {{"10.0.0.1", 10000}, {"10.0.0.9", 10000}});
  expect_error([&] { client.put(no_runner); },
               {"HTTP 400", "worker 10.0.0.9:10000 has no runner on its host"});
  const ClusterSpec two_runners(0, {{"10.0.0.1", 38080}, {"10.0.0.1", 38081}},
                                {{"10.0.0.1", 10000}});
  expect_error([&] { client.put(two_runners); }, {"HTTP 400", "two runners on host 10.0.0.1"});
  const ClusterSpec empty(0, {{"10.0.0.1", 38080}}, {});
  expect_error([&] { client.put(empty); }, {"HTTP 400", "no workers"});
  expect_error([&] { client.reset(empty); }, {"HTTP 400", "no workers"});
  EXPECT_EQ(server.current(), two_hosts(1));  // unchanged
}

TEST_F(ConfigServerTest, PostResetsAsGiven) {
  client.put(two_hosts());
  client.put(two_hosts());
  EXPECT_EQ(client.reset(two_hosts(7)), two_hosts(7));
  EXPECT_EQ(client.get(), two_hosts(7));
  EXPECT_EQ(client.put(two_hosts()).version(), 8u);
  // The version only moves forward: a reset to an older one is refused, the stored one kept.
  expect_error([&] { client.reset(two_hosts(0)); }, {"HTTP 409", "older than the stored 8"});
  EXPECT_EQ(client.get(), two_hosts(8));
  EXPECT_EQ(client.reset(two_hosts(8)).version(), 8u);
  // DELETE ends the job's history: the next one may start from 0.
  client.clear();
  EXPECT_EQ(client.reset(two_hosts(0)).version(), 0u);
}

// Found by tests/fuzz/fuzz_config_server: a PUT over the largest version wrapped it to 1.
TEST_F(ConfigServerTest, PutPastTheLargestVersionIs409) {
  const std::uint64_t last = std::numeric_limits<std::uint64_t>::max();
  EXPECT_EQ(client.reset(two_hosts(last)).version(), last);
  expect_error([&] { client.put(two_hosts()); }, {"HTTP 409", "cannot move forward"});
  EXPECT_EQ(server.current(), two_hosts(last));
}

// Found by tests/fuzz/fuzz_cluster_json: hosts that cannot travel as "host:port,host:port".
TEST_F(ConfigServerTest, BadHostsAre400) {
  for (const char* host : {"", "10.0.0.1,10.0.0.2", "a b", "tab\t"}) {
    const std::string body = fmt::format(
        R"({{"runners":[{{"host":"{0}","port":38080}}],"workers":[{{"host":"{0}","port":1}}]}})",
        host);
    const auto r = raw_http(server.port(), "PUT", "/config", body);
    EXPECT_EQ(r.status, 400) << host;
    EXPECT_NE(r.body.find("has a bad host"), std::string::npos) << r.body;
  }
  EXPECT_EQ(server.current(), std::nullopt);
}

TEST_F(ConfigServerTest, OversizedBodiesAre413) {
  const std::string huge(2 << 20, ' ');
  EXPECT_EQ(raw_http(server.port(), "PUT", "/config", huge).status, 413);
  EXPECT_EQ(client.get(), std::nullopt);
}

TEST_F(ConfigServerTest, DeleteClears) {
  client.put(two_hosts());
  client.clear();
  EXPECT_EQ(client.get(), std::nullopt);
  EXPECT_EQ(raw_http(server.port(), "GET", "/config").status, 404);
  EXPECT_EQ(client.put(two_hosts()).version(), 1u);  // a fresh start
}

TEST_F(ConfigServerTest, ConcurrentPutsGetDistinctVersions) {
  constexpr int kThreads = 4, kEach = 10;
  std::vector<std::vector<std::uint64_t>> seen(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i)
        seen[static_cast<std::size_t>(t)].push_back(client.put(two_hosts()).version());
    });
  }
  for (auto& t : threads)
    t.join();
  std::set<std::uint64_t> all;
  for (const auto& s : seen)
    all.insert(s.begin(), s.end());
  EXPECT_EQ(all.size(), std::size_t{kThreads * kEach});
  EXPECT_EQ(client.get()->version(), std::uint64_t{kThreads * kEach});
}

TEST(ConfigServerAuth, TokenIsRequired) {
  ConfigServer server({.token = "s3cret"});
  const auto url = url_of(server.port());
  expect_error([&] { ConfigClient(url, "", 3s).put(two_hosts()); }, {url, "HTTP 401"});
  expect_error([&] { ConfigClient(url, "s3cre", 3s).put(two_hosts()); }, {"HTTP 401"});
  expect_error([&] { ConfigClient(url, "s3cret!", 3s).get(); }, {"HTTP 401"});
  expect_error([&] { ConfigClient(url, "wrong", 3s).clear(); }, {"HTTP 401"});
  EXPECT_EQ(raw_http(server.port(), "PUT", "/config", cluster_to_json(two_hosts()),
                     "Authorization: Basic s3cret\r\n")
                .status,
            401);
  EXPECT_EQ(server.current(), std::nullopt);  // nothing got through
  ConfigClient right(url, "s3cret", 3s);
  EXPECT_EQ(right.put(two_hosts()).version(), 1u);
  EXPECT_EQ(right.get(), two_hosts(1));
  EXPECT_EQ(
      raw_http(server.port(), "GET", "/config", "", "Authorization: Bearer s3cret\r\n").status,
      200);
  EXPECT_EQ(raw_http(server.port(), "GET", "/health").status, 200);  // liveness needs no token
}

TEST(ConfigServerLifecycle, InitialStopAndBadInitial) {
  ConfigServer server({.initial = two_hosts(5)});
  ConfigClient client(url_of(server.port()), "", 2s);
  EXPECT_EQ(client.get(), two_hosts(5));
  server.stop();
  server.stop();  // idempotent
  expect_error([&] { client.get(); }, {url_of(server.port())});
  EXPECT_THROW(ConfigServer({.initial = ClusterSpec()}), std::invalid_argument);
  // A taken port is reported, naming it.
  ConfigServer first({});
  try {
    ConfigServer second({.port = first.port()});
    ADD_FAILURE() << "bound a taken port";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(first.port())), std::string::npos);
  }
}

TEST(ConfigClientTimeout, SilentServerThrowsWithinTheTimeout) {
  // A listening socket that never accepts: connect succeeds (the backlog), no reply ever comes.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(fd, 16), 0);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  const auto port = ntohs(a.sin_port);
  ConfigClient client(url_of(port), "", 300ms);
  for (int call = 0; call < 2; ++call) {
    const auto start = Clock::now();
    expect_error([&] { call == 0 ? (void)client.get() : (void)client.put(two_hosts()); },
                 {url_of(port), "timeout 300 ms"});
    const auto took = Clock::now() - start;
    EXPECT_GE(took, 250ms);
    EXPECT_LT(took, 2s);
  }
  ::close(fd);
  // Nothing listening at all: refused at once.
  const auto start = Clock::now();
  expect_error([&] { client.get(); }, {url_of(port)});
  EXPECT_LT(Clock::now() - start, 2s);
}

TEST(ConfigClientWait, ReturnsOnceAnotherThreadPuts) {
  ConfigServer server({});
  ConfigClient client(url_of(server.port()), "", 2s);
  std::thread writer([&] {
    std::this_thread::sleep_for(150ms);
    client.put(two_hosts());
    std::this_thread::sleep_for(100ms);
    client.put(two_hosts());
  });
  const auto start = Clock::now();
  const auto spec = wait_for_version(client, 2, 10s, 20ms);
  writer.join();
  EXPECT_EQ(spec.version(), 2u);
  EXPECT_LT(Clock::now() - start, 5s);
  expect_error([&] { wait_for_version(client, 99, 200ms, 20ms); },
               {"no version >= 99", "last: version 2"});
}

// ---- the kfconfig binary ----

struct Child {
  pid_t pid = -1;
  int err = -1;  // the child's stdout and stderr
};

// Starts argv[0] with stdout and stderr on one pipe and `env_add` added to the environment.
Child spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env_add = {}) {
  // Everything exec needs is built before fork: the child only calls async-signal-safe functions.
  std::vector<char*> args;
  for (const auto& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<char*> env;
  for (char** e = environ; *e != nullptr; ++e)
    env.push_back(*e);
  for (const auto& e : env_add)
    env.push_back(const_cast<char*>(e.c_str()));
  env.push_back(nullptr);
  int p[2];
  if (::pipe(p) != 0) return {};
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(p[1], 1);
    ::dup2(p[1], 2);
    ::close(p[0]);
    ::close(p[1]);
    ::execve(args[0], args.data(), env.data());
    ::_exit(127);
  }
  ::close(p[1]);
  return {pid, p[0]};
}

// Reads the child's stderr until `want` appears, EOF, or the deadline.
std::string read_until(int fd, const std::string& want, std::chrono::milliseconds limit) {
  std::string got;
  const auto deadline = Clock::now() + limit;
  while (got.find(want) == std::string::npos && Clock::now() < deadline) {
    pollfd pfd{fd, POLLIN, 0};
    if (::poll(&pfd, 1, 50) <= 0) continue;
    char buf[1024];
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    got.append(buf, static_cast<std::size_t>(n));
  }
  return got;
}

// Waits for the child's exit (bounded; SIGKILL past the limit). Returns the exit code or -1.
int wait_exit(pid_t pid, std::chrono::milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (Clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(10ms);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

class Kfconfig : public ::testing::Test {
 protected:
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              fmt::format("kfconfig_test_{}_{}", ::getpid(), counter_++);
  void SetUp() override { std::filesystem::create_directories(dir); }
  void TearDown() override { std::filesystem::remove_all(dir); }
  std::string write(const std::string& name, const std::string& text) {
    const auto path = (dir / name).string();
    std::ofstream(path) << text;
    return path;
  }
  static inline int counter_ = 0;
};

// Port in "kfconfig: serving http://ADDR:PORT/config".
std::uint16_t served_port(const std::string& log) {
  const auto at = log.find("serving http://");
  if (at == std::string::npos) return 0;
  const auto colon = log.find(':', at + 15);
  return static_cast<std::uint16_t>(std::stoi(log.substr(colon + 1)));
}

TEST_F(Kfconfig, ServesTheInitFileAndStopsOnSigterm) {
  const auto init = write("cluster.json", cluster_to_json(two_hosts(4)));
  auto child = spawn({KFCONFIG, "-port", "0", "-addr", "127.0.0.1", "-init", init, "-v"});
  ASSERT_GT(child.pid, 0);
  const auto log = read_until(child.err, "/config", 10s);
  const auto port = served_port(log);
  ASSERT_NE(port, 0) << log;
  ConfigClient client(url_of(port), "", 3s);
  EXPECT_EQ(client.get(), two_hosts(4));
  EXPECT_EQ(client.put(two_hosts()).version(), 5u);
  EXPECT_NE(read_until(child.err, "PUT /config -> 200", 5s).find("PUT /config -> 200"),
            std::string::npos);  // -v logs each request
  ::kill(child.pid, SIGTERM);
  EXPECT_EQ(wait_exit(child.pid, 10s), 0);
  ::close(child.err);
}

TEST_F(Kfconfig, TokenFromTheEnvironment) {
  auto child = spawn({KFCONFIG, "-port", "0", "-addr", "127.0.0.1", "-token-env", "KF_TEST_TOKEN"},
                     {"KF_TEST_TOKEN=tok123"});
  ASSERT_GT(child.pid, 0);
  const auto port = served_port(read_until(child.err, "/config", 10s));
  ASSERT_NE(port, 0);
  expect_error([&] { ConfigClient(url_of(port), "", 3s).get(); }, {"HTTP 401"});
  EXPECT_EQ(ConfigClient(url_of(port), "tok123", 3s).get(), std::nullopt);
  ::kill(child.pid, SIGINT);
  EXPECT_EQ(wait_exit(child.pid, 10s), 0);
  ::close(child.err);
}

TEST_F(Kfconfig, ClosedByDefault) {
  // Another address than loopback without a token: refused before serving.
  auto open = spawn({KFCONFIG, "-port", "0", "-addr", "0.0.0.0"});
  ASSERT_GT(open.pid, 0);
  const auto why = read_until(open.err, "\n", 10s);
  EXPECT_EQ(wait_exit(open.pid, 10s), 2) << why;
  EXPECT_NE(why.find("without a token"), std::string::npos) << why;
  ::close(open.err);
  // KUNGFU_SECRET is the token whenever it is set.
  auto secured = spawn({KFCONFIG, "-port", "0", "-addr", "0.0.0.0"}, {"KUNGFU_SECRET=s3cret"});
  ASSERT_GT(secured.pid, 0);
  const auto log = read_until(secured.err, "/config", 10s);
  const auto port = served_port(log);
  ASSERT_NE(port, 0) << log;
  expect_error([&] { ConfigClient(url_of(port), "", 3s).put(two_hosts()); }, {"HTTP 401"});
  EXPECT_EQ(ConfigClient(url_of(port), "s3cret", 3s).get(), std::nullopt);
  // Refusals are logged without -v.
  const auto refusal = read_until(secured.err, "401", 5s);
  EXPECT_NE(refusal.find("PUT /config -> 401"), std::string::npos) << refusal;
  ::kill(secured.pid, SIGTERM);
  EXPECT_EQ(wait_exit(secured.pid, 10s), 0);
  ::close(secured.err);
  // -insecure serves it open, saying so.
  auto insecure = spawn({KFCONFIG, "-port", "0", "-addr", "0.0.0.0", "-insecure"});
  ASSERT_GT(insecure.pid, 0);
  const auto warned = read_until(insecure.err, "/config", 10s);
  EXPECT_NE(warned.find("WARNING"), std::string::npos) << warned;
  ::kill(insecure.pid, SIGTERM);
  EXPECT_EQ(wait_exit(insecure.pid, 10s), 0);
  ::close(insecure.err);
}

TEST_F(Kfconfig, BadInitExits2NamingTheFile) {
  const ClusterSpec duplicate(0, {{"10.0.0.1", 38080}}, {{"10.0.0.1", 10000}, {"10.0.0.1", 10000}});
  const std::vector<std::pair<std::string, std::string>> cases = {
      {(dir / "missing.json").string(), "cannot read file"},
      {write("broken.json", "{\"workers\": [}"), "malformed JSON"},
      {write("dup.json", cluster_to_json(duplicate)), "duplicate worker 10.0.0.1:10000"},
  };
  for (const auto& [file, why] : cases) {
    auto child = spawn({KFCONFIG, "-port", "0", "-init", file});
    ASSERT_GT(child.pid, 0);
    const auto err = read_until(child.err, "\n", 10s);
    EXPECT_EQ(wait_exit(child.pid, 10s), 2) << err;
    EXPECT_NE(err.find(file), std::string::npos) << err;
    EXPECT_NE(err.find(why), std::string::npos) << err;
    ::close(child.err);
  }
}

TEST(KfrunBuiltinConfig, WorkersGetTheUrlAndTheServerAnswers) {
  const auto base = testing::lease_ports(12);  // the workers' range, then the server's port
  const auto port = base + 11;
  // The worker prints its KUNGFU_CONFIG_SERVER and GETs it with bash's /dev/tcp.
  const std::string script = fmt::format(
      "echo url=$KUNGFU_CONFIG_SERVER secret_length=${{#KUNGFU_SECRET}}; "
      "exec 3<>/dev/tcp/127.0.0.1/{}; "
      "printf 'GET /config HTTP/1.0\\r\\nAuthorization: Bearer %s\\r\\n\\r\\n' \"$KUNGFU_SECRET\" "
      ">&3; "
      "cat <&3",
      port);
  auto child = spawn({KFRUN, "-np", "1", "-port-range", fmt::format("{}-{}", base, base + 10),
                      "-builtin-config-port", std::to_string(port), "/bin/bash", "-c", script});
  ASSERT_GT(child.pid, 0);
  const auto out = read_until(child.err, "\"workers\"", 20s);
  EXPECT_EQ(wait_exit(child.pid, 20s), 0) << out;
  ::close(child.err);
  EXPECT_NE(out.find(fmt::format("url=http://127.0.0.1:{}/config", port)), std::string::npos)
      << out;
  EXPECT_NE(out.find("200 OK"), std::string::npos) << out;
  // No KUNGFU_SECRET given: a job on one host gets a fresh one, the server's token.
  EXPECT_NE(out.find("secret_length=32"), std::string::npos) << out;
  EXPECT_NE(out.find(fmt::format("\"port\":{}", base)), std::string::npos) << out;
  EXPECT_EQ(out.find("builtin-config-port are accepted"), std::string::npos) << out;
}

}  // namespace
}  // namespace kf
