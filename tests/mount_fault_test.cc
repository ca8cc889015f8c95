// The mount when the index cannot take its updates (docs/faults.md, issue 24): a full data disk
// and a killed index node must neither fail nor stall a file operation that succeeded on the
// backing tree, nothing acknowledged may be lost, searches in between are exact or fail with
// "index catching up", and a damaged queue or a missing master map is a refusal to start,
// never a silent loss.
// Oracles: a plain directory given the same system calls (same results, same tree), and the
// backing tree itself (the index must list exactly its files, with their sizes).
#include <dirent.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "client/lib/propeller.h"
#include "common/lmdb_check.h"
#include "common/random.h"
#include "tests/cluster_harness.h"
#include "tests/mount_harness.h"

namespace propeller {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::ClusterConfig;
using testing::List;
using testing::LocalClient;
using testing::LocalCluster;
using testing::Mount;
using testing::ReadAll;

// A tmpfs of `size` mounted over `dir` for the scope's life.
class Tmpfs {
 public:
  Tmpfs(std::string dir, const std::string& size) : dir_(std::move(dir)) {
    ok_ = ::mount("tmpfs", dir_.c_str(), "tmpfs", 0, ("size=" + size + ",mode=0700").c_str()) == 0;
    if (!ok_) ADD_FAILURE() << "mounting a tmpfs on " << dir_ << ": " << std::strerror(errno);
  }
  ~Tmpfs() {
    if (ok_) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  bool ok() const { return ok_; }

 private:
  std::string dir_;
  bool ok_ = false;
};

// Fills the file system of `dir` with one file until the disk refuses more; the file's path.
std::string FillDisk(const std::string& dir) {
  const std::string path = dir + "/filler";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  EXPECT_GE(fd, 0) << std::strerror(errno);
  std::string block(1 << 16, 'x');
  while (::write(fd, block.data(), block.size()) > 0) {
  }
  const int err = errno;
  ::close(fd);
  EXPECT_EQ(err, ENOSPC);
  return path;
}

// The same system calls on the mount and on a plain directory: each must give the same result
// (the mount may add no failure), and no call on the mount may take longer than `bound`.
class Mirror {
 public:
  Mirror(std::string mnt, std::string plain, std::chrono::milliseconds bound)
      : mnt_(std::move(mnt)), plain_(std::move(plain)), bound_(bound) {
    fs::create_directories(plain_);
  }

  // Runs fn(root) on both; true when both succeeded.
  bool Both(const std::string& what, const std::function<int(const std::string&)>& fn) {
    const auto start = std::chrono::steady_clock::now();
    errno = 0;
    const int rc_m = fn(mnt_);
    const int err_m = rc_m < 0 ? errno : 0;
    const auto took = std::chrono::steady_clock::now() - start;
    errno = 0;
    const int rc_p = fn(plain_);
    const int err_p = rc_p < 0 ? errno : 0;
    EXPECT_EQ(rc_m < 0, rc_p < 0) << what << ": mount " << std::strerror(err_m) << ", plain "
                                  << std::strerror(err_p);
    EXPECT_EQ(err_m, err_p) << what;
    EXPECT_LE(took, bound_) << what << " took "
                            << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                            << " ms";
    slowest_ = std::max(slowest_, std::chrono::duration_cast<std::chrono::milliseconds>(took));
    ++calls_;
    return rc_m >= 0 && rc_p >= 0;
  }

  // Creates (or replaces) `rel` with `size` bytes: open, write, close.
  bool Write(const std::string& rel, size_t size) {
    return Both("write " + rel, [&](const std::string& root) {
      const int fd = ::open((root + rel).c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd < 0) return -1;
      const std::string data(size, 'd');
      if (::write(fd, data.data(), data.size()) != static_cast<ssize_t>(data.size())) {
        const int err = errno;
        ::close(fd);
        errno = err;
        return -1;
      }
      return ::close(fd);
    });
  }

