// AcgSummary must never say "cannot match" for a set of records one of which matches: checked
// against brute force over random record sets and random queries; and it must actually prune.
#include "indexnode/summary.h"

#include <gtest/gtest.h>

#include <set>

#include "indexnode/engine_test_util.h"

namespace propeller {
namespace {

using testing::kDay;
using testing::kNow;
using testing::RecordGen;

// `summary` may prune `text` only when no record of `recs` matches it, and must answer as
// `same` does (the summary it was decoded from). Counts the check and a pruning.
void CheckAgainstBruteForce(const std::string& text, const std::vector<FileRecord>& recs,
                            const AcgSummary& summary, const AcgSummary& same, int* checked,
                            int* pruned) {
  ParseOptions po;
  po.now_ns = kNow;
  auto query = Query::Parse(text, po);
  ASSERT_TRUE(query.ok()) << text;
  bool any = false;
  for (const FileRecord& r : recs) any = any || query->Matches(r);
  const bool may = summary.MayMatch(query->root());
  ++*checked;
  *pruned += may ? 0 : 1;
  ASSERT_TRUE(may || !any) << "pruned a partition with a match for '" << text << "'";
  ASSERT_EQ(may, same.MayMatch(query->root())) << text;
}

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
      ASSERT_NO_FATAL_FAILURE(
          CheckAgainstBruteForce(gen.RandomQuery(), recs, loaded, summary, &checked, &pruned));
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
      const int64_t week = AcgSummary::WeekOf(r.mtime);
      gen.RandomizeAttrs(&r);  // same paths, new size/times/uid/gid
      summary.AddAttributes(r);
      if (AcgSummary::WeekOf(r.mtime) != week) summary.AddKeywordWeeks(r);  // as a commit does
    }
    int checked = 0, pruned = 0;
    for (int q = 0; q < 40; ++q) {
      ASSERT_NO_FATAL_FAILURE(
          CheckAgainstBruteForce(gen.RandomQuery(), recs, summary, summary, &checked, &pruned));
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

// The size classes' mtime ranges: conjunctions of size and mtime ranges (one or two bounds
// each, on and around class boundaries) against brute force, also after a round trip and a
// Merge; and the case they exist for: one big old file and one small new one.
TEST(AcgSummaryTest, SizeAndMtimeTogetherNeverPruneAMatch) {
  const uint64_t seed = TestSeed() + 2;
  SCOPED_TRACE("PROPELLER_SEED=" + std::to_string(seed));
  RecordGen gen(seed);
  Random& rnd = gen.rnd();
  const uint64_t kSizes[] = {0, 1, 1023, 1024, 4095, 1 << 20, (1u << 30) - 1, 1u << 30,
                             (1u << 30) + 7, 5ull << 30, UINT64_MAX};
  const char* kSizeText[] = {"0", "1", "1023", "1k", "4k", "1m", "16m", "1g", "1073741831"};
  const char* kOps[] = {"=", "<", "<=", ">", ">="};
  const char* kAges[] = {"1d", "2d", "36h", "1w", "2025-12-28"};
  const char* kRel[] = {"<", "<=", ">", ">="};
  int pruned = 0, checked = 0;
  for (int round = 0; round < 300; ++round) {
    std::vector<FileRecord> recs;
    AcgSummary a, b;
    const int n = static_cast<int>(rnd.Uniform(6));
    for (int i = 0; i < n; ++i) {
      FileRecord r = gen.NewRecord(FileId{1, static_cast<uint64_t>(i + 1)});
      r.size = kSizes[rnd.Uniform(std::size(kSizes))];
      r.mtime = kNow - static_cast<int64_t>(rnd.Uniform(10)) * kDay -
                (rnd.OneIn(2) ? 0 : static_cast<int64_t>(rnd.Uniform(kDay)));
      recs.push_back(r);
      (i % 2 == 0 ? a : b).Add(r);
    }
    AcgSummary merged = a;
    merged.Merge(b);
    std::string bytes;
    merged.EncodeTo(&bytes);
    AcgSummary loaded;
    ASSERT_TRUE(loaded.DecodeFrom(bytes).ok());
    for (int q = 0; q < 40; ++q) {
      std::string text = std::string("size") + kOps[rnd.Uniform(std::size(kOps))] +
                         kSizeText[rnd.Uniform(std::size(kSizeText))];
      if (rnd.OneIn(3)) text += std::string(" & size<") + kSizeText[rnd.Uniform(9)];
      text += std::string(" & mtime") + kRel[rnd.Uniform(4)] + kAges[rnd.Uniform(5)];
      if (rnd.OneIn(3)) text += std::string(", mtime>") + kAges[rnd.Uniform(5)];
      ASSERT_NO_FATAL_FAILURE(
          CheckAgainstBruteForce(text, recs, loaded, merged, &checked, &pruned));
    }
  }
  EXPECT_GT(pruned, checked / 10);

  // One file that is big and old, one that is small and new: the separate ranges of size and
  // mtime admit "big and new"; the size classes do not.
  FileRecord big_old = gen.NewRecord(FileId{1, 1});
  big_old.size = 5ull << 30;
  big_old.mtime = kNow - 30 * kDay;
  FileRecord small_new = gen.NewRecord(FileId{1, 2});
  small_new.size = 4096;
  small_new.mtime = kNow - kDay / 2;
  AcgSummary s;
  s.Add(big_old);
  s.Add(small_new);
  ParseOptions po;
  po.now_ns = kNow;
  auto big_new = Query::Parse("size>1g & mtime<1d", po);
  auto small_or_old = Query::Parse("size<1m & mtime<1d", po);
  ASSERT_TRUE(big_new.ok() && small_or_old.ok());
  EXPECT_FALSE(s.MayMatch(big_new->root()));
  EXPECT_TRUE(s.MayMatch(small_or_old->root()));

  // A summary written before the size classes (layout 1) decodes and prunes on the axes alone.
  std::string bytes;
  s.EncodeTo(&bytes);
  // Without the directory and the keyword-week filter (layouts 3 and 4).
  const size_t v2_size =
      bytes.size() - 2 - s.common_dir().size() - 1 - AcgSummary::kWeekBloomBytes;
  std::string v1 = bytes.substr(0, v2_size - AcgSummary::kSizeClasses * 16);
  v1[0] = 1;
  AcgSummary old;
  ASSERT_TRUE(old.DecodeFrom(v1).ok());
  EXPECT_TRUE(old.MayMatch(big_new->root()));
  auto huge = Query::Parse("size>1t", po);
  ASSERT_TRUE(huge.ok());
  EXPECT_FALSE(old.MayMatch(huge->root()));
  // Merged with a new summary, the classes stay unknown (the old one's files are not in them).
  AcgSummary fresh;
  fresh.Add(small_new);
  fresh.Merge(old);
  EXPECT_TRUE(fresh.MayMatch(big_new->root()));
}

// EveryPathHasKeyword is a planning hint the planner trusts to skip a keyword's postings: it
// must never claim a keyword that some path lacks. Random paths from a few names (some
// sharing letters, some in capitals), hard links, merges and round trips, against brute force.
TEST(AcgSummaryTest, CommonDirectoryNeverClaimsAKeywordSomePathLacks) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("PROPELLER_SEED=" + std::to_string(seed));
  RecordGen gen(seed);
  Random& rnd = gen.rnd();
  const char* kNames[] = {"firefox", "fire", "fox", "Firefox", "firefox.d", "a-firefox", "x"};
  const char* kTokens[] = {"firefox", "fire", "fox", "d", "a", "x", "proj"};
  auto random_path = [&] {
    std::string p = rnd.OneIn(2) ? "/proj" : "";
    const int depth = 1 + static_cast<int>(rnd.Uniform(4));
    for (int d = 0; d < depth; ++d) p += std::string("/") + kNames[rnd.Uniform(std::size(kNames))];
    return p;
  };
  int claims = 0;
  for (int round = 0; round < 400; ++round) {
    std::vector<std::string> paths;
    AcgSummary whole, part;
    const int n = 1 + static_cast<int>(rnd.Uniform(5));
    for (int i = 0; i < n; ++i) {
      FileRecord r = gen.NewRecord(FileId{1, static_cast<uint64_t>(i + 1)});
      // Mostly under one directory, as an ACG's files are; sometimes elsewhere.
      r.paths = {rnd.OneIn(4) ? random_path() : "/proj/firefox" + random_path()};
      if (rnd.OneIn(5)) r.paths.push_back(random_path());  // a hard link
      paths.insert(paths.end(), r.paths.begin(), r.paths.end());
      (i % 2 == 0 ? whole : part).Add(r);
    }
    whole.Merge(part);
    std::string bytes;
    whole.EncodeTo(&bytes);
    AcgSummary loaded;
    ASSERT_TRUE(loaded.DecodeFrom(bytes).ok());
    ASSERT_EQ(loaded.common_dir(), whole.common_dir());
    ASSERT_EQ(whole.common_dir().front(), '/');
    ASSERT_EQ(whole.common_dir().back(), '/');
    for (const char* t : kTokens) {
      bool every = true;
      for (const std::string& p : paths) every = every && PathHasKeyword(p, t);
      const bool claimed = loaded.EveryPathHasKeyword(t);
      ASSERT_TRUE(every || !claimed) << "claims '" << t << "' under " << whole.common_dir();
      claims += claimed ? 1 : 0;
    }
  }
  EXPECT_GT(claims, 100);  // and it does claim: most rounds share /proj/firefox/
}

// The K-D tree's tags of a file (PathKeywordBits, computed without building the token list)
// are exactly the KeywordBits of its paths' PathKeywords: upper case, digits, bytes >= 0x80,
// repeats and every separator included. A bit too few would hide the file from a keyword query.
TEST(AcgSummaryTest, PathKeywordBitsAreThoseOfPathKeywords) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("PROPELLER_SEED=" + std::to_string(seed));
  Random rnd(seed);
  const std::string kBytes = "aZz09/._- ~Fx\xc3\xa9\x80\xff/";
  for (int round = 0; round < 5000; ++round) {
    FileRecord r;
    const int links = static_cast<int>(rnd.Uniform(3));
    uint64_t want = 0;
    for (int l = 0; l < links; ++l) {
      std::string path = "/";
      const int n = static_cast<int>(rnd.Uniform(40));
      for (int i = 0; i < n; ++i) path += kBytes[rnd.Uniform(kBytes.size())];
      uint64_t bits = 0;
      for (const std::string& t : PathKeywords(path)) bits |= AcgSummary::KeywordBits(t);
      ASSERT_EQ(AcgSummary::PathKeywordBits(path), bits) << path;
      want |= bits;
      r.paths.push_back(path);
    }
    ASSERT_EQ(AcgSummary::RecordKeywordBits(r), want);
  }
  EXPECT_EQ(AcgSummary::PathKeywordBits("/Home/FIREFOX-17/x.tar.gz"),
            AcgSummary::KeywordBits("home") | AcgSummary::KeywordBits("firefox") |
                AcgSummary::KeywordBits("17") | AcgSummary::KeywordBits("x") |
                AcgSummary::KeywordBits("tar") | AcgSummary::KeywordBits("gz"));
}

