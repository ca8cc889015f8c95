// Placement rules (placement.h) through Master's typed API: producer's ACG first, then the
// app's ACG below the threshold, then a new ACG on the least-loaded up node; Unavailable
// without an up node; deterministic.
#include "master/placement.h"

#include <gtest/gtest.h>

#include "master/master.h"
#include "master/master_test_util.h"

namespace propeller::master {
namespace {

using testing::FakeClock;
using testing::TempDir;

class PlacementTest : public ::testing::Test {
 protected:
  void Open(uint64_t threshold = 3) {
    MasterConfig c;
    c.data_dir = dir_.path();
    c.acg_threshold = threshold;
    c.sync = false;
    c.clock = clock_.clock();
    auto m = Master::Open(c);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    master_ = std::move(*m);
    wire::VolumeInfo v;
    ASSERT_TRUE(master_->RegisterVolume({"/vol"}, &v).ok());
    ASSERT_EQ(v.volume, 1u);
  }
  uint32_t AddNode(const std::string& endpoint) {
    wire::RegisterNodeReply r;
    Status s = master_->RegisterNode({0, endpoint}, &r);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return r.node_id;
  }
  void Beat(uint32_t node, std::vector<wire::AcgLoad> acgs = {}) {
    wire::HeartbeatRequest hb;
    hb.node_id = node;
    hb.acgs = std::move(acgs);
    wire::HeartbeatReply r;
    ASSERT_TRUE(master_->Heartbeat(hb, &r).ok());
    ASSERT_FALSE(r.reregister);
  }
  static wire::AssignItem Item(uint64_t ino, std::string app,
                               std::vector<uint64_t> producers = {}) {
    wire::AssignItem it;
    it.file = FileId{1, ino};
    it.app = std::move(app);
    for (uint64_t p : producers) it.producers.push_back(FileId{1, p});
    return it;
  }
  // Assigns the items in one batch; returns each file's ACG.
  std::vector<uint64_t> Assign(std::vector<wire::AssignItem> items) {
    wire::AssignFilesRequest req;
    req.items = std::move(items);
    wire::LocationsReply rep;
    Status s = master_->AssignFiles(req, &rep);
    EXPECT_TRUE(s.ok()) << s.ToString();
    std::vector<uint64_t> out;
    for (const auto& loc : rep.locations) out.push_back(loc.acg);
    return out;
  }
  uint32_t NodeOf(uint64_t acg) { return master_->store().GetAcg(acg)->node_id; }

