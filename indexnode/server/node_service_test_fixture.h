// The fixture of the NodeService tests (node_service_test.cc, node_adoption_test.cc): an engine
// in a temporary directory, a fake master, and the service behind a real inproc:// server, with
// helpers to apply and search over the wire.
#ifndef PROPELLER_INDEXNODE_SERVER_NODE_SERVICE_TEST_FIXTURE_H_
#define PROPELLER_INDEXNODE_SERVER_NODE_SERVICE_TEST_FIXTURE_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "indexnode/engine_test_util.h"
#include "indexnode/server/fake_master.h"
#include "indexnode/server/node_service.h"
#include "schemas/wire_call.h"

namespace propeller::testing {

// A FakeMaster owner of ACG 7: another node.
inline constexpr char kOtherNode[] = "tcp://10.0.0.2:7471";

// A fresh inproc:// endpoint name.
inline std::string UniqueName(const char* what) {
  static std::atomic<int> counter{0};
  return std::string("inproc://") + what + "-" + std::to_string(counter.fetch_add(1));
}

// A hit reduced to what the oracle compares, in a total order.
using HitKey = std::tuple<std::string, FileId, uint64_t>;

class NodeServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    master_ = FakeMaster::Start(UniqueName("master"));
    ASSERT_TRUE(master_);
    for (uint64_t acg = 1; acg <= 5; ++acg) master_->SetOwner(acg, 1, "inproc://self");
    master_->SetOwner(7, 2, kOtherNode);
    auto ch = rpc::Channel::Connect({.endpoint = master_->endpoint()});
    ASSERT_TRUE(ch.ok()) << ch.status().ToString();
    master_channel_ = std::move(ch).value();
    OpenEngine();
    StartService(NodeServiceOptions{});
  }

  void TearDown() override {
    client_.reset();
    server_.reset();
    service_.reset();
    engine_.reset();
  }

  void OpenEngine() {
    EngineOptions eo;
    eo.data_dir = dir_.path();
    eo.background_commit = false;
    eo.search_threads = 2;
    auto e = Engine::Open(eo);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    engine_ = std::move(e).value();
  }

  // (Re)creates the service (engine and master filled in) and an inproc server for it.
  void StartService(NodeServiceOptions so) {
    client_.reset();
    server_.reset();
    service_.reset();
    so.engine = engine_.get();
    if (so.stray_dir.empty()) so.stray_dir = dir_.path() + "/stray";
    if (so.master == nullptr) so.master = master_channel_.get();
    if (so.node_id == 0) so.node_id = 1;
    service_ = std::make_unique<NodeService>(so);
    rpc::ServerOptions ro;
    ro.endpoint = UniqueName("node");
    ro.worker_threads = 2;
    NodeService* svc = service_.get();
    auto srv = rpc::Server::Start(
        ro, [svc](std::string_view req, const rpc::PeerInfo& peer, rpc::ReplyStream& out) {
          return svc->Handle(req, peer, out);
        });
    ASSERT_TRUE(srv.ok()) << srv.status().ToString();
    server_ = std::move(srv).value();
    auto ch = rpc::Channel::Connect({.endpoint = server_->endpoint()});
    ASSERT_TRUE(ch.ok()) << ch.status().ToString();
    client_ = std::move(ch).value();
  }

  Status Apply(const std::vector<Update>& updates,
               std::vector<wire::AcgLocation>* redirects = nullptr) {
    wire::ApplyRequest req;
    req.updates = updates;
    wire::Empty rep;
    return wire::WireCall(*client_, wire::MsgType::kApply, req, &rep, {}, redirects);
  }

  // A search over the wire: the hits in arrival order and the size of every chunk.
  Status Search(const wire::SearchQuery& q, std::vector<wire::WireHit>* hits,
                wire::SearchDone* done = nullptr, std::vector<size_t>* chunk_sizes = nullptr) {
    hits->clear();
    Status chunk_error;
    wire::SearchDone d;
    Status st = wire::WireCall(*client_, wire::MsgType::kSearch, q, &d, {}, nullptr,
                               [&](std::string_view bytes) {
                                 wire::SearchHitsChunk chunk;
                                 Status s = wire::Decode(bytes, &chunk);
                                 if (!s.ok()) {
                                   chunk_error = s;
                                   return false;
                                 }
                                 if (chunk_sizes) chunk_sizes->push_back(chunk.hits.size());
                                 for (auto& h : chunk.hits) hits->push_back(std::move(h));
                                 return true;
                               });
    if (!chunk_error.ok()) return chunk_error;
    if (done) *done = d;
    return st;
  }

  // Everything in the engine, as the oracle sees it.
  std::vector<std::pair<std::string, FileRecord>> Snapshot() {
    SearchRequest req;
    req.query = "size>=0";
    auto hits = engine_->SearchAll(req);
    EXPECT_TRUE(hits.ok()) << hits.status().ToString();
    std::vector<std::pair<std::string, FileRecord>> out;
    if (hits.ok()) {
      for (const SearchHit& h : *hits) out.emplace_back(h.path, h.record);
    }
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
      return std::tie(a.first, a.second.id) < std::tie(b.first, b.second.id);
    });
    return out;
  }

  std::set<uint64_t> EngineAcgs() {
    std::set<uint64_t> out;
    for (const AcgInfo& a : engine_->ListAcgs()) out.insert(a.id);
    return out;
  }

  static Update Put(uint64_t acg, uint64_t ino, const std::string& path, uint64_t size) {
    Update u;
    u.op = UpdateOp::kPut;
    u.acg = acg;
    u.record.id = FileId{1, ino};
    u.record.paths = {path};
    u.record.parent_ino = 1;
    u.record.size = size;
    u.record.mtime = kNow - static_cast<int64_t>(ino) * 1'000'000'000;
    u.record.mode = 0100644;
    return u;
  }

  TempDir dir_;
  std::unique_ptr<FakeMaster> master_;
  std::unique_ptr<rpc::Channel> master_channel_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<NodeService> service_;
  std::unique_ptr<rpc::Server> server_;
  std::unique_ptr<rpc::Channel> client_;
};

}  // namespace propeller::testing

#endif  // PROPELLER_INDEXNODE_SERVER_NODE_SERVICE_TEST_FIXTURE_H_
