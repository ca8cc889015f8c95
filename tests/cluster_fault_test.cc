// Fault tests on a real multi-process cluster (issue 3):
//  - kill -9 an index node during ingest and restart it: every acknowledged update is there;
//  - kill -9 the master and restart it: its maps are intact and a client carries on without
//    being recreated or reconfigured;
//  - malformed, truncated and oversized messages to each daemon: an error reply or a dropped
//    connection, service to everyone else continues, and the data is unchanged;
//  - with CURVE keys configured, a client without an admitted key gets nothing.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <atomic>
#include <map>
#include <set>
#include <thread>
#include <zmq.hpp>

#include "client/lib/propeller.h"
#include "common/random.h"
#include "common/rpc/rpc.h"
#include "indexnode/engine_test_util.h"
#include "schemas/messages.h"
#include "schemas/wire_call.h"
#include "tests/cluster_harness.h"

namespace propeller::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

std::unique_ptr<Client> MustConnect(const ClientOptions& options) {
  auto c = Client::Connect(options);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? std::move(c).value() : nullptr;
}

FileUpdate NewFile(RecordGen& gen, uint32_t volume, uint64_t ino) {
  FileUpdate u;
  u.op = UpdateOp::kPut;
  u.record = gen.NewRecord(FileId{volume, ino});
  u.record.paths = {"/f/" + std::to_string(ino)};
  u.record.attrs.clear();
  u.app = "app" + std::to_string(ino % 3);
  return u;
}

// Every indexed record by inode (a search over everything as root).
std::map<uint64_t, FileRecord> AllRecords(Client& client, Status* status) {
  std::map<uint64_t, FileRecord> out;
  ClientSearchOptions o;
  o.now_ns = kNow;
  auto hits = client.SearchAll("size>=0", o);
  *status = hits.status();
  if (hits.ok()) {
    for (const ClientHit& h : *hits) out[h.record.id.ino] = h.record;
  }
  return out;
}

TEST(ClusterFaultTest, KilledIndexNodeKeepsEveryAcknowledgedUpdate) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("PROPELLER_SEED=" + std::to_string(seed));
  ClusterConfig config;
  config.nodes = 3;
  config.acg_threshold = 50;
  LocalCluster cluster(config);
  ASSERT_TRUE(cluster.Start());
  auto client = MustConnect(cluster.client_options(1000));
  ASSERT_TRUE(client);
  ASSERT_TRUE(cluster.WaitNodesUp(*client, 3)) << cluster.Logs();
  auto volume = client->RegisterVolume("/vol");
  ASSERT_TRUE(volume.ok());

  // The writer sends batches of new files; a batch is acknowledged when Update returns OK.
  std::mutex mu;
  std::map<uint64_t, FileRecord> acked;  // Under mu.
  std::set<uint64_t> unsure;             // Under mu: failed batches may be partly applied.
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> acked_count{0};
  std::thread writer([&] {
    RecordGen gen(seed);
    uint64_t ino = 1000;
    while (!stop.load()) {
      std::vector<FileUpdate> batch;
      for (int i = 0; i < 20; ++i) batch.push_back(NewFile(gen, *volume, ino++));
      Status st = client->Update(batch);
      std::lock_guard<std::mutex> lock(mu);
      for (const FileUpdate& u : batch) {
        if (st.ok()) {
          acked[u.record.id.ino] = u.record;
        } else {
          unsure.insert(u.record.id.ino);
        }
      }
      if (st.ok()) acked_count += batch.size();
    }
  });
  auto wait_acked = [&](uint64_t n) {
    const auto deadline = std::chrono::steady_clock::now() + seconds(60);
    while (acked_count.load() < n && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(milliseconds(10));
    }
    return acked_count.load() >= n;
  };
  ASSERT_TRUE(wait_acked(1500)) << cluster.Logs();
  auto status = client->GetStatus();
  ASSERT_TRUE(status.ok());
  ASSERT_GT(status->nodes.at(1).info.acgs, 0u) << "node 1 should hold partitions when killed";
  cluster.node(1).Kill();  // mid-ingest: acknowledged updates may still be only in its log
  std::this_thread::sleep_for(milliseconds(1500));
  ASSERT_TRUE(cluster.StartNode(1));
  ASSERT_TRUE(cluster.WaitNodesUp(*client, 3)) << cluster.Logs();
  const uint64_t before = acked_count.load();
  ASSERT_TRUE(wait_acked(before + 1000)) << cluster.Logs();
  stop = true;
  writer.join();

  Status st;
  std::map<uint64_t, FileRecord> present;
  st = Eventually([&] {
    Status s;
    present = AllRecords(*client, &s);
    return s;
  });
  ASSERT_TRUE(st.ok()) << st.ToString() << "\n" << cluster.Logs();
  std::lock_guard<std::mutex> lock(mu);
  size_t missing = 0;
  for (const auto& [ino, rec] : acked) {
    auto it = present.find(ino);
    if (it == present.end() || !(it->second == rec)) ++missing;
  }
  EXPECT_EQ(missing, 0u) << "of " << acked.size() << " acknowledged files";
  for (const auto& [ino, rec] : present) {
    EXPECT_TRUE(acked.count(ino) || unsure.count(ino)) << "file " << ino << " came from nowhere";
  }
}