// BloomProbes names the filter bytes MayMatch reads (a search prefetches them): a summary of
// one file sets exactly the bytes of its keywords and its uid, so the probes of a query naming
// all of them are exactly its non-zero bytes, and a NOT or a range reads none.
TEST(AcgSummaryTest, BloomProbesAreTheBytesMayMatchReads) {
  FileRecord r;
  r.id = FileId{1, 1};
  r.paths = {"/Proj/x"};
  r.uid = 1234;
  AcgSummary s;
  s.Add(r);
  std::set<uint32_t> set_bytes;
  for (uint32_t i = 0; i < AcgSummary::kBloomBytes; ++i) {
    if (s.bloom()[i] != 0) set_bytes.insert(i);
  }
  auto probes = [](const char* text) {
    ParseOptions po;
    po.now_ns = kNow;
    auto q = Query::Parse(text, po);
    EXPECT_TRUE(q.ok()) << text;
    std::vector<uint32_t> out;
    if (q.ok()) AcgSummary::BloomProbes(q->root(), &out);
    return std::set<uint32_t>(out.begin(), out.end());
  };
  EXPECT_EQ(probes("keyword=proj & (keyword=x | uid=1234)"), set_bytes);
  EXPECT_EQ(probes("name=x & ext=proj & uid=1234"), set_bytes);  // tokens of names, extensions
  EXPECT_TRUE(probes("!keyword=proj & size>1 & mtime<1d").empty());
  for (uint32_t b : probes("keyword=nothere")) EXPECT_LT(b, AcgSummary::kBloomBytes);
}

