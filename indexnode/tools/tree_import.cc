#include "indexnode/tools/tree_import.h"

#include <dirent.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <map>

namespace propeller {
namespace {

constexpr size_t kBatch = 1000;

int64_t Nanos(const struct timespec& ts) {
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

FileType TypeOf(mode_t mode) {
  if (S_ISREG(mode)) return FileType::kRegular;
  if (S_ISDIR(mode)) return FileType::kDirectory;
  if (S_ISLNK(mode)) return FileType::kSymlink;
  return FileType::kOther;
}

// user.* xattrs: integers become int64, other numbers double, the rest strings.
void ReadUserAttrs(const std::string& path, FileRecord* rec) {
  char names[4096];
  ssize_t n = llistxattr(path.c_str(), names, sizeof(names));
  if (n <= 0) return;
  for (ssize_t off = 0; off < n;) {
    std::string name(names + off);
    off += static_cast<ssize_t>(name.size()) + 1;
    if (name.rfind("user.", 0) != 0) continue;
    char value[1024];
    ssize_t vn = lgetxattr(path.c_str(), name.c_str(), value, sizeof(value));
    if (vn < 0) continue;
    std::string v(value, static_cast<size_t>(vn));
    std::string key = name.substr(5);
    char* end = nullptr;
    errno = 0;
    long long i = std::strtoll(v.c_str(), &end, 10);
    if (!v.empty() && *end == '\0' && errno == 0) {
      rec->attrs[key] = static_cast<int64_t>(i);
      continue;
    }
    double d = std::strtod(v.c_str(), &end);
    if (!v.empty() && *end == '\0') {
      rec->attrs[key] = d;
    } else {
      rec->attrs[key] = v;
    }
  }
}

class Walker {
 public:
  Walker(const std::string& root, const ImportOptions& o,
         const std::function<Status(std::vector<Update>&)>& emit, ImportStats* stats)
      : root_(root), options_(o), emit_(emit), stats_(stats), acg_(o.first_acg) {}

  Status Run() {
    struct stat st;
    if (::lstat(root_.c_str(), &st) != 0) return Status::IOError("stat " + root_, errno);
    if (!S_ISDIR(st.st_mode)) return Status::InvalidArgument(root_ + " is not a directory");
    dev_ = st.st_dev;
    stats_->acgs = 1;
    PROPELLER_RETURN_IF_ERROR(Add("/", root_, st, 0));
    PROPELLER_RETURN_IF_ERROR(Walk("/", root_, st.st_ino));
    // Hard-linked files are emitted once all their paths are known.
    for (auto& [ino, u] : linked_) {
      std::sort(u.record.paths.begin(), u.record.paths.end());
      batch_.push_back(std::move(u));
    }
    return Flush();
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
    if (!S_ISDIR(st.st_mode) && st.st_nlink > 1) {
      auto it = linked_.find(st.st_ino);
      if (it != linked_.end()) {
        it->second.record.paths.push_back(rel);
        return Status::OK();
      }
    }
    Update u;
    u.op = UpdateOp::kPut;
    u.acg = acg_;
    FileRecord& r = u.record;
    r.id = FileId{options_.volume, static_cast<uint64_t>(st.st_ino)};
    r.paths = {rel};
    r.parent_ino = parent;
    r.type = TypeOf(st.st_mode);
    r.size = static_cast<uint64_t>(st.st_size);
    r.mtime = Nanos(st.st_mtim);
    r.ctime = Nanos(st.st_ctim);
    r.atime = Nanos(st.st_atim);
    r.uid = st.st_uid;
    r.gid = st.st_gid;
    r.mode = st.st_mode;
    r.nlink = static_cast<uint32_t>(st.st_nlink);
    ReadUserAttrs(abs, &r);
    if (S_ISDIR(st.st_mode)) {
      ++stats_->dirs;
    } else {
      ++stats_->files;
    }
    if (++in_acg_ >= options_.files_per_acg) {
      in_acg_ = 0;
      ++acg_;
      ++stats_->acgs;
    }
    if (!S_ISDIR(st.st_mode) && st.st_nlink > 1) {
      linked_.emplace(st.st_ino, std::move(u));
      return Status::OK();
    }
    batch_.push_back(std::move(u));
    return batch_.size() >= kBatch ? Flush() : Status::OK();
  }

  Status Flush() {
    if (batch_.empty()) return Status::OK();
    Status s = emit_(batch_);
    batch_.clear();
    return s;
  }

  const std::string root_;
  const ImportOptions options_;
  const std::function<Status(std::vector<Update>&)>& emit_;
  ImportStats* stats_;
  dev_t dev_ = 0;
  uint64_t acg_;
  uint64_t in_acg_ = 0;
  std::vector<Update> batch_;
  std::map<uint64_t, Update> linked_;
};

}  // namespace

Status ImportTree(const std::string& root, const ImportOptions& options,
                  const std::function<Status(std::vector<Update>&)>& emit, ImportStats* stats) {
  ImportStats local;
  Walker w(root, options, emit, stats ? stats : &local);
  return w.Run();
}

}  // namespace propeller
