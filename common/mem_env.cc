// NewMemEnv(): an in-memory file system with the semantics of the POSIX Env, for tests.
//
// Directories are tracked, not implicit: creating a file needs its parent directory to exist
// (CreateDirs first), as on a real file system, so code that forgets a CreateDirs fails in
// memory tests too instead of first in production. "/" always exists; a relative path with no
// slash lives in an always-existing current directory. Paths are normalised by collapsing
// repeated slashes and dropping a trailing slash; "." and ".." are not interpreted.
//
// Files behave like inodes: an open WritableFile or SequentialFile keeps working on its file
// after the file is renamed or removed, and writes are visible to readers at once (no user-space
// buffer, so Flush is a no-op and Sync is Flush). Errors use the POSIX Env's mapping: ENOENT is
// NotFound, any other condition IOError with the errno text Linux would give.
//
// Lock order: MemEnv::mu_ before FileState::mu. Thread-safe as env.h requires.
#include <algorithm>
#include <cerrno>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "common/env.h"

namespace propeller {
namespace {

Status MemError(std::string_view operation, const std::string& path, int err) {
  std::string context(operation);
  context += ' ';
  context += path;
  if (err == ENOENT) return Status::NotFound(Status::IOError(context, err).message());
  return Status::IOError(context, err);
}

// The contents of one file (an inode). Shared by the name table and open handles.
struct FileState {
  std::mutex mu;
  std::string data;  // Under mu.
};

class MemWritableFile final : public WritableFile {
 public:
  MemWritableFile(std::string path, std::shared_ptr<FileState> file, uint64_t initial_size,
                  bool append_mode)
      : path_(std::move(path)), file_(std::move(file)), size_(initial_size),
        append_mode_(append_mode) {}

  // Like write(2): at the end of the file in append mode, else at this handle's offset
  // (Size()), overwriting what is there (the zeros of Preallocate).
  Status Append(std::string_view data) override {
    if (closed_) return Status::IOError("append to closed file " + path_);
    std::lock_guard<std::mutex> lock(file_->mu);
    std::string& contents = file_->data;
    const size_t at = append_mode_ ? contents.size() : static_cast<size_t>(size_);
    if (contents.size() < at + data.size()) contents.resize(at + data.size(), '\0');
    contents.replace(at, data.size(), data);
    size_ += data.size();
    return Status::OK();
  }
  Status Preallocate(uint64_t size) override {
    if (closed_) return Status::IOError("preallocate on closed file " + path_);
    if (append_mode_) return Status::NotSupported("preallocating " + path_ + " opened for append");
    std::lock_guard<std::mutex> lock(file_->mu);
    if (file_->data.size() < size) file_->data.resize(static_cast<size_t>(size), '\0');
    return Status::OK();
  }
  Status Flush() override {
    if (closed_) return Status::IOError("flush of closed file " + path_);
    return Status::OK();
  }
  Status Sync() override {
    if (closed_) return Status::IOError("sync of closed file " + path_);
    return Status::OK();
  }
  Status Close() override {
    closed_ = true;
    return Status::OK();
  }
  uint64_t Size() const override { return size_; }

 private:
  const std::string path_;
  const std::shared_ptr<FileState> file_;
  uint64_t size_;  // bytes appended, plus the size at open: the offset of the next write
  const bool append_mode_;
  bool closed_ = false;
};

class MemSequentialFile final : public SequentialFile {
 public:
  explicit MemSequentialFile(std::shared_ptr<FileState> file) : file_(std::move(file)) {}

  Status Read(size_t n, std::string* out) override {
    std::lock_guard<std::mutex> lock(file_->mu);
    const std::string& data = file_->data;
    const size_t start = pos_ < data.size() ? pos_ : data.size();
    const size_t len = std::min(n, data.size() - start);
    out->assign(data, start, len);
    pos_ = start + len;
    return Status::OK();
  }

