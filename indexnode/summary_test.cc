// AcgSummary must never say "cannot match" for a set of records one of which matches: checked
// against brute force over random record sets and random queries; and it must actually prune.
#include "indexnode/summary.h"

#include <gtest/gtest.h>

#include "indexnode/engine_test_util.h"

namespace propeller {
namespace {

using testing::kNow;
using testing::RecordGen;

TEST(AcgSummaryTest, NeverPrunesAPartitionThatHasAMatch) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("PROPELLER_SEED=" + std::to_string(seed));
  RecordGen gen(seed);
  int pruned = 0, checked = 0;
  for (int round = 0; round < 300; ++round) {
    std::vector<FileRecord> recs;
    AcgSummary summary;
    const int n = static_cast<int>(gen.rnd().Uniform(6));
    for (int i = 0; i < n; ++i) {
      recs.push_back(gen.NewRecord(FileId{1, static_cast<uint64_t>(i + 1)}));
      summary.Add(recs.back());
    }
    // Round trip through the persisted form.
    std::string bytes;
    summary.EncodeTo(&bytes);
    AcgSummary loaded;
    ASSERT_TRUE(loaded.DecodeFrom(bytes).ok());
    for (int q = 0; q < 50; ++q) {
      std::string text = gen.RandomQuery();
      ParseOptions po;
      po.now_ns = kNow;
      auto query = Query::Parse(text, po);
      ASSERT_TRUE(query.ok()) << text;
      bool any = false;
      for (const FileRecord& r : recs) any = any || query->Matches(r);
      bool may = loaded.MayMatch(query->root());
      ++checked;
      if (!may) ++pruned;
      ASSERT_TRUE(may || !any) << "pruned a partition with a match for '" << text << "'";
      ASSERT_EQ(may, summary.MayMatch(query->root()));
    }
  }
  // The summaries must earn their keep on this data.
  EXPECT_GT(pruned, checked / 10);
}

// Attribute changes of records whose paths the summary holds already (AddAttributes) keep it a
// correct over-approximation: the sequence "Add every record, then AddAttributes their changed
// versions" never prunes a partition that holds a match among the latest versions.
TEST(AcgSummaryTest, AttributeChangesKeepItCorrect) {
  const uint64_t seed = TestSeed() + 1;
  SCOPED_TRACE("PROPELLER_SEED=" + std::to_string(seed));
  RecordGen gen(seed);
  for (int round = 0; round < 200; ++round) {
    std::vector<FileRecord> recs;
    AcgSummary summary;
    const int n = 1 + static_cast<int>(gen.rnd().Uniform(5));
    for (int i = 0; i < n; ++i) {
      recs.push_back(gen.NewRecord(FileId{1, static_cast<uint64_t>(i + 1)}));
      summary.Add(recs.back());
    }
    for (FileRecord& r : recs) {
      gen.RandomizeAttrs(&r);  // same paths, new size/times/uid/gid
      summary.AddAttributes(r);
    }
    for (int q = 0; q < 40; ++q) {
      std::string text = gen.RandomQuery();
      ParseOptions po;
      po.now_ns = kNow;
      auto query = Query::Parse(text, po);
      ASSERT_TRUE(query.ok()) << text;
      bool any = false;
      for (const FileRecord& r : recs) any = any || query->Matches(r);
      ASSERT_TRUE(summary.MayMatch(query->root()) || !any) << "pruned a match for '" << text
                                                           << "'";
    }
  }
  // AddAttributes alone does not add keywords: a fresh summary with only attributes knows no
  // keyword of the record.
  FileRecord r = gen.NewRecord(FileId{1, 1});
  r.paths = {"/home/ann/uniqueword.txt"};
  AcgSummary attrs_only;
  attrs_only.AddAttributes(r);
  ParseOptions po;
  po.now_ns = kNow;
  auto q = Query::Parse("keyword=uniqueword", po);
  ASSERT_TRUE(q.ok());
  EXPECT_FALSE(attrs_only.MayMatch(q->root()));
  attrs_only.Add(r);
  EXPECT_TRUE(attrs_only.MayMatch(q->root()));
}

TEST(AcgSummaryTest, RejectsMalformedBytes) {
  AcgSummary s;
  EXPECT_FALSE(s.DecodeFrom("").ok());
  EXPECT_FALSE(s.DecodeFrom(std::string(10, '\x01')).ok());
  std::string good;
  AcgSummary().EncodeTo(&good);
  good[0] = 9;
  EXPECT_FALSE(s.DecodeFrom(good).ok());
}

}  // namespace
}  // namespace propeller
