// Engine API edge cases and bad input: every malformed option, update, query, scope, sort key
// and index request gets a clear error and leaves the engine working and its data unchanged.
#include "indexnode/engine.h"

#include <gtest/gtest.h>
#include <lmdb.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <cerrno>

#include "indexnode/engine_test_util.h"
#include "schemas/keys.h"

namespace propeller {
namespace {

using testing::kNow;
using testing::TempDir;

Update Put(uint64_t acg, uint64_t ino, std::vector<std::string> paths, uint64_t size = 10) {
  Update u;
  u.acg = acg;
  u.record.id = FileId{1, ino};
  u.record.paths = std::move(paths);
  u.record.size = size;
  return u;
}

// EngineOptions::commit_hook: the commits of ACG `acg` fail as an I/O error would while
// *failing is set.
std::function<Status(uint64_t)> FailCommitsOf(uint64_t acg, const std::atomic<bool>* failing) {
  return [acg, failing](uint64_t id) -> Status {
    return id == acg && failing->load() ? Status::IOError("simulated commit", EIO)
                                        : Status::OK();
  };
}

class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    options_.data_dir = dir_.path();
    auto e = Engine::Open(options_);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    engine_ = std::move(e).value();
    Update u = Put(1, 1, {"/a/x.c"});
    ASSERT_TRUE(engine_->Apply({&u, 1}).ok());
  }
  size_t Count(const std::string& query) {
    SearchRequest r;
    r.query = query;
    r.now_ns = kNow;
    auto hits = engine_->SearchAll(r);
    EXPECT_TRUE(hits.ok()) << hits.status().ToString();
    return hits.ok() ? hits->size() : 0;
  }

  TempDir dir_;
  EngineOptions options_;
  std::unique_ptr<Engine> engine_;
};

