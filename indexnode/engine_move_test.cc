// Moving an ACG between two engines in bulk (Engine::FreezeAndCopyAcg, AdoptAcg,
// DropMovedAcg, ThawAcg; docs/architecture.md §5), against the brute-force model: the destination
// answers exactly what the source held, nothing acknowledged is lost (updates that arrive during
// the move wait, then get a Redirect), the source never recreates the ACG (not by an update, a
// route or its log's replay), the destination's log replays its own updates into the copy,
// and an interrupted adoption or drop is resolved by Open. PROPELLER_SEED=<n> replays a
// failure.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "common/fault_env.h"
#include "indexnode/engine.h"
#include "indexnode/engine_test_util.h"

namespace propeller {
namespace {

using testing::HitPaths;
using testing::kNow;
using testing::Model;
using testing::RecordGen;
using testing::TempDir;

constexpr uint64_t kMoving = 1;   // starts on A, moves to B
constexpr uint64_t kStaying = 2;  // stays on A
constexpr uint64_t kOther = 3;    // B's own
constexpr uint64_t kNodeB = 42;   // the destination tag A records

// Joins a thread when a test returns early (a failed ASSERT), instead of std::terminate.
struct JoinOnExit {
  std::thread* t;
  ~JoinOnExit() {
    if (t->joinable()) t->join();
  }
};

std::unique_ptr<Engine> OpenEngine(const std::string& dir) {
  EngineOptions o;
  o.data_dir = dir;
  o.background_commit = false;  // the tests decide what is committed when they crash
  o.search_threads = 2;
  auto e = Engine::Open(o);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? std::move(e).value() : nullptr;
}

// The files of each ACG, one model per ACG, and the edges of kMoving.
struct World {
  explicit World(uint64_t seed) : gen(seed) {}
  RecordGen gen;
  std::map<uint64_t, Model> models;
  std::map<uint64_t, std::vector<FileId>> ids;
  std::map<std::pair<FileId, FileId>, uint64_t> edges;  // of kMoving
  uint64_t next_ino = 1000;

