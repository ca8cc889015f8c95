// The whole query path (WAL, caches, commits, every index structure, the planner, summaries,
// verification) against a brute-force model on seeded random operation streams, including
// across clean reopens. PROPELLER_SEED=<n> replays a failure.
#include <gtest/gtest.h>

#include "indexnode/engine.h"
#include "indexnode/engine_test_util.h"

namespace propeller {
namespace {

using testing::HitPaths;
using testing::kNow;
using testing::Model;
using testing::RecordGen;
using testing::TempDir;

struct Params {
  Durability durability;
  bool background;
  // > 0: at most this many live files, so each file gets many updates in one cache and a
  // commit must reduce them (Acg::ApplyTaken applies only a file's last kPut/kDelete and what
  // follows it) to exactly the state that applying them one by one gives.
  size_t max_live = 0;
  // The ACGs files are spread over. Thousands of small ACGs share the store's few
  // environments (indexnode/store.h): every key range must stay apart, also while the cache
  // of open ACGs (max_open_acgs, lowered with them) closes and reopens them.
  uint64_t acgs = 6;
};

class EngineRandomTest : public ::testing::TestWithParam<Params> {};

std::unique_ptr<Engine> OpenEngine(const std::string& dir, const Params& p) {
  EngineOptions o;
  o.data_dir = dir;
  o.durability = p.durability;
  o.background_commit = p.background;
  o.commit_timeout_ns = 2'000'000;  // 2 ms: background commits race with searches
  o.cache_bound_updates = p.max_live > 0 ? 400 : 64;
  o.search_threads = 3;
  o.wal_segment_bytes = 64 << 10;  // many segments, so truncation is exercised
  if (p.acgs > 100) {
    o.store_shards = 2;
    o.max_open_acgs = 64;
  }
  auto e = Engine::Open(o);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? std::move(e).value() : nullptr;
}

TEST_P(EngineRandomTest, MatchesBruteForceAcrossReopens) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("PROPELLER_SEED=" + std::to_string(seed));
  TempDir dir;
  RecordGen gen(seed);
  Random& rnd = gen.rnd();
  Model model;
  auto engine = OpenEngine(dir.path(), GetParam());
  ASSERT_TRUE(engine);
  ASSERT_TRUE(engine->CreateIndex("proj", IndexType::kHash).ok());
  ASSERT_TRUE(engine->CreateIndex("prio", IndexType::kBTree).ok());

