#include "real/tls_session.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/socket.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <stdexcept>

namespace kf::tls {
namespace {

constexpr std::size_t kRecordBytes = 16384;  // the most plaintext one TLS record carries
// Pieces smaller than this (frame headers, small payloads) are gathered into one record instead
// of costing a record each.
constexpr std::size_t kGatherBelow = 4096;

int session_index() {
  static const int index = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}

std::string subject_of(const X509* cert) {
  if (cert == nullptr) return "(none)";
  char buf[512];
  X509_NAME_oneline(X509_get_subject_name(cert), buf, sizeof buf);
  return buf;
}

// The stream ended without a close_notify: with SSL_OP_IGNORE_UNEXPECTED_EOF OpenSSL reports it
// as an end of stream, some paths still as this reason.
bool unexpected_eof() {
  const unsigned long code = ERR_peek_error();
  return ERR_GET_LIB(code) == ERR_LIB_SSL &&
         ERR_GET_REASON(code) == SSL_R_UNEXPECTED_EOF_WHILE_READING;
}

// The socket under a session: OpenSSL's own socket BIO writes with write(2), which raises SIGPIPE
// on a connection the peer has reset and kills a worker that never asked for signals; this one
// sends with MSG_NOSIGNAL (EPIPE comes back as an error instead), as the plain transport does.
// Each record goes in a send of its own (gathering a writev()'s records into one send, or sending
// them with MSG_MORE, was tried: neither saved time on loopback).
int socket_of(BIO* bio) {
  return static_cast<int>(reinterpret_cast<std::intptr_t>(BIO_get_data(bio)));
}

bool retryable(int err) {
  return err == EAGAIN || err == EWOULDBLOCK || err == EINTR;
}

int bio_read(BIO* bio, char* data, std::size_t size, std::size_t* done) {
  BIO_clear_retry_flags(bio);
  const ssize_t n = ::recv(socket_of(bio), data, size, 0);
  if (n > 0) {
    *done = static_cast<std::size_t>(n);
    return 1;
  }
  if (n == 0) BIO_set_flags(bio, BIO_FLAGS_IN_EOF);
  if (n < 0 && retryable(errno)) BIO_set_retry_read(bio);
  *done = 0;
  return 0;
}

int bio_write(BIO* bio, const char* data, std::size_t size, std::size_t* done) {
  BIO_clear_retry_flags(bio);
  const ssize_t n = ::send(socket_of(bio), data, size, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (n >= 0) {
    *done = static_cast<std::size_t>(n);
    return 1;
  }
  if (retryable(errno)) BIO_set_retry_write(bio);
  *done = 0;
  return 0;
}

long bio_ctrl(BIO* bio, int command, long, void* arg) {
  switch (command) {
    case BIO_CTRL_FLUSH:
      return 1;  // nothing is buffered here
    case BIO_CTRL_EOF:
      return BIO_test_flags(bio, BIO_FLAGS_IN_EOF) != 0 ? 1 : 0;
    case BIO_C_GET_FD:
      if (arg != nullptr) *static_cast<int*>(arg) = socket_of(bio);
      return socket_of(bio);
    default:
      return 0;
  }
}

struct MethodFree {
  void operator()(BIO_METHOD* method) const { BIO_meth_free(method); }
};
struct BioFree {
  void operator()(BIO* bio) const { BIO_free(bio); }
};

const BIO_METHOD* socket_method() {
  static const std::unique_ptr<BIO_METHOD, MethodFree> method = [] {
    std::unique_ptr<BIO_METHOD, MethodFree> m(BIO_meth_new(
        BIO_get_new_index() | BIO_TYPE_SOURCE_SINK | BIO_TYPE_DESCRIPTOR, "kf socket"));
    if (!m || BIO_meth_set_read_ex(m.get(), bio_read) != 1 ||
        BIO_meth_set_write_ex(m.get(), bio_write) != 1 ||
        BIO_meth_set_ctrl(m.get(), bio_ctrl) != 1) {
      throw std::runtime_error("TLS: cannot make the socket BIO: " + take_errors());
    }
    return m;
  }();
  return method.get();
}

}  // namespace

// Called by OpenSSL for each certificate of the other side's chain; remembers the first refused.
int record_verify_failure(int ok, X509_STORE_CTX* store) {
  if (ok == 1) return 1;
  auto* ssl =
      static_cast<SSL*>(X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx()));
  auto* session =
      ssl == nullptr ? nullptr : static_cast<Session*>(SSL_get_ex_data(ssl, session_index()));
  if (session != nullptr && session->verify_failure_.empty()) {
    session->verify_failure_ = fmt::format(
        "certificate {} refused: {}", subject_of(X509_STORE_CTX_get_current_cert(store)),
        X509_verify_cert_error_string(X509_STORE_CTX_get_error(store)));
  }
  return 0;
}

void SslFree::operator()(SSL* ssl) const {
  SSL_free(ssl);
}

Session::Session(const Context& context, int fd, Role role) : ssl_(SSL_new(context.get())) {
  std::unique_ptr<BIO, BioFree> bio(BIO_new(socket_method()));
  if (!ssl_ || !bio || SSL_set_ex_data(ssl_.get(), session_index(), this) != 1) {
    throw std::runtime_error("TLS: cannot set up a connection: " + take_errors());
  }
  BIO_set_data(bio.get(), reinterpret_cast<void*>(static_cast<std::intptr_t>(fd)));
  BIO_set_init(bio.get(), 1);
  SSL_set_bio(ssl_.get(), bio.get(), bio.get());  // the session owns it from here
  bio.release();
  SSL_set_verify(ssl_.get(), SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT,
                 record_verify_failure);
  if (role == Role::connect) {
    SSL_set_connect_state(ssl_.get());
  } else {
    SSL_set_accept_state(ssl_.get());
  }
  staging_.reserve(kRecordBytes);
}

Session::Progress Session::handshake() {
  ERR_clear_error();
  errno = 0;  // SSL_ERROR_SYSCALL with errno 0 is an end of stream, never a stale error
  const int r = SSL_do_handshake(ssl_.get());
  const int saved = errno;
  if (r == 1) return Progress::done;
  switch (SSL_get_error(ssl_.get(), r)) {
    case SSL_ERROR_WANT_READ:
      return Progress::want_read;
    case SSL_ERROR_WANT_WRITE:
      return Progress::want_write;
    case SSL_ERROR_ZERO_RETURN:
      error_ = "the peer closed the connection";
      return Progress::closed;
    case SSL_ERROR_SYSCALL:
      ERR_clear_error();
      error_ = saved != 0 ? std::strerror(saved) : "the peer closed the connection";
      return Progress::closed;
    default:
      if (unexpected_eof()) {
        ERR_clear_error();
        error_ = "the peer closed the connection";
        return Progress::closed;
      }
      error_ = take_errors();
      if (!verify_failure_.empty()) error_ += ": " + verify_failure_;
      return Progress::failed;
  }
}

ssize_t Session::failed_io(int ret, int saved_errno) {
  switch (SSL_get_error(ssl_.get(), ret)) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
      errno = EAGAIN;
      return -1;
    case SSL_ERROR_ZERO_RETURN:
      return 0;
    case SSL_ERROR_SYSCALL:
      ERR_clear_error();
      if (saved_errno == 0) return 0;  // the stream ended
      error_ = std::strerror(saved_errno);
      errno = saved_errno;
      return -1;
    default:
      if (unexpected_eof()) {
        ERR_clear_error();
        return 0;
      }
      error_ = "TLS: " + take_errors();
      errno = EPROTO;
      return -1;
  }
}

