// Crash safety (docs/architecture.md §7, §10): a child process assigns files and reports every
// mapping the master acknowledged through a pipe; the parent kills it with SIGKILL at a random
// moment, reopens the store and finds every acknowledged mapping (and a consistent store). The
// child is forked before this process touches LMDB (docs/pitfalls.md LMDB-3: never use an env
// across fork()).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <map>

#include "common/random.h"
#include "master/master.h"
#include "master/master_test_util.h"

namespace propeller::master {
namespace {

using testing::TempDir;

constexpr size_t kEntryBytes = 20;  // volume u32, ino u64, acg u64 (native order)

// The child: assigns batches forever, writing each acknowledged batch to `fd` in one write
// (<= PIPE_BUF bytes, so the parent never sees half a batch).
[[noreturn]] void ChildMain(const std::string& dir, int fd, uint64_t seed) {
  MasterConfig c;
  c.data_dir = dir;
  c.acg_threshold = 20;
  auto m = Master::Open(c);
  if (!m.ok()) _exit(3);
  Master& master = **m;
  wire::VolumeInfo v;
  wire::RegisterNodeReply r;
  if (!master.RegisterVolume({"/vol"}, &v).ok()) _exit(4);
  // A new node in the first life, the same node (id 1) in the later ones.
  const uint32_t id = master.store().Nodes().empty() ? 0 : 1;
  if (!master.RegisterNode({id, "tcp://127.0.0.1:7471"}, &r).ok()) _exit(5);
  Random rnd(seed);
  for (;;) {
    wire::AssignFilesRequest req;
    const uint64_t n = 1 + rnd.Uniform(40);
    for (uint64_t i = 0; i < n; ++i) {
      wire::AssignItem it;
      it.file = FileId{v.volume, rnd.Next() >> 20};
      it.app = "app" + std::to_string(rnd.Uniform(4));
      if (rnd.Uniform(3) == 0) it.producers.push_back(FileId{v.volume, rnd.Next() >> 20});
      req.items.push_back(it);
    }
    wire::LocationsReply rep;
    if (!master.AssignFiles(req, &rep).ok()) _exit(6);
    std::string buf;
    for (const auto& loc : rep.locations) {
      char e[kEntryBytes];
      std::memcpy(e, &loc.file.volume, 4);
      std::memcpy(e + 4, &loc.file.ino, 8);
      std::memcpy(e + 12, &loc.acg, 8);
      buf.append(e, kEntryBytes);
    }
    if (::write(fd, buf.data(), buf.size()) != static_cast<ssize_t>(buf.size())) _exit(7);
  }
}

TEST(MasterCrashTest, EveryAcknowledgedAssignmentSurvivesSigkill) {
  TempDir dir;
  Random rnd(77);
  std::map<FileId, uint64_t> acknowledged;
  for (int round = 0; round < 4; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(fds[0]);
      ChildMain(dir.path(), fds[1], 1000 + round);
    }
    ::close(fds[1]);
    // Let it acknowledge a random amount, then kill it mid-stream.
    const size_t want = (50 + rnd.Uniform(400)) * kEntryBytes;
    std::string got;
    char buf[4096];
    while (got.size() < want) {
      const ssize_t n = ::read(fds[0], buf, sizeof buf);
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
    }
    ::kill(pid, SIGKILL);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status)) << "child exited early with " << WEXITSTATUS(status);
    for (;;) {  // what was written before the kill was acknowledged too
      const ssize_t n = ::read(fds[0], buf, sizeof buf);
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
    }
    ::close(fds[0]);
    ASSERT_EQ(got.size() % kEntryBytes, 0u);
    for (size_t off = 0; off < got.size(); off += kEntryBytes) {
      FileId f;
      uint64_t acg;
      std::memcpy(&f.volume, got.data() + off, 4);
      std::memcpy(&f.ino, got.data() + off + 4, 8);
      std::memcpy(&acg, got.data() + off + 12, 8);
      auto [it, inserted] = acknowledged.emplace(f, acg);
      ASSERT_EQ(it->second, acg) << "a mapped file changed ACG";
    }
  }
  ASSERT_GT(acknowledged.size(), 200u);
  // Only now does this process open the store.
  MasterConfig c;
  c.data_dir = dir.path();
  auto m = Master::Open(c);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto dump = (*m)->store().Dump();  // checks every record and the per-ACG counts
  ASSERT_TRUE(dump.ok()) << dump.status().ToString();
  for (const auto& [file, acg] : acknowledged) {
    auto it = dump->files.find(file);
    ASSERT_NE(it, dump->files.end()) << "lost file " << file.ino;
    EXPECT_EQ(it->second, acg);
  }
}

}  // namespace
}  // namespace propeller::master
