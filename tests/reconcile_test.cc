// Reconcile (docs/reconcile.md) on real mounts: a tree changed while it was not mounted —
// creates, writes, renames of files and directories, deletes, type changes, inode reuse — is
// mounted again, and the index must equal an lstat walk of the tree (the oracle). And
// Reconcile called directly on a one-node cluster, with the index read before, alongside or
// after a walk on one or several threads: the index must equal WalkTree's records (the
// oracle), hard links and user attributes included.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "client/lib/propeller.h"
#include "client/lib/reconcile.h"
#include "common/random.h"
#include "common/tree_walk.h"
#include "tests/mount_harness.h"

namespace propeller {
namespace {

namespace fs = std::filesystem;
using testing::ClusterConfig;
using testing::LocalCluster;
using testing::Mount;
using testing::ReadAll;
using testing::SearchMount;
using testing::WriteFile;

// type letter, size, mtime (ns) by path under the mount point.
using Listing = std::map<std::string, std::tuple<char, uint64_t, int64_t>>;

char TypeOf(mode_t m) { return S_ISDIR(m) ? 'd' : S_ISREG(m) ? 'f' : S_ISLNK(m) ? 'l' : 'o'; }

// The oracle: every entry below BACKING (the root excluded), as paths under the mount.
Listing WalkBacking(const Mount& m) {
  Listing out;
  for (auto it = fs::recursive_directory_iterator(m.backing()); it != fs::end(it); ++it) {
    struct stat st;
    if (::lstat(it->path().c_str(), &st) != 0) continue;
    const std::string rel = it->path().string().substr(m.backing().size());
    const uint64_t size = S_ISDIR(st.st_mode) ? 0 : static_cast<uint64_t>(st.st_size);
    out[m.mnt() + rel] = {TypeOf(st.st_mode), size,
                          int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec};
  }
  return out;
}

Listing Indexed(const Mount& m) {
  std::vector<ClientHit> hits;
  SearchMount("size>=0", m.mnt(), &hits);
  Listing out;
  for (const ClientHit& h : hits) {
    if (h.path == m.mnt()) continue;
    const uint64_t size = h.record.type == FileType::kDirectory ? 0 : h.record.size;
    out[h.path] = {static_cast<char>(h.record.type), size, h.record.mtime};
  }
  return out;
}

void ExpectSame(const Listing& index, const Listing& tree) {
  for (const auto& [path, v] : tree) {
    auto it = index.find(path);
    if (it == index.end()) {
      ADD_FAILURE() << "not indexed: " << path;
    } else if (it->second != v) {
      ADD_FAILURE() << "stale: " << path << " type " << std::get<0>(it->second) << "/"
                    << std::get<0>(v) << " size " << std::get<1>(it->second) << "/"
                    << std::get<1>(v) << " mtime " << std::get<2>(it->second) << "/"
                    << std::get<2>(v);
    }
  }
  for (const auto& [path, v] : index) {
    if (!tree.count(path)) ADD_FAILURE() << "ghost: " << path;
  }
}

// Random changes made to BACKING directly (no mount watching).
void ChangeTree(const std::string& root, Random* rnd, int ops) {
  std::vector<std::string> files, dirs = {root};
  auto collect = [&] {
    files.clear();
    dirs = {root};
    for (auto it = fs::recursive_directory_iterator(root); it != fs::end(it); ++it) {
      (it->is_directory() && !it->is_symlink() ? dirs : files).push_back(it->path().string());
    }
  };
  collect();
  int n = 0;
  for (int i = 0; i < ops; ++i) {
    const std::string dir = dirs[rnd->Uniform(dirs.size())];
    const std::string fresh = dir + "/n" + std::to_string(i);
    switch (rnd->Uniform(9)) {
      case 0:  // create
        WriteFile(fresh, std::string(rnd->Uniform(5000), 'c'));
        break;
      case 1:  // write (grow or truncate) an existing file
        if (!files.empty()) {
          const std::string& f = files[rnd->Uniform(files.size())];
          if (!fs::is_symlink(f)) WriteFile(f, std::string(rnd->Uniform(9000), 'w'));
        }
        break;
      case 2:  // rename a file, sometimes over another
        if (!files.empty()) {
          const std::string& f = files[rnd->Uniform(files.size())];
          const std::string to = rnd->OneIn(3) ? files[rnd->Uniform(files.size())] : fresh;
          (void)::rename(f.c_str(), to.c_str());
        }
        break;
      case 3:  // rename a directory
        if (dirs.size() > 1) {
          const std::string& d = dirs[1 + rnd->Uniform(dirs.size() - 1)];
          (void)::rename(d.c_str(), (root + "/r" + std::to_string(i)).c_str());
        }
        break;
      case 4:  // delete a file
        if (!files.empty()) (void)::unlink(files[rnd->Uniform(files.size())].c_str());
        break;
      case 5:  // delete a directory tree
        if (dirs.size() > 2 && rnd->OneIn(2)) {
          std::error_code ec;
          fs::remove_all(dirs[1 + rnd->Uniform(dirs.size() - 1)], ec);
        }
        break;
      case 6:  // type change: a file becomes a directory of the same name, or back
        if (!files.empty()) {
          const std::string f = files[rnd->Uniform(files.size())];
          if (::unlink(f.c_str()) == 0) {
            (void)::mkdir(f.c_str(), 0755);
            WriteFile(f + "/inside", "x");
          }
        } else if (dirs.size() > 1) {
          const std::string d = dirs[1 + rnd->Uniform(dirs.size() - 1)];
          std::error_code ec;
          fs::remove_all(d, ec);
          WriteFile(d, "now a file");
        }
        break;
      case 7:  // inode reuse: delete, then create at once elsewhere
        if (!files.empty()) {
          (void)::unlink(files[rnd->Uniform(files.size())].c_str());
          WriteFile(fresh, std::string(rnd->Uniform(300), 'r'));
        }
        break;
      case 8:  // new directory with a symlink in it
        if (::mkdir(fresh.c_str(), 0755) == 0) {
          (void)::symlink("../elsewhere", (fresh + "/link").c_str());
        }
        break;
    }
    if (++n % 10 == 0) collect();
  }
}

TEST(ReconcileTest, ChangesMadeWhileUnmountedAreInTheIndexAfterTheNextMount) {
  Mount m;
  ASSERT_TRUE(m.Start());
  for (int d = 0; d < 4; ++d) {
    const std::string dir = m.mnt() + "/d" + std::to_string(d);
    ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
    for (int f = 0; f < 25; ++f) WriteFile(dir + "/f" + std::to_string(f), std::string(f * 10, 'a'));
  }
  ASSERT_NO_FATAL_FAILURE(ExpectSame(Indexed(m), WalkBacking(m)));
  Random rnd(20261126);
  for (int round = 0; round < 4; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    ASSERT_TRUE(m.Stop());
    ChangeTree(m.backing(), &rnd, 120);
    ASSERT_TRUE(m.Start());
    ASSERT_NO_FATAL_FAILURE(ExpectSame(Indexed(m), WalkBacking(m)));
    EXPECT_NE(ReadAll(m.log()).find("reconciled " + m.backing()), std::string::npos);
    // The mount captures as before on top of the reconciled index.
    WriteFile(m.mnt() + "/after" + std::to_string(round), "after");
    ASSERT_NO_FATAL_FAILURE(ExpectSame(Indexed(m), WalkBacking(m)));
  }
}

TEST(ReconcileTest, AnUnchangedTreeIsReconciledWithoutSendingAnything) {
  Mount m;
  ASSERT_TRUE(m.Start());
  for (int f = 0; f < 50; ++f) WriteFile(m.mnt() + "/f" + std::to_string(f), "x");
  ASSERT_TRUE(m.Stop());
  ASSERT_TRUE(m.Start());
  const std::string log = ReadAll(m.log());
  EXPECT_NE(log.find("0 added, 0 changed, 0 removed"), std::string::npos) << log;
}

// ---- Reconcile called directly --------------------------------------------------------------

// The user attribute with an index (the index keeps only those).
constexpr const char* kIndexedAttr = "level";

// A record as the oracle and the index are compared: no access time (reconcile does not
// compare it, and listing a directory moves it), only the indexed attribute, no inode
// generation (WalkTree reads none; ExpectIndexIsTree checks those the index has).
FileRecord Comparable(FileRecord r) {
  r.atime = 0;
  r.inode_generation = 0;
  for (auto it = r.attrs.begin(); it != r.attrs.end();) {
    it = it->first == kIndexedAttr ? std::next(it) : r.attrs.erase(it);
  }
  return r;
}

// The oracle: WalkTree's records of the tree.
std::map<FileId, FileRecord> TreeRecords(const std::string& root, uint32_t volume) {
  std::map<FileId, FileRecord> out;
  EXPECT_TRUE(WalkTree(root, {.volume = volume}, [&](FileRecord&& r) {
                out[r.id] = Comparable(std::move(r));
                return Status::OK();
              }, nullptr).ok());
  return out;
}

// The index's records; with `root`, each inode generation it holds is checked against the
// file's own (a reconcile sends one with every new or changed regular file).
std::map<FileId, FileRecord> IndexRecords(Client* client, uint32_t volume,
                                          const std::string& root = "") {
  ClientSearchOptions so;
  so.volume = volume;
  so.scope = "/";
  auto hits = client->SearchAll("size>=0", so);
  EXPECT_TRUE(hits.ok()) << hits.status().ToString();
  std::map<FileId, FileRecord> out;
  if (hits.ok()) {
    for (ClientHit& h : *hits) {
      if (!root.empty() && h.record.inode_generation != 0 && !h.record.paths.empty()) {
        const std::string path = root + h.record.paths[0];
        const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        EXPECT_GE(fd, 0) << path;
        if (fd >= 0) {
          EXPECT_EQ(h.record.inode_generation, InodeGeneration(fd)) << path;
          ::close(fd);
        }
      }
      out[h.record.id] = Comparable(std::move(h.record));
    }
  }
  return out;
}

void ExpectIndexIsTree(Client* client, const std::string& root, uint32_t volume) {
  const std::map<FileId, FileRecord> tree = TreeRecords(root, volume);
  const std::map<FileId, FileRecord> index = IndexRecords(client, volume, root);
  for (const auto& [id, want] : tree) {
    auto it = index.find(id);
    if (it == index.end()) {
      ADD_FAILURE() << "not indexed: " << want.paths[0];
    } else if (it->second != want) {
      const FileRecord& got = it->second;
      ADD_FAILURE() << "stale: " << want.paths[0] << " (paths " << got.paths.size() << "/"
                    << want.paths.size() << " from " << got.paths[0] << ", parent "
                    << got.parent_ino << "/" << want.parent_ino << ", size " << got.size << "/"
                    << want.size << ", nlink " << got.nlink << "/" << want.nlink << ", ctime "
                    << FileTimeToString(got.ctime) << "/" << FileTimeToString(want.ctime)
                    << ", attrs " << got.attrs.size() << "/" << want.attrs.size() << ")";
    }
  }
  for (const auto& [id, got] : index) {
    if (!tree.count(id)) ADD_FAILURE() << "ghost: " << got.paths[0];
  }
}

// A one-node cluster with an index on kIndexedAttr, and trees to reconcile with it, each a
// volume of its own.
class DirectReconcileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ClusterConfig config;
    config.nodes = 1;
    config.ipc = true;
    cluster_ = std::make_unique<LocalCluster>(config);
    ASSERT_TRUE(cluster_->Start());
    auto client = Client::Connect(cluster_->client_options(/*timeout_ms=*/10000));
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_ = std::move(*client);
    ASSERT_TRUE(cluster_->WaitNodesUp(*client_, 1)) << cluster_->Logs();
    ASSERT_TRUE(client_->CreateIndex(kIndexedAttr, IndexType::kBTree).ok());
  }