  Update Change(uint64_t acg) {
    Random& rnd = gen.rnd();
    std::vector<FileId>& mine = ids[acg];
    Update u;
    u.acg = acg;
    if (mine.empty() || rnd.OneIn(4)) {
      u.op = UpdateOp::kPut;
      u.record = gen.NewRecord(FileId{1, next_ino++});
      if (rnd.OneIn(8)) {  // a directory: it goes to the node's permission table too
        u.record.type = FileType::kDirectory;
        u.record.mode = 040755;
      }
      mine.push_back(u.record.id);
      return u;
    }
    u.record.id = mine[rnd.Uniform(mine.size())];
    const uint64_t kind = rnd.Uniform(10);
    auto it = models[acg].files.find(u.record.id);
    if (kind < 2) {
      u.op = UpdateOp::kAddEdge;
      u.edge_dst = mine[rnd.Uniform(mine.size())];
      u.edge_weight = 1 + rnd.Uniform(3);
    } else if (kind < 3 || it == models[acg].files.end()) {
      u.op = kind < 3 ? UpdateOp::kDelete : UpdateOp::kPut;
      if (u.op == UpdateOp::kPut) u.record = gen.NewRecord(u.record.id);
    } else {
      u.op = UpdateOp::kPut;
      u.record = it->second;
      gen.RandomizeAttrs(&u.record);
    }
    return u;
  }
  void Acknowledged(const Update& u) {
    if (models[u.acg].Apply(u) && u.acg == kMoving) testing::DropEdgesOf(u.record.id, &edges);
    if (u.op == UpdateOp::kAddEdge && u.acg == kMoving) {
      edges[{u.record.id, u.edge_dst}] += u.edge_weight;
    }
  }
  Model Union(std::initializer_list<uint64_t> acgs) {
    Model m;
    for (uint64_t a : acgs) {
      for (const auto& [id, rec] : models[a].files) m.files[id] = rec;
    }
    return m;
  }
};

void ApplySome(Engine* e, World* w, uint64_t acg, int n) {
  for (int i = 0; i < n; ++i) {
    Update u = w->Change(acg);
    Status st = e->Apply({&u, 1});
    ASSERT_TRUE(st.ok()) << st.ToString();
    w->Acknowledged(u);
  }
}

void ExpectSearchesMatch(Engine* e, World* w, const Model& model, int queries) {
  for (int q = 0; q < queries; ++q) {
    SearchRequest req;
    req.query = q == 0 ? "size>=0" : w->gen.RandomQuery();
    req.now_ns = kNow;
    // A random query may name an attribute no update set yet: searched (it matches what the
    // model says), not refused as a typo.
    req.report_unknown_attrs = true;
    SCOPED_TRACE("query: " + req.query);
    ParseOptions po;
    po.now_ns = kNow;
    Result<Query> parsed = Query::Parse(req.query, po);
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    auto hits = e->SearchAll(req);
    ASSERT_TRUE(hits.ok()) << hits.status().ToString();
    ASSERT_EQ(HitPaths(*hits), model.Search(*parsed, "/"));
  }
}

std::vector<uint64_t> AcgIds(Engine* e) {
  std::vector<uint64_t> out;
  for (const AcgInfo& a : e->ListAcgs()) out.push_back(a.id);
  return out;
}

void ExpectMovedEdges(Engine* e, const World& w) {
  std::vector<StoredEdge> edges;
  ASSERT_TRUE(e->ListEdges(kMoving, &edges).ok());
  std::map<std::pair<FileId, FileId>, uint64_t> got;
  for (const StoredEdge& e : edges) got[{e.src, e.dst}] += e.weight;
  EXPECT_EQ(got, w.edges);
}

TEST(EngineMoveTest, MovesAnAcgWithUpdatesWaitingAndNothingLost) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("PROPELLER_SEED=" + std::to_string(seed));
  TempDir dir_a, dir_b;
  World w(seed);
  auto a = OpenEngine(dir_a.path());
  auto b = OpenEngine(dir_b.path());
  ASSERT_TRUE(a && b);
  // A's log runs far ahead of B's: the copy's applied LSN (A's numbering) must not make B's
  // replay skip B's own later updates to it.
  ASSERT_NO_FATAL_FAILURE(ApplySome(a.get(), &w, kMoving, 600));
  ASSERT_NO_FATAL_FAILURE(ApplySome(a.get(), &w, kStaying, 200));
  ASSERT_NO_FATAL_FAILURE(ApplySome(b.get(), &w, kOther, 30));
  // Some of kMoving is still only in the cache and the log: the copy must include it.
  ASSERT_TRUE(a->CommitAll().ok());
  ASSERT_NO_FATAL_FAILURE(ApplySome(a.get(), &w, kMoving, 50));

  const std::string copy = dir_b.path() + "/incoming.mdb";
  ASSERT_TRUE(a->FreezeAndCopyAcg(kMoving, copy).ok());
  EXPECT_EQ(a->FreezeAndCopyAcg(kMoving, copy + "2").code(), StatusCode::kInvalidArgument);

  // An update to the frozen ACG waits; one to another ACG does not.
  std::atomic<bool> waiting_done{false};
  Status waiting_status;
  Update late = w.Change(kMoving);
  std::thread waiter([&] {
    waiting_status = a->Apply({&late, 1});
    waiting_done = true;
  });
  JoinOnExit join_waiter{&waiter};
  ASSERT_NO_FATAL_FAILURE(ApplySome(a.get(), &w, kStaying, 20));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(waiting_done.load()) << "an update to a frozen ACG went through";