// RequiredToken is the token PathKeywords gives every matching path: for an extension, the
// extension itself when it is exactly one token; for a name, its first token.
TEST(AcgSummaryTest, RequiredTokenIsThatOfPathKeywords) {
  const char* kValues[] = {"c", "jpg", "JPG", "tar.gz", ".c", "c++", "Ünïcode", "ünïcode", "a b",
                           "x1", "firefox.desktop", "Report0.TXT", "-", "..", "mañana", "9"};
  ParseOptions po;
  po.now_ns = kNow;
  for (const char* v : kValues) {
    for (const char* attr : {"ext", "name"}) {
      auto q = Query::Parse(std::string(attr) + "=\"" + v + "\"", po);
      ASSERT_TRUE(q.ok()) << attr << "=" << v << ": " << q.status().ToString();
      ASSERT_EQ(q->root().kind, QueryNode::Kind::kPred);
      // As parsed (an extension loses its dot and is lowered).
      const std::string value = std::get<std::string>(q->root().pred.value);
      const std::vector<std::string> tokens = PathKeywords(value);
      std::optional<std::string> want;
      if (std::string(attr) == "ext") {
        if (tokens.size() == 1 && tokens[0] == value) want = value;
      } else if (!tokens.empty()) {
        want = tokens.front();
      }
      EXPECT_EQ(AcgSummary::RequiredToken(q->root().pred), want) << attr << "=" << v;
    }
  }
}

