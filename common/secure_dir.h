// Directories the service keeps its state in, and may trust (docs/security.md, "What is
// stored where").
//
// A daemon runs as root in front of everyone's files, so a file another user can plant in its
// directories is a way to make root write where that user chooses (a symbolic link named
// lock.mdb) or to read what the index holds. Every directory Propeller creates gets an
// explicit mode, whatever the process umask (a FUSE server runs with umask 0), and a directory
// it finds is checked before anything in it is opened:
//   - data directories: 0700, files 0600, owned by the service's user; refused when another
//     user could write the directory or any ancestor (a sticky ancestor such as /tmp is fine:
//     nobody else may replace what we own in it), or when it holds a symbolic link, a hard
//     link, a device, fifo or socket, or an entry owned by another user;
//   - runtime directories (sockets and mount records, /run/propeller): the same checks of the
//     directory and its ancestors, mode 0755 for root (users reach the sockets and read the
//     records) or 0700.
//
// Thread-safe: nothing here keeps state.
#ifndef PROPELLER_COMMON_SECURE_DIR_H_
#define PROPELLER_COMMON_SECURE_DIR_H_

#include <sys/types.h>

#include <string>

#include "common/status.h"

namespace propeller {

// mkdir -p: creates the missing directories of `path` with exactly `mode` (the umask does not
// apply); existing ones are left as they are. IOError naming the directory otherwise.
Status MakeDirs(const std::string& path, mode_t mode = 0700);

// Checks that nobody but root and this process's user can change `path`'s ancestors: each is
// a directory owned by root or the effective user and writable by nobody else unless sticky.
// `path` itself is not checked. PermissionDenied naming the ancestor and the fix.
Status CheckAncestorsTrusted(const std::string& path);

// Creates `dir` (and missing parents) with `mode`, or checks an existing one: a directory
// owned by the effective user that nobody else may write (it may hold planted files
// otherwise), below trusted ancestors; its mode is then set to `mode`. A symbolic link on the
// way is followed only when root or this user owns it. PermissionDenied or IOError saying what
// to fix.
Status PrepareTrustedDir(const std::string& dir, mode_t mode);

// PrepareTrustedDir(dir, 0700) for a data directory, then a walk of everything in
// it: directories are narrowed to 0700 and files to 0600 (what older versions left wider), and
// an entry another user could have planted — a symbolic link, a hard-linked file, a device,
// fifo or socket, anything owned by another user — is refused with its path. The walk is
// descriptor-relative and follows no link.
Status PrepareDataDir(const std::string& dir);

// This user's runtime directory for sockets and mount records: $PROPELLER_RUNTIME_DIR, else
// /run/propeller for root, else $XDG_RUNTIME_DIR/propeller, else /tmp/propeller-<uid>.
std::string DefaultRuntimeDir();
// PrepareTrustedDir(dir, 0755 for root, else 0700).
Status PrepareRuntimeDir(const std::string& dir);

}  // namespace propeller

#endif  // PROPELLER_COMMON_SECURE_DIR_H_
