#include "indexnode/dir_table.h"

#include <algorithm>

namespace propeller {

void DirTable::RemoveLocked(FileId id) {
  auto it = paths_.find(id);
  if (it == paths_.end()) return;
  for (const std::string& p : it->second) by_path_.erase(Key{id.volume, p});
  paths_.erase(it);
}

void DirTable::Put(const FileRecord& dir) {
  WriterLock lock(&mu_);
  RemoveLocked(dir.id);
  if (dir.type != FileType::kDirectory) return;
  for (const std::string& p : dir.paths) {
    by_path_[Key{dir.id.volume, p}] = Entry{dir.uid, dir.gid, dir.mode};
  }
  paths_[dir.id] = dir.paths;
}

void DirTable::Apply(const Update& u) {
  if ((u.op == UpdateOp::kPut && u.record.type != FileType::kDirectory) ||
      u.op == UpdateOp::kDelete) {
    // The common case, a file that never was a directory: a shared lock suffices.
    ReaderLock lock(&mu_);
    if (paths_.find(u.record.id) == paths_.end()) return;
  }
  if (u.op == UpdateOp::kPut) {
    // Non-directories are not stored, but a put may turn a directory id into a file.
    Put(u.record);
  } else if (u.op == UpdateOp::kDelete) {
    WriterLock lock(&mu_);
    // A conditional delete (common/record.h) spares a directory that no longer has the
    // path: the table keeps no ctime, so a stale entry of a directory renamed elsewhere stays
    // until that directory is put again.
    if (!u.record.paths.empty()) {
      auto it = paths_.find(u.record.id);
      if (it == paths_.end()) return;
      bool named = false;
      for (const std::string& p : u.record.paths) {
        named |= std::find(it->second.begin(), it->second.end(), p) != it->second.end();
      }
      if (!named) return;
    }
    RemoveLocked(u.record.id);
  }
}

void DirTable::ApplyBatch(std::span<const Update> updates) {
  {
    ReaderLock lock(&mu_);
    bool any = false;
    for (const Update& u : updates) {
      if (u.op == UpdateOp::kPut && u.record.type == FileType::kDirectory) any = true;
      if ((u.op == UpdateOp::kPut || u.op == UpdateOp::kDelete) && !paths_.empty() &&
          paths_.find(u.record.id) != paths_.end()) {
        any = true;
      }
      if (any) break;
    }
    if (!any) return;
  }
  for (const Update& u : updates) Apply(u);
}

bool DirTable::Visible(uint32_t volume, const std::string& path, const Credentials& creds) const {
  if (creds.uid == 0) return true;
  ReaderLock lock(&mu_);
  std::string_view p = path;
  while (p != "/") {
    p = PathParent(p);
    auto it = by_path_.find(Key{volume, std::string(p)});
    if (it == by_path_.end()) return false;
    if (!CanReadAndSearch(it->second.uid, it->second.gid, it->second.mode, creds)) return false;
  }
  return true;
}

size_t DirTable::size() const {
  ReaderLock lock(&mu_);
  return by_path_.size();
}

}  // namespace propeller