// The keyword-week filter: conjunctions of keywords with mtime ranges (open and closed, on
// and around week boundaries, dates in the future) against brute force, after a round trip, a
// Merge and attribute changes; and the case it exists for.
TEST(AcgSummaryTest, KeywordsAndMtimeTogetherNeverPruneAMatch) {
  const uint64_t seed = TestSeed() + 5;
  SCOPED_TRACE("PROPELLER_SEED=" + std::to_string(seed));
  RecordGen gen(seed);
  Random& rnd = gen.rnd();
  constexpr int64_t kWeek = int64_t{1} << 49;  // AcgSummary::WeekOf's unit
  const char* kWords[] = {"firefox", "src", "data", "main1", "c", "nothing", "tmp", "run42"};
  const char* kAges[] = {"1d", "2d", "6d", "1w", "2w", "30d", "1y", "2025-12-28", "2026-01-10"};
  const char* kRel[] = {"<", "<=", ">", ">="};
  int pruned = 0, checked = 0;
  for (int round = 0; round < 300; ++round) {
    std::vector<FileRecord> recs;
    AcgSummary a, b;
    const int n = 1 + static_cast<int>(rnd.Uniform(6));
    for (int i = 0; i < n; ++i) {
      FileRecord r = gen.NewRecord(FileId{1, static_cast<uint64_t>(i + 1)});
      // Within a few weeks of now, often on a week's first or last nanosecond, at times ahead.
      const int64_t base = (kNow / kWeek - static_cast<int64_t>(rnd.Uniform(5))) * kWeek;
      r.mtime = rnd.OneIn(3) ? base - static_cast<int64_t>(rnd.Uniform(2))
                             : base + static_cast<int64_t>(rnd.Uniform(uint64_t{kWeek}));
      if (rnd.OneIn(10)) r.mtime = kNow + static_cast<int64_t>(rnd.Uniform(uint64_t{3} * kWeek));
      recs.push_back(r);
      (i % 2 == 0 ? a : b).Add(r);
    }
    AcgSummary merged = a;
    merged.Merge(b);
    if (rnd.OneIn(2)) {  // some records change their times, not their paths
      for (FileRecord& r : recs) {
        if (!rnd.OneIn(2)) continue;
        const int64_t week = AcgSummary::WeekOf(r.mtime);
        r.mtime = kNow - static_cast<int64_t>(rnd.Uniform(uint64_t{3} * kWeek));
        merged.AddAttributes(r);
        if (AcgSummary::WeekOf(r.mtime) != week) merged.AddKeywordWeeks(r);
      }
    }
    std::string bytes;
    merged.EncodeTo(&bytes);
    AcgSummary loaded;
    ASSERT_TRUE(loaded.DecodeFrom(bytes).ok());
    ASSERT_TRUE(loaded.keyword_weeks_complete());
    // A keyword, an extension or a name (RequiredToken).
    auto term = [&]() -> std::string {
      static const char* kExts[] = {"c", "h", "gz", "txt", "TXT", "parquet", ".c", "tar.gz"};
      switch (rnd.Uniform(4)) {
        case 0: return std::string("ext=") + kExts[rnd.Uniform(std::size(kExts))];
        case 1: return "name=\"" + gen.RandomName() + "\"";
        default: return std::string("keyword=") + kWords[rnd.Uniform(std::size(kWords))];
      }
    };
    for (int q = 0; q < 40; ++q) {
      std::string text = term();
      if (rnd.OneIn(4)) text += " & " + term();
      text += std::string(" & mtime") + kRel[rnd.Uniform(4)] + kAges[rnd.Uniform(std::size(kAges))];
      if (rnd.OneIn(3)) {
        text += std::string(" & mtime") + kRel[rnd.Uniform(4)] + kAges[rnd.Uniform(std::size(kAges))];
      }
      ASSERT_NO_FATAL_FAILURE(
          CheckAgainstBruteForce(text, recs, loaded, merged, &checked, &pruned));
    }
  }
  EXPECT_GT(pruned, checked / 10);

  // One firefox file of last month and a new file of another name: the keyword filter and the
  // mtime range each admit "a firefox file of this week"; the keyword-week filter does not.
  FileRecord old_fox = gen.NewRecord(FileId{1, 1});
  old_fox.paths = {"/proj/firefox-3/old.c"};
  old_fox.mtime = kNow - 30 * kDay;
  FileRecord new_other = gen.NewRecord(FileId{1, 2});
  new_other.paths = {"/proj/thunderbird/new.c"};
  new_other.mtime = kNow - kDay;
  AcgSummary s;
  s.Add(old_fox);
  s.Add(new_other);
  ParseOptions po;
  po.now_ns = kNow;
  auto recent_fox = Query::Parse("keyword=firefox & mtime<1w", po);
  auto any_fox = Query::Parse("keyword=firefox & mtime<60d", po);
  auto long_range = Query::Parse("keyword=firefox & mtime>35d", po);
  ASSERT_TRUE(recent_fox.ok() && any_fox.ok() && long_range.ok());
  EXPECT_FALSE(s.MayMatch(recent_fox->root()));
  EXPECT_TRUE(s.MayMatch(any_fox->root()));
  // Names and extensions by their tokens: `old` is only last month's, `c` this week's too.
  auto recent_old = Query::Parse("name=old.c & mtime<1w", po);
  auto recent_c = Query::Parse("ext=c & mtime<1w", po);
  ASSERT_TRUE(recent_old.ok() && recent_c.ok());
  EXPECT_FALSE(s.MayMatch(recent_old->root()));
  EXPECT_TRUE(s.MayMatch(recent_c->root()));
  // No firefox file is older than 35 days, but with a file of last year that range spans more
  // weeks than the filter is probed for: not pruned (the filter is a shortcut, not a promise).
  AcgSummary with_ancient = s;
  FileRecord ancient = new_other;
  ancient.mtime = kNow - 300 * kDay;
  with_ancient.Add(ancient);
  EXPECT_FALSE(s.MayMatch(long_range->root()));
  EXPECT_TRUE(with_ancient.MayMatch(long_range->root()));

  // An update that moves the old file's time into this week (same paths) must add its keywords
  // for the new week: AddAttributes alone leaves the filter without them.
  FileRecord touched = old_fox;
  touched.mtime = kNow - kDay / 2;
  AcgSummary attrs_only = s;
  attrs_only.AddAttributes(touched);
  EXPECT_FALSE(attrs_only.MayMatch(recent_fox->root()));
  attrs_only.AddKeywordWeeks(touched);
  EXPECT_TRUE(attrs_only.MayMatch(recent_fox->root()));

  // A summary of layout 3 (before the filter) prunes nothing with it, even as records are
  // added, until it is completed with the keys of every record.
  std::string bytes;
  s.EncodeTo(&bytes);
  std::string v3 = bytes.substr(0, bytes.size() - 1 - AcgSummary::kWeekBloomBytes);
  v3[0] = 3;
  AcgSummary old;
  ASSERT_TRUE(old.DecodeFrom(v3).ok());
  EXPECT_FALSE(old.keyword_weeks_complete());
  EXPECT_TRUE(old.MayMatch(recent_fox->root()));
  old.Add(new_other);
  EXPECT_TRUE(old.MayMatch(recent_fox->root()));
  AcgSummary::WeekBloom keys{};
  for (const FileRecord* r : {&old_fox, &new_other}) {
    for (const std::string& t : PathKeywords(r->paths[0])) {
      AcgSummary::WeekBloomAdd(
          AcgSummary::WeekKey(AcgSummary::TokenHash(t), AcgSummary::WeekOf(r->mtime)), &keys);
    }
  }
  AcgSummary completed = old;
  completed.CompleteKeywordWeeks(keys);
  EXPECT_FALSE(completed.MayMatch(recent_fox->root()));
  EXPECT_TRUE(completed.MayMatch(any_fox->root()));
  // Merged with an incomplete one, it is incomplete again (the other's records are not in it),
  // and the flag survives a round trip.
  completed.Merge(old);
  EXPECT_TRUE(completed.MayMatch(recent_fox->root()));
  bytes.clear();
  completed.EncodeTo(&bytes);
  AcgSummary reloaded;
  ASSERT_TRUE(reloaded.DecodeFrom(bytes).ok());
  EXPECT_FALSE(reloaded.keyword_weeks_complete());
}

