// Engine::SplitAcg (docs/architecture.md §5, the node-side half of a split) and Engine::MergeAcg
// against the brute-force model: the files move, updates addressed to the old ACG follow them (also
// after a restart), every search equals the model before, during and after the move, and a crash at
// each step of it leaves every acknowledged update present and every file in exactly one ACG.
// PROPELLER_SEED=<n> replays a failure.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "indexnode/engine.h"
#include "indexnode/engine_test_util.h"

namespace propeller {
namespace {

using testing::HitPaths;
using testing::kNow;
using testing::Model;
using testing::RecordGen;
using testing::TempDir;

// Joins a thread when the test returns early (a failed ASSERT), so the failure is reported
// instead of std::terminate on a joinable thread.
struct Joiner {
  std::thread* t;
  std::atomic<bool>* stop;
  ~Joiner() {
    if (stop != nullptr) *stop = true;
    if (t->joinable()) t->join();
  }
};

constexpr uint64_t kSource = 7;
constexpr uint64_t kTarget = 9;

std::unique_ptr<Engine> OpenEngine(const std::string& dir, bool background) {
  EngineOptions o;
  o.data_dir = dir;
  o.background_commit = background;
  o.commit_timeout_ns = 2'000'000;  // background commits race with the split
  o.cache_bound_updates = 64;
  o.search_threads = 3;
  o.wal_segment_bytes = 64 << 10;
  auto e = Engine::Open(o);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? std::move(e).value() : nullptr;
}

// A file population in kSource plus edges between its files, mirrored in the model.
struct World {
  explicit World(uint64_t seed) : gen(seed) {}
  RecordGen gen;
  Model model;
  std::vector<FileId> ids;                                // every file ever created
  std::map<std::pair<FileId, FileId>, uint64_t> edges;    // src, dst -> weight
  std::set<FileId> deleted;                               // every file a delete ended

