// One TLS connection over a non-blocking socket, driven by an event loop. The handshake is a step
// function to call on every readiness event until it is done; reads and writes then follow the
// socket calls' conventions (a byte count; -1 with errno EAGAIN when OpenSSL wants the socket
// readable or writable again, which is what OpenSSL's WANT_READ / WANT_WRITE map to; 0 at the
// end of the stream; -1 with another errno on failure, error() saying why), so the transport's
// queue and decoder work unchanged on top of it.
//
// Reads: OpenSSL reads ahead, so records may wait inside the session with nothing left on the
// socket; a caller that stops reading before EAGAIN must come back while has_pending() holds
// (a level-triggered loop will not wake it for those bytes).
// Writes: small pieces are gathered into one record, large ones are encrypted from where they
// are; a write OpenSSL could not finish must be retried with the same bytes first, which a
// caller that advances its queue by exactly what writev() returned does. What writev() reports
// written is on the socket: nothing waits inside the session.
// A read that needs the socket writable (or a write that needs it readable) would take a key
// update or a renegotiation, which neither side of the transport ever starts (TLS 1.3, and no
// KeyUpdate is requested); it too is reported as EAGAIN.
#pragma once

#include <openssl/types.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "real/tls_context.h"

namespace kf::tls {

struct SslFree {
  void operator()(SSL* ssl) const;
};
using SslPtr = std::unique_ptr<SSL, SslFree>;

class Session {
 public:
  enum class Role { connect, accept };
  enum class Progress {
    done,        // handshake complete, the peer's certificate verified
    want_read,   // call again once the socket is readable
    want_write,  // call again once the socket is writable
    closed,      // the peer closed or reset the connection (error() says how)
    failed,      // a TLS failure: a certificate refused, a protocol error (error() says which)
  };

  // `fd` stays owned by the caller and must outlive the session. Throws std::runtime_error when
  // OpenSSL cannot set the connection up.
  Session(const Context& context, int fd, Role role);
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  Progress handshake();
  ssize_t read(void* data, std::size_t size);
  ssize_t writev(const iovec* iov, int count);
  // The session holds bytes a read() would return without the socket: it has buffered data and
  // the last read did not end in EAGAIN (a record still incomplete waits for the socket).
  bool has_pending() const;
  // Why the last call failed: OpenSSL's reasons, with the certificate refused and why.
  const std::string& error() const { return error_; }

 private:
  friend int record_verify_failure(int ok, X509_STORE_CTX* store);
  ssize_t failed_io(int ret, int saved_errno);
  SslPtr ssl_;
  std::string error_;
  std::string verify_failure_;  // the first certificate the verification refused, and why
  bool starved_ = false;        // the last read wanted the socket
  std::vector<std::byte> staging_;
  // A write that OpenSSL asked to repeat: these many bytes, gathered (staged) or direct.
  std::size_t retry_bytes_ = 0;
  bool retry_staged_ = false;
};

}  // namespace kf::tls