TEST(AcgSummaryTest, CommonDirectoryOfOlderLayoutsClaimsNothing) {
  RecordGen gen(1);
  FileRecord r = gen.NewRecord(FileId{1, 1});
  r.paths = {"/proj/firefox/a.c"};
  AcgSummary s;
  s.Add(r);
  EXPECT_EQ(s.common_dir(), "/proj/firefox/");
  EXPECT_TRUE(s.EveryPathHasKeyword("firefox"));
  EXPECT_FALSE(s.EveryPathHasKeyword("a"));  // the file's name is not the directory's
  r.paths = {"/proj/fire/b.c"};  // a rename: the directory narrows
  s.Add(r);
  EXPECT_EQ(s.common_dir(), "/proj/");
  EXPECT_FALSE(s.EveryPathHasKeyword("firefox"));
  EXPECT_FALSE(s.EveryPathHasKeyword("fire"));
  // Layout 2 (without the directory) decodes to "/", which claims nothing and stays "/".
  std::string bytes;
  s.EncodeTo(&bytes);
  std::string v2 =
      bytes.substr(0, bytes.size() - 2 - s.common_dir().size() - 1 - AcgSummary::kWeekBloomBytes);
  v2[0] = 2;
  AcgSummary old;
  ASSERT_TRUE(old.DecodeFrom(v2).ok());
  EXPECT_EQ(old.common_dir(), "/");
  EXPECT_FALSE(old.EveryPathHasKeyword("proj"));
  r.paths = {"/proj/firefox/c.c"};
  old.Add(r);
  EXPECT_EQ(old.common_dir(), "/");
  // A record without a path shares no directory: the first record, as a later one.
  AcgSummary pathless;
  FileRecord bare = gen.NewRecord(FileId{1, 2});
  bare.paths.clear();
  pathless.Add(bare);
  pathless.Add(r);
  EXPECT_EQ(pathless.common_dir(), "/");
  EXPECT_FALSE(pathless.EveryPathHasKeyword("firefox"));
  // A directory that is not one is corrupt, and so is a flag of the filter after it that is
  // neither 0 nor 1.
  const size_t dir_at = bytes.size() - 1 - AcgSummary::kWeekBloomBytes - s.common_dir().size();
  std::string bad = bytes;
  bad[dir_at] = 'p';
  EXPECT_FALSE(AcgSummary().DecodeFrom(bad).ok());
  bad = bytes;
  bad[dir_at - 2] = 3;  // a length that is not the rest's
  EXPECT_FALSE(AcgSummary().DecodeFrom(bad).ok());
  bad = bytes;
  bad[bytes.size() - 1 - AcgSummary::kWeekBloomBytes] = 2;
  EXPECT_FALSE(AcgSummary().DecodeFrom(bad).ok());
  bad = bytes;
  bad.pop_back();  // the filter cut short
  EXPECT_FALSE(AcgSummary().DecodeFrom(bad).ok());
}

