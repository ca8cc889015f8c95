// Live queries of the engine (Engine::Watch, indexnode/watch_hub.h) against an oracle: the
// brute-force model's set of matching paths before and after every update. Every path that
// enters the set is a '+', every one that leaves it a '-', every one that stays with a
// changed record a '~' — nothing more, nothing less, in order. Also: batches that change a
// file several times, renames and hard links, credentials, a reader too slow for its queue,
// and a watch outliving its engine.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "indexnode/engine.h"
#include "indexnode/engine_test_util.h"

namespace propeller {
namespace {

using testing::kNow;
using testing::Model;
using testing::RecordGen;
using testing::TempDir;

std::unique_ptr<Engine> OpenEngine(const std::string& dir, bool failing_commits = false) {
  EngineOptions o;
  o.data_dir = dir;
  o.background_commit = false;
  if (failing_commits) {
    // Every third commit fails as an I/O error would: its updates go back to the cache.
    auto n = std::make_shared<int>(0);
    o.commit_hook = [n](uint64_t) {
      return ++*n % 3 == 0 ? Status::IOError("injected") : Status::OK();
    };
  }
  auto e = Engine::Open(o);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? std::move(e).value() : nullptr;
}

std::unique_ptr<EngineWatch> StartWatch(Engine* engine, const std::string& query,
                                        const std::string& scope = "/", size_t max_queued = 0) {
  WatchSpec spec;
  spec.query = query;
  spec.scope = scope;
  spec.now_ns = kNow;
  spec.max_queued = max_queued;
  auto w = engine->Watch(spec);
  EXPECT_TRUE(w.ok()) << w.status().ToString();
  return w.ok() ? std::move(w).value() : nullptr;
}

// "+/a" lines of the events waiting now ("+/a#7" with `with_ino`: two files may share a
// path for a moment, one of them stale).
std::vector<std::string> Drain(EngineWatch* w, bool with_ino = false) {
  std::vector<WatchEvent> events;
  const Status s = w->Next(&events, 0);
  EXPECT_TRUE(s.ok()) << s.ToString();
  std::vector<std::string> lines;
  for (const WatchEvent& e : events) {
    lines.push_back(std::string(1, e.kind) + e.path +
                    (with_ino ? "#" + std::to_string(e.record.id.ino) : ""));
  }
  return lines;
}

// "path#ino" -> record of every matching path of every file in the model.
std::map<std::string, FileRecord> Matches(const Model& m, const Query& q,
                                          const std::string& scope) {
  std::map<std::string, FileRecord> out;
  for (const auto& [id, rec] : m.files) {
    for (const std::string& p : rec.paths) {
      if (PathInScope(p, scope) && q.MatchesLink(rec, p)) {
        out[p + "#" + std::to_string(id.ino)] = rec;
      }
    }
  }
  return out;
}

// The events the oracle expects from one update: leaving paths, then entering ones, then
// changed ones (one file per update, so its paths' events are in this order).
std::multiset<std::string> Expected(const std::map<std::string, FileRecord>& before,
                                    const std::map<std::string, FileRecord>& after) {
  std::multiset<std::string> out;
  for (const auto& [p, rec] : before) {
    auto it = after.find(p);
    if (it == after.end()) {
      out.insert("-" + p);
    } else if (!(it->second == rec)) {
      out.insert("~" + p);
    }
  }
  for (const auto& [p, rec] : after) {
    if (before.count(p) == 0) out.insert("+" + p);
  }
  return out;
}

Update Put(uint64_t acg, uint64_t ino, std::vector<std::string> paths, uint64_t size) {
  Update u;
  u.acg = acg;
  u.record.id = FileId{1, ino};
  std::sort(paths.begin(), paths.end());
  u.record.paths = std::move(paths);
  u.record.size = size;
  u.record.nlink = static_cast<uint32_t>(u.record.paths.size());
  u.record.mode = 0100644;
  return u;
}

Update Delete(uint64_t acg, uint64_t ino) {
  Update u;
  u.op = UpdateOp::kDelete;
  u.acg = acg;
  u.record.id = FileId{1, ino};
  return u;
}

TEST(EngineWatchTest, RandomUpdatesMatchTheOracle) {
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    const std::string seed_trace = "seed " + std::to_string(seed);
    SCOPED_TRACE(seed_trace);
    TempDir dir;
    const bool failing = seed % 2 == 0;
    auto engine = OpenEngine(dir.path(), failing);
    ASSERT_NE(engine, nullptr);
    RecordGen gen(seed);
    Model model;
    // Some files exist before the watch starts, committed or still cached.
    for (uint64_t ino = 1; ino <= 20; ++ino) {
      Update u;
      u.acg = 1 + ino % 3;
      u.record = gen.NewRecord(FileId{1, ino});
      ASSERT_TRUE(engine->Apply({&u, 1}).ok());
      model.Apply(u);
      if (ino == 10) {
        Status st = engine->CommitAll();
        ASSERT_TRUE(st.ok() || failing) << st.ToString();
      }
    }
    const std::string text = gen.RandomQuery();
    const std::string scope = gen.rnd().OneIn(3) ? "/src" : "/";
    const std::string query_trace = "query " + text + " scope " + scope;
    SCOPED_TRACE(query_trace);
    ParseOptions po;
    po.now_ns = kNow;
    auto q = Query::Parse(text, po);
    ASSERT_TRUE(q.ok()) << q.status().ToString();
    auto watch = StartWatch(engine.get(), text, scope);
    ASSERT_NE(watch, nullptr);
    for (int step = 0; step < 300; ++step) {
      if (step == 150) {
        // The last watch ends (the ACGs stop counting their cached entries), updates go on
        // unwatched, then a new watch starts (the counts are rebuilt from the caches).
        watch.reset();
        for (int k = 0; k < 20; ++k) {
          Update u;
          u.record = gen.NewRecord(FileId{1, 1 + gen.rnd().Uniform(30)});
          const FileId id = u.record.id;
          u.acg = model.acg_of.count(id) ? model.acg_of[id] : 1 + id.ino % 3;
          ASSERT_TRUE(engine->Apply({&u, 1}).ok());
          model.Apply(u);
        }
        watch = StartWatch(engine.get(), text, scope);
        ASSERT_NE(watch, nullptr);
      }
      const uint64_t ino = 1 + gen.rnd().Uniform(30);
      const FileId id{1, ino};
      const uint64_t acg = model.acg_of.count(id) ? model.acg_of[id] : 1 + ino % 3;
      Update u;
      u.acg = acg;
      u.record.id = id;
      const bool exists = model.files.count(id) != 0;
      switch (gen.rnd().Uniform(6)) {
        case 0:  // a new record or a new state of one
          u.record = gen.NewRecord(id);
          break;
        case 1:  // rename, or a hard link more
          if (!exists) continue;
          u.record = model.files[id];
          if (gen.rnd().OneIn(2) || u.record.paths.size() > 2) {
            u.record.paths = {gen.RandomPath()};
          } else {
            u.record.paths.push_back(gen.RandomPath());
            std::sort(u.record.paths.begin(), u.record.paths.end());
            u.record.paths.erase(std::unique(u.record.paths.begin(), u.record.paths.end()),
                                 u.record.paths.end());
          }
          u.record.nlink = static_cast<uint32_t>(u.record.paths.size());
          break;
        case 2:  // a change that keeps the path (write, chmod)
          if (!exists) continue;
          u.record = model.files[id];
          gen.RandomizeAttrs(&u.record);
          break;
        case 3:
          u.op = UpdateOp::kDelete;
          break;
        case 4:
          u.op = UpdateOp::kSetAttrs;
          u.record.attrs["proj"] = std::string(gen.rnd().OneIn(2) ? "alpha" : "beta");
          break;
        default:
          u.op = UpdateOp::kRemoveAttrs;
          u.record.attrs["proj"] = std::string();
          break;
      }
      const auto before = Matches(model, *q, scope);
      ASSERT_TRUE(engine->Apply({&u, 1}).ok());
      model.Apply(u);
      const auto after = Matches(model, *q, scope);
      const std::vector<std::string> got = Drain(watch.get(), /*with_ino=*/true);
      EXPECT_EQ(std::multiset<std::string>(got.begin(), got.end()), Expected(before, after))
          << "step " << step;
      // The removals of one update come before its additions (a rename reads "- old", "+ new").
      bool added = false;
      for (const std::string& line : got) {
        if (line[0] == '+') added = true;
        EXPECT_FALSE(added && line[0] == '-') << "step " << step;
      }
      if (gen.rnd().OneIn(25)) {
        Status st = engine->CommitAll();  // with failing commits: part of it goes back
        ASSERT_TRUE(st.ok() || failing) << st.ToString();
      }
    }
  }
}

TEST(EngineWatchTest, BatchChangingOneFileSeveralTimesKeepsOrder) {
  TempDir dir;
  auto engine = OpenEngine(dir.path());
  ASSERT_NE(engine, nullptr);
  auto watch = StartWatch(engine.get(), "name~\"*.txt\"");
  std::vector<Update> batch = {Put(1, 7, {"/a.txt"}, 1), Put(1, 7, {"/a.txt"}, 2),
                               Put(1, 7, {"/b.txt"}, 2), Put(1, 7, {"/b.dat"}, 2),
                               Put(1, 8, {"/c.txt"}, 5), Delete(1, 8)};
  ASSERT_TRUE(engine->Apply(batch).ok());
  EXPECT_EQ(Drain(watch.get()), (std::vector<std::string>{"+/a.txt", "~/a.txt", "-/a.txt",
                                                            "+/b.txt", "-/b.txt", "+/c.txt",
                                                            "-/c.txt"}));
  // Unchanged records and edges are no change; a hard link is a path of its own.
  Update same = Put(1, 7, {"/b.dat"}, 2);
  ASSERT_TRUE(engine->Apply({&same, 1}).ok());
  Update edge;
  edge.op = UpdateOp::kAddEdge;
  edge.acg = 1;
  edge.record.id = FileId{1, 7};
  edge.edge_dst = FileId{1, 9};
  edge.edge_weight = 1;
  ASSERT_TRUE(engine->Apply({&edge, 1}).ok());
  EXPECT_TRUE(Drain(watch.get()).empty());
  Update link = Put(1, 7, {"/b.dat", "/l1.txt", "/l2.txt"}, 2);
  ASSERT_TRUE(engine->Apply({&link, 1}).ok());
  EXPECT_EQ(Drain(watch.get()), (std::vector<std::string>{"+/l1.txt", "+/l2.txt"}));
  // After a commit the record is read from the store: a change is still a change.
  ASSERT_TRUE(engine->CommitAll().ok());
  Update grown = Put(1, 7, {"/b.dat", "/l1.txt", "/l2.txt"}, 3);
  ASSERT_TRUE(engine->Apply({&grown, 1}).ok());
  EXPECT_EQ(Drain(watch.get()), (std::vector<std::string>{"~/l1.txt", "~/l2.txt"}));
  Update gone = Delete(1, 7);
  ASSERT_TRUE(engine->Apply({&gone, 1}).ok());
  EXPECT_EQ(Drain(watch.get()), (std::vector<std::string>{"-/l1.txt", "-/l2.txt"}));
}

TEST(EngineWatchTest, ScopeAndCredentialsFilter) {
  TempDir dir;
  auto engine = OpenEngine(dir.path());
  ASSERT_NE(engine, nullptr);
  // /private is root's 0700 directory; /pub is open to all.
  Update priv = Put(1, 1, {"/private"}, 0);
  priv.record.type = FileType::kDirectory;
  priv.record.mode = 040700;
  Update pub = Put(1, 2, {"/pub"}, 0);
  pub.record.type = FileType::kDirectory;
  pub.record.mode = 040755;
  Update root = Put(1, 6, {"/"}, 0);
  root.record.type = FileType::kDirectory;
  root.record.mode = 040755;
  ASSERT_TRUE(engine->Apply(std::vector<Update>{root, priv, pub}).ok());
  WatchSpec spec;
  spec.query = "size>0";
  spec.creds = Credentials{1000, 1000, {}};
  auto user = engine->Watch(spec);
  ASSERT_TRUE(user.ok());
  auto scoped = StartWatch(engine.get(), "size>0", "/pub");
  std::vector<Update> files = {Put(1, 3, {"/private/secret"}, 5), Put(1, 4, {"/pub/open"}, 5),
                               Put(1, 5, {"/private/both", "/pub/both"}, 5)};
  ASSERT_TRUE(engine->Apply(files).ok());
  std::vector<WatchEvent> events;
  ASSERT_TRUE((*user)->Next(&events, 0).ok());
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].path, "/pub/open");
  EXPECT_EQ(events[1].path, "/pub/both");
  // The record a user receives names only the paths they may see.
  EXPECT_EQ(events[1].record.paths, std::vector<std::string>{"/pub/both"});
  EXPECT_EQ(Drain(scoped.get()), (std::vector<std::string>{"+/pub/open", "+/pub/both"}));
}

