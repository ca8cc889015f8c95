// File times of every year through a real mount (docs/search.md "Times"): files dated before
// 1970 and after 2262 — where 64-bit nanoseconds end — are indexed with their exact time, by
// the mount's capture and by a reconcile at start, and compare right in searches.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "client/lib/propeller.h"
#include "tests/mount_harness.h"

namespace propeller {
namespace {

using testing::Mount;
using testing::SearchMount;
using testing::WriteFile;

// Sets the file's mtime to `sec` seconds since the epoch (and nsec).
void SetMtime(const std::string& path, int64_t sec, long nsec) {
  struct timespec ts[2] = {{0, UTIME_OMIT}, {static_cast<time_t>(sec), nsec}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), ts, 0), 0) << path;
}

std::set<std::string> Names(const Mount& m, const std::string& query) {
  std::vector<ClientHit> hits;
  SearchMount(query, m.mnt(), &hits);
  std::set<std::string> out;
  for (const ClientHit& h : hits) out.insert(h.path.substr(m.mnt().size() + 1));
  return out;
}

TEST(MountTimesTest, FilesDatedBefore1970AndAfter2262CompareRight) {
  Mount m;
  ASSERT_TRUE(m.Start());
  // Through the mount: setattr updates the record.
  WriteFile(m.mnt() + "/y2400", "x");
  SetMtime(m.mnt() + "/y2400", 13569465600, 7);  // 2400-01-01T00:00:00.000000007
  WriteFile(m.mnt() + "/y1950", "x");
  SetMtime(m.mnt() + "/y1950", -631152000, 0);  // 1950-01-01
  WriteFile(m.mnt() + "/now", "x");
  EXPECT_EQ(Names(m, "type=f & mtime<1900-01-01"), std::set<std::string>{});
  EXPECT_EQ(Names(m, "type=f & mtime>2300-01-01"), std::set<std::string>{"y2400"});
  EXPECT_EQ(Names(m, "type=f & mtime=2400-01-01T00:00:00.000000007"),
            std::set<std::string>{"y2400"});
  EXPECT_EQ(Names(m, "type=f & mtime<1970-01-01"), std::set<std::string>{"y1950"});
  EXPECT_EQ(Names(m, "type=f & mtime>1y"), std::set<std::string>{"y1950"});
  // Behind the mount's back, then a restart: the reconcile reads the same times.
  ASSERT_TRUE(m.Stop());
  WriteFile(m.backing() + "/y2440", "x");
  SetMtime(m.backing() + "/y2440", 14831769600, 0);  // 2440-01-01
  SetMtime(m.backing() + "/now", -315619200, 0);      // 1960-01-01
  ASSERT_TRUE(m.Start());
  EXPECT_EQ(Names(m, "type=f & mtime>2300-01-01"), (std::set<std::string>{"y2400", "y2440"}));
  EXPECT_EQ(Names(m, "type=f & mtime<1970-01-01"), (std::set<std::string>{"y1950", "now"}));
  EXPECT_EQ(Names(m, "type=f & mtime<1900-01-01"), std::set<std::string>{});
  struct stat st;
  ASSERT_EQ(::stat((m.mnt() + "/y2400").c_str(), &st), 0);
  EXPECT_EQ(st.st_mtim.tv_sec, 13569465600);
  EXPECT_EQ(st.st_mtim.tv_nsec, 7);
}

}  // namespace
}  // namespace propeller
