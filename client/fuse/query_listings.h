// QueryListings: the listings of one query directory, one per caller (docs/security.md, "Query
// directories"); RecentCallers: who those callers are, cheaply. A query directory is one inode that every user of the mount shares, but what
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
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
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

// The supplementary groups of recent FUSE callers, so that looking at each entry of a
// listing (`ls -l` of 1,000 entries is 1,000 lookups and 1,000 getattrs) does not read
// /proc/TID/status every time: ~60 us a read, measured (bench/results/search-latency). An entry
// lives kTtlNs and is keyed by thread id, uid and gid; a thread that changed its groups within
// that time is seen with the old ones for the rest of it. At most kMaxEntries are kept.
// Thread-safe.
class RecentCallers {
 public:
  static constexpr int64_t kTtlNs = 1'000'000'000;
  static constexpr size_t kMaxEntries = 1024;

  // The groups of (tid, uid, gid) seen less than kTtlNs before `now_ns`, or those `read`
  // returns (then remembered).
  std::vector<uint32_t> Groups(uint32_t tid, uint32_t uid, uint32_t gid, int64_t now_ns,
                               const std::function<std::vector<uint32_t>()>& read);

 private:
  struct Entry {
    uint32_t uid = 0;
    uint32_t gid = 0;
    int64_t seen_ns = 0;
    std::vector<uint32_t> groups;
  };
  std::mutex mu_;
  std::unordered_map<uint32_t, Entry> by_tid_;  // Under mu_.
};

}  // namespace propeller::fuse

#endif  // PROPELLER_CLIENT_FUSE_QUERY_LISTINGS_H_