  ASSERT_TRUE(b->AdoptAcg(kMoving, copy).ok());
  EXPECT_FALSE(std::filesystem::exists(copy)) << "the copy was renamed into place";
  EXPECT_EQ(b->AdoptAcg(kMoving, copy).code(), StatusCode::kAlreadyExists);
  ASSERT_TRUE(a->DropMovedAcg(kMoving, kNodeB).ok());
  waiter.join();
  EXPECT_EQ(waiting_status.code(), StatusCode::kRedirect) << waiting_status.ToString();
  EXPECT_TRUE(a->DropMovedAcg(kMoving, kNodeB).ok()) << "asked again";
  EXPECT_EQ(a->MovedTo(kMoving), kNodeB);
  EXPECT_EQ(a->MovedTo(kStaying), 0u);

  // A answers for what stayed, B for the moved ACG and its own.
  EXPECT_EQ(AcgIds(a.get()), std::vector<uint64_t>{kStaying});
  EXPECT_EQ(AcgIds(b.get()), (std::vector<uint64_t>{kMoving, kOther}));
  ASSERT_NO_FATAL_FAILURE(ExpectSearchesMatch(a.get(), &w, w.Union({kStaying}), 40));
  ASSERT_NO_FATAL_FAILURE(ExpectSearchesMatch(b.get(), &w, w.Union({kMoving, kOther}), 40));
  ASSERT_NO_FATAL_FAILURE(ExpectMovedEdges(b.get(), w));
  for (const auto& [id, rec] : w.models[kMoving].files) {
    Result<FileRecord> got = b->Get(kMoving, id);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(*got, rec);
    EXPECT_EQ(a->Get(kMoving, id).status().code(), StatusCode::kRedirect);
  }
  // Searches tell a cluster client what moved lately: A did not search kMoving (it went to
  // kNodeB), B did (just adopted); a search of kMoving alone at B is exactly its files.
  {
    SearchRequest all;
    all.query = "size>=0";
    SearchStats sa, sb;
    ASSERT_TRUE(a->SearchAll(all, &sa).ok());
    ASSERT_TRUE(b->SearchAll(all, &sb).ok());
    EXPECT_EQ(sa.moved, (std::vector<std::pair<uint64_t, uint64_t>>{{kMoving, kNodeB}}));
    EXPECT_TRUE(sa.adopted.empty());
    EXPECT_TRUE(sb.moved.empty());
    EXPECT_EQ(sb.adopted, std::vector<uint64_t>{kMoving});
    SearchRequest only = all;
    only.acgs = {kMoving};
    auto hits = b->SearchAll(only, &sb);
    ASSERT_TRUE(hits.ok());
    ParseOptions po;
    po.now_ns = kNow;
    EXPECT_EQ(HitPaths(*hits), w.Union({kMoving}).Search(*Query::Parse("size>=0", po), "/"));
    only.acgs = {kOther};
    hits = a->SearchAll(only, &sa);
    ASSERT_TRUE(hits.ok());
    EXPECT_TRUE(hits->empty());
    EXPECT_TRUE(sa.moved.empty()) << "kMoving was not asked for";
  }
  Update stale = w.Change(kMoving);
  EXPECT_EQ(a->Apply({&stale, 1}).code(), StatusCode::kRedirect);
  std::vector<StoredEdge> edges;
  EXPECT_EQ(a->ListEdges(kMoving, &edges).code(), StatusCode::kRedirect);

  // B takes updates for it; they are in the log only when B "dies" (no search in between:
  // a commit would overwrite the copy's applied LSN anyway).
  ASSERT_NO_FATAL_FAILURE(ApplySome(b.get(), &w, kMoving, 80));
  b->CrashForTesting();
  b.reset();
  b = OpenEngine(dir_b.path());
  ASSERT_TRUE(b);
  ASSERT_NO_FATAL_FAILURE(ExpectSearchesMatch(b.get(), &w, w.Union({kMoving, kOther}), 40));
  ASSERT_NO_FATAL_FAILURE(ExpectMovedEdges(b.get(), w));

