// The access-causality capture on real mounts (docs/capture.md): who counts as a producer in
// a tree of processes, and that a file which reuses a deleted file's inode number inherits
// none of its edges. The oracle is the set of edges the rule gives for the processes run,
// checked by inode numbers read from the backing tree.
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <utility>

#include "client/lib/propeller.h"
#include "tests/mount_harness.h"

namespace propeller {
namespace {

using namespace std::chrono_literals;
using testing::Mount;
using testing::ReadAll;
using testing::WriteFile;

using EdgeSet = std::set<std::pair<uint64_t, uint64_t>>;  // (src ino, dst ino)

// A client of the mount's embedded master (it lists every edge).
std::unique_ptr<Client> ClusterClient(const Mount& m) {
  const std::string ready = ReadAll(m.root() + "/ready");
  std::string master = ready.substr(ready.find("master ") + 7);
  master = master.substr(0, master.find('\n'));
  ClientOptions co;
  co.master_endpoint = master;
  auto c = Client::Connect(co);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? std::move(*c) : nullptr;
}

uint64_t InoOf(const std::string& path) {
  struct stat st;
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st.st_ino;
}

EdgeSet Edges(Client* client) {
  EdgeSet out;
  auto edges = client->ListEdges();
  EXPECT_TRUE(edges.ok()) << edges.status().ToString();
  if (edges.ok()) {
    for (const AcgEdge& e : *edges) out.insert({e.src.ino, e.dst.ino});
  }
  return out;
}

// Waits (bounded) until every edge of `want` is listed; returns the last listing.
EdgeSet WaitForEdges(Client* client, const EdgeSet& want) {
  EdgeSet got;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (std::chrono::steady_clock::now() < deadline) {
    got = Edges(client);
    bool all = true;
    for (const auto& e : want) all &= got.count(e) != 0;
    if (all) break;
    std::this_thread::sleep_for(100ms);
  }
  return got;
}

int Sh(const std::string& script) { return std::system(("/bin/sh -c '" + script + "'").c_str()); }

// What `propeller acg show PATH` prints; a failing command fails the test.
std::string AcgShow(const std::string& path) {
  std::string shown;
  const std::string cmd = std::string(PROPELLER_CLI_BIN) + " acg show " + path;
  FILE* p = ::popen(cmd.c_str(), "r");
  EXPECT_NE(p, nullptr) << cmd;
  if (p == nullptr) return shown;
  char buf[4096];
  size_t len;
  while ((len = std::fread(buf, 1, sizeof(buf), p)) > 0) shown.append(buf, len);
  EXPECT_EQ(::pclose(p), 0) << shown;
  return shown;
}

TEST(CaptureTest, AFileThatReusesADeletedFilesNumberInheritsNoEdge) {
  Mount m;
  ASSERT_TRUE(m.Start());
  auto cluster = ClusterClient(m);
  ASSERT_NE(cluster, nullptr);
  const std::string d = m.mnt() + "/w";
  ASSERT_EQ(::mkdir(d.c_str(), 0755), 0);
  WriteFile(d + "/a.txt", "input\n");
  const uint64_t a = InoOf(m.backing() + "/w/a.txt");
  // The minimal case, then a loop of delete/create pairs: each new file must have no
  // producer, whichever number it got. A control edge per round shows the flushes happened.
  std::set<uint64_t> news;
  EdgeSet controls;
  for (int round = 0; round < 25; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const std::string n = "n" + std::to_string(round), keep = "keep" + std::to_string(round);
    ASSERT_EQ(Sh("cd " + d + " && cat a.txt >/dev/null && echo x > t && rm t"), 0);
    ASSERT_EQ(Sh("cd " + d + " && echo y > " + n), 0);
    ASSERT_EQ(Sh("cd " + d + " && cat a.txt >/dev/null && echo z > " + keep), 0);
    news.insert(InoOf(m.backing() + "/w/" + n));
    controls.insert({a, InoOf(m.backing() + "/w/" + keep)});
  }
  const EdgeSet got = WaitForEdges(cluster.get(), controls);
  for (const auto& e : controls) EXPECT_TRUE(got.count(e)) << e.first << " -> " << e.second;
  for (const auto& [src, dst] : got) {
    EXPECT_FALSE(news.count(dst)) << "a new file inherited the edge " << src << " -> " << dst;
  }
  // Through the CLI too: `acg show` of the minimal case's new file lists no producer.
  const std::string shown = AcgShow(d + "/n0");
  EXPECT_EQ(shown.find("a.txt"), std::string::npos) << shown;
  // A deleted file's edges go with it: no listed edge names a file that is gone.
  ASSERT_EQ(Sh("cd " + d + " && cat a.txt > /dev/null && echo q > gone"), 0);
  const uint64_t gone = InoOf(m.backing() + "/w/gone");
  ASSERT_TRUE(WaitForEdges(cluster.get(), {{a, gone}}).count({a, gone}));
  ASSERT_EQ(::unlink((d + "/gone").c_str()), 0);
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (Edges(cluster.get()).count({a, gone}) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_FALSE(Edges(cluster.get()).count({a, gone})) << "the deleted file kept its edge";
}

// The edge of a file written by another app's process is kept with its source, in another
// ACG than the written file: deleting the written file leaves it in storage. A new file that
// takes the number must still not inherit it: the edge names the deleted file's inode
// generation, the new file has another (docs/capture.md "Identity").
TEST(CaptureTest, AnEdgeHeldInAnotherAcgIsNotInherited) {
  Mount m;
  ASSERT_TRUE(m.Start());
  auto cluster = ClusterClient(m);
  ASSERT_NE(cluster, nullptr);
  const std::string d = m.mnt() + "/x";
  ASSERT_EQ(::mkdir(d.c_str(), 0755), 0);
  WriteFile(d + "/a.txt", "input\n");
  const uint64_t a = InoOf(m.backing() + "/x/a.txt");
  int reused = 0, stale_kept = 0;
  for (int round = 0; round < 12 && (reused < 3 || stale_kept < 1); ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const std::string n = "n" + std::to_string(round);
    // t is made by `touch` (its own app: another ACG than a.txt's), then written by a shell
    // that read a.txt: the edge a.txt -> t lives in a.txt's ACG.
    ASSERT_EQ(Sh("cd " + d + " && touch t"), 0);
    ASSERT_EQ(Sh("cd " + d + " && cat a.txt >/dev/null && echo x >> t"), 0);
    const uint64_t t = InoOf(m.backing() + "/x/t");
    ASSERT_TRUE(WaitForEdges(cluster.get(), {{a, t}}).count({a, t}));
    ASSERT_EQ(::unlink((d + "/t").c_str()), 0);
    ASSERT_EQ(Sh("cd " + d + " && echo y > " + n), 0);
    if (InoOf(m.backing() + "/x/" + n) != t) continue;
    ++reused;
    // The library lists what is stored; whether the old edge is still there depends on where
    // t was placed. Where it is, it must name another generation than the new file's.
    auto id = cluster->FileIdOf(m.backing() + "/x/" + n);
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    auto rec = cluster->Get(*id);
    ASSERT_TRUE(rec.ok()) << rec.status().ToString();
    ASSERT_NE(rec->inode_generation, 0u) << "the backing file system gave no generation";
    auto edges = cluster->ListEdges();
    ASSERT_TRUE(edges.ok());
    for (const AcgEdge& e : *edges) {
      if (e.src.ino != a || e.dst.ino != t) continue;
      ++stale_kept;
      EXPECT_NE(e.dst_generation, rec->inode_generation) << "a new file's edge, never written";
    }
    // `acg show` of the new file lists no producer.
    const std::string shown = AcgShow(d + "/" + n);
    EXPECT_EQ(shown.find("a.txt"), std::string::npos) << shown;
    EXPECT_NE(shown.find("no captured edges"), std::string::npos) << shown;
  }
  // ext4 reuses a freed number at once; without reuse or a kept edge there is nothing tested.
  EXPECT_GE(reused, 1);
  EXPECT_GE(stale_kept, 1) << "the edge never outlived its file's delete: not the case tested";
}

// A number reused while nothing was mounted: the old file's delete was never seen, so no
// delete dropped its edges. Reconcile at the next mount start sends the new file's record
// with its inode generation, which the index knows another one of: the old file's edges go
// (docs/capture.md "Identity"), and `acg show` of the new file lists no producer.
TEST(CaptureTest, ANumberReusedWhileUnmountedInheritsNoEdge) {
  Mount m;
  ASSERT_TRUE(m.Start());
  const std::string d = m.mnt() + "/u", b = m.backing() + "/u";
  ASSERT_EQ(::mkdir(d.c_str(), 0755), 0);
  WriteFile(d + "/a.txt", "input\n");
  ASSERT_EQ(Sh("cd " + d + " && cat a.txt >/dev/null && echo x > t"), 0);
  const uint64_t a = InoOf(b + "/a.txt"), t = InoOf(b + "/t");
  {
    auto cluster = ClusterClient(m);
    ASSERT_NE(cluster, nullptr);
    ASSERT_TRUE(WaitForEdges(cluster.get(), {{a, t}}).count({a, t}));
  }
  ASSERT_TRUE(m.Stop());
  // Behind the index's back: t goes, and new files are made until one takes its number.
  ASSERT_EQ(::unlink((b + "/t").c_str()), 0);
  std::string reused;
  for (int i = 0; i < 64 && reused.empty(); ++i) {
    const std::string n = "n" + std::to_string(i);
    WriteFile(b + "/" + n, "y\n");
    if (InoOf(b + "/" + n) == t) reused = n;
  }
  ASSERT_FALSE(reused.empty()) << "the file system never reused the number";
  ASSERT_TRUE(m.Start());
  auto cluster = ClusterClient(m);
  ASSERT_NE(cluster, nullptr);
  auto id = cluster->FileIdOf(b + "/" + reused);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  auto rec = cluster->Get(*id);
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  EXPECT_NE(rec->inode_generation, 0u) << "reconcile sent no generation";
  auto edges = cluster->ListEdges();
  ASSERT_TRUE(edges.ok());
  for (const AcgEdge& e : *edges) {
    if (e.src.ino == a && e.dst.ino == t) {
      EXPECT_NE(e.dst_generation, rec->inode_generation) << "the old file's edge was kept as new";
    }
  }
  const std::string shown = AcgShow(d + "/" + reused);
  EXPECT_EQ(shown.find("a.txt"), std::string::npos) << shown;
}

TEST(CaptureTest, ABuildOfSeveralProcessLevelsGivesItsRealProducersOnly) {
  // make -> sh -> gen.sh -> sed reads list.txt; the shell's redirect writes list.h. make reads
  // the Makefile itself; cc (a driver) runs cc1 and as for a.o. Expected edges: list.txt ->
  // list.h, gen.sh -> list.h (sh reads the script), a.c/list.h -> a.o, a.o -> app; nothing from
  // the Makefile, nothing between the two targets' inputs.
  Mount m;
  ASSERT_TRUE(m.Start());
  auto cluster = ClusterClient(m);
  ASSERT_NE(cluster, nullptr);
  const std::string proj = m.mnt() + "/proj";
  ASSERT_EQ(::mkdir(proj.c_str(), 0755), 0);
  WriteFile(proj + "/list.txt", "alpha\nbeta\n");
  WriteFile(proj + "/gen.sh", "#!/bin/sh\nsed 's/.*/#define &_ 1/' \"$1\"\n");
  ASSERT_EQ(::chmod((proj + "/gen.sh").c_str(), 0755), 0);
  WriteFile(proj + "/a.c", "#include \"list.h\"\nint main(void) { return alpha_ - 1; }\n");
  WriteFile(proj + "/other.txt", "unrelated\n");
  WriteFile(proj + "/Makefile",
            "all: app copy.txt\n"
            "list.h: list.txt gen.sh\n\t./gen.sh list.txt > list.h\n"
            "a.o: a.c list.h\n\tcc -c a.c -o a.o\n"
            "app: a.o\n\tcc -o app a.o\n"
            "copy.txt: other.txt\n\tcat other.txt > copy.txt\n");
  ASSERT_EQ(Sh("make -s -j1 -C " + proj + " >/dev/null 2>&1"), 0) << ReadAll(m.log());
  std::map<std::string, uint64_t> ino;
  for (const char* f : {"list.txt", "gen.sh", "list.h", "a.c", "a.o", "app", "Makefile",
                        "other.txt", "copy.txt"}) {
    ino[f] = InoOf(m.backing() + "/proj/" + f);
  }
  const EdgeSet want = {{ino["list.txt"], ino["list.h"]}, {ino["a.c"], ino["a.o"]},
                        {ino["list.h"], ino["a.o"]},      {ino["a.o"], ino["app"]},
                        {ino["other.txt"], ino["copy.txt"]}};
  const EdgeSet got = WaitForEdges(cluster.get(), want);
  std::map<uint64_t, std::string> name;
  for (const auto& [n, i] : ino) name[i] = n;
  for (const auto& e : want) {
    EXPECT_TRUE(got.count(e)) << "missing " << name[e.first] << " -> " << name[e.second];
  }
  const std::set<std::string> lists = {"list.txt", "gen.sh", "list.h", "a.c", "a.o", "app"};
  for (const auto& [src, dst] : got) {
    if (!name.count(src) || !name.count(dst)) continue;
    EXPECT_NE(name[src], "Makefile") << "make's own read produced " << name[dst];
    const bool cross = lists.count(name[src]) != lists.count(name[dst]);
    EXPECT_FALSE(cross) << "edge between unrelated targets: " << name[src] << " -> "
                        << name[dst];
  }
}

}  // namespace
}  // namespace propeller
