#include "common/tree_walk.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <cstdlib>
#include <map>
#include <thread>
#include <vector>

#include "common/dir_fd.h"
#include "common/mutex.h"

namespace propeller {
namespace {

FileTime Nanos(const struct timespec& ts) {
  return FileTimeOf(static_cast<int64_t>(ts.tv_sec), ts.tv_nsec);
}

// user.* xattrs, read by `list` (as llistxattr) and `get` (as lgetxattr). The buffers start
// small and grow to the size the kernel reports: the kernel allocates a buffer as large as the
// one it is handed, and 64 KiB buffers (the limit of a list and of one value) for every entry
// made reading the attributes a third of a walk's time (perf, 100,000 files), mostly in
// allocating and clearing them, though most entries have none. A list or value that keeps
// growing while it is read (a writer at work) is skipped after a few tries.
template <typename ListFn, typename GetFn>
void ReadUserAttrs(ListFn list, GetFn get, FileRecord* rec) {
  // Reads into *buf with `read(data, size)`, growing it on ERANGE; the length, or -1.
  auto read_grown = [](std::vector<char>* buf, auto read) -> ssize_t {
    for (int attempt = 0; attempt < 4; ++attempt) {
      const ssize_t n = read(buf->data(), buf->size());
      if (n >= 0 || errno != ERANGE) return n;
      const ssize_t need = read(nullptr, 0);
      if (need < 0) return -1;
      buf->resize(std::max(static_cast<size_t>(need), buf->size() * 2));
    }
    return -1;
  };
  std::vector<char> names(256);
  const ssize_t n = read_grown(&names, list);
  if (n <= 0) return;
  std::vector<char> value(256);
  for (ssize_t off = 0; off < n;) {
    std::string name(names.data() + off);
    off += static_cast<ssize_t>(name.size()) + 1;
    // Only user.NAME whose NAME can be a user attribute: `user.size` or `user.Foo` could
    // never be asked for (size is built in; names are lowercase), and the index refuses them.
    if (name.rfind("user.", 0) != 0) continue;
    if (!CheckUserAttrName(std::string_view(name).substr(5)).empty()) continue;
    const ssize_t vn =
        read_grown(&value, [&](char* data, size_t size) { return get(name.c_str(), data, size); });
    if (vn < 0) continue;
    rec->attrs[name.substr(5)] = ParseAttrValue(std::string(value.data(), static_cast<size_t>(vn)));
  }
}

// ReadUserAttrs of the file at `path`.
void ReadUserAttrsOf(const std::string& path, FileRecord* rec) {
  ReadUserAttrs([&](char* list, size_t size) { return ::llistxattr(path.c_str(), list, size); },
                [&](const char* attr, void* value, size_t size) {
                  return ::lgetxattr(path.c_str(), attr, value, size);
                },
                rec);
}

// ReadUserAttrs of `name` in the directory open as `dir`.
void ReadUserAttrsAt(int dir, const char* name, FileRecord* rec) {
  ReadUserAttrs([&](char* list, size_t size) { return ListXattrAt(dir, name, list, size); },
                [&](const char* attr, void* value, size_t size) {
                  return GetXattrAt(dir, name, attr, value, size);
                },
                rec);
}

// The record of the file `st` at in-volume `path`, without its user attributes.
void RecordOf(const struct stat& st, std::string path, uint32_t volume, uint64_t parent_ino,
              FileRecord* record) {
  *record = FileRecord{};
  record->id = FileId{volume, static_cast<uint64_t>(st.st_ino)};
  record->paths.push_back(std::move(path));
  record->parent_ino = parent_ino;
  FillRecordFromStat(st, record);
}

// Directories deeper than this hold no descriptor while their subdirectories are walked:
// they are opened again from the root afterwards, so a walk keeps at most this many open
// however deep the tree is.
constexpr size_t kMaxHeldDirs = 64;

// The names of one directory (no . and ..), sorted bytewise, in one buffer rather than a
// string each.
class DirNames {
 public:
  // Reads the directory open as `dir`; false when it cannot be read.
  bool Read(int dir) {
    const int fd = ::openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return false;
    DIR* d = ::fdopendir(fd);
    if (d == nullptr) {
      ::close(fd);
      return false;
    }
    std::vector<uint32_t> offsets;
    while (struct dirent* e = ::readdir(d)) {
      const char* n = e->d_name;
      if (n[0] == '.' && (n[1] == '\0' || (n[1] == '.' && n[2] == '\0'))) continue;
      offsets.push_back(static_cast<uint32_t>(text_.size()));
      text_.append(n, std::strlen(n) + 1);
    }
    ::closedir(d);
    names_.reserve(offsets.size());
    for (uint32_t off : offsets) names_.push_back(text_.data() + off);
    std::sort(names_.begin(), names_.end(),
              [](const char* a, const char* b) { return std::strcmp(a, b) < 0; });
    return true;
  }
  // NUL-terminated, valid while this object lives.
  const std::vector<const char*>& names() const { return names_; }