TEST(ClusterFaultTest, KilledMasterKeepsItsMapsAndClientsCarryOn) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("PROPELLER_SEED=" + std::to_string(seed));
  ClusterConfig config;
  config.nodes = 2;
  config.acg_threshold = 30;
  LocalCluster cluster(config);
  ASSERT_TRUE(cluster.Start());
  auto client = MustConnect(cluster.client_options(1000));
  ASSERT_TRUE(client);
  ASSERT_TRUE(cluster.WaitNodesUp(*client, 2)) << cluster.Logs();
  auto volume = client->RegisterVolume("/vol");
  ASSERT_TRUE(volume.ok());
  ASSERT_TRUE(client->CreateIndex("proj", IndexType::kHash).ok());
  RecordGen gen(seed);
  std::vector<FileUpdate> files;
  for (uint64_t ino = 1; ino <= 400; ++ino) files.push_back(NewFile(gen, *volume, ino));
  ASSERT_TRUE(client->Update(files).ok());

  // The master's maps, asked directly.
  auto master_channel = rpc::Channel::Connect(cluster.channel_options(cluster.master_endpoint()));
  ASSERT_TRUE(master_channel.ok());
  wire::FilesRequest lookup;
  for (const FileUpdate& u : files) lookup.files.push_back(u.record.id);
  wire::LocationsReply map_before, map_after;
  ASSERT_TRUE(wire::WireCall(**master_channel, wire::MsgType::kLookupFiles, lookup, &map_before,
                             {.timeout_ms = 2000, .idempotent = true})
                  .ok());
  auto status_before = client->GetStatus();
  ASSERT_TRUE(status_before.ok());

  cluster.master().Kill();
  ASSERT_TRUE(cluster.StartMaster());

  // The same client object, no reconfiguration: searches and updates work again once the
  // nodes' next heartbeats reach the new master process.
  Status st;
  st = Eventually([&] {
    Status s;
    auto all = AllRecords(*client, &s);
    if (s.ok() && all.size() != files.size()) {
      return Status::Internal("found " + std::to_string(all.size()) + " files");
    }
    return s;
  });
  ASSERT_TRUE(st.ok()) << st.ToString() << "\n" << cluster.Logs();
  std::vector<FileUpdate> more;
  for (uint64_t ino = 401; ino <= 450; ++ino) more.push_back(NewFile(gen, *volume, ino));
  ASSERT_TRUE(client->Update(more).ok());
  Status s2;
  EXPECT_EQ(AllRecords(*client, &s2).size(), 450u);

  ASSERT_TRUE(wire::WireCall(**master_channel, wire::MsgType::kLookupFiles, lookup, &map_after,
                             {.timeout_ms = 2000, .idempotent = true})
                  .ok());
  ASSERT_EQ(map_before.locations.size(), map_after.locations.size());
  for (size_t i = 0; i < map_before.locations.size(); ++i) {
    EXPECT_EQ(map_before.locations[i].acg, map_after.locations[i].acg) << "file " << i;
    EXPECT_EQ(map_before.locations[i].node_id, map_after.locations[i].node_id) << "file " << i;
  }
  auto status_after = client->GetStatus();
  ASSERT_TRUE(status_after.ok());
  EXPECT_GE(status_after->acgs, status_before->acgs);
  EXPECT_EQ(status_after->volumes.size(), status_before->volumes.size());
  ASSERT_EQ(status_after->indexes.size(), 1u);
  EXPECT_EQ(status_after->indexes[0].name, "proj");
}