  Update Create() {
    FileId id{1, 1000 + ids.size()};
    ids.push_back(id);
    Update u;
    u.op = UpdateOp::kPut;
    u.acg = kSource;
    u.record = gen.NewRecord(id);
    return u;
  }
  // A random change to an existing file (or a new file, or an edge), addressed to kSource
  // whatever split happened: the route a client with a stale map would use.
  Update Change() {
    Random& rnd = gen.rnd();
    if (ids.empty() || rnd.OneIn(8)) return Create();
    const FileId id = ids[rnd.Uniform(ids.size())];
    Update u;
    u.acg = kSource;
    u.record.id = id;
    const uint64_t kind = rnd.Uniform(10);
    auto it = model.files.find(id);
    if (kind < 2) {
      u.op = UpdateOp::kAddEdge;
      u.edge_dst = ids[rnd.Uniform(ids.size())];
      u.edge_weight = static_cast<uint32_t>(1 + rnd.Uniform(3));
    } else if (kind < 3) {
      u.op = UpdateOp::kDelete;
    } else if (it == model.files.end()) {
      u.op = UpdateOp::kPut;
      u.record = gen.NewRecord(id);
    } else {
      u.op = UpdateOp::kPut;
      u.record = it->second;
      gen.RandomizeAttrs(&u.record);
      if (rnd.OneIn(4)) u.record.paths = {gen.RandomPath()};
      u.record.nlink = static_cast<uint32_t>(u.record.paths.size());
    }
    return u;
  }
  void Acknowledged(const Update& u) {
    if (model.Apply(u)) {
      testing::DropEdgesOf(u.record.id, &edges);
      deleted.insert(u.record.id);
    }
    if (u.op == UpdateOp::kAddEdge) edges[{u.record.id, u.edge_dst}] += u.edge_weight;
  }
};

// Every search equals the model; also checks no file is reported twice.
void ExpectSearchesMatch(Engine* engine, World* w, int queries) {
  for (int q = 0; q < queries; ++q) {
    SearchRequest req;
    req.query = w->gen.RandomQuery();
    req.now_ns = kNow;
    SCOPED_TRACE("query: " + req.query);
    ParseOptions po;
    po.now_ns = kNow;
    Result<Query> parsed = Query::Parse(req.query, po);
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    auto hits = engine->SearchAll(req);
    ASSERT_TRUE(hits.ok()) << hits.status().ToString();
    ASSERT_EQ(HitPaths(*hits), w->model.Search(*parsed, "/"));
  }
}

// Files are in exactly one ACG: the per-ACG counts add up to the model, the moved ones are in
// the target only, and edges went with their source file.
// `after_crash`: a split crashed after its commit point while files were deleted; an edge
// whose end was deleted then may survive in the target (docs/capture.md, "Limits"), so edges
// of deleted files are not compared.
void ExpectPartitioned(Engine* engine, const World& w, const std::set<FileId>& moving,
                       bool after_crash = false) {
  ASSERT_TRUE(engine->CommitAll().ok());
  uint64_t total = 0;
  for (const AcgInfo& a : engine->ListAcgs()) total += a.files;
  EXPECT_EQ(total, w.model.files.size());
  for (const auto& [id, rec] : w.model.files) {
    // Addressed as the file was (kSource, or another ACG): routed when moved.
    Result<FileRecord> got = engine->Get(w.model.acg_of.at(id), id);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(*got, rec);
  }
  std::vector<StoredEdge> in_source, in_target;
  ASSERT_TRUE(engine->ListEdges(kSource, &in_source).ok());
  Status st = engine->ListEdges(kTarget, &in_target);
  ASSERT_TRUE(st.ok() || st.code() == StatusCode::kNotFound) << st.ToString();
  std::map<std::pair<FileId, FileId>, uint64_t> seen;
  for (const StoredEdge& e : in_source) {
    EXPECT_FALSE(moving.count(e.src)) << "edge from a moved file stayed in the source";
    seen[{e.src, e.dst}] += e.weight;
  }
  for (const StoredEdge& e : in_target) {
    EXPECT_TRUE(moving.count(e.src)) << "edge from a file that did not move is in the target";
    seen[{e.src, e.dst}] += e.weight;
  }
  // An ACG drops the edges of the files it deletes that it holds (an edge lives with its
  // source file), so an edge whose ends the split put in different ACGs outlives the delete of
  // its destination (docs/capture.md): only edges within one ACG are compared.
  auto within = [&](const std::map<std::pair<FileId, FileId>, uint64_t>& all) {
    std::map<std::pair<FileId, FileId>, uint64_t> out;
    for (const auto& [key, wgt] : all) {
      if (after_crash && (w.deleted.count(key.first) || w.deleted.count(key.second))) continue;
      if (moving.count(key.first) == moving.count(key.second)) out[key] = wgt;
    }
    return out;
  };
  EXPECT_EQ(within(seen), within(w.edges));
}

// Applies `total` updates to kSource one at a time, the first `creates` of them new files,
// and to the model.
void Populate(Engine* engine, World* w, int total, int creates) {
  for (int i = 0; i < total; ++i) {
    Update u = i < creates ? w->Create() : w->Change();
    ASSERT_TRUE(engine->Apply({&u, 1}).ok());
    w->Acknowledged(u);
  }
}

std::set<FileId> HalfOf(const std::vector<FileId>& ids) {
  std::set<FileId> out;
  for (const FileId& id : ids) {
    if (id.ino % 2 == 0) out.insert(id);
  }
  return out;
}

TEST(EngineSplitTest, MovesFilesRoutesStaleUpdatesAndSurvivesReopen) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("PROPELLER_SEED=" + std::to_string(seed));
  TempDir dir;
  World w(seed);
  auto engine = OpenEngine(dir.path(), /*background=*/false);
  ASSERT_TRUE(engine);
  ASSERT_TRUE(engine->CreateIndex("proj", IndexType::kHash).ok());
  ASSERT_NO_FATAL_FAILURE(Populate(engine.get(), &w, 800, 500));
  const std::set<FileId> moving = HalfOf(w.ids);
  std::vector<FileId> list(moving.begin(), moving.end());
  list.push_back(FileId{1, 999'999});  // not in the source: ignored
  // Bad requests change nothing.
  EXPECT_EQ(engine->SplitAcg(kSource, kSource, list).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(engine->SplitAcg(kSource, 0, list).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(engine->SplitAcg(12345, kTarget, list).code(), StatusCode::kNotFound);

  Result<std::vector<SplitNotice>> notices = engine->UnreportedSplits();
  ASSERT_TRUE(notices.ok());
  EXPECT_TRUE(notices->empty());
  ASSERT_TRUE(engine->SplitAcg(kSource, kTarget, list).ok());
  EXPECT_EQ(engine->SplitAcg(kSource, kTarget, list).code(), StatusCode::kAlreadyExists);
  ExpectPartitioned(engine.get(), w, moving);
  // The split waits to be reported to the cluster, with every id it routes.
  notices = engine->UnreportedSplits();
  ASSERT_TRUE(notices.ok()) << notices.status().ToString();
  ASSERT_EQ(notices->size(), 1u);
  EXPECT_EQ((*notices)[0].source, kSource);
  EXPECT_EQ((*notices)[0].target, kTarget);
  EXPECT_EQ((*notices)[0].files, list);
  size_t moved_live = 0;
  for (const auto& [id, rec] : w.model.files) moved_live += moving.count(id);
  for (const AcgInfo& a : engine->ListAcgs()) {
    if (a.id == kTarget) {
      EXPECT_EQ(a.files, moved_live);
    }
  }
  ASSERT_NO_FATAL_FAILURE(ExpectSearchesMatch(engine.get(), &w, 40));

  // Updates still addressed to the source follow the moved files (new files stay).
  for (int i = 0; i < 300; ++i) {
    Update u = w.Change();
    ASSERT_TRUE(engine->Apply({&u, 1}).ok());
    w.Acknowledged(u);
  }
  std::set<FileId> moved_now = moving;  // files created since stay in the source
  ExpectPartitioned(engine.get(), w, moved_now);
  ASSERT_NO_FATAL_FAILURE(ExpectSearchesMatch(engine.get(), &w, 40));

  // The routes are durable: after a restart, and for updates replayed from the log.
  for (int i = 0; i < 100; ++i) {
    Update u = w.Change();
    ASSERT_TRUE(engine->Apply({&u, 1}).ok());
    w.Acknowledged(u);
  }
  engine->CrashForTesting();  // the last updates are only in the log
  engine.reset();
  engine = OpenEngine(dir.path(), /*background=*/false);
  ASSERT_TRUE(engine);
  ExpectPartitioned(engine.get(), w, moved_now);
  ASSERT_NO_FATAL_FAILURE(ExpectSearchesMatch(engine.get(), &w, 40));
  // Still unreported after the restart; acknowledged, it is gone for good.
  notices = engine->UnreportedSplits();
  ASSERT_TRUE(notices.ok()) << notices.status().ToString();
  ASSERT_EQ(notices->size(), 1u);
  EXPECT_EQ((*notices)[0].files, list);
  ASSERT_TRUE(engine->SplitReported(kSource, kTarget).ok());
  ASSERT_TRUE(engine->SplitReported(kSource, kTarget).ok());  // idempotent
  EXPECT_TRUE(engine->UnreportedSplits()->empty());
  engine.reset();
  engine = OpenEngine(dir.path(), /*background=*/false);
  ASSERT_TRUE(engine);
  EXPECT_TRUE(engine->UnreportedSplits()->empty());
  for (int i = 0; i < 100; ++i) {
    Update u = w.Change();
    ASSERT_TRUE(engine->Apply({&u, 1}).ok());
    w.Acknowledged(u);
  }
  ExpectPartitioned(engine.get(), w, moved_now);
}

// Between the commit point and the clean-up (split_step_hook step 5), the moved files are
// still in the source's LMDB: searches skip them there (the target answers for them), and a
// crash at that point leaves the clean-up to the next open.
TEST(EngineSplitTest, MovedFilesAwaitingRemovalAreNeverAnsweredTwice) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("PROPELLER_SEED=" + std::to_string(seed));
  TempDir dir;
  World w(seed);
  std::unique_ptr<Engine> engine;
  int checks = 0;
  EngineOptions o;
  o.data_dir = dir.path();
  o.background_commit = false;
  o.split_step_hook = [&](int step) {
    if (step != 5) return;
    ++checks;
    ExpectSearchesMatch(engine.get(), &w, 30);
    uint64_t total = 0;
    for (const AcgInfo& a : engine->ListAcgs()) total += a.files;
    EXPECT_GT(total, w.model.files.size()) << "the moved files should still await removal";
  };
  auto opened = Engine::Open(o);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  engine = std::move(opened).value();
  ASSERT_NO_FATAL_FAILURE(Populate(engine.get(), &w, 600, 400));
  const std::set<FileId> moving = HalfOf(w.ids);
  const std::vector<FileId> list(moving.begin(), moving.end());
  ASSERT_TRUE(engine->SplitAcg(kSource, kTarget, list).ok());
  EXPECT_EQ(checks, 1);
  ExpectPartitioned(engine.get(), w, moving);
}

// Two planted groups of files, tightly tied inside and by a few light edges across: the plan
// is one whole group (its cut is at most the planted one), the same for the same seed, and the
// split it feeds leaves the model's answers unchanged.
TEST(EngineSplitTest, PlanSplitFindsThePlantedHalf) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("PROPELLER_SEED=" + std::to_string(seed));
  TempDir dir;
  World w(seed);
  auto engine = OpenEngine(dir.path(), /*background=*/false);
  ASSERT_TRUE(engine);
  Random& rnd = w.gen.rnd();
  constexpr int kGroup = 150;
  std::vector<Update> batch;
  for (int i = 0; i < 2 * kGroup; ++i) batch.push_back(w.Create());
  auto group_of = [&](const FileId& id) { return (id.ino - 1000) < kGroup ? 0 : 1; };
  uint64_t planted_cut = 0;
  for (int e = 0; e < 3000; ++e) {
    const bool across = e % 100 == 0;
    const uint64_t a = rnd.Uniform(kGroup), b = rnd.Uniform(kGroup);
    const int ga = static_cast<int>(rnd.Uniform(2));
    const int gb = across ? 1 - ga : ga;
    Update u;
    u.op = UpdateOp::kAddEdge;
    u.acg = kSource;
    u.record.id = w.ids[static_cast<size_t>(ga * kGroup) + a];
    u.edge_dst = w.ids[static_cast<size_t>(gb * kGroup) + b];
    u.edge_weight = across ? 1 : 5;
    if (u.record.id == u.edge_dst) continue;
    if (across) planted_cut += u.edge_weight;
    batch.push_back(u);
  }
  ASSERT_TRUE(engine->Apply(batch).ok());
  for (const Update& u : batch) w.Acknowledged(u);
  // An edge to a file of another ACG does not count.
  Update other = w.Create();
  other.acg = kSource + 100;
  ASSERT_TRUE(engine->Apply({&other, 1}).ok());
  w.Acknowledged(other);
  Update outside;
  outside.op = UpdateOp::kAddEdge;
  outside.acg = kSource;
  outside.record.id = w.ids[0];
  outside.edge_dst = other.record.id;
  outside.edge_weight = 1000;
  ASSERT_TRUE(engine->Apply({&outside, 1}).ok());
  w.Acknowledged(outside);

  SplitReport report;
  auto plan = engine->PlanSplit(kSource, 0.05, /*seed=*/3, &report);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->size(), static_cast<size_t>(kGroup));
  const int g = group_of((*plan)[0]);
  for (const FileId& id : *plan) EXPECT_EQ(group_of(id), g);
  EXPECT_LE(report.cut_weight, planted_cut);
  EXPECT_EQ(report.vertices, static_cast<uint32_t>(2 * kGroup));
  auto again = engine->PlanSplit(kSource, 0.05, /*seed=*/3);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *plan);
  EXPECT_EQ(engine->PlanSplit(12345).status().code(), StatusCode::kNotFound);

