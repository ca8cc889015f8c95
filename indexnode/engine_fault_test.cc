// The engine under faults it lives through (engine.h: commits, Close; wal.h): a full disk or a
// flaky device fails log appends, ACG commits and log truncation at random points; once the
// faults stop, every acknowledged update is there — after the next commit and after a reopen —
// and nothing is half applied. Plus the regression of a commit that failed while another pass
// truncated the log. PROPELLER_SEED=<n> replays.
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "common/fault_env.h"
#include "indexnode/engine.h"
#include "indexnode/engine_test_util.h"

namespace propeller {
namespace {

using testing::kNow;
using testing::Model;
using testing::RecordGen;
using testing::TempDir;

std::map<FileId, FileRecord> Dump(Engine* engine) {
  SearchRequest req;
  req.query = "size>=0";
  req.now_ns = kNow;
  auto hits = engine->SearchAll(req);
  EXPECT_TRUE(hits.ok()) << hits.status().ToString();
  std::map<FileId, FileRecord> out;
  if (hits.ok()) {
    for (const SearchHit& h : *hits) out[h.record.id] = h.record;
  }
  return out;
}

Update Put(uint64_t acg, uint64_t ino, RecordGen* gen) {
  Update u;
  u.acg = acg;
  u.record = gen->NewRecord(FileId{1, ino});
  return u;
}

// Before the fix: a commit (here, the one a search makes before it reads an ACG) takes the
// ACG's updates out of its cache, so a commit pass running meanwhile saw the ACG as clean and
// deleted the log segments holding them; when the first commit then failed, the updates lived
// in memory only, and a crash lost them.
TEST(EngineFaultTest, AFailingCommitKeepsItsUpdatesInTheLog) {
  TempDir dir;
  RecordGen gen(7);
  std::mutex mu;
  std::condition_variable cv;
  bool entered = false, release = false;
  EngineOptions eo;
  eo.data_dir = dir.path();
  eo.background_commit = false;
  eo.wal_segment_bytes = 4096;  // many segments: truncation has something to delete
  eo.commit_hook = [&](uint64_t acg) -> Status {
    if (acg != 1) return Status::OK();
    std::unique_lock<std::mutex> lock(mu);
    entered = true;
    cv.notify_all();
    cv.wait(lock, [&] { return release; });
    return Status::IOError("simulated commit", ENOSPC);
  };
  std::vector<Update> first;
  {
    auto engine = Engine::Open(eo);
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    for (uint64_t ino = 1; ino <= 60; ++ino) {
      first.push_back(Put(1, ino, &gen));
      ASSERT_TRUE((*engine)->Apply({&first.back(), 1}).ok());
    }
    std::thread searcher([&] {
      SearchRequest req;
      req.query = "size>=0";
      req.acgs = {1};
      EXPECT_FALSE((*engine)->SearchAll(req).ok());  // its commit of ACG 1 fails
    });
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return entered; });
    }
    // Another pass while ACG 1's commit is under way: ACG 2 commits and the log is truncated.
    for (uint64_t ino = 1000; ino < 1060; ++ino) {
      Update u = Put(2, ino, &gen);
      ASSERT_TRUE((*engine)->Apply({&u, 1}).ok());
    }
    (void)(*engine)->CommitAll();  // ACG 2 commits, ACG 1 is busy; then the log is truncated
    {
      std::lock_guard<std::mutex> lock(mu);
      release = true;
    }
    cv.notify_all();
    searcher.join();
    (*engine)->CrashForTesting();
  }
  eo.commit_hook = nullptr;
  auto engine = Engine::Open(eo);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  const auto state = Dump(engine->get());
  for (const Update& u : first) {
    auto it = state.find(u.record.id);
    ASSERT_NE(it, state.end()) << "acknowledged update of inode " << u.record.id.ino << " lost";
    EXPECT_EQ(it->second, u.record);
  }
}

