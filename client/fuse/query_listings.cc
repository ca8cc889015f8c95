#include "client/fuse/query_listings.h"

#include <algorithm>

namespace propeller::fuse {

void QueryListings::Store(const Credentials& who, std::vector<QueryEntry> entries) {
  std::lock_guard<std::mutex> lock(mu_);
  std::erase_if(listings_, [&](const auto& l) { return l.first == who; });
  listings_.emplace_front(who, std::move(entries));
  if (listings_.size() > kMaxCallers) listings_.pop_back();
}

QueryListings::Found QueryListings::Lookup(const Credentials& who, std::string_view name,
                                           QueryEntry* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [creds, entries] : listings_) {
    if (!(creds == who)) continue;
    auto it = std::lower_bound(entries.begin(), entries.end(), name,
                               [](const QueryEntry& e, std::string_view n) { return e.name < n; });
    if (it == entries.end() || it->name != name) return Found::kNo;
    *out = *it;
    return Found::kYes;
  }
  return Found::kNoListing;
}

std::vector<uint32_t> RecentCallers::Groups(uint32_t tid, uint32_t uid, uint32_t gid,
                                            int64_t now_ns,
                                            const std::function<std::vector<uint32_t>()>& read) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = by_tid_.find(tid);
    if (it != by_tid_.end() && it->second.uid == uid && it->second.gid == gid &&
        now_ns - it->second.seen_ns < kTtlNs && now_ns >= it->second.seen_ns) {
      return it->second.groups;
    }
  }
  std::vector<uint32_t> groups = read();
  std::lock_guard<std::mutex> lock(mu_);
  if (by_tid_.size() >= kMaxEntries) by_tid_.clear();
  by_tid_[tid] = Entry{uid, gid, now_ns, groups};
  return groups;
}

}  // namespace propeller::fuse