ssize_t Session::read(void* data, std::size_t size) {
  ERR_clear_error();
  errno = 0;
  std::size_t n = 0;
  const int r = SSL_read_ex(ssl_.get(), data, size, &n);
  starved_ = r != 1;
  if (r == 1) return static_cast<ssize_t>(n);
  return failed_io(r, errno);
}

ssize_t Session::writev(const iovec* iov, int count) {
  std::size_t total = 0;
  int i = 0;
  std::size_t skip = 0;  // bytes of iov[i] written by this call
  while (true) {
    while (i < count && iov[i].iov_len == skip) {  // empty pieces, or one just finished
      ++i;
      skip = 0;
    }
    if (i >= count) break;
    const std::byte* data = static_cast<const std::byte*>(iov[i].iov_base) + skip;
    std::size_t size = iov[i].iov_len - skip;
    const bool gather = retry_bytes_ > 0 ? retry_staged_ : size < kGatherBelow;
    if (gather) {
      // Whole small pieces, as many as one record takes; a retry takes exactly what it staged
      // before (the same pieces: the caller's queue has not moved).
      const std::size_t limit = retry_bytes_ > 0 ? retry_bytes_ : kRecordBytes;
      staging_.clear();
      for (int j = i; j < count && staging_.size() < limit; ++j) {
        const std::size_t from = j == i ? skip : 0;
        const std::size_t piece = iov[j].iov_len - from;
        if (retry_bytes_ == 0 && (piece >= kGatherBelow || staging_.size() + piece > limit)) break;
        const std::size_t take = std::min(piece, limit - staging_.size());
        const auto* p = static_cast<const std::byte*>(iov[j].iov_base) + from;
        staging_.insert(staging_.end(), p, p + take);
      }
      if (retry_bytes_ > 0 && staging_.size() != retry_bytes_) {
        error_ = "TLS: a write to retry lost its bytes";
        errno = EPROTO;
        return -1;
      }
      data = staging_.data();
      size = staging_.size();
    }
    ERR_clear_error();
    errno = 0;
    std::size_t n = 0;
    const int r = SSL_write_ex(ssl_.get(), data, size, &n);
    if (r != 1) {
      const int saved = errno;
      const int err = SSL_get_error(ssl_.get(), r);
      if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
        retry_bytes_ = size;
        retry_staged_ = gather;
        if (total > 0) return static_cast<ssize_t>(total);
        errno = EAGAIN;
        return -1;
      }
      const ssize_t result = failed_io(r, saved);
      if (result == 0) {  // a stream that ended cannot be written to
        error_ = std::strerror(EPIPE);
        errno = EPIPE;
      }
      return -1;
    }
    retry_bytes_ = 0;
    total += n;
    for (std::size_t left = n; left > 0;) {  // advance over what was written
      const std::size_t rest = iov[i].iov_len - skip;
      if (left < rest) {
        skip += left;
        left = 0;
      } else {
        left -= rest;
        ++i;
        skip = 0;
      }
    }
  }
  return static_cast<ssize_t>(total);
}

bool Session::has_pending() const {
  return !starved_ && SSL_has_pending(ssl_.get()) == 1;
}

}  // namespace kf::tls