  TempDir dir_;
  FakeClock clock_;
  std::unique_ptr<Master> master_;
};

TEST_F(PlacementTest, ProducersAcgWinsOverApp) {
  Open();
  AddNode("tcp://127.0.0.1:1001");
  AddNode("tcp://127.0.0.1:1002");
  EXPECT_EQ(Assign({Item(1, "cc")}), (std::vector<uint64_t>{1}));
  EXPECT_EQ(Assign({Item(2, "ld")}), (std::vector<uint64_t>{2}));
  // ld's product of cc's file joins cc's ACG, not ld's.
  EXPECT_EQ(Assign({Item(3, "ld", {1})}), (std::vector<uint64_t>{1}));
  // The first *mapped* producer wins (99 is unmapped).
  EXPECT_EQ(Assign({Item(4, "cc", {99, 2, 1})}), (std::vector<uint64_t>{2}));
  // A producer beats the threshold (3): ACG 1 grows past it.
  EXPECT_EQ(master_->store().GetAcg(1)->files, 2u);
  EXPECT_EQ(Assign({Item(5, "x", {1}), Item(6, "x", {5})}), (std::vector<uint64_t>{1, 1}));
  EXPECT_EQ(master_->store().GetAcg(1)->files, 4u);
  // A mapped file keeps its ACG whatever the item says.
  EXPECT_EQ(Assign({Item(1, "other", {2})}), (std::vector<uint64_t>{1}));
  // The same file twice in one batch is mapped once.
  EXPECT_EQ(Assign({Item(7, "y"), Item(7, "z", {1})}), (std::vector<uint64_t>{3, 3}));
  EXPECT_EQ(master_->store().GetAcg(3)->files, 1u);
}

TEST_F(PlacementTest, AppAcgUntilThresholdThenNewAcgOnLeastLoadedNode) {
  Open(/*threshold=*/3);
  const uint32_t n1 = AddNode("tcp://127.0.0.1:1001");
  const uint32_t n2 = AddNode("tcp://127.0.0.1:1002");
  // Ties go to the lowest node id.
  EXPECT_EQ(Assign({Item(1, "cc"), Item(2, "cc"), Item(3, "cc")}),
            (std::vector<uint64_t>{1, 1, 1}));
  EXPECT_EQ(NodeOf(1), n1);
  // ACG 1 is full: a new ACG on node 2 (node 1 holds 3 files, node 2 none).
  EXPECT_EQ(Assign({Item(4, "cc"), Item(5, "cc")}), (std::vector<uint64_t>{2, 2}));
  EXPECT_EQ(NodeOf(2), n2);
  // Another app: node 2 holds 2 files < 3: node 2. Loads are updated inside one batch:
  // after 2 files of "a" node 2 has 4 > 3, so app "b" lands on node 1.
  EXPECT_EQ(Assign({Item(6, "a"), Item(7, "a"), Item(8, "b")}),
            (std::vector<uint64_t>{3, 3, 4}));
  EXPECT_EQ(NodeOf(3), n2);
  EXPECT_EQ(NodeOf(4), n1);
  // Forgetting files frees room in an ACG, but the app's current ACG stays the newest one.
  ASSERT_TRUE(master_->ForgetFiles(wire::FilesRequest{{FileId{1, 1}, FileId{1, 2}}}).ok());
  EXPECT_EQ(master_->store().GetAcg(1)->files, 1u);
  EXPECT_EQ(Assign({Item(9, "cc")}), (std::vector<uint64_t>{2}));
  EXPECT_EQ(master_->store().GetAcg(2)->files, 3u);
}

TEST_F(PlacementTest, HeartbeatLoadsCountLargerOfStoreAndReport) {
  Open(/*threshold=*/100);
  const uint32_t n1 = AddNode("tcp://127.0.0.1:1001");
  const uint32_t n2 = AddNode("tcp://127.0.0.1:1002");
  EXPECT_EQ(Assign({Item(1, "a"), Item(2, "a")}), (std::vector<uint64_t>{1, 1}));  // node 1: 2
  // Node 2 reports an ACG the store does not map to it (10 files): node 2 load 10.
  Beat(n2, {{77, 10}});
  EXPECT_EQ(Assign({Item(3, "b")}), (std::vector<uint64_t>{2}));
  EXPECT_EQ(NodeOf(2), n1);  // node 1: 3 files, node 2: 10
  // Node 1 reports ACG 1 holding 20 indexed files: the larger (20) counts, not 20 + 2.
  Beat(n1, {{1, 20}});
  EXPECT_EQ(Assign({Item(4, "c")}), (std::vector<uint64_t>{3}));
  EXPECT_EQ(NodeOf(3), n2);  // node 1: 20 + 1 = 21, node 2: 10
  wire::NodesReply nodes;
  ASSERT_TRUE(master_->ListNodes(&nodes).ok());
  ASSERT_EQ(nodes.nodes.size(), 2u);
  EXPECT_EQ(nodes.nodes[0].files, 21u);
  EXPECT_EQ(nodes.nodes[0].acgs, 2u);
  EXPECT_EQ(nodes.nodes[1].files, 11u);
  EXPECT_EQ(nodes.nodes[1].acgs, 1u);
}

TEST_F(PlacementTest, DownNodesAreSkipped) {
  Open(/*threshold=*/100);
  const uint32_t n1 = AddNode("tcp://127.0.0.1:1001");
  EXPECT_EQ(Assign({Item(1, "cc")}), (std::vector<uint64_t>{1}));
  const uint32_t n2 = AddNode("tcp://127.0.0.1:1002");
  clock_.Advance(3000);
  Beat(n2);
  clock_.Advance(3000);  // node 1 silent for 6 s > 5 s: down; node 2 heard 3 s ago
  // The app's ACG lives on a down node: a new ACG on an up node.
  EXPECT_EQ(Assign({Item(2, "cc")}), (std::vector<uint64_t>{2}));
  EXPECT_EQ(NodeOf(2), n2);
  // A producer's ACG is kept even on a down node (the file belongs with its inputs).
  EXPECT_EQ(Assign({Item(3, "zz", {1})}), (std::vector<uint64_t>{1}));
  // Node 1 is back and a candidate again, but it holds 2 files and node 2 holds 1.
  Beat(n1);
  EXPECT_EQ(Assign({Item(4, "new")}), (std::vector<uint64_t>{3}));
  EXPECT_EQ(NodeOf(3), n2);  // node 1 holds 2 files, node 2 holds 1
}

TEST_F(PlacementTest, NoUpNodeIsUnavailableAndKeepsNothing) {
  Open();
  // No node at all.
  wire::AssignFilesRequest req;
  req.items = {Item(1, "cc")};
  wire::LocationsReply rep;
  EXPECT_EQ(master_->AssignFiles(req, &rep).code(), StatusCode::kUnavailable);
  AddNode("tcp://127.0.0.1:1001");
  EXPECT_EQ(Assign({Item(1, "cc")}), (std::vector<uint64_t>{1}));
  clock_.Advance(5001);  // the only node goes down
  auto before = master_->store().Dump();
  ASSERT_TRUE(before.ok());
  // The first item could join its producer's ACG, the second needs a new one: the whole
  // batch is refused.
  req.items = {Item(2, "cc", {1}), Item(3, "other")};
  EXPECT_EQ(master_->AssignFiles(req, &rep).code(), StatusCode::kUnavailable);
  auto after = master_->store().Dump();
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(*after, *before);
  // Files with mapped producers alone need no up node.
  req.items = {Item(2, "cc", {1})};
  EXPECT_TRUE(master_->AssignFiles(req, &rep).ok());
}

TEST_F(PlacementTest, UnregisteredVolumeIsRefused) {
  Open();
  AddNode("tcp://127.0.0.1:1001");
  wire::AssignFilesRequest req;
  req.items = {Item(1, "cc"), Item(2, "cc")};
  req.items[1].file.volume = 7;
  wire::LocationsReply rep;
  EXPECT_EQ(master_->AssignFiles(req, &rep).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(master_->store().FileCount(), 0u);
  req.items = {Item(1, std::string(kMaxAppBytes + 1, 'x'))};
  EXPECT_EQ(master_->AssignFiles(req, &rep).code(), StatusCode::kInvalidArgument);
}

TEST(PlacementDeterminismTest, SameInputsSameMappings) {
  auto run = [](const std::string& dir) {
    FakeClock clock;
    MasterConfig c;
    c.data_dir = dir;
    c.acg_threshold = 4;
    c.sync = false;
    c.clock = clock.clock();
    auto m = Master::Open(c);
    EXPECT_TRUE(m.ok());
    Master& master = **m;
    wire::VolumeInfo v;
    EXPECT_TRUE(master.RegisterVolume({"/v"}, &v).ok());
    for (int n = 0; n < 3; ++n) {
      wire::RegisterNodeReply r;
      EXPECT_TRUE(master.RegisterNode({0, "tcp://h:" + std::to_string(100 + n)}, &r).ok());
    }
    for (uint64_t batch = 0; batch < 20; ++batch) {
      wire::AssignFilesRequest req;
      for (uint64_t i = 0; i < 10; ++i) {
        const uint64_t ino = batch * 10 + i + 1;
        wire::AssignItem it;
        it.file = FileId{1, ino};
        it.app = "app" + std::to_string((ino * 7) % 5);
        if (ino % 3 == 0) it.producers.push_back(FileId{1, ino / 2});
        req.items.push_back(it);
      }
      wire::LocationsReply rep;
      EXPECT_TRUE(master.AssignFiles(req, &rep).ok());
    }
    auto dump = master.store().Dump();
    EXPECT_TRUE(dump.ok());
    return *dump;
  };
  TempDir a, b;
  const StoreDump da = run(a.path());
  const StoreDump db = run(b.path());
  EXPECT_EQ(da, db);
  EXPECT_EQ(da.files.size(), 200u);
  EXPECT_GT(da.acgs.size(), 5u);
}

}  // namespace
}  // namespace propeller::master
