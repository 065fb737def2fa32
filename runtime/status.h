// Status: the outcome of an asynchronous operation. Errors carry a code a program can branch on
// and a message a person can act on (it names the operation and, for network faults, the peer).
// C++17: included by world glue that is compiled without C++20.
#pragma once

#include <string>
#include <utility>

namespace kf {

enum class ErrorCode {
  ok = 0,
  invalid_argument,  // the caller asked for something impossible (bad root, avg on integers, ...)
  timeout,           // the operation did not finish within its deadline
  peer_lost,         // a peer the operation depends on went away
  not_found,         // a p2p request named a blob the peer does not hold
  protocol,          // a peer sent something the protocol does not allow
  cancelled,         // the engine shut down with the operation pending
  device,            // a device (GPU) call failed: CUDA, NCCL or cuBLAS, named in the message
  unavailable,       // a service the operation needs (the config server) could not be reached
};

const char* error_code_name(ErrorCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status success() { return {}; }

  bool ok() const { return code_ == ErrorCode::ok; }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "peer_lost: allreduce 'grad/3' lost peer 2 (127.0.0.1:10002)"
  std::string to_string() const;

 private:
  ErrorCode code_ = ErrorCode::ok;
  std::string message_;
};

}  // namespace kf
