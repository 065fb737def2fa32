#include "runtime/status.h"

namespace kf {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::ok:
      return "ok";
    case ErrorCode::invalid_argument:
      return "invalid_argument";
    case ErrorCode::timeout:
      return "timeout";
    case ErrorCode::peer_lost:
      return "peer_lost";
    case ErrorCode::not_found:
      return "not_found";
    case ErrorCode::protocol:
      return "protocol";
    case ErrorCode::cancelled:
      return "cancelled";
    case ErrorCode::device:
      return "device";
    case ErrorCode::unavailable:
      return "unavailable";
  }
  return "unknown";
}

std::string Status::to_string() const {
  if (ok()) return "ok";
  return std::string(error_code_name(code_)) + ": " + message_;
}

}  // namespace kf
