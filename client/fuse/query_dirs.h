// QueryDirs: the mount's query directories (capture_fs.h). Any path component starting with
// '?' is a read-only directory of symbolic links to the matches under its parent, computed at
// opendir with the calling process's credentials (docs/security.md): a listing is kept per
// caller (QueryListings), and a caller sees only entries of their own listing.
//
// Entries are named by their path relative to the query's scope with '%' written as "%25" and
// '/' as "%2F" (unique, reversible, and a plain file name), and point to "../<relative path>".
// While updates are queued under the scope (index_writer.h), a listing waits for them a while,
// then fails with EAGAIN ("index catching up", logged): never a stale answer.
//
// Thread-safe.
#ifndef PROPELLER_CLIENT_FUSE_QUERY_DIRS_H_
#define PROPELLER_CLIENT_FUSE_QUERY_DIRS_H_

#include <sys/stat.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "client/fuse/index_writer.h"
#include "client/fuse/inode_table.h"
#include "client/fuse/query_listings.h"
#include "client/lib/propeller.h"
#include "common/credentials.h"

namespace propeller::fuse {

struct QueryDirsOptions {
  InodeTable* inodes = nullptr;  // REQUIRED; not owned
  Client* client = nullptr;      // REQUIRED; not owned
  IndexWriter* index = nullptr;  // REQUIRED; not owned
  uint32_t volume = 0;           // REQUIRED
  int64_t search_wait_ms = 2000;
  // The mount point: path predicates see the paths under it, as `ls` shows them
  // (docs/query.md "Paths").
  std::string mountpoint;
};

class QueryDirs {
 public:
  explicit QueryDirs(const QueryDirsOptions& options) : options_(options) {}

  // Runs the query of directory `qdir` as `caller`; the listing replaces that caller's last
  // one. 0, ENOENT (its directory is gone), EINVAL (bad query, logged with its position),
  // EAGAIN (index catching up) or ErrnoOf the search's error.
  int List(const Credentials& caller, Inode* qdir, std::vector<QueryEntry>* out);
  // Entry `name` of query directory `qdir` as `caller` sees it: from their own last listing,
  // or a fresh one when they have none. 0, ENOENT or List's errors.
  int FindEntry(const Credentials& caller, Inode* qdir, const std::string& name,
                QueryEntry* out);
  // What `caller` may know of the query entry `entry`: 0 with *out filled, or ENOENT when
  // their own listing lacks it.
  int EntryFor(const Credentials& caller, Inode* entry, QueryEntry* out);
  // The attributes of a virtual inode; `entry`: what the caller's listing says of a
  // kQueryEntry inode (ignored for kQueryDir).
  static void FillAttr(Inode* inode, const QueryEntry* entry, struct stat* st);

  uint64_t listings() const { return listings_.load(); }

 private:
  const QueryDirsOptions options_;
  std::atomic<uint64_t> listings_{0};
};

// Query-directory entry names (see above).
std::string EncodeEntryName(std::string_view relative_path);
// The relative path of an entry name; false when `name` is not an encoding.
bool DecodeEntryName(std::string_view name, std::string* relative_path);

}  // namespace propeller::fuse

#endif  // PROPELLER_CLIENT_FUSE_QUERY_DIRS_H_