TEST(EngineWatchTest, PathPredicatesSeeThePathsUnderTheVolumeRoots) {
  TempDir dir;
  auto engine = OpenEngine(dir.path());
  ASSERT_NE(engine, nullptr);
  WatchSpec spec;
  spec.query = "keyword=share | path~/srv/data/x/*";
  spec.volume_roots = {{1, "/usr/share"}, {2, "/srv/data"}};
  auto w = engine->Watch(spec);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  std::vector<Update> batch = {Put(1, 1, {"/doc/a"}, 1), Put(1, 2, {"/x/b"}, 1)};
  batch[1].record.id.volume = 2;
  Update other = Put(1, 3, {"/y/c"}, 1);
  other.record.id.volume = 2;
  batch.push_back(other);
  ASSERT_TRUE(engine->Apply(batch).ok());
  EXPECT_EQ(Drain(w->get()), (std::vector<std::string>{"+/doc/a", "+/x/b"}));
}

TEST(EngineWatchTest, SlowReaderIsToldItFellBehind) {
  TempDir dir;
  auto engine = OpenEngine(dir.path());
  ASSERT_NE(engine, nullptr);
  auto watch = StartWatch(engine.get(), "size>=0", "/", 5);
  for (uint64_t ino = 1; ino <= 5; ++ino) {
    Update u = Put(1, ino, {"/f" + std::to_string(ino)}, ino);
    ASSERT_TRUE(engine->Apply({&u, 1}).ok());
  }
  EXPECT_EQ(Drain(watch.get()).size(), 5u);  // at the bound: nothing lost yet
  for (uint64_t ino = 6; ino <= 20; ++ino) {
    Update u = Put(1, ino, {"/f" + std::to_string(ino)}, ino);
    ASSERT_TRUE(engine->Apply({&u, 1}).ok());  // updates never wait for a watch
  }
  std::vector<WatchEvent> events;
  Status s = watch->Next(&events, 0);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  EXPECT_NE(s.message().find("fell behind"), std::string::npos);
  EXPECT_NE(s.message().find("15 changes"), std::string::npos) << s.ToString();
  EXPECT_TRUE(events.empty());
  // It stays so: a watch never resumes with a gap.
  EXPECT_EQ(watch->Next(&events, 0).code(), StatusCode::kResourceExhausted);
  // Another watch is not affected, and the index has every update.
  auto fresh = StartWatch(engine.get(), "size>=0");
  Update u = Put(1, 21, {"/f21"}, 1);
  ASSERT_TRUE(engine->Apply({&u, 1}).ok());
  EXPECT_EQ(Drain(fresh.get()), std::vector<std::string>{"+/f21"});
  SearchRequest r;
  r.query = "size>=0";
  EXPECT_EQ(engine->SearchAll(r)->size(), 21u);
}

