// QueryListings: the listings of one query directory, one per caller (docs/security.md, "Query
// directories"). A query directory is one inode that every user of the mount shares, but what
// it lists depends on who asks: a search runs with the caller's credentials. Lookups, stat,
// readlink and xattr calls on an entry are therefore answered from the calling user's own last
// listing, never from another user's, so nothing about an entry (its name, owner, times or
// link target) reaches a caller whose listing lacks it.
//
// A listing is kept per credentials (uid, gid, supplementary groups); the most recent
// kMaxCallers are kept, so the memory of one query directory stays bounded however many users
// list it. Entries are sorted by name for binary search.
//
// Thread-safe.
#ifndef PROPELLER_CLIENT_FUSE_QUERY_LISTINGS_H_
#define PROPELLER_CLIENT_FUSE_QUERY_LISTINGS_H_

#include <cstddef>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/credentials.h"
#include "common/record.h"

namespace propeller::fuse {

// One entry of a query directory: a symbolic link named after the match's path under the
// directory's scope, pointing to it.
struct QueryEntry {
  std::string name;
  std::string target;
  FileRecord record;
};

class QueryListings {
 public:
  static constexpr size_t kMaxCallers = 8;

  // Makes `entries` (sorted by name, no duplicates) the listing of `who`, the most recent one.
  void Store(const Credentials& who, std::vector<QueryEntry> entries);

  enum class Found { kYes, kNo, kNoListing };
  // Entry `name` of `who`'s last listing, into *out when found; kNoListing when `who` has none
  // (the caller then runs the query as `who` and stores it).
  Found Lookup(const Credentials& who, std::string_view name, QueryEntry* out) const;

 private:
  mutable std::mutex mu_;
  // Most recent first. Under mu_.
  std::deque<std::pair<Credentials, std::vector<QueryEntry>>> listings_;
};

}  // namespace propeller::fuse

#endif  // PROPELLER_CLIENT_FUSE_QUERY_LISTINGS_H_
