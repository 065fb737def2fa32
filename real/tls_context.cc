#include "real/tls_context.h"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace kf::tls {
namespace {

// TLS 1.3 suites, AES-128-GCM first: the cheapest per byte on CPUs with AES instructions, which
// is what the data plane's bulk traffic pays for.
constexpr const char* kSuites =
    "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256";

// Reads with read-ahead go through a buffer of this size, so one recv brings several records.
constexpr std::size_t kReadBufferBytes = 256u << 10;

struct FileClose {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileClose>;
struct KeyFree {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};

// An encrypted key must fail to load, never prompt on the terminal of a worker.
int no_password(char*, int, int, void*) {
  return 0;
}

File open_readable(const PemFile& f) {
  if (f.path.empty()) throw std::invalid_argument(fmt::format("{}: no file given", f.label));
  File file(std::fopen(f.path.c_str(), "r"));
  if (!file) {
    throw std::invalid_argument(
        fmt::format("{} {}: cannot read it: {}", f.label, f.path, std::strerror(errno)));
  }
  return file;
}

CtxPtr new_context() {
  CtxPtr ctx(SSL_CTX_new(TLS_method()));
  if (!ctx) throw std::runtime_error("TLS: cannot create a context: " + take_errors());
  SSL_CTX_set_default_passwd_cb(ctx.get(), no_password);
  return ctx;
}

}  // namespace

void CtxFree::operator()(SSL_CTX* ctx) const {
  SSL_CTX_free(ctx);
}

std::string take_errors(const std::string& fallback) {
  std::string all;
  while (const unsigned long code = ERR_get_error()) {
    const char* reason = ERR_reason_error_string(code);
    std::string text;
    if (reason != nullptr) {
      text = reason;
    } else {
      char buf[256];
      ERR_error_string_n(code, buf, sizeof buf);
      text = buf;
    }
    if (all.find(text) == std::string::npos) all += (all.empty() ? "" : "; ") + text;
  }
  return all.empty() ? fallback : all;
}

void use_certificate(SSL_CTX& ctx, const PemFile& cert, const PemFile& key) {
  open_readable(cert);
  const File key_file = open_readable(key);
  SSL_CTX_set_default_passwd_cb(&ctx, no_password);
  ERR_clear_error();
  if (SSL_CTX_use_certificate_chain_file(&ctx, cert.path.c_str()) != 1) {
    throw std::invalid_argument(
        fmt::format("{} {}: not a PEM certificate ({})", cert.label, cert.path, take_errors()));
  }
  // Read apart from the certificate, so that a file that holds no key and a key that belongs
  // to another certificate are told apart.
  const std::unique_ptr<EVP_PKEY, KeyFree> pkey(
      PEM_read_PrivateKey(key_file.get(), nullptr, no_password, nullptr));
  if (!pkey) {
    throw std::invalid_argument(fmt::format("{} {}: not an unencrypted PEM private key ({})",
                                            key.label, key.path, take_errors()));
  }
  if (SSL_CTX_use_PrivateKey(&ctx, pkey.get()) != 1 || SSL_CTX_check_private_key(&ctx) != 1) {
    throw std::invalid_argument(fmt::format("{} {}: not the key of the certificate {} {} ({})",
                                            key.label, key.path, cert.label, cert.path,
                                            take_errors()));
  }
}

void trust_ca(SSL_CTX& ctx, const PemFile& ca) {
  open_readable(ca);
  ERR_clear_error();
  if (SSL_CTX_load_verify_locations(&ctx, ca.path.c_str(), nullptr) != 1) {
    throw std::invalid_argument(
        fmt::format("{} {}: no PEM CA certificate in it ({})", ca.label, ca.path, take_errors()));
  }
}

void check_ca_file(const PemFile& ca) {
  const CtxPtr ctx = new_context();
  trust_ca(*ctx, ca);
}

Context::Context(const Files& files) : files_(files), ctx_(new_context()) {
  SSL_CTX* ctx = ctx_.get();
  if (SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) != 1 ||
      SSL_CTX_set_ciphersuites(ctx, kSuites) != 1) {
    throw std::runtime_error("TLS: cannot configure TLS 1.3: " + take_errors());
  }
  use_certificate(*ctx, files_.cert, files_.key);
  trust_ca(*ctx, files_.ca);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  SSL_CTX_set_num_tickets(ctx, 0);
  // The transport's own bye frame, authenticated inside TLS, marks an orderly close; a stream
  // that ends without one is a lost peer whether or not a close_notify came.
  SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_RENEGOTIATION);
  // Writes report each record as it goes (the transport's queue advances by what was written),
  // and a retried write may come from a buffer that moved (a borrowed payload copied out).
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_CTX_set_read_ahead(ctx, 1);
  SSL_CTX_set_default_read_buffer_len(ctx, kReadBufferBytes);
}

std::optional<Files> files_from_env(const EnvMap& env) {
  const auto get = [&env](const char* name) {
    const auto it = env.find(name);
    return it == env.end() ? std::string() : it->second;
  };
  const std::string on = get("KUNGFU_TLS");
  if (on.empty() || on == "0") return std::nullopt;
  if (on != "1") {
    throw std::invalid_argument(
        fmt::format("KUNGFU_TLS={}: want 1 (TLS on connections between hosts) or 0", on));
  }
  const auto file = [&](const char* name, const char* what) {
    const std::string path = get(name);
    if (path.empty())
      throw std::invalid_argument(fmt::format("KUNGFU_TLS=1 needs {} ({})", name, what));
    return PemFile{path, name};
  };
  return Files{.cert = file("KUNGFU_TLS_CERT", "this worker's certificate, PEM"),
               .key = file("KUNGFU_TLS_KEY", "its private key, PEM"),
               .ca = file("KUNGFU_TLS_CA", "the CA that signed every worker's certificate, PEM")};
}

std::shared_ptr<const Context> context_from_env(const EnvMap& env) {
  const auto files = files_from_env(env);
  if (!files) return nullptr;
  return std::make_shared<const Context>(*files);
}

std::shared_ptr<const Context> context_from_process_env() {
  EnvMap env;
  for (const char* name : {"KUNGFU_TLS", "KUNGFU_TLS_CERT", "KUNGFU_TLS_KEY", "KUNGFU_TLS_CA"}) {
    if (const char* value = std::getenv(name)) env[name] = value;
  }
  return context_from_env(env);
}

}  // namespace kf::tls
