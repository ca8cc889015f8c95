// Master's typed API: membership (register, re-register, heartbeats, timeouts, endpoint
// validation), the index catalogue, volumes, lookups and status.
#include "master/master.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <vector>

#include "common/random.h"
#include "master/master_test_util.h"

namespace propeller::master {
namespace {

using testing::FakeClock;
using testing::TempDir;

class MasterTest : public ::testing::Test {
 protected:
  void SetUp() override { Reopen(); }
  void Reopen() {
    master_.reset();
    MasterConfig c;
    c.data_dir = dir_.path();
    c.sync = false;
    c.node_timeout_ms = 5000;
    c.acg_threshold = threshold_;
    c.move_split_halves = move_halves_;
    c.clock = clock_.clock();
    auto m = Master::Open(c);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    master_ = std::move(*m);
  }
  Result<uint32_t> Register(uint32_t id, const std::string& endpoint) {
    wire::RegisterNodeReply r;
    Status s = master_->RegisterNode({id, endpoint}, &r);
    if (!s.ok()) return s;
    return r.node_id;
  }
  bool Beat(uint32_t node, std::vector<std::string> indexes = {}) {
    wire::HeartbeatRequest hb;
    hb.node_id = node;
    hb.free_disk_bytes = 1000 + node;
    hb.load = 0.5;
    hb.indexes = std::move(indexes);
    wire::HeartbeatReply r;
    EXPECT_TRUE(master_->Heartbeat(hb, &r).ok());
    return !r.reregister;
  }
  std::vector<std::pair<uint32_t, bool>> UpStates() {
    wire::NodesReply r;
    EXPECT_TRUE(master_->ListNodes(&r).ok());
    std::vector<std::pair<uint32_t, bool>> out;
    for (const auto& n : r.nodes) out.emplace_back(n.node_id, n.up);
    return out;
  }

