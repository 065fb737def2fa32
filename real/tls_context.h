// TLS contexts from PEM files, for the transport's TCP connections (TLS 1.3, mutual
// authentication against the job's CA) and for the config server's HTTPS. Every error names the
// file at fault and the flag or variable that named it, because a TLS set-up fails far more often
// on a wrong path or a mismatched key than on anything else. OpenSSL objects are owned by
// unique_ptrs with their free functions as deleters.
#pragma once

#include <openssl/types.h>

#include <map>
#include <memory>
#include <optional>
#include <string>

namespace kf::tls {

struct CtxFree {
  void operator()(SSL_CTX* ctx) const;
};
using CtxPtr = std::unique_ptr<SSL_CTX, CtxFree>;

// A PEM file, and the flag or variable that named it ("KUNGFU_TLS_CERT", "-tls-key"), so that an
// error says where the path came from.
struct PemFile {
  std::string path;
  std::string label;
};

// This thread's pending OpenSSL errors as one line of reasons ("wrong version number; ..."),
// emptying the queue; `fallback` when there are none.
std::string take_errors(const std::string& fallback = "no detail from OpenSSL");

// Loads a certificate chain (the leaf first) and its unencrypted private key into `ctx` and
// checks that they belong together. Throws std::invalid_argument naming the file at fault.
void use_certificate(SSL_CTX& ctx, const PemFile& cert, const PemFile& key);

// Makes `ctx` trust the certificates of `ca` (PEM, one or more) for verifying the other side.
// Throws std::invalid_argument naming the file when it cannot be read or holds no certificate.
void trust_ca(SSL_CTX& ctx, const PemFile& ca);

// Throws std::invalid_argument naming the file unless `ca` is a readable PEM file holding at
// least one certificate (what trust_ca needs), for clients that load it later per connection.
void check_ca_file(const PemFile& ca);

// The files of a peer on the data plane: its certificate and key, and the CA that signs every
// peer's certificate.
struct Files {
  PemFile cert;
  PemFile key;
  PemFile ca;
};

// The data plane's context, shared by every connection of a process. TLS 1.3 only; each side
// presents its certificate and requires and verifies the other's against the CA (a peer without
// one, or with one the CA did not sign, fails the handshake). Trust is the CA: every certificate
// it signed is a member of the job, whatever name it carries (no host-name check, as Gloo's TLS
// transport). No session tickets (connections are long-lived and never resumed).
class Context {
 public:
  // Throws std::invalid_argument naming the file at fault.
  explicit Context(const Files& files);
  SSL_CTX* get() const { return ctx_.get(); }
  const Files& files() const { return files_; }

 private:
  Files files_;
  CtxPtr ctx_;
};

using EnvMap = std::map<std::string, std::string>;

// KUNGFU_TLS=1 with KUNGFU_TLS_CERT, KUNGFU_TLS_KEY and KUNGFU_TLS_CA: the files, labelled with
// their variables. nullopt when KUNGFU_TLS is unset, empty or 0. Throws std::invalid_argument
// naming the variable when KUNGFU_TLS has another value or one of the three is missing.
std::optional<Files> files_from_env(const EnvMap& env);
// The context the environment asks for (files_from_env, loaded), or null without TLS. Throws
// std::invalid_argument naming the variable or the file at fault.
std::shared_ptr<const Context> context_from_env(const EnvMap& env);
// The same from this process's environment (getenv).
std::shared_ptr<const Context> context_from_process_env();

}  // namespace kf::tls
