// The real propeller-indexnode process: kill -9 during ingest and restart — every acknowledged
// update is there (the one batch in flight at the kill is all there or not at all), and the
// node comes back with its node id; SIGTERM stops it with exit code 0; usage and start-up
// errors give one line and exit codes 2 and 1. PROPELLER_SEED=<n> replays.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <thread>

#include "common/random.h"
#include "indexnode/engine_test_util.h"
#include "indexnode/server/fake_master.h"
#include "schemas/wire_call.h"

#ifndef INDEXNODE_BIN
#error "INDEXNODE_BIN must name the propeller-indexnode binary"
#endif

namespace propeller {
namespace {

using testing::FakeMaster;
using testing::TempDir;
using testing::WaitFor;
using wire::MsgType;

// Starts the daemon; stdout/stderr are inherited (its log lines show in the test output).
pid_t Spawn(const std::vector<std::string>& args) {
  std::vector<std::string> all = {INDEXNODE_BIN};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

// Runs the daemon to completion, capturing its output; returns the exit code (-1 if killed).
int RunDaemon(const std::vector<std::string>& args, std::string* out, std::string* err) {
  int po[2], pe[2];
  if (pipe(po) != 0 || pipe(pe) != 0) return -2;
  std::vector<std::string> all = {INDEXNODE_BIN};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(po[1], 1);
    dup2(pe[1], 2);
    close(po[0]);
    close(pe[0]);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(po[1]);
  close(pe[1]);
  auto drain = [](int fd, std::string* s) {
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0) s->append(buf, static_cast<size_t>(n));
    close(fd);
  };
  drain(po[0], out);  // outputs are a few KB at most: reading one pipe after the other is safe
  drain(pe[0], err);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

using Files = std::map<FileId, FileRecord>;

void ApplyTo(Files* files, const std::vector<Update>& batch) {
  for (const Update& u : batch) {
    if (u.op == UpdateOp::kDelete) {
      files->erase(u.record.id);
    } else {
      (*files)[u.record.id] = u.record;
    }
  }
}

Result<Files> SearchEverything(rpc::Channel& ch) {
  wire::SearchQuery q;
  q.query = "size>=0";
  Files got;
  Status chunk_error;
  wire::SearchDone done;
  Status st = wire::WireCall(ch, MsgType::kSearch, q, &done, {}, nullptr,
                             [&](std::string_view bytes) {
                               wire::SearchHitsChunk chunk;
                               chunk_error = wire::Decode(bytes, &chunk);
                               for (auto& h : chunk.hits) got[h.record.id] = h.record;
                               return chunk_error.ok();
                             });
  if (!chunk_error.ok()) return chunk_error;
  if (!st.ok()) return st;
  return got;
}

TEST(IndexNodeKillTest, AcknowledgedUpdatesSurviveSigkill) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("PROPELLER_SEED=" + std::to_string(seed));
  Random rnd(seed);
  TempDir dir, run;  // data; sockets (a data directory holds no sockets)
  auto master = FakeMaster::Start("ipc://" + run.path() + "/master.sock",
                                  /*heartbeat_interval_ms=*/100);
  ASSERT_TRUE(master);
  for (uint64_t acg = 1; acg <= 8; ++acg) master->SetOwner(acg, 1);

  Files acked;                 // the state after every acknowledged batch
  std::vector<Update> inflight;  // the batch whose Apply did not return OK
  uint64_t next_ino = 1;
  constexpr int kLives = 4;
  for (int life = 0; life < kLives; ++life) {
    SCOPED_TRACE("life " + std::to_string(life));
    const size_t regs = master->registrations().size();
    const uint64_t heartbeats = master->heartbeats();
    pid_t pid = Spawn({"--data", dir.path(), "--master", master->endpoint(), "--listen",
                       "ipc://" + run.path() + "/node.sock", "--log-level", "warning",
                       "--threads", "2"});
    ASSERT_GT(pid, 0);
    ASSERT_TRUE(WaitFor([&] { return master->registrations().size() > regs; }))
        << "the index node did not register";
    // A heartbeat follows the registration once the node has taken its id: only then does it
    // recognise the ACGs the master assigns to that id as its own.
    ASSERT_TRUE(WaitFor([&] { return master->heartbeats() > heartbeats; }));
    const wire::RegisterNodeRequest reg = master->registrations().back();
    EXPECT_EQ(reg.node_id, life == 0 ? 0u : 1u);  // restarts keep the id
    auto ch = rpc::Channel::Connect({.endpoint = reg.endpoint});
    ASSERT_TRUE(ch.ok());

    if (life > 0) {
      Result<Files> got = SearchEverything(**ch);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      Files with_inflight = acked;
      ApplyTo(&with_inflight, inflight);
      const bool exact = *got == acked;
      EXPECT_TRUE(exact || *got == with_inflight)
          << "after the kill: " << got->size() << " files, acknowledged " << acked.size()
          << ", with the batch in flight " << with_inflight.size();
      if (!exact) acked = with_inflight;  // that batch is durable after all
      std::fprintf(stderr,
                   "life %d: %zu files back after the kill (batch in flight: %zu updates, %s)\n",
                   life, got->size(), inflight.size(), exact ? "lost" : "kept");
    }
    if (life == kLives - 1) {
      ASSERT_EQ(kill(pid, SIGTERM), 0);
      int status = 0;
      ASSERT_EQ(waitpid(pid, &status, 0), pid);
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
      break;
    }

    // Ingest until the kill lands, 50-350 ms after the first acknowledgement (so a slow
    // start on a loaded machine cannot leave a life without any acknowledged batch).
    const int delay_ms = 50 + static_cast<int>(rnd.Uniform(300));
    std::atomic<bool> go{false};
    std::thread killer([pid, delay_ms, &go] {
      while (!go.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
      kill(pid, SIGKILL);
    });
    inflight.clear();
    size_t batches = 0;
    for (;;) {
      std::vector<Update> batch;
      const size_t n = 1 + rnd.Uniform(100);
      for (size_t i = 0; i < n; ++i) {
        Update u;
        if (!acked.empty() && rnd.OneIn(4)) {
          auto it = acked.lower_bound(FileId{1, 1 + rnd.Uniform(next_ino)});
          if (it == acked.end()) it = acked.begin();
          u.record = it->second;
          u.acg = 1 + u.record.id.ino % 8;
          if (rnd.OneIn(2)) {
            u.op = UpdateOp::kDelete;
          } else {
            u.record.size = rnd.Uniform(1 << 30);
          }
        } else {
          const uint64_t ino = next_ino++;
          u.acg = 1 + ino % 8;
          u.record.id = FileId{1, ino};
          u.record.paths = {"/d" + std::to_string(ino % 17) + "/f" + std::to_string(ino)};
          u.record.size = rnd.Uniform(1 << 30);
          u.record.mtime = static_cast<int64_t>(rnd.Uniform(1ull << 60));
          u.record.mode = 0100644;
          if (rnd.OneIn(3)) u.record.attrs["proj"] = std::string("p") + std::to_string(ino % 5);
        }
        batch.push_back(std::move(u));
      }
      wire::ApplyRequest req;
      req.updates = batch;
      wire::Empty e;
      rpc::CallOptions call;
      // The first call may wait for the connection and the master's ownership answer.
      call.timeout_ms = batches == 0 ? 10000 : 500;
      call.idempotent = false;  // an unacknowledged batch is the one uncertain batch
      Status st = wire::WireCall(**ch, MsgType::kApply, req, &e, call);
      go.store(true);
      if (!st.ok()) {
        if (batches == 0) ADD_FAILURE() << "the first batch failed: " << st.ToString();
        inflight = std::move(batch);
        break;
      }
      ApplyTo(&acked, batch);
      ++batches;
    }
    killer.join();
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
    EXPECT_GT(batches, 0u) << "no batch was acknowledged before the kill";
  }
  EXPECT_GT(acked.size(), 100u);
}

TEST(IndexNodeKillTest, UsageAndStartErrors) {
  std::string out, err;
  EXPECT_EQ(RunDaemon({"--help"}, &out, &err), 0);
  EXPECT_NE(out.find("usage: propeller-indexnode"), std::string::npos);
  EXPECT_NE(out.find("--master"), std::string::npos);
  EXPECT_NE(out.find("Example"), std::string::npos);

  auto one_line = [](const std::string& s) {
    return s.rfind("propeller-indexnode: ", 0) == 0 && s.find('\n') == s.size() - 1;
  };
  out.clear();
  err.clear();
  EXPECT_EQ(RunDaemon({}, &out, &err), 2);
  EXPECT_NE(err.find("--data"), std::string::npos) << err;
  EXPECT_EQ(err.rfind("propeller-indexnode: ", 0), 0u) << err;
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"--data", "/tmp/x", "--durability", "fast"},
           {"--data", "/tmp/x", "--bogus"},
           {"--data", "/tmp/x", "--threads", "0"},
           {"--data", "/tmp/x", "--log-level", "loud"},
           {"--data"},
           {"--data", "/tmp/x", "stray"},
           {"--data", "/tmp/x", "--curve-key", "/tmp/k"}}) {
    err.clear();
    EXPECT_EQ(RunDaemon(args, &out, &err), 2) << args.back();
    EXPECT_EQ(err.rfind("propeller-indexnode: ", 0), 0u) << err;
  }

  // Runtime errors: the listen endpoint is taken; the data directory is a file.
  TempDir dir;
  auto master = FakeMaster::Start("ipc://" + dir.path() + "/master.sock");
  ASSERT_TRUE(master);
  err.clear();
  EXPECT_EQ(RunDaemon({"--data", dir.path() + "/a", "--master", master->endpoint(), "--listen",
                 master->endpoint(), "--log-level", "error"},
                &out, &err),
            1);
  EXPECT_TRUE(one_line(err)) << err;
  EXPECT_NE(err.find(master->endpoint().substr(6)), std::string::npos) << err;  // names it
  const std::string file = dir.path() + "/plain-file";
  { std::ofstream(file) << "x"; }
  err.clear();
  EXPECT_EQ(RunDaemon({"--data", file, "--master", master->endpoint(), "--listen",
                       "ipc://" + dir.path() + "/node.sock", "--log-level", "error"},
                      &out, &err),
            1);
  EXPECT_TRUE(one_line(err)) << err;
}

}  // namespace
}  // namespace propeller
