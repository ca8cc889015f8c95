// The access-causality capture on real mounts (docs/capture.md): who counts as a producer in
// a tree of processes, and that a file which reuses a deleted file's inode number inherits
// none of its edges, record fields or user attributes. The oracle is the set of edges the rule
// gives for the processes run, checked by inode numbers read from the backing tree.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "client/lib/propeller.h"
#include "common/record.h"
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

// What `propeller ARGS` prints on stdout; a failing command fails the test.
std::string Cli(const std::string& args) {
  std::string shown;
  const std::string cmd = std::string(PROPELLER_CLI_BIN) + " " + args;
  FILE* p = ::popen(cmd.c_str(), "r");
  EXPECT_NE(p, nullptr) << cmd;
  if (p == nullptr) return shown;
  char buf[4096];
  size_t len;
  while ((len = std::fread(buf, 1, sizeof(buf), p)) > 0) shown.append(buf, len);
  EXPECT_EQ(::pclose(p), 0) << cmd << "\n" << shown;
  return shown;
}

// What `propeller acg show PATH` prints.
std::string AcgShow(const std::string& path) { return Cli("acg show " + path); }

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

// The paths the mount's query engine finds for `query` under `scope`, and the backing paths
// the index nodes find for it through the master (the search every client can make).
std::set<std::string> Found(Client* cluster, const std::string& query, const std::string& scope) {
  std::set<std::string> out;
  std::vector<ClientHit> hits;
  testing::SearchMount(query, scope, &hits);
  for (const ClientHit& h : hits) out.insert(h.path);
  auto direct = cluster->SearchAll(query, ClientSearchOptions{});
  EXPECT_TRUE(direct.ok()) << query << ": " << direct.status().ToString();
  if (direct.ok()) {
    for (const ClientHit& h : *direct) out.insert(h.path);
  }
  return out;
}

void SetXattr(const std::string& path, const std::string& name, const std::string& value) {
  ASSERT_EQ(::setxattr(path.c_str(), name.c_str(), value.data(), value.size(), 0), 0)
      << path << " " << name << ": " << std::strerror(errno);
}

// The record side of identity (docs/capture.md "Identity", issue 25): a file that takes a
// deleted file's number gets none of its record — not its size, times or name, not its user
// attributes, whether they were set on the file through the mount (user.* extended
// attributes, one of them indexed) or with `propeller attr set` (which a later change of the
// file through the mount must keep: it used to live in the index alone and be replaced by
// the next update) — and a search on the old file's attributes finds nothing. A loop of
// delete/create pairs, each checked where the number really was reused.
TEST(CaptureTest, AFileThatReusesADeletedFilesNumberInheritsNoRecordOrAttribute) {
  Mount m;
  ASSERT_TRUE(m.Start());
  auto cluster = ClusterClient(m);
  ASSERT_NE(cluster, nullptr);
  const std::string master = cluster->master_endpoint();
  ASSERT_TRUE(cluster->CreateIndex("tag", IndexType::kHash).ok());  // "note", "origin": none
  const std::string d = m.mnt() + "/r", b = m.backing() + "/r";
  ASSERT_EQ(::mkdir(d.c_str(), 0755), 0);
  int reused = 0;
  for (int round = 0; round < 40 && reused < 6; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const std::string r = std::to_string(round), a = "a" + r, tag = "t" + r;
    const std::string note = std::to_string(5000 + round), origin = std::to_string(7000 + round);
    // A: its own size, an mtime in 2001, three attributes.
    WriteFile(d + "/" + a, std::string(1000 + round, 'a'));
    ASSERT_NO_FATAL_FAILURE(SetXattr(d + "/" + a, "user.tag", tag));
    ASSERT_NO_FATAL_FAILURE(SetXattr(d + "/" + a, "user.note", note));
    // Alternately by the mount path and by the backing path through the service; a change
    // through the mount after it (utimensat) must keep it.
    if (round % 2 == 0) {
      Cli("attr set " + d + "/" + a + " origin " + origin);
    } else {
      Cli("--master " + master + " attr set " + b + "/" + a + " origin " + origin);
    }
    const struct timespec old_times[2] = {{978307200, 0}, {978307200, 0}};
    ASSERT_EQ(::utimensat(AT_FDCWD, (d + "/" + a).c_str(), old_times, 0), 0);
    const uint64_t ino = InoOf(b + "/" + a);
    auto a_id = cluster->FileIdOf(b + "/" + a);
    ASSERT_TRUE(a_id.ok()) << a_id.status().ToString();
    auto a_rec = cluster->Get(*a_id);
    ASSERT_TRUE(a_rec.ok()) << a_rec.status().ToString();
    std::string names;
    for (const auto& [name, value] : a_rec->attrs) names += " " + name;
    ASSERT_EQ(a_rec->attrs.size(), 3u) << "A's attributes did not reach the index:" << names;
    ASSERT_EQ(Found(cluster.get(), "tag=" + tag, d),
              (std::set<std::string>{d + "/" + a, b + "/" + a}));
    ASSERT_EQ(::unlink((d + "/" + a).c_str()), 0);

    // New files until one takes A's number; those that do not stay (their numbers taken).
    std::string n;
    for (int i = 0; i < 8 && n.empty(); ++i) {
      const std::string name = "b" + r + "_" + std::to_string(i);
      WriteFile(d + "/" + name, "new " + name + "\n");
      if (InoOf(b + "/" + name) == ino) n = name;
    }
    if (n.empty()) continue;
    ++reused;
    struct stat st;
    ASSERT_EQ(::lstat((b + "/" + n).c_str(), &st), 0);
    auto id = cluster->FileIdOf(b + "/" + n);
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    ASSERT_EQ(id->ino, ino);
    auto rec = cluster->Get(*id);
    ASSERT_TRUE(rec.ok()) << rec.status().ToString();
    EXPECT_EQ(rec->paths, std::vector<std::string>{"/r/" + n});
    EXPECT_EQ(rec->size, static_cast<uint64_t>(st.st_size));
    EXPECT_EQ(rec->mtime, FileTimeOf(st.st_mtim.tv_sec, st.st_mtim.tv_nsec));
    EXPECT_TRUE(rec->attrs.empty()) << rec->attrs.size() << " attributes inherited";
    EXPECT_NE(rec->inode_generation, a_rec->inode_generation);
    for (const std::string& q : {"tag=" + tag, "note=" + note, "origin=" + origin}) {
      EXPECT_EQ(Found(cluster.get(), q, d), std::set<std::string>{}) << q;
    }
    // What the CLI prints of it: its own name and size, no attributes.
    const std::string json = Cli("search 'name=" + n + "' --scope " + d + " --json");
    EXPECT_NE(json.find("\"path\":\"" + d + "/" + n + "\""), std::string::npos) << json;
    EXPECT_NE(json.find("\"size\":" + std::to_string(st.st_size) + ","), std::string::npos)
        << json;
    EXPECT_EQ(json.find("\"attrs\""), std::string::npos) << json;
  }
  // ext4 reuses a freed number at once; too few reuses would test nothing.
  EXPECT_GE(reused, 3);
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
