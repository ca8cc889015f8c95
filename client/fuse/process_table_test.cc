// ProcessTable against a fake /proc: thread -> process mapping, pid reuse, the edge rules of
// docs/capture.md (reads count for every ancestor; a write takes its own and its descendants'
// reads, and its siblings' only under a parent that read nothing itself), and when edges are
// flushed.
#include "client/fuse/process_table.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

namespace propeller::fuse {
namespace {

class FakeProc {
 public:
  FakeProc() {
    root_ = std::filesystem::temp_directory_path() /
            ("ptable-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
    std::filesystem::create_directories(root_);
  }
  ~FakeProc() { std::filesystem::remove_all(root_); }
  std::string root() const { return root_.string(); }

  // A process `pid` with parent `ppid`, started at `start`, named `comm`; `tids` are its
  // other threads.
  void AddProcess(uint32_t pid, uint32_t ppid, uint64_t start, const std::string& comm,
                  std::vector<uint32_t> tids = {}) {
    tids.push_back(pid);
    for (uint32_t tid : tids) {
      auto dir = root_ / std::to_string(tid);
      std::filesystem::create_directories(dir);
      std::ofstream(dir / "status") << "Name:\t" << comm << "\nUmask:\t0022\nState:\tS\nTgid:\t"
                                    << pid << "\nPid:\t" << tid << "\nPPid:\t" << ppid << "\n";
      // Fields 3..22; comm with a space and a ')' to check the parser.
      std::ofstream(dir / "stat") << tid << " (" << comm << " x) y) S " << ppid
                                  << " 0 0 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 " << start
                                  << " 1000 100\n";
    }
  }
  void RemoveProcess(uint32_t pid) { std::filesystem::remove_all(root_ / std::to_string(pid)); }

 private:
  static inline int counter_ = 0;
  std::filesystem::path root_;
};

FileId F(uint64_t ino) { return FileId{1, ino}; }

std::set<std::tuple<uint64_t, uint64_t, uint32_t>> Edges(const std::vector<CapturedEdge>& v) {
  std::set<std::tuple<uint64_t, uint64_t, uint32_t>> out;
  for (const CapturedEdge& e : v) out.insert({e.src.ino, e.dst.ino, e.weight});
  return out;
}

TEST(ProcessTableTest, ThreadsMapToTheirProcess) {
  FakeProc proc;
  proc.AddProcess(100, 1, 5000, "make", {101, 102});
  ProcessTable table(proc.root());
  ProcessInfo a, b;
  ASSERT_TRUE(table.Identify(101, 0, &a));
  ASSERT_TRUE(table.Identify(102, 0, &b));
  EXPECT_EQ(a.key, b.key);
  EXPECT_EQ(a.key.pid, 100u);
  EXPECT_EQ(a.key.start, 5000u);
  EXPECT_EQ(a.app, "make");
  EXPECT_EQ(a.parent.pid, 0u);  // pid 1 is nobody's producer
  EXPECT_FALSE(table.Identify(999, 0, &a));
  EXPECT_FALSE(table.Identify(0, 0, &a));
}

TEST(ProcessTableTest, ReusedPidIsANewProcess) {
  FakeProc proc;
  proc.AddProcess(200, 1, 100, "a");
  ProcessTable table(proc.root(), /*flush_interval_ns=*/1'000'000'000'000);
  ProcessInfo p;
  ASSERT_TRUE(table.Identify(200, 0, &p));
  table.OnOpen(p, F(1), true, false, 0, nullptr);
  // The process exits and the pid is reused (different start time) after the cache expired.
  proc.RemoveProcess(200);
  proc.AddProcess(200, 1, 999, "b");
  ProcessInfo q;
  ASSERT_TRUE(table.Identify(200, 2'000'000'000, &q));
  EXPECT_NE(p.key, q.key);
  table.OnOpen(q, F(2), false, true, 2'000'000'000, nullptr);
  std::vector<CapturedEdge> edges;
  table.Sweep(2'000'000'000, /*all=*/true, &edges);
  EXPECT_TRUE(edges.empty()) << "file 1 was opened by another process";
}

TEST(ProcessTableTest, EdgesFromEverythingOpenedBefore) {
  FakeProc proc;
  proc.AddProcess(300, 1, 1, "cc");
  ProcessTable table(proc.root());
  ProcessInfo p;
  ASSERT_TRUE(table.Identify(300, 0, &p));
  std::vector<FileId> producers;
  table.OnOpen(p, F(1), true, false, 0, nullptr);
  table.OnOpen(p, F(2), true, false, 0, nullptr);
  table.OnOpen(p, F(1), true, false, 0, nullptr);  // reopened: still one edge
  table.OnOpen(p, F(3), false, true, 0, &producers);
  EXPECT_EQ(producers, (std::vector<FileId>{F(2), F(1)}));  // most recent first
  table.OnOpen(p, F(3), false, true, 0, &producers);  // again: same edges, once per process
  table.OnOpen(p, F(4), true, false, 0, nullptr);    // after the write-open: no edge at open...
  table.OnWriteClose(p, F(3), 0);              // ...but at the write's close
  std::vector<CapturedEdge> edges;
  table.Sweep(0, /*all=*/true, &edges);
  EXPECT_EQ(Edges(edges), (std::set<std::tuple<uint64_t, uint64_t, uint32_t>>{
                              {1, 3, 1}, {2, 3, 1}, {4, 3, 1}}));
}

TEST(ProcessTableTest, CloseWithTheOpenMarkAddsOnlyFilesOpenedSinceTheWriteOpen) {
  // The mark of the write-open lets the close skip the files whose edges the open added. To
  // see which files the close visits, the open's edges are flushed in between: a close with
  // the mark re-adds none of them, a close without it re-adds all (the model: edges from
  // every file opened before the close, minus those the open already covered).
  FakeProc proc;
  proc.AddProcess(400, 1, 1, "gcc");  // a driver: reads nothing itself
  proc.AddProcess(401, 400, 2, "app");
  proc.AddProcess(402, 400, 3, "sibling");
  ProcessTable table(proc.root());
  ProcessInfo sibling, p;
  ASSERT_TRUE(table.Identify(402, 0, &sibling));
  ASSERT_TRUE(table.Identify(401, 0, &p));
  table.OnOpen(sibling, F(1), true, false, 0, nullptr);  // the sibling's, before
  table.OnOpen(p, F(2), true, false, 0, nullptr);
  table.OnOpen(p, F(3), true, false, 0, nullptr);
  const uint64_t mark = table.OnOpen(p, F(9), false, true, 0, nullptr);
  EXPECT_NE(mark, 0u);
  std::vector<CapturedEdge> edges;
  table.Sweep(0, /*all=*/true, &edges);
  EXPECT_EQ(Edges(edges), (std::set<std::tuple<uint64_t, uint64_t, uint32_t>>{
                              {1, 9, 1}, {2, 9, 1}, {3, 9, 1}}));
  table.OnOpen(p, F(2), true, false, 0, nullptr);       // reopened: not new
  table.OnOpen(p, F(4), true, false, 0, nullptr);       // new since the write-open
  table.OnOpen(sibling, F(5), true, false, 0, nullptr);  // the sibling's, since
  table.OnWriteClose(p, F(9), 0, mark);
  edges.clear();
  table.Sweep(0, /*all=*/true, &edges);
  EXPECT_EQ(Edges(edges), (std::set<std::tuple<uint64_t, uint64_t, uint32_t>>{
                              {4, 9, 1}, {5, 9, 1}}));
  // Without a mark the close visits everything opened so far.
  ASSERT_TRUE(table.Identify(401, 0, &p));
  table.OnWriteClose(p, F(9), 0);
  edges.clear();
  table.Sweep(0, /*all=*/true, &edges);
  EXPECT_EQ(Edges(edges), (std::set<std::tuple<uint64_t, uint64_t, uint32_t>>{
                              {1, 9, 1}, {2, 9, 1}, {3, 9, 1}, {4, 9, 1}, {5, 9, 1}}));
  // A later write-open's mark is larger.
  EXPECT_GT(table.OnOpen(p, F(10), false, true, 0, nullptr), mark);
}

TEST(ProcessTableTest, AWriteTakesItsOwnAndItsDescendantsReadsNotItsAncestorsOwn) {
  // make(10) reads Makefile, runs sh(11) -c './gen.sh list.txt > list.h': gen.sh(12) runs
  // sed(13), which reads list.txt; sh writes list.h. Another sh(21) reads other.txt and writes
  // other.o.
  FakeProc proc;
  proc.AddProcess(10, 1, 1, "make");
  proc.AddProcess(11, 10, 2, "sh");
  proc.AddProcess(12, 11, 3, "gen.sh");
  proc.AddProcess(13, 12, 4, "sed");
  proc.AddProcess(21, 10, 5, "sh");
  ProcessTable table(proc.root());
  const uint64_t makefile = 1, list_txt = 2, list_h = 3, other_txt = 4, other_o = 5;
  ProcessInfo p;
  ASSERT_TRUE(table.Identify(10, 0, &p));
  table.OnOpen(p, F(makefile), true, false, 0, nullptr);
  ASSERT_TRUE(table.Identify(21, 0, &p));
  table.OnOpen(p, F(other_txt), true, false, 0, nullptr);
  ASSERT_TRUE(table.Identify(13, 0, &p));
  table.OnOpen(p, F(list_txt), true, false, 0, nullptr);  // a grandchild's read
  ASSERT_TRUE(table.Identify(11, 0, &p));
  std::vector<FileId> producers;
  const uint64_t mark = table.OnOpen(p, F(list_h), false, true, 0, &producers);
  EXPECT_EQ(producers, (std::vector<FileId>{F(list_txt)}));
  table.OnWriteClose(p, F(list_h), 0, mark);
  ASSERT_TRUE(table.Identify(21, 0, &p));
  table.OnOpen(p, F(other_o), false, true, 0, nullptr);
  std::vector<CapturedEdge> edges;
  table.Sweep(0, /*all=*/true, &edges);
  // Neither make's Makefile nor the other shell's input is a producer of list.h.
  EXPECT_EQ(Edges(edges), (std::set<std::tuple<uint64_t, uint64_t, uint32_t>>{
                              {list_txt, list_h, 1}, {other_txt, other_o, 1}}));
}

TEST(ProcessTableTest, AForgottenFileLeavesReadsAndPendingEdges) {
  // sh -c 'cat a.txt; echo x > t; rm t'; then a new file reuses t's number.
  FakeProc proc;
  proc.AddProcess(30, 1, 1, "sh");
  proc.AddProcess(31, 30, 2, "cat");
  ProcessTable table(proc.root());
  ProcessInfo sh, cat;
  ASSERT_TRUE(table.Identify(31, 0, &cat));
  table.OnOpen(cat, F(1), true, false, 0, nullptr);
  ASSERT_TRUE(table.Identify(30, 0, &sh));
  table.OnOpen(sh, F(2), false, true, 0, nullptr);
  table.OnOpen(sh, F(2), true, false, 0, nullptr);  // read back: a producer
  table.Forget(F(2));
  table.OnOpen(sh, F(3), false, true, 0, nullptr);
  std::vector<CapturedEdge> edges;
  table.Sweep(0, /*all=*/true, &edges);
  EXPECT_EQ(Edges(edges), (std::set<std::tuple<uint64_t, uint64_t, uint32_t>>{{1, 3, 1}}));
}

TEST(ProcessTableTest, ADriversStagesShareTheirReads) {
  // make(10) -> gcc(11) -> cc1(12) reads a.c, a.h; as(13) writes a.o.
  // make(10) -> gcc(21) -> cc1(22) reads b.c;     as(23) writes b.o.
  FakeProc proc;
  proc.AddProcess(10, 1, 1, "make");
  proc.AddProcess(11, 10, 2, "gcc");
  proc.AddProcess(12, 11, 3, "cc1");
  proc.AddProcess(13, 11, 4, "as");
  proc.AddProcess(21, 10, 5, "gcc");
  proc.AddProcess(22, 21, 6, "cc1");
  proc.AddProcess(23, 21, 7, "as");
  ProcessTable table(proc.root());
  ProcessInfo p;
  const uint64_t a_c = 1, a_h = 2, a_o = 3, b_c = 4, b_o = 5;
  ASSERT_TRUE(table.Identify(12, 0, &p));
  table.OnOpen(p, F(a_c), true, false, 0, nullptr);
  table.OnOpen(p, F(a_h), true, false, 0, nullptr);
  ASSERT_TRUE(table.Identify(13, 0, &p));
  table.OnOpen(p, F(a_o), false, true, 0, nullptr);
  ASSERT_TRUE(table.Identify(22, 0, &p));
  table.OnOpen(p, F(b_c), true, false, 0, nullptr);
  ASSERT_TRUE(table.Identify(23, 0, &p));
  std::vector<FileId> producers;
  table.OnOpen(p, F(b_o), false, true, 0, &producers);
  EXPECT_EQ(producers, (std::vector<FileId>{F(b_c)}));
  std::vector<CapturedEdge> edges;
  table.Sweep(0, /*all=*/true, &edges);
  EXPECT_EQ(Edges(edges), (std::set<std::tuple<uint64_t, uint64_t, uint32_t>>{
                              {a_c, a_o, 1}, {a_h, a_o, 1}, {b_c, b_o, 1}}));
}

TEST(ProcessTableTest, SweepFlushesExitedProcessesAtOnceAndLiveOnesPeriodically) {
  FakeProc proc;
  proc.AddProcess(400, 1, 1, "live");
  proc.AddProcess(500, 1, 1, "exits");
  const int64_t interval = 1000;
  ProcessTable table(proc.root(), interval);
  ProcessInfo live, exits;
  ASSERT_TRUE(table.Identify(400, 0, &live));
  ASSERT_TRUE(table.Identify(500, 0, &exits));
  table.OnOpen(live, F(1), true, false, 0, nullptr);
  table.OnOpen(live, F(2), false, true, 0, nullptr);
  table.OnOpen(exits, F(3), true, false, 0, nullptr);
  table.OnOpen(exits, F(4), false, true, 0, nullptr);
  std::vector<CapturedEdge> edges;
  table.Sweep(10, false, &edges);
  EXPECT_TRUE(edges.empty());
  proc.RemoveProcess(500);
  table.Sweep(20, false, &edges);
  EXPECT_EQ(Edges(edges), (std::set<std::tuple<uint64_t, uint64_t, uint32_t>>{{3, 4, 1}}));
  EXPECT_EQ(table.processes(), 1u);
  edges.clear();
  table.Sweep(interval + 1, false, &edges);
  EXPECT_EQ(Edges(edges), (std::set<std::tuple<uint64_t, uint64_t, uint32_t>>{{1, 2, 1}}));
  edges.clear();
  table.Sweep(interval + 2, false, &edges);  // nothing new
  EXPECT_TRUE(edges.empty());
}

TEST(ProcessTableTest, FilesOnlyWrittenAreNotProducers) {
  // A process writing many files (PostMark, tar x) links none of them to the others.
  FakeProc proc;
  proc.AddProcess(700, 1, 1, "writer");
  ProcessTable table(proc.root());
  ProcessInfo p;
  ASSERT_TRUE(table.Identify(700, 0, &p));
  for (uint64_t i = 1; i <= 50; ++i) {
    table.OnOpen(p, F(i), /*reads=*/false, /*writes=*/true, 0, nullptr);
    table.OnWriteClose(p, F(i), 0);
  }
  std::vector<CapturedEdge> edges;
  table.Sweep(0, true, &edges);
  EXPECT_TRUE(edges.empty());
  // Read back, then write another: a producer again.
  table.OnOpen(p, F(7), true, false, 0, nullptr);
  table.OnOpen(p, F(99), false, true, 0, nullptr);
  table.Sweep(0, true, &edges);
  EXPECT_EQ(Edges(edges), (std::set<std::tuple<uint64_t, uint64_t, uint32_t>>{{7, 99, 1}}));
}

TEST(ProcessTableTest, PendingEdgesAreBounded) {
  FakeProc proc;
  proc.AddProcess(800, 1, 1, "storm");
  ProcessTable table(proc.root());
  ProcessInfo p;
  ASSERT_TRUE(table.Identify(800, 0, &p));
  for (uint64_t i = 1; i <= ProcessTable::kMaxOpened; ++i) table.OnOpen(p, F(i), true, false, 0, nullptr);
  const uint64_t writes = ProcessTable::kMaxPendingEdges / ProcessTable::kMaxOpened + 10;
  for (uint64_t w = 0; w < writes; ++w) table.OnOpen(p, F(100000 + w), false, true, 0, nullptr);
  EXPECT_GT(table.dropped_edges(), 0u);
  std::vector<CapturedEdge> edges;
  table.Sweep(0, true, &edges);
  EXPECT_EQ(edges.size(), ProcessTable::kMaxPendingEdges);
}

TEST(ProcessTableTest, OpenedSetIsBounded) {
  FakeProc proc;
  proc.AddProcess(600, 1, 1, "big");
  ProcessTable table(proc.root());
  ProcessInfo p;
  ASSERT_TRUE(table.Identify(600, 0, &p));
  for (uint64_t i = 1; i <= ProcessTable::kMaxOpened + 100; ++i) {
    table.OnOpen(p, F(i), true, false, 0, nullptr);
  }
  table.OnOpen(p, F(999999), false, true, 0, nullptr);
  std::vector<CapturedEdge> edges;
  table.Sweep(0, true, &edges);
  EXPECT_EQ(edges.size(), ProcessTable::kMaxOpened);
  // The oldest were forgotten.
  for (const CapturedEdge& e : edges) EXPECT_GT(e.src.ino, 100u);  // kMaxOpened < 1124
}

}  // namespace
}  // namespace propeller::fuse
