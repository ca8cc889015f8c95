// Env: every file-system and clock access of Propeller goes through this seam
// (docs/style.md rule 7), so tests run on an in-memory file system and inject faults (I/O errors,
// crashes, power loss).
//
// Env::Default() is the POSIX implementation and lives for the whole process. NewMemEnv() and
// FaultInjectionEnv (fault_env.h) are for tests. All methods are thread-safe; a single
// WritableFile or SequentialFile object must be used by one thread at a time.
//
// LMDB does its own I/O on real files and is not routed through Env; it is crash-safe by itself
// (copy-on-write, synced commits). What goes through Env is everything Propeller writes itself:
// the write-ahead log, metadata files, temporary files.
#ifndef PROPELLER_COMMON_ENV_H_
#define PROPELLER_COMMON_ENV_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace propeller {

// A file open for appending. Append() may buffer in user space only up to the next Flush():
// after Flush() returns OK the bytes are in the operating system (they survive kill -9 of this
// process); after Sync() returns OK they are on stable storage (they survive power loss).
class WritableFile {
 public:
  virtual ~WritableFile() = default;
  virtual Status Append(std::string_view data) = 0;
  virtual Status Flush() = 0;
  virtual Status Sync() = 0;  // implies Flush()
  virtual Status Close() = 0; // flushes; does not sync. Idempotent.
  // Bytes appended so far, including the file's size when it was opened.
  virtual uint64_t Size() const = 0;
  // Reserves the file's first `size` bytes on the device (fallocate): a shorter file grows to
  // `size` with zeros, and later appends overwrite those zeros in place instead of growing the
  // file, so syncing them commits no size change (on this machine's ext4 an fdatasync after
  // an append that grew the file also commits the journal: median 125 vs 85 us). Size() is
  // unchanged; appends continue at Size(). NotSupported for files opened for append (they
  // write at the end of the file) and where the file system cannot reserve space.
  virtual Status Preallocate(uint64_t size) = 0;
};

// A file read from the start to the end.
class SequentialFile {
 public:
  virtual ~SequentialFile() = default;
  // Reads up to n bytes into *out (replacing its contents). An empty *out with OK means EOF.
  virtual Status Read(size_t n, std::string* out) = 0;
};

class Env {
 public:
  virtual ~Env() = default;

  // The process-wide POSIX Env. Never null; never destroyed.
  static Env* Default();

  // Creates or truncates `path`.
  virtual Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) = 0;
  // Opens `path` for appending, creating it if missing. Appends go to the end of the file.
  virtual Result<std::unique_ptr<WritableFile>> NewAppendableFile(const std::string& path) = 0;
  // NotFound when `path` does not exist.
  virtual Result<std::unique_ptr<SequentialFile>> NewSequentialFile(const std::string& path) = 0;

  virtual bool FileExists(const std::string& path) = 0;
  // Names (not paths) of the entries of `dir`, without "." and "..", in no particular order.
  virtual Result<std::vector<std::string>> GetChildren(const std::string& dir) = 0;
  virtual Result<uint64_t> GetFileSize(const std::string& path) = 0;
  virtual Status RemoveFile(const std::string& path) = 0;
  // Atomically replaces `to` with `from`.
  virtual Status RenameFile(const std::string& from, const std::string& to) = 0;
  // Truncates `path` to `size` bytes (the tail of a log torn by a crash).
  virtual Status TruncateFile(const std::string& path, uint64_t size) = 0;
  // mkdir -p. OK when the directory exists.
  virtual Status CreateDirs(const std::string& path) = 0;
  // rm -r. OK when `path` does not exist.
  virtual Status RemoveRecursively(const std::string& path) = 0;
  // fsync on the directory, so created, renamed and removed entries are durable.
  virtual Status SyncDir(const std::string& path) = 0;

  // Wall-clock time in nanoseconds since the Unix epoch (file times, query ages).
  virtual int64_t NowNanos() = 0;
  // Monotonic time in nanoseconds from an arbitrary origin (timeouts, latencies).
  virtual int64_t MonotonicNanos() = 0;
};

// A fresh, empty in-memory file system; the clock is the real one. Owned by the caller.
std::unique_ptr<Env> NewMemEnv();

// Reads the whole file into *out.
Status ReadFileToString(Env* env, const std::string& path, std::string* out);
// Writes `data` to `path` atomically and durably (temp file, sync, rename, sync dir).
Status WriteFileAtomically(Env* env, const std::string& path, std::string_view data);
// Copies `from` to `to` (created or truncated) and syncs it; a failed copy removes `to`.
Status CopyFile(Env* env, const std::string& from, const std::string& to);

// "a" + "b" -> "a/b"; never doubles the slash.
std::string JoinPath(std::string_view a, std::string_view b);

}  // namespace propeller

#endif  // PROPELLER_COMMON_ENV_H_
