// Env::Default(): the POSIX implementation of env.h.
//
// Error mapping (one place): ENOENT becomes NotFound, every other errno becomes IOError; both
// carry "<operation> <path>: <strerror>". MemEnv (mem_env.cc) follows the same mapping so tests
// see the same codes on both.
//
// WritableFile buffers appends in user space (kWriteBufferSize) because the WAL appends many
// small records; one write(2) per record would cost a system call each. Files are opened with
// O_CLOEXEC so a fork+exec (e.g. of fusermount) does not inherit them. Directories are made
// 0700 and files 0600, whatever the umask; no file is opened through a symbolic link.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <utility>

#include "common/env.h"
#include "common/secure_dir.h"

namespace propeller {
namespace {

constexpr size_t kWriteBufferSize = 64 * 1024;

Status PosixError(std::string_view operation, const std::string& path, int err) {
  std::string context(operation);
  context += ' ';
  context += path;
  if (err == ENOENT) {
    return Status::NotFound(Status::IOError(context, err).message());
  }
  return Status::IOError(context, err);
}

// Writes all of [data, data + n) at the file offset, retrying short writes and EINTR.
Status WriteFully(int fd, const char* data, size_t n, const std::string& path) {
  while (n > 0) {
    const ssize_t w = ::write(fd, data, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return PosixError("write", path, errno);
    }
    data += w;
    n -= static_cast<size_t>(w);
  }
  return Status::OK();
}

class PosixWritableFile final : public WritableFile {
 public:
  PosixWritableFile(std::string path, int fd, uint64_t initial_size, bool append_mode)
      : path_(std::move(path)), fd_(fd), size_(initial_size), append_mode_(append_mode) {
    buffer_.reserve(kWriteBufferSize);
  }
  ~PosixWritableFile() override { (void)Close(); }

  Status Append(std::string_view data) override {
    if (fd_ < 0) return Status::IOError("append to closed file " + path_);
    size_ += data.size();
    if (buffer_.size() + data.size() <= kWriteBufferSize) {
      buffer_.append(data);
      return Status::OK();
    }
    PROPELLER_RETURN_IF_ERROR(FlushBuffer());
    // Large appends bypass the buffer: copying them first would only add a memcpy.
    if (data.size() >= kWriteBufferSize) return WriteFully(fd_, data.data(), data.size(), path_);
    buffer_.append(data);
    return Status::OK();
  }

  Status Flush() override {
    if (fd_ < 0) return Status::IOError("flush of closed file " + path_);
    return FlushBuffer();
  }

  Status Sync() override {
    if (fd_ < 0) return Status::IOError("sync of closed file " + path_);
    PROPELLER_RETURN_IF_ERROR(FlushBuffer());
    // fdatasync persists the data and the file size, which is all a reader needs; skipping
    // the timestamps saves a journal write per sync.
    if (::fdatasync(fd_) != 0) return PosixError("fdatasync", path_, errno);
    return Status::OK();
  }

  Status Close() override {
    if (fd_ < 0) return Status::OK();
    Status s = FlushBuffer();
    if (::close(fd_) != 0 && s.ok()) s = PosixError("close", path_, errno);
    fd_ = -1;
    return s;
  }

  uint64_t Size() const override { return size_; }

  Status Preallocate(uint64_t size) override {
    if (fd_ < 0) return Status::IOError("preallocate on closed file " + path_);
    if (append_mode_) return Status::NotSupported("preallocating " + path_ + " opened for append");
    // Mode 0 extends the file size; the descriptor's offset (where appends go) stays.
    while (::fallocate(fd_, 0, 0, static_cast<off_t>(size)) != 0) {
      if (errno == EINTR) continue;
      if (errno == EOPNOTSUPP) return Status::NotSupported("fallocate on " + path_);
      return PosixError("fallocate", path_, errno);
    }
    return Status::OK();
  }

 private:
  Status FlushBuffer() {
    if (buffer_.empty()) return Status::OK();
    Status s = WriteFully(fd_, buffer_.data(), buffer_.size(), path_);
    // On error the buffered bytes are dropped: their fate on disk is unknown either way, and
    // retrying could write them twice.
    buffer_.clear();
    return s;
  }

  const std::string path_;
  int fd_;  // -1 once closed.
  uint64_t size_;
  const bool append_mode_;  // opened with O_APPEND
  std::string buffer_;
};

class PosixSequentialFile final : public SequentialFile {
 public:
  PosixSequentialFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~PosixSequentialFile() override { ::close(fd_); }

  Status Read(size_t n, std::string* out) override {
    out->resize(n);
    for (;;) {
      const ssize_t r = ::read(fd_, out->data(), n);
      if (r < 0) {
        if (errno == EINTR) continue;
        const int err = errno;
        out->clear();
        return PosixError("read", path_, err);
      }
      out->resize(static_cast<size_t>(r));
      return Status::OK();
    }
  }