  // A "dies" with kMoving's old records still in its log (kStaying's cache holds the log):
  // the replay must not bring the ACG back.
  ASSERT_NO_FATAL_FAILURE(ApplySome(a.get(), &w, kStaying, 10));
  a->CrashForTesting();
  a.reset();
  a = OpenEngine(dir_a.path());
  ASSERT_TRUE(a);
  EXPECT_EQ(AcgIds(a.get()), std::vector<uint64_t>{kStaying});
  EXPECT_EQ(a->MovedTo(kMoving), kNodeB);
  EXPECT_EQ(a->Apply({&stale, 1}).code(), StatusCode::kRedirect);
  ASSERT_NO_FATAL_FAILURE(ExpectSearchesMatch(a.get(), &w, w.Union({kStaying}), 20));
  EXPECT_FALSE(std::filesystem::exists(dir_a.path() + "/acg/" + std::to_string(kMoving)));
}

// Writers keep updating the ACG while it is frozen and thawed again and again: once
// FreezeAndCopyAcg returned, nothing may reach its cache until the thaw (an update that had
// passed the frozen check before the mark must have been waited for and be in the copy).
TEST(EngineMoveTest, NoUpdateSlipsPastAFreezeUnderConcurrentWriters) {
  TempDir dir;
  auto a = OpenEngine(dir.path());
  ASSERT_TRUE(a);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> next{1000}, applied{0};
  {
    // The ACG exists before the first freeze, however late the writers start.
    RecordGen gen(99);
    Update u;
    u.op = UpdateOp::kPut;
    u.acg = kMoving;
    u.record = gen.NewRecord(FileId{1, next.fetch_add(1)});
    ASSERT_TRUE(a->Apply({&u, 1}).ok());
  }
  std::vector<std::thread> writers;
  struct Join {  // also when an assertion returns early
    std::atomic<bool>* stop;
    std::vector<std::thread>* threads;
    ~Join() {
      *stop = true;
      for (std::thread& t : *threads) {
        if (t.joinable()) t.join();
      }
    }
  } join{&stop, &writers};
  for (int t = 0; t < 2; ++t) {
    writers.emplace_back([&, t] {
      RecordGen gen(100 + t);
      while (!stop.load()) {
        Update u;
        u.op = UpdateOp::kPut;
        u.acg = kMoving;
        u.record = gen.NewRecord(FileId{1, next.fetch_add(1)});
        if (a->Apply({&u, 1}).ok()) applied.fetch_add(1);
      }
    });
  }
  auto cached = [&]() -> uint64_t {
    for (const AcgInfo& info : a->ListAcgs()) {
      if (info.id == kMoving) return info.cached_updates;
    }
    return 0;
  };
  const std::string copy = dir.path() + "/copy.mdb";
  for (int round = 0; round < 40; ++round) {
    std::this_thread::sleep_for(std::chrono::microseconds(500));
    Status st = a->FreezeAndCopyAcg(kMoving, copy);
    ASSERT_TRUE(st.ok()) << st.ToString();
    std::this_thread::sleep_for(std::chrono::microseconds(500));
    EXPECT_EQ(cached(), 0u) << "an update reached the cache of a frozen ACG (round " << round
                            << ")";
    ASSERT_TRUE(a->ThawAcg(kMoving).ok());
  }
  stop = true;
  for (std::thread& t : writers) t.join();
  EXPECT_GT(applied.load(), 0u);
}

TEST(EngineMoveTest, ThawLetsWaitingUpdatesThroughAndTheCopyIsTheFrozenState) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("PROPELLER_SEED=" + std::to_string(seed));
  TempDir dir_a, dir_c;
  World w(seed);
  auto a = OpenEngine(dir_a.path());
  auto c = OpenEngine(dir_c.path());
  ASSERT_TRUE(a && c);
  ASSERT_NO_FATAL_FAILURE(ApplySome(a.get(), &w, kMoving, 300));
  const Model frozen = w.Union({kMoving});
  const std::string copy = dir_a.path() + "/copy.mdb";
  ASSERT_TRUE(a->FreezeAndCopyAcg(kMoving, copy).ok());
  Update late = w.Change(kMoving);
  Status late_status;
  std::thread waiter([&] { late_status = a->Apply({&late, 1}); });
  JoinOnExit join_waiter{&waiter};
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_TRUE(a->ThawAcg(kMoving).ok());
  waiter.join();
  ASSERT_TRUE(late_status.ok()) << late_status.ToString();
  w.Acknowledged(late);
  EXPECT_EQ(a->ThawAcg(kMoving).code(), StatusCode::kInvalidArgument);
  ASSERT_NO_FATAL_FAILURE(ExpectSearchesMatch(a.get(), &w, w.Union({kMoving}), 30));
  // Dropping needs a freeze first.
  EXPECT_EQ(a->DropMovedAcg(kMoving, kNodeB).code(), StatusCode::kInvalidArgument);