// Sends raw frames from a DEALER socket and returns the reply body, or "" after `wait_ms`.
class RawPeer {
 public:
  // `link`: the endpoint, and the CURVE keys to offer when set (a cluster member's).
  explicit RawPeer(const rpc::ChannelOptions& link) : socket_(context_, zmq::socket_type::dealer) {
    socket_.set(zmq::sockopt::linger, 0);
    if (link.curve) {
      socket_.set(zmq::sockopt::curve_serverkey, link.server_public_key);
      socket_.set(zmq::sockopt::curve_publickey, link.curve->public_key);
      socket_.set(zmq::sockopt::curve_secretkey, link.curve->secret_key);
    }
    socket_.connect(link.endpoint);
  }
  void Send(const std::vector<std::string>& frames) {
    for (size_t i = 0; i < frames.size(); ++i) {
      socket_.send(zmq::buffer(frames[i]),
                   i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
    }
  }
  // The last frame of the next reply, or nullopt on timeout.
  std::optional<std::string> Receive(int wait_ms) {
    zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, milliseconds(wait_ms)) <= 0) return std::nullopt;
    std::string last;
    for (;;) {
      zmq::message_t m;
      if (!socket_.recv(m, zmq::recv_flags::none)) return std::nullopt;
      last = m.to_string();
      if (!m.more()) break;
    }
    return last;
  }

 private:
  zmq::context_t context_;
  zmq::socket_t socket_;
};

std::string RequestId(uint64_t id) {
  std::string out(8, '\0');
  for (int i = 7; i >= 0; --i, id >>= 8) out[static_cast<size_t>(i)] = static_cast<char>(id & 0xff);
  return out;
}