  // A random mix of creates, overwrites, renames, unlinks, hard links, mkdir and rmdir.
  void RandomOps(Random& rnd, int n) {
    for (int i = 0; i < n; ++i) {
      const std::string d = "/d" + std::to_string(rnd.Uniform(6));
      const std::string f = d + "/f" + std::to_string(rnd.Uniform(60));
      switch (rnd.Uniform(10)) {
        case 0:
          Both("mkdir " + d, [&](const std::string& r) { return ::mkdir((r + d).c_str(), 0755); });
          break;
        case 1: {
          const std::string to = "/d" + std::to_string(rnd.Uniform(6)) + "/f" +
                                 std::to_string(rnd.Uniform(60));
          Both("rename " + f + " " + to, [&](const std::string& r) {
            return ::rename((r + f).c_str(), (r + to).c_str());
          });
          break;
        }
        case 2:
          Both("unlink " + f, [&](const std::string& r) { return ::unlink((r + f).c_str()); });
          break;
        case 3: {
          const std::string to = d + "/h" + std::to_string(rnd.Uniform(10));
          Both("link " + f + " " + to, [&](const std::string& r) {
            return ::link((r + f).c_str(), (r + to).c_str());
          });
          break;
        }
        case 4:
          Both("rmdir " + d, [&](const std::string& r) { return ::rmdir((r + d).c_str()); });
          break;
        case 5: {
          const std::string to = "/d" + std::to_string(rnd.Uniform(6));
          Both("rename " + d + " " + to + "/sub", [&](const std::string& r) {
            return ::rename((r + d).c_str(), (r + to + "/sub").c_str());
          });
          break;
        }
        default:
          Write(f, rnd.Uniform(3000));
      }
    }
  }

  std::chrono::milliseconds slowest() const { return slowest_; }
  int calls() const { return calls_; }