 private:
  std::string text_;  // every name, each followed by its NUL
  std::vector<const char*> names_;
};

}  // namespace

AttrValue ParseAttrValue(const std::string& v) {
  char* end = nullptr;
  errno = 0;
  long long i = std::strtoll(v.c_str(), &end, 10);
  if (!v.empty() && *end == '\0' && errno == 0) return static_cast<int64_t>(i);
  double d = std::strtod(v.c_str(), &end);
  if (!v.empty() && *end == '\0') return d;
  return v;
}

// Reports the file with several links whose record (paths sorted) and stat the walk
// collected; `parent_ino`: of the path met first in walk order.
Status EmitLinked(const struct stat& st, FileRecord* record, uint64_t parent_ino,
                  uint32_t volume, const std::function<Status(TreeEntry&)>& emit) {
  std::sort(record->paths.begin(), record->paths.end());
  record->parent_ino = parent_ino;
  TreeEntry e;
  e.stat_ = &st;
  e.parent_ino_ = parent_ino;
  e.volume_ = volume;
  e.linked_ = record;
  return emit(e);
}

FileRecord TreeEntry::TakeRecord() {
  if (linked_ != nullptr) return std::move(*linked_);
  FileRecord r;
  RecordOf(*stat_, std::string(path_), volume_, parent_ino_, &r);
  ReadUserAttrsAt(dir_, name_, &r);
  return r;
}

// The walk of WalkTreeEntries (a class of this namespace, not an anonymous one: TreeEntry
// names it a friend).
class TreeWalker {
 public:
  TreeWalker(int root, const TreeWalkOptions& options,
             const std::function<Status(TreeEntry&)>& emit, TreeWalkStats* stats)
      : root_(root), options_(options), emit_(emit), stats_(stats) {}

  Status Run(const struct stat& st) {
    dev_ = st.st_dev;
    path_.assign(1, '/');  // (not = "/": GCC 12 -Wrestrict false positive)
    PROPELLER_RETURN_IF_ERROR(Add(root_, ".", st, 0));
    path_.clear();  // while walking, path_ is the directory's path without the final '/'
    PROPELLER_RETURN_IF_ERROR(Walk(nullptr, 0, st.st_ino));
    for (auto& [ino, file] : linked_) {
      PROPELLER_RETURN_IF_ERROR(
          EmitLinked(file.st, &file.record, file.record.parent_ino, options_.volume, emit_));
    }
    return Status::OK();
  }

 private:
  // A file with several links, met at one path or more: reported after the walk.
  struct Linked {
    struct stat st;
    FileRecord record;
  };