  // A fresh directory (resolved: volumes are registered by real path) and its volume.
  void NewTree(std::string* root, uint32_t* volume) {
    trees_.push_back(std::make_unique<testing::TempDir>("reconcile-tree"));
    char real[PATH_MAX];
    ASSERT_NE(::realpath(trees_.back()->path().c_str(), real), nullptr);
    *root = real;
    auto v = client_->RegisterVolume(*root);
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    *volume = *v;
  }

  ReconcileStats Run(const std::string& root, uint32_t volume, const ReconcileOptions& o) {
    ReconcileStats stats;
    const Status st = Reconcile(client_.get(), root, volume, &stats, o);
    EXPECT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(stats.unreadable, 0u);
    return stats;
  }

  std::unique_ptr<LocalCluster> cluster_;
  std::unique_ptr<Client> client_;
  std::vector<std::unique_ptr<testing::TempDir>> trees_;
};

// Every way of running it: the index read alongside the walk, before it, after it (every file
// waits, and its record is read again), on one thread or several.
std::vector<std::pair<std::string, ReconcileOptions>> AllWays() {
  using IndexRead = ReconcileOptions::IndexRead;
  std::vector<std::pair<std::string, ReconcileOptions>> out;
  for (unsigned threads : {1u, 3u}) {
    for (auto [name, read] : {std::pair{"alongside", IndexRead::kAlongsideWalk},
                              std::pair{"before", IndexRead::kBeforeWalk},
                              std::pair{"after", IndexRead::kAfterWalk}}) {
      ReconcileOptions o;
      o.walk_threads = threads;
      o.index_read = read;
      out.emplace_back(std::string("index read ") + name + " the walk, " +
                           std::to_string(threads) + " walking threads",
                       o);
    }
  }
  return out;
}