TEST(ClusterFaultTest, MalformedMessagesGetErrorsAndChangeNothing) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("PROPELLER_SEED=" + std::to_string(seed));
  ClusterConfig config;
  config.nodes = 1;
  LocalCluster cluster(config);
  ASSERT_TRUE(cluster.Start());
  auto client = MustConnect(cluster.client_options(2000));
  ASSERT_TRUE(client);
  ASSERT_TRUE(cluster.WaitNodesUp(*client, 1)) << cluster.Logs();
  auto volume = client->RegisterVolume("/vol");
  ASSERT_TRUE(volume.ok());
  RecordGen gen(seed);
  std::vector<FileUpdate> files;
  for (uint64_t ino = 1; ino <= 300; ++ino) files.push_back(NewFile(gen, *volume, ino));
  ASSERT_TRUE(client->Update(files).ok());
  Status st;
  const auto before = AllRecords(*client, &st);
  ASSERT_TRUE(st.ok());
  auto status_before = client->GetStatus();
  ASSERT_TRUE(status_before.ok());

  // Well-framed requests whose bodies are bad: each must get an error reply.
  wire::ApplyRequest apply;
  for (size_t i = 0; i < 5; ++i) {
    Update u;
    u.acg = 1;
    u.record = files[i].record;
    u.record.size = 777;
    apply.updates.push_back(u);
  }
  const std::string valid_apply = wire::EncodeRequest(wire::MsgType::kApply, apply);
  std::vector<std::string> bad_bodies = {
      "", "\xc1", "garbage that is not msgpack", std::string("\x93\x01\x02", 3),
      std::string("\xdd\xff\xff\xff\xff", 5),  // an array claiming 4 billion elements
      wire::EncodeRequest(wire::MsgType(999), std::string_view("")),
      wire::EncodeRequest(wire::MsgType::kLookupFiles, std::string_view("\x01\x02")),
  };
  // Every strict prefix of a valid Apply, and seeded byte flips of it.
  for (size_t cut = 0; cut < valid_apply.size(); cut += 1 + valid_apply.size() / 40) {
    bad_bodies.push_back(valid_apply.substr(0, cut));
  }
  // Seeded byte flips of it — only those that really are malformed: a flip can also yield a
  // valid request (another file, another message type), which a daemon must then execute.
  Random rnd(seed);
  for (int i = 0; i < 200 && bad_bodies.size() < 100; ++i) {
    std::string b = valid_apply;
    b[rnd.Uniform(b.size())] ^= static_cast<char>(1 + rnd.Uniform(255));
    wire::RequestEnvelope env;
    wire::ApplyRequest decoded;
    if (!wire::DecodeRequest(b, &env).ok() ||
        (env.type == wire::MsgType::kApply && !wire::Decode(env.body, &decoded).ok())) {
      bad_bodies.push_back(b);
    }
  }
  // A different major protocol version: [2000, 1, bin ""].
  bad_bodies.push_back(std::string("\x93\xcd\x07\xd0\x01\xc4\x00", 7));

  for (const std::string& endpoint : {cluster.master_endpoint(), cluster.node_endpoint(0)}) {
    SCOPED_TRACE(endpoint);
    // A member's keys: the frames must reach the handlers (a stranger is refused earlier).
    RawPeer peer(cluster.channel_options(endpoint));
    uint64_t id = 1;
    size_t error_replies = 0;
    for (const std::string& body : bad_bodies) {
      peer.Send({RequestId(id++), body});
      auto reply = peer.Receive(3000);
      ASSERT_TRUE(reply.has_value()) << "no reply to a well-framed request";
      wire::ReplyEnvelope env;
      if (wire::DecodeReply(*reply, &env).ok() && !env.status.ok()) ++error_replies;
    }
    EXPECT_EQ(error_replies, bad_bodies.size());
    // Badly framed messages: no reply is expected, the daemon must just keep going.
    peer.Send({"short"});
    peer.Send({RequestId(id++), "a", "b"});
    peer.Send({std::string("1234567"), valid_apply});
    // Beyond the 64 MiB limit: ZeroMQ drops this peer's connection.
    RawPeer big(cluster.channel_options(endpoint));
    big.Send({RequestId(1), std::string(65u << 20, 'x')});
    std::this_thread::sleep_for(milliseconds(300));
    // Everyone else is still served.
    auto again = client->GetStatus();
    EXPECT_TRUE(again.ok()) << again.status().ToString();
  }
  EXPECT_TRUE(cluster.master().running());
  const auto after = AllRecords(*client, &st);
  ASSERT_TRUE(st.ok()) << st.ToString();
  // No bad message may have changed a record (the Apply they were cut from sets size 777 on
  // five files).
  size_t changed = 0;
  for (const auto& [ino, rec] : before) {
    auto it = after.find(ino);
    changed += it == after.end() || !(it->second == rec);
  }
  EXPECT_EQ(changed, 0u) << cluster.Logs();
  EXPECT_EQ(after.size(), before.size());
  auto status_after = client->GetStatus();
  ASSERT_TRUE(status_after.ok());
  EXPECT_EQ(status_after->files, status_before->files);
  EXPECT_EQ(status_after->acgs, status_before->acgs);
}

