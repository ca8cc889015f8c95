#include "client/fuse/errno_map.h"

#include <cerrno>

namespace propeller::fuse {

int ErrnoOf(const Status& s) {
  switch (s.code()) {
    case StatusCode::kOk: return 0;
    case StatusCode::kNotFound: return ENOENT;
    case StatusCode::kInvalidArgument: return EINVAL;
    case StatusCode::kPermissionDenied: return EACCES;
    case StatusCode::kAlreadyExists: return EEXIST;
    case StatusCode::kNotSupported: return ENOTSUP;
    case StatusCode::kResourceExhausted: return ENOSPC;
    case StatusCode::kUnavailable: return EAGAIN;
    case StatusCode::kTimeout: return ETIMEDOUT;
    case StatusCode::kCorruption:
    case StatusCode::kIOError:
    case StatusCode::kAborted:
    case StatusCode::kInternal:
    case StatusCode::kRedirect:
      return EIO;
  }
  return EIO;
}

}  // namespace propeller::fuse