void SetLevel(const std::string& path, int level) {
  const std::string v = std::to_string(level);
  ASSERT_EQ(::lsetxattr(path.c_str(), "user.level", v.data(), v.size(), 0), 0) << path;
}

// Random changes to a tree with hard links across directories and user attributes — the
// mount test's ChangeTree plus links made and removed and attributes set — reconciled in every
// way; after each reconcile the index is the tree's records, and a second reconcile finds
// nothing to send (whichever way ran before it).
TEST_F(DirectReconcileTest, EveryWayGivesTheTreesRecords) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (PROPELLER_SEED)");
  Random rnd(seed);
  const auto ways = AllWays();
  for (size_t k = 0; k < ways.size(); ++k) {
    const auto& [name, options] = ways[k];
    SCOPED_TRACE(name);
    std::string root;
    uint32_t volume = 0;
    ASSERT_NO_FATAL_FAILURE(NewTree(&root, &volume));
    std::vector<std::string> files;
    for (int d = 0; d < 5; ++d) {
      const std::string dir = root + "/d" + std::to_string(d);
      ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
      for (int f = 0; f < 30; ++f) {
        files.push_back(dir + "/f" + std::to_string(f));
        WriteFile(files.back(), std::string(rnd.Uniform(3000), 'a'));
        if (rnd.OneIn(4)) {
          ASSERT_NO_FATAL_FAILURE(SetLevel(files.back(), f));
        }
      }
    }
    for (int i = 0; i < 10; ++i) {
      const std::string link = root + "/d" + std::to_string(rnd.Uniform(5)) + "/l" +
                               std::to_string(i);
      ASSERT_EQ(::link(files[rnd.Uniform(files.size())].c_str(), link.c_str()), 0);
    }
    // The first reconcile of a volume the index knows nothing of adds everything.
    ReconcileStats first = Run(root, volume, options);
    EXPECT_EQ(first.indexed, 0u);
    EXPECT_EQ(first.added, first.walked);  // (a file with several links is one entry)
    ASSERT_NO_FATAL_FAILURE(ExpectIndexIsTree(client_.get(), root, volume));

    for (int round = 0; round < 3; ++round) {
      SCOPED_TRACE("round " + std::to_string(round));
      // Changes within a clock tick of the reconcile could leave a ctime unchanged.
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      ChangeTree(root, &rnd, 60);
      std::vector<std::string> now;
      for (auto it = fs::recursive_directory_iterator(root); it != fs::end(it); ++it) {
        if (it->is_regular_file() && !it->is_symlink()) now.push_back(it->path().string());
      }
      for (int i = 0; i < 8 && !now.empty(); ++i) {
        const std::string& f = now[rnd.Uniform(now.size())];
        switch (rnd.Uniform(3)) {
          case 0:
            ASSERT_NO_FATAL_FAILURE(SetLevel(f, static_cast<int>(rnd.Uniform(100))));
            break;
          case 1:
            (void)::link(f.c_str(), (f + "-link" + std::to_string(round)).c_str());
            break;
          case 2:
            (void)::lremovexattr(f.c_str(), "user.level");
            break;
        }
      }
      const ReconcileOptions& o = ways[(k + static_cast<size_t>(round)) % ways.size()].second;
      Run(root, volume, o);
      ASSERT_NO_FATAL_FAILURE(ExpectIndexIsTree(client_.get(), root, volume));
      const ReconcileStats again = Run(root, volume, options);
      EXPECT_EQ(again.added + again.changed + again.removed, 0u)
          << again.added << " added, " << again.changed << " changed, " << again.removed
          << " removed";
    }
  }
}