 private:
  const std::string mnt_, plain_;
  const std::chrono::milliseconds bound_;
  std::chrono::milliseconds slowest_{0};
  int calls_ = 0;
};

// Relative path -> size (-1 for a directory) of everything under `root` (not `root` itself).
std::map<std::string, int64_t> TreeOf(const std::string& root) {
  std::map<std::string, int64_t> out;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    const std::string rel = e.path().string().substr(root.size());
    if (e.is_symlink()) continue;
    out[rel] = e.is_directory() ? -1 : static_cast<int64_t>(e.file_size());
  }
  return out;
}

// The same as the mount's index lists it (the mount's root is its volume's: in-volume paths
// are relative to it); the search's error when it fails.
Result<std::map<std::string, int64_t>> IndexOf(const std::string& mnt) {
  auto client = LocalClient();
  if (client == nullptr) return Status::Internal("no client");
  std::map<std::string, int64_t> out;
  for (const char* q : {"type=f", "type=d"}) {
    ClientSearchOptions so;
    so.scope = mnt;
    auto hits = client->SearchAll(q, so);
    if (!hits.ok()) return hits.status();
    for (const ClientHit& h : *hits) {
      // One hit per file; a file with several links has each of its paths in its record.
      for (const std::string& p : h.record.paths) {
        if (p == "/") continue;
        out[p] = h.record.type == FileType::kDirectory ? -1 : static_cast<int64_t>(h.record.size);
      }
    }
  }
  return out;
}

// "" when the index lists exactly the backing tree; else what differs (a few lines).
std::string IndexDiff(const Mount& m) {
  Result<std::map<std::string, int64_t>> index = IndexOf(m.mnt());
  if (!index.ok()) return "search failed: " + index.status().ToString();
  const std::map<std::string, int64_t> tree = TreeOf(m.backing());
  std::string diff;
  int shown = 0;
  for (const auto& [p, size] : tree) {
    auto it = index->find(p);
    if (it == index->end() || it->second != size) {
      if (shown++ < 5) diff += "  tree has " + p + " (" + std::to_string(size) + ")\n";
    }
  }
  for (const auto& [p, size] : *index) {
    auto it = tree.find(p);
    if (it == tree.end() || it->second != size) {
      if (shown++ < 10) diff += "  index has " + p + " (" + std::to_string(size) + ")\n";
    }
  }
  return diff;
}

// A search while updates may be queued: exact, or the clear "index catching up".
void ExpectExactOrCatchingUp(const Mount& m) {
  Result<std::map<std::string, int64_t>> index = IndexOf(m.mnt());
  if (!index.ok()) {
    EXPECT_TRUE(IsIndexCatchingUp(index.status())) << index.status().ToString();
    // A query directory says the same as EAGAIN.
    DIR* d = ::opendir((m.mnt() + "/?type=f").c_str());
    if (d == nullptr) {
      EXPECT_EQ(errno, EAGAIN) << std::strerror(errno);
    } else {
      ::closedir(d);
    }
    return;
  }
  EXPECT_EQ(IndexDiff(m), "") << "a search answered, so it must be exact";
}

// Waits (60 s at most) until the index lists exactly the backing tree.
void ExpectIndexConverges(const Mount& m) {
  std::string diff;
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while ((diff = IndexDiff(m)) != "" && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(200ms);
  }
  EXPECT_EQ(diff, "") << "mount log:\n" << ReadAll(m.log());
}

TEST(MountFaultTest, AFullDataDiskNeitherFailsCallsNorLosesUpdates) {
  Mount m;
  Tmpfs data(m.data(), "64m");
  ASSERT_TRUE(data.ok());
  ASSERT_TRUE(m.Start());
  Mirror mirror(m.mnt(), m.root() + "/plain", 10s);
  Random rnd(TestSeed());
  for (int i = 0; i < 6; ++i) {
    mirror.Both("mkdir", [&](const std::string& r) {
      return ::mkdir((r + "/d" + std::to_string(i)).c_str(), 0755);
    });
  }
  mirror.RandomOps(rnd, 200);
  ExpectIndexConverges(m);

  // The index's disk is full: every call keeps succeeding as it does on the plain directory.
  const std::string filler = FillDisk(m.data());
  for (int round = 0; round < 4; ++round) {
    mirror.RandomOps(rnd, 300);
    ExpectExactOrCatchingUp(m);
  }
  // Space comes back: the queue drains by itself and the index is exact again.
  ASSERT_EQ(::unlink(filler.c_str()), 0);
  mirror.RandomOps(rnd, 200);
  ExpectIndexConverges(m);
  EXPECT_TRUE(mirror.Both("mkdir /after", [](const std::string& r) {
    return ::mkdir((r + "/after").c_str(), 0755);
  }));

  // Full again, then a restart once space is back: nothing acknowledged is lost.
  const std::string filler2 = FillDisk(m.data());
  mirror.RandomOps(rnd, 300);
  ASSERT_TRUE(m.Stop());
  ASSERT_EQ(::unlink(filler2.c_str()), 0);
  ASSERT_TRUE(m.Start());
  ExpectIndexConverges(m);
  EXPECT_EQ(TreeOf(m.backing()), TreeOf(m.root() + "/plain"));
}

// A cluster of one master and one index node, and a mount of it whose index calls wait 1 s.
struct ClusterMount {
  ClusterMount()
      : cluster(ClusterConfig{.nodes = 1}),
        mount({"--index-timeout", "1000", "--search-wait", "300"},
              {"--master", cluster.master_endpoint(), "--cluster-key",
               cluster.cluster_key_file()}) {}
  bool Start() {
    if (!cluster.Start()) return false;
    auto client = Client::Connect(cluster.client_options());
    if (!client.ok() || !cluster.WaitNodesUp(**client, 1)) {
      ADD_FAILURE() << "the cluster did not come up:\n" << cluster.Logs();
      return false;
    }
    return mount.Start();
  }
  LocalCluster cluster;
  Mount mount;
};

TEST(MountFaultTest, AKilledIndexNodeNeitherFailsNorStallsCalls) {
  ClusterMount c;
  ASSERT_TRUE(c.Start());
  Mount& m = c.mount;
  // The bound: the index calls of one operation wait 1 s in all (--index-timeout), plus room
  // for a loaded machine.
  Mirror mirror(m.mnt(), m.root() + "/plain", 3s);
  Random rnd(TestSeed() + 1);
  for (int i = 0; i < 6; ++i) {
    mirror.Both("mkdir", [&](const std::string& r) {
      return ::mkdir((r + "/d" + std::to_string(i)).c_str(), 0755);
    });
  }
  mirror.RandomOps(rnd, 150);
  ExpectIndexConverges(m);

  c.cluster.node(0).Kill();
  for (int round = 0; round < 4; ++round) {
    mirror.RandomOps(rnd, 100);
    ExpectExactOrCatchingUp(m);
  }
  std::printf("slowest call with the node down: %lld ms of %d\n",
              static_cast<long long>(mirror.slowest().count()), mirror.calls());
  ASSERT_TRUE(c.cluster.StartNode(0));
  mirror.RandomOps(rnd, 100);
  ExpectIndexConverges(m);
  EXPECT_EQ(TreeOf(m.backing()), TreeOf(m.root() + "/plain"));
}

TEST(MountFaultTest, ADamagedQueueIsARefusalToStartAndLosesNothing) {
  ClusterMount c;
  ASSERT_TRUE(c.Start());
  Mount& m = c.mount;
  Mirror mirror(m.mnt(), m.root() + "/plain", 3s);
  Random rnd(TestSeed() + 2);
  for (int i = 0; i < 6; ++i) {
    mirror.Both("mkdir", [&](const std::string& r) {
      return ::mkdir((r + "/d" + std::to_string(i)).c_str(), 0755);
    });
  }
  ExpectIndexConverges(m);
  c.cluster.node(0).Kill();
  mirror.RandomOps(rnd, 100);
  ASSERT_TRUE(m.Stop());  // the updates stay queued in DATA/pending
  const std::string queue = m.data() + "/pending/queue";
  const std::string good = ReadAll(queue);
  ASSERT_GT(good.size(), 1000u);

  // A flipped byte in the middle: not a torn tail (intact records follow), so no start.
  std::string bad = good;
  bad[good.size() / 2] = static_cast<char>(bad[good.size() / 2] ^ 0x40);
  testing::WriteFile(queue, bad);
  ASSERT_TRUE(m.FailsToStart());
  const std::string log = ReadAll(m.log());
  EXPECT_NE(log.find(queue), std::string::npos) << log;
  EXPECT_NE(log.find("damaged"), std::string::npos) << log;
  EXPECT_EQ(ReadAll(queue), bad) << "a damaged queue must be left as it is";

  // Repaired (here: the good copy back), it is delivered once the node is back.
  testing::WriteFile(queue, good);
  ASSERT_TRUE(c.cluster.StartNode(0));
  ASSERT_TRUE(m.Start());
  ExpectIndexConverges(m);
}

// Path -> bytes of every file under `dir`.
std::map<std::string, std::string> FilesUnder(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) out[e.path().string()] = ReadAll(e.path().string());
  }
  return out;
}