  ASSERT_TRUE(engine->SplitAcg(kSource, kTarget, *plan).ok());
  ExpectPartitioned(engine.get(), w, std::set<FileId>(plan->begin(), plan->end()));
  ASSERT_NO_FATAL_FAILURE(ExpectSearchesMatch(engine.get(), &w, 30));
}

// With a threshold, the engine splits by itself: the ACG grows past it under a writer, the
// background thread splits it (and its halves, while they are above it), asking for ids and
// reporting each split; searches equal the model throughout, and every file stays in exactly
// one ACG.
TEST(EngineSplitTest, SplitsByItselfAboveTheThreshold) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("PROPELLER_SEED=" + std::to_string(seed));
  TempDir dir;
  World w(seed);
  std::mutex mu;
  uint64_t next_id = 100;
  std::map<uint64_t, std::set<FileId>> moved_to;  // target -> files the engine reported
  std::vector<std::pair<uint64_t, uint64_t>> splits;
  EngineOptions o;
  o.data_dir = dir.path();
  o.commit_timeout_ns = 2'000'000;
  o.cache_bound_updates = 64;
  o.split_threshold_files = 400;
  o.split_check_interval_ns = 5'000'000;
  o.split_target_id = [&](uint64_t source) -> Result<uint64_t> {
    std::lock_guard<std::mutex> lock(mu);
    if (next_id == 100 && source != kSource) return Status::Internal("unexpected source");
    return next_id++;
  };
  o.on_split = [&](uint64_t source, uint64_t target, const std::vector<FileId>& moved) {
    std::lock_guard<std::mutex> lock(mu);
    splits.emplace_back(source, target);
    moved_to[target].insert(moved.begin(), moved.end());
  };
  auto opened = Engine::Open(o);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  std::unique_ptr<Engine> engine = std::move(opened).value();
  for (int round = 0; round < 250; ++round) {
    std::vector<Update> batch;
    for (int i = 0; i < 8; ++i) batch.push_back(round < 150 ? w.Create() : w.Change());
    ASSERT_TRUE(engine->Apply(batch).ok());
    for (const Update& u : batch) w.Acknowledged(u);
    if (round % 10 == 0) {
      ASSERT_NO_FATAL_FAILURE(ExpectSearchesMatch(engine.get(), &w, 1));
    }
  }
  // Let the splitter finish whatever is above the threshold: no ACG over it, and every split
  // that took an id has told on_split (which comes after the moved files left the source, so
  // the sizes alone can look final while a split is still finishing).
  for (int wait = 0; wait < 400; ++wait) {
    ASSERT_TRUE(engine->CommitAll().ok());
    bool over = false;
    for (const AcgInfo& a : engine->ListAcgs()) over |= a.files > o.split_threshold_files;
    bool finishing = false;
    {
      std::lock_guard<std::mutex> lock(mu);
      finishing = splits.size() != next_id - 100;
    }
    if (!over && !finishing) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_GE(splits.size(), 2u) << "1,200 files over a 400-file threshold split at least twice";
  uint64_t total = 0;
  for (const AcgInfo& a : engine->ListAcgs()) {
    EXPECT_LE(a.files, o.split_threshold_files) << "ACG " << a.id;
    total += a.files;
  }
  EXPECT_EQ(total, w.model.files.size());
  for (const auto& [id, rec] : w.model.files) {
    Result<FileRecord> got = engine->Get(kSource, id);  // routed, across chained splits
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(*got, rec);
  }
  ASSERT_NO_FATAL_FAILURE(ExpectSearchesMatch(engine.get(), &w, 30));
  // Every split told through on_split is also waiting to be reported, with the same files.
  Result<std::vector<SplitNotice>> notices = engine->UnreportedSplits();
  ASSERT_TRUE(notices.ok()) << notices.status().ToString();
  ASSERT_EQ(notices->size(), splits.size());
  for (const SplitNotice& n : *notices) {
    EXPECT_EQ(std::set<FileId>(n.files.begin(), n.files.end()), moved_to[n.target]);
  }
}

// One thread writes (always to the source) and after every few updates searches and compares
// with the model; meanwhile another thread splits. Background commits run too.
TEST(EngineSplitTest, SearchesEqualTheModelDuringTheSplit) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("PROPELLER_SEED=" + std::to_string(seed));
  TempDir dir;
  World w(seed);
  auto engine = OpenEngine(dir.path(), /*background=*/true);
  ASSERT_TRUE(engine);
  for (int i = 0; i < 3000; ++i) {
    Update u = w.Create();
    ASSERT_TRUE(engine->Apply({&u, 1}).ok());
    w.Acknowledged(u);
  }
  const std::set<FileId> moving = HalfOf(w.ids);
  const std::vector<FileId> list(moving.begin(), moving.end());
  std::atomic<bool> started{false}, done{false};
  Status split_status;
  std::thread splitter([&] {
    started = true;
    split_status = engine->SplitAcg(kSource, kTarget, list);
    done = true;
  });
  Joiner joiner{&splitter, nullptr};
  while (!started) std::this_thread::yield();
  int rounds_during = 0;
  for (int round = 0; round < 400 && !(done && round > 40); ++round) {
    if (!done) ++rounds_during;
    std::vector<Update> batch;
    for (int i = 0; i < 8; ++i) batch.push_back(w.Change());
    ASSERT_TRUE(engine->Apply(batch).ok());
    for (const Update& u : batch) w.Acknowledged(u);
    ASSERT_NO_FATAL_FAILURE(ExpectSearchesMatch(engine.get(), &w, 1));
  }
  splitter.join();
  ASSERT_TRUE(split_status.ok()) << split_status.ToString();
  std::printf("rounds of updates and searches while the split ran: %d\n", rounds_during);
  ExpectPartitioned(engine.get(), w, moving);
  ASSERT_NO_FATAL_FAILURE(ExpectSearchesMatch(engine.get(), &w, 30));
}

