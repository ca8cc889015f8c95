#include "common/tree_walk.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <map>
#include <vector>

#include "common/dir_fd.h"

namespace propeller {
namespace {

FileTime Nanos(const struct timespec& ts) {
  return FileTimeOf(static_cast<int64_t>(ts.tv_sec), ts.tv_nsec);
}

FileType TypeOf(mode_t mode) {
  if (S_ISREG(mode)) return FileType::kRegular;
  if (S_ISDIR(mode)) return FileType::kDirectory;
  if (S_ISLNK(mode)) return FileType::kSymlink;
  return FileType::kOther;
}

AttrValue ParseAttrValue(const std::string& v) {
  char* end = nullptr;
  errno = 0;
  long long i = std::strtoll(v.c_str(), &end, 10);
  if (!v.empty() && *end == '\0' && errno == 0) return static_cast<int64_t>(i);
  double d = std::strtod(v.c_str(), &end);
  if (!v.empty() && *end == '\0') return d;
  return v;
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
    if (name.rfind("user.", 0) != 0 || name.size() == 5) continue;
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
void ReadUserAttrsAt(int dir, const std::string& name, FileRecord* rec) {
  ReadUserAttrs([&](char* list, size_t size) { return ListXattrAt(dir, name.c_str(), list, size); },
                [&](const char* attr, void* value, size_t size) {
                  return GetXattrAt(dir, name.c_str(), attr, value, size);
                },
                rec);
}

// Directories deeper than this hold no descriptor while their subdirectories are walked:
// they are opened again from the root afterwards, so a walk keeps at most this many open
// however deep the tree is.
constexpr size_t kMaxHeldDirs = 64;

// The names in the directory open as `dir` (no . and ..), sorted bytewise; false when it
// cannot be read.
bool ReadNames(int dir, std::vector<std::string>* names) {
  const int fd = ::openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return false;
  DIR* d = ::fdopendir(fd);
  if (d == nullptr) {
    ::close(fd);
    return false;
  }
  while (struct dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names->push_back(std::move(n));
  }
  ::closedir(d);
  std::sort(names->begin(), names->end());
  return true;
}

class Walker {
 public:
  Walker(int root, const TreeWalkOptions& options,
         const std::function<Status(FileRecord&&)>& emit, TreeWalkStats* stats)
      : root_(root), options_(options), emit_(emit), stats_(stats) {}

  Status Run(const struct stat& st) {
    dev_ = st.st_dev;
    PROPELLER_RETURN_IF_ERROR(Add("/", root_, ".", st, 0));
    PROPELLER_RETURN_IF_ERROR(Walk("/", nullptr, 0, st.st_ino));
    for (auto& [ino, rec] : linked_) {
      std::sort(rec.paths.begin(), rec.paths.end());
      PROPELLER_RETURN_IF_ERROR(emit_(std::move(rec)));
    }
    return Status::OK();
  }

 private:
  // Walks the directory at `rel`, open as `*dir` (the root when null), `depth` levels down.
  Status Walk(const std::string& rel, UniqueFd* dir, size_t depth, uint64_t ino) {
    int fd = dir != nullptr ? dir->get() : root_;
    std::vector<std::string> names;
    if (!ReadNames(fd, &names)) {
      ++stats_->skipped;
      return Status::OK();
    }
    for (const std::string& n : names) {
      std::string child_rel = rel == "/" ? "/" + n : rel + "/" + n;
      struct stat st;
      if (::fstatat(fd, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        ++stats_->skipped;
        continue;
      }
      PROPELLER_RETURN_IF_ERROR(Add(child_rel, fd, n, st, ino));
      if (!S_ISDIR(st.st_mode) || st.st_dev != dev_) continue;
      UniqueFd child(::openat(fd, n.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!child.valid()) {
        ++stats_->skipped;
        continue;
      }
      const bool release = dir != nullptr && depth >= kMaxHeldDirs;
      if (release) dir->Reset();
      PROPELLER_RETURN_IF_ERROR(Walk(child_rel, &child, depth + 1, st.st_ino));
      if (release) {
        // Again from the root; a directory moved or replaced meanwhile ends its part of the
        // walk (a later update says where it went).
        struct stat again;
        if (OpenDirBeneath(root_, std::string_view(rel).substr(1), dir) != 0 ||
            ::fstat(dir->get(), &again) != 0 || again.st_ino != ino) {
          ++stats_->skipped;
          return Status::OK();
        }
        fd = dir->get();
      }
    }
    return Status::OK();
  }

  // Reports the file `st`, `name` in the directory open as `dir`, at `rel`.
  Status Add(const std::string& rel, int dir, const std::string& name, const struct stat& st,
             uint64_t parent) {
    const bool linked = !S_ISDIR(st.st_mode) && st.st_nlink > 1;
    if (linked) {
      auto it = linked_.find(st.st_ino);
      if (it != linked_.end()) {
        it->second.paths.push_back(rel);
        return Status::OK();
      }
    }
    FileRecord r;
    r.id = FileId{options_.volume, static_cast<uint64_t>(st.st_ino)};
    r.paths = {rel};
    r.parent_ino = parent;
    FillRecordFromStat(st, &r);
    ReadUserAttrsAt(dir, name, &r);
    if (S_ISDIR(st.st_mode)) {
      ++stats_->dirs;
    } else {
      ++stats_->files;
    }
    if (linked) {
      linked_.emplace(st.st_ino, std::move(r));
      return Status::OK();
    }
    return emit_(std::move(r));
  }

  const int root_;
  const TreeWalkOptions options_;
  const std::function<Status(FileRecord&&)>& emit_;
  TreeWalkStats* stats_;
  dev_t dev_ = 0;
  std::map<uint64_t, FileRecord> linked_;
};

}  // namespace

Status WalkTree(const std::string& root, const TreeWalkOptions& options,
                const std::function<Status(FileRecord&&)>& on_record, TreeWalkStats* stats) {
  struct stat st;
  if (::lstat(root.c_str(), &st) != 0) return Status::IOError("stat " + root, errno);
  if (!S_ISDIR(st.st_mode)) return Status::InvalidArgument(root + " is not a directory");
  UniqueFd fd(::open(root.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) return Status::IOError("open " + root, errno);
  return WalkTreeAt(fd.get(), options, on_record, stats);
}

Status WalkTreeAt(int dir, const TreeWalkOptions& options,
                  const std::function<Status(FileRecord&&)>& on_record, TreeWalkStats* stats) {
  struct stat st;
  if (::fstat(dir, &st) != 0) return Status::IOError("stat of the walk's root", errno);
  if (!S_ISDIR(st.st_mode)) return Status::InvalidArgument("the walk's root is not a directory");
  TreeWalkStats local;
  Walker w(dir, options, on_record, stats ? stats : &local);
  return w.Run(st);
}

uint32_t InodeGeneration(int fd) {
  // The kernel's file systems write an int through the pointer, though the request is
  // declared with a long: a zeroed long takes either (little-endian).
  unsigned long generation = 0;
  if (::ioctl(fd, FS_IOC_GETVERSION, &generation) != 0) return 0;
  return static_cast<uint32_t>(generation);
}

void FillRecordFromStat(const struct stat& st, FileRecord* r) {
  r->type = TypeOf(st.st_mode);
  r->size = static_cast<uint64_t>(st.st_size);
  r->mtime = Nanos(st.st_mtim);
  r->ctime = Nanos(st.st_ctim);
  r->atime = Nanos(st.st_atim);
  r->uid = st.st_uid;
  r->gid = st.st_gid;
  r->mode = st.st_mode;
  r->nlink = static_cast<uint32_t>(st.st_nlink);
}

namespace {

// The record of the file `st` at in-volume `path`, without its user attributes.
void RecordOf(const struct stat& st, const std::string& path, uint32_t volume,
              uint64_t parent_ino, FileRecord* record) {
  *record = FileRecord{};
  record->id = FileId{volume, static_cast<uint64_t>(st.st_ino)};
  record->paths = {path};
  record->parent_ino = parent_ino;
  FillRecordFromStat(st, record);
}

}  // namespace

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
  ReadUserAttrsAt(dir, name, record);
  return Status::OK();
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