// Runs the CLI with `args` (its output to `out`); its exit status, 124 when it ran 30 s.
int RunCli(const std::string& args, const std::string& out) {
  const std::string cmd =
      "timeout 30 " + std::string(PROPELLER_CLI_BIN) + " " + args + " >" + out + " 2>&1";
  const int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

// docs/faults.md "Damaged or missing files": an embedded service whose index node has data but
// whose master's map is gone refuses to start (the node would be registered anew and every
// file placed again), names the file and what to do, and removes nothing; with the map back
// it serves the index it had, exactly.
TEST(MountFaultTest, AMissingMasterMapIsARefusalToStartAndDeletesNothing) {
  Mount m;
  ASSERT_TRUE(m.Start());
  Mirror mirror(m.mnt(), m.root() + "/plain", 10s);
  Random rnd(TestSeed() + 4);
  for (int i = 0; i < 6; ++i) {
    mirror.Both("mkdir", [&](const std::string& r) {
      return ::mkdir((r + "/d" + std::to_string(i)).c_str(), 0755);
    });
  }
  mirror.RandomOps(rnd, 150);
  ExpectIndexConverges(m);
  ASSERT_TRUE(m.Stop());

  const std::string map = m.data() + "/master/data.mdb", saved = m.root() + "/map.saved";
  ASSERT_TRUE(fs::exists(m.data() + "/node/node_id"));
  fs::copy_file(map, saved);
  ASSERT_TRUE(fs::remove(map));
  const std::map<std::string, std::string> before = FilesUnder(m.data());

  // Both ways of running the embedded service: a mount, and `propeller up`.
  const std::string out = m.root() + "/refusal.out";
  const std::vector<std::string> starts = {
      "mount " + m.backing() + " " + m.mnt() + " --data " + m.data(),
      "up --data " + m.data() + " --listen ipc://" + m.root() + "/up-master.sock" +
          " --node-listen ipc://" + m.root() + "/up-node.sock"};
  for (const std::string& start : starts) {
    SCOPED_TRACE(start);
    EXPECT_EQ(RunCli(start, out), 1);
    const std::string said = ReadAll(out);
    EXPECT_NE(said.find("the master's map " + map + " is missing"), std::string::npos) << said;
    EXPECT_NE(said.find("Restore it from a backup"), std::string::npos) << said;
    EXPECT_EQ(FilesUnder(m.data()), before) << "a refusal must leave the data as it is";
    EXPECT_TRUE(List(m.mnt()).empty()) << "nothing may be mounted";
  }

  // The map restored: the mount starts, and a search lists exactly the tree at once.
  fs::copy_file(saved, map);
  ASSERT_TRUE(m.Start());
  EXPECT_EQ(IndexDiff(m), "") << "mount log:\n" << ReadAll(m.log());
  mirror.RandomOps(rnd, 50);
  ExpectIndexConverges(m);
  EXPECT_EQ(TreeOf(m.backing()), TreeOf(m.root() + "/plain"));
}

// The data files of the mount's embedded index node (its store's shards), largest first.
std::vector<std::string> AcgDataFiles(const Mount& m) {
  std::vector<std::pair<uintmax_t, std::string>> found;
  for (const auto& e : fs::directory_iterator(m.data() + "/node/store")) {
    const fs::path data = e.path() / "data.mdb";
    if (fs::exists(data)) found.emplace_back(fs::file_size(data), data.string());
  }
  std::sort(found.rbegin(), found.rend());
  std::vector<std::string> out;
  for (auto& [size, path] : found) out.push_back(std::move(path));
  return out;
}

TEST(MountFaultTest, ADamagedPartitionIsQuarantinedAndRebuiltFromTheTree) {
  Mount m;
  ASSERT_TRUE(m.Start());
  Mirror mirror(m.mnt(), m.root() + "/plain", 10s);
  Random rnd(TestSeed() + 3);
  for (int i = 0; i < 6; ++i) {
    mirror.Both("mkdir", [&](const std::string& r) {
      return ::mkdir((r + "/d" + std::to_string(i)).c_str(), 0755);
    });
  }
  mirror.RandomOps(rnd, 600);
  ExpectIndexConverges(m);
  ASSERT_TRUE(m.Stop());

  // Truncated: found at start, set aside, rebuilt before the mount serves.
  const std::vector<std::string> data = AcgDataFiles(m);
  ASSERT_FALSE(data.empty());
  const std::string whole = ReadAll(data[0]);
  testing::WriteFile(data[0], whole.substr(0, whole.size() / 2));
  ASSERT_TRUE(m.Start());
  EXPECT_EQ(IndexDiff(m), "") << "the rebuilt index must be exact at once";
  std::string log = ReadAll(m.log());
  EXPECT_NE(log.find(data[0]), std::string::npos) << log;
  EXPECT_NE(log.find(" damaged partition(s) from "), std::string::npos) << log;
  ASSERT_TRUE(fs::exists(m.data() + "/node/quarantine"));
  mirror.RandomOps(rnd, 100);
  ExpectIndexConverges(m);
  ASSERT_TRUE(m.Stop());

  // A flipped bit inside stored records: found when read; searches fail clearly, not short;
  // the next start rebuilds.
  int flipped = 0;
  for (const std::string& f : AcgDataFiles(m)) {
    LmdbCheckStats stats;
    ASSERT_TRUE(CheckLmdbFile(f, /*deep=*/true, &stats).ok());
    std::string bytes = ReadAll(f);
    // Records are stored behind the byte 0xC1 and a checksum: damage one in each live leaf
    // page that holds one.
    for (uint64_t page : stats.leaf_pages) {
      const size_t start = page * 4096, end = start + 4096;
      const size_t at = bytes.find('\xC1', start + 16);
      if (at == std::string::npos || at + 12 >= end) continue;
      bytes[at + 10] ^= 0x01;
      ++flipped;
    }
    testing::WriteFile(f, bytes);
  }
  ASSERT_GT(flipped, 0);
  ASSERT_TRUE(m.Start());
  // The start itself may read damaged records (the directories' records are read at open):
  // then it quarantined and rebuilt the partition before serving. Otherwise the first search
  // that reads one fails, naming the file, and the next start rebuilds.
  Result<std::map<std::string, int64_t>> index = IndexOf(m.mnt());
  if (index.ok()) {
    EXPECT_NE(ReadAll(m.log()).find("fails its checksum; quarantined"), std::string::npos)
        << "a search read damaged records and answered";
    EXPECT_EQ(IndexDiff(m), "");
  } else {
    EXPECT_NE(index.status().ToString().find("data.mdb"), std::string::npos)
        << index.status().ToString();
    ASSERT_TRUE(m.Stop());
    ASSERT_TRUE(m.Start());
  }
  ExpectIndexConverges(m);
  EXPECT_EQ(TreeOf(m.backing()), TreeOf(m.root() + "/plain"));
}

}  // namespace
}  // namespace propeller