  uint64_t next_ino = 1;
  std::vector<FileId> live;
  // kSync pays an fsync per batch: fewer steps keep the test under ~10 s.
  const int steps = GetParam().durability == Durability::kSync ? 1200 : 2500;
  int queries = 0;
  for (int step = 0; step < steps; ++step) {
    std::vector<Update> batch;
    const int n = rnd.OneIn(5) ? static_cast<int>(rnd.Uniform(40)) + 1 : 1;
    for (int i = 0; i < n; ++i) {
      Update u;
      uint64_t kind = live.empty() ? 0 : rnd.Uniform(10);
      const size_t max_live = GetParam().max_live;
      if (max_live > 0 && kind <= 3 && live.size() >= max_live) kind = 4 + rnd.Uniform(6);
      if (kind <= 3) {  // create
        FileId id{static_cast<uint32_t>(1 + rnd.Uniform(2)), next_ino++};
        u.op = UpdateOp::kPut;
        u.acg = 1 + rnd.Uniform(GetParam().acgs);
        u.record = gen.NewRecord(id);
        live.push_back(id);
      } else {
        FileId id = live[rnd.Uniform(live.size())];
        auto it = model.files.find(id);
        if (it == model.files.end()) continue;
        u.acg = model.acg_of[id];
        u.record = it->second;
        if (kind == 4) {  // attribute change (close after write, chmod, utimens …)
          u.op = UpdateOp::kPut;
          gen.RandomizeAttrs(&u.record);
        } else if (kind == 5) {  // rename
          u.op = UpdateOp::kPut;
          u.record.paths = {gen.RandomPath()};
        } else if (kind == 6) {  // hard link
          u.op = UpdateOp::kPut;
          u.record.paths.push_back(gen.RandomPath());
          std::sort(u.record.paths.begin(), u.record.paths.end());
          u.record.paths.erase(std::unique(u.record.paths.begin(), u.record.paths.end()),
                               u.record.paths.end());
          u.record.nlink = static_cast<uint32_t>(u.record.paths.size());
        } else if (kind == 7) {
          u.op = UpdateOp::kDelete;
          live.erase(std::find(live.begin(), live.end(), id));
        } else if (kind == 8) {
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
    }
    ASSERT_TRUE(engine->Apply(batch).ok());
    for (const Update& u : batch) model.Apply(u);

    if (rnd.OneIn(4)) {
      const std::string text = gen.RandomQuery();
      const std::string scope = rnd.OneIn(3) ? gen.RandomDir() : "/";
      ParseOptions po;
      po.now_ns = kNow;
      auto q = Query::Parse(text, po);
      ASSERT_TRUE(q.ok()) << text << ": " << q.status().ToString();
      SearchRequest req;
      req.query = text;
      req.scope = scope;
      req.now_ns = kNow;
      if (rnd.OneIn(3)) {
        // Sorted and limited: the exact order (ties broken by path) and the first N.
        static const char* kKeys[] = {"size", "mtime", "ctime", "atime", "uid", "gid", "path",
                                      "name"};
        req.sort_by = kKeys[rnd.Uniform(std::size(kKeys))];
        req.descending = rnd.OneIn(2);
        req.limit = rnd.OneIn(2) ? 0 : 1 + rnd.Uniform(20);
      } else if (rnd.OneIn(4)) {
        req.limit = 1 + rnd.Uniform(5);  // unsorted: any `limit` of the matches
      }
      auto hits = engine->SearchAll(req);
      ASSERT_TRUE(hits.ok()) << text << ": " << hits.status().ToString();
      if (req.sort_by.empty() && req.limit != 0) {
        std::vector<std::string> all = model.Search(*q, scope), got = HitPaths(*hits);
        ASSERT_EQ(got.size(), std::min<size_t>(req.limit, all.size())) << text;
        ASSERT_TRUE(std::includes(all.begin(), all.end(), got.begin(), got.end())) << text;
      } else if (req.sort_by.empty()) {
        ASSERT_EQ(HitPaths(*hits), model.Search(*q, scope))
            << "step " << step << " query '" << text << "' scope " << scope;
      } else {
        std::vector<std::string> expected =
            model.SearchSorted(*q, scope, req.sort_by, req.descending, req.limit);
        std::vector<std::string> got;
        for (const SearchHit& h : *hits) got.push_back(h.path);
        ASSERT_EQ(got, expected) << "step " << step << " query '" << text << "' sorted by "
                                 << req.sort_by << (req.descending ? " desc" : "")
                                 << " limit " << req.limit;
      }
      ++queries;
    }
    if (rnd.OneIn(200)) {
      ASSERT_TRUE(engine->CommitAll().ok());
    }
    if (rnd.OneIn(500)) {  // clean close and reopen: replay + reloaded in-memory structures
      engine.reset();
      engine = OpenEngine(dir.path(), GetParam());
      ASSERT_TRUE(engine);
    }
  }
  EXPECT_GT(queries, steps / 6);
  // Every record is readable through Get as the model has it.
  for (const auto& [id, rec] : model.files) {
    auto got = engine->Get(model.acg_of[id], id);
    ASSERT_TRUE(got.ok());
    EXPECT_EQ(*got, rec);
  }
}

// A keyword with a K-D box, in ACGs where the keyword is in every path, in a fifth and in a
// twentieth of them: the planner keeps a keyword's candidates in the box by a search of the box
// when they are many and by a lookup each when they are few (acg_search.cc: kBoxSearchShare),
// and first tries the box with the keyword's tags from memory. All agree with the model, also
// after updates and deletes leave dead points in the tree and renames change only the tags.
TEST(EngineKeywordBoxTest, DenseAndSparseKeywordsAgreeWithBruteForce) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("PROPELLER_SEED=" + std::to_string(seed));
  TempDir dir;
  RecordGen gen(seed);
  Random& rnd = gen.rnd();
  Model model;
  auto engine = OpenEngine(dir.path(), Params{Durability::kDefault, false});
  ASSERT_TRUE(engine);
  constexpr uint64_t kEvery[] = {1, 5, 20};  // ACG a + 1: firefox in one path of kEvery[a]
  std::vector<std::pair<uint64_t, FileId>> files;
  uint64_t ino = 1;
  std::vector<Update> batch;
  for (uint64_t a = 0; a < std::size(kEvery); ++a) {
    for (int i = 0; i < 600; ++i) {
      Update u;
      u.op = UpdateOp::kPut;
      u.acg = a + 1;
      u.record = gen.NewRecord(FileId{1, ino++});
      u.record.paths = {"/acg" + std::to_string(a) + (i % kEvery[a] == 0 ? "/firefox" : "/fox") +
                        "/f" + std::to_string(i) + ".c"};
      files.emplace_back(u.acg, u.record.id);
      batch.push_back(std::move(u));
    }
  }
  ASSERT_TRUE(engine->Apply(batch).ok());
  for (const Update& u : batch) model.Apply(u);
  const char* kQueries[] = {
      "keyword=firefox & mtime<1d",       "keyword=firefox & size>1m",
      "keyword=firefox & mtime<3d & uid=1001", "keyword=firefox & size<=1k & mtime>=2h",
      "ext=c & mtime<36h",                "keyword=firefox & size>1073741831",
      "keyword=firefox & mtime<=1w",      "keyword=c & keyword=firefox & atime<2h"};
  auto check = [&](const char* when) {
    for (const char* text : kQueries) {
      ParseOptions po;
      po.now_ns = kNow;
      auto q = Query::Parse(text, po);
      ASSERT_TRUE(q.ok()) << text;
      SearchRequest req;
      req.query = text;
      req.now_ns = kNow;
      auto hits = engine->SearchAll(req);
      ASSERT_TRUE(hits.ok()) << text << ": " << hits.status().ToString();
      ASSERT_EQ(HitPaths(*hits), model.Search(*q, "/")) << when << ": " << text;
    }
  };
  check("loaded");
  ASSERT_TRUE(engine->CommitAll().ok());
  check("committed");
  for (int round = 0; round < 3; ++round) {
    batch.clear();
    for (int k = 0; k < 300; ++k) {
      const auto& [acg, id] = files[rnd.Uniform(files.size())];
      auto it = model.files.find(id);
      if (it == model.files.end()) continue;
      Update u;
      u.acg = acg;
      u.record = it->second;
      if (rnd.OneIn(6)) {
        u.op = UpdateOp::kDelete;
      } else {
        u.op = UpdateOp::kPut;
        // A quarter keep their attributes: a rename alone changes only the K-D tree's tags
        // of the file (the keywords of its paths), in place.
        if (!rnd.OneIn(4)) gen.RandomizeAttrs(&u.record);
        // Renames within the ACG: out of the directory every path of ACG 1 was under (its
        // summary then stops saying that every path holds `firefox`), or into it.
        if (rnd.OneIn(8)) {
          u.record.paths = {"/acg" + std::to_string(acg - 1) +
                            (rnd.OneIn(2) ? "/firefox" : "/fox") + "/r" +
                            std::to_string(u.record.id.ino) + ".c"};
        }
      }
      model.Apply(u);
      batch.push_back(std::move(u));
    }
    ASSERT_TRUE(engine->Apply(batch).ok());
    check("cached updates");
    ASSERT_TRUE(engine->CommitAll().ok());
    check("committed updates");
  }
  engine.reset();
  engine = OpenEngine(dir.path(), Params{Durability::kDefault, false});
  ASSERT_TRUE(engine);
  check("reopened");
}

INSTANTIATE_TEST_SUITE_P(Modes, EngineRandomTest,
                         ::testing::Values(Params{Durability::kDefault, true},
                                           Params{Durability::kDefault, false},
                                           Params{Durability::kSync, false},
                                           Params{Durability::kDefault, false, 12},
                                           Params{Durability::kDefault, true, 0, 3000}),
                         [](const auto& info) {
                           return std::string(DurabilityName(info.param.durability)) +
                                  (info.param.background ? "_background" : "_manual") +
                                  (info.param.max_live > 0 ? "_churn" : "") +
                                  (info.param.acgs > 100 ? "_3000acgs" : "");
                         });

}  // namespace
}  // namespace propeller