// ENOSPC or EIO at random log writes, log truncations and ACG commits; then the faults stop.
TEST(EngineFaultTest, RandomFaultsLoseNothingAcknowledgedAndApplyNothingByHalves) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("PROPELLER_SEED=" + std::to_string(seed));
  Random rnd(seed);
  for (int round = 0; round < 4; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    TempDir dir;
    // Over the real file system: LMDB, which the ACGs use, does its own I/O there.
    FaultInjectionEnv env(Env::Default());
    RecordGen gen(seed + static_cast<uint64_t>(round));
    std::atomic<bool> commit_faults{true};
    std::atomic<uint64_t> commit_rng{seed * 31 + static_cast<uint64_t>(round)};
    EngineOptions eo;
    eo.data_dir = dir.path();
    eo.env = &env;
    eo.background_commit = round % 2 == 0;  // the committer thread meets the faults too
    eo.commit_timeout_ns = 20'000'000;
    eo.wal_segment_bytes = 8192;
    eo.durability = round < 2 ? Durability::kDefault : Durability::kSync;
    eo.commit_hook = [&](uint64_t) -> Status {
      uint64_t x = commit_rng.fetch_add(0x9E3779B97F4A7C15ull) * 0xBF58476D1CE4E5B9ull;
      if (commit_faults.load() && (x >> 60) < 5) {  // 5 in 16
        return Status::IOError("simulated commit", (x & 1) ? ENOSPC : EIO);
      }
      return Status::OK();
    };
    Model acked;                            // every acknowledged batch applied
    std::vector<std::vector<Update>> doubt;  // batches whose Apply failed
    uint64_t next_ino = 1;
    {
      auto engine = Engine::Open(eo);
      ASSERT_TRUE(engine.ok()) << engine.status().ToString();
      // A full disk fails writes (not fsyncs: the file system reserves blocks at write time),
      // so the engine takes updates again by itself once space returns. A failed fsync stops
      // the log until a restart (wal.h), which the reopen below also covers.
      const bool full_disk = round != 3;
      env.SetTransientFault(full_disk ? ENOSPC : EIO, 0.15, seed + 17 * round,
                            /*syncs_too=*/!full_disk);
      for (int b = 0; b < 200; ++b) {
        std::vector<Update> batch;
        const int n = 1 + static_cast<int>(rnd.Uniform(6));
        for (int i = 0; i < n; ++i) {
          Update u;
          if (acked.files.empty() || rnd.OneIn(2)) {
            u = Put(1 + rnd.Uniform(5), next_ino++, &gen);
          } else {
            auto it = acked.files.begin();
            std::advance(it, static_cast<long>(rnd.Uniform(acked.files.size())));
            u.acg = acked.acg_of[it->first];
            u.record = it->second;
            gen.RandomizeAttrs(&u.record);
          }
          batch.push_back(u);
        }
        if ((*engine)->Apply(batch).ok()) {
          for (const Update& u : batch) acked.Apply(u);
        } else {
          doubt.push_back(batch);
        }
        if (rnd.OneIn(10)) (void)(*engine)->CommitAll();
        if (rnd.OneIn(40)) {
          SearchRequest req;
          req.query = "size>=0";
          (void)(*engine)->SearchAll(req);
        }
      }
      // The faults stop: the next commit takes everything, without a restart.
      env.ClearTransientFault();
      commit_faults = false;
      if (full_disk) {
        Status all = (*engine)->CommitAll();
        EXPECT_TRUE(all.ok()) << all.ToString();
        const auto committed = Dump(engine->get());
        for (const auto& [id, rec] : acked.files) {
          auto it = committed.find(id);
          ASSERT_NE(it, committed.end()) << "inode " << id.ino << " lost before the reopen";
        }
        // One more acknowledged batch after the faults, then a clean close.
        Update late = Put(1, next_ino++, &gen);
        ASSERT_TRUE((*engine)->Apply({&late, 1}).ok());
        acked.Apply(late);
      }
    }
    env.ResetState();
    auto engine = Engine::Open(eo);
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    const auto state = Dump(engine->get());
    // Every acknowledged file is there with its last acknowledged state, unless a later batch
    // in doubt (failed, yet logged) changed it — whole.
    std::set<FileId> touched_by_doubt;
    for (const auto& batch : doubt) {
      for (const Update& u : batch) touched_by_doubt.insert(u.record.id);
    }
    for (const auto& [id, rec] : acked.files) {
      auto it = state.find(id);
      ASSERT_NE(it, state.end()) << "inode " << id.ino << " lost after the reopen";
      if (touched_by_doubt.count(id) == 0) {
        EXPECT_EQ(it->second, rec) << "inode " << id.ino;
      }
    }
    // Nothing by halves: a batch in doubt is there entirely or not at all.
    for (const auto& batch : doubt) {
      size_t present = 0, fresh = 0;
      for (const Update& u : batch) {
        if (acked.files.count(u.record.id) != 0) continue;  // an older file: not telling
        ++fresh;
        present += state.count(u.record.id);
      }
      EXPECT_TRUE(present == 0 || present == fresh) << present << " of " << fresh;
    }
    EXPECT_GT(env.TransientFaults(), 0);
  }
}

