// IndexNodeServer with a fake master: registration and the persisted node id, heartbeats and
// what they carry, index reconciliation from heartbeat replies, re-registration, a master
// that is down at start, and bad options.
#include "indexnode/server/node_server.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <set>

#include "common/env.h"
#include "indexnode/engine_test_util.h"
#include "indexnode/server/fake_master.h"
#include "indexnode/server/node_service.h"
#include "schemas/wire_call.h"

namespace propeller {
namespace {

using testing::FakeMaster;
using testing::TempDir;
using testing::WaitFor;
using wire::MsgType;

std::string UniqueName(const char* what) {
  static std::atomic<int> counter{0};
  return std::string("inproc://") + what + "-" + std::to_string(counter.fetch_add(1));
}

IndexNodeOptions Options(const std::string& data, const std::string& master) {
  IndexNodeOptions o;
  o.data_dir = data;
  o.master_endpoint = master;
  o.listen_endpoint = "tcp://127.0.0.1:0";
  o.insecure = true;  // membership is under test here, not link security (cluster_test)
  o.worker_threads = 2;
  o.master_timeout_ms = 500;
  o.engine.search_threads = 2;
  return o;
}

std::unique_ptr<IndexNodeServer> StartNode(const IndexNodeOptions& o) {
  auto s = IndexNodeServer::Start(o);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(s).value() : nullptr;
}

Update Put(uint64_t acg, uint64_t ino) {
  Update u;
  u.acg = acg;
  u.record.id = FileId{1, ino};
  u.record.paths = {"/f" + std::to_string(ino)};
  u.record.size = ino;
  return u;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::set<std::string> EngineUserIndexes(Engine* e) {
  std::set<std::string> out;
  for (const IndexInfo& i : e->ListIndexes()) {
    if (!i.builtin) out.insert(i.name + ":" + IndexTypeName(i.type));
  }
  return out;
}

TEST(NodeServerTest, RegistersHeartbeatsAndKeepsItsIdAcrossRestarts) {
  TempDir dir;
  auto master = FakeMaster::Start(UniqueName("master"));
  ASSERT_TRUE(master);
  {
    auto node = StartNode(Options(dir.path(), master->endpoint()));
    ASSERT_TRUE(node);
    EXPECT_NE(node->endpoint().find("tcp://127.0.0.1:"), std::string::npos);
    EXPECT_NE(node->endpoint().substr(node->endpoint().rfind(':')), ":0");  // port resolved
    ASSERT_TRUE(WaitFor([&] { return node->registered(); }));
    EXPECT_EQ(node->node_id(), 1u);
    EXPECT_EQ(ReadAll(dir.path() + "/node_id"), "1\n");
    auto regs = master->registrations();
    ASSERT_EQ(regs.size(), 1u);
    EXPECT_EQ(regs[0].node_id, 0u);
    EXPECT_EQ(regs[0].endpoint, node->endpoint());

    // Heartbeats report the ACGs (after an Apply) with their sizes, and the disk.
    master->SetOwner(3, 1);
    master->SetOwner(5, 1);
    auto ch = rpc::Channel::Connect({.endpoint = node->endpoint()});
    ASSERT_TRUE(ch.ok());
    wire::ApplyRequest req;
    req.updates = {Put(3, 1), Put(3, 2), Put(5, 3)};
    wire::Empty e;
    ASSERT_TRUE(wire::WireCall(**ch, MsgType::kApply, req, &e).ok());
    ASSERT_TRUE(node->engine()->CommitAll().ok());
    ASSERT_TRUE(WaitFor([&] {
      auto hb = master->last_heartbeat();
      if (!hb || hb->acgs.size() != 2) return false;
      return hb->acgs[0].acg == 3 && hb->acgs[0].files == 2 && hb->acgs[1].acg == 5 &&
             hb->acgs[1].files == 1;
    })) << "heartbeat without the expected ACG sizes";
    auto hb = master->last_heartbeat();
    EXPECT_EQ(hb->node_id, 1u);
    EXPECT_GT(hb->free_disk_bytes, 0u);
    EXPECT_GE(hb->load, 0.0);
  }
  // A second node on the same master gets another id; the first, restarted, keeps its own.
  TempDir other;
  auto node2 = StartNode(Options(other.path(), master->endpoint()));
  ASSERT_TRUE(node2);
  ASSERT_TRUE(WaitFor([&] { return node2->registered(); }));
  EXPECT_EQ(node2->node_id(), 2u);
  auto node = StartNode(Options(dir.path(), master->endpoint()));
  ASSERT_TRUE(node);
  EXPECT_EQ(node->node_id(), 1u);  // from the file, before the master answers
  ASSERT_TRUE(WaitFor([&] { return node->registered(); }));
  auto regs = master->registrations();
  ASSERT_EQ(regs.size(), 3u);
  EXPECT_EQ(regs[2].node_id, 1u);
  EXPECT_EQ(node->node_id(), 1u);
  // The data survived the restart.
  SearchRequest sr;
  sr.query = "size>=0";
  auto hits = node->engine()->SearchAll(sr);
  ASSERT_TRUE(hits.ok());
  EXPECT_EQ(hits->size(), 3u);
}

TEST(NodeServerTest, ReconcilesIndexesFromHeartbeatReplies) {
  TempDir dir;
  auto master = FakeMaster::Start(UniqueName("master"));
  ASSERT_TRUE(master);
  master->SetCatalogue({{"proj", IndexType::kBTree}, {"tag", IndexType::kHash}});
  auto node = StartNode(Options(dir.path(), master->endpoint()));
  ASSERT_TRUE(node);
  ASSERT_TRUE(node->engine()->CreateIndex("stale", IndexType::kBTree).ok());
  const std::set<std::string> want1 = {"proj:btree", "tag:hash"};
  ASSERT_TRUE(WaitFor([&] { return EngineUserIndexes(node->engine()) == want1; }));
  // The heartbeats then report what was built.
  ASSERT_TRUE(WaitFor([&] {
    auto hb = master->last_heartbeat();
    return hb && hb->indexes == std::vector<std::string>{"proj", "tag"};
  }));

  master->SetCatalogue({{"tag", IndexType::kBTree}});
  const std::set<std::string> want2 = {"tag:btree"};
  ASSERT_TRUE(WaitFor([&] { return EngineUserIndexes(node->engine()) == want2; }));
  master->SetCatalogue({});
  ASSERT_TRUE(WaitFor([&] { return EngineUserIndexes(node->engine()).empty(); }));
}

TEST(NodeServerTest, RegistersAgainWhenTheMasterAsks) {
  TempDir dir;
  auto master = FakeMaster::Start(UniqueName("master"));
  ASSERT_TRUE(master);
  auto node = StartNode(Options(dir.path(), master->endpoint()));
  ASSERT_TRUE(node);
  ASSERT_TRUE(WaitFor([&] { return master->heartbeats() >= 2; }));
  ASSERT_EQ(master->registrations().size(), 1u);
  master->RequestReregister();
  ASSERT_TRUE(WaitFor([&] { return master->registrations().size() == 2; }));
  EXPECT_EQ(master->registrations()[1].node_id, 1u);
  const uint64_t hb = master->heartbeats();
  ASSERT_TRUE(WaitFor([&] { return master->heartbeats() > hb + 1; }));  // and carries on
  EXPECT_EQ(master->registrations().size(), 2u);
}

TEST(NodeServerTest, ServesOwnedAcgsWhileTheMasterIsDownAndRegistersLater) {
  TempDir dir;
  {  // ACG 4 exists from an earlier life, as node 1.
    EngineOptions eo;
    eo.data_dir = dir.path();
    auto engine = Engine::Open(eo);
    ASSERT_TRUE(engine.ok());
    ASSERT_TRUE((*engine)->Apply(std::vector<Update>{Put(4, 1)}).ok());
    std::ofstream(dir.path() + "/node_id") << "1\n";
  }
  const std::string master_ep = UniqueName("late-master");
  IndexNodeOptions o = Options(dir.path(), master_ep);
  o.master_timeout_ms = 200;
  o.heartbeat_interval_ms = 50;
  auto node = StartNode(o);
  ASSERT_TRUE(node);
  auto ch = rpc::Channel::Connect({.endpoint = node->endpoint()});
  ASSERT_TRUE(ch.ok());
  wire::Ping pong;
  ASSERT_TRUE(wire::WireCall(**ch, MsgType::kPing, wire::Ping{"x"}, &pong).ok());
  wire::Empty e;
  wire::ApplyRequest req;
  req.updates = {Put(4, 2)};
  EXPECT_TRUE(wire::WireCall(**ch, MsgType::kApply, req, &e).ok());
  req.updates = {Put(6, 3)};
  Status st = wire::WireCall(**ch, MsgType::kApply, req, &e);
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();
  EXPECT_FALSE(node->registered());

  auto master = FakeMaster::Start(master_ep);
  ASSERT_TRUE(master);
  master->SetOwner(6, 1);
  ASSERT_TRUE(WaitFor([&] { return node->registered(); }));
  EXPECT_EQ(node->node_id(), 1u);
  EXPECT_TRUE(wire::WireCall(**ch, MsgType::kApply, req, &e).ok());
}

// A migration's source killed after the flip keeps its copy on disk: restarted, it must not
// acknowledge updates into it (they would go with the copy), even before its first heartbeat.
TEST(NodeServerTest, ARestartedNodeDoesNotServeAcgsTheMasterGaveAway) {
  TempDir dir;
  auto master = FakeMaster::Start(UniqueName("master"));
  ASSERT_TRUE(master);
  master->SetOwner(4, 1);
  master->SetOwner(7, 1);
  IndexNodeOptions o = Options(dir.path(), master->endpoint());
  wire::Empty e;
  wire::ApplyRequest req;
  {
    auto node = StartNode(o);
    ASSERT_TRUE(node);
    ASSERT_TRUE(WaitFor([&] { return node->registered(); }));
    ASSERT_EQ(node->node_id(), 1u);
    auto ch = rpc::Channel::Connect({.endpoint = node->endpoint()});
    ASSERT_TRUE(ch.ok());
    req.updates = {Put(4, 1), Put(7, 2)};
    ASSERT_TRUE(wire::WireCall(**ch, MsgType::kApply, req, &e).ok());
  }
  master->SetOwner(7, 2, "tcp://10.0.0.2:7471");  // moved while node 1 was down
  o.heartbeat_interval_ms = 60'000;  // no heartbeat (and no not_yours) during the test
  auto node = StartNode(o);
  ASSERT_TRUE(node);
  auto ch = rpc::Channel::Connect({.endpoint = node->endpoint()});
  ASSERT_TRUE(ch.ok());
  req.updates = {Put(7, 3)};
  std::vector<wire::AcgLocation> redirects;
  Status st = wire::WireCall(**ch, MsgType::kApply, req, &e, {}, &redirects);
  EXPECT_EQ(st.code(), StatusCode::kRedirect) << st.ToString();
  ASSERT_EQ(redirects.size(), 1u);
  EXPECT_EQ(redirects[0].node_id, 2u);
  req.updates = {Put(4, 4)};
  EXPECT_TRUE(wire::WireCall(**ch, MsgType::kApply, req, &e).ok());
}

TEST(NodeServerTest, BadOptions) {
  TempDir dir;
  IndexNodeOptions o = Options(dir.path(), "inproc://nobody");
  o.master_endpoint = "";
  EXPECT_EQ(IndexNodeServer::Start(o).status().code(), StatusCode::kInvalidArgument);
  o = Options("", "inproc://nobody");
  EXPECT_EQ(IndexNodeServer::Start(o).status().code(), StatusCode::kInvalidArgument);
  o = Options(dir.path(), "inproc://nobody");
  o.curve_key_file = dir.path() + "/key";
  EXPECT_EQ(IndexNodeServer::Start(o).status().code(), StatusCode::kInvalidArgument);  // no allow
  o = Options(dir.path(), "inproc://nobody");
  o.master_key_file = dir.path() + "/master.key";
  EXPECT_EQ(IndexNodeServer::Start(o).status().code(), StatusCode::kInvalidArgument);
  o = Options(dir.path(), "inproc://nobody");
  o.curve_key_file = dir.path() + "/missing.key";
  o.allow_file = dir.path() + "/missing.allow";
  EXPECT_FALSE(IndexNodeServer::Start(o).ok());

  // A damaged node_id file stops the start (silently registering as a new node would orphan
  // this node's ACGs at the master).
  ASSERT_TRUE(WriteFileAtomically(Env::Default(), dir.path() + "/node_id", "banana\n").ok());
  auto s = IndexNodeServer::Start(Options(dir.path(), "inproc://nobody"));
  EXPECT_EQ(s.status().code(), StatusCode::kCorruption);
  EXPECT_NE(s.status().message().find("node_id"), std::string::npos);
}

TEST(NodeServerTest, BindConflictIsAnError) {
  TempDir a, b;
  IndexNodeOptions o = Options(a.path(), "inproc://nobody");
  auto first = StartNode(o);
  ASSERT_TRUE(first);
  o.data_dir = b.path();
  o.listen_endpoint = first->endpoint();
  auto second = IndexNodeServer::Start(o);
  EXPECT_FALSE(second.ok());
}

// Before: a node whose node_id file was lost registered as a new node, the master called its
// ACGs another node's, and the node deleted them. Now it refuses to start, changing nothing.
TEST(NodeServerTest, AMissingNodeIdNextToAnIndexIsARefusal) {
  TempDir dir;
  {
    EngineOptions eo;
    eo.data_dir = dir.path();
    auto engine = Engine::Open(eo);
    ASSERT_TRUE(engine.ok());
    ASSERT_TRUE((*engine)->Apply(std::vector<Update>{Put(4, 1)}).ok());
  }
  auto master = FakeMaster::Start(UniqueName("master"));
  ASSERT_TRUE(master);
  auto node = IndexNodeServer::Start(Options(dir.path(), master->endpoint()));
  ASSERT_FALSE(node.ok());
  EXPECT_EQ(node.status().code(), StatusCode::kNotFound);
  EXPECT_NE(node.status().message().find(dir.path() + "/node_id is missing"), std::string::npos)
      << node.status().ToString();
  EXPECT_TRUE(std::filesystem::exists(dir.path() + "/acg/4")) << "the index must stay";
  EXPECT_TRUE(master->registrations().empty());
  // With the id back, it starts and keeps its ACG.
  std::ofstream(dir.path() + "/node_id") << "7\n";
  auto again = StartNode(Options(dir.path(), master->endpoint()));
  ASSERT_TRUE(again);
  EXPECT_EQ(again->engine()->ListAcgs().size(), 1u);
}

}  // namespace
}  // namespace propeller