 private:
  const std::string path_;
  const int fd_;
};

class PosixEnv final : public Env {
 public:
  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    const int fd = OpenRetry(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC);
    if (fd < 0) return PosixError("create", path, errno);
    return std::unique_ptr<WritableFile>(new PosixWritableFile(path, fd, 0, /*append_mode=*/false));
  }

  Result<std::unique_ptr<WritableFile>> NewAppendableFile(const std::string& path) override {
    const int fd = OpenRetry(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC);
    if (fd < 0) return PosixError("open for append", path, errno);
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      const int err = errno;
      ::close(fd);
      return PosixError("fstat", path, err);
    }
    return std::unique_ptr<WritableFile>(
        new PosixWritableFile(path, fd, static_cast<uint64_t>(st.st_size), /*append_mode=*/true));
  }

  Result<std::unique_ptr<SequentialFile>> NewSequentialFile(const std::string& path) override {
    const int fd = OpenRetry(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return PosixError("open", path, errno);
    return std::unique_ptr<SequentialFile>(new PosixSequentialFile(path, fd));
  }

  bool FileExists(const std::string& path) override { return ::access(path.c_str(), F_OK) == 0; }

  Result<std::vector<std::string>> GetChildren(const std::string& dir) override {
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) return PosixError("opendir", dir, errno);
    std::vector<std::string> names;
    for (;;) {
      errno = 0;
      const dirent* entry = ::readdir(d);
      if (entry == nullptr) {
        const int err = errno;
        ::closedir(d);
        if (err != 0) return PosixError("readdir", dir, err);
        return names;
      }
      const std::string_view name(entry->d_name);
      if (name == "." || name == "..") continue;
      names.emplace_back(name);
    }
  }

  Result<uint64_t> GetFileSize(const std::string& path) override {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return PosixError("stat", path, errno);
    return static_cast<uint64_t>(st.st_size);
  }

  Status RemoveFile(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) return PosixError("unlink", path, errno);
    return Status::OK();
  }

  Status RenameFile(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) {
      return PosixError("rename", from + " to " + to, errno);
    }
    return Status::OK();
  }

  Status TruncateFile(const std::string& path, uint64_t size) override {
    const int fd = OpenRetry(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return PosixError("open", path, errno);
    Status s;
    if (::ftruncate(fd, static_cast<off_t>(size)) != 0) s = PosixError("truncate", path, errno);
    ::close(fd);
    return s;
  }

  Status CreateDirs(const std::string& path) override { return MakeDirs(path, 0700); }

  Status RemoveRecursively(const std::string& path) override {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) {
      if (errno == ENOENT) return Status::OK();
      return PosixError("lstat", path, errno);
    }
    // lstat, not stat: a symlink to a directory is removed, never followed.
    if (!S_ISDIR(st.st_mode)) {
      if (::unlink(path.c_str()) != 0 && errno != ENOENT) return PosixError("unlink", path, errno);
      return Status::OK();
    }
    Result<std::vector<std::string>> children = GetChildren(path);
    if (!children.ok()) return children.status();
    for (const std::string& child : *children) {
      PROPELLER_RETURN_IF_ERROR(RemoveRecursively(JoinPath(path, child)));
    }
    if (::rmdir(path.c_str()) != 0 && errno != ENOENT) return PosixError("rmdir", path, errno);
    return Status::OK();
  }

  Status SyncDir(const std::string& path) override {
    const int fd = OpenRetry(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return PosixError("open directory", path, errno);
    Status s;
    if (::fsync(fd) != 0) s = PosixError("fsync directory", path, errno);
    ::close(fd);
    return s;
  }

  int64_t NowNanos() override { return ClockNanos(CLOCK_REALTIME); }
  int64_t MonotonicNanos() override { return ClockNanos(CLOCK_MONOTONIC); }

 private:
  // Files are private to the service (docs/security.md): created 0600 whatever the umask,
  // never written through a symbolic link. (Reads may follow one: key files and configs are
  // often links an administrator made.)
  static int OpenRetry(const std::string& path, int flags) {
    if ((flags & O_ACCMODE) != O_RDONLY) flags |= O_NOFOLLOW;
    for (;;) {
      const int fd = ::open(path.c_str(), flags, 0600);
      if (fd >= 0 || errno != EINTR) return fd;
    }
  }

  static int64_t ClockNanos(clockid_t clock) {
    timespec ts{};
    clock_gettime(clock, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
  }
};

}  // namespace

Env* Env::Default() {
  // Leaked on purpose: it must outlive every static object that might log or write at exit.
  static Env* const env = new PosixEnv();
  return env;
}

}  // namespace propeller
