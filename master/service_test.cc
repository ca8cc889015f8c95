// MasterService::Handle on encoded bytes: every master message type answers as Master does;
// foreign and unknown types, other protocol versions and invalid requests get the documented
// errors; malformed, truncated, oversized and random bytes get an error reply and change
// nothing (store dump and node table compared before/after).
#include "master/service.h"

#include <gtest/gtest.h>

#include "common/logging.h"
#include "common/random.h"
#include "master/master_test_util.h"
#include "schemas/messages.h"

namespace propeller::master {
namespace {

using testing::FakeClock;
using testing::TempDir;
using wire::MsgType;

class ServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MasterConfig c;
    c.data_dir = dir_.path();
    c.sync = false;
    c.acg_threshold = 2;
    c.clock = clock_.clock();
    auto m = Master::Open(c);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    master_ = std::move(*m);
    service_ = std::make_unique<MasterService>(master_.get());
  }

  // Sends raw request bytes; returns the remote status and fills *body.
  Status Raw(std::string_view request, std::string* body) {
    const std::string reply = service_->Handle(request, rpc::PeerInfo{});
    wire::ReplyEnvelope env;
    Status st = wire::DecodeReply(reply, &env);
    EXPECT_TRUE(st.ok()) << "the reply itself must be well-formed: " << st.ToString();
    if (!st.ok()) return Status::Internal("bad reply");
    EXPECT_EQ(env.version, wire::kProtocolVersion);
    if (!env.status.ok()) {
      EXPECT_TRUE(env.body.empty());
    }
    body->assign(env.body);
    return env.status;
  }
  template <typename Req, typename Rep>
  Status Call(MsgType type, const Req& req, Rep* rep) {
    std::string body;
    Status st = Raw(wire::EncodeRequest(type, req), &body);
    if (!st.ok()) return st;
    Status d = wire::Decode(body, rep);
    EXPECT_TRUE(d.ok()) << d.ToString();
    return d;
  }

  // Everything a request could change: the store and the node table.
  struct State {
    StoreDump dump;
    std::vector<std::tuple<uint32_t, std::string, bool, int64_t>> nodes;
    bool operator==(const State&) const = default;
  };
  State Snapshot() {
    State s;
    auto d = master_->store().Dump();
    EXPECT_TRUE(d.ok());
    if (d.ok()) s.dump = *d;
    for (const NodeState& n : master_->membership().Nodes()) {
      s.nodes.emplace_back(n.node_id, n.endpoint, n.up, n.last_heartbeat_mono_ns);
    }
    return s;
  }

  // A populated master: one volume, two nodes, a few files, an index.
  void Populate() {
    wire::VolumeInfo v;
    ASSERT_TRUE(Call(MsgType::kRegisterVolume, wire::RegisterVolumeRequest{"/data"}, &v).ok());
    wire::RegisterNodeReply r;
    ASSERT_TRUE(Call(MsgType::kRegisterNode, wire::RegisterNodeRequest{0, "tcp://127.0.0.1:7471"},
                     &r).ok());
    ASSERT_TRUE(Call(MsgType::kRegisterNode, wire::RegisterNodeRequest{0, "tcp://127.0.0.1:7472"},
                     &r).ok());
    wire::AssignFilesRequest req;
    for (uint64_t i = 1; i <= 5; ++i) req.items.push_back(wire::AssignItem{FileId{1, i}, "cc", {}});
    wire::LocationsReply locs;
    ASSERT_TRUE(Call(MsgType::kAssignFiles, req, &locs).ok());
    wire::Empty e;
    ASSERT_TRUE(Call(MsgType::kCreateIndex, wire::IndexDef{"project", IndexType::kHash}, &e).ok());
  }

  TempDir dir_;
  FakeClock clock_;
  std::unique_ptr<Master> master_;
  std::unique_ptr<MasterService> service_;
};

