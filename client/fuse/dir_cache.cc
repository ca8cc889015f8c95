#include "client/fuse/dir_cache.h"

#include <sys/stat.h>

#include <cerrno>
#include <string>

namespace propeller::fuse {

int DirCache::Open(Inode* dir, BackingDir* out) {
  if (dir == inodes_->root()) {
    tree_->Root(out);
    return 0;
  }
  const Key key{dir->dev, dir->ino};
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (FindLocked(key, out)) return 0;
  }
  std::string path;
  if (!inodes_->PathOf(dir, &path)) return ENOENT;
  if (const int err = tree_->OpenDir(path, out, /*readable=*/true); err != 0) return err;
  struct stat st;
  if (capacity_ == 0 || ::fstat(out->fd(), &st) != 0 || st.st_dev != key.first ||
      st.st_ino != key.second) {
    // Another directory has the path now (changed behind the mount's back): this call uses
    // it, as the path says, but the cache keeps only the inode's own directory.
    return 0;
  }
  auto fd = std::make_shared<const UniqueFd>(out->owned_.Release());
  out->shared_ = fd;
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, fresh] = entries_.try_emplace(key);
  if (!fresh) return 0;  // another call cached it meanwhile: this descriptor closes after use
  lru_.push_front(key);
  it->second = Entry{std::move(fd), out->readable_, lru_.begin()};
  while (entries_.size() > capacity_) {
    entries_.erase(lru_.back());
    lru_.pop_back();
  }
  return 0;
}

int DirCache::Locate(Inode* inode, BackingName* out) {
  if (inode == inodes_->root()) {
    tree_->Root(&out->dir);
    out->name.assign(1, '.');  // (not = ".": a GCC 12 -Wrestrict false alarm)
    return 0;
  }
  Inode* dir = nullptr;
  if (!inodes_->FirstLink(inode, &dir, &out->name)) return ENOENT;
  return Open(dir, &out->dir);
}

bool DirCache::FindLocked(const Key& key, BackingDir* out) {
  auto it = entries_.find(key);
  if (it == entries_.end()) return false;
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  out->owned_.Reset();
  out->shared_ = it->second.fd;
  out->fd_ = it->second.fd->get();
  out->readable_ = it->second.readable;
  return true;
}

bool DirCache::Cached(Inode* inode, BackingDir* out) {
  if (inode == inodes_->root()) {
    tree_->Root(out);
    return true;
  }
  std::lock_guard<std::mutex> lock(mu_);
  return FindLocked(Key{inode->dev, inode->ino}, out);
}

void DirCache::Drop(dev_t dev, ino_t ino) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(Key{dev, ino});
  if (it == entries_.end()) return;
  lru_.erase(it->second.lru);
  entries_.erase(it);
}

size_t DirCache::size() {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

}  // namespace propeller::fuse