// Reconcile stats every file, whatever its directory says: in one directory whose mtime does
// not move, a file whose only change is a user attribute (only the ctime moves), a file
// rewritten in place at the same size, and one rewritten with its mtime set back after (only
// the ctime moves) are all picked up; the attribute's new value is searchable.
TEST_F(DirectReconcileTest, ChangesInsideAnUnchangedDirectoryArePickedUp) {
  for (const auto& [name, options] : AllWays()) {
    SCOPED_TRACE(name);
    std::string root;
    uint32_t volume = 0;
    ASSERT_NO_FATAL_FAILURE(NewTree(&root, &volume));
    const std::string dir = root + "/dir";
    ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
    for (int i = 0; i < 50; ++i) WriteFile(dir + "/f" + std::to_string(i), "original");
    ASSERT_NO_FATAL_FAILURE(SetLevel(dir + "/f1", 1));
    Run(root, volume, options);
    struct stat dir_before, before;
    ASSERT_EQ(::lstat(dir.c_str(), &dir_before), 0);
    ASSERT_EQ(::lstat((dir + "/f3").c_str(), &before), 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a later ctime

    ASSERT_NO_FATAL_FAILURE(SetLevel(dir + "/f1", 2));
    {
      const int fd = ::open((dir + "/f2").c_str(), O_WRONLY | O_CLOEXEC);
      ASSERT_GE(fd, 0);
      ASSERT_EQ(::pwrite(fd, "REWRITE!", 8, 0), 8);
      ::close(fd);
      const int fd3 = ::open((dir + "/f3").c_str(), O_WRONLY | O_CLOEXEC);
      ASSERT_GE(fd3, 0);
      ASSERT_EQ(::pwrite(fd3, "restored", 8, 0), 8);
      const struct timespec times[2] = {before.st_atim, before.st_mtim};
      ASSERT_EQ(::futimens(fd3, times), 0);
      ::close(fd3);
    }
    struct stat dir_after, after;
    ASSERT_EQ(::lstat(dir.c_str(), &dir_after), 0);
    ASSERT_EQ(::lstat((dir + "/f3").c_str(), &after), 0);
    ASSERT_EQ(dir_after.st_mtim.tv_sec, dir_before.st_mtim.tv_sec);  // the premise
    ASSERT_EQ(dir_after.st_mtim.tv_nsec, dir_before.st_mtim.tv_nsec);
    ASSERT_EQ(after.st_size, before.st_size);
    ASSERT_EQ(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);

    const ReconcileStats stats = Run(root, volume, options);
    EXPECT_EQ(stats.changed, 3u);
    EXPECT_EQ(stats.added + stats.removed, 0u);
    ASSERT_NO_FATAL_FAILURE(ExpectIndexIsTree(client_.get(), root, volume));
    ClientSearchOptions so;
    so.volume = volume;
    so.scope = "/";
    auto hits = client_->SearchAll("level=2", so);
    ASSERT_TRUE(hits.ok()) << hits.status().ToString();
    ASSERT_EQ(hits->size(), 1u);
    EXPECT_EQ((*hits)[0].path, dir + "/f1");
  }
}

}  // namespace
}  // namespace propeller
