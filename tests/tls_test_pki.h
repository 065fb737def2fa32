// Throw-away certificates for TLS tests, made with the OpenSSL API in a fresh temporary directory
// (removed with the object): the job's CA, a worker certificate it signed, and a rogue
// certificate with the same names signed by another CA. EC P-256 keys, valid for a day.
#pragma once

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>

namespace kf::testing {

namespace pki_detail {

struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct CertFree {
  void operator()(X509* c) const { X509_free(c); }
};
struct ExtFree {
  void operator()(X509_EXTENSION* e) const { X509_EXTENSION_free(e); }
};
struct FileClose {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using Key = std::unique_ptr<EVP_PKEY, KeyFree>;
using Cert = std::unique_ptr<X509, CertFree>;

inline void check(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(std::string("test PKI: ") + what);
}

inline Key new_key() {
  Key k(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
  check(k != nullptr, "EC key generation");
  return k;
}

inline void add_ext(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  std::unique_ptr<X509_EXTENSION, ExtFree> ext(
      X509V3_EXT_conf_nid(nullptr, &ctx, nid, const_cast<char*>(value)));
  check(ext != nullptr && X509_add_ext(cert, ext.get(), -1) == 1, "certificate extension");
}

// A certificate for `key` named `cn`, signed by `issuer` with `issuer_key` (self-signed when
// `issuer` is null). A CA when `ca`; otherwise a leaf for TLS clients and servers on `san`.
inline Cert new_cert(const std::string& cn, EVP_PKEY* key, X509* issuer, EVP_PKEY* issuer_key,
                     bool ca, long serial, const char* san = nullptr) {
  Cert c(X509_new());
  check(c != nullptr, "X509_new");
  X509_set_version(c.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(c.get()), serial);
  X509_gmtime_adj(X509_getm_notBefore(c.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(c.get()), 24 * 3600);
  X509_set_pubkey(c.get(), key);
  X509_NAME* name = X509_get_subject_name(c.get());
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("kf-test"), -1, -1, 0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509* signer = issuer != nullptr ? issuer : c.get();
  X509_set_issuer_name(c.get(), X509_get_subject_name(signer));
  if (ca) {
    add_ext(c.get(), signer, NID_basic_constraints, "critical,CA:TRUE");
    add_ext(c.get(), signer, NID_key_usage, "critical,keyCertSign,cRLSign");
    add_ext(c.get(), signer, NID_subject_key_identifier, "hash");
  } else {
    add_ext(c.get(), signer, NID_basic_constraints, "critical,CA:FALSE");
    add_ext(c.get(), signer, NID_key_usage, "critical,digitalSignature");
    add_ext(c.get(), signer, NID_ext_key_usage, "serverAuth,clientAuth");
    if (san != nullptr) add_ext(c.get(), signer, NID_subject_alt_name, san);
  }
  check(X509_sign(c.get(), issuer_key != nullptr ? issuer_key : key, EVP_sha256()) > 0,
        "X509_sign");
  return c;
}

inline void write_cert(const std::string& path, X509* cert) {
  std::unique_ptr<std::FILE, FileClose> f(std::fopen(path.c_str(), "w"));
  check(f != nullptr && PEM_write_X509(f.get(), cert) == 1, "writing a certificate");
}

inline void write_key(const std::string& path, EVP_PKEY* key) {
  std::unique_ptr<std::FILE, FileClose> f(std::fopen(path.c_str(), "w"));
  check(f != nullptr &&
            PEM_write_PrivateKey(f.get(), key, nullptr, nullptr, 0, nullptr, nullptr) == 1,
        "writing a key");
}

}  // namespace pki_detail

class TestPki {
 public:
  // Every leaf names the loopback hosts the tests use (127.0.0.1-3 and localhost).
  static constexpr const char* kSan = "IP:127.0.0.1,IP:127.0.0.2,IP:127.0.0.3,DNS:localhost";

  TestPki() {
    using namespace pki_detail;
    std::string tmpl = (std::filesystem::temp_directory_path() / "kf-tls-XXXXXX").string();
    check(::mkdtemp(tmpl.data()) != nullptr, "mkdtemp");
    dir_ = tmpl;
    const Key ca_key = new_key(), other_ca_key = new_key(), worker_key = new_key(),
              rogue_key = new_key();
    const Cert ca = new_cert("kf-test-ca", ca_key.get(), nullptr, nullptr, true, 1);
    const Cert other_ca = new_cert("other-ca", other_ca_key.get(), nullptr, nullptr, true, 2);
    const Cert worker =
        new_cert("worker", worker_key.get(), ca.get(), ca_key.get(), false, 3, kSan);
    const Cert rogue =
        new_cert("rogue", rogue_key.get(), other_ca.get(), other_ca_key.get(), false, 4, kSan);
    write_cert(ca_file(), ca.get());
    write_cert(other_ca_file(), other_ca.get());
    write_cert(cert_file(), worker.get());
    write_key(key_file(), worker_key.get());
    write_cert(rogue_cert_file(), rogue.get());
    write_key(rogue_key_file(), rogue_key.get());
  }
  ~TestPki() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  TestPki(const TestPki&) = delete;
  TestPki& operator=(const TestPki&) = delete;

  const std::string& dir() const { return dir_; }
  std::string ca_file() const { return dir_ + "/ca.pem"; }  // the job's CA
  std::string cert_file() const { return dir_ + "/worker.pem"; }
  std::string key_file() const { return dir_ + "/worker.key"; }
  std::string other_ca_file() const { return dir_ + "/other-ca.pem"; }
  std::string rogue_cert_file() const { return dir_ + "/rogue.pem"; }  // signed by other-ca
  std::string rogue_key_file() const { return dir_ + "/rogue.key"; }

 private:
  std::string dir_;
};

}  // namespace kf::testing