TEST(ClusterFaultTest, CurveAdmitsOnlyAllowedKeys) {
  TempDir keys;
  auto server = rpc::GenerateCurveKeys();
  auto good = rpc::GenerateCurveKeys();
  auto bad = rpc::GenerateCurveKeys();
  ASSERT_TRUE(server.ok() && good.ok() && bad.ok()) << server.status().ToString();
  const std::string dir = keys.path();
  ASSERT_TRUE(rpc::WriteKeyFile(dir + "/server.key", *server).ok());
  ASSERT_TRUE(rpc::WriteKeyFile(dir + "/server.pub", {server->public_key, ""}).ok());
  ASSERT_TRUE(rpc::WriteKeyFile(dir + "/good.key", *good).ok());
  ASSERT_TRUE(rpc::WriteKeyFile(dir + "/bad.key", *bad).ok());
  // The master admits the nodes (which use the server key pair) and the good client; the
  // node admits the good client.
  {
    FILE* f = std::fopen((dir + "/master.allow").c_str(), "w");
    std::fprintf(f, "public %s\npublic %s\n", server->public_key.c_str(),
                 good->public_key.c_str());
    std::fclose(f);
    f = std::fopen((dir + "/node.allow").c_str(), "w");
    std::fprintf(f, "# clients\npublic %s\n", good->public_key.c_str());
    std::fclose(f);
  }
  ClusterConfig config;
  config.nodes = 1;
  config.master_extra = {"--curve-key", dir + "/server.key", "--allow", dir + "/master.allow"};
  config.node_extra = {"--curve-key", dir + "/server.key", "--allow", dir + "/node.allow",
                       "--master-key", dir + "/server.pub"};
  LocalCluster cluster(config);
  ASSERT_TRUE(cluster.Start());

  ClientOptions good_options = cluster.client_options(2000);
  good_options.curve_key_file = dir + "/good.key";
  good_options.server_key_file = dir + "/server.pub";
  auto client = MustConnect(good_options);
  ASSERT_TRUE(client);
  ASSERT_TRUE(cluster.WaitNodesUp(*client, 1)) << cluster.Logs();
  auto volume = client->RegisterVolume("/vol");
  ASSERT_TRUE(volume.ok()) << volume.status().ToString();
  RecordGen gen(TestSeed());
  std::vector<FileUpdate> files;
  for (uint64_t ino = 1; ino <= 50; ++ino) files.push_back(NewFile(gen, *volume, ino));
  ASSERT_TRUE(client->Update(files).ok());
  Status st;
  EXPECT_EQ(AllRecords(*client, &st).size(), 50u);
  ASSERT_TRUE(st.ok()) << st.ToString();

  // A client with a key nobody admitted, and one without CURVE: nothing from either daemon.
  ClientOptions bad_options = good_options;
  bad_options.curve_key_file = dir + "/bad.key";
  bad_options.timeout_ms = 700;
  ClientOptions plain_options = cluster.client_options(700);
  plain_options.cluster_key_file.clear();
  plain_options.insecure = true;  // no CURVE at all
  for (const ClientOptions& o : {bad_options, plain_options}) {
    auto intruder = MustConnect(o);
    ASSERT_TRUE(intruder);
    EXPECT_FALSE(intruder->GetStatus().ok());
    EXPECT_FALSE(intruder->SearchAll("size>=0", {}).ok());
    EXPECT_FALSE(intruder->Update(files).ok());
    // Straight to the index node, bypassing the master.
    rpc::ChannelOptions co;
    co.endpoint = cluster.node_endpoint(0);
    if (!o.curve_key_file.empty()) {
      co.curve = *bad;
      co.server_public_key = server->public_key;
    }
    auto ch = rpc::Channel::Connect(co);
    ASSERT_TRUE(ch.ok());
    wire::SearchQuery q;
    q.query = "size>=0";
    wire::SearchDone done;
    size_t chunks = 0;
    Status direct = wire::WireCall(**ch, wire::MsgType::kSearch, q, &done, {.timeout_ms = 700},
                                   nullptr, [&](std::string_view) {
                                     ++chunks;
                                     return true;
                                   });
    EXPECT_FALSE(direct.ok());
    EXPECT_EQ(chunks, 0u);
  }
}