  // The copy holds exactly the state at the freeze (a third engine adopts it, frozen: its
  // updates wait until the thaw).
  ASSERT_TRUE(c->AdoptAcg(kMoving, copy, /*frozen=*/true).ok());
  ASSERT_NO_FATAL_FAILURE(ExpectSearchesMatch(c.get(), &w, frozen, 30));
  std::atomic<bool> applied{false};
  Update next = w.Change(kMoving);
  std::thread later([&] {
    EXPECT_TRUE(c->Apply({&next, 1}).ok());
    applied = true;
  });
  JoinOnExit join_later{&later};
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(applied.load());
  ASSERT_TRUE(c->ThawAcg(kMoving).ok());
  later.join();
  EXPECT_TRUE(applied.load());
}

TEST(EngineMoveTest, RefusesWhatCannotMoveAndRoutesFollowAMovedTarget) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("PROPELLER_SEED=" + std::to_string(seed));
  TempDir dir_a, dir_b;
  World w(seed);
  auto a = OpenEngine(dir_a.path());
  auto b = OpenEngine(dir_b.path());
  ASSERT_TRUE(a && b);
  ASSERT_NO_FATAL_FAILURE(ApplySome(a.get(), &w, kMoving, 200));
  EXPECT_EQ(a->FreezeAndCopyAcg(99, dir_a.path() + "/x").code(), StatusCode::kNotFound);

  // Split kMoving: the source gets routes (it cannot move); the target can, once reported.
  constexpr uint64_t kHalf = 5;
  std::vector<FileId> half;
  for (const FileId& id : w.ids[kMoving]) {
    if (id.ino % 2 == 0) half.push_back(id);
  }
  ASSERT_TRUE(a->SplitAcg(kMoving, kHalf, half).ok());
  EXPECT_EQ(a->FreezeAndCopyAcg(kMoving, dir_a.path() + "/x").code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(a->FreezeAndCopyAcg(kHalf, dir_a.path() + "/x").code(),
            StatusCode::kInvalidArgument)
      << "its split is not reported yet";
  ASSERT_TRUE(a->SplitReported(kMoving, kHalf).ok());

  const std::string copy = dir_b.path() + "/half.mdb";
  ASSERT_TRUE(a->FreezeAndCopyAcg(kHalf, copy).ok());
  // A frozen ACG is not split or merged meanwhile.
  EXPECT_EQ(a->SplitAcg(kHalf, 77, half).code(), StatusCode::kUnavailable);
  EXPECT_EQ(a->MergeAcg(kHalf, kMoving).code(), StatusCode::kUnavailable);
  ASSERT_TRUE(b->AdoptAcg(kHalf, copy).ok());
  ASSERT_TRUE(a->DropMovedAcg(kHalf, kNodeB).ok());

  // Between them the two engines answer for every file exactly once.
  Model all = w.Union({kMoving});
  std::vector<std::string> got;
  for (Engine* e : {a.get(), b.get()}) {
    SearchRequest req;
    req.query = "size>=0";
    auto hits = e->SearchAll(req);
    ASSERT_TRUE(hits.ok());
    for (const std::string& p : HitPaths(*hits)) got.push_back(p);
  }
  std::sort(got.begin(), got.end());
  ParseOptions po;
  po.now_ns = kNow;
  EXPECT_EQ(got, all.Search(*Query::Parse("size>=0", po), "/"));

  // An update addressed to the split's source for a file that went to the moved half follows
  // the route and gets the Redirect; one for a file that stayed is applied.
  for (const FileId& id : w.ids[kMoving]) {
    auto it = w.models[kMoving].files.find(id);
    if (it == w.models[kMoving].files.end()) continue;
    Update u;
    u.op = UpdateOp::kPut;
    u.acg = kMoving;
    u.record = it->second;
    const Status st = a->Apply({&u, 1});
    if (id.ino % 2 == 0) {
      EXPECT_EQ(st.code(), StatusCode::kRedirect) << st.ToString();
    } else {
      EXPECT_TRUE(st.ok()) << st.ToString();
    }
  }
}

