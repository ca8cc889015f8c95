// Checks the benchmark data set has the shape the benchmarks (and their expected hit counts)
// rely on: purity, identities, partitions, path validity and the size/time distributions.
#include "bench/dataset.h"

#include <sys/stat.h>

#include <algorithm>
#include <set>
#include <string>
#include <unordered_set>

#include <gtest/gtest.h>

namespace propeller::bench {
namespace {

constexpr int64_t kYear = 365 * kNanosPerDay;

// Absolute, no empty/"."/".." components, no trailing slash: what the engine accepts.
bool PlausiblePath(const std::string& path) {
  if (path.size() < 2 || path[0] != '/' || path.back() == '/') return false;
  size_t start = 1;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    std::string comp = path.substr(start, end - start);
    if (comp.empty() || comp == "." || comp == "..") return false;
    start = end + 1;
  }
  return true;
}

TEST(DatasetTest, PureFunctionOfSeedAndIndex) {
  Dataset a(DatasetOptions{});
  Dataset b(DatasetOptions{});
  DatasetOptions other_seed;
  other_seed.seed = 7;
  Dataset c(other_seed);
  int differing = 0;
  for (uint64_t i : {0ull, 1ull, 9'999ull, 10'000ull, 123'456ull, 9'999'999ull}) {
    EXPECT_EQ(a.Record(i), b.Record(i)) << i;
    EXPECT_EQ(a.Record(i), a.Record(i)) << i;
    if (!(a.Record(i) == c.Record(i))) ++differing;
  }
  EXPECT_GE(differing, 5);

  std::vector<Update> chunk;
  a.AppendPuts(19'990, 20'010, &chunk);
  ASSERT_EQ(chunk.size(), 20u);
  for (uint64_t k = 0; k < chunk.size(); ++k) {
    EXPECT_EQ(chunk[k], a.Put(19'990 + k));
    EXPECT_EQ(chunk[k].op, UpdateOp::kPut);
  }
}

TEST(DatasetTest, IdentitiesAndPartitions) {
  DatasetOptions options;
  options.files_per_acg = 1'000;
  Dataset d(options);
  for (uint64_t i : {0ull, 999ull, 1'000ull, 54'321ull}) {
    Update u = d.Put(i);
    EXPECT_EQ(u.record.id.volume, 1u);
    EXPECT_EQ(u.record.id.ino, i + 1);
    EXPECT_EQ(u.acg, i / 1'000 + 1);
    EXPECT_EQ(d.AcgOf(i), i / 1'000 + 1);
  }
}

// Each group owns one subtree, and no two groups share a root.
TEST(DatasetTest, GroupsOwnDisjointSubtrees) {
  Dataset d(DatasetOptions{});
  std::set<std::string> roots;
  for (uint64_t g = 0; g < 50; ++g) {
    std::string first = d.Record(g * 10'000).paths[0];
    // "/top/app-g/": the first two components.
    size_t second_slash = first.find('/', 1);
    size_t third_slash = first.find('/', second_slash + 1);
    ASSERT_NE(third_slash, std::string::npos);
    std::string root = first.substr(0, third_slash + 1);
    EXPECT_TRUE(root.ends_with("-" + std::to_string(g) + "/")) << root;
    EXPECT_TRUE(roots.insert(root).second) << root;
    for (uint64_t k : {1ull, 777ull, 9'999ull}) {
      EXPECT_TRUE(d.Record(g * 10'000 + k).paths[0].starts_with(root));
    }
  }
}

TEST(DatasetTest, PathsAreValidUniqueAndFanOut) {
  Dataset d(DatasetOptions{});
  constexpr uint64_t kFiles = 100'000;
  std::unordered_set<std::string> paths;
  std::unordered_set<std::string> dirs;
  std::unordered_set<uint64_t> parents;
  uint64_t firefox = 0;
  for (uint64_t i = 0; i < kFiles; ++i) {
    FileRecord r = d.Record(i);
    ASSERT_EQ(r.paths.size(), 1u);
    const std::string& p = r.paths[0];
    ASSERT_TRUE(PlausiblePath(p)) << p;
    ASSERT_TRUE(paths.insert(p).second) << "duplicate " << p;
    std::string dir = p.substr(0, p.rfind('/'));
    EXPECT_EQ(dir, d.DirectoryOf(i));
    dirs.insert(dir);
    parents.insert(r.parent_ino);
    EXPECT_GT(r.parent_ino, uint64_t{1} << 39);  // never a file's inode
    if (p.find("firefox") != std::string::npos) ++firefox;
  }
  // 32 files per leaf directory; one parent inode per directory.
  EXPECT_EQ(dirs.size(), parents.size());
  EXPECT_NEAR(static_cast<double>(dirs.size()), kFiles / 32.0, 10 * 4);
  EXPECT_GT(firefox, kFiles / 100);
}

TEST(DatasetTest, SizeDistribution) {
  Dataset d(DatasetOptions{});
  constexpr uint64_t kFiles = 1'000'000;
  uint64_t over_16m = 0, over_1g = 0;
  std::vector<uint64_t> sample;
  for (uint64_t i = 0; i < kFiles; ++i) {
    uint64_t size = d.SizeOf(i);
    if (size > (uint64_t{16} << 20)) ++over_16m;
    if (size > (uint64_t{1} << 30)) ++over_1g;
    if (i % 100 == 0) sample.push_back(size);
  }
  // ~1% over 16 MiB (10,000 expected, sd ~100) and ~0.05% over 1 GiB (500, sd ~22).
  EXPECT_GT(over_16m, 9'000u);
  EXPECT_LT(over_16m, 11'500u);
  EXPECT_GT(over_1g, 400u);
  EXPECT_LT(over_1g, 620u);
  std::nth_element(sample.begin(), sample.begin() + sample.size() / 2, sample.end());
  uint64_t median = sample[sample.size() / 2];
  EXPECT_GT(median, 14'000u);
  EXPECT_LT(median, 19'000u);
  EXPECT_EQ(d.Record(4242).size, d.SizeOf(4242));
}

TEST(DatasetTest, TimesUidsAndModes) {
  DatasetOptions options;
  Dataset d(options);
  const int64_t now = options.now_ns;
  constexpr uint64_t kFiles = 200'000;
  uint64_t recent = 0, ctime_later = 0;
  int64_t oldest = now;
  std::set<uint32_t> uids, gids;
  for (uint64_t i = 0; i < kFiles; ++i) {
    FileRecord r = d.Record(i);
    ASSERT_EQ(r.mtime, d.MtimeOf(i));
    ASSERT_LE(r.mtime, now);
    ASSERT_GE(r.ctime, r.mtime);
    ASSERT_LE(r.ctime, now);
    ASSERT_GE(r.atime, r.mtime);
    ASSERT_LE(r.atime, now);
    if (r.mtime > now - kNanosPerDay) ++recent;
    if (r.ctime > r.mtime) ++ctime_later;
    oldest = std::min<int64_t>(oldest, ClampToInt64(r.mtime));
    uids.insert(r.uid);
    gids.insert(r.gid);
    ASSERT_TRUE(S_ISREG(r.mode));
    ASSERT_EQ(r.type, FileType::kRegular);
    ASSERT_EQ(r.nlink, 1u);
  }
  // 0.5% in the last day: 1,000 expected, sd ~32.
  EXPECT_GT(recent, 850u);
  EXPECT_LT(recent, 1'150u);
  EXPECT_GT(ctime_later, kFiles / 20);
  EXPECT_LT(oldest, now - 3 * kYear + 30 * kNanosPerDay);
  EXPECT_GE(oldest, now - 3 * kYear - 2 * kNanosPerDay);
  EXPECT_GT(uids.size(), 100u);
  EXPECT_LE(uids.size(), 301u);
  EXPECT_LE(gids.size(), 100u);
}

TEST(DatasetTest, TouchIsAWriteAndClose) {
  DatasetOptions options;
  Dataset d(options);
  FileRecord before = d.Record(31'337);
  FileRecord a = before, b = before;
  d.Touch(5, &a);
  d.Touch(5, &b);
  EXPECT_EQ(a, b);  // pure in (id, version)
  EXPECT_EQ(a.paths, before.paths);
  EXPECT_EQ(a.id, before.id);
  EXPECT_GT(a.mtime, options.now_ns - kNanosPerSecond);
  EXPECT_LE(a.mtime, options.now_ns);
  EXPECT_EQ(a.ctime, a.mtime);
  EXPECT_GE(a.atime, a.mtime);
  int sizes_changed = 0;
  for (uint64_t v = 0; v < 20; ++v) {
    FileRecord c = before;
    d.Touch(v, &c);
    if (c.size != before.size) ++sizes_changed;
  }
  EXPECT_GE(sizes_changed, 19);
}

}  // namespace
}  // namespace propeller::bench