  uint64_t threshold_ = 50000;
  bool move_halves_ = true;
  TempDir dir_;
  FakeClock clock_;
  std::unique_ptr<Master> master_;
};

TEST_F(MasterTest, RegistrationAndHeartbeats) {
  EXPECT_EQ(*Register(0, "tcp://127.0.0.1:7471"), 1u);
  EXPECT_EQ(*Register(0, "ipc:///run/propeller/n2.sock"), 2u);
  EXPECT_EQ(UpStates(), (std::vector<std::pair<uint32_t, bool>>{{1, true}, {2, true}}));
  // Unknown ids must register again.
  EXPECT_FALSE(Beat(3));
  EXPECT_FALSE(Beat(0));
  // Timeout: node 2 keeps beating, node 1 goes silent.
  clock_.Advance(4000);
  EXPECT_TRUE(Beat(2));
  clock_.Advance(1000);
  EXPECT_EQ(UpStates(), (std::vector<std::pair<uint32_t, bool>>{{1, true}, {2, true}}));
  clock_.Advance(1);  // 5001 ms since node 1's registration
  EXPECT_EQ(UpStates(), (std::vector<std::pair<uint32_t, bool>>{{1, false}, {2, true}}));
  // A down node that heartbeats is up again.
  EXPECT_TRUE(Beat(1));
  EXPECT_EQ(UpStates(), (std::vector<std::pair<uint32_t, bool>>{{1, true}, {2, true}}));
  wire::NodesReply r;
  ASSERT_TRUE(master_->ListNodes(&r).ok());
  EXPECT_EQ(r.nodes[0].free_disk_bytes, 1001u);
  EXPECT_EQ(r.nodes[0].last_heartbeat_ns, clock_.now());
  EXPECT_EQ(r.nodes[1].endpoint, "ipc:///run/propeller/n2.sock");
}

TEST_F(MasterTest, ReRegistrationKeepsIdAndPersistsEndpoint) {
  EXPECT_EQ(*Register(0, "tcp://127.0.0.1:7471"), 1u);
  EXPECT_EQ(*Register(0, "tcp://127.0.0.1:7472"), 2u);
  // Node 1 restarts on another port.
  EXPECT_EQ(*Register(1, "tcp://127.0.0.1:9999"), 1u);
  EXPECT_EQ(master_->store().Nodes().at(1), "tcp://127.0.0.1:9999");
  // A restarted master knows the nodes but not that they are up.
  Reopen();
  EXPECT_EQ(UpStates(), (std::vector<std::pair<uint32_t, bool>>{{1, false}, {2, false}}));
  EXPECT_TRUE(Beat(1));
  EXPECT_TRUE(Beat(2));
  EXPECT_EQ(UpStates(), (std::vector<std::pair<uint32_t, bool>>{{1, true}, {2, true}}));
  wire::NodesReply r;
  ASSERT_TRUE(master_->ListNodes(&r).ok());
  EXPECT_EQ(r.nodes[0].endpoint, "tcp://127.0.0.1:9999");
  // An id the master never handed out is refused (its index belongs to a lost map or to
  // another cluster: adopting it would place every file again), and nothing is recorded.
  auto unknown = Register(10, "tcp://127.0.0.1:7480");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kNotFound);
  EXPECT_NE(unknown.status().message().find("unknown to this master"), std::string::npos);
  EXPECT_EQ(master_->store().Nodes().count(10), 0u);
  EXPECT_EQ(*Register(0, "tcp://127.0.0.1:7480"), 3u);
  EXPECT_EQ(*Register(0, "tcp://127.0.0.1:7481"), 4u);
  // A new node (id 0) at an endpoint whose node holds no ACG is a retried registration: same id.
  EXPECT_EQ(*Register(0, "tcp://127.0.0.1:7481"), 4u);
  // Give node 3 an ACG (it is then a real node with data), and take over its endpoint: that
  // is a new node, and the previous holder is marked down.
  wire::VolumeInfo v;
  ASSERT_TRUE(master_->RegisterVolume({"/v"}, &v).ok());
  ASSERT_TRUE(master_->store().Update([&](MasterStore::Txn& txn) {
    return txn.CreateAcg(3, "app").status();
  }).ok());
  EXPECT_EQ(*Register(0, "tcp://127.0.0.1:7480"), 5u);
  ASSERT_TRUE(master_->ListNodes(&r).ok());
  for (const auto& n : r.nodes) {
    if (n.node_id == 3) {
      EXPECT_FALSE(n.up);
    }
    if (n.node_id == 5) {
      EXPECT_TRUE(n.up);
    }
  }
}

TEST_F(MasterTest, EndpointValidation) {
  for (const char* bad : {"", "tcp://", "tcp://host", "tcp://host:", "tcp://:80", "tcp://*:80",
                          "tcp://h:0", "tcp://h:65536", "tcp://h:12a", "udp://h:1", "ipc://",
                          "inproc://", "tcp://h :1", "tcp://h:1\n", "127.0.0.1:80"}) {
    auto r = Register(0, bad);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_FALSE(Register(0, "tcp://h:1" + std::string(1100, 'x')).ok());
  for (const char* good : {"tcp://127.0.0.1:1", "tcp://[::1]:65535", "tcp://node-7.local:7471",
                           "ipc:///tmp/x.sock", "inproc://propeller-node"}) {
    EXPECT_TRUE(Register(0, good).ok()) << good;
  }
  EXPECT_EQ(master_->store().Nodes().size(), 5u);  // nothing of the bad ones was stored
}

TEST_F(MasterTest, IndexCatalogue) {
  ASSERT_TRUE(master_->CreateIndex({"project", IndexType::kHash}).ok());
  ASSERT_TRUE(master_->CreateIndex({"score", IndexType::kBTree}).ok());
  EXPECT_EQ(master_->CreateIndex({"project", IndexType::kBTree}).code(),
            StatusCode::kAlreadyExists);
  EXPECT_EQ(master_->CreateIndex({"path", IndexType::kBTree}).code(), StatusCode::kAlreadyExists);
  for (const char* bad : {"", "Project", "9lives", "a b", "size", "mtime", "ext", "name",
                          "x/y"}) {
    EXPECT_EQ(master_->CreateIndex({bad, IndexType::kHash}).code(), StatusCode::kInvalidArgument)
        << bad;
  }
  EXPECT_EQ(master_->CreateIndex({std::string(65, 'a'), IndexType::kHash}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(master_->CreateIndex({"ok", static_cast<IndexType>(9)}).code(),
            StatusCode::kInvalidArgument);
  wire::IndexesReply list;
  ASSERT_TRUE(master_->ListIndexes(&list).ok());
  ASSERT_EQ(list.indexes.size(), 2u);
  EXPECT_EQ(list.indexes[0].name, "project");
  EXPECT_EQ(list.indexes[0].type, IndexType::kHash);
  EXPECT_EQ(list.indexes[1].name, "score");

  // Heartbeats carry the catalogue.
  const uint32_t n = *Register(0, "tcp://127.0.0.1:7471");
  wire::HeartbeatRequest hb;
  hb.node_id = n;
  wire::HeartbeatReply hr;
  ASSERT_TRUE(master_->Heartbeat(hb, &hr).ok());
  ASSERT_EQ(hr.indexes.size(), 2u);
  EXPECT_EQ(hr.indexes[1].name, "score");
  EXPECT_EQ(hr.indexes[1].type, IndexType::kBTree);

  // Holders: every up node, for built-in and catalogued indexes.
  wire::NodesReply holders;
  ASSERT_TRUE(master_->IndexHolders({"score"}, &holders).ok());
  ASSERT_EQ(holders.nodes.size(), 1u);
  EXPECT_EQ(holders.nodes[0].node_id, n);
  ASSERT_TRUE(master_->IndexHolders({"inode"}, &holders).ok());
  EXPECT_EQ(holders.nodes.size(), 1u);
  EXPECT_EQ(master_->IndexHolders({"nope"}, &holders).code(), StatusCode::kNotFound);
  clock_.Advance(6000);
  ASSERT_TRUE(master_->IndexHolders({"score"}, &holders).ok());
  EXPECT_TRUE(holders.nodes.empty());

  EXPECT_EQ(master_->DropIndex({"keyword"}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(master_->DropIndex({"nope"}).code(), StatusCode::kNotFound);
  ASSERT_TRUE(master_->DropIndex({"project"}).ok());
  EXPECT_EQ(master_->DropIndex({"project"}).code(), StatusCode::kNotFound);
  Reopen();
  ASSERT_TRUE(master_->ListIndexes(&list).ok());
  ASSERT_EQ(list.indexes.size(), 1u);
  EXPECT_EQ(list.indexes[0].name, "score");
}

TEST_F(MasterTest, Volumes) {
  wire::VolumeInfo v;
  ASSERT_TRUE(master_->RegisterVolume({"/data"}, &v).ok());
  EXPECT_EQ(v.volume, 1u);
  ASSERT_TRUE(master_->RegisterVolume({"/home/ann"}, &v).ok());
  EXPECT_EQ(v.volume, 2u);
  ASSERT_TRUE(master_->RegisterVolume({"/data"}, &v).ok());  // idempotent by root
  EXPECT_EQ(v.volume, 1u);
  EXPECT_EQ(v.root, "/data");
  // A root longer than LMDB's key limit works (root -> id is kept in memory).
  const std::string long_root = "/" + std::string(1000, 'r');
  ASSERT_TRUE(master_->RegisterVolume({long_root}, &v).ok());
  EXPECT_EQ(v.volume, 3u);
  for (const char* bad : {"", "data", "/data/", "/a//b", "/a/./b", "/a/../b", "./x"}) {
    EXPECT_EQ(master_->RegisterVolume({bad}, &v).code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ(master_->RegisterVolume({std::string("/a\0b", 4)}, &v).code(),
            StatusCode::kInvalidArgument);
  Reopen();
  ASSERT_TRUE(master_->RegisterVolume({long_root}, &v).ok());
  EXPECT_EQ(v.volume, 3u);
  wire::VolumesReply list;
  ASSERT_TRUE(master_->ListVolumes(&list).ok());
  ASSERT_EQ(list.volumes.size(), 3u);
  EXPECT_EQ(list.volumes[1].root, "/home/ann");
}

TEST_F(MasterTest, LookupLocateAndStatus) {
  wire::VolumeInfo v;
  ASSERT_TRUE(master_->RegisterVolume({"/v"}, &v).ok());
  const uint32_t n = *Register(0, "tcp://127.0.0.1:7471");
  wire::AssignFilesRequest req;
  req.items.resize(2);
  req.items[0].file = FileId{1, 10};
  req.items[1].file = FileId{1, 11};
  wire::LocationsReply locs;
  ASSERT_TRUE(master_->AssignFiles(req, &locs).ok());
  ASSERT_EQ(locs.locations.size(), 2u);
  EXPECT_EQ(locs.locations[0].acg, 1u);
  EXPECT_EQ(locs.locations[0].node_id, n);
  EXPECT_EQ(locs.locations[0].endpoint, "tcp://127.0.0.1:7471");

  wire::FilesRequest lookup{{FileId{1, 11}, FileId{1, 12}, FileId{1, 10}}};
  ASSERT_TRUE(master_->LookupFiles(lookup, &locs).ok());
  ASSERT_EQ(locs.locations.size(), 3u);
  EXPECT_EQ(locs.locations[0].file, (FileId{1, 11}));
  EXPECT_EQ(locs.locations[0].acg, 1u);
  EXPECT_EQ(locs.locations[1].acg, 0u);
  EXPECT_EQ(locs.locations[1].node_id, 0u);
  EXPECT_EQ(locs.locations[1].endpoint, "");
  EXPECT_EQ(locs.locations[2].endpoint, "tcp://127.0.0.1:7471");

  wire::AcgLocationsReply acgs;
  ASSERT_TRUE(master_->LocateAcgs({{1, 2, 0}}, &acgs).ok());
  ASSERT_EQ(acgs.locations.size(), 3u);
  EXPECT_EQ(acgs.locations[0].node_id, n);
  EXPECT_EQ(acgs.locations[0].endpoint, "tcp://127.0.0.1:7471");
  EXPECT_EQ(acgs.locations[1].node_id, 0u);
  EXPECT_EQ(acgs.locations[2].node_id, 0u);

  ASSERT_TRUE(master_->CreateIndex({"tag", IndexType::kHash}).ok());
  wire::ClusterStatusReply st;
  ASSERT_TRUE(master_->ClusterStatus(&st).ok());
  EXPECT_EQ(st.acgs, 1u);
  EXPECT_EQ(st.files, 2u);
  ASSERT_EQ(st.nodes.size(), 1u);
  EXPECT_EQ(st.nodes[0].files, 2u);
  ASSERT_EQ(st.indexes.size(), 1u);
  ASSERT_EQ(st.volumes.size(), 1u);
  EXPECT_EQ(st.volumes[0].root, "/v");

  ASSERT_TRUE(master_->ForgetFiles({{FileId{1, 10}, FileId{1, 99}}}).ok());
  ASSERT_TRUE(master_->ClusterStatus(&st).ok());
  EXPECT_EQ(st.files, 1u);
}

// ListNodes is memoised (Master::NodeInfos): each change of what it is computed from — the
// ACG table, a heartbeat, a node's timeout, a registration — must show in the next answer.
TEST_F(MasterTest, ListNodesFollowsEveryChangeOfItsInputs) {
  wire::VolumeInfo v;
  ASSERT_TRUE(master_->RegisterVolume({"/v"}, &v).ok());
  const uint32_t n1 = *Register(0, "tcp://127.0.0.1:7471");
  const uint32_t n2 = *Register(0, "tcp://127.0.0.1:7472");
  struct Row {
    uint64_t acgs, files;
    bool up;
    uint64_t free_disk;
    bool operator==(const Row&) const = default;
  };
  auto nodes = [&] {
    wire::NodesReply r;
    EXPECT_TRUE(master_->ListNodes(&r).ok());
    std::map<uint32_t, Row> out;
    for (const auto& n : r.nodes) out[n.node_id] = Row{n.acgs, n.files, n.up, n.free_disk_bytes};
    return out;
  };
  using Table = std::map<uint32_t, Row>;
  EXPECT_EQ(nodes(), (Table{{n1, {0, 0, true, 0}}, {n2, {0, 0, true, 0}}}));

  // The ACG table: three files placed in a new ACG.
  wire::AssignFilesRequest req;
  req.items.resize(3);
  for (uint64_t i = 0; i < 3; ++i) req.items[i].file = FileId{v.volume, 10 + i};
  wire::LocationsReply locs;
  ASSERT_TRUE(master_->AssignFiles(req, &locs).ok());
  const uint64_t acg = locs.locations[0].acg;
  const uint32_t home = locs.locations[0].node_id;
  const uint32_t other = home == n1 ? n2 : n1;
  EXPECT_EQ(nodes(), (Table{{home, {1, 3, true, 0}}, {other, {0, 0, true, 0}}}));
  EXPECT_EQ(nodes(), (Table{{home, {1, 3, true, 0}}, {other, {0, 0, true, 0}}}));  // again

  // The ACG table: the ACG moves.
  ASSERT_TRUE(master_->MoveAcg({acg, home, other}).ok());
  EXPECT_EQ(nodes(), (Table{{home, {0, 0, true, 0}}, {other, {1, 3, true, 0}}}));

  // A heartbeat: the owner reports more files than the master has mapped, and its disk.
  wire::HeartbeatRequest hb;
  hb.node_id = other;
  hb.acgs = {wire::AcgLoad{acg, 7}};
  hb.free_disk_bytes = 12345;
  wire::HeartbeatReply hr;
  ASSERT_TRUE(master_->Heartbeat(hb, &hr).ok());
  EXPECT_EQ(nodes(), (Table{{home, {0, 0, true, 0}}, {other, {1, 7, true, 12345}}}));

  // Time alone: the silent node goes down; the one that keeps beating stays up.
  clock_.Advance(4000);
  ASSERT_TRUE(master_->Heartbeat(hb, &hr).ok());
  EXPECT_EQ(nodes(), (Table{{home, {0, 0, true, 0}}, {other, {1, 7, true, 12345}}}));
  clock_.Advance(1001);
  EXPECT_EQ(nodes(), (Table{{home, {0, 0, false, 0}}, {other, {1, 7, true, 12345}}}));

  // A registration: a third node.
  const uint32_t n3 = *Register(0, "tcp://127.0.0.1:7473");
  EXPECT_EQ(nodes(), (Table{{home, {0, 0, false, 0}},
                            {other, {1, 7, true, 12345}},
                            {n3, {0, 0, true, 0}}}));
}

// ---- generation-checked forgets (a client sends them late, in the background) --------------

class ForgetTest : public MasterTest {
 protected:
  void SetUp() override {
    MasterTest::SetUp();
    wire::VolumeInfo v;
    ASSERT_TRUE(master_->RegisterVolume({"/v"}, &v).ok());
    volume_ = v.volume;
    node_ = *Register(0, "tcp://127.0.0.1:7471");
  }
  // Assigns one file; the location (acg 0 on error).
  wire::FileLocation Assign(uint64_t ino, const std::string& app, bool fresh) {
    wire::AssignFilesRequest req;
    req.items.resize(1);
    req.items[0].file = FileId{volume_, ino};
    req.items[0].app = app;
    req.items[0].fresh = fresh;
    wire::LocationsReply rep;
    Status s = master_->AssignFiles(req, &rep);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return s.ok() && rep.locations.size() == 1 ? rep.locations[0] : wire::FileLocation{};
  }
  wire::FileLocation Lookup(uint64_t ino) {
    wire::LocationsReply rep;
    EXPECT_TRUE(master_->LookupFiles({{FileId{volume_, ino}}}, &rep).ok());
    return rep.locations.size() == 1 ? rep.locations[0] : wire::FileLocation{};
  }
  Status Forget(uint64_t ino, uint64_t generation) {
    wire::FilesRequest req;
    req.files = {FileId{volume_, ino}};
    req.generations = {generation};
    return master_->ForgetFiles(req);
  }
  uint64_t AcgFiles(uint64_t acg) {
    std::optional<AcgRecord> rec = master_->store().GetAcg(acg);
    return rec ? rec->files : 0;
  }

  // A heartbeat from `node` reporting `acgs`; the reply.
  wire::HeartbeatReply BeatWith(uint32_t node, std::vector<wire::AcgLoad> acgs) {
    wire::HeartbeatRequest hb;
    hb.node_id = node;
    hb.acgs = std::move(acgs);
    wire::HeartbeatReply r;
    EXPECT_TRUE(master_->Heartbeat(hb, &r).ok());
    return r;
  }

  uint32_t volume_ = 0;
  uint32_t node_ = 0;
};

TEST_F(ForgetTest, ALateForgetSparesTheNewFileOfAReusedInodeNumber) {
  // File 10 is created by app "a" and deleted; its forget is still on its way.
  const wire::FileLocation old = Assign(10, "a", /*fresh=*/true);
  ASSERT_NE(old.acg, 0u);
  ASSERT_NE(old.generation, 0u);
  // Assigning a mapped file again (not fresh) answers the same mapping.
  const wire::FileLocation same = Assign(10, "a", false);
  EXPECT_EQ(same.acg, old.acg);
  EXPECT_EQ(same.generation, old.generation);
  // A forget of another generation changes nothing.
  ASSERT_TRUE(Forget(10, old.generation + 1000).ok());
  EXPECT_EQ(Lookup(10).acg, old.acg);

  // Inode 10 is reused by a file app "b" creates before the forget arrives: it is placed by
  // the rules (b's own new ACG), not where the stale mapping points, with a new generation.
  const wire::FileLocation reused = Assign(10, "b", /*fresh=*/true);
  EXPECT_NE(reused.acg, old.acg);
  EXPECT_GT(reused.generation, old.generation);
  EXPECT_EQ(AcgFiles(old.acg), 0u);  // the stale mapping's count moved with it
  EXPECT_EQ(AcgFiles(reused.acg), 1u);

  // The late forget of the deleted file: the new file's mapping stays.
  ASSERT_TRUE(Forget(10, old.generation).ok());
  wire::FileLocation now = Lookup(10);
  EXPECT_EQ(now.acg, reused.acg);
  EXPECT_EQ(now.generation, reused.generation);

  // Generations survive a restart of the master.
  Reopen();
  now = Lookup(10);
  EXPECT_EQ(now.acg, reused.acg);
  EXPECT_EQ(now.generation, reused.generation);

  // The new file's own forget (its generation) removes it.
  ASSERT_TRUE(Forget(10, reused.generation).ok());
  EXPECT_EQ(Lookup(10).acg, 0u);
  EXPECT_EQ(Lookup(10).generation, 0u);
  EXPECT_EQ(AcgFiles(reused.acg), 0u);
  EXPECT_EQ(master_->store().FileCount(), 0u);
}

TEST_F(ForgetTest, AFreshPlacementEvenInTheSameAcgGetsANewGeneration) {
  const wire::FileLocation old = Assign(20, "a", true);
  const wire::FileLocation reused = Assign(20, "a", true);  // app a's ACG again
  EXPECT_EQ(reused.acg, old.acg);
  EXPECT_NE(reused.generation, old.generation);
  EXPECT_EQ(AcgFiles(old.acg), 1u);  // moved onto itself: counted once
  ASSERT_TRUE(Forget(20, old.generation).ok());
  EXPECT_EQ(Lookup(20).generation, reused.generation);
}

TEST_F(ForgetTest, UnconditionalAndMalformedForgets) {
  Assign(30, "a", true);
  Assign(31, "a", true);
  // A 1.0 client's forget (no generations) unmaps whatever is there.
  ASSERT_TRUE(master_->ForgetFiles({{FileId{volume_, 30}}}).ok());
  EXPECT_EQ(Lookup(30).acg, 0u);
  // Generations must be one per file; nothing is forgotten otherwise.
  wire::FilesRequest bad;
  bad.files = {FileId{volume_, 31}, FileId{volume_, 32}};
  bad.generations = {Lookup(31).generation};
  EXPECT_EQ(master_->ForgetFiles(bad).code(), StatusCode::kInvalidArgument);
  EXPECT_NE(Lookup(31).acg, 0u);
}

TEST_F(ForgetTest, NewFieldsCrossTheWireAndOldBytesStayTheSame) {
  wire::FilesRequest f;
  f.files = {FileId{1, 2}, FileId{1, 3}};
  std::string plain;
  wire::Encode(f, &plain);
  f.generations = {7, 1ull << 40};
  std::string with;
  wire::Encode(f, &with);
  EXPECT_NE(plain, with);
  wire::FilesRequest back;
  ASSERT_TRUE(wire::Decode(with, &back).ok());
  EXPECT_EQ(back.generations, f.generations);
  ASSERT_TRUE(wire::Decode(plain, &back).ok());
  EXPECT_TRUE(back.generations.empty());
  // A 1.0 client's forget, [[[1, 2]]]: no generations, an unconditional forget.
  ASSERT_TRUE(wire::Decode(std::string("\x91\x91\x92\x01\x02", 5), &back).ok());
  EXPECT_EQ(back.files, (std::vector<FileId>{FileId{1, 2}}));
  EXPECT_TRUE(back.generations.empty());

  wire::AssignFilesRequest a;
  a.items.resize(2);
  a.items[0].file = FileId{1, 2};
  a.items[1].file = FileId{1, 3};
  a.items[1].fresh = true;
  std::string bytes;
  wire::Encode(a, &bytes);
  wire::AssignFilesRequest a2;
  ASSERT_TRUE(wire::Decode(bytes, &a2).ok());
  ASSERT_EQ(a2.items.size(), 2u);
  EXPECT_FALSE(a2.items[0].fresh);
  EXPECT_TRUE(a2.items[1].fresh);

  wire::LocationsReply r;
  r.locations = {wire::FileLocation{FileId{1, 2}, 5, 1, "tcp://h:1", 0},
                 wire::FileLocation{FileId{1, 3}, 6, 1, "tcp://h:1", 99}};
  bytes.clear();
  wire::Encode(r, &bytes);
  wire::LocationsReply r2;
  ASSERT_TRUE(wire::Decode(bytes, &r2).ok());
  ASSERT_EQ(r2.locations.size(), 2u);
  EXPECT_EQ(r2.locations[0].generation, 0u);
  EXPECT_EQ(r2.locations[1].generation, 99u);
  EXPECT_EQ(r2.locations[1].acg, 6u);
}

// Random interleavings of creates, deletes, plain re-assignments and forgets delivered late and
// out of order, against a model: a live file is always mapped with the generation its creator
// got; once every forget is delivered, exactly the live files are mapped.
TEST_F(ForgetTest, RandomLateForgetsNeverUnmapALiveFile) {
  const uint64_t seed = 20261122;
  SCOPED_TRACE("seed " + std::to_string(seed));
  Random rnd(seed);
  std::map<uint64_t, uint64_t> live;                      // ino -> generation
  std::vector<std::pair<uint64_t, uint64_t>> in_flight;   // forgets not yet delivered
  const char* apps[] = {"a", "b", "c"};
  for (int step = 0; step < 3000; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    const uint64_t ino = 1 + rnd.Uniform(12);
    const uint64_t op = rnd.Uniform(10);
    if (op < 4 && live.count(ino) == 0) {  // create (the number is free in the file system)
      const wire::FileLocation loc = Assign(ino, apps[rnd.Uniform(3)], true);
      ASSERT_NE(loc.acg, 0u);
      live[ino] = loc.generation;
    } else if (op < 7 && live.count(ino) != 0) {  // delete: the forget goes in flight
      in_flight.emplace_back(ino, live[ino]);
      live.erase(ino);
    } else if (op < 8 && live.count(ino) != 0) {  // another client routes it: same mapping
      const wire::FileLocation loc = Assign(ino, "z", false);
      ASSERT_EQ(loc.generation, live[ino]);
    } else if (!in_flight.empty()) {  // deliver one forget, any of them
      const size_t i = rnd.Uniform(in_flight.size());
      ASSERT_TRUE(Forget(in_flight[i].first, in_flight[i].second).ok());
      in_flight.erase(in_flight.begin() + static_cast<std::ptrdiff_t>(i));
    }
    for (const auto& [f, gen] : live) {
      const wire::FileLocation loc = Lookup(f);
      ASSERT_NE(loc.acg, 0u) << "live file " << f << " lost its mapping";
      ASSERT_EQ(loc.generation, gen) << "file " << f;
    }
  }
  for (const auto& [f, gen] : in_flight) ASSERT_TRUE(Forget(f, gen).ok());
  for (uint64_t f = 1; f <= 12; ++f) {
    EXPECT_EQ(Lookup(f).acg != 0, live.count(f) != 0) << "file " << f;
  }
  EXPECT_EQ(master_->store().FileCount(), live.size());
  uint64_t counted = 0;
  for (const auto& [acg, rec] : master_->store().Acgs()) counted += rec.files;
  EXPECT_EQ(counted, live.size());
  Reopen();  // the store's own consistency checks (per-ACG counts) run at open
  EXPECT_EQ(master_->store().FileCount(), live.size());
}

// ---- splits: a new ACG for half of one, then the map flip (docs/architecture.md §5) --------

TEST_F(ForgetTest, SplitGivesANewAcgAndRemapsOnlyWhatTheSourceStillHas) {
  std::vector<wire::FileLocation> before;
  for (uint64_t ino = 1; ino <= 10; ++ino) before.push_back(Assign(ino, "cc", true));
  const uint64_t source = before[0].acg;
  ASSERT_NE(source, 0u);
  const uint32_t other = *Register(0, "tcp://127.0.0.1:7472");

  // Only the owner may split, and only an existing ACG.
  wire::NewAcgReply created;
  EXPECT_EQ(master_->NewAcg({other, source}, &created).code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(master_->NewAcg({node_, 999}, &created).code(), StatusCode::kNotFound);
  EXPECT_EQ(master_->NewAcg({node_, 0}, &created).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(master_->NewAcg({node_, source}, &created).ok());
  const uint64_t target = created.acg;
  EXPECT_GT(target, source);
  std::optional<AcgRecord> rec = master_->store().GetAcg(target);
  ASSERT_TRUE(rec.has_value());
  EXPECT_EQ(rec->node_id, node_);
  EXPECT_EQ(rec->app, "cc");
  EXPECT_EQ(rec->files, 0u);

  // File 3 is deleted and its inode number reused by another app before the report arrives:
  // its new mapping is not the source's, so the report leaves it alone. File 99 was never
  // mapped.
  ASSERT_TRUE(Forget(3, before[2].generation).ok());
  const wire::FileLocation reused = Assign(3, "ld", true);
  ASSERT_NE(reused.acg, source);
  wire::SplitDoneRequest report{node_, source, target, {}};
  for (uint64_t ino : {1, 2, 3, 4, 5, 99}) report.files.push_back(FileId{volume_, ino});
  wire::SplitDoneReply done;
  EXPECT_EQ(master_->SplitDone({other, source, target, report.files}, &done).code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(master_->SplitDone({node_, source, source, report.files}, &done).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Lookup(1).acg, source);  // refused reports changed nothing
  ASSERT_TRUE(master_->SplitDone(report, &done).ok());
  EXPECT_EQ(done.remapped, 4u);
  for (uint64_t ino : {1, 2, 4, 5}) {
    const wire::FileLocation now = Lookup(ino);
    EXPECT_EQ(now.acg, target) << ino;
    EXPECT_EQ(now.generation, before[ino - 1].generation) << ino;  // the same mapping
  }
  EXPECT_EQ(Lookup(3).acg, reused.acg);
  EXPECT_EQ(Lookup(99).acg, 0u);
  for (uint64_t ino = 6; ino <= 10; ++ino) EXPECT_EQ(Lookup(ino).acg, source) << ino;
  EXPECT_EQ(AcgFiles(source), 5u);
  EXPECT_EQ(AcgFiles(target), 4u);

  // The report is idempotent (a node re-sends it until it hears OK), and a late forget with
  // the generation the client saw still finds the moved mapping.
  ASSERT_TRUE(master_->SplitDone(report, &done).ok());
  EXPECT_EQ(done.remapped, 0u);
  EXPECT_EQ(AcgFiles(target), 4u);
  ASSERT_TRUE(Forget(2, before[1].generation).ok());
  EXPECT_EQ(Lookup(2).acg, 0u);
  EXPECT_EQ(AcgFiles(target), 3u);

  // The app keeps placing into the source (now half as full), and everything survives a
  // restart; the store's counts still agree with its files (checked at open).
  EXPECT_EQ(Assign(50, "cc", true).acg, source);
  Reopen();
  EXPECT_EQ(Lookup(1).acg, target);
  EXPECT_EQ(Lookup(50).acg, source);
  EXPECT_EQ(master_->store().GetAcg(target)->files, 3u);
}

TEST_F(ForgetTest, MoveAcgFlipsTheOwnerOnceAndSurvivesRestart) {
  const wire::FileLocation f = Assign(1, "cc", true);
  const uint64_t acg = f.acg;
  ASSERT_NE(acg, 0u);
  const uint32_t other = *Register(0, "tcp://127.0.0.1:7472");
  EXPECT_EQ(master_->MoveAcg({acg, node_, node_}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(master_->MoveAcg({acg, 0, other}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(master_->MoveAcg({999, node_, other}).code(), StatusCode::kNotFound);
  EXPECT_EQ(master_->MoveAcg({acg, other, 77}).code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(master_->MoveAcg({acg, node_, 77}).code(), StatusCode::kInvalidArgument)
      << "no such node";
  EXPECT_EQ(master_->store().GetAcg(acg)->node_id, node_) << "refusals changed nothing";

  ASSERT_TRUE(master_->MoveAcg({acg, node_, other}).ok());
  EXPECT_TRUE(master_->MoveAcg({acg, node_, other}).ok()) << "asked again";
  wire::AcgLocationsReply where;
  ASSERT_TRUE(master_->LocateAcgs({{acg}}, &where).ok());
  ASSERT_EQ(where.locations.size(), 1u);
  EXPECT_EQ(where.locations[0].node_id, other);
  EXPECT_EQ(where.locations[0].endpoint, "tcp://127.0.0.1:7472");
  EXPECT_EQ(Lookup(1).acg, acg) << "files keep their ACG";
  // The old owner cannot move it any more; the app keeps placing into it, on its new node.
  EXPECT_EQ(master_->MoveAcg({acg, node_, 77}).code(), StatusCode::kPermissionDenied);
  const wire::FileLocation g = Assign(2, "cc", true);
  EXPECT_EQ(g.acg, acg);
  EXPECT_EQ(g.node_id, other);
  Reopen();
  EXPECT_EQ(master_->store().GetAcg(acg)->node_id, other);
}

// docs/architecture.md §5: the half a node split off goes to a less loaded node, through the
// splitting node's heartbeats (HeartbeatReply.moves), when that narrows the gap between the two.
TEST_F(ForgetTest, SplitHalvesMoveToALighterNode) {
  for (uint64_t ino = 1; ino <= 20; ++ino) ASSERT_NE(Assign(ino, "cc", true).acg, 0u);
  const uint64_t source = Lookup(1).acg;
  const uint32_t other = *Register(0, "tcp://127.0.0.1:7472");
  auto beat = [&](uint32_t node, std::vector<wire::AcgLoad> acgs) {
    return BeatWith(node, std::move(acgs)).moves;
  };
  auto split = [&](uint64_t from, uint64_t first, uint64_t last, bool merged = false) {
    wire::NewAcgReply created;
    EXPECT_TRUE(master_->NewAcg({node_, from}, &created).ok());
    wire::SplitDoneRequest report{node_, from, created.acg, {}, merged};
    for (uint64_t ino = first; ino <= last; ++ino) report.files.push_back(FileId{volume_, ino});
    wire::SplitDoneReply done;
    EXPECT_TRUE(master_->SplitDone(report, &done).ok());
    return created.acg;
  };
  EXPECT_TRUE(beat(other, {}).empty());
  EXPECT_TRUE(beat(node_, {{source, 20}}).empty()) << "nothing split yet";

  // Split 20 into 10 + 10: the other node (0 files) stays lighter with the half (10 < 20).
  const uint64_t half = split(source, 1, 10);
  EXPECT_TRUE(beat(node_, {{source, 10}}).empty()) << "the node does not list the half yet";
  std::vector<wire::AcgLocation> moves = beat(node_, {{source, 10}, {half, 10}});
  ASSERT_EQ(moves.size(), 1u);
  EXPECT_EQ(moves[0].acg, half);
  EXPECT_EQ(moves[0].node_id, other);
  EXPECT_EQ(moves[0].endpoint, "tcp://127.0.0.1:7472");
  EXPECT_TRUE(beat(other, {}).empty()) << "only the splitting node is asked";
  EXPECT_EQ(beat(node_, {{source, 10}, {half, 10}}).size(), 1u) << "asked until it moved";
  ASSERT_TRUE(master_->MoveAcg({half, node_, other}).ok());
  EXPECT_TRUE(beat(node_, {{source, 10}}).empty()) << "moved: not asked again";
  EXPECT_TRUE(beat(other, {{half, 10}}).empty());

  // 15 files here, 10 there: the other node is less loaded, but with a 5-file half it would
  // not stay below this one (10 + 5 = 15), so the half stays, even once the other empties.
  for (uint64_t ino = 21; ino <= 25; ++ino) ASSERT_EQ(Assign(ino, "cc", true).acg, source);
  const uint64_t stays = split(source, 11, 15);
  EXPECT_TRUE(beat(node_, {{source, 10}, {stays, 5}}).empty());
  ASSERT_TRUE(master_->MoveAcg({half, other, node_}).ok());
  EXPECT_TRUE(beat(other, {}).empty());
  EXPECT_TRUE(beat(node_, {{source, 10}, {stays, 5}, {half, 10}}).empty()) << "decided once";

  // A merge is not a split: nothing moves.
  const uint64_t merged = split(stays, 11, 15, /*merged=*/true);
  EXPECT_TRUE(beat(node_, {{source, 10}, {merged, 5}, {half, 10}}).empty());

  // Turned off: halves stay where they were split.
  move_halves_ = false;
  Reopen();
  ASSERT_TRUE(Beat(other));
  const uint64_t kept = split(half, 1, 5);
  EXPECT_TRUE(beat(node_, {{source, 10}, {merged, 5}, {half, 5}, {kept, 5}}).empty());
}

// A half split again keeps routes, and a node never moves an ACG with routes: the master stops
// asking for it and asks for the new halves instead. One the node keeps refusing does not hold
// up the others (cluster_split_test once waited 90 s on such a half).
TEST_F(ForgetTest, AHalfSplitAgainStaysAndTheOtherHalvesMove) {
  for (uint64_t ino = 1; ino <= 40; ++ino) ASSERT_NE(Assign(ino, "cc", true).acg, 0u);
  const uint64_t source = Lookup(1).acg;
  const uint32_t other = *Register(0, "tcp://127.0.0.1:7472");
  ASSERT_TRUE(Beat(other));
  auto split = [&](uint64_t from, uint64_t first, uint64_t last) {
    wire::NewAcgReply created;
    EXPECT_TRUE(master_->NewAcg({node_, from}, &created).ok());
    wire::SplitDoneRequest report{node_, from, created.acg, {}, false};
    for (uint64_t ino = first; ino <= last; ++ino) report.files.push_back(FileId{volume_, ino});
    wire::SplitDoneReply done;
    EXPECT_TRUE(master_->SplitDone(report, &done).ok());
    return created.acg;
  };
  const uint64_t half = split(source, 1, 20);     // 20 + 20
  const uint64_t quarter = split(half, 1, 10);    // the half split again: 20 + 10 + 10
  const uint64_t other_quarter = split(source, 21, 30);  // 10 + 10 + 10 + 10
  std::vector<wire::AcgLoad> loads = {{source, 10}, {half, 10}, {quarter, 10},
                                      {other_quarter, 10}};
  std::set<uint64_t> asked;
  for (int i = 0; i < 4; ++i) {
    const std::vector<wire::AcgLocation> moves = BeatWith(node_, loads).moves;
    ASSERT_EQ(moves.size(), 1u) << "beat " << i;
    EXPECT_NE(moves[0].acg, half) << "a split source keeps routes and cannot move";
    EXPECT_EQ(moves[0].node_id, other);
    asked.insert(moves[0].acg);
  }
  EXPECT_EQ(asked, (std::set<uint64_t>{quarter, other_quarter}))
      << "both movable halves are asked for, whichever the node refuses";
}

// Two small ACGs of one app on different nodes: the smaller moves to the other's node
// (HeartbeatReply.moves), whose next heartbeat merges the two.
TEST_F(ForgetTest, SmallAcgsOfOneAppOnTwoNodesMeetOnOne) {
  threshold_ = 16;
  Reopen();
  const uint32_t other = *Register(0, "tcp://127.0.0.1:7472");
  ASSERT_TRUE(Beat(node_));
  ASSERT_TRUE(Beat(other));
  std::vector<wire::FileLocation> locs;
  for (uint64_t ino = 1; ino <= 48; ++ino) locs.push_back(Assign(ino, "cc", true));
  const uint64_t a = locs[0].acg, b = locs[16].acg, c = locs[32].acg;
  ASSERT_TRUE(a != b && b != c && a != c);
  ASSERT_NE(locs[0].node_id, locs[16].node_id) << "placement spreads new ACGs over the nodes";
  const uint32_t node_a = locs[0].node_id, node_b = locs[16].node_id;
  for (uint64_t ino = 1; ino <= 13; ++ino) ASSERT_TRUE(Forget(ino, locs[ino - 1].generation).ok());
  for (uint64_t ino = 17; ino <= 30; ++ino) {
    ASSERT_TRUE(Forget(ino, locs[ino - 1].generation).ok());
  }
  auto beat = [&](uint32_t node, std::vector<wire::AcgLoad> acgs) {
    return BeatWith(node, std::move(acgs));
  };
  // c, the app's current ACG, is on one of the two nodes.
  std::vector<wire::AcgLoad> on_a = {{a, 3}}, on_b = {{b, 2}};
  (locs[32].node_id == node_a ? on_a : on_b).push_back({c, 16});
  EXPECT_TRUE(beat(node_a, on_a).moves.empty());
  EXPECT_TRUE(beat(node_b, on_b).moves.empty());
  clock_.Advance(301'000);
  // a (3 files) is the larger: its node is not asked to move it; b (2) moves to a's node.
  wire::HeartbeatReply ra = beat(node_a, on_a);
  EXPECT_TRUE(ra.moves.empty());
  EXPECT_TRUE(ra.merges.empty()) << "merges happen on one node";
  wire::HeartbeatReply rb = beat(node_b, on_b);
  ASSERT_EQ(rb.moves.size(), 1u);
  EXPECT_EQ(rb.moves[0].acg, b);
  EXPECT_EQ(rb.moves[0].node_id, node_a);
  EXPECT_TRUE(rb.merges.empty());
  // Moved: a's node merges the two at once (both stayed small long enough).
  ASSERT_TRUE(master_->MoveAcg({b, node_b, node_a}).ok());
  on_a.push_back({b, 2});
  std::erase_if(on_b, [&](const wire::AcgLoad& l) { return l.acg == b; });
  EXPECT_TRUE(beat(node_b, on_b).moves.empty());
  wire::HeartbeatReply merged = beat(node_a, on_a);
  ASSERT_EQ(merged.merges.size(), 1u);
  EXPECT_EQ(merged.merges[0].source, b);
  EXPECT_EQ(merged.merges[0].target, a);
  EXPECT_TRUE(merged.moves.empty());
}

TEST_F(ForgetTest, SmallAcgsOfOneAppThatStaySmallAreMerged) {
  threshold_ = 16;  // small = below 4 files; two merge while together at most 8
  Reopen();
  ASSERT_TRUE(Beat(node_));  // up again after the restart
  std::vector<wire::FileLocation> locs;
  for (uint64_t ino = 1; ino <= 48; ++ino) locs.push_back(Assign(ino, "cc", true));
  const uint64_t a = locs[0].acg, b = locs[16].acg, c = locs[32].acg;
  ASSERT_TRUE(a != b && b != c && a != c);
  EXPECT_EQ(master_->store().AppAcg("cc"), c);  // the current one, which grows
  for (uint64_t ino = 1; ino <= 13; ++ino) ASSERT_TRUE(Forget(ino, locs[ino - 1].generation).ok());
  for (uint64_t ino = 17; ino <= 30; ++ino) {
    ASSERT_TRUE(Forget(ino, locs[ino - 1].generation).ok());
  }
  ASSERT_EQ(AcgFiles(a), 3u);
  ASSERT_EQ(AcgFiles(b), 2u);
  auto beat = [&](std::vector<wire::AcgLoad> acgs) {
    return BeatWith(node_, std::move(acgs)).merges;
  };
  const std::vector<wire::AcgLoad> loads = {{a, 3}, {b, 2}, {c, 16}};
  EXPECT_TRUE(beat(loads).empty()) << "small, but not for long yet";
  clock_.Advance(299'000);
  EXPECT_TRUE(beat(loads).empty());
  clock_.Advance(2'000);
  std::vector<wire::AcgMerge> merges = beat(loads);
  ASSERT_EQ(merges.size(), 1u);
  EXPECT_EQ(merges[0].source, b);  // the smaller into the other
  EXPECT_EQ(merges[0].target, a);
  // The node must hold both (a merge is local) and the counts must stay small.
  EXPECT_TRUE(beat({{a, 3}, {c, 16}}).empty());
  EXPECT_TRUE(beat({{a, 7}, {b, 2}, {c, 16}}).empty()) << "a grew (reported): not small now";
  EXPECT_TRUE(beat(loads).empty()) << "small again: the wait starts over";
  clock_.Advance(301'000);
  ASSERT_EQ(beat(loads).size(), 1u);

  // The node merged and reports: b is retired, its files map to a, and it no longer counts.
  // The report lists 31 only, as when 32's first update had not reached the node at the
  // merge: 32 moves too (a merge moves everything).
  wire::SplitDoneRequest report{node_, b, a, {}, /*merged=*/true};
  report.files.push_back(FileId{volume_, 31});
  wire::SplitDoneReply done;
  ASSERT_TRUE(master_->SplitDone(report, &done).ok());
  EXPECT_EQ(done.remapped, 2u);
  EXPECT_EQ(master_->store().GetAcg(b)->state, AcgState::kRetired);
  EXPECT_EQ(Lookup(31).acg, a);
  EXPECT_EQ(Lookup(32).acg, a);
  EXPECT_EQ(Lookup(32).generation, locs[31].generation) << "a move keeps the generation";
  EXPECT_EQ(AcgFiles(b), 0u);
  EXPECT_EQ(AcgFiles(a), 5u);
  // A repeated report (the node retries until acknowledged) changes nothing.
  ASSERT_TRUE(master_->SplitDone(report, &done).ok());
  EXPECT_EQ(done.remapped, 0u);
  EXPECT_EQ(AcgFiles(a), 5u);
  wire::ClusterStatusReply st;
  ASSERT_TRUE(master_->ClusterStatus(&st).ok());
  EXPECT_EQ(st.acgs, 2u);
  EXPECT_TRUE(beat({{a, 5}, {c, 16}}).empty());
  // Merging the app's current ACG away moves the app's placement with it; state survives a
  // restart.
  ASSERT_TRUE(master_->SplitDone({node_, c, a, {}, true}, &done).ok());
  EXPECT_EQ(master_->store().AppAcg("cc"), a);
  EXPECT_EQ(done.remapped, 16u);  // none listed: the sweep moves all of c's files
  EXPECT_EQ(Lookup(33).acg, a);
  EXPECT_EQ(AcgFiles(c), 0u);
  EXPECT_EQ(AcgFiles(a), 21u);
  Reopen();
  ASSERT_TRUE(Beat(node_));
  EXPECT_EQ(master_->store().GetAcg(c)->state, AcgState::kRetired);
  EXPECT_EQ(master_->store().AppAcg("cc"), a);
  // a now holds 21 files, above the threshold of 16: the app's next file opens a new ACG.
  const uint64_t next = Assign(100, "cc", true).acg;
  EXPECT_TRUE(next != a && next != b && next != c);
  EXPECT_EQ(master_->store().AppAcg("cc"), next);
}

TEST(MasterConfigTest, RejectsBadConfig) {
  TempDir dir;
  MasterConfig c;
  EXPECT_EQ(Master::Open(c).status().code(), StatusCode::kInvalidArgument);
  c.data_dir = dir.path();
  c.acg_threshold = 0;
  EXPECT_EQ(Master::Open(c).status().code(), StatusCode::kInvalidArgument);
  c.acg_threshold = 1;
  c.node_timeout_ms = 0;
  EXPECT_EQ(Master::Open(c).status().code(), StatusCode::kInvalidArgument);
  c.node_timeout_ms = 900;
  auto m = Master::Open(c);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ((*m)->config().heartbeat_interval_ms, 300u);  // capped at a third of the timeout
}

}  // namespace
}  // namespace propeller::master
