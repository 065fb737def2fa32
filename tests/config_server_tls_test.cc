// The config server over HTTPS, with a throw-away CA made in a temporary directory: a PUT/GET
// round trip with the bearer token, a client trusting another CA (or only the system's store)
// refused, plain HTTP to the HTTPS port and HTTPS to a plain port refused, unusable certificate
// files named; kfconfig and kfrun -builtin-config-port serving HTTPS (exit 2 on a bad file), and
// a worker reading the builtin server over HTTPS with the CA kfrun hands it (KUNGFU_TLS_CA).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "launch/config_client.h"
#include "launch/config_server.h"
#include "net_helpers.h"
#include "tls_test_pki.h"

namespace kf::testing {
namespace {

using namespace std::chrono_literals;

ClusterSpec two_hosts() {
  return ClusterSpec(0, {{"10.0.0.1", 38080}, {"10.0.0.2", 38080}},
                     {{"10.0.0.1", 10000}, {"10.0.0.2", 10000}});
}

ConfigServerOptions https_options(const TestPki& pki, std::string token = "") {
  ConfigServerOptions o{.token = std::move(token)};
  o.tls_cert.path = pki.cert_file();
  o.tls_key.path = pki.key_file();
  return o;
}

std::string https_url(std::uint16_t port, const std::string& host = "127.0.0.1") {
  return fmt::format("https://{}:{}/config", host, port);
}

// Expects `f` to throw E whose message holds every one of `parts`.
template <class E = std::runtime_error, class F>
void expect_error(F f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no exception; wanted one mentioning " << parts.front();
  } catch (const E& e) {
    for (const auto& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what() << " lacks " << p;
  }
}

TEST(ConfigServerHttps, PutAndGetRoundTripWithTheBearerToken) {
  const TestPki pki;
  ConfigServer server(https_options(pki, "s3cret"));
  EXPECT_STREQ(server.scheme(), "https");
  const ConfigClient client(https_url(server.port()), "s3cret", 3s, pki.ca_file());
  EXPECT_EQ(client.get(), std::nullopt);
  const ClusterSpec stored = client.put(two_hosts());
  EXPECT_EQ(stored.version(), 1u);
  const auto got = client.get();
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->version(), 1u);
  EXPECT_EQ(got->workers().size(), 2u);
  EXPECT_EQ(server.current()->version(), 1u);
  // The certificate names localhost too; the token rules hold over TLS.
  EXPECT_EQ(ConfigClient(https_url(server.port(), "localhost"), "s3cret", 3s, pki.ca_file())
                .get()
                ->version(),
            1u);
  expect_error([&] { ConfigClient(https_url(server.port()), "wrong", 3s, pki.ca_file()).get(); },
               {"HTTP 401"});
}

TEST(ConfigServerHttps, AClientTrustingAnotherCaIsRefused) {
  const TestPki pki;
  ConfigServer server(https_options(pki));
  const std::string url = https_url(server.port());
  expect_error([&] { ConfigClient(url, "", 3s, pki.other_ca_file()).get(); },
               {url, "not trusted", "unable to get local issuer certificate", pki.other_ca_file()});
  // Without a CA (and no KUNGFU_TLS_CA) the system's store is asked, which does not know ours.
  ASSERT_EQ(std::getenv("KUNGFU_TLS_CA"), nullptr);
  expect_error([&] { ConfigClient(url, "", 3s).put(two_hosts()); },
               {"not trusted", "system's trust store", "KUNGFU_TLS_CA"});
  EXPECT_EQ(server.current(), std::nullopt);  // nothing got through
  // KUNGFU_TLS_CA is the CA when none is given.
  ::setenv("KUNGFU_TLS_CA", pki.ca_file().c_str(), 1);
  const auto reset = [] { ::unsetenv("KUNGFU_TLS_CA"); };
  EXPECT_EQ(ConfigClient(url, "", 3s).get(), std::nullopt);
  reset();
}

TEST(ConfigServerHttps, ACertificateThatDoesNotNameTheHostIsRefused) {
  const TestPki pki;
  auto options = https_options(pki);
  options.addr = "127.0.0.4";  // loopback, but not among the certificate's names
  ConfigServer server(options);
  const std::string url = https_url(server.port(), "127.0.0.4");
  expect_error([&] { ConfigClient(url, "", 3s, pki.ca_file()).get(); },
               {url, "not trusted", "IP address mismatch"});
}

TEST(ConfigServerHttps, PlainHttpToTheHttpsPortIsRefused) {
  const TestPki pki;
  ConfigServer server(https_options(pki));
  const std::string plain = fmt::format("http://127.0.0.1:{}/config", server.port());
  expect_error<ConfigServerUnreachable>([&] { ConfigClient(plain, "", 3s).put(two_hosts()); },
                                        {plain, "needs an https:// URL"});
  expect_error([&] { ConfigClient(plain, "", 3s).get(); }, {plain});
  EXPECT_EQ(server.current(), std::nullopt);
  // And the other way round: HTTPS to a plain server fails its handshake.
  ConfigServer http_server(ConfigServerOptions{});
  EXPECT_STREQ(http_server.scheme(), "http");
  const std::string url = https_url(http_server.port());
  expect_error<ConfigServerUnreachable>([&] { ConfigClient(url, "", 3s, pki.ca_file()).get(); },
                                        {url, "TLS handshake failed"});
}

TEST(ConfigServerHttps, UnusableFilesAreErrorsNamingThem) {
  const TestPki pki;
  const std::string missing = pki.dir() + "/missing.pem";
  auto options = https_options(pki);
  options.tls_cert.path = missing;
  expect_error<std::invalid_argument>([&] { ConfigServer s(options); },
                                      {"-tls-cert", missing, "cannot read"});
  options = https_options(pki);
  options.tls_key.path = pki.rogue_key_file();
  expect_error<std::invalid_argument>(
      [&] { ConfigServer s(options); },
      {"-tls-key", pki.rogue_key_file(), "not the key of the certificate"});
  options = https_options(pki);
  options.tls_key.path.clear();
  expect_error<std::invalid_argument>([&] { ConfigServer s(options); },
                                      {"-tls-cert without -tls-key"});
  expect_error<std::invalid_argument>([&] { ConfigClient(https_url(9100), "", 3s, missing); },
                                      {"CA file", missing});
}

TEST(KfconfigHttps, ServesHttpsAndExits2OnABadFile) {
  const TestPki pki;
  const auto bad = run_command(fmt::format("{} -port 0 -tls-cert {} -tls-key {}", KFCONFIG,
                                           pki.cert_file(), pki.dir() + "/nokey.pem"),
                               20);
  EXPECT_EQ(bad.code, 2) << bad.output;
  EXPECT_NE(bad.output.find(pki.dir() + "/nokey.pem"), std::string::npos) << bad.output;
  EXPECT_NE(bad.output.find("-tls-key"), std::string::npos) << bad.output;
  // Serving: it says https, and a client checking the CA gets an answer before it is stopped.
  const auto port = lease_ports(1);
  const auto served = run_command(
      fmt::format("{} -port {} -tls-cert {} -tls-key {} & "
                  "sleep 1; {} -c \"import ssl,urllib.request as u; "
                  "c=ssl.create_default_context(cafile=\\\"{}\\\"); "
                  "print(u.urlopen(\\\"https://127.0.0.1:{}/health\\\", context=c).read())\"; "
                  "kill $!; wait",
                  KFCONFIG, port, pki.cert_file(), pki.key_file(), "/usr/bin/python3",
                  pki.ca_file(), port),
      30, true);
  EXPECT_NE(served.output.find(fmt::format("serving https://127.0.0.1:{}/config", port)),
            std::string::npos)
      << served.output;
  EXPECT_NE(served.output.find("b'ok\\n'"), std::string::npos) << served.output;
}

TEST(KfrunHttps, AWorkerReadsTheBuiltinServerOverHttpsWithTheCaItIsHanded) {
  const TestPki pki;
  const auto base = lease_ports(12);
  const auto port = base + 11;
  // The worker checks the server with Python's own TLS stack, host name included.
  const std::string script = pki.dir() + "/worker.py";
  std::ofstream(script) << "import os, ssl, urllib.request as u\n"
                           "url = os.environ['KUNGFU_CONFIG_SERVER']\n"
                           "ctx = ssl.create_default_context(cafile=os.environ['KUNGFU_TLS_CA'])\n"
                           "req = u.Request(url, headers={'Authorization': 'Bearer ' + "
                           "os.environ['KUNGFU_SECRET']})\n"
                           "print('url=' + url)\n"
                           "print(u.urlopen(req, context=ctx).read().decode())\n";
  const std::string kfrun = fmt::format("{} -np 1 -port-range {}-{} -builtin-config-port {}", KFRUN,
                                        base, base + 10, port);
  const auto ok =
      run_command(fmt::format("{} -tls-cert {} -tls-key {} -tls-ca {} /usr/bin/python3 {}", kfrun,
                              pki.cert_file(), pki.key_file(), pki.ca_file(), script),
                  60);
  EXPECT_EQ(ok.code, 0) << ok.output;
  EXPECT_NE(ok.output.find(fmt::format("url=https://127.0.0.1:{}/config", port)), std::string::npos)
      << ok.output;
  EXPECT_NE(ok.output.find(fmt::format("\"port\":{}", base)), std::string::npos) << ok.output;
  // A certificate its clients would not trust stops kfrun before any worker starts.
  const auto untrusted =
      run_command(fmt::format("env -u KUNGFU_TLS_CA {} -tls-cert {} -tls-key {} /bin/true", kfrun,
                              pki.rogue_cert_file(), pki.rogue_key_file()),
                  60);
  EXPECT_EQ(untrusted.code, 2) << untrusted.output;
  EXPECT_NE(untrusted.output.find("not trusted"), std::string::npos) << untrusted.output;
  const auto bad_ca =
      run_command(fmt::format("{} -tls-ca {} /bin/true", kfrun, pki.dir() + "/no-ca.pem"), 60);
  EXPECT_EQ(bad_ca.code, 2) << bad_ca.output;
  EXPECT_NE(bad_ca.output.find("-tls-ca " + pki.dir() + "/no-ca.pem"), std::string::npos)
      << bad_ca.output;
}

}  // namespace
}  // namespace kf::testing