TEST_F(ServiceTest, EveryMessageType) {
  wire::Empty empty;
  wire::VolumeInfo vol;
  ASSERT_TRUE(Call(MsgType::kRegisterVolume, wire::RegisterVolumeRequest{"/data"}, &vol).ok());
  EXPECT_EQ(vol.volume, 1u);
  EXPECT_EQ(vol.root, "/data");
  wire::VolumesReply vols;
  ASSERT_TRUE(Call(MsgType::kListVolumes, empty, &vols).ok());
  ASSERT_EQ(vols.volumes.size(), 1u);

  wire::RegisterNodeReply reg;
  ASSERT_TRUE(Call(MsgType::kRegisterNode, wire::RegisterNodeRequest{0, "tcp://127.0.0.1:7471"},
                   &reg).ok());
  EXPECT_EQ(reg.node_id, 1u);
  EXPECT_EQ(reg.heartbeat_interval_ms, 1000u);

  ASSERT_TRUE(
      Call(MsgType::kCreateIndex, wire::IndexDef{"project", IndexType::kHash}, &empty).ok());
  wire::IndexesReply idx;
  ASSERT_TRUE(Call(MsgType::kListIndexes, empty, &idx).ok());
  ASSERT_EQ(idx.indexes.size(), 1u);
  EXPECT_EQ(idx.indexes[0].name, "project");

  wire::HeartbeatRequest hb;
  hb.node_id = 1;
  hb.acgs = {{1, 3}};
  hb.free_disk_bytes = 12345;
  hb.indexes = {"project"};
  wire::HeartbeatReply hbr;
  ASSERT_TRUE(Call(MsgType::kHeartbeat, hb, &hbr).ok());
  EXPECT_FALSE(hbr.reregister);
  ASSERT_EQ(hbr.indexes.size(), 1u);
  EXPECT_EQ(hbr.indexes[0].type, IndexType::kHash);
  hb.node_id = 9;
  ASSERT_TRUE(Call(MsgType::kHeartbeat, hb, &hbr).ok());
  EXPECT_TRUE(hbr.reregister);

  wire::AssignFilesRequest assign;
  assign.items = {{FileId{1, 10}, "cc", {}}, {FileId{1, 11}, "ld", {FileId{1, 10}}}};
  wire::LocationsReply locs;
  ASSERT_TRUE(Call(MsgType::kAssignFiles, assign, &locs).ok());
  ASSERT_EQ(locs.locations.size(), 2u);
  EXPECT_EQ(locs.locations[0].acg, 1u);
  EXPECT_EQ(locs.locations[1].acg, 1u);
  EXPECT_EQ(locs.locations[1].endpoint, "tcp://127.0.0.1:7471");

  ASSERT_TRUE(Call(MsgType::kLookupFiles, wire::FilesRequest{{FileId{1, 11}, FileId{1, 12}}},
                   &locs).ok());
  ASSERT_EQ(locs.locations.size(), 2u);
  EXPECT_EQ(locs.locations[0].acg, 1u);
  EXPECT_EQ(locs.locations[1].acg, 0u);

  wire::AcgLocationsReply acgs;
  ASSERT_TRUE(Call(MsgType::kLocateAcgs, wire::LocateAcgsRequest{{1, 5}}, &acgs).ok());
  ASSERT_EQ(acgs.locations.size(), 2u);
  EXPECT_EQ(acgs.locations[0].node_id, 1u);
  EXPECT_EQ(acgs.locations[1].node_id, 0u);

  wire::NodesReply nodes;
  ASSERT_TRUE(Call(MsgType::kListNodes, empty, &nodes).ok());
  ASSERT_EQ(nodes.nodes.size(), 1u);
  EXPECT_TRUE(nodes.nodes[0].up);
  EXPECT_EQ(nodes.nodes[0].free_disk_bytes, 12345u);
  EXPECT_EQ(nodes.nodes[0].files, 3u);  // max(store 2, reported 3)

  ASSERT_TRUE(Call(MsgType::kIndexHolders, wire::IndexName{"project"}, &nodes).ok());
  EXPECT_EQ(nodes.nodes.size(), 1u);
  EXPECT_EQ(Call(MsgType::kIndexHolders, wire::IndexName{"nope"}, &nodes).code(),
            StatusCode::kNotFound);

  // A split of ACG 1 on node 1: a new ACG, then the report moves file 11 into it.
  wire::NewAcgReply created;
  ASSERT_TRUE(Call(MsgType::kNewAcg, wire::NewAcgRequest{1, 1}, &created).ok());
  EXPECT_EQ(created.acg, 2u);
  EXPECT_EQ(Call(MsgType::kNewAcg, wire::NewAcgRequest{7, 1}, &created).code(),
            StatusCode::kPermissionDenied);
  wire::SplitDoneReply split;
  ASSERT_TRUE(Call(MsgType::kSplitDone, wire::SplitDoneRequest{1, 1, 2, {FileId{1, 11}}},
                   &split).ok());
  EXPECT_EQ(split.remapped, 1u);
  ASSERT_TRUE(Call(MsgType::kLookupFiles, wire::FilesRequest{{FileId{1, 11}}}, &locs).ok());
  ASSERT_EQ(locs.locations.size(), 1u);
  EXPECT_EQ(locs.locations[0].acg, 2u);

  wire::ClusterStatusReply status;
  ASSERT_TRUE(Call(MsgType::kClusterStatus, empty, &status).ok());
  EXPECT_EQ(status.files, 2u);
  EXPECT_EQ(status.acgs, 2u);
  EXPECT_EQ(status.nodes.size(), 1u);
  EXPECT_EQ(status.indexes.size(), 1u);
  EXPECT_EQ(status.volumes.size(), 1u);

  ASSERT_TRUE(Call(MsgType::kForgetFiles, wire::FilesRequest{{FileId{1, 10}}}, &empty).ok());
  ASSERT_TRUE(Call(MsgType::kClusterStatus, empty, &status).ok());
  EXPECT_EQ(status.files, 1u);

  ASSERT_TRUE(Call(MsgType::kDropIndex, wire::IndexName{"project"}, &empty).ok());
  ASSERT_TRUE(Call(MsgType::kListIndexes, empty, &idx).ok());
  EXPECT_TRUE(idx.indexes.empty());

  wire::Ping ping{std::string("hello\0world", 11)};
  wire::Ping pong;
  ASSERT_TRUE(Call(MsgType::kPing, ping, &pong).ok());
  EXPECT_EQ(pong.payload, ping.payload);
  EXPECT_EQ(service_->errors(), 2u);  // the NotFound and the PermissionDenied above
}

