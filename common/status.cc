#include "common/status.h"

#include <cerrno>
#include <cstring>

namespace propeller {

const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kNotFound: return "not found";
    case StatusCode::kInvalidArgument: return "invalid argument";
    case StatusCode::kCorruption: return "corruption";
    case StatusCode::kIOError: return "I/O error";
    case StatusCode::kAlreadyExists: return "already exists";
    case StatusCode::kNotSupported: return "not supported";
    case StatusCode::kResourceExhausted: return "resource exhausted";
    case StatusCode::kUnavailable: return "unavailable";
    case StatusCode::kTimeout: return "timeout";
    case StatusCode::kPermissionDenied: return "permission denied";
    case StatusCode::kAborted: return "aborted";
    case StatusCode::kInternal: return "internal error";
    case StatusCode::kRedirect: return "redirect";
  }
  return "unknown status code";
}

Status::Status(StatusCode code, std::string_view message) {
  if (code != StatusCode::kOk) {
    state_ = std::make_shared<const State>(State{code, std::string(message)});
  }
}

Status Status::IOError(std::string_view context, int err) {
  std::string msg(context);
  msg += ": ";
  msg += std::strerror(err);
  // A full disk or quota is a limit, not a broken device: callers wait for space and retry
  // (and the mount reports ENOSPC), where an I/O error is reported as such.
  if (err == ENOSPC || err == EDQUOT) return Status(StatusCode::kResourceExhausted, msg);
  return Status(StatusCode::kIOError, msg);
}

const std::string& Status::message() const {
  static const std::string kEmpty;
  return state_ ? state_->message : kEmpty;
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  std::string s = StatusCodeName(state_->code);
  if (!state_->message.empty()) {
    s += ": ";
    s += state_->message;
  }
  return s;
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  std::string msg(context);
  msg += ": ";
  msg += state_->message;
  return Status(state_->code, msg);
}

}  // namespace propeller
