// QueryListings and RecentCallers: a listing answers only the credentials it was made for, a
// bounded number are kept, and a caller's groups are reread once their time is up.
#include "client/fuse/query_listings.h"

#include <gtest/gtest.h>

namespace propeller::fuse {
namespace {

std::vector<QueryEntry> Entries(std::initializer_list<const char*> names) {
  std::vector<QueryEntry> out;
  for (const char* n : names) out.push_back(QueryEntry{n, std::string("../") + n, {}});
  return out;
}

TEST(QueryListingsTest, EachCallerSeesOnlyTheirOwnListing) {
  QueryListings l;
  const Credentials root{0, 0, {}}, alice{1000, 1000, {}}, alice_staff{1000, 1000, {50}};
  l.Store(root, Entries({"a", "bob%2Fsecret", "c"}));
  QueryEntry e;
  EXPECT_EQ(l.Lookup(root, "bob%2Fsecret", &e), QueryListings::Found::kYes);
  EXPECT_EQ(e.target, "../bob%2Fsecret");
  EXPECT_EQ(l.Lookup(alice, "bob%2Fsecret", &e), QueryListings::Found::kNoListing);
  l.Store(alice, Entries({"a", "c"}));
  EXPECT_EQ(l.Lookup(alice, "bob%2Fsecret", &e), QueryListings::Found::kNo);
  EXPECT_EQ(l.Lookup(alice, "c", &e), QueryListings::Found::kYes);
  // Another group set is another caller.
  EXPECT_EQ(l.Lookup(alice_staff, "a", &e), QueryListings::Found::kNoListing);
  // A newer listing replaces the caller's last one.
  l.Store(alice, Entries({"d"}));
  EXPECT_EQ(l.Lookup(alice, "a", &e), QueryListings::Found::kNo);
  // Bounded: the oldest callers' listings go.
  for (uint32_t uid = 1; uid <= QueryListings::kMaxCallers; ++uid) {
    l.Store(Credentials{uid, uid, {}}, Entries({"x"}));
  }
  EXPECT_EQ(l.Lookup(root, "a", &e), QueryListings::Found::kNoListing);
  EXPECT_EQ(l.Lookup(Credentials{1, 1, {}}, "x", &e), QueryListings::Found::kYes);
}

TEST(RecentCallersTest, GroupsAreRereadAfterTheirTime) {
  RecentCallers r;
  int reads = 0;
  auto read = [&](std::vector<uint32_t> g) {
    return [&reads, g] {
      ++reads;
      return g;
    };
  };
  EXPECT_EQ(r.Groups(7, 1000, 1000, 0, read({50})), std::vector<uint32_t>{50});
  EXPECT_EQ(r.Groups(7, 1000, 1000, RecentCallers::kTtlNs - 1, read({60})),
            std::vector<uint32_t>{50});
  EXPECT_EQ(reads, 1);
  EXPECT_EQ(r.Groups(7, 1000, 1000, RecentCallers::kTtlNs, read({60})),
            std::vector<uint32_t>{60});
  // Another uid or gid on the same thread id (reused, or after setuid) is read afresh.
  EXPECT_EQ(r.Groups(7, 1001, 1000, RecentCallers::kTtlNs, read({})), std::vector<uint32_t>{});
  EXPECT_EQ(r.Groups(7, 1001, 1001, RecentCallers::kTtlNs, read({9})), std::vector<uint32_t>{9});
  EXPECT_EQ(reads, 4);
}

}  // namespace
}  // namespace propeller::fuse