// A clean stop whose final commit or sync failed says so (the daemons exit non-zero on it),
// and the log still holds every acknowledged update for the next start.
TEST(EngineFaultTest, CloseReportsAFailedFinalSync) {
  TempDir dir;
  FaultInjectionEnv env(Env::Default());
  RecordGen gen(3);
  EngineOptions eo;
  eo.data_dir = dir.path();
  eo.env = &env;
  eo.background_commit = false;
  std::vector<Update> acked;
  {
    auto engine = Engine::Open(eo);
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    for (uint64_t ino = 1; ino <= 20; ++ino) {
      acked.push_back(Put(1, ino, &gen));
      ASSERT_TRUE((*engine)->Apply({&acked.back(), 1}).ok());
    }
    env.SetTransientFault(EIO);
    Status closed = (*engine)->Close();
    EXPECT_FALSE(closed.ok());
    EXPECT_NE(closed.message().find("Input/output error"), std::string::npos) << closed.ToString();
    env.ClearTransientFault();
    EXPECT_TRUE((*engine)->Close().ok()) << "a second Close is a no-op";
  }
  auto engine = Engine::Open(eo);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  const auto state = Dump(engine->get());
  for (const Update& u : acked) EXPECT_EQ(state.count(u.record.id), 1u) << u.record.id.ino;
  EXPECT_TRUE((*engine)->Close().ok());
}

// Before: a removed log started silently and answered without every update the ACGs had not
// committed. Now the engine refuses, changing nothing, until an administrator consents.
TEST(EngineFaultTest, AMissingLogNextToAcgsIsARefusal) {
  TempDir dir;
  RecordGen gen(5);
  EngineOptions eo;
  eo.data_dir = dir.path();
  eo.background_commit = false;
  Update committed = Put(1, 1, &gen), cached = Put(1, 2, &gen);
  {
    auto engine = Engine::Open(eo);
    ASSERT_TRUE(engine.ok());
    ASSERT_TRUE((*engine)->Apply({&committed, 1}).ok());
    ASSERT_TRUE((*engine)->CommitAll().ok());
    ASSERT_TRUE((*engine)->Apply({&cached, 1}).ok());
    (*engine)->CrashForTesting();  // `cached` lives in the log only
  }
  std::filesystem::remove_all(dir.path() + "/wal");
  auto refused = Engine::Open(eo);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kNotFound);
  EXPECT_NE(refused.status().message().find("START-WITHOUT-LOG"), std::string::npos)
      << refused.status().ToString();
  EXPECT_TRUE(std::filesystem::exists(dir.path() + "/acg/1"));
  // Consent: it starts with what the ACGs committed.
  std::filesystem::create_directories(dir.path() + "/wal");
  std::ofstream(dir.path() + "/wal/START-WITHOUT-LOG") << "";
  auto engine = Engine::Open(eo);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/wal/START-WITHOUT-LOG"));
  const auto state = Dump(engine->get());
  EXPECT_EQ(state.count(committed.record.id), 1u);
  EXPECT_EQ(state.count(cached.record.id), 0u);
}

}  // namespace
}  // namespace propeller