// A summary is read from disk: damaged bytes (flipped, cut short, grown) give an error or a
// summary whose common directory is still a directory, never a read outside the bytes (the
// sanitizer build checks that).
TEST(AcgSummaryTest, DamagedBytesDecodeToAnErrorOrASoundSummary) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("PROPELLER_SEED=" + std::to_string(seed));
  RecordGen gen(seed);
  Random& rnd = gen.rnd();
  AcgSummary s;
  FileRecord r = gen.NewRecord(FileId{1, 1});
  r.paths = {"/proj/firefox/src/a.c"};
  s.Add(r);
  std::string good;
  s.EncodeTo(&good);
  int decoded = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string bad = good;
    switch (rnd.Uniform(3)) {
      case 0:  // a few bytes flipped, mostly in the tail where the directory is
        for (int k = 0, n = 1 + static_cast<int>(rnd.Uniform(3)); k < n; ++k) {
          const size_t at =
              rnd.OneIn(2) ? bad.size() - 1 - rnd.Uniform(40) : rnd.Uniform(bad.size());
          bad[at] = static_cast<char>(rnd.Uniform(256));
        }
        break;
      case 1: bad.resize(rnd.Uniform(bad.size())); break;
      default: bad.append(rnd.Uniform(40), static_cast<char>(rnd.Uniform(256))); break;
    }
    AcgSummary loaded;
    if (!loaded.DecodeFrom(bad).ok()) continue;
    ++decoded;
    const std::string& dir = loaded.common_dir();
    ASSERT_TRUE(dir.empty() || (dir.front() == '/' && dir.back() == '/')) << dir;
  }
  EXPECT_GT(decoded, 0);  // flips inside the bounds and the bloom still decode
}

TEST(AcgSummaryTest, RejectsMalformedBytes) {
  AcgSummary s;
  EXPECT_FALSE(s.DecodeFrom("").ok());
  EXPECT_FALSE(s.DecodeFrom(std::string(10, '\x01')).ok());
  std::string good;
  AcgSummary().EncodeTo(&good);
  good[0] = 9;
  EXPECT_FALSE(s.DecodeFrom(good).ok());
  good[0] = 1;  // layout 1 is shorter: a version byte that does not fit the length is corrupt
  EXPECT_FALSE(s.DecodeFrom(good).ok());
  good[0] = 5;  // a later layout is refused with its number, never misread
  Status st = s.DecodeFrom(good);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.ToString().find("ACG summary layout 5 is newer"), std::string::npos)
      << st.ToString();
}

}  // namespace
}  // namespace propeller
