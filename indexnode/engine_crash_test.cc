// Crash safety of the engine (docs/architecture.md §10).
//
// 1. FaultInjection: the log goes through a FaultInjectionEnv that refuses every write after
//    a random number of operations (the process "dies" there), the engine is abandoned with
//    CrashForTesting (nothing committed, synced or truncated afterwards), optionally the
//    unsynced bytes are dropped (power loss), and the engine is reopened. Checks:
//      - kill (no drop), any level:  state == all acknowledged batches (+ possibly the one
//        batch in flight, whole);
//      - power loss, kSync:          the same;
//      - power loss, kDefault:       state == some prefix of the batches that includes every
//        batch acknowledged before the last explicit SyncLog — never a hole, never a half batch.
// 2. KillNine: a forked child ingests with the real Env and is killed with SIGKILL at a random
//    moment; the parent reopens and finds every batch the child acknowledged.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "common/fault_env.h"
#include "indexnode/engine.h"
#include "indexnode/engine_test_util.h"

namespace propeller {
namespace {

using testing::kNow;
using testing::Model;
using testing::RecordGen;
using testing::TempDir;

// A deterministic stream of batches: batch i depends only on (seed, i) and the model state,
// which is itself a function of the batches before it.
std::vector<Update> MakeBatch(RecordGen* gen, Model* model, uint64_t* next_ino) {
  Random& rnd = gen->rnd();
  std::vector<Update> batch;
  const int n = 1 + static_cast<int>(rnd.Uniform(8));
  for (int i = 0; i < n; ++i) {
    Update u;
    if (model->files.empty() || rnd.OneIn(2)) {
      u.op = UpdateOp::kPut;
      u.acg = 1 + rnd.Uniform(4);
      u.record = gen->NewRecord(FileId{1, (*next_ino)++});
    } else {
      auto it = model->files.begin();
      std::advance(it, static_cast<long>(rnd.Uniform(model->files.size())));
      u.acg = model->acg_of[it->first];
      u.record = it->second;
      if (rnd.OneIn(4)) {
        u.op = UpdateOp::kDelete;
      } else {
        u.op = UpdateOp::kPut;
        gen->RandomizeAttrs(&u.record);
        if (rnd.OneIn(3)) u.record.paths = {gen->RandomPath()};
      }
    }
    batch.push_back(u);
  }
  // The model sees the batch as if applied, so later batches can refer to its files; callers
  // keep their own per-prefix states.
  for (const Update& u : batch) model->Apply(u);
  return batch;
}

// Everything the engine holds, as (id -> record), read through search.
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

struct CrashParams {
  Durability durability;
  bool power_loss;
  size_t max_open_acgs = 64;  // 1: ACGs close and reopen around nearly every commit and search
  int trials = 12;
};

class EngineFaultTest : public ::testing::TestWithParam<CrashParams> {};

TEST_P(EngineFaultTest, RecoversExactlyAcknowledgedPrefix) {
  const CrashParams p = GetParam();
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("PROPELLER_SEED=" + std::to_string(seed));
  Random trial_rnd(seed);
  for (int trial = 0; trial < p.trials; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial));
    TempDir dir;
    FaultInjectionEnv env(Env::Default());
    EngineOptions o;
    o.data_dir = dir.path();
    o.env = &env;
    o.durability = p.durability;
    o.background_commit = true;
    o.commit_timeout_ns = 1'000'000;  // commits race with the crash
    o.group_commit_interval_ns = 2'000'000;
    o.wal_segment_bytes = 8 << 10;
    o.search_threads = 2;
    o.max_open_acgs = p.max_open_acgs;

    // states[k] = the model after the first k batches.
    std::vector<std::map<FileId, FileRecord>> states = {{}};
    RecordGen gen(seed * 1000 + static_cast<uint64_t>(trial));
    Model stream_model;
    uint64_t next_ino = 1;
    size_t acked = 0, synced_floor = 0;
    bool in_flight = false;
    {
      auto opened = Engine::Open(o);
      ASSERT_TRUE(opened.ok()) << opened.status().ToString();
      std::unique_ptr<Engine> engine = std::move(opened).value();
      const int crash_batch = 20 + static_cast<int>(trial_rnd.Uniform(200));
      for (int b = 0; b < 400; ++b) {
        if (b == crash_batch) env.SetFailAfter(static_cast<int64_t>(trial_rnd.Uniform(6)));
        std::vector<Update> batch = MakeBatch(&gen, &stream_model, &next_ino);
        states.push_back(stream_model.files);
        Status s = engine->Apply(batch);
        if (!s.ok()) {
          in_flight = true;  // written or not: only this one batch may appear beyond `acked`
          break;
        }
        ++acked;
        if (trial_rnd.OneIn(25) && engine->SyncLog().ok()) synced_floor = acked;
        if (trial_rnd.OneIn(40)) (void)engine->CommitAll();
        if (trial_rnd.OneIn(30)) {  // searches race the committer (and open closed ACGs)
          SearchRequest req;
          req.query = trial_rnd.OneIn(2) ? "size>=1048576" : "keyword=firefox";
          req.now_ns = kNow;
          (void)engine->SearchAll(req);
        }
      }
      engine->CrashForTesting();
    }
    if (p.power_loss) {
      ASSERT_TRUE(env.DropUnsyncedData().ok());
    }
    env.ResetState();