// CURVE and migration: index nodes sharing one key pair move an ACG between them when each
// admits that key; a destination that does not admit it is refused before anything freezes,
// and the ACG stays where it was, writable.
TEST(ClusterFaultTest, CurveNodesMoveAcgsOnlyToNodesThatAdmitThem) {
  TempDir keys;
  auto server = rpc::GenerateCurveKeys();
  auto good = rpc::GenerateCurveKeys();
  ASSERT_TRUE(server.ok() && good.ok());
  const std::string dir = keys.path();
  ASSERT_TRUE(rpc::WriteKeyFile(dir + "/server.key", *server).ok());
  ASSERT_TRUE(rpc::WriteKeyFile(dir + "/server.pub", {server->public_key, ""}).ok());
  ASSERT_TRUE(rpc::WriteKeyFile(dir + "/good.key", *good).ok());
  auto write = [&](const std::string& name, const std::vector<std::string>& allowed) {
    FILE* f = std::fopen((dir + "/" + name).c_str(), "w");
    for (const std::string& k : allowed) std::fprintf(f, "public %s\n", k.c_str());
    std::fclose(f);
  };
  write("master.allow", {server->public_key, good->public_key});
  write("peers.allow", {server->public_key, good->public_key});  // clients and the other nodes
  write("clients.allow", {good->public_key});                     // clients only
  ClusterConfig config;
  config.nodes = 2;
  config.master_extra = {"--curve-key", dir + "/server.key", "--allow", dir + "/master.allow"};
  config.node_extra = {"--curve-key", dir + "/server.key", "--master-key", dir + "/server.pub"};
  LocalCluster cluster(config);
  ASSERT_TRUE(cluster.StartMaster());
  ASSERT_TRUE(cluster.StartNode(0, {"--allow", dir + "/peers.allow"}));
  ASSERT_TRUE(cluster.StartNode(1, {"--allow", dir + "/clients.allow"}));
  ClientOptions options = cluster.client_options(3000);
  options.curve_key_file = dir + "/good.key";
  options.server_key_file = dir + "/server.pub";
  auto client = MustConnect(options);
  ASSERT_TRUE(client);
  ASSERT_TRUE(cluster.WaitNodesUp(*client, 2)) << cluster.Logs();
  auto volume = client->RegisterVolume("/vol");
  ASSERT_TRUE(volume.ok()) << volume.status().ToString();
  RecordGen gen(TestSeed());
  std::vector<FileUpdate> files;
  for (uint64_t ino = 1; ino <= 50; ++ino) {
    files.push_back(NewFile(gen, *volume, ino));
    files.back().app = "mover";  // one app: one ACG, on one node
  }
  ASSERT_TRUE(client->Update(files).ok());

  // Node ids of node 0 (admits its peers) and node 1 (admits clients only); the ACG's node.
  uint32_t open_id = 0, closed_id = 0, holder = 0;
  uint64_t acg = 0;
  auto status = client->GetStatus();
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  for (const NodeStatus& ns : status->nodes) {
    (ns.info.endpoint == cluster.node_endpoint(0) ? open_id : closed_id) = ns.info.node_id;
    if (ns.node && !ns.node->acg_list.empty()) {
      ASSERT_EQ(holder, 0u) << "one ACG, on one node";
      ASSERT_EQ(ns.node->acg_list.size(), 1u);
      holder = ns.info.node_id;
      acg = ns.node->acg_list[0].acg;
    }
  }
  ASSERT_TRUE(open_id != 0 && closed_id != 0 && acg != 0);
  if (holder == closed_id) {
    // Node 0 admits node 1's key: the move goes.
    auto moved = client->MoveAcg(acg, open_id, 30'000);
    ASSERT_TRUE(moved.ok()) << moved.status().ToString() << "\n" << cluster.Logs();
    EXPECT_EQ(moved->files, 50u);
  }
  // Towards node 1, which does not admit node 0: refused at once, nothing frozen or lost.
  const auto t0 = std::chrono::steady_clock::now();
  auto refused = client->MoveAcg(acg, closed_id, 30'000);
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("does not answer"), std::string::npos)
      << refused.status().ToString();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  for (FileUpdate& u : files) u.record.size += 1;
  ASSERT_TRUE(client->Update(files).ok()) << "the ACG takes updates where it is";
  Status st;
  std::map<uint64_t, FileRecord> all = AllRecords(*client, &st);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(all.size(), 50u);
  for (const FileUpdate& u : files) EXPECT_EQ(all[u.record.id.ino].size, u.record.size);

  // Node 1 restarted admitting its peer: now the ACG moves there, every file with it.
  cluster.node(1).Terminate();
  ASSERT_TRUE(cluster.StartNode(1, {"--allow", dir + "/peers.allow"}));
  ASSERT_TRUE(cluster.WaitNodesUp(*client, 2)) << cluster.Logs();
  auto moved = Eventually([&] { return client->MoveAcg(acg, closed_id, 30'000).status(); },
                          std::chrono::seconds(30));
  ASSERT_TRUE(moved.ok()) << moved.ToString() << "\n" << cluster.Logs();
  all = AllRecords(*client, &st);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(all.size(), 50u);
  for (const FileUpdate& u : files) EXPECT_EQ(all[u.record.id.ino].size, u.record.size);
  status = client->GetStatus();
  ASSERT_TRUE(status.ok());
  for (const NodeStatus& ns : status->nodes) {
    const bool has = ns.node && !ns.node->acg_list.empty();
    EXPECT_EQ(has, ns.info.node_id == closed_id) << "node " << ns.info.node_id;
  }
}

}  // namespace
}  // namespace propeller::testing