// The process dies after each step of the split while a writer keeps updating; after the
// restart every acknowledged update is there and every file is in exactly one ACG — in the
// target when the split committed (step 4), else still in the source.
class EngineSplitCrashTest : public ::testing::TestWithParam<int> {};

TEST_P(EngineSplitCrashTest, EveryFileOnceAndNothingLost) {
  const int step = GetParam();
  const uint64_t seed = TestSeed() + static_cast<uint64_t>(step);
  SCOPED_TRACE("PROPELLER_SEED=" + std::to_string(seed) + " step " + std::to_string(step));
  TempDir dir;
  World w(seed);
  auto engine = OpenEngine(dir.path(), /*background=*/true);
  ASSERT_TRUE(engine);
  ASSERT_NO_FATAL_FAILURE(Populate(engine.get(), &w, 1500, 1200));
  const std::set<FileId> moving = HalfOf(w.ids);
  const std::vector<FileId> list(moving.begin(), moving.end());
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::thread writer([&] {
    while (!stop) {
      std::vector<Update> batch;
      {
        std::lock_guard<std::mutex> lock(mu);
        for (int i = 0; i < 4; ++i) batch.push_back(w.Change());
      }
      Status s = engine->Apply(batch);
      std::lock_guard<std::mutex> lock(mu);
      if (!s.ok()) break;  // the engine "died": these were not acknowledged
      for (const Update& u : batch) w.Acknowledged(u);
    }
  });
  Joiner joiner{&writer, &stop};
  Status s = engine->SplitAcgCrashingForTesting(kSource, kTarget, list, step);
  EXPECT_EQ(s.code(), StatusCode::kAborted) << s.ToString();
  stop = true;
  writer.join();
  engine.reset();
  engine = OpenEngine(dir.path(), /*background=*/false);
  ASSERT_TRUE(engine);
  const bool committed = step >= 4;
  bool target_exists = false;
  for (const AcgInfo& a : engine->ListAcgs()) target_exists |= a.id == kTarget;
  EXPECT_EQ(target_exists, committed);
  Result<std::vector<SplitNotice>> notices = engine->UnreportedSplits();
  ASSERT_TRUE(notices.ok()) << notices.status().ToString();
  EXPECT_EQ(notices->size(), committed ? 1u : 0u);  // a split to report iff it happened
  ExpectPartitioned(engine.get(), w, committed ? moving : std::set<FileId>(), committed);
  ASSERT_NO_FATAL_FAILURE(ExpectSearchesMatch(engine.get(), &w, 30));
  // The split can be done again after an aborted one.
  if (!committed) {
    ASSERT_TRUE(engine->SplitAcg(kSource, kTarget, list).ok());
    ExpectPartitioned(engine.get(), w, moving, /*after_crash=*/true);
    ASSERT_NO_FATAL_FAILURE(ExpectSearchesMatch(engine.get(), &w, 20));
  }
}