  // Walks the directory at path_, open as `*dir` (the root when null), `depth` levels down.
  Status Walk(UniqueFd* dir, size_t depth, uint64_t ino) {
    int fd = dir != nullptr ? dir->get() : root_;
    DirNames names;
    if (!names.Read(fd)) {
      ++stats_->skipped;
      return Status::OK();
    }
    const size_t dir_len = path_.size();
    for (const char* n : names.names()) {
      path_.resize(dir_len);
      path_ += '/';
      path_ += n;
      struct stat st;
      if (::fstatat(fd, n, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        ++stats_->skipped;
        continue;
      }
      PROPELLER_RETURN_IF_ERROR(Add(fd, n, st, ino));
      if (!S_ISDIR(st.st_mode) || st.st_dev != dev_) continue;
      UniqueFd child(::openat(fd, n, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!child.valid()) {
        ++stats_->skipped;
        continue;
      }
      const bool release = dir != nullptr && depth >= kMaxHeldDirs;
      if (release) dir->Reset();
      PROPELLER_RETURN_IF_ERROR(Walk(&child, depth + 1, st.st_ino));
      if (release) {
        // Again from the root; a directory moved or replaced meanwhile ends its part of the
        // walk (a later update says where it went).
        struct stat again;
        if (OpenDirBeneath(root_, std::string_view(path_).substr(1, dir_len - 1), dir) != 0 ||
            ::fstat(dir->get(), &again) != 0 || again.st_ino != ino) {
          ++stats_->skipped;
          return Status::OK();
        }
        fd = dir->get();
      }
    }
    return Status::OK();
  }

  // Reports the file `st` at path_, `name` in the directory open as `dir`.
  Status Add(int dir, const char* name, const struct stat& st, uint64_t parent) {
    const bool linked = !S_ISDIR(st.st_mode) && st.st_nlink > 1;
    if (linked) {
      auto it = linked_.find(st.st_ino);
      if (it != linked_.end()) {
        it->second.record.paths.push_back(path_);
        return Status::OK();
      }
    }
    if (S_ISDIR(st.st_mode)) {
      ++stats_->dirs;
    } else {
      ++stats_->files;
    }
    TreeEntry e;
    e.stat_ = &st;
    e.parent_ino_ = parent;
    e.volume_ = options_.volume;
    e.path_ = path_;
    e.dir_ = dir;
    e.name_ = name;
    if (linked) {
      Linked& file = linked_[st.st_ino];
      file.st = st;
      file.record = e.TakeRecord();
      return Status::OK();
    }
    return emit_(e);
  }

  const int root_;
  const TreeWalkOptions options_;
  const std::function<Status(TreeEntry&)>& emit_;
  TreeWalkStats* stats_;
  dev_t dev_ = 0;
  std::string path_;  // of the entry being reported, or of the directory being walked
  std::map<uint64_t, Linked> linked_;
};

// The walk of WalkTreeEntriesParallel. Directories wait on a stack (depth first, so that it
// holds about the tree's depth times its width, not a whole level); a thread takes one, opens
// it again from the root by its path (a descriptor per waiting directory would run into the
// process's limit in a wide tree), reads and stats it whole, reports its entries, and pushes
// its subdirectories.
class ParallelTreeWalker {
 public:
  ParallelTreeWalker(int root, const TreeWalkOptions& options, unsigned threads,
                     const std::function<Status(TreeEntry&)>& emit)
      : root_(root), options_(options), threads_(std::max(1u, threads)), emit_(emit) {}

  Status Run(const struct stat& st, TreeWalkStats* stats) {
    dev_ = st.st_dev;
    PROPELLER_RETURN_IF_ERROR(Add(0, root_, ".", "/", st, 0));
    {
      MutexLock lock(&mu_);
      stack_.push_back(Dir{std::string(), static_cast<uint64_t>(st.st_ino)});
    }
    std::vector<std::thread> helpers;
    for (unsigned w = 1; w < threads_; ++w) helpers.emplace_back([this, w] { Work(w); });
    Work(0);
    for (std::thread& t : helpers) t.join();
    stats->files = files_.load();
    stats->dirs = dirs_.load();
    stats->skipped = skipped_.load();
    {
      MutexLock lock(&mu_);  // (the threads are joined: for the analysis)
      PROPELLER_RETURN_IF_ERROR(error_);
    }
    std::map<uint64_t, Linked> linked;
    {
      MutexLock lock(&linked_mu_);
      linked.swap(linked_);
    }
    for (auto& [ino, file] : linked) {
      PROPELLER_RETURN_IF_ERROR(
          EmitLinked(file.st, &file.record, file.first_parent, options_.volume, emit_));
    }
    return Status::OK();
  }

 private:
  struct Dir {
    std::string path;  // in-volume, "" for the root
    uint64_t ino = 0;
  };
  // A file with several links. Its stat and parent are those of the path first in walk order,
  // as the single-threaded walk reports them, whichever thread met which path first.
  struct Linked {
    struct stat st;
    FileRecord record;
    std::string first_path;
    uint64_t first_parent = 0;
  };

  void Work(unsigned worker) {
    for (;;) {
      Dir dir;
      {
        MutexLock lock(&mu_);
        while (!stop_ && stack_.empty() && busy_ != 0) cv_.Wait(&mu_);
        if (stop_ || stack_.empty()) return;  // stopped, or nothing left and nobody to add
        dir = std::move(stack_.back());
        stack_.pop_back();
        ++busy_;
      }
      std::vector<Dir> found;
      const Status st = WalkDir(worker, dir, &found);
      {
        MutexLock lock(&mu_);
        --busy_;
        if (!st.ok() && error_.ok()) error_ = st;
        stop_ = stop_ || !st.ok();
        // Reversed: the first in name order is taken first.
        stack_.insert(stack_.end(), std::make_move_iterator(found.rbegin()),
                      std::make_move_iterator(found.rend()));
      }
      cv_.NotifyAll();
    }
  }

  // Reads, stats and reports the directory `dir`; its subdirectories go to *found.
  Status WalkDir(unsigned worker, const Dir& dir, std::vector<Dir>* found) {
    UniqueFd opened;
    int fd = root_;
    if (!dir.path.empty()) {
      // A directory moved or replaced since its parent was read is skipped (a later update
      // says where it went).
      struct stat again;
      if (OpenDirBeneath(root_, std::string_view(dir.path).substr(1), &opened) != 0 ||
          ::fstat(opened.get(), &again) != 0 || again.st_ino != dir.ino ||
          again.st_dev != dev_) {
        ++skipped_;
        return Status::OK();
      }
      fd = opened.get();
    }
    DirNames names;
    if (!names.Read(fd)) {
      ++skipped_;
      return Status::OK();
    }
    std::string path = dir.path;
    for (const char* n : names.names()) {
      if (stopping_.load(std::memory_order_relaxed)) return Status::OK();
      path.resize(dir.path.size());
      path += '/';
      path += n;
      struct stat st;
      if (::fstatat(fd, n, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        ++skipped_;
        continue;
      }
      if (Status s = Add(worker, fd, n, path, st, dir.ino); !s.ok()) {
        stopping_ = true;
        return s;
      }
      if (S_ISDIR(st.st_mode) && st.st_dev == dev_) {
        found->push_back(Dir{path, static_cast<uint64_t>(st.st_ino)});
      }
    }
    return Status::OK();
  }

  // Reports the file `st` at `path`, `name` in the directory open as `dir`.
  Status Add(unsigned worker, int dir, const char* name, const std::string& path,
             const struct stat& st, uint64_t parent) {
    TreeEntry e;
    e.stat_ = &st;
    e.parent_ino_ = parent;
    e.worker_ = worker;
    e.volume_ = options_.volume;
    e.path_ = path;
    e.dir_ = dir;
    e.name_ = name;
    if (!S_ISDIR(st.st_mode) && st.st_nlink > 1) {
      if (AddLink(path, st, parent)) return Status::OK();
      FileRecord record = e.TakeRecord();  // the attributes, read outside the lock
      MutexLock lock(&linked_mu_);
      auto [it, first] = linked_.try_emplace(static_cast<uint64_t>(st.st_ino));
      if (!first) {  // another thread met another link meanwhile
        AddLinkLocked(&it->second, path, st, parent);
        return Status::OK();
      }
      it->second.st = st;
      it->second.record = std::move(record);
      it->second.first_path = path;
      it->second.first_parent = parent;
      ++files_;
      return Status::OK();
    }
    ++(S_ISDIR(st.st_mode) ? dirs_ : files_);
    return emit_(e);
  }

  // Adds `path` to the file with several links `st` if it was met before; false if not.
  bool AddLink(const std::string& path, const struct stat& st, uint64_t parent) {
    MutexLock lock(&linked_mu_);
    auto it = linked_.find(static_cast<uint64_t>(st.st_ino));
    if (it == linked_.end()) return false;
    AddLinkLocked(&it->second, path, st, parent);
    return true;
  }
  void AddLinkLocked(Linked* file, const std::string& path, const struct stat& st,
                     uint64_t parent) PROPELLER_REQUIRES(linked_mu_) {
    file->record.paths.push_back(path);
    if (WalkOrderLess(path, file->first_path)) {
      file->first_path = path;
      file->first_parent = parent;
      file->st = st;
    }
  }

  const int root_;
  const TreeWalkOptions options_;
  const unsigned threads_;
  const std::function<Status(TreeEntry&)>& emit_;
  dev_t dev_ = 0;  // set before the threads start
  std::atomic<uint64_t> files_{0}, dirs_{0}, skipped_{0};
  std::atomic<bool> stopping_{false};  // an error: threads leave their directory early

  // mu_ and linked_mu_ are never held together.
  Mutex mu_;
  CondVar cv_;  // with mu_: stack_, busy_ or stop_ changed
  std::vector<Dir> stack_ PROPELLER_GUARDED_BY(mu_);
  size_t busy_ PROPELLER_GUARDED_BY(mu_) = 0;  // threads walking a directory
  bool stop_ PROPELLER_GUARDED_BY(mu_) = false;
  Status error_ PROPELLER_GUARDED_BY(mu_);

  Mutex linked_mu_;
  std::map<uint64_t, Linked> linked_ PROPELLER_GUARDED_BY(linked_mu_);
};

Status WalkTree(const std::string& root, const TreeWalkOptions& options,
                const std::function<Status(FileRecord&&)>& on_record, TreeWalkStats* stats) {
  return WalkTreeEntries(
      root, options, [&](TreeEntry& e) { return on_record(e.TakeRecord()); }, stats);
}

Status WalkTreeAt(int dir, const TreeWalkOptions& options,
                  const std::function<Status(FileRecord&&)>& on_record, TreeWalkStats* stats) {
  return WalkTreeEntriesAt(
      dir, options, [&](TreeEntry& e) { return on_record(e.TakeRecord()); }, stats);
}

Status WalkTreeEntries(const std::string& root, const TreeWalkOptions& options,
                       const std::function<Status(TreeEntry&)>& on_entry, TreeWalkStats* stats) {
  struct stat st;
  if (::lstat(root.c_str(), &st) != 0) return Status::IOError("stat " + root, errno);
  if (!S_ISDIR(st.st_mode)) return Status::InvalidArgument(root + " is not a directory");
  UniqueFd fd(::open(root.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) return Status::IOError("open " + root, errno);
  return WalkTreeEntriesAt(fd.get(), options, on_entry, stats);
}

Status WalkTreeEntriesAt(int dir, const TreeWalkOptions& options,
                         const std::function<Status(TreeEntry&)>& on_entry,
                         TreeWalkStats* stats) {
  struct stat st;
  if (::fstat(dir, &st) != 0) return Status::IOError("stat of the walk's root", errno);
  if (!S_ISDIR(st.st_mode)) return Status::InvalidArgument("the walk's root is not a directory");
  TreeWalkStats local;
  TreeWalker w(dir, options, on_entry, stats ? stats : &local);
  return w.Run(st);
}

Status WalkTreeEntriesParallel(int dir, const TreeWalkOptions& options, unsigned threads,
                               const std::function<Status(TreeEntry&)>& on_entry,
                               TreeWalkStats* stats) {
  struct stat st;
  if (::fstat(dir, &st) != 0) return Status::IOError("stat of the walk's root", errno);
  if (!S_ISDIR(st.st_mode)) return Status::InvalidArgument("the walk's root is not a directory");
  TreeWalkStats local;
  ParallelTreeWalker w(dir, options, threads, on_entry);
  return w.Run(st, stats ? stats : &local);
}

uint32_t InodeGeneration(int fd) {
  // The kernel's file systems write an int through the pointer, though the request is
  // declared with a long: a zeroed long takes either (little-endian).
  unsigned long generation = 0;
  if (::ioctl(fd, FS_IOC_GETVERSION, &generation) != 0) return 0;
  return static_cast<uint32_t>(generation);
}

void FillRecordFromStat(const struct stat& st, FileRecord* r) {
  r->type = FileTypeOfMode(st.st_mode);
  r->size = static_cast<uint64_t>(st.st_size);
  r->mtime = Nanos(st.st_mtim);
  r->ctime = Nanos(st.st_ctim);
  r->atime = Nanos(st.st_atim);
  r->uid = st.st_uid;
  r->gid = st.st_gid;
  r->mode = st.st_mode;
  r->nlink = static_cast<uint32_t>(st.st_nlink);
}

Status ReadFileRecord(const std::string& abs_path, const std::string& path, uint32_t volume,
                      uint64_t parent_ino, FileRecord* record) {
  struct stat st;
  if (::lstat(abs_path.c_str(), &st) != 0) return Status::IOError("stat " + abs_path, errno);
  RecordOf(st, path, volume, parent_ino, record);
  ReadUserAttrsOf(abs_path, record);
  return Status::OK();
}

Status ReadFileRecordAt(int dir, const std::string& name, const std::string& path,
                        uint32_t volume, uint64_t parent_ino, FileRecord* record) {
  struct stat st;
  if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return Status::IOError("stat " + path, errno);
  }
  RecordOf(st, path, volume, parent_ino, record);
  ReadUserAttrsAt(dir, name.c_str(), record);
  return Status::OK();
}

FileType FileTypeOfMode(mode_t mode) {
  if (S_ISREG(mode)) return FileType::kRegular;
  if (S_ISDIR(mode)) return FileType::kDirectory;
  if (S_ISLNK(mode)) return FileType::kSymlink;
  return FileType::kOther;
}

bool WalkOrderLess(std::string_view a, std::string_view b) {
  // Compare component by component: '/' must sort before every other byte.
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  if (i == a.size() || i == b.size()) return a.size() < b.size();
  if (a[i] == '/') return true;
  if (b[i] == '/') return false;
  return static_cast<unsigned char>(a[i]) < static_cast<unsigned char>(b[i]);
}

}  // namespace propeller
