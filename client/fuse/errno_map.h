// The one place where the mount turns a Status into the errno a file-system call returns
// (as libfuse's examples keep one such function). Handlers pass a system call's own errno
// through unchanged; everything that comes from Propeller's own layers (reading a record,
// a search, the index) goes through ErrnoOf.
#ifndef PROPELLER_CLIENT_FUSE_ERRNO_MAP_H_
#define PROPELLER_CLIENT_FUSE_ERRNO_MAP_H_

#include "common/status.h"

namespace propeller::fuse {

// 0 for OK; ENOENT, EINVAL, EACCES, EEXIST, ENOTSUP, ENOSPC (a limit or a full disk), EAGAIN
// (the index is down or catching up: try again), ETIMEDOUT; EIO for everything else
// (corruption, internal errors, other I/O errors).
int ErrnoOf(const Status& s);

}  // namespace propeller::fuse

#endif  // PROPELLER_CLIENT_FUSE_ERRNO_MAP_H_
