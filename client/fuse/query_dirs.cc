#include "client/fuse/query_dirs.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "client/fuse/errno_map.h"
#include "common/logging.h"
#include "common/record.h"
#include "client/lib/mount_registry.h"

namespace propeller::fuse {

std::string EncodeEntryName(std::string_view rel) { return PathAsFileName(rel); }

bool DecodeEntryName(std::string_view name, std::string* rel) {
  rel->clear();
  for (size_t i = 0; i < name.size(); ++i) {
    if (name[i] != '%') {
      if (name[i] == '/') return false;
      *rel += name[i];
      continue;
    }
    if (i + 2 >= name.size()) return false;
    std::string_view esc = name.substr(i + 1, 2);
    if (esc == "25") {
      *rel += '%';
    } else if (esc == "2F") {
      *rel += '/';
    } else {
      return false;
    }
    i += 2;
  }
  return !rel->empty();
}

int QueryDirs::List(const Credentials& caller, Inode* qdir, std::vector<QueryEntry>* out) {
  std::string scope;
  if (!options_.inodes->PathOf(qdir->parent(), &scope)) return ENOENT;
  // Never a stale answer: updates still queued under the scope are waited for, a while.
  if (const uint64_t n = options_.index->WaitForScope(scope, options_.search_wait_ms); n > 0) {
    Log(LogLevel::kWarning, "mount: query directory '?%s' under %s: index catching up (%llu "
                            "updates pending)", qdir->query.c_str(), scope.c_str(),
        static_cast<unsigned long long>(n));
    return EAGAIN;
  }
  ClientSearchOptions so;
  so.volume = options_.volume;
  so.scope = scope;
  so.creds = caller;
  so.paths_under = options_.mountpoint;
  std::vector<QueryEntry> entries;
  Status s = options_.client->Search(qdir->query, so, [&](const ClientHit& hit) {
    // The hit's in-volume path under the scope.
    std::string path;
    for (const std::string& p : hit.record.paths) {
      if (PathInScope(p, scope) && p != scope) {
        path = p;
        break;
      }
    }
    if (path.empty()) return true;
    std::string rel = scope == "/" ? path.substr(1) : path.substr(scope.size() + 1);
    QueryEntry e;
    e.name = EncodeEntryName(rel);
    e.target = "../" + rel;
    e.record = hit.record;
    entries.push_back(std::move(e));
    return true;
  });
  if (!s.ok()) {
    Log(LogLevel::kError, "mount: query directory '?%s' under %s: %s", qdir->query.c_str(),
        scope.c_str(), s.ToString().c_str());
    return ErrnoOf(s);
  }
  std::sort(entries.begin(), entries.end(),
            [](const QueryEntry& a, const QueryEntry& b) { return a.name < b.name; });
  entries.erase(std::unique(entries.begin(), entries.end(),
                            [](const QueryEntry& a, const QueryEntry& b) {
                              return a.name == b.name;
                            }),
                entries.end());
  ++listings_;
  qdir->listings.Store(caller, entries);
  *out = std::move(entries);
  return 0;
}

int QueryDirs::FindEntry(const Credentials& caller, Inode* qdir, const std::string& name,
                         QueryEntry* out) {
  switch (qdir->listings.Lookup(caller, name, out)) {
    case QueryListings::Found::kYes: return 0;
    case QueryListings::Found::kNo: return ENOENT;
    case QueryListings::Found::kNoListing: break;
  }
  std::vector<QueryEntry> entries;
  if (int err = List(caller, qdir, &entries); err != 0) return err;
  return qdir->listings.Lookup(caller, name, out) == QueryListings::Found::kYes ? 0 : ENOENT;
}

int QueryDirs::EntryFor(const Credentials& caller, Inode* entry, QueryEntry* out) {
  Inode* qdir = nullptr;
  std::string name;
  if (!options_.inodes->FirstLink(entry, &qdir, &name)) return ENOENT;
  return FindEntry(caller, qdir, name, out);
}

void QueryDirs::FillAttr(Inode* inode, const QueryEntry* entry, struct stat* st) {
  std::memset(st, 0, sizeof(*st));
  st->st_ino = inode->vino;
  if (inode->kind == InodeKind::kQueryDir) {
    st->st_mode = S_IFDIR | 0555;
    st->st_nlink = 2;
    const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
    st->st_mtim.tv_sec = now / 1'000'000'000;
    st->st_mtim.tv_nsec = now % 1'000'000'000;
    st->st_atim = st->st_ctim = st->st_mtim;
    st->st_size = 0;
  } else {
    const FileRecord& r = entry->record;
    st->st_mode = S_IFLNK | 0777;
    st->st_nlink = 1;
    st->st_uid = r.uid;
    st->st_gid = r.gid;
    st->st_size = static_cast<off_t>(entry->target.size());
    st->st_mtim.tv_sec = FileTimeSeconds(r.mtime);
    st->st_mtim.tv_nsec = FileTimeNanos(r.mtime);
    st->st_atim = st->st_ctim = st->st_mtim;
  }
  st->st_blksize = 4096;
}

}  // namespace propeller::fuse
