// The harness's oracle (Matches in eval_system.h) on hand-made records: boundaries of every
// predicate, keyword tokenisation, and the data set's documented counts.
#include <gtest/gtest.h>

#include "bench/dataset.h"
#include "bench/eval/eval_system.h"

namespace propeller::eval {
namespace {

constexpr int64_t kNow = 1'717'200'000'000'000'000;
constexpr int64_t kDay = 86'400'000'000'000;

FileRecord Rec(std::string path, uint64_t size, int64_t mtime) {
  FileRecord r;
  r.id = {1, 7};
  r.paths = {std::move(path)};
  r.size = size;
  r.mtime = mtime;
  return r;
}

TEST(EvalOracle, BigRecentBoundaries) {
  EXPECT_TRUE(Matches(QueryKind::kBigRecent, Rec("/a", (1ull << 30) + 1, kNow - 1), kNow));
  EXPECT_FALSE(Matches(QueryKind::kBigRecent, Rec("/a", 1ull << 30, kNow - 1), kNow));
  EXPECT_FALSE(Matches(QueryKind::kBigRecent, Rec("/a", 2ull << 30, kNow - kDay), kNow));
  EXPECT_TRUE(Matches(QueryKind::kBigRecent, Rec("/a", 2ull << 30, kNow - kDay + 1), kNow));
}

TEST(EvalOracle, KeywordIsAWholeTokenCaseInsensitive) {
  const int64_t t = kNow - 6 * kDay;
  EXPECT_TRUE(Matches(QueryKind::kFirefoxWeek, Rec("/home/firefox-3/x.txt", 1, t), kNow));
  EXPECT_TRUE(Matches(QueryKind::kFirefoxWeek, Rec("/home/FireFox/x", 1, t), kNow));
  EXPECT_TRUE(Matches(QueryKind::kFirefoxWeek, Rec("/a/b/firefox", 1, t), kNow));
  EXPECT_FALSE(Matches(QueryKind::kFirefoxWeek, Rec("/home/firefoxes/x", 1, t), kNow));
  EXPECT_FALSE(Matches(QueryKind::kFirefoxWeek, Rec("/home/myfirefox/x", 1, t), kNow));
  EXPECT_FALSE(Matches(QueryKind::kFirefoxWeek, Rec("/home/firefox/x", 1, kNow - 7 * kDay),
                       kNow));
}

TEST(EvalOracle, PathSubstringIsCaseSensitive) {
  EXPECT_TRUE(Matches(QueryKind::kPathFirefox, Rec("/home/myfirefoxes/x", 1, 0), kNow));
  EXPECT_FALSE(Matches(QueryKind::kPathFirefox, Rec("/home/FireFox/x", 1, 0), kNow));
  FileRecord linked = Rec("/a/x", 1, 0);
  linked.paths.push_back("/firefox/x");
  EXPECT_TRUE(Matches(QueryKind::kPathFirefox, linked, kNow));
}

TEST(EvalOracle, Over16MBoundary) {
  EXPECT_FALSE(Matches(QueryKind::kOver16M, Rec("/a", 16ull << 20, 0), kNow));
  EXPECT_TRUE(Matches(QueryKind::kOver16M, Rec("/a", (16ull << 20) + 1, 0), kNow));
}

// bench/README.md documents ~1% of files above 16 MiB (1,085 of 100 k at the default seed).
TEST(EvalOracle, DatasetCountsMatchTheGeneratorsDocumentation) {
  bench::DatasetOptions o;
  bench::Dataset ds(o);
  uint64_t over = 0;
  for (uint64_t i = 0; i < 100'000; ++i) {
    over += Matches(QueryKind::kOver16M, ds.Record(i), o.now_ns) ? 1 : 0;
  }
  EXPECT_EQ(over, 1085u);
}

TEST(EvalOracle, SqlConditionsResolveAgesAgainstNow) {
  EXPECT_EQ(SqlCondition(QueryKind::kBigRecent, kNow, false),
            "f.size > 1073741824 AND f.mtime > " + std::to_string(kNow - kDay));
  EXPECT_EQ(SqlCondition(QueryKind::kPathFirefox, kNow, true), "p.path GLOB '*firefox*'");
  EXPECT_TRUE(SqlNeedsKeywords(QueryKind::kFirefoxWeek));
  EXPECT_FALSE(SqlNeedsKeywords(QueryKind::kOver16M));
}

}  // namespace
}  // namespace propeller::eval
