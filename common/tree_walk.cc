#include "common/tree_walk.h"

#include <dirent.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <map>
#include <vector>

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

// user.* xattrs; names and values beyond the buffers are skipped (64 KiB is the kernel's own
// limit for one value).
void ReadUserAttrs(const std::string& path, FileRecord* rec) {
  std::vector<char> names(64 << 10);
  ssize_t n = llistxattr(path.c_str(), names.data(), names.size());
  if (n <= 0) return;
  std::vector<char> value(64 << 10);
  for (ssize_t off = 0; off < n;) {
    std::string name(names.data() + off);
    off += static_cast<ssize_t>(name.size()) + 1;
    if (name.rfind("user.", 0) != 0 || name.size() == 5) continue;
    ssize_t vn = lgetxattr(path.c_str(), name.c_str(), value.data(), value.size());
    if (vn < 0) continue;
    rec->attrs[name.substr(5)] = ParseAttrValue(std::string(value.data(), static_cast<size_t>(vn)));
  }
}

class Walker {
 public:
  Walker(const std::string& root, const TreeWalkOptions& options,
         const std::function<Status(FileRecord&&)>& emit, TreeWalkStats* stats)
      : root_(root), options_(options), emit_(emit), stats_(stats) {}

  Status Run() {
    struct stat st;
    if (::lstat(root_.c_str(), &st) != 0) return Status::IOError("stat " + root_, errno);
    if (!S_ISDIR(st.st_mode)) return Status::InvalidArgument(root_ + " is not a directory");
    dev_ = st.st_dev;
    PROPELLER_RETURN_IF_ERROR(Add("/", root_, st, 0));
    PROPELLER_RETURN_IF_ERROR(Walk("/", root_, st.st_ino));
    for (auto& [ino, rec] : linked_) {
      std::sort(rec.paths.begin(), rec.paths.end());
      PROPELLER_RETURN_IF_ERROR(emit_(std::move(rec)));
    }
    return Status::OK();
  }

 private:
  Status Walk(const std::string& rel, const std::string& abs, uint64_t ino) {
    DIR* d = ::opendir(abs.c_str());
    if (d == nullptr) {
      ++stats_->skipped;
      return Status::OK();
    }
    std::vector<std::string> names;
    while (struct dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") names.push_back(n);
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    for (const std::string& n : names) {
      std::string child_rel = rel == "/" ? "/" + n : rel + "/" + n;
      std::string child_abs = abs + "/" + n;
      struct stat st;
      if (::lstat(child_abs.c_str(), &st) != 0 || !ValidatePath(child_rel).empty()) {
        ++stats_->skipped;
        continue;
      }
      PROPELLER_RETURN_IF_ERROR(Add(child_rel, child_abs, st, ino));
      if (S_ISDIR(st.st_mode) && st.st_dev == dev_) {
        PROPELLER_RETURN_IF_ERROR(Walk(child_rel, child_abs, st.st_ino));
      }
    }
    return Status::OK();
  }

  Status Add(const std::string& rel, const std::string& abs, const struct stat& st,
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
    ReadUserAttrs(abs, &r);
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

  const std::string root_;
  const TreeWalkOptions options_;
  const std::function<Status(FileRecord&&)>& emit_;
  TreeWalkStats* stats_;
  dev_t dev_ = 0;
  std::map<uint64_t, FileRecord> linked_;
};

}  // namespace

Status WalkTree(const std::string& root, const TreeWalkOptions& options,
                const std::function<Status(FileRecord&&)>& on_record, TreeWalkStats* stats) {
  TreeWalkStats local;
  Walker w(root, options, on_record, stats ? stats : &local);
  return w.Run();
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

Status ReadFileRecord(const std::string& abs_path, const std::string& path, uint32_t volume,
                      uint64_t parent_ino, FileRecord* record) {
  struct stat st;
  if (::lstat(abs_path.c_str(), &st) != 0) return Status::IOError("stat " + abs_path, errno);
  *record = FileRecord{};
  record->id = FileId{volume, static_cast<uint64_t>(st.st_ino)};
  record->paths = {path};
  record->parent_ino = parent_ino;
  FillRecordFromStat(st, record);
  ReadUserAttrs(abs_path, record);
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