 private:
  const std::shared_ptr<FileState> file_;
  size_t pos_ = 0;
};

std::string Normalize(std::string_view path) {
  std::string out;
  out.reserve(path.size());
  for (char c : path) {
    if (c == '/' && !out.empty() && out.back() == '/') continue;
    out += c;
  }
  if (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

// "/a/b" -> "/a", "/a" -> "/", "a" -> "" (the current directory), "/" -> "/".
std::string ParentOf(const std::string& path) {
  const size_t pos = path.rfind('/');
  if (pos == std::string::npos) return "";
  if (pos == 0) return "/";
  return path.substr(0, pos);
}

// The prefix every entry strictly below directory `dir` starts with.
std::string ChildPrefix(const std::string& dir) {
  if (dir.empty()) return "";
  return dir == "/" ? "/" : dir + "/";
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

class MemEnv final : public Env {
 public:
  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    return OpenWritable(path, /*truncate=*/true);
  }

  Result<std::unique_ptr<WritableFile>> NewAppendableFile(const std::string& path) override {
    return OpenWritable(path, /*truncate=*/false);
  }

  Result<std::unique_ptr<SequentialFile>> NewSequentialFile(const std::string& path) override {
    const std::string p = Normalize(path);
    std::lock_guard<std::mutex> lock(mu_);
    auto it = files_.find(p);
    if (it == files_.end()) return MemError("open", p, IsDirLocked(p) ? EISDIR : ENOENT);
    return std::unique_ptr<SequentialFile>(new MemSequentialFile(it->second));
  }

  bool FileExists(const std::string& path) override {
    const std::string p = Normalize(path);
    std::lock_guard<std::mutex> lock(mu_);
    return files_.count(p) > 0 || IsDirLocked(p);
  }

  Result<std::vector<std::string>> GetChildren(const std::string& dir) override {
    const std::string d = Normalize(dir);
    std::lock_guard<std::mutex> lock(mu_);
    if (files_.count(d) > 0) return MemError("opendir", d, ENOTDIR);
    if (!IsDirLocked(d)) return MemError("opendir", d, ENOENT);
    const std::string prefix = ChildPrefix(d);
    std::vector<std::string> names;
    auto collect = [&](const auto& table) {
      for (auto it = table.lower_bound(prefix); it != table.end(); ++it) {
        const std::string& key = KeyOf(*it);
        if (!StartsWith(key, prefix)) break;
        std::string_view rest = std::string_view(key).substr(prefix.size());
        if (!rest.empty() && rest.find('/') == std::string_view::npos) names.emplace_back(rest);
      }
    };
    collect(files_);
    collect(dirs_);
    return names;
  }

  Result<uint64_t> GetFileSize(const std::string& path) override {
    const std::string p = Normalize(path);
    std::lock_guard<std::mutex> lock(mu_);
    auto it = files_.find(p);
    if (it == files_.end()) {
      if (IsDirLocked(p)) return uint64_t{0};
      return MemError("stat", p, ENOENT);
    }
    std::lock_guard<std::mutex> file_lock(it->second->mu);
    return static_cast<uint64_t>(it->second->data.size());
  }

  Status RemoveFile(const std::string& path) override {
    const std::string p = Normalize(path);
    std::lock_guard<std::mutex> lock(mu_);
    if (files_.erase(p) > 0) return Status::OK();
    return MemError("unlink", p, IsDirLocked(p) ? EISDIR : ENOENT);
  }

  Status RenameFile(const std::string& from, const std::string& to) override {
    const std::string f = Normalize(from);
    const std::string t = Normalize(to);
    const std::string what = f + " to " + t;
    std::lock_guard<std::mutex> lock(mu_);
    const bool from_is_file = files_.count(f) > 0;
    const bool from_is_dir = !from_is_file && IsDirLocked(f) && f != "/";
    if (!from_is_file && !from_is_dir) return MemError("rename", what, ENOENT);
    if (f == t) return Status::OK();
    PROPELLER_RETURN_IF_ERROR(CheckParentLocked("rename", t));
    if (from_is_file) {
      if (IsDirLocked(t)) return MemError("rename", what, EISDIR);
      files_[t] = files_[f];
      files_.erase(f);
      return Status::OK();
    }
    // Renaming a directory: the target may be missing or an empty directory.
    if (files_.count(t) > 0) return MemError("rename", what, ENOTDIR);
    if (StartsWith(t, ChildPrefix(f))) return MemError("rename", what, EINVAL);
    if (IsDirLocked(t)) {
      if (HasChildrenLocked(t)) return MemError("rename", what, ENOTEMPTY);
      dirs_.erase(t);
    }
    MoveSubtree(&files_, f, t);
    MoveSubtree(&dirs_, f, t);
    return Status::OK();
  }

  Status TruncateFile(const std::string& path, uint64_t size) override {
    const std::string p = Normalize(path);
    std::lock_guard<std::mutex> lock(mu_);
    auto it = files_.find(p);
    if (it == files_.end()) return MemError("truncate", p, IsDirLocked(p) ? EISDIR : ENOENT);
    std::lock_guard<std::mutex> file_lock(it->second->mu);
    it->second->data.resize(size, '\0');  // growing fills with zeros, as truncate(2) does
    return Status::OK();
  }

  Status CreateDirs(const std::string& path) override {
    const std::string p = Normalize(path);
    if (p.empty()) return Status::InvalidArgument("CreateDirs of an empty path");
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t pos = p.find('/', 1);; pos = p.find('/', pos + 1)) {
      const std::string prefix = p.substr(0, pos);
      if (files_.count(prefix) > 0) return MemError("mkdir", p, ENOTDIR);
      if (prefix != "/") dirs_.insert(prefix);
      if (pos == std::string::npos) break;
    }
    return Status::OK();
  }

  Status RemoveRecursively(const std::string& path) override {
    const std::string p = Normalize(path);
    std::lock_guard<std::mutex> lock(mu_);
    if (files_.erase(p) > 0) return Status::OK();
    if (!IsDirLocked(p)) return Status::OK();
    EraseSubtree(&files_, p);
    EraseSubtree(&dirs_, p);
    dirs_.erase(p);
    return Status::OK();
  }

  Status SyncDir(const std::string& path) override {
    const std::string p = Normalize(path);
    std::lock_guard<std::mutex> lock(mu_);
    if (IsDirLocked(p)) return Status::OK();
    return MemError("open directory", p, files_.count(p) > 0 ? ENOTDIR : ENOENT);
  }

  int64_t NowNanos() override { return Env::Default()->NowNanos(); }
  int64_t MonotonicNanos() override { return Env::Default()->MonotonicNanos(); }

 private:
  using FileTable = std::map<std::string, std::shared_ptr<FileState>>;
  using DirTable = std::set<std::string>;

  static const std::string& KeyOf(const FileTable::value_type& entry) { return entry.first; }
  static const std::string& KeyOf(const std::string& entry) { return entry; }

  Result<std::unique_ptr<WritableFile>> OpenWritable(const std::string& path, bool truncate) {
    const std::string p = Normalize(path);
    std::lock_guard<std::mutex> lock(mu_);
    if (p.empty()) return MemError("create", p, ENOENT);
    if (IsDirLocked(p)) return MemError("create", p, EISDIR);
    PROPELLER_RETURN_IF_ERROR(CheckParentLocked("create", p));
    std::shared_ptr<FileState>& file = files_[p];
    if (file == nullptr) file = std::make_shared<FileState>();
    uint64_t size = 0;
    {
      // Truncate in place, not by replacing the state: other open handles share the inode.
      std::lock_guard<std::mutex> file_lock(file->mu);
      if (truncate) file->data.clear();
      size = file->data.size();
    }
    return std::unique_ptr<WritableFile>(
        new MemWritableFile(p, file, size, /*append_mode=*/!truncate));
  }

  // REQUIRES: mu_ held. True for "/" and every created directory. The current directory ""
  // counts only as the parent of a relative name (CheckParentLocked), so an empty path never
  // names anything, as on POSIX.
  bool IsDirLocked(const std::string& p) const { return p == "/" || dirs_.count(p) > 0; }

  // REQUIRES: mu_ held. OK when the parent of `p` is an existing directory.
  Status CheckParentLocked(const char* operation, const std::string& p) const {
    const std::string parent = ParentOf(p);
    if (parent.empty() || IsDirLocked(parent)) return Status::OK();
    return MemError(operation, p, files_.count(parent) > 0 ? ENOTDIR : ENOENT);
  }

  // REQUIRES: mu_ held.
  bool HasChildrenLocked(const std::string& dir) const {
    const std::string prefix = ChildPrefix(dir);
    auto f = files_.lower_bound(prefix);
    if (f != files_.end() && StartsWith(f->first, prefix)) return true;
    auto d = dirs_.lower_bound(prefix);
    return d != dirs_.end() && StartsWith(*d, prefix);
  }

  // Renames every entry strictly below `from` to lie below `to`, and `from` itself to `to`.
  template <typename Table>
  static void MoveSubtree(Table* table, const std::string& from, const std::string& to) {
    const std::string prefix = ChildPrefix(from);
    Table moved;
    for (auto it = table->lower_bound(from); it != table->end();) {
      const std::string& key = KeyOf(*it);
      if (key == from) {
        moved.insert(Rekeyed(*it, to));
      } else if (StartsWith(key, prefix)) {
        moved.insert(Rekeyed(*it, to + key.substr(from.size())));
      } else if (!StartsWith(key, from)) {
        break;  // past every key that starts with `from`
      } else {
        ++it;  // a sibling such as "/ab" when moving "/a"
        continue;
      }
      it = table->erase(it);
    }
    table->merge(moved);
  }

  static FileTable::value_type Rekeyed(const FileTable::value_type& e, std::string key) {
    return {std::move(key), e.second};
  }
  static std::string Rekeyed(const std::string&, std::string key) { return key; }

  // Erases every entry strictly below directory `dir`.
  template <typename Table>
  static void EraseSubtree(Table* table, const std::string& dir) {
    const std::string prefix = ChildPrefix(dir);
    auto it = table->lower_bound(prefix);
    while (it != table->end() && StartsWith(KeyOf(*it), prefix)) it = table->erase(it);
  }

  std::mutex mu_;
  FileTable files_;  // Under mu_. Normalised path -> contents.
  DirTable dirs_;    // Under mu_. Normalised paths of created directories ("/" is implicit).
};

}  // namespace

std::unique_ptr<Env> NewMemEnv() { return std::make_unique<MemEnv>(); }

}  // namespace propeller