    auto reopened = Engine::Open(o);
    ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
    std::unique_ptr<Engine> engine = std::move(reopened).value();
    std::map<FileId, FileRecord> got = Dump(engine.get());
    size_t lo = acked;
    if (p.power_loss && p.durability == Durability::kDefault) lo = synced_floor;
    size_t hi = acked + (in_flight ? 1 : 0);
    bool matched = false;
    for (size_t k = lo; k <= hi && !matched; ++k) matched = (got == states[k]);
    EXPECT_TRUE(matched) << "state after reopen is not a prefix in [" << lo << ", " << hi
                         << "] of the batch stream; acked=" << acked << " files=" << got.size();
    // The reopened engine keeps working.
    Update u;
    u.acg = 1;
    u.record = gen.NewRecord(FileId{1, next_ino++});
    ASSERT_TRUE(engine->Apply({&u, 1}).ok());
    ASSERT_TRUE(engine->CommitAll().ok());
  }
}

INSTANTIATE_TEST_SUITE_P(
    Modes, EngineFaultTest,
    ::testing::Values(CrashParams{Durability::kDefault, false},
                      CrashParams{Durability::kSync, false},
                      CrashParams{Durability::kDefault, true},
                      CrashParams{Durability::kSync, true},
                      CrashParams{Durability::kDefault, true, 1, 6},
                      CrashParams{Durability::kSync, false, 1, 6}),
    [](const auto& info) {
      return std::string(DurabilityName(info.param.durability)) +
             (info.param.power_loss ? "_power_loss" : "_process_crash") +
             (info.param.max_open_acgs == 1 ? "_one_open_acg" : "");
    });

// A real SIGKILL of a process in the middle of ingest.
TEST(EngineKillNineTest, EveryAcknowledgedBatchSurvives) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("PROPELLER_SEED=" + std::to_string(seed));
  Random rnd(seed);
  for (int trial = 0; trial < 4; ++trial) {
    TempDir dir;
    const Durability durability = trial % 2 ? Durability::kSync : Durability::kDefault;
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(fds[0]);
      EngineOptions o;
      o.data_dir = dir.path();
      o.durability = durability;
      o.commit_timeout_ns = 1'000'000;
      o.wal_segment_bytes = 16 << 10;
      auto e = Engine::Open(o);
      if (!e.ok()) _exit(3);
      RecordGen gen(seed + static_cast<uint64_t>(trial));
      Model model;
      uint64_t next_ino = 1;
      for (uint32_t b = 0;; ++b) {
        std::vector<Update> batch = MakeBatch(&gen, &model, &next_ino);
        if (!(*e)->Apply(batch).ok()) _exit(4);
        if (write(fds[1], &b, sizeof(b)) != sizeof(b)) _exit(5);
      }
    }
    close(fds[1]);
    usleep(static_cast<useconds_t>(100'000 + rnd.Uniform(400'000)));
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "child exited on its own with " << WEXITSTATUS(status);
    uint32_t b = 0;
    int64_t last_acked = -1;
    while (read(fds[0], &b, sizeof(b)) == sizeof(b)) last_acked = b;
    close(fds[0]);
    ASSERT_GE(last_acked, 0) << "the child acknowledged nothing in time";

    // Regenerate the stream the child produced.
    RecordGen gen(seed + static_cast<uint64_t>(trial));
    Model model;
    uint64_t next_ino = 1;
    std::vector<std::map<FileId, FileRecord>> states;
    for (int64_t i = 0; i <= last_acked + 1; ++i) {
      MakeBatch(&gen, &model, &next_ino);
      states.push_back(model.files);
    }
    EngineOptions o;
    o.data_dir = dir.path();
    o.durability = durability;
    auto e = Engine::Open(o);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    std::map<FileId, FileRecord> got = Dump(e->get());
    // Acknowledged = batches 0..last_acked; the next one may have been logged before the kill.
    EXPECT_TRUE(got == states[static_cast<size_t>(last_acked)] ||
                got == states[static_cast<size_t>(last_acked) + 1])
        << "trial " << trial << ": last acknowledged batch " << last_acked << ", files "
        << got.size();
  }
}

}  // namespace
}  // namespace propeller