TEST(EngineWatchTest, BadRequestsAndClose) {
  TempDir dir;
  auto engine = OpenEngine(dir.path());
  ASSERT_NE(engine, nullptr);
  WatchSpec bad;
  bad.query = "size>";
  EXPECT_EQ(engine->Watch(bad).status().code(), StatusCode::kInvalidArgument);
  bad.query = "size>1";
  bad.scope = "relative";
  EXPECT_EQ(engine->Watch(bad).status().code(), StatusCode::kInvalidArgument);
  bad.scope = "/";
  bad.max_queued = kMaxWatchQueue + 1;
  EXPECT_EQ(engine->Watch(bad).status().code(), StatusCode::kInvalidArgument);
  // A typo of a built-in name is a user attribute nobody has: refused as a search refuses
  // it, naming the nearest names; a cluster's node reports it instead (another node may
  // know the name) and the client decides.
  bad.max_queued = 0;
  bad.query = "sise>1m";
  Result<std::unique_ptr<EngineWatch>> typo = engine->Watch(bad);
  EXPECT_EQ(typo.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(typo.status().message().find("size"), std::string::npos) << typo.status().ToString();
  std::vector<std::string> unknown;
  bad.report_unknown_attrs = &unknown;
  EXPECT_TRUE(engine->Watch(bad).ok());
  EXPECT_EQ(unknown, std::vector<std::string>{"sise"});
  auto watch = StartWatch(engine.get(), "size>=0");
  // A reader waiting for events wakes when the engine closes.
  std::thread closer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_TRUE(engine->Close().ok());
  });
  std::vector<WatchEvent> events;
  EXPECT_EQ(watch->Next(&events, 10'000'000'000).code(), StatusCode::kAborted);
  closer.join();
  EXPECT_EQ(engine->Watch(WatchSpec{.query = "size>1"}).status().code(), StatusCode::kAborted);
  engine.reset();
  watch.reset();  // a watch may outlive its engine
}

}  // namespace
}  // namespace propeller
