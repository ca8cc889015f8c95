#include "client/fuse/backing_tree.h"

#include <fcntl.h>

#include <cerrno>

namespace propeller::fuse {

Result<std::unique_ptr<BackingTree>> BackingTree::Open(const std::string& backing) {
  bool readable = true;
  UniqueFd root(::open(backing.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root.valid() && errno == EACCES) {
    readable = false;
    root.Reset(::open(backing.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  }
  if (!root.valid()) return Status::IOError("opening the backing directory " + backing, errno);
  return std::unique_ptr<BackingTree>(new BackingTree(backing, std::move(root), readable));
}

void BackingTree::Root(BackingDir* out) const {
  out->owned_.Reset();
  out->shared_.reset();
  out->fd_ = root_.get();
  out->readable_ = root_readable_;
}

int BackingTree::OpenDir(std::string_view dir, BackingDir* out, bool readable) const {
  while (!dir.empty() && dir.front() == '/') dir.remove_prefix(1);
  if (dir.empty()) {
    Root(out);
    return 0;
  }
  out->shared_.reset();
  out->readable_ = false;
  if (const int err = OpenDirBeneath(root_.get(), dir, &out->owned_,
                                     readable ? &out->readable_ : nullptr);
      err != 0) {
    return err;
  }
  out->fd_ = out->owned_.get();
  return 0;
}

int BackingTree::Locate(std::string_view path, BackingName* out) const {
  const size_t slash = path.rfind('/');
  const std::string_view name = slash == std::string_view::npos ? path : path.substr(slash + 1);
  if (name.empty()) {  // "/": the backing directory itself
    out->name = ".";
    return OpenDir("/", &out->dir);
  }
  out->name.assign(name);
  return OpenDir(slash == std::string_view::npos ? "/" : path.substr(0, slash), &out->dir);
}

int BackingTree::Lstat(std::string_view path, struct stat* st) const {
  BackingName at;
  if (const int err = Locate(path, &at); err != 0) return err;
  return ::fstatat(at.dir.fd(), at.name.c_str(), st, AT_SYMLINK_NOFOLLOW) == 0 ? 0 : errno;
}

Status BackingTree::ReadRecord(const std::string& path, uint32_t volume, uint64_t parent_ino,
                               FileRecord* record) const {
  BackingName at;
  if (const int err = Locate(path, &at); err != 0) return Status::IOError("stat " + path, err);
  return ReadFileRecordAt(at.dir.fd(), at.name, path, volume, parent_ino, record);
}

Status BackingTree::Walk(const std::string& dir, const TreeWalkOptions& options,
                         const std::function<Status(FileRecord&& record)>& on_record) const {
  BackingDir d;
  if (const int err = OpenDir(dir, &d); err != 0) return Status::IOError("open " + dir, err);
  return WalkTreeAt(d.fd(), options, on_record, nullptr);
}

}  // namespace propeller::fuse
