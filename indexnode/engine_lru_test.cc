// The cache of open ACGs (docs/architecture.md §6, acg.h "Open and closed"): the whole engine
// against the brute-force model with at most one or two ACGs holding hash tables (or a 1-byte
// bound), so nearly every search that probes a user hash index unloads another ACG's tables —
// commits, searches (including ones the K-D trees answer from memory), Get, ListEdges, user indexes
// created, dropped and re-typed, clean reopens and process crashes. PROPELLER_SEED=<n>
// replays a failure.
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <tuple>

#include "indexnode/engine.h"
#include "indexnode/engine_test_util.h"

namespace propeller {
namespace {

using testing::HitPaths;
using testing::kNow;
using testing::Model;
using testing::RecordGen;
using testing::TempDir;

constexpr int kSearchThreads = 3;
constexpr uint64_t kAcgs = 8;

struct LruParams {
  size_t max_open_acgs;
  uint64_t max_open_acg_bytes;
  Durability durability;
  bool background;
};

EngineOptions Options(const std::string& dir, const LruParams& p) {
  EngineOptions o;
  o.data_dir = dir;
  o.durability = p.durability;
  o.background_commit = p.background;
  o.commit_timeout_ns = 2'000'000;  // background commits race with searches
  o.cache_bound_updates = 48;
  o.search_threads = kSearchThreads;
  o.wal_segment_bytes = 64 << 10;
  o.max_open_acgs = p.max_open_acgs;
  o.max_open_acg_bytes = p.max_open_acg_bytes;
  return o;
}

std::unique_ptr<Engine> OpenEngine(const std::string& dir, const LruParams& p) {
  auto e = Engine::Open(Options(dir, p));
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? std::move(e).value() : nullptr;
}

using EdgeModel = std::map<uint64_t, std::map<std::pair<FileId, FileId>, uint64_t>>;

class EngineLruTest : public ::testing::TestWithParam<LruParams> {};

TEST_P(EngineLruTest, RandomStreamMatchesModel) {
  const LruParams p = GetParam();
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("PROPELLER_SEED=" + std::to_string(seed));
  TempDir dir;
  RecordGen gen(seed);
  Random& rnd = gen.rnd();
  Model model;
  EdgeModel edges;
  auto engine = OpenEngine(dir.path(), p);
  ASSERT_TRUE(engine);
  // User indexes come and go during the stream (while most ACGs are closed); "note" is also
  // re-created with the other type.
  std::map<std::string, IndexType> user_indexes;
  auto toggle_index = [&](const std::string& name, IndexType type) {
    if (user_indexes.count(name)) {
      ASSERT_TRUE(engine->DropIndex(name).ok()) << name;
      user_indexes.erase(name);
    } else {
      Status s = engine->CreateIndex(name, type);
      ASSERT_TRUE(s.ok()) << name << ": " << s.ToString();
      user_indexes[name] = type;
    }
  };
  toggle_index("proj", IndexType::kHash);

  uint64_t next_ino = 1;
  uint64_t queries = 0, gets = 0, answered_closed = 0, max_seen_open = 0;
  uint64_t unloads = 0;  // hash tables unloaded for the bounds, summed over the engine's reopens
  const int steps = p.durability == Durability::kSync ? 450 : 1000;
  for (int step = 0; step < steps; ++step) {
    std::vector<Update> batch;
    const int n = rnd.OneIn(4) ? static_cast<int>(rnd.Uniform(30)) + 1 : 1;
    for (int i = 0; i < n; ++i) {
      Update u;
      const uint64_t kind = model.files.empty() ? 0 : rnd.Uniform(12);
      if (kind <= 3) {  // create
        u.op = UpdateOp::kPut;
        u.acg = 1 + rnd.Uniform(kAcgs);
        u.record = gen.NewRecord(FileId{static_cast<uint32_t>(1 + rnd.Uniform(2)), next_ino++});
      } else if (kind == 11) {  // an access-causality edge between two files of one ACG
        auto a = model.files.begin();
        std::advance(a, static_cast<long>(rnd.Uniform(model.files.size())));
        u.op = UpdateOp::kAddEdge;
        u.acg = model.acg_of[a->first];
        u.record.id = a->first;
        u.edge_dst = FileId{1, 1 + rnd.Uniform(next_ino)};
        u.edge_weight = 1 + static_cast<uint32_t>(rnd.Uniform(5));
      } else {
        auto it = model.files.begin();
        std::advance(it, static_cast<long>(rnd.Uniform(model.files.size())));
        u.acg = model.acg_of[it->first];
        u.record = it->second;
        if (kind <= 5) {  // attribute change
          u.op = UpdateOp::kPut;
          gen.RandomizeAttrs(&u.record);
        } else if (kind == 6) {  // rename
          u.op = UpdateOp::kPut;
          u.record.paths = {gen.RandomPath()};
        } else if (kind == 7) {
          u.op = UpdateOp::kDelete;
        } else if (kind <= 9) {
          u.op = UpdateOp::kSetAttrs;
          u.record.attrs.clear();
          u.record.attrs["prio"] = static_cast<int64_t>(rnd.Uniform(10));
          u.record.attrs["note"] = static_cast<int64_t>(rnd.Uniform(3));
        } else {
          u.op = UpdateOp::kRemoveAttrs;
          u.record.attrs.clear();
          u.record.attrs["proj"] = int64_t{0};
        }
      }
      batch.push_back(u);
      // Later updates of this batch may refer to the file (e.g. delete after create).
      if (model.Apply(u)) testing::DropEdgesOf(u.record.id, &edges[u.acg]);
      if (u.op == UpdateOp::kAddEdge) {
        edges[u.acg][{u.record.id, u.edge_dst}] += u.edge_weight;
      }
    }
    ASSERT_TRUE(engine->Apply(batch).ok());

    if (rnd.OneIn(3)) {
      const std::string text = gen.RandomQuery();
      const std::string scope = rnd.OneIn(4) ? gen.RandomDir() : "/";
      ParseOptions po;
      po.now_ns = kNow;
      auto q = Query::Parse(text, po);
      ASSERT_TRUE(q.ok()) << text;
      SearchRequest req;
      req.query = text;
      req.scope = scope;
      req.now_ns = kNow;
      SearchStats stats;
      auto hits = engine->SearchAll(req, &stats);
      ASSERT_TRUE(hits.ok()) << text << ": " << hits.status().ToString();
      ASSERT_EQ(HitPaths(*hits), model.Search(*q, scope))
          << "step " << step << " query '" << text << "' scope " << scope;
      answered_closed += stats.acgs_answered_closed;
      ++queries;
    }
    if (rnd.OneIn(12)) {  // Get of a live or a deleted file
      FileId id{static_cast<uint32_t>(1 + rnd.Uniform(2)), 1 + rnd.Uniform(next_ino)};
      const uint64_t acg = model.acg_of.count(id) ? model.acg_of[id] : 1 + rnd.Uniform(kAcgs);
      auto got = engine->Get(acg, id);
      auto it = model.files.find(id);
      if (it != model.files.end() && model.acg_of[id] == acg) {
        ASSERT_TRUE(got.ok()) << got.status().ToString();
        ASSERT_EQ(*got, it->second);
      } else {
        ASSERT_FALSE(got.ok());
        // ACGs are created by their first update; an unknown one is NotFound too.
        ASSERT_EQ(got.status().code(), StatusCode::kNotFound);
      }
      ++gets;
    }
    if (rnd.OneIn(25)) {
      const uint64_t acg = 1 + rnd.Uniform(kAcgs);
      std::vector<StoredEdge> got;
      Status s = engine->ListEdges(acg, &got);
      if (s.code() == StatusCode::kNotFound) {
        ASSERT_TRUE(edges[acg].empty());
      } else {
        ASSERT_TRUE(s.ok()) << s.ToString();
        std::vector<StoredEdge> want;
        for (const auto& [key, w] : edges[acg]) {
          want.push_back(StoredEdge{key.first, key.second, w});
        }
        ASSERT_EQ(got, want) << "ACG " << acg;
      }
    }
    if (rnd.OneIn(60)) {
      static const char* kNames[] = {"proj", "prio", "note"};
      const std::string name = kNames[rnd.Uniform(3)];
      toggle_index(name, rnd.OneIn(2) ? IndexType::kBTree : IndexType::kHash);
    }
    if (rnd.OneIn(100)) {
      ASSERT_TRUE(engine->CommitAll().ok());
    }
    EngineStats st = engine->Stats();
    max_seen_open = std::max(max_seen_open, st.open_acgs);
    if (!p.background) {
      // Without a committer nothing runs between calls, and every call leaves the cache
      // within its bounds (1 byte: every ACG closed, or open with no hash
      // table loaded).
      ASSERT_LE(st.loaded_acgs, p.max_open_acgs) << "step " << step;
      if (p.max_open_acg_bytes != 0) {
        ASSERT_LE(st.open_acg_bytes, p.max_open_acg_bytes) << "step " << step;
      }
    }
    if (rnd.OneIn(400)) {  // clean close and reopen
      unloads += engine->Stats().acg_unloads;
      engine.reset();
      engine = OpenEngine(dir.path(), p);
      ASSERT_TRUE(engine);
    } else if (rnd.OneIn(400)) {  // the process dies: every acknowledged update survives
      unloads += engine->Stats().acg_unloads;
      engine->CrashForTesting();
      engine.reset();
      engine = OpenEngine(dir.path(), p);
      ASSERT_TRUE(engine);
    }
  }
  const EngineStats st = engine->Stats();
  unloads += st.acg_unloads;
  // The bound really was exercised: hash tables were unloaded and loaded again over and over.
  EXPECT_GT(unloads, 20u);
  EXPECT_GT(queries, static_cast<uint64_t>(steps / 5));
  EXPECT_GT(gets, 0u);
  std::printf("queries %llu (ACGs ruled out from memory: %llu), gets %llu, unloads %llu, "
              "most open at once %llu\n",
              static_cast<unsigned long long>(queries),
              static_cast<unsigned long long>(answered_closed),
              static_cast<unsigned long long>(gets),
              static_cast<unsigned long long>(unloads),
              static_cast<unsigned long long>(max_seen_open));
  // Every record is readable through Get as the model has it.
  for (const auto& [id, rec] : model.files) {
    auto got = engine->Get(model.acg_of[id], id);
    ASSERT_TRUE(got.ok());
    EXPECT_EQ(*got, rec);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Bounds, EngineLruTest,
    ::testing::Values(LruParams{2, 0, Durability::kDefault, false},
                      LruParams{1, 0, Durability::kDefault, true},
                      LruParams{64, 1, Durability::kDefault, false},  // the byte bound alone
                      LruParams{2, 0, Durability::kSync, true}),
    [](const auto& info) {
      const LruParams& p = info.param;
      return std::string(DurabilityName(p.durability)) + (p.background ? "_background" : "_manual") +
             "_open" + std::to_string(p.max_open_acgs) + "_bytes" +
             std::to_string(p.max_open_acg_bytes);
    });

// A closed ACG whose K-D tree has no point in the query's box is answered without opening it,
// also where its min/max summary cannot rule it out.
TEST(EngineLruTest, ClosedAcgsAnsweredByTheirKdTree) {
  TempDir dir;
  LruParams p{1, 0, Durability::kDefault, false};
  auto engine = OpenEngine(dir.path(), p);
  ASSERT_TRUE(engine);
  RecordGen gen(TestSeed());
  std::vector<Update> batch;
  for (uint64_t acg = 1; acg <= 4; ++acg) {
    for (uint64_t i = 0; i < 50; ++i) {
      Update u;
      u.acg = acg;
      u.record = gen.NewRecord(FileId{1, acg * 1000 + i});
      u.record.size = acg * 1000 + 2 * i;  // ACG k holds the even sizes of [1000k, 1000k + 98]
      batch.push_back(u);
    }
  }
  ASSERT_TRUE(engine->Apply(batch).ok());
  ASSERT_TRUE(engine->CommitAll().ok());
  SearchRequest req;
  req.now_ns = kNow;
  req.query = "size>=10";  // loads every K-D tree (the first search of each ACG)
  auto hits = engine->SearchAll(req);
  ASSERT_TRUE(hits.ok());
  EXPECT_EQ(hits->size(), 200u);
  SearchStats stats;
  req.query = "size>=4000 & size<=4098";  // the summaries rule out ACGs 1-3
  hits = engine->SearchAll(req, &stats);
  ASSERT_TRUE(hits.ok());
  EXPECT_EQ(hits->size(), 50u);
  EXPECT_EQ(stats.acgs_skipped, 3u);
  // Odd sizes inside ACGs 1-3's spans: only their K-D trees know there is no such file.
  req.query = "size=1001 | size=2001 | size=3001";
  hits = engine->SearchAll(req, &stats);
  ASSERT_TRUE(hits.ok());
  EXPECT_EQ(hits->size(), 0u);
  EXPECT_EQ(stats.acgs_skipped, 1u);
  EXPECT_GE(stats.acgs_answered_closed, 2u);
  req.query = "size=1002 | size=3004";
  hits = engine->SearchAll(req, &stats);
  ASSERT_TRUE(hits.ok());
  EXPECT_EQ(hits->size(), 2u);
  EXPECT_EQ(engine->Stats().loaded_acgs, 0u);  // no hash table was needed
}

// 0 means unbounded: nothing is ever closed.
TEST(EngineLruTest, UnboundedCacheKeepsEveryAcgOpen) {
  TempDir dir;
  LruParams p{0, 0, Durability::kDefault, false};
  auto engine = OpenEngine(dir.path(), p);
  ASSERT_TRUE(engine);
  RecordGen gen(TestSeed());
  std::vector<Update> batch;
  for (uint64_t acg = 1; acg <= 5; ++acg) {
    Update u;
    u.acg = acg;
    u.record = gen.NewRecord(FileId{1, acg});
    batch.push_back(u);
  }
  ASSERT_TRUE(engine->Apply(batch).ok());
  ASSERT_TRUE(engine->CommitAll().ok());
  EXPECT_EQ(engine->Stats().open_acgs, 5u);
}

// Under a descriptor limit of `soft`/`hard`, an engine that may keep 1,000 ACGs open opens
// kMany, commits and searches them all, and then holds `open` of them open. Runs in a child
// process (the limit is process-wide). Exits 0 when all went well, else prints what failed
// and exits 1.
[[noreturn]] void RunUnderFileLimit(rlim_t soft, rlim_t hard, uint64_t want_open) {
  auto fail = [](const std::string& what) {
    std::fprintf(stderr, "%s\n", what.c_str());
    std::_Exit(1);
  };
  rlimit rl{soft, hard};
  if (setrlimit(RLIMIT_NOFILE, &rl) != 0) fail("setrlimit failed");
  TempDir dir;
  auto engine = OpenEngine(dir.path(), LruParams{1000, 0, Durability::kDefault, false});
  if (!engine) fail("open failed");
  RecordGen gen(TestSeed());
  std::vector<Update> batch;
  constexpr uint64_t kMany = 400;
  for (uint64_t acg = 1; acg <= kMany; ++acg) {
    Update u;
    u.acg = acg;
    u.record = gen.NewRecord(FileId{1, acg});
    batch.push_back(u);
  }
  Status s = engine->Apply(batch);
  if (s.ok()) s = engine->CommitAll();
  if (!s.ok()) fail("apply: " + s.ToString());
  SearchRequest req;
  req.query = "size>=0";
  req.now_ns = kNow;
  auto hits = engine->SearchAll(req);
  if (!hits.ok()) fail("search: " + hits.status().ToString());
  if (hits->size() != kMany) fail("hits " + std::to_string(hits->size()));
  const uint64_t open = engine->Stats().open_acgs;
  if (open != want_open) fail("open ACGs " + std::to_string(open));
  std::_Exit(0);
}

// The ACGs hold no descriptors of their own (the store's few environments hold them all): under
// a hard limit of 64 descriptors, 400 ACGs open, commit, answer and all stay open. (When each
// ACG was its own LMDB environment, 3 descriptors each, the bound fell to 10.)
TEST(EngineLruDeathTest, ADescriptorLimitDoesNotBoundTheAcgs) {
  EXPECT_EXIT(RunUnderFileLimit(64, 64, 400), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace propeller