TEST(EngineMoveTest, OpenResolvesAnInterruptedAdoptionOrDrop) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("PROPELLER_SEED=" + std::to_string(seed));
  TempDir dir_a, dir_b;
  World w(seed);
  auto a = OpenEngine(dir_a.path());
  auto b = OpenEngine(dir_b.path());
  ASSERT_TRUE(a && b);
  ASSERT_NO_FATAL_FAILURE(ApplySome(a.get(), &w, kMoving, 200));
  ASSERT_NO_FATAL_FAILURE(ApplySome(b.get(), &w, kOther, 20));
  const std::string copy = dir_a.path() + "/copy.mdb";
  const std::string spare = dir_a.path() + "/spare.mdb";
  ASSERT_TRUE(a->FreezeAndCopyAcg(kMoving, copy).ok());
  std::filesystem::copy_file(copy, spare);
  ASSERT_TRUE(b->AdoptAcg(kMoving, copy).ok());
  ASSERT_TRUE(a->DropMovedAcg(kMoving, kNodeB).ok());

  // B: a crash before the adoption's commit point (the marker still there) and a staging
  // directory left behind: both go at Open; B's own ACG stays.
  const std::string acg_b = dir_b.path() + "/acg/";
  { std::ofstream(acg_b + std::to_string(kMoving) + "/ADOPTED"); }
  std::filesystem::create_directories(acg_b + "8.adopt");
  b->CrashForTesting();
  b.reset();
  b = OpenEngine(dir_b.path());
  ASSERT_TRUE(b);
  EXPECT_EQ(AcgIds(b.get()), std::vector<uint64_t>{kOther});
  EXPECT_FALSE(std::filesystem::exists(acg_b + "8.adopt"));
  ASSERT_NO_FATAL_FAILURE(ExpectSearchesMatch(b.get(), &w, w.Union({kOther}), 20));

  // A: a crash after the drop's commit point but before the directory went.
  const std::string acg_a = dir_a.path() + "/acg/" + std::to_string(kMoving);
  std::filesystem::create_directories(acg_a);
  std::filesystem::copy_file(spare, acg_a + "/data.mdb");
  a->CrashForTesting();
  a.reset();
  a = OpenEngine(dir_a.path());
  ASSERT_TRUE(a);
  EXPECT_TRUE(AcgIds(a.get()).empty());
  EXPECT_FALSE(std::filesystem::exists(acg_a));
  EXPECT_EQ(a->MovedTo(kMoving), kNodeB);

  // The ACG can come back to a node it left.
  ASSERT_TRUE(a->AdoptAcg(kMoving, spare).ok());
  EXPECT_EQ(a->MovedTo(kMoving), 0u);
  ASSERT_NO_FATAL_FAILURE(ExpectSearchesMatch(a.get(), &w, w.Union({kMoving}), 20));
  a.reset();
  a = OpenEngine(dir_a.path());
  ASSERT_TRUE(a);
  EXPECT_EQ(a->MovedTo(kMoving), 0u);
  ASSERT_NO_FATAL_FAILURE(ExpectSearchesMatch(a.get(), &w, w.Union({kMoving}), 20));

  // A damaged record of moved ACGs is reported, not ignored.
  a.reset();
  { std::ofstream(dir_a.path() + "/moved") << "PMV1\n5 6\ncrc 00000000\n"; }
  EngineOptions o;
  o.data_dir = dir_a.path();
  EXPECT_EQ(Engine::Open(o).status().code(), StatusCode::kCorruption);
}

