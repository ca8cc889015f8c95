// The capture client on real FUSE mounts (issue 4): `propeller mount` runs as a child process
// with its embedded master and index node; the tests act on the mount and check against
// independent oracles — the backing tree itself, a plain directory given the same operations,
// and what each user may see by walking the tree.
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "client/lib/propeller.h"
#include "common/dir_fd.h"
#include "common/random.h"
#include "common/tree_walk.h"
#include "tests/cluster_harness.h"
#include "tests/mount_harness.h"

namespace propeller {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::BecomeUser;
using testing::ChildProcess;
using testing::InChildAs;
using testing::IndexedFileSizes;
using testing::List;
using testing::LocalClient;
using testing::Mount;
using testing::ReadAll;
using testing::RemoveTreeAt;
using testing::ScopedFd;
using testing::SearchMount;
using testing::WriteFile;

// Runs argv as uid/gid (no supplementary groups) in a child; returns its exit status and
// stdout.
int RunAs(uid_t uid, gid_t gid, const std::vector<std::string>& argv, std::string* out) {
  int pipefd[2];
  if (::pipe(pipefd) != 0) return -1;
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(pipefd[1], 1);
    ::close(pipefd[0]);
    if (!BecomeUser(uid, gid)) ::_exit(126);
    ::setenv("HOME", "/tmp", 1);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  ::close(pipefd[1]);
  out->clear();
  char buf[4096];
  ssize_t n;
  while ((n = ::read(pipefd[0], buf, sizeof(buf))) > 0) out->append(buf, static_cast<size_t>(n));
  ::close(pipefd[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

std::set<std::string> Lines(const std::string& text) {
  std::set<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) out.insert(line);
  }
  return out;
}

// ---- make: the ACG of a real build -------------------------------------------------------

TEST(FuseTest, MakeBuildCapturesProducerEdgesAndNothingBetweenUnrelatedTargets) {
  Mount m;
  ASSERT_TRUE(m.Start());
  const std::string proj = m.mnt() + "/proj";
  ASSERT_EQ(::mkdir(proj.c_str(), 0755), 0);
  // Two unrelated programs: app from a.c, b.c (+ common.h); tool from t.c (+ tool.h).
  WriteFile(proj + "/common.h", "int a(void);\nint b(void);\n");
  WriteFile(proj + "/a.c", "#include \"common.h\"\nint a(void) { return 1; }\n");
  WriteFile(proj + "/b.c", "#include \"common.h\"\nint b(void) { return 2; }\n"
                           "int main(void) { return a() + b() - 3; }\n");
  WriteFile(proj + "/tool.h", "#define TOOL 7\n");
  WriteFile(proj + "/t.c", "#include \"tool.h\"\nint main(void) { return TOOL - 7; }\n");
  WriteFile(proj + "/Makefile",
            "all: app tool\n"
            "app: a.o b.o\n\tcc -o app a.o b.o\n"
            "tool: t.o\n\tcc -o tool t.o\n"
            "a.o: a.c common.h\n\tcc -c a.c -o a.o\n"
            "b.o: b.c common.h\n\tcc -c b.c -o b.o\n"
            "t.o: t.c tool.h\n\tcc -c t.c -o t.o\n");
  std::string out;
  ASSERT_EQ(RunAs(0, 0, {"make", "-s", "-C", proj}, &out), 0) << out << ReadAll(m.log());
  ASSERT_EQ(std::system((proj + "/app").c_str()), 0);

  // File ids from the backing tree (the oracle for identity).
  std::map<uint64_t, std::string> name_of;
  for (const char* f : {"common.h", "a.c", "b.c", "tool.h", "t.c", "a.o", "b.o", "t.o", "app",
                        "tool", "Makefile"}) {
    struct stat st;
    ASSERT_EQ(::lstat((m.backing() + "/proj/" + f).c_str(), &st), 0) << f;
    name_of[st.st_ino] = f;
  }
  auto client = LocalClient();
  ASSERT_NE(client, nullptr);
  // The mount flushes edges when the processes exit; the master endpoint is the embedded one.
  std::string ready = ReadAll(m.root() + "/ready");
  std::string master = ready.substr(ready.find("master ") + 7);
  master = master.substr(0, master.find('\n'));
  ClientOptions co;
  co.master_endpoint = master;
  auto cluster = Client::Connect(co);
  ASSERT_TRUE(cluster.ok());
  const std::set<std::pair<std::string, std::string>> want = {
      {"a.c", "a.o"},    {"common.h", "a.o"}, {"b.c", "b.o"}, {"common.h", "b.o"},
      {"t.c", "t.o"},    {"tool.h", "t.o"},   {"a.o", "app"}, {"b.o", "app"},
      {"t.o", "tool"}};
  std::set<std::pair<std::string, std::string>> got;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (std::chrono::steady_clock::now() < deadline) {
    auto edges = (*cluster)->ListEdges();
    ASSERT_TRUE(edges.ok()) << edges.status().ToString();
    got.clear();
    for (const AcgEdge& e : *edges) {
      auto s = name_of.find(e.src.ino), d = name_of.find(e.dst.ino);
      if (s != name_of.end() && d != name_of.end()) got.insert({s->second, d->second});
    }
    if (std::includes(got.begin(), got.end(), want.begin(), want.end())) break;
    std::this_thread::sleep_for(200ms);
  }
  for (const auto& e : want) {
    EXPECT_TRUE(got.count(e)) << "missing edge " << e.first << " -> " << e.second;
  }
  // The CLI shows the same graph: a.o's producers and products, from inside the mount.
  std::string shown;
  ASSERT_EQ(RunAs(0, 0, {PROPELLER_CLI_BIN, "acg", "show", proj + "/a.o"}, &shown), 0) << shown;
  const std::set<std::string> lines = Lines(shown);
  for (const char* f : {"a.c", "common.h", "app"}) {
    EXPECT_TRUE(std::any_of(lines.begin(), lines.end(), [&](const std::string& l) {
      return l.size() > proj.size() && l.compare(l.size() - proj.size() - 1 - std::strlen(f),
                                                 std::string::npos, proj + "/" + f) == 0;
    })) << f << " missing from:\n" << shown;
  }
  std::string stats;
  ASSERT_EQ(RunAs(0, 0, {"/bin/sh", "-c", "cd " + proj + " && " PROPELLER_CLI_BIN " acg stats --json"},
                  &stats),
            0);
  EXPECT_NE(stats.find("\"total\":{"), std::string::npos) << stats;
  const std::set<std::string> app_side = {"common.h", "a.c", "b.c", "a.o", "b.o", "app"};
  const std::set<std::string> tool_side = {"tool.h", "t.c", "t.o", "tool"};
  for (const auto& [src, dst] : got) {
    const bool cross = (app_side.count(src) && tool_side.count(dst)) ||
                       (tool_side.count(src) && app_side.count(dst));
    EXPECT_FALSE(cross) << "edge between unrelated targets: " << src << " -> " << dst;
  }
}

// ---- freshness -----------------------------------------------------------------------------

TEST(FuseTest, EveryClosedWriteIsFoundAtOnceAndDeletedOrRenamedFilesNever) {
  Mount m;
  ASSERT_TRUE(m.Start());
  auto client = LocalClient();
  ASSERT_NE(client, nullptr);
  const std::string dir = m.mnt() + "/fresh";
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  ClientSearchOptions so;
  so.scope = dir;
  int misses = 0;
  for (int i = 0; i < 1000; ++i) {
    SCOPED_TRACE("iteration " + std::to_string(i));
    const std::string name = "f" + std::to_string(i % 37);
    const std::string path = dir + "/" + name;
    const size_t size = 100 + static_cast<size_t>(i);
    WriteFile(path, std::string(size, 'x'));  // closed when the stream goes
    // The library, through the mount's query engine.
    auto hits = client->SearchAll("name=" + name, so);
    ASSERT_TRUE(hits.ok()) << hits.status().ToString();
    ASSERT_EQ(hits->size(), 1u);
    EXPECT_EQ((*hits)[0].path, path);
    if ((*hits)[0].record.size != size) ++misses;
    // A query directory, listed right away.
    const std::string qdir = dir + "/?name=" + name + "&size=" + std::to_string(size);
    std::vector<std::string> entries = List(qdir);
    ASSERT_EQ(entries, std::vector<std::string>{name});
    struct stat st;
    ASSERT_EQ(::stat((qdir + "/" + name).c_str(), &st), 0);  // through the symlink
    EXPECT_EQ(static_cast<size_t>(st.st_size), size);
    if (i % 10 == 9) {
      const std::string renamed = dir + "/r" + std::to_string(i);
      ASSERT_EQ(::rename(path.c_str(), renamed.c_str()), 0);
      EXPECT_TRUE(List(dir + "/?name=" + name).empty());
      auto again = client->SearchAll("name=r" + std::to_string(i), so);
      ASSERT_TRUE(again.ok());
      ASSERT_EQ(again->size(), 1u);
      EXPECT_EQ((*again)[0].path, renamed);
      ASSERT_EQ(::unlink(renamed.c_str()), 0);
      EXPECT_TRUE(List(dir + "/?name=r" + std::to_string(i)).empty());
      auto gone = client->SearchAll("name=r" + std::to_string(i), so);
      ASSERT_TRUE(gone.ok());
      EXPECT_TRUE(gone->empty());
    }
  }
  EXPECT_EQ(misses, 0) << "searches that saw an old size";
  // The CLI finds the engine by itself and prints paths under the mount point.
  std::string out;
  ASSERT_EQ(RunAs(0, 0, {PROPELLER_CLI_BIN, "search", "name=f1", "--scope", dir}, &out), 0);
  EXPECT_EQ(Lines(out), (std::set<std::string>{dir + "/f1"}));
  // Without --master or a scope, from inside the mount: the mount answers (an embedded
  // mount's master has a socket of its own, which a plain search missed), with the paths
  // under the mount point that --scope prints (docs/cli.md "Global options").
  ASSERT_EQ(RunAs(0, 0, {"/bin/sh", "-c", "cd " + dir + " && unset PROPELLER_MASTER && "
                          PROPELLER_CLI_BIN " search name=f1"}, &out), 0) << out;
  EXPECT_EQ(out, dir + "/f1\n");
  // propeller find on a path in the mount prints what find prints there.
  std::string want, got;
  ASSERT_EQ(RunAs(0, 0, {"/bin/sh", "-c", "cd " + dir + " && find . -name 'f*' | sort"}, &want),
            0);
  ASSERT_EQ(RunAs(0, 0, {"/bin/sh", "-c", "cd " + dir + " && " PROPELLER_CLI_BIN
                          " find . -name 'f*' | sort"}, &got), 0) << got;
  EXPECT_FALSE(want.empty());
  EXPECT_EQ(got, want);
}

// The master forgets deleted files in the background (issue 4: off the delete path). A file
// that reuses a deleted file's inode number must keep its own placement whatever the timing
// of that forget: every live file stays routable by a client that asks the master afresh,
// and once the forgets are through, the master maps exactly the files that exist.
TEST(FuseTest, FilesThatReuseADeletedInodeNumberKeepTheirPlacement) {
  Mount m;
  ASSERT_TRUE(m.Start());
  std::string ready = ReadAll(m.root() + "/ready");
  std::string master = ready.substr(ready.find("master ") + 7);
  master = master.substr(0, master.find('\n'));
  auto cluster_client = [&] {
    ClientOptions co;
    co.master_endpoint = master;
    auto c = Client::Connect(co);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(*c) : nullptr;
  };
  auto cluster = cluster_client();
  ASSERT_NE(cluster, nullptr);
  auto before = cluster->GetStatus();
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  const std::string dir = m.mnt() + "/reuse";
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  constexpr int kFiles = 200;
  int reused = 0;
  std::map<std::string, uint64_t> live;  // in-volume path -> inode
  for (int i = 0; i < kFiles; ++i) {
    const std::string a = dir + "/a" + std::to_string(i), b = dir + "/b" + std::to_string(i);
    WriteFile(a, "old");
    struct stat sa, sb;
    ASSERT_EQ(::stat(a.c_str(), &sa), 0);
    ASSERT_EQ(::unlink(a.c_str()), 0);
    WriteFile(b, "new");
    ASSERT_EQ(::stat(b.c_str(), &sb), 0);
    if (sb.st_ino == sa.st_ino) ++reused;
    live["/reuse/b" + std::to_string(i)] = sb.st_ino;
    if (i % 3 == 0) {
      // Deleted again while the first forget may still be queued or in flight.
      ASSERT_EQ(::unlink(b.c_str()), 0);
      live.erase("/reuse/b" + std::to_string(i));
      WriteFile(a, "again");
      ASSERT_EQ(::stat(a.c_str(), &sa), 0);
      live["/reuse/a" + std::to_string(i)] = sa.st_ino;
    }
  }
  EXPECT_GT(reused, kFiles / 4) << "the backing file system did not reuse inode numbers";
  // Let queued forgets reach the master (they gather for a few milliseconds).
  const uint64_t want_files = before->files + 1 + live.size();  // + the directory
  auto deadline = std::chrono::steady_clock::now() + 10s;
  uint64_t files = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    auto st = cluster->GetStatus();
    ASSERT_TRUE(st.ok()) << st.status().ToString();
    files = st->files;
    if (files == want_files) break;
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(files, want_files) << "the master maps other files than the live ones";
  // Every live file is routable from scratch (a new client asks the master) and indexed with
  // its own path.
  auto fresh = cluster_client();
  ASSERT_NE(fresh, nullptr);
  for (const auto& [path, ino] : live) {
    SCOPED_TRACE(path);
    auto id = fresh->FileIdOf(m.backing() + path);
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    ASSERT_EQ(id->ino, ino);
    auto rec = fresh->Get(*id);
    ASSERT_TRUE(rec.ok()) << rec.status().ToString();
    EXPECT_EQ(rec->paths, std::vector<std::string>{path});
  }
}

// ---- the mount behaves like the plain directory ---------------------------------------------

struct Entry {
  char type = 0;
  uint64_t size = 0;
  mode_t mode = 0;
  nlink_t nlink = 0;
  std::string content;  // file data or link target
  std::string xattr;    // user.tag
  int64_t mtime = 0;    // only for entries given explicit times (-1 otherwise)
  bool operator==(const Entry&) const = default;
};

std::map<std::string, Entry> Snapshot(const std::string& root, const std::set<std::string>& timed) {
  std::map<std::string, Entry> out;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator();
       ++it) {
    const std::string abs = it->path().string();
    const std::string rel = abs.substr(root.size());
    struct stat st;
    if (::lstat(abs.c_str(), &st) != 0) continue;
    Entry e;
    e.mode = st.st_mode;
    e.nlink = S_ISDIR(st.st_mode) ? 0 : st.st_nlink;
    e.mtime = timed.count(rel) ? st.st_mtim.tv_sec : -1;
    if (S_ISREG(st.st_mode)) {
      e.type = 'f';
      e.size = static_cast<uint64_t>(st.st_size);
      e.content = ReadAll(abs);
    } else if (S_ISLNK(st.st_mode)) {
      e.type = 'l';
      char buf[4096];
      ssize_t n = ::readlink(abs.c_str(), buf, sizeof(buf));
      e.content.assign(buf, n > 0 ? static_cast<size_t>(n) : 0);
    } else if (S_ISDIR(st.st_mode)) {
      e.type = 'd';
    }
    if (!S_ISLNK(st.st_mode)) {
      char buf[256];
      ssize_t n = ::getxattr(abs.c_str(), "user.tag", buf, sizeof(buf));
      if (n > 0) e.xattr.assign(buf, static_cast<size_t>(n));
    }
    out[rel] = e;
  }
  return out;
}

// The body of the random-operations tests, on a mount started with `mount_flags`.
void RandomOperationsMatchAPlainDirectory(const std::vector<std::string>& mount_flags);

TEST(FuseTest, RandomOperationsGiveTheSameTreeAsAPlainDirectoryAndAnExactIndex) {
  RandomOperationsMatchAPlainDirectory({});
}

// The same with the kernel's writeback cache and long timeouts (how the benchmark mounts):
// the kernel then owns size and mtime, and the index must still follow every close.
TEST(FuseTest, RandomOperationsWithTheWritebackCacheGiveTheSameTreeAndAnExactIndex) {
  RandomOperationsMatchAPlainDirectory({"--writeback", "--cache-timeout", "86400"});
}

void RandomOperationsMatchAPlainDirectory(const std::vector<std::string>& mount_flags) {
  Mount m(mount_flags);
  ASSERT_TRUE(m.Start());
  const std::string plain = m.root() + "/plain";
  const std::string mine = m.mnt() + "/r";
  ASSERT_EQ(::mkdir(plain.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(mine.c_str(), 0755), 0);
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (PROPELLER_SEED)");
  std::mt19937_64 rng(seed);
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  std::vector<std::string> files, dirs = {""};
  std::set<std::string> timed;
  int applied = 0;
  for (int step = 0; step < 600; ++step) {
    const int op = static_cast<int>(pick(12));
    // Each op runs on both trees; errno results must agree.
    auto both = [&](auto fn) {
      errno = 0;
      int a = fn(plain);
      int ea = a < 0 ? errno : 0;
      errno = 0;
      int b = fn(mine);
      int eb = b < 0 ? errno : 0;
      EXPECT_EQ(ea, eb) << "step " << step << " op " << op;
      if (ea == 0) ++applied;
      return ea == 0;
    };
    const std::string d = dirs[pick(dirs.size())];
    if (op <= 2 || files.empty()) {  // create or overwrite a file
      std::string f = d + "/f" + std::to_string(pick(40));
      std::string data(pick(3000), static_cast<char>('a' + pick(26)));
      if (both([&](const std::string& r) {
            int fd = ::open((r + f).c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
            if (fd < 0) return -1;
            ssize_t n = ::write(fd, data.data(), data.size());
            ::close(fd);
            return n == static_cast<ssize_t>(data.size()) ? 0 : -1;
          })) {
        if (std::find(files.begin(), files.end(), f) == files.end()) files.push_back(f);
      }
    } else if (op == 3) {  // mkdir
      std::string nd = d + "/d" + std::to_string(pick(8));
      if (both([&](const std::string& r) { return ::mkdir((r + nd).c_str(), 0755); })) {
        dirs.push_back(nd);
      }
    } else if (op == 4) {  // rename a file
      std::string f = files[pick(files.size())];
      std::string to = dirs[pick(dirs.size())] + "/m" + std::to_string(pick(40));
      if (both([&](const std::string& r) { return ::rename((r + f).c_str(), (r + to).c_str()); })) {
        std::erase(files, f);
        std::erase(files, to);
        files.push_back(to);
      }
    } else if (op == 5 && dirs.size() > 1) {  // rename a directory (its subtree moves)
      std::string from = dirs[1 + pick(dirs.size() - 1)];
      std::string to = dirs[pick(dirs.size())] + "/n" + std::to_string(pick(8));
      if (both([&](const std::string& r) { return ::rename((r + from).c_str(), (r + to).c_str()); })) {
        auto move = [&](std::string& p) {
          if (p == from || p.rfind(from + "/", 0) == 0) p = to + p.substr(from.size());
        };
        for (std::string& f : files) move(f);
        for (std::string& x : dirs) move(x);
        std::set<std::string> t2;
        for (std::string t : timed) {
          move(t);
          t2.insert(t);
        }
        timed = t2;
        std::sort(dirs.begin(), dirs.end());
        dirs.erase(std::unique(dirs.begin(), dirs.end()), dirs.end());
      }
    } else if (op == 6) {  // unlink
      std::string f = files[pick(files.size())];
      if (both([&](const std::string& r) { return ::unlink((r + f).c_str()); })) {
        std::erase(files, f);
        timed.erase(f);
      }
    } else if (op == 7) {  // hard link
      std::string f = files[pick(files.size())];
      std::string to = dirs[pick(dirs.size())] + "/h" + std::to_string(pick(20));
      if (both([&](const std::string& r) { return ::link((r + f).c_str(), (r + to).c_str()); })) {
        files.push_back(to);
      }
    } else if (op == 8) {  // symlink
      std::string to = d + "/s" + std::to_string(pick(10));
      std::string target = "../t" + std::to_string(pick(5));
      both([&](const std::string& r) { return ::symlink(target.c_str(), (r + to).c_str()); });
    } else if (op == 9) {  // chmod / truncate
      std::string f = files[pick(files.size())];
      const mode_t mode = pick(2) ? 0600 : 0640;
      const off_t len = static_cast<off_t>(pick(500));
      both([&](const std::string& r) {
        return ::chmod((r + f).c_str(), mode) == 0 ? ::truncate((r + f).c_str(), len) : -1;
      });
    } else if (op == 10) {  // explicit times
      std::string f = files[pick(files.size())];
      struct timespec tv[2] = {{1700000000 + static_cast<time_t>(pick(1000)), 0},
                               {1600000000 + static_cast<time_t>(pick(100000)), 0}};
      if (both([&](const std::string& r) { return ::utimensat(AT_FDCWD, (r + f).c_str(), tv, 0); })) {
        timed.insert(f);
      }
    } else if (op == 11) {  // user.* xattr / rmdir
      if (pick(2) == 0) {
        std::string f = files[pick(files.size())];
        std::string v = "v" + std::to_string(pick(100));
        both([&](const std::string& r) {
          return ::setxattr((r + f).c_str(), "user.tag", v.data(), v.size(), 0);
        });
      } else if (dirs.size() > 1) {
        std::string x = dirs[1 + pick(dirs.size() - 1)];
        if (both([&](const std::string& r) { return ::rmdir((r + x).c_str()); })) std::erase(dirs, x);
      }
    }
  }
  EXPECT_GT(applied, 300);
  // Same tree, same attributes.
  auto a = Snapshot(plain, timed);
  auto b = Snapshot(mine, timed);
  EXPECT_EQ(a.size(), b.size());
  for (const auto& [path, e] : a) {
    auto it = b.find(path);
    if (it == b.end()) {
      ADD_FAILURE() << "missing on the mount: " << path;
      continue;
    }
    EXPECT_EQ(e.type, it->second.type) << path;
    EXPECT_EQ(e.size, it->second.size) << path;
    EXPECT_EQ(e.mode, it->second.mode) << path;
    EXPECT_EQ(e.nlink, it->second.nlink) << path;
    EXPECT_EQ(e.content, it->second.content) << path;
    EXPECT_EQ(e.xattr, it->second.xattr) << path;
    EXPECT_EQ(e.mtime, it->second.mtime) << path;
  }
  // The index holds exactly the tree: every path with its size and type.
  std::vector<ClientHit> hits;
  ASSERT_NO_FATAL_FAILURE(SearchMount("size>=0", mine, &hits));
  std::map<std::string, std::pair<char, uint64_t>> indexed;
  std::map<std::string, std::string> record_of;  // for failure messages
  for (const ClientHit& h : hits) {
    std::string all;
    for (const std::string& p : h.record.paths) all += p + " ";
    all += "ino " + std::to_string(h.record.id.ino) + " nlink " + std::to_string(h.record.nlink);
    for (const std::string& p : h.record.paths) {
      const std::string host = m.mnt() + p;
      if (host.rfind(mine + "/", 0) != 0) continue;
      indexed[host.substr(mine.size())] = {static_cast<char>(h.record.type), h.record.size};
      record_of[host.substr(mine.size())] = all;
      // The rest of the record against the backing file read independently (the oracle:
      // ReadFileRecord, what an import would index). Not atime (the comparison above read the
      // files) nor ctime (a hard link's unlink changes its other links' ctime unindexed).
      // Directories too: creating or removing an entry changes their nlink and mtime, and the
      // mount re-indexes them for it.
      FileRecord truth_rec;
      if (!ReadFileRecord(m.backing() + p, p, h.record.id.volume, 0, &truth_rec).ok()) continue;
      EXPECT_EQ(h.record.id.ino, truth_rec.id.ino) << p;
      EXPECT_EQ(h.record.mode, truth_rec.mode) << p;
      EXPECT_EQ(h.record.uid, truth_rec.uid) << p;
      EXPECT_EQ(h.record.gid, truth_rec.gid) << p;
      EXPECT_EQ(h.record.attrs, truth_rec.attrs) << p;
      EXPECT_EQ(h.record.nlink, truth_rec.nlink) << p;
      if (h.record.type == FileType::kRegular || h.record.type == FileType::kDirectory) {
        EXPECT_EQ(h.record.mtime, truth_rec.mtime) << p;
      }
    }
  }
  std::map<std::string, std::pair<char, uint64_t>> truth;
  for (const auto& [path, e] : b) {
    truth[path] = {e.type, e.type == 'f' ? e.size : indexed.count(path) ? indexed[path].second : 0};
  }
  EXPECT_EQ(indexed.size(), truth.size());
  for (const auto& [path, t] : truth) {
    auto it = indexed.find(path);
    if (it == indexed.end()) {
      ADD_FAILURE() << "not indexed: " << path;
      continue;
    }
    EXPECT_EQ(it->second.first, t.first) << path;
    if (t.first == 'f') {
      EXPECT_EQ(it->second.second, t.second) << path;
    }
  }
  for (const auto& [path, t] : indexed) {
    EXPECT_TRUE(truth.count(path)) << "indexed but not in the tree: " << path << " (record "
                                   << record_of[path] << ")";
  }
}

// ---- isolation between users -----------------------------------------------------------------

TEST(FuseTest, UsersSeeOnlyWhatTheyCouldFindByWalkingTheTree) {
  Mount m;
  ASSERT_TRUE(m.Start());
  const uid_t alice = 41001, bob = 41002;
  const gid_t alice_g = 41001, bob_g = 41002;
  const std::string home = m.mnt() + "/home";
  ASSERT_EQ(::mkdir(home.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((home + "/shared").c_str(), 0755), 0);
  ASSERT_EQ(::chmod((home + "/shared").c_str(), 01777), 0);  // like /tmp
  for (auto [user, group, name] : {std::tuple{alice, alice_g, "alice"}, {bob, bob_g, "bob"}}) {
    const std::string dir = home + "/" + name;
    ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
    ASSERT_EQ(::chown(dir.c_str(), user, group), 0);
    std::string out;
    // The users write through the mount themselves: files are theirs, as on a local disk.
    ASSERT_EQ(RunAs(user, group,
                    {"/bin/sh", "-c",
                     std::string("echo secret > ") + dir + "/private.txt && echo hi > " + home +
                         "/shared/" + name + ".txt"},
                    &out),
              0);
    struct stat st;
    ASSERT_EQ(::stat((m.backing() + "/home/" + name + "/private.txt").c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, user);
  }
  struct Case {
    uid_t uid;
    gid_t gid;
    std::set<std::string> visible;
  };
  for (const Case& c : {Case{alice, alice_g, {"alice%2Fprivate.txt", "shared%2Falice.txt",
                                               "shared%2Fbob.txt"}},
                        Case{bob, bob_g, {"bob%2Fprivate.txt", "shared%2Falice.txt",
                                           "shared%2Fbob.txt"}}}) {
    SCOPED_TRACE("uid " + std::to_string(c.uid));
    std::string out;
    ASSERT_EQ(RunAs(c.uid, c.gid, {"/bin/ls", "-1", home + "/?type=f"}, &out), 0);
    EXPECT_EQ(Lines(out), c.visible);
    ASSERT_EQ(RunAs(c.uid, c.gid, {PROPELLER_CLI_BIN, "search", "type=f", "--scope", home}, &out),
              0);
    std::set<std::string> want;
    for (std::string v : c.visible) {
      v.replace(v.find("%2F"), 3, "/");
      want.insert(home + "/" + v);
    }
    EXPECT_EQ(Lines(out), want);
    // The other user's file cannot be reached through a query directory entry either.
    const std::string other = c.uid == alice ? "bob%2Fprivate.txt" : "alice%2Fprivate.txt";
    ASSERT_NE(RunAs(c.uid, c.gid, {"/bin/cat", home + "/?type=f/" + other}, &out), 0);
  }
  // Root sees both.
  std::vector<std::string> all = List(home + "/?name=private.txt");
  EXPECT_EQ(all, (std::vector<std::string>{"alice%2Fprivate.txt", "bob%2Fprivate.txt"}));
}

// ---- set-user-ID and set-group-ID bits ----------------------------------------------------

int WriteAt(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags);
  if (fd < 0) return errno;
  const int rc = ::write(fd, "x", 1) == 1 ? 0 : errno;
  return ::close(fd) == 0 ? rc : errno;
}

// The mount negotiates FUSE_HANDLE_KILLPRIV_V2 (client/fuse/kernel_io.h), so the daemon, not the
// kernel, drops set-user-ID and set-group-ID bits on write, truncate and chown. The plain
// directory beside it is the oracle: after the same operation by the same user, the modes match.
void SetIdBitsDropAsOnAPlainDirectory(const std::vector<std::string>& mount_flags) {
  Mount m(mount_flags);
  ASSERT_TRUE(m.Start());
  const std::string plain = m.root() + "/plain";
  const std::string mine = m.mnt() + "/s";
  ASSERT_EQ(::mkdir(plain.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(mine.c_str(), 0755), 0);
  constexpr uid_t kUser = 12345;
  struct Case {
    const char* what;
    mode_t mode;
    uid_t owner;
    uid_t by;
    std::function<int(const std::string&)> op;
  };
  const std::vector<Case> cases = {
      {"write by another user", 06777, 0, kUser, [](const std::string& p) {
         return WriteAt(p, O_WRONLY);
       }},
      {"append by another user", 06777, 0, kUser, [](const std::string& p) {
         return WriteAt(p, O_WRONLY | O_APPEND);
       }},
      {"write by the owner", 06777, kUser, kUser, [](const std::string& p) {
         return WriteAt(p, O_WRONLY);
       }},
      {"write, set-group-ID without group execute", 02766, 0, kUser, [](const std::string& p) {
         return WriteAt(p, O_WRONLY);
       }},
      {"write by the owner, set-group-ID without group execute", 02766, kUser, kUser,
       [](const std::string& p) { return WriteAt(p, O_WRONLY); }},
      {"truncate(2) by another user", 06777, 0, kUser, [](const std::string& p) {
         return ::truncate(p.c_str(), 1) == 0 ? 0 : errno;
       }},
      {"ftruncate by another user", 06777, 0, kUser, [](const std::string& p) {
         const int fd = ::open(p.c_str(), O_WRONLY);
         if (fd < 0) return errno;
         const int rc = ::ftruncate(fd, 0) == 0 ? 0 : errno;
         ::close(fd);
         return rc;
       }},
      {"open with O_TRUNC by another user", 06777, 0, kUser, [](const std::string& p) {
         return WriteAt(p, O_WRONLY | O_TRUNC);
       }},
      {"write by root", 06777, 0, 0, [](const std::string& p) { return WriteAt(p, O_WRONLY); }},
      {"truncate(2) by root", 06777, 0, 0, [](const std::string& p) {
         return ::truncate(p.c_str(), 1) == 0 ? 0 : errno;
       }},
      {"chown by root", 06755, 0, 0, [](const std::string& p) {
         return ::chown(p.c_str(), kUser, kUser) == 0 ? 0 : errno;
       }},
  };
  int n = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    mode_t modes[2];
    int results[2];
    for (int side = 0; side < 2; ++side) {
      const std::string path = (side == 0 ? plain : mine) + "/f" + std::to_string(n);
      {
        std::ofstream(path) << "content";
      }
      ASSERT_EQ(::chown(path.c_str(), c.owner, c.owner), 0) << path;
      // A first write while the file has no set-ID bit lets the kernel mark the inode as
      // having nothing to kill (S_NOSEC); the chmod that follows must undo that.
      ASSERT_EQ(::chmod(path.c_str(), c.mode & 0777), 0) << path;
      ASSERT_EQ(InChildAs(c.by, c.by, [&] { return WriteAt(path, O_WRONLY | O_APPEND); }), 0);
      ASSERT_EQ(::chmod(path.c_str(), c.mode), 0) << path;
      results[side] = InChildAs(c.by, c.by, [&] { return c.op(path); });
      struct stat st;
      ASSERT_EQ(::stat(path.c_str(), &st), 0) << path;
      modes[side] = st.st_mode & 07777;
    }
    EXPECT_EQ(results[1], results[0]);
    EXPECT_EQ(modes[1], modes[0]) << std::oct << "plain 0" << modes[0] << ", mount 0" << modes[1];
    ++n;
  }
  // A file already open when it gains its set-ID bits (with kernel passthrough the new
  // open must join the open file's passthrough mode, so the mount drops the bits at open),
  // then written by another user through a second descriptor.
  {
    mode_t modes[2];
    for (int side = 0; side < 2; ++side) {
      const std::string path = (side == 0 ? plain : mine) + "/held";
      {
        std::ofstream(path) << "content";
      }
      ASSERT_EQ(::chmod(path.c_str(), 0777), 0);
      ScopedFd holder(::open(path.c_str(), O_RDONLY));
      ASSERT_GE(holder.fd, 0) << std::strerror(errno);
      ASSERT_EQ(::chmod(path.c_str(), 06777), 0);
      ASSERT_EQ(InChildAs(kUser, kUser, [&] { return WriteAt(path, O_WRONLY); }), 0);
      struct stat st;
      ASSERT_EQ(::stat(path.c_str(), &st), 0);
      modes[side] = st.st_mode & 07777;
      ASSERT_EQ(holder.Close(), 0);
    }
    EXPECT_EQ(modes[1], modes[0]) << std::oct << "plain 0" << modes[0] << ", mount 0" << modes[1];
  }
  // The suid/sgid bits of the plain tree did change in the cases above (the oracle is not
  // vacuous): a write by another user drops both.
  struct stat st;
  ASSERT_EQ(::stat((plain + "/f0").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0777u);
}

TEST(FuseTest, SetIdBitsDropOnWriteTruncateAndChownAsOnAPlainDirectory) {
  SetIdBitsDropAsOnAPlainDirectory({});
}

TEST(FuseTest, SetIdBitsDropAsOnAPlainDirectoryWithTheWritebackCache) {
  SetIdBitsDropAsOnAPlainDirectory({"--writeback", "--cache-timeout", "86400"});
}

// ---- kernel passthrough ------------------------------------------------------------------------

// Counts the requests of one opcode in a --debug mount log ("opcode: WRITE (16)").
int CountRequests(const std::string& log, const std::string& opcode) {
  int n = 0;
  const std::string key = "opcode: " + opcode + " (";
  for (size_t at = log.find(key); at != std::string::npos; at = log.find(key, at + 1)) ++n;
  return n;
}

// File I/O that stresses passthrough's rules (one backing id per inode while any handle is
// open; ids dropped and registered again; mmap; O_APPEND; truncate of an open file), checked
// against the backing files, the mount's own attributes and the index. With passthrough the
// daemon must see no READ or WRITE request at all; without it, it must see them (so the
// check can fail).
void FileIoMatchesTheBackingFiles(bool passthrough) {
  std::vector<std::string> flags = {"--debug"};
  if (!passthrough) flags.push_back("--no-passthrough");
  Mount m(flags);
  ASSERT_TRUE(m.Start());
  const std::string dir = m.mnt() + "/io", back = m.backing() + "/io";
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  // Two handles of one file at once (a writer and a reader), then more opens and closes of
  // the same inode than one id would survive if ids were not shared and dropped correctly.
  const std::string a = dir + "/a";
  ScopedFd w(::open(a.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644));
  ASSERT_GE(w.fd, 0) << std::strerror(errno);
  ASSERT_EQ(::write(w.fd, "first ", 6), 6);
  ScopedFd r(::open(a.c_str(), O_RDONLY));
  ASSERT_GE(r.fd, 0) << std::strerror(errno);
  ASSERT_EQ(::write(w.fd, "second", 6), 6);
  char buf[64] = {};
  ASSERT_EQ(::pread(r.fd, buf, sizeof(buf), 0), 12);
  EXPECT_EQ(std::string(buf, 12), "first second");
  ASSERT_EQ(r.Close(), 0);
  ASSERT_EQ(w.Close(), 0);
  std::string expect = "first second";
  for (int i = 0; i < 50; ++i) {
    ScopedFd fd(::open(a.c_str(), (i % 2 ? O_RDONLY : O_WRONLY | O_APPEND)));
    ASSERT_GE(fd.fd, 0) << "open " << i << ": " << std::strerror(errno);
    if (i % 2 == 0) {
      ASSERT_EQ(::write(fd.fd, "+", 1), 1);
      expect += "+";
    }
    ASSERT_EQ(fd.Close(), 0);
  }
  EXPECT_EQ(ReadAll(back + "/a"), expect);
  // mmap: a shared writable map through the mount lands in the backing file.
  const std::string b = dir + "/b";
  WriteFile(b, std::string(8192, 'b'));
  {
    ScopedFd fd(::open(b.c_str(), O_RDWR));
    ASSERT_GE(fd.fd, 0) << std::strerror(errno);
    void* p = ::mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd.fd, 0);
    ASSERT_NE(p, MAP_FAILED) << std::strerror(errno);
    std::memcpy(static_cast<char*>(p) + 4096, "mapped", 6);
    ASSERT_EQ(::msync(p, 8192, MS_SYNC), 0);
    ASSERT_EQ(::munmap(p, 8192), 0);
    // Truncate the open file, then grow it by a write past the end.
    ASSERT_EQ(::ftruncate(fd.fd, 4102), 0);
    ASSERT_EQ(::pwrite(fd.fd, "z", 1, 5000), 1);
    ASSERT_EQ(fd.Close(), 0);
  }
  std::string want_b = std::string(4096, 'b') + "mapped" + std::string(898, '\0') + "z";
  EXPECT_EQ(ReadAll(back + "/b"), want_b);
  EXPECT_EQ(ReadAll(b), want_b);
  // The mount's attributes and the index follow every close.
  struct stat st_a, st_b;
  ASSERT_EQ(::stat(a.c_str(), &st_a), 0);
  ASSERT_EQ(::stat(b.c_str(), &st_b), 0);
  EXPECT_EQ(static_cast<size_t>(st_a.st_size), expect.size());
  EXPECT_EQ(static_cast<size_t>(st_b.st_size), want_b.size());
  std::map<std::string, uint64_t> sizes;
  ASSERT_NO_FATAL_FAILURE(IndexedFileSizes(dir, &sizes));
  EXPECT_EQ(sizes, (std::map<std::string, uint64_t>{{a, expect.size()}, {b, want_b.size()}}));
  const std::string log = ReadAll(m.log());
  const int io = CountRequests(log, "WRITE") + CountRequests(log, "READ");
  if (passthrough) {
    EXPECT_NE(log.find("kernel passthrough on"), std::string::npos)
        << "this kernel did not offer FUSE_PASSTHROUGH (Linux 6.9+, CONFIG_FUSE_PASSTHROUGH)";
    EXPECT_EQ(io, 0) << "reads or writes reached the daemon";
    EXPECT_EQ(log.find("passthrough refused"), std::string::npos) << log;
  } else {
    EXPECT_EQ(log.find("kernel passthrough on"), std::string::npos);
    EXPECT_GT(io, 0);
  }
  EXPECT_GT(CountRequests(log, "FLUSH"), 50);  // every close still reaches the daemon
}

TEST(FuseTest, KernelPassthroughServesFileIoWithoutTheDaemonAndKeepsTheIndexExact) {
  FileIoMatchesTheBackingFiles(/*passthrough=*/true);
}

TEST(FuseTest, WithoutPassthroughTheDaemonServesFileIoAndKeepsTheIndexExact) {
  FileIoMatchesTheBackingFiles(/*passthrough=*/false);
}

// ---- the polling reader ------------------------------------------------------------------

// The number in the daemon's closing line "..., N requests served by the polling reader";
// -1 when the line is missing.
long long PolledRequests(const std::string& log) {
  const std::string tail = " requests served by the polling reader";
  const size_t end = log.rfind(tail);
  if (end == std::string::npos) return -1;
  const size_t start = log.rfind(' ', end - 1);
  return std::stoll(log.substr(start + 1, end - start - 1));
}

// Calls issued back to back (create, write, close, stat, rename, unlink; as cp, tar or make
// do) are partly served by the poller, which reads and answers through its own clone of the
// device; the results are those of the backing directory and the index stays exact. With
// --poll-us 0 there is no poller and the same work gives the same results.
void BackToBackCalls(bool poll) {
  std::vector<std::string> flags;
  if (!poll) flags = {"--poll-us", "0"};
  Mount m(flags);
  ASSERT_TRUE(m.Start());
  const std::string dir = m.mnt() + "/b2b";
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  constexpr int kFiles = 300;
  for (int i = 0; i < kFiles; ++i) {
    const std::string p = dir + "/f" + std::to_string(i);
    ScopedFd fd(::open(p.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644));
    ASSERT_GE(fd.fd, 0) << p << ": " << std::strerror(errno);
    const std::string data(static_cast<size_t>(i + 1), 'x');
    ASSERT_EQ(::write(fd.fd, data.data(), data.size()), static_cast<ssize_t>(data.size()));
    ASSERT_EQ(fd.Close(), 0);
    struct stat st;
    ASSERT_EQ(::stat(p.c_str(), &st), 0);
    ASSERT_EQ(st.st_size, i + 1);
    if (i % 3 == 0) {
      ASSERT_EQ(::rename(p.c_str(), (p + ".r").c_str()), 0);
    } else if (i % 3 == 1) {
      ASSERT_EQ(::unlink(p.c_str()), 0);
    }
  }
  // The oracle: the backing directory, read directly.
  std::map<std::string, uint64_t> want;
  for (const auto& e : fs::directory_iterator(m.backing() + "/b2b")) {
    want[dir + "/" + e.path().filename().string()] = fs::file_size(e.path());
  }
  ASSERT_EQ(want.size(), static_cast<size_t>(kFiles - kFiles / 3));
  std::vector<std::string> names = List(dir);
  ASSERT_EQ(names.size(), want.size());
  std::map<std::string, uint64_t> indexed;
  ASSERT_NO_FATAL_FAILURE(IndexedFileSizes(dir, &indexed));
  EXPECT_EQ(indexed, want);
  ASSERT_TRUE(m.Stop());
  const long long polled = PolledRequests(ReadAll(m.log()));
  if (poll) {
    EXPECT_GT(polled, 0) << ReadAll(m.log());
  } else {
    EXPECT_EQ(polled, 0) << ReadAll(m.log());
  }
}

TEST(FuseTest, APollingReaderServesBackToBackCallsAndTheResultsStayExact) {
  BackToBackCalls(/*poll=*/true);
}

TEST(FuseTest, WithoutThePollingReaderTheSameCallsGiveTheSameResults) {
  BackToBackCalls(/*poll=*/false);
}

// ---- stopping ----------------------------------------------------------------------------

// SIGTERM ends the daemon even while a file is open on the mount (a lazy unmount alone would
// keep the connection, and the daemon, alive until it is closed): calls on the open file that
// need the daemon then fail with ENOTCONN, and the mount point is free again.
TEST(FuseTest, SigtermEndsTheDaemonEvenWithAFileOpenOnTheMount) {
  Mount m;
  ASSERT_TRUE(m.Start());
  const std::string path = m.mnt() + "/held";
  WriteFile(path, "data");
  ScopedFd fd(::open(path.c_str(), O_RDONLY));
  ASSERT_GE(fd.fd, 0) << std::strerror(errno);
  ASSERT_TRUE(m.SignalAndWait(SIGTERM)) << "the daemon did not end; log:\n" << ReadAll(m.log());
  // A call that needs the daemon (passthrough reads would not: they go to the backing file).
  errno = 0;
  EXPECT_EQ(::fchmod(fd.fd, 0600), -1);
  EXPECT_EQ(errno, ENOTCONN);
  std::string cmd = "mountpoint -q " + m.mnt();
  EXPECT_NE(std::system(cmd.c_str()), 0) << m.mnt() << " is still a mount point";
  EXPECT_NE(ReadAll(m.log()).find("aborting the connection"), std::string::npos);
  EXPECT_EQ(ReadAll(m.backing() + "/held"), "data");
}

// ---- query directories: behaviour and errors --------------------------------------------------

TEST(FuseTest, QueryDirectoriesBehaveLikeReadOnlyDirectoriesAndReportBadQueries) {
  Mount m;
  ASSERT_TRUE(m.Start());
  const std::string src = m.mnt() + "/src";
  ASSERT_EQ(::mkdir(src.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((src + "/lib").c_str(), 0755), 0);
  WriteFile(src + "/big.bin", std::string(3 << 20, 'b'));
  WriteFile(src + "/lib/big2.bin", std::string(2 << 20, 'c'));
  WriteFile(src + "/small.txt", "s");
  WriteFile(m.mnt() + "/outside.bin", std::string(4 << 20, 'o'));
  // Scope = the directory before '?'; recursive; names encode the relative path.
  const std::string q = src + "/?size>1m";
  EXPECT_EQ(List(q), (std::vector<std::string>{"big.bin", "lib%2Fbig2.bin"}));
  EXPECT_EQ(ReadAll(q + "/lib%2Fbig2.bin"), std::string(2 << 20, 'c'));  // cat through it
  char target[256];
  ssize_t n = ::readlink((q + "/lib%2Fbig2.bin").c_str(), target, sizeof(target));
  ASSERT_GT(n, 0);
  EXPECT_EQ(std::string(target, static_cast<size_t>(n)), "../lib/big2.bin");
  struct stat st;
  ASSERT_EQ(::stat(q.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  // cd into it, then relative paths work.
  std::string out;
  ASSERT_EQ(RunAs(0, 0, {"/bin/sh", "-c", "cd '" + q + "' && cat big.bin | wc -c"}, &out), 0);
  EXPECT_EQ(out, std::to_string(3 << 20) + "\n");
  // find -L follows the entries.
  ASSERT_EQ(RunAs(0, 0, {"find", "-L", q, "-type", "f", "-size", "+1M"}, &out), 0);
  EXPECT_EQ(Lines(out), (std::set<std::string>{q + "/big.bin", q + "/lib%2Fbig2.bin"}));
  // Read-only.
  EXPECT_NE(::mkdir((q + "/x").c_str(), 0755), 0);
  EXPECT_EQ(::open((q + "/new").c_str(), O_WRONLY | O_CREAT, 0644), -1);
  EXPECT_NE(::unlink((q + "/big.bin").c_str()), 0);
  // A malformed query: EINVAL, and the log names the position.
  int err = 0;
  List(src + "/?size>>1m", &err);
  EXPECT_EQ(err, EINVAL);
  std::string log = ReadAll(m.log());
  EXPECT_NE(log.find("?size>>1m"), std::string::npos) << log;
  EXPECT_NE(log.find("error at"), std::string::npos) << log;
}

}  // namespace
}  // namespace propeller