INSTANTIATE_TEST_SUITE_P(Steps, EngineSplitCrashTest, ::testing::Values(1, 2, 3, 4),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return "after_step_" + std::to_string(info.param);
                         });

// ---- merges (Engine::MergeAcg) ----------------------------------------------------------------

// kTarget gets `n` files of its own (not in w.ids, so World::Change never addresses them to
// kSource before the merge, which would create them there a second time).
void FillTarget(Engine* engine, World* w, int n) {
  for (int i = 0; i < n; ++i) {
    Update u;
    u.op = UpdateOp::kPut;
    u.acg = kTarget;
    u.record = w->gen.NewRecord(FileId{1, 500'000 + static_cast<uint64_t>(i)});
    ASSERT_TRUE(engine->Apply({&u, 1}).ok());
    w->Acknowledged(u);
  }
}

TEST(EngineMergeTest, MovesEverythingUnderLoadRoutesAndSurvivesACrash) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("PROPELLER_SEED=" + std::to_string(seed));
  TempDir dir;
  World w(seed);
  auto engine = OpenEngine(dir.path(), /*background=*/true);
  ASSERT_TRUE(engine);
  ASSERT_NO_FATAL_FAILURE(Populate(engine.get(), &w, 600, 400));
  ASSERT_NO_FATAL_FAILURE(FillTarget(engine.get(), &w, 150));
  EXPECT_EQ(engine->MergeAcg(kSource, kSource).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(engine->MergeAcg(kSource, 12345).code(), StatusCode::kNotFound);

  // A writer keeps updating through kSource (before the merge: its own files; after: routed)
  // and searching; the merge happens in the middle.
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::string failure;
  std::thread writer([&] {
    for (int n = 0; !stop; ++n) {
      std::vector<Update> batch;
      {
        std::lock_guard<std::mutex> lock(mu);
        for (int i = 0; i < 4; ++i) batch.push_back(w.Change());
      }
      Status s = engine->Apply(batch);
      std::lock_guard<std::mutex> lock(mu);
      if (!s.ok()) {
        failure = s.ToString();
        return;
      }
      for (const Update& u : batch) w.Acknowledged(u);
      if (n % 16 == 0) {
        SearchRequest req;
        req.query = "size>=0";
        req.now_ns = kNow;
        auto hits = engine->SearchAll(req);
        if (!hits.ok() || hits->size() != w.model.files.size()) {
          failure = "a search during the merge found " +
                    (hits.ok() ? std::to_string(hits->size()) : hits.status().ToString()) +
                    " files of " + std::to_string(w.model.files.size());
          return;
        }
      }
    }
  });
  Joiner joiner{&writer, &stop};
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  ASSERT_TRUE(engine->MergeAcg(kSource, kTarget).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  stop = true;
  writer.join();
  ASSERT_EQ(failure, "");

  std::set<FileId> all(w.ids.begin(), w.ids.end());
  ExpectPartitioned(engine.get(), w, all);
  ASSERT_NO_FATAL_FAILURE(ExpectSearchesMatch(engine.get(), &w, 30));
  for (const AcgInfo& a : engine->ListAcgs()) EXPECT_NE(a.id, kSource) << "merged: hidden";
  EXPECT_TRUE(engine->MergeAcg(kSource, kTarget).ok());  // asked again: done already
  EXPECT_EQ(engine->MergeAcg(kTarget, kSource).code(), StatusCode::kInvalidArgument);
  Result<std::vector<SplitNotice>> notices = engine->UnreportedSplits();
  ASSERT_TRUE(notices.ok()) << notices.status().ToString();
  ASSERT_EQ(notices->size(), 1u);
  EXPECT_TRUE((*notices)[0].merged);
  EXPECT_EQ((*notices)[0].source, kSource);
  EXPECT_EQ((*notices)[0].target, kTarget);

  // Updates logged after the merge and lost with the process replay into the target.
  for (int i = 0; i < 200; ++i) {
    Update u = w.Change();
    ASSERT_TRUE(engine->Apply({&u, 1}).ok());
    w.Acknowledged(u);
  }
  engine->CrashForTesting();
  engine.reset();
  engine = OpenEngine(dir.path(), /*background=*/false);
  ASSERT_TRUE(engine);
  all.insert(w.ids.begin(), w.ids.end());
  ExpectPartitioned(engine.get(), w, all);
  ASSERT_NO_FATAL_FAILURE(ExpectSearchesMatch(engine.get(), &w, 30));
  ASSERT_TRUE(engine->UnreportedSplits().ok());
  EXPECT_TRUE((*engine->UnreportedSplits())[0].merged);
  ASSERT_TRUE(engine->SplitReported(kSource, kTarget).ok());
  EXPECT_TRUE(engine->UnreportedSplits()->empty());
}

class EngineMergeCrashTest : public ::testing::TestWithParam<int> {};

// The process dies after the copy (1) or after the commit point (2): after a restart every
// acknowledged update is there, every file in exactly one ACG; an undone merge can be redone.
TEST_P(EngineMergeCrashTest, EveryFileOnceAndNothingLost) {
  const int step = GetParam();
  const uint64_t seed = TestSeed() + static_cast<uint64_t>(step);
  SCOPED_TRACE("PROPELLER_SEED=" + std::to_string(seed) + " step " + std::to_string(step));
  TempDir dir;
  World w(seed);
  auto engine = OpenEngine(dir.path(), /*background=*/true);
  ASSERT_TRUE(engine);
  ASSERT_NO_FATAL_FAILURE(Populate(engine.get(), &w, 500, 300));
  ASSERT_NO_FATAL_FAILURE(FillTarget(engine.get(), &w, 100));
  Status s = engine->MergeAcgCrashingForTesting(kSource, kTarget, step);
  EXPECT_EQ(s.code(), StatusCode::kAborted) << s.ToString();
  engine.reset();
  engine = OpenEngine(dir.path(), /*background=*/false);
  ASSERT_TRUE(engine);
  const bool committed = step >= 2;
  bool source_listed = false;
  for (const AcgInfo& a : engine->ListAcgs()) source_listed |= a.id == kSource;
  EXPECT_EQ(source_listed, !committed);
  const std::set<FileId> all(w.ids.begin(), w.ids.end());
  ExpectPartitioned(engine.get(), w, committed ? all : std::set<FileId>());
  ASSERT_NO_FATAL_FAILURE(ExpectSearchesMatch(engine.get(), &w, 20));
  Result<std::vector<SplitNotice>> notices = engine->UnreportedSplits();
  ASSERT_TRUE(notices.ok()) << notices.status().ToString();
  EXPECT_EQ(notices->size(), committed ? 1u : 0u);
  if (!committed) {
    for (int i = 0; i < 50; ++i) {  // the source is live again
      Update u = w.Change();
      ASSERT_TRUE(engine->Apply({&u, 1}).ok());
      w.Acknowledged(u);
    }
    ASSERT_TRUE(engine->MergeAcg(kSource, kTarget).ok());
    ExpectPartitioned(engine.get(), w, std::set<FileId>(w.ids.begin(), w.ids.end()));
    ASSERT_NO_FATAL_FAILURE(ExpectSearchesMatch(engine.get(), &w, 20));
  }
}

INSTANTIATE_TEST_SUITE_P(Steps, EngineMergeCrashTest, ::testing::Values(1, 2),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return "after_step_" + std::to_string(info.param);
                         });

}  // namespace
}  // namespace propeller