// Moves go through the Env seam: a device error while the destination places the copy, or
// while the source removes what moved, fails the step with the error — nothing half-adopted
// is served, nothing is lost — and the step succeeds once the device works again.
TEST(EngineMoveTest, DeviceErrorsDuringAMoveFailCleanlyAndTheMoveCanBeRetried) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("PROPELLER_SEED=" + std::to_string(seed));
  TempDir dir_a, dir_b;
  World w(seed);
  FaultInjectionEnv env_a(Env::Default()), env_b(Env::Default());
  auto open = [](const std::string& dir, Env* env) {
    EngineOptions o;
    o.data_dir = dir;
    o.env = env;
    o.background_commit = false;
    // No periodic log sync inside a fault window: the faults are for the move's own I/O (a
    // sync the timer started then failed, and the next search saw it, under ASan).
    o.group_commit_interval_ns = 3'600'000'000'000;
    auto e = Engine::Open(o);
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    return e.ok() ? std::move(e).value() : nullptr;
  };
  auto a = open(dir_a.path(), &env_a);
  auto b = open(dir_b.path(), &env_b);
  ASSERT_TRUE(a && b);
  ASSERT_NO_FATAL_FAILURE(ApplySome(a.get(), &w, kMoving, 150));
  ASSERT_NO_FATAL_FAILURE(ApplySome(b.get(), &w, kOther, 20));
  const std::string copy = dir_a.path() + "/copy.mdb";
  ASSERT_TRUE(a->FreezeAndCopyAcg(kMoving, copy).ok());

  env_b.SetTransientFault(EIO);
  Status s = b->AdoptAcg(kMoving, copy);
  env_b.ClearTransientFault();
  EXPECT_EQ(s.code(), StatusCode::kIOError) << s.ToString();
  EXPECT_EQ(AcgIds(b.get()), std::vector<uint64_t>{kOther});
  EXPECT_TRUE(std::filesystem::exists(copy)) << "the sender's copy must survive a failed adoption";
  ASSERT_NO_FATAL_FAILURE(ExpectSearchesMatch(b.get(), &w, w.Union({kOther}), 5));

  ASSERT_TRUE(b->AdoptAcg(kMoving, copy).ok());
  ASSERT_NO_FATAL_FAILURE(ExpectSearchesMatch(b.get(), &w, w.Union({kOther, kMoving}), 20));

  // The source's drop: the directory removal fails, the move stands (recorded first) and the
  // leftover goes at the next Open.
  env_a.SetTransientFault(EIO, 1.0, 1, /*syncs_too=*/false);
  Status d = a->DropMovedAcg(kMoving, kNodeB);
  env_a.ClearTransientFault();
  if (d.ok()) {
    EXPECT_EQ(a->MovedTo(kMoving), kNodeB);
    a.reset();
    a = open(dir_a.path(), &env_a);
    ASSERT_TRUE(a);
    EXPECT_TRUE(AcgIds(a.get()).empty());
    EXPECT_FALSE(std::filesystem::exists(dir_a.path() + "/acg/" + std::to_string(kMoving)));
    EXPECT_EQ(a->MovedTo(kMoving), kNodeB);
  } else {
    EXPECT_EQ(d.code(), StatusCode::kIOError) << d.ToString();
    ASSERT_TRUE(a->DropMovedAcg(kMoving, kNodeB).ok());
  }
}

}  // namespace
}  // namespace propeller