TEST_F(ServiceTest, DocumentedErrors) {
  Populate();
  const State before = Snapshot();
  wire::Empty empty;
  std::string body;
  // Types the master does not serve.
  for (MsgType t : {MsgType::kApply, MsgType::kSearch, MsgType::kGetRecord, MsgType::kNodeStatus,
                    MsgType::kMigrateAcg, MsgType::kAdoptAcg, static_cast<MsgType>(0),
                    static_cast<MsgType>(18), static_cast<MsgType>(31),
                    static_cast<MsgType>(65535)}) {
    EXPECT_EQ(Raw(wire::EncodeRequest(t, empty), &body).code(), StatusCode::kNotSupported)
        << static_cast<int>(t);
  }
  // Another protocol major version: NotSupported, whatever the type.
  std::string req = wire::EncodeRequest(MsgType::kPing, wire::Ping{"x"});
  ASSERT_EQ(static_cast<uint8_t>(req[1]), 0xcd);  // uint16 1000 = cd 03 e8
  req[2] = 0x07;
  req[3] = static_cast<char>(0xd0);  // 2000
  Status st = Raw(req, &body);
  EXPECT_EQ(st.code(), StatusCode::kNotSupported);
  EXPECT_NE(st.message().find("2000"), std::string::npos) << st.ToString();
  // Invalid requests.
  wire::RegisterNodeReply reg;
  EXPECT_EQ(Call(MsgType::kRegisterNode, wire::RegisterNodeRequest{0, "tcp://*:1"}, &reg).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(
      Call(MsgType::kCreateIndex, wire::IndexDef{"Bad Name", IndexType::kHash}, &empty).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(
      Call(MsgType::kCreateIndex, wire::IndexDef{"project", IndexType::kBTree}, &empty).code(),
            StatusCode::kAlreadyExists);
  EXPECT_EQ(Call(MsgType::kDropIndex, wire::IndexName{"path"}, &empty).code(),
            StatusCode::kInvalidArgument);
  wire::VolumeInfo vol;
  EXPECT_EQ(Call(MsgType::kRegisterVolume, wire::RegisterVolumeRequest{"rel/path"}, &vol).code(),
            StatusCode::kInvalidArgument);
  wire::LocationsReply locs;
  EXPECT_EQ(Call(MsgType::kAssignFiles,
                 wire::AssignFilesRequest{{{FileId{2, 1}, "cc", {}}}}, &locs).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Snapshot(), before);
}

TEST_F(ServiceTest, GarbageChangesNothing) {
  SetLogLevel(LogLevel::kError);
  Populate();
  const State before = Snapshot();
  uint64_t seed = 4242;
  if (const char* env = std::getenv("PROPELLER_SEED")) seed = std::strtoull(env, nullptr, 10);
  SCOPED_TRACE("seed " + std::to_string(seed));
  Random rnd(seed);
  std::string body;

  // Valid requests of every mutating type, to be truncated.
  std::vector<std::string> valid;
  valid.push_back(wire::EncodeRequest(MsgType::kRegisterNode,
                                      wire::RegisterNodeRequest{0, "tcp://127.0.0.1:9000"}));
  wire::HeartbeatRequest hb;
  hb.node_id = 1;
  hb.acgs = {{1, 100}, {7, 8}};
  hb.indexes = {"project", "x"};
  valid.push_back(wire::EncodeRequest(MsgType::kHeartbeat, hb));
  valid.push_back(wire::EncodeRequest(
      MsgType::kAssignFiles,
      wire::AssignFilesRequest{
          {{FileId{1, 100}, "app", {FileId{1, 1}}}, {FileId{1, 101}, "", {}}}}));
  valid.push_back(wire::EncodeRequest(MsgType::kForgetFiles,
                                      wire::FilesRequest{{FileId{1, 1}, FileId{1, 2}}}));
  valid.push_back(
      wire::EncodeRequest(MsgType::kCreateIndex, wire::IndexDef{"newidx", IndexType::kBTree}));
  valid.push_back(wire::EncodeRequest(MsgType::kDropIndex, wire::IndexName{"project"}));
  valid.push_back(wire::EncodeRequest(MsgType::kRegisterVolume,
                                      wire::RegisterVolumeRequest{"/other/volume"}));
  int truncations = 0;
  for (const std::string& v : valid) {
    for (size_t len = 0; len < v.size(); ++len) {
      EXPECT_FALSE(Raw(std::string_view(v).substr(0, len), &body).ok()) << "len " << len;
      ++truncations;
    }
  }
  EXPECT_EQ(Snapshot(), before);

  // Bodies truncated inside a well-formed envelope.
  std::vector<std::pair<MsgType, std::string>> bodies;
  {
    std::string b;
    wire::Encode(wire::AssignFilesRequest{{{FileId{1, 100}, "app", {FileId{1, 1}}}}}, &b);
    bodies.emplace_back(MsgType::kAssignFiles, b);
    b.clear();
    wire::Encode(wire::FilesRequest{{FileId{1, 1}, FileId{1, 2}}}, &b);
    bodies.emplace_back(MsgType::kForgetFiles, b);
    b.clear();
    wire::Encode(wire::RegisterNodeRequest{0, "tcp://127.0.0.1:9000"}, &b);
    bodies.emplace_back(MsgType::kRegisterNode, b);
    b.clear();
    wire::Encode(wire::IndexDef{"newidx", IndexType::kBTree}, &b);
    bodies.emplace_back(MsgType::kCreateIndex, b);
  }
  for (const auto& [type, b] : bodies) {
    for (size_t len = 0; len < b.size(); ++len) {
      Status st = Raw(wire::EncodeRequest(type, std::string_view(b).substr(0, len)), &body);
      EXPECT_FALSE(st.ok()) << wire::MsgTypeName(type) << " len " << len;
    }
  }
  EXPECT_EQ(Snapshot(), before);

  // Oversized headers: a 4 GiB bin envelope, and bodies claiming 2^32 - 1 elements.
  const std::string huge_bin("\x93\xcd\x03\xe8\x04\xc6\xff\xff\xff\xff\x90", 11);
  EXPECT_EQ(Raw(huge_bin, &body).code(), StatusCode::kCorruption);
  const std::string huge_array("\x91\xdd\xff\xff\xff\xff", 6);
  for (MsgType t : {MsgType::kAssignFiles, MsgType::kForgetFiles, MsgType::kLookupFiles,
                    MsgType::kLocateAcgs, MsgType::kHeartbeat}) {
    EXPECT_FALSE(Raw(wire::EncodeRequest(t, std::string_view(huge_array)), &body).ok())
        << wire::MsgTypeName(t);
  }
  const std::string huge_str("\x92\x00\xdb\xff\xff\xff\xff", 7);  // endpoint of 4 GiB
  EXPECT_FALSE(
      Raw(wire::EncodeRequest(MsgType::kRegisterNode, std::string_view(huge_str)), &body).ok());

  // Random bytes, and random bodies in valid envelopes.
  for (int i = 0; i < 3000; ++i) {
    std::string junk(rnd.Uniform(64), '\0');
    for (char& c : junk) c = static_cast<char>(rnd.Next());
    if (i % 2 == 0) {
      (void)Raw(junk, &body);
    } else {
      // Prefix a fix-array header so msgpack gets past the first byte more often.
      junk.insert(junk.begin(), static_cast<char>(0x90 | rnd.Uniform(4)));
      const auto type = static_cast<MsgType>(1 + rnd.Uniform(14));
      (void)Raw(wire::EncodeRequest(type, std::string_view(junk)), &body);
    }
  }
  // Random bodies may decode into valid requests by chance (e.g. an empty forget list), but
  // none can have changed anything a snapshot sees unless it was valid and mutating; verify
  // nothing did.
  EXPECT_EQ(Snapshot(), before);
  EXPECT_GT(truncations, 100);

  // Bit flips of valid requests: any answer is fine, the service must not crash.
  for (int i = 0; i < 2000; ++i) {
    std::string v = valid[rnd.Uniform(valid.size())];
    v[rnd.Uniform(v.size())] ^= static_cast<char>(1 << rnd.Uniform(8));
    (void)Raw(v, &body);
  }
  // Still serving, and consistent.
  wire::Ping pong;
  ASSERT_TRUE(Call(MsgType::kPing, wire::Ping{"still here"}, &pong).ok());
  ASSERT_TRUE(master_->store().Dump().ok());
}

}  // namespace
}  // namespace propeller::master