TEST_F(EngineTest, RejectsBadOptions) {
  EngineOptions o;
  EXPECT_EQ(Engine::Open(o).status().code(), StatusCode::kInvalidArgument);  // no data dir
  TempDir other;
  o.data_dir = other.path();
  o.wal_segment_bytes = 10;
  EXPECT_EQ(Engine::Open(o).status().code(), StatusCode::kInvalidArgument);
  o.wal_segment_bytes = 1 << 20;
  o.group_commit_interval_ns = 0;
  EXPECT_EQ(Engine::Open(o).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(EngineTest, RejectsBadUpdatesAtomically) {
  std::vector<Update> bad = {Put(1, 2, {"/ok"}), Put(0, 3, {"/acg-zero"})};
  EXPECT_EQ(engine_->Apply(bad).code(), StatusCode::kInvalidArgument);
  bad = {Put(1, 2, {"/ok"}), Put(1, 3, {"relative/path"})};
  EXPECT_EQ(engine_->Apply(bad).code(), StatusCode::kInvalidArgument);
  bad = {Put(1, 2, {"/ok"}), Put(1, 3, {"/b", "/a"})};  // unsorted hard-link paths
  EXPECT_EQ(engine_->Apply(bad).code(), StatusCode::kInvalidArgument);
  bad = {Put(1, 2, {"/ok"}), Put(1, 3, {})};
  EXPECT_EQ(engine_->Apply(bad).code(), StatusCode::kInvalidArgument);
  bad = {Put(1, 2, {"/a/../etc"})};
  EXPECT_EQ(engine_->Apply(bad).code(), StatusCode::kInvalidArgument);
  Update weird = Put(1, 4, {"/w"});
  weird.op = static_cast<UpdateOp>(99);
  EXPECT_EQ(engine_->Apply({&weird, 1}).code(), StatusCode::kInvalidArgument);
  // Nothing of the rejected batches was applied.
  EXPECT_EQ(Count("size>=0"), 1u);
}

TEST_F(EngineTest, RejectsBadSearches) {
  SearchRequest r;
  r.query = "size>>1m";
  Status s = engine_->SearchAll(r).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("error at 6"), std::string::npos) << s.ToString();
  r.query = "size>1";
  r.scope = "not/absolute";
  EXPECT_EQ(engine_->SearchAll(r).status().code(), StatusCode::kInvalidArgument);
  r.scope = "/";
  r.sort_by = "colour";
  EXPECT_EQ(engine_->SearchAll(r).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Count("size>1"), 1u);
}

TEST_F(EngineTest, IndexManagementErrorsAndPersistence) {
  EXPECT_EQ(engine_->CreateIndex("path", IndexType::kBTree).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(engine_->CreateIndex("Bad Name", IndexType::kHash).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(engine_->CreateIndex("size", IndexType::kHash).code(), StatusCode::kInvalidArgument);
  // Nothing would feed a user K-D tree: not offered.
  EXPECT_EQ(engine_->CreateIndex("depth", IndexType::kKdTree).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(engine_->DropIndex("nosuch").code(), StatusCode::kNotFound);
  EXPECT_EQ(engine_->DropIndex("keyword").code(), StatusCode::kInvalidArgument);
  // A user index is built for existing records and survives a reopen.
  Update u = Put(1, 5, {"/p"});
  u.record.attrs["project"] = std::string("alpha");
  ASSERT_TRUE(engine_->Apply({&u, 1}).ok());
  ASSERT_TRUE(engine_->CreateIndex("project", IndexType::kHash).ok());
  EXPECT_EQ(engine_->CreateIndex("project", IndexType::kHash).code(),
            StatusCode::kAlreadyExists);
  EXPECT_EQ(Count("project=alpha"), 1u);
  engine_.reset();
  engine_ = std::move(Engine::Open(options_)).value();
  bool found = false;
  for (const IndexInfo& i : engine_->ListIndexes()) {
    found = found || (i.name == "project" && i.type == IndexType::kHash && !i.builtin);
  }
  EXPECT_TRUE(found);
  EXPECT_EQ(Count("project=alpha"), 1u);
  ASSERT_TRUE(engine_->DropIndex("project").ok());
  EXPECT_EQ(Count("project=alpha"), 1u) << "without the index the attribute is still searchable";
}

TEST_F(EngineTest, UnknownAttributesAreTyposNotEmptyAnswers) {
  auto error_of = [&](const std::string& query) {
    SearchRequest r;
    r.query = query;
    r.now_ns = kNow;
    Result<std::vector<SearchHit>> hits = engine_->SearchAll(r);
    return hits.ok() ? std::string("OK") : hits.status().message();
  };
  const std::string tail =
      "; a user attribute exists once `propeller attr set` gave it to a file or `propeller "
      "index create` made it an index";
  EXPECT_EQ(error_of("sise>1m"), "error at 1: unknown attribute 'sise' (did you mean size?)" +
                                     tail);
  EXPECT_EQ(error_of("name=x.c | colour=red"), "error at 12: unknown attribute 'colour'" + tail);
  // Attributes exist once a file has one (set or put), or once an index of the name does.
  Update u = Put(1, 5, {"/p"});
  u.record.attrs["project"] = std::string("alpha");
  ASSERT_TRUE(engine_->Apply({&u, 1}).ok());
  Update set;
  set.op = UpdateOp::kSetAttrs;
  set.acg = 1;
  set.record.id = FileId{1, 1};
  set.record.attrs["stage"] = int64_t{3};
  ASSERT_TRUE(engine_->Apply({&set, 1}).ok());
  ASSERT_TRUE(engine_->CreateIndex("colour", IndexType::kHash).ok());
  EXPECT_EQ(Count("project=alpha"), 1u);
  EXPECT_EQ(Count("stage=3"), 1u);
  EXPECT_EQ(Count("colour=red"), 0u);
  EXPECT_EQ(error_of("projet=alpha"),
            "error at 1: unknown attribute 'projet' (did you mean project?)" + tail);
  // A node of a cluster reports them instead (another node may know them) and searches.
  SearchRequest r;
  r.query = "sise>1m | name=x.c";
  r.report_unknown_attrs = true;
  SearchStats stats;
  Result<std::vector<SearchHit>> hits = engine_->SearchAll(r, &stats);
  ASSERT_TRUE(hits.ok()) << hits.status().ToString();
  EXPECT_EQ(hits->size(), 1u);
  EXPECT_EQ(stats.unknown_attrs, std::vector<std::string>{"sise"});
  // Built-in names are never user attributes: refused when set, so never silently unmatched.
  for (const char* builtin : {"size", "perm", "user", "iname", "path"}) {
    Update bad = set;
    bad.record.attrs = {{builtin, int64_t{7}}};
    EXPECT_EQ(engine_->Apply({&bad, 1}).code(), StatusCode::kInvalidArgument) << builtin;
    Update bad_put = Put(1, 9, {"/q"});
    bad_put.record.attrs = {{builtin, int64_t{7}}};
    EXPECT_EQ(engine_->Apply({&bad_put, 1}).code(), StatusCode::kInvalidArgument) << builtin;
  }
  // The names survive a reopen.
  engine_.reset();
  engine_ = std::move(Engine::Open(options_)).value();
  EXPECT_EQ(Count("stage=3"), 1u);
  EXPECT_EQ(error_of("sise>1m").rfind("error at 1: unknown attribute 'sise'", 0), 0u);
}

TEST_F(EngineTest, DataWithoutTheListOfAttributeNamesTakesEveryNameAsKnown) {
  // Written before the list existed (or the list is damaged): the old, lenient behaviour,
  // and the engine opens.
  for (const char* content : {"", "garbage\n"}) {
    engine_.reset();
    const std::string list = dir_.path() + "/attrs";
    if (*content == '\0') {
      ASSERT_EQ(::unlink(list.c_str()), 0);
    } else {
      ASSERT_TRUE(WriteFileAtomically(Env::Default(), list, content).ok());
    }
    auto e = Engine::Open(options_);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    engine_ = std::move(e).value();
    EXPECT_EQ(Count("sise>1m"), 0u) << content;
    EXPECT_EQ(Count("size>1"), 1u) << content;
  }
}

TEST_F(EngineTest, EdgesAccumulateAndGetSeesUncommittedUpdates) {
  Update e;
  e.op = UpdateOp::kAddEdge;
  e.acg = 1;
  e.record.id = FileId{1, 1};
  e.edge_dst = FileId{1, 2};
  e.edge_weight = 2;
  ASSERT_TRUE(engine_->Apply({&e, 1}).ok());
  ASSERT_TRUE(engine_->Apply({&e, 1}).ok());
  std::vector<StoredEdge> edges;
  ASSERT_TRUE(engine_->ListEdges(1, &edges).ok());
  ASSERT_EQ(edges.size(), 1u);
  EXPECT_EQ(edges[0].weight, 4u);
  Update u = Put(1, 1, {"/a/x.c"}, 99);
  ASSERT_TRUE(engine_->Apply({&u, 1}).ok());
  auto got = engine_->Get(1, FileId{1, 1});
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->size, 99u);
  EXPECT_EQ(engine_->Get(1, FileId{1, 77}).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(engine_->Get(42, FileId{1, 1}).status().code(), StatusCode::kNotFound);
}

// Identity (docs/capture.md "Identity"): a kPut with another inode generation than the stored
// record's is a new file under the same number — the old one's edges go, wherever they came
// in the log, those captured with the new generation stay; a kPut read without a generation
// keeps the one the file has (stored, or given earlier in the same commit); an edge added
// with another generation of an end replaces the old one's weight instead of adding to it.
TEST_F(EngineTest, AnotherInodeGenerationIsANewFile) {
  auto put = [](uint64_t ino, std::string path, uint32_t generation) {
    Update u = Put(1, ino, {std::move(path)});
    u.record.inode_generation = generation;
    return u;
  };
  auto edge = [](uint64_t src, uint32_t src_gen, uint64_t dst, uint32_t dst_gen, uint32_t w) {
    Update e;
    e.op = UpdateOp::kAddEdge;
    e.acg = 1;
    e.record.id = FileId{1, src};
    e.record.inode_generation = src_gen;
    e.edge_dst = FileId{1, dst};
    e.edge_dst_generation = dst_gen;
    e.edge_weight = w;
    return e;
  };
  auto edges = [&]() {
    std::vector<StoredEdge> out;
    EXPECT_TRUE(engine_->ListEdges(1, &out).ok());
    return out;
  };
  auto generation = [&](uint64_t ino) {
    auto r = engine_->Get(1, FileId{1, ino});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->inode_generation : ~0u;
  };
  for (bool same_commit : {false, true}) {
    SCOPED_TRACE(same_commit ? "all in one commit" : "committed step by step");
    const uint64_t base = same_commit ? 100 : 10;  // src, dst, other
    const uint64_t src = base, dst = base + 1, other = base + 2;
    std::vector<Update> steps = {
        put(src, "/s" + std::to_string(base), 1), put(dst, "/d" + std::to_string(base), 5),
        put(other, "/o" + std::to_string(base), 9), edge(src, 1, dst, 5, 3),
        edge(dst, 5, other, 9, 2),
        // dst's number now names another file (its delete was not seen): generation 6.
        put(dst, "/e" + std::to_string(base), 6),
        // An edge captured for the new file stays.
        edge(src, 1, dst, 6, 1)};
    if (same_commit) {
      ASSERT_TRUE(engine_->Apply(steps).ok());
    } else {
      for (Update& u : steps) {
        ASSERT_TRUE(engine_->Apply({&u, 1}).ok());
        ASSERT_TRUE(engine_->CommitAll().ok());
      }
    }
    std::vector<StoredEdge> want = {StoredEdge{FileId{1, src}, FileId{1, dst}, 1, 1, 6}};
    std::vector<StoredEdge> got;
    for (const StoredEdge& e : edges()) {
      if (e.src.ino >= base && e.src.ino < base + 3) got.push_back(e);
    }
    EXPECT_EQ(got, want);
    EXPECT_EQ(generation(dst), 6u);
    // Read by name (no generation): the file keeps 6; no edge goes.
    Update chmod = put(dst, "/e" + std::to_string(base), 0);
    chmod.record.mode = 0600;
    ASSERT_TRUE(engine_->Apply({&chmod, 1}).ok());
    EXPECT_EQ(generation(dst), 6u);
    EXPECT_EQ(edges().size(), same_commit ? 2u : 1u);
  }
  // Within one commit a put without a generation keeps the one an earlier put gave (a
  // create, then a chmod read by name).
  std::vector<Update> create_then_chmod = {put(50, "/c", 42), put(50, "/c", 0)};
  ASSERT_TRUE(engine_->Apply(create_then_chmod).ok());
  EXPECT_EQ(generation(50), 42u);
  // An edge of another generation of an end replaces the stored one; one of the same adds.
  std::vector<Update> es = {put(60, "/p", 3), edge(60, 3, 61, 7, 4), edge(60, 3, 61, 7, 1)};
  ASSERT_TRUE(engine_->Apply(es).ok());
  Update renewed = edge(60, 3, 61, 8, 2);
  ASSERT_TRUE(engine_->Apply({&renewed, 1}).ok());
  bool found = false;
  for (const StoredEdge& e : edges()) {
    if (e.src.ino != 60) continue;
    found = true;
    EXPECT_EQ(e.weight, 2u);
    EXPECT_EQ(e.dst_generation, 8u);
  }
  EXPECT_TRUE(found);
  // Survives a reopen.
  engine_.reset();
  engine_ = std::move(Engine::Open(options_)).value();
  EXPECT_EQ(generation(50), 42u);
  EXPECT_EQ(generation(10 + 1), 6u);
}

// A delete that raced with the reuse of the inode number (common/record.h DeleteApplies): it
// carries the unlinked path and the ctime seen before the unlink, and spares the new file of
// that number, whether the new file's put was committed before it or arrives in the same
// commit; it still removes the old file's record, and a stale one of an older ctime.
TEST_F(EngineTest, ConditionalDeletesSpareANewFileOfTheSameNumber) {
  auto get = [&](uint64_t ino) { return engine_->Get(1, FileId{1, ino}); };
  auto del = [](uint64_t ino, std::string path, int64_t ctime) {
    Update d;
    d.op = UpdateOp::kDelete;
    d.acg = 1;
    d.record.id = FileId{1, ino};
    d.record.paths = {std::move(path)};
    d.record.ctime = ctime;
    return d;
  };
  for (bool same_commit : {false, true}) {
    SCOPED_TRACE(same_commit ? "put and delete in one commit" : "put committed first");
    Update old_file = Put(1, 5, {"/a/old"});
    old_file.record.ctime = 100;
    ASSERT_TRUE(engine_->Apply({&old_file, 1}).ok());
    ASSERT_TRUE(engine_->CommitAll().ok());
    Update new_file = Put(1, 5, {"/b/new"});  // inode 5 reused elsewhere, later
    new_file.record.ctime = 200;
    const Update late = del(5, "/a/old", 100);
    if (same_commit) {
      ASSERT_TRUE(engine_->Apply(std::vector<Update>{new_file, late}).ok());
    } else {
      ASSERT_TRUE(engine_->Apply({&new_file, 1}).ok());
      ASSERT_TRUE(engine_->CommitAll().ok());
      ASSERT_TRUE(engine_->Apply({&late, 1}).ok());
    }
    ASSERT_TRUE(engine_->CommitAll().ok());
    ASSERT_TRUE(get(5).ok()) << "the new file's record was deleted";
    EXPECT_EQ(get(5)->paths, std::vector<std::string>{"/b/new"});
    EXPECT_EQ(Count("name=new"), 1u);
    // The new file's own delete, and an unconditional one, remove it.
    const Update own = del(5, "/b/new", 200);
    ASSERT_TRUE(engine_->Apply({&own, 1}).ok());
    EXPECT_EQ(get(5).status().code(), StatusCode::kNotFound);
    EXPECT_EQ(Count("name=new"), 0u);
  }
  // The old file's path gone from the index (renamed behind the mount's back), its ctime
  // older: the delete still removes the stale record.
  Update stale = Put(1, 6, {"/c/renamed"});
  stale.record.ctime = 100;
  ASSERT_TRUE(engine_->Apply({&stale, 1}).ok());
  const Update d = del(6, "/c/original", 150);
  ASSERT_TRUE(engine_->Apply({&d, 1}).ok());
  EXPECT_EQ(get(6).status().code(), StatusCode::kNotFound);
  // Survives a restart: the condition is in the log too.
  Update again = Put(1, 7, {"/d/new"});
  again.record.ctime = 300;
  ASSERT_TRUE(engine_->Apply({&again, 1}).ok());
  const Update racing = del(7, "/d/old", 250);
  ASSERT_TRUE(engine_->Apply({&racing, 1}).ok());
  engine_->CrashForTesting();
  engine_.reset();
  auto e = Engine::Open(options_);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  engine_ = std::move(e).value();
  EXPECT_TRUE(get(7).ok());
}

// EngineStats counts ACG commits and the updates they took (what a commit's cost is spread
// over), whoever commits: CommitAll here, a search below.
TEST_F(EngineTest, StatsCountCommitsAndTheirUpdates) {
  EXPECT_EQ(engine_->Stats().acg_commits, 0u);
  ASSERT_TRUE(engine_->CommitAll().ok());
  EngineStats st = engine_->Stats();
  EXPECT_EQ(st.acg_commits, 1u);
  EXPECT_EQ(st.committed_updates, 1u);
  std::vector<Update> batch = {Put(2, 2, {"/b/1"}), Put(2, 3, {"/b/2"}), Put(2, 4, {"/b/3"}),
                               Put(1, 5, {"/a/5"}), Put(1, 1, {"/a/x.c"}, 20)};
  ASSERT_TRUE(engine_->Apply(batch).ok());
  EXPECT_EQ(Count("size>0"), 5u);  // commits both ACGs first
  st = engine_->Stats();
  EXPECT_EQ(st.acg_commits, 3u);
  EXPECT_EQ(st.committed_updates, 6u);
  ASSERT_TRUE(engine_->CommitAll().ok());  // nothing left: no commit counted
  EXPECT_EQ(engine_->Stats().acg_commits, 3u);
}

// A commit pass commits the ACGs of one store shard in one LMDB transaction (one sync for
// all, where one per ACG made batched updates over many ACGs sync-bound); an ACG whose commit
// fails keeps its updates and does not hold back the others of its shard.
TEST(EngineGroupCommitTest, OneTransactionPerShardAndAFailingAcgHoldsBackOnlyItself) {
  TempDir dir;
  std::atomic<bool> fail_acg_3{false};
  EngineOptions o;
  o.data_dir = dir.path();
  o.store_shards = 2;
  o.background_commit = false;
  o.commit_hook = FailCommitsOf(3, &fail_acg_3);
  auto opened = Engine::Open(o);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  Engine& engine = **opened;
  uint64_t ino = 1;
  auto fill = [&] {  // two files in each of ACGs 1..8: four ACGs in each shard
    for (uint64_t acg = 1; acg <= 8; ++acg) {
      std::vector<Update> batch = {Put(acg, ino, {"/f" + std::to_string(ino)}),
                                   Put(acg, ino + 1, {"/f" + std::to_string(ino + 1)})};
      ino += 2;
      ASSERT_TRUE(engine.Apply(batch).ok());
    }
  };
  fill();
  ASSERT_TRUE(engine.CommitAll().ok());
  EngineStats st = engine.Stats();
  EXPECT_EQ(st.acg_commits, 8u);
  EXPECT_EQ(st.committed_updates, 16u);
  EXPECT_EQ(st.store_commits, 2u);

  fail_acg_3 = true;
  fill();
  EXPECT_FALSE(engine.CommitAll().ok());
  st = engine.Stats();
  EXPECT_EQ(st.acg_commits, 8u + 7u);  // all but ACG 3, one by one after the group failed
  EXPECT_EQ(st.cached_updates, 2u);     // ACG 3's two updates wait
  fail_acg_3 = false;
  ASSERT_TRUE(engine.CommitAll().ok());
  EXPECT_EQ(engine.Stats().cached_updates, 0u);
  SearchRequest r;
  r.query = "size>=0";
  r.now_ns = kNow;
  auto hits = engine.SearchAll(r);
  ASSERT_TRUE(hits.ok()) << hits.status().ToString();
  EXPECT_EQ(hits->size(), 32u);
}

// The `inode` K-D tree reads its points from the records (acg.h): data directories of older
// versions kept a copy in a `kd.inode` database, which the first open drops. A planted copy
// that disagrees with the records (file 1 at size 0, its record says 10) must neither hide the
// file from a K-D query nor survive the open.
// The background committer skips its walk of every ACG when none is busy (AcgContext::
// busy_acgs): that count must follow every way an ACG becomes busy and idle again, or cached
// updates would wait for a search. Here only the committer commits: updates in many ACGs, then
// a commit that fails (the ACG is busy again), then more updates after the node went idle.
TEST(EngineCommitterTest, CommitsEveryBusyAcgThroughFailuresAndIdlePeriods) {
  TempDir dir;
  std::atomic<bool> fail_acg_3{false};
  EngineOptions o;
  o.data_dir = dir.path();
  o.store_shards = 2;
  o.commit_timeout_ns = 1'000'000;
  o.commit_hook = FailCommitsOf(3, &fail_acg_3);
  auto opened = Engine::Open(o);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  Engine& engine = **opened;
  auto drained = [&] {  // the committer emptied every cache (it retries failures with backoff)
    for (int i = 0; i < 1000; ++i) {
      if (engine.Stats().cached_updates == 0) return true;
      usleep(10'000);
    }
    return false;
  };
  uint64_t ino = 1;
  auto fill = [&](uint64_t acgs) {
    for (uint64_t acg = 1; acg <= acgs; ++acg, ++ino) {
      std::vector<Update> one = {Put(acg, ino, {"/f" + std::to_string(ino)})};
      ASSERT_TRUE(engine.Apply(one).ok());
    }
  };
  fill(20);
  EXPECT_TRUE(drained());
  fail_acg_3 = true;
  fill(5);
  usleep(50'000);  // a few passes fail on ACG 3
  EXPECT_GE(engine.Stats().cached_updates, 1u);
  fail_acg_3 = false;
  EXPECT_TRUE(drained());
  usleep(120'000);  // idle passes
  fill(7);
  EXPECT_TRUE(drained());
  SearchRequest r;
  r.query = "size>0";
  auto hits = engine.SearchAll(r);
  ASSERT_TRUE(hits.ok()) << hits.status().ToString();
  EXPECT_EQ(hits->size(), ino - 1);
}

TEST_F(EngineTest, InodeTreeReadsRecordsAndDropsAnOlderVersionsPoints) {
  ASSERT_TRUE(engine_->CommitAll().ok());
  engine_.reset();
  const std::string acg_dir = dir_.path() + "/acg/1";
  auto with_env = [&](const std::function<void(MDB_txn*)>& fn) {
    MDB_env* env = nullptr;
    ASSERT_EQ(mdb_env_create(&env), 0);
    ASSERT_EQ(mdb_env_set_maxdbs(env, 128), 0);
    ASSERT_EQ(mdb_env_open(env, acg_dir.c_str(), MDB_NOTLS, 0644), 0);
    MDB_txn* txn = nullptr;
    ASSERT_EQ(mdb_txn_begin(env, nullptr, 0, &txn), 0);
    fn(txn);
    EXPECT_EQ(mdb_txn_commit(txn), 0);
    mdb_env_close(env);
  };
  with_env([](MDB_txn* txn) {
    MDB_dbi dbi;
    ASSERT_EQ(mdb_dbi_open(txn, "kd.inode", MDB_CREATE, &dbi), 0);
    std::string key, point;
    AppendFileIdKey(FileId{1, 1}, &key);
    for (int axis = 0; axis < kNumInodeAxes; ++axis) AppendOrderedI64(0, &point);
    MDB_val k{key.size(), key.data()}, v{point.size(), point.data()};
    ASSERT_EQ(mdb_put(txn, dbi, &k, &v, 0), 0);
  });
  auto e = Engine::Open(options_);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  engine_ = std::move(e).value();
  EXPECT_EQ(Count("size>5"), 1u);
  EXPECT_EQ(Count("size<5"), 0u);
  engine_.reset();
  with_env([](MDB_txn* txn) {
    MDB_dbi dbi;
    EXPECT_EQ(mdb_dbi_open(txn, "kd.inode", 0, &dbi), MDB_NOTFOUND);
  });
}

// A file whose mtime moves to another week without a rename (a write to it) is found by a
// keyword and mtime query at once, after reopen too: each commit adds the keywords of its
// records' new weeks to the summary's keyword-week filter, which would prune the ACG otherwise.
TEST_F(EngineTest, AFileTouchedIntoANewWeekIsFoundByItsKeywords) {
  constexpr int64_t kDay = testing::kDay;
  Update old_fox = Put(1, 2, {"/proj/firefox-3/old.c"});
  old_fox.record.mtime = kNow - 30 * kDay;
  Update new_other = Put(1, 3, {"/proj/thunderbird/new.c"});
  new_other.record.mtime = kNow - kDay;
  ASSERT_TRUE(engine_->Apply(std::vector<Update>{old_fox, new_other}).ok());
  ASSERT_TRUE(engine_->CommitAll().ok());
  SearchRequest r;
  r.query = "keyword=firefox & mtime<1w";
  r.now_ns = kNow;
  SearchStats stats;
  auto hits = engine_->SearchAll(r, &stats);
  ASSERT_TRUE(hits.ok()) << hits.status().ToString();
  EXPECT_TRUE(hits->empty());
  EXPECT_EQ(stats.acgs_skipped, 1u);  // by the summary alone
  EXPECT_EQ(Count("keyword=firefox & mtime<60d"), 1u);

  Update touched = old_fox;
  touched.record.mtime = kNow - kDay / 2;
  ASSERT_TRUE(engine_->Apply({&touched, 1}).ok());
  EXPECT_EQ(Count("keyword=firefox & mtime<1w"), 1u);
  ASSERT_TRUE(engine_->CommitAll().ok());
  engine_.reset();
  auto e = Engine::Open(options_);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  engine_ = std::move(e).value();
  EXPECT_EQ(Count("keyword=firefox & mtime<1w"), 1u);
  EXPECT_EQ(Count("keyword=thunderbird & mtime>2w"), 0u);
}

}  // namespace
}  // namespace propeller

namespace propeller {
namespace {

// Times of every year (docs/search.md "Times"): files dated from year 1 to 9999, before 1970
// and beyond int64 nanoseconds (1677..2262), searched through the summaries and the K-D tree,
// from the write cache and after commit and reopen, equal a brute-force evaluation.
TEST_F(EngineTest, TimesOfEveryYearCompareRight) {
  const FileTime times[] = {
      FileTimeOf(-62135596800, 0),          // 0001-01-01
      FileTimeOf(-14831769600, 123456789),  // 1500-01-01
      FileTimeOf(-631152000, 0),            // 1950-01-01
      FileTimeOf(1717200000, 0),            // 2024-06-01
      FileTimeOf(13569465600, 1),           // 2400-01-01T00:00:00.000000001
      FileTimeOf(253402300799, 999999999),  // 9999-12-31T23:59:59.999999999
      FileTime{INT64_MAX}, FileTime{INT64_MAX} + 1, FileTime{INT64_MIN}, FileTime{INT64_MIN} - 1};
  std::vector<FileRecord> records;
  std::vector<Update> batch;
  uint64_t ino = 100;
  for (FileTime m : times) {
    for (FileTime c : {FileTime{0}, m}) {
      Update u = Put(1, ino, {"/t/f" + std::to_string(ino)});
      u.record.mtime = m;
      u.record.ctime = c;
      u.record.atime = -m;
      ++ino;
      records.push_back(u.record);
      batch.push_back(u);
    }
  }
  ASSERT_TRUE(engine_->Apply(batch).ok());
  const std::vector<std::string> queries = {
      "mtime<1900-01-01", "mtime>2300-01-01", "mtime>=0001-01-01", "mtime<=0001-01-01",
      "mtime=2400-01-01T00:00:00.000000001", "mtime!=2400-01-01T00:00:00.000000001",
      "mtime>9999-12-31T23:59:59.999999998", "mtime>9999-12-31", "mtime<1677-01-01",
      "mtime>2262-04-11T23:47:16.854775807", "mtime>=2262-04-11T23:47:16.854775807",
      "mtime<1d", "mtime>1d", "mtime<1969-12-31 & ctime<1d", "atime>2300-01-01",
      "atime<0001-01-02", "mtime>1949-12-31 & mtime<2024-06-02", "size>=0 & mtime>2262-05-01",
      "!(mtime<1900-01-01)", "mtime>2300-01-01 | atime>2300-01-01",
      "mtime<1677-09-21T00:12:43.145224192", "mtime<=1677-09-21T00:12:43.145224192"};
  auto check = [&](const char* when) {
    for (const std::string& q : queries) {
      SCOPED_TRACE(std::string(when) + ": " + q);
      ParseOptions po;
      po.now_ns = kNow;
      auto parsed = Query::Parse(q, po);
      ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
      std::vector<std::string> want;
      for (const FileRecord& r : records) {
        if (parsed->Matches(r)) want.push_back(r.paths[0]);
      }
      SearchRequest req;
      req.query = q;
      req.now_ns = kNow;
      req.scope = "/t";
      auto hits = engine_->SearchAll(req);
      ASSERT_TRUE(hits.ok()) << hits.status().ToString();
      std::vector<std::string> got;
      for (const SearchHit& h : *hits) got.push_back(h.path);
      std::sort(got.begin(), got.end());
      std::sort(want.begin(), want.end());
      EXPECT_EQ(got, want);
    }
  };
  check("cached");
  ASSERT_TRUE(engine_->CommitAll().ok());
  check("committed");
  engine_.reset();
  auto e = Engine::Open(options_);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  engine_ = std::move(e).value();
  check("reopened");
  auto got = engine_->Get(1, FileId{1, 108});  // 2400-01-01T00:00:00.000000001
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->mtime, FileTimeOf(13569465600, 1));
}

}  // namespace
}  // namespace propeller
