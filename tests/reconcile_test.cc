// Reconcile (docs/reconcile.md) on real mounts: a tree changed while it was not mounted —
// creates, writes, renames of files and directories, deletes, type changes, inode reuse — is
// mounted again, and the index must equal an lstat walk of the tree (the oracle).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "client/lib/propeller.h"
#include "common/random.h"
#include "tests/mount_harness.h"

namespace propeller {
namespace {

namespace fs = std::filesystem;
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

}  // namespace
}  // namespace propeller
