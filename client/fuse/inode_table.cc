#include "client/fuse/inode_table.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace propeller::fuse {

Status InodeTable::Init(int root_fd) {
  struct stat st;
  if (::fstat(root_fd, &st) != 0) return Status::IOError("reading the backing directory", errno);
  root_.dev = st.st_dev;
  root_.ino = st.st_ino;
  root_.nlookup = 2;
  return Status::OK();
}

Inode* InodeTable::Intern(Inode* parent, std::string_view name, const struct stat& st) {
  std::lock_guard<std::mutex> lock(mu_);
  if (st.st_dev == root_.dev && st.st_ino == root_.ino) {
    ++root_.nlookup;
    return &root_;
  }
  auto key = std::make_pair(st.st_dev, st.st_ino);
  auto it = files_.find(key);
  Inode* inode;
  if (it != files_.end()) {
    inode = it->second.get();
  } else {
    auto fresh = std::make_unique<Inode>();
    inode = fresh.get();
    inode->dev = st.st_dev;
    inode->ino = st.st_ino;
    files_.emplace(key, std::move(fresh));
  }
  ++inode->nlookup;
  AddLinkLocked(inode, parent, name);
  return inode;
}

Inode* InodeTable::InternVirtual(Inode* parent, const std::string& name, InodeKind kind,
                                 bool* created) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string key = std::to_string(reinterpret_cast<uintptr_t>(parent));
  key.push_back('\0');
  key.append(name);
  auto it = virtual_.find(key);
  *created = it == virtual_.end();
  if (!*created) {
    ++it->second->nlookup;
    return it->second.get();
  }
  auto inode = std::make_unique<Inode>();
  inode->kind = kind;
  inode->vkey = key;
  inode->vino = (uint64_t{1} << 62) | next_vino_++;
  inode->nlookup = 1;
  inode->links.push_back(InodeLink{parent, name});
  ++parent->children;  // the parent lives while this inode does
  Inode* raw = inode.get();
  virtual_.emplace(std::move(key), std::move(inode));
  return raw;
}

// Records that `inode` is `name` in `dir` (first, so paths prefer the latest name).
void InodeTable::AddLinkLocked(Inode* inode, Inode* dir, std::string_view name) {
  for (size_t i = 0; i < inode->links.size(); ++i) {
    if (inode->links[i].dir == dir && inode->links[i].name == name) {
      std::rotate(inode->links.begin(), inode->links.begin() + static_cast<ptrdiff_t>(i),
                  inode->links.begin() + static_cast<ptrdiff_t>(i) + 1);
      return;
    }
  }
  ++dir->children;
  inode->links.insert(inode->links.begin(), InodeLink{dir, std::string(name)});
}

void InodeTable::RemoveLinkLocked(Inode* inode, Inode* dir, std::string_view name) {
  for (size_t i = 0; i < inode->links.size(); ++i) {
    if (inode->links[i].dir == dir && inode->links[i].name == name) {
      inode->links.erase(inode->links.begin() + static_cast<ptrdiff_t>(i));
      --dir->children;
      FreeIfUnusedLocked(dir);
      return;
    }
  }
}

// The file inode `st` if it is known as `name` in `dir`.
Inode* InodeTable::FindLocked(const struct stat& st, Inode* dir, std::string_view name) {
  auto it = files_.find(std::make_pair(st.st_dev, st.st_ino));
  if (it == files_.end()) return nullptr;
  for (const InodeLink& l : it->second->links) {
    if (l.dir == dir && l.name == name) return it->second.get();
  }
  return nullptr;
}

// Frees `inode` when neither the kernel nor a link refers to it, then its unused directories.
void InodeTable::FreeIfUnusedLocked(Inode* inode) {
  if (inode == nullptr || inode == &root_ || inode->nlookup > 0 || inode->children > 0) return;
  std::vector<InodeLink> links = std::move(inode->links);
  if (inode->kind == InodeKind::kFile) {
    auto it = files_.find(std::make_pair(inode->dev, inode->ino));
    if (it != files_.end() && it->second.get() == inode) files_.erase(it);
  } else {
    virtual_.erase(inode->vkey);
  }
  for (const InodeLink& l : links) {
    --l.dir->children;
    FreeIfUnusedLocked(l.dir);
  }
}

void InodeTable::Forget(Inode* inode, uint64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  if (inode == &root_) return;
  inode->nlookup -= std::min(inode->nlookup, n);
  FreeIfUnusedLocked(inode);
}

void InodeTable::Unlinked(const struct stat& st, Inode* parent, std::string_view name) {
  std::lock_guard<std::mutex> lock(mu_);
  if (Inode* gone = FindLocked(st, parent, name)) RemoveLinkLocked(gone, parent, name);
}

void InodeTable::Renamed(const struct stat& src, Inode* parent, std::string_view name,
                         const struct stat* dst, Inode* newparent, std::string_view newname,
                         bool exchange) {
  std::lock_guard<std::mutex> lock(mu_);
  Inode* moved = FindLocked(src, parent, name);
  Inode* other = dst != nullptr ? FindLocked(*dst, newparent, newname) : nullptr;
  if (moved != nullptr && moved == other) other = nullptr;  // links of one file
  // Add before removing: removing a last link may free the directory otherwise.
  if (moved != nullptr) AddLinkLocked(moved, newparent, newname);
  if (other != nullptr && exchange) AddLinkLocked(other, parent, name);
  if (other != nullptr) RemoveLinkLocked(other, newparent, newname);
  if (moved != nullptr) RemoveLinkLocked(moved, parent, name);
}

bool InodeTable::PathOf(Inode* inode, std::string* path, uint64_t* parent_ino) {
  std::vector<const std::string*> parts;
  std::lock_guard<std::mutex> lock(mu_);
  if (parent_ino != nullptr) {
    *parent_ino = inode == &root_ || inode->links.empty() ? 0 : inode->links.front().dir->ino;
  }
  for (Inode* i = inode; i != &root_; i = i->links.front().dir) {
    if (i->links.empty() || i->kind != InodeKind::kFile) return false;
    parts.push_back(&i->links.front().name);
    // A cycle would be a bug; never loop forever (a real tree this deep has a path of 2 MB).
    if (parts.size() > (size_t{1} << 20)) return false;
  }
  path->clear();
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
    *path += '/';
    *path += **it;
  }
  if (path->empty()) path->push_back('/');  // (not = "/": a GCC 12 -Wrestrict false alarm)
  return true;
}

bool InodeTable::FirstLink(Inode* inode, Inode** dir, std::string* name) {
  std::lock_guard<std::mutex> lock(mu_);
  if (inode->links.empty()) return false;
  *dir = inode->links.front().dir;
  *name = inode->links.front().name;
  return true;
}

}  // namespace propeller::fuse
