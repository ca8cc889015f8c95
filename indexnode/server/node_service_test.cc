// NodeService against the engine it wraps and a brute-force model: seeded random updates and
// queries through the real transport (inproc://), ownership and redirects with a fake master,
// streaming, sort and limit, index management, and hostile bytes. PROPELLER_SEED=<n> replays.
#include "indexnode/server/node_service.h"

#include <gtest/gtest.h>

#include <map>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <atomic>
#include <set>
#include <tuple>

#include "common/crc32c.h"
#include "common/query/query.h"
#include "common/random.h"
#include "indexnode/engine_test_util.h"
#include "indexnode/server/fake_master.h"
#include "schemas/wire_call.h"

namespace propeller {
namespace {

using testing::CollectStream;
using testing::FakeMaster;
using testing::kNow;
using testing::Model;
using testing::RecordGen;
using testing::TempDir;
using wire::MsgType;

constexpr char kOtherNode[] = "tcp://10.0.0.2:7471";

std::string UniqueName(const char* what) {
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
    return wire::WireCall(*client_, MsgType::kApply, req, &rep, {}, redirects);
  }

  // A search over the wire: the hits in arrival order and the size of every chunk.
  Status Search(const wire::SearchQuery& q, std::vector<wire::WireHit>* hits,
                wire::SearchDone* done = nullptr, std::vector<size_t>* chunk_sizes = nullptr) {
    hits->clear();
    Status chunk_error;
    wire::SearchDone d;
    Status st = wire::WireCall(*client_, MsgType::kSearch, q, &d, {}, nullptr,
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

// Random updates applied over the wire, then random queries (sometimes with credentials,
// sort and limit): the wire results equal Engine::SearchAll on the same engine and the
// brute-force model.
TEST_F(NodeServiceTest, WireSearchMatchesEngineAndModel) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("PROPELLER_SEED=" + std::to_string(seed));
  RecordGen gen(seed);
  Random& rnd = gen.rnd();
  Model model;
  std::vector<FileId> live;
  uint64_t next_ino = 1;
  for (int round = 0; round < 6; ++round) {
    std::vector<Update> batch;
    for (int i = 0; i < 150; ++i) {
      Update u;
      if (live.empty() || rnd.OneIn(2)) {
        FileId id{static_cast<uint32_t>(1 + rnd.Uniform(2)), next_ino++};
        u.op = UpdateOp::kPut;
        u.acg = 1 + rnd.Uniform(5);
        u.record = gen.NewRecord(id);
        live.push_back(id);
      } else {
        FileId id = live[rnd.Uniform(live.size())];
        auto it = model.files.find(id);
        if (it == model.files.end()) continue;
        u.acg = model.acg_of[id];
        u.record = it->second;
        switch (rnd.Uniform(4)) {
          case 0: u.op = UpdateOp::kPut; gen.RandomizeAttrs(&u.record); break;
          case 1: u.op = UpdateOp::kPut; u.record.paths = {gen.RandomPath()}; break;
          case 2:
            u.op = UpdateOp::kDelete;
            live.erase(std::find(live.begin(), live.end(), id));
            break;
          default:
            u.op = UpdateOp::kSetAttrs;
            u.record.attrs.clear();
            u.record.attrs["proj"] = std::string(rnd.OneIn(2) ? "alpha" : "gamma");
            break;
        }
      }
      batch.push_back(u);
      model.Apply(u);  // batches are applied in order, so the model can follow update by update
    }
    ASSERT_TRUE(Apply(batch).ok());

    for (int qi = 0; qi < 25; ++qi) {
      wire::SearchQuery q;
      q.query = gen.RandomQuery();
      q.scope = rnd.OneIn(3) ? gen.RandomDir() : "/";
      q.now_ns = kNow;
      if (rnd.OneIn(4)) {
        q.creds = wire::WireCredentials{static_cast<uint32_t>(1000 + rnd.Uniform(4)), 100, {101}};
      }
      if (rnd.OneIn(3)) {
        static const char* kKeys[] = {"size", "mtime", "uid", "path", "name"};
        q.sort_by = kKeys[rnd.Uniform(std::size(kKeys))];
        q.descending = rnd.OneIn(2);
        q.limit = rnd.OneIn(2) ? 0 : 1 + rnd.Uniform(30);
      }
      SCOPED_TRACE("query '" + q.query + "' scope " + q.scope + " sort " + q.sort_by +
                   " limit " + std::to_string(q.limit));
      std::vector<wire::WireHit> wire_hits;
      wire::SearchDone done;
      ASSERT_TRUE(Search(q, &wire_hits, &done).ok());
      EXPECT_EQ(done.hits, wire_hits.size());

      SearchRequest req;
      req.query = q.query;
      req.scope = q.scope;
      req.now_ns = kNow;
      req.sort_by = q.sort_by;
      req.descending = q.descending;
      req.limit = q.limit;
      if (q.creds) req.creds = Credentials{q.creds->uid, q.creds->gid, q.creds->groups};
      auto direct = engine_->SearchAll(req);
      ASSERT_TRUE(direct.ok()) << direct.status().ToString();

      if (!q.sort_by.empty()) {
        // Same order (ties are broken by path, so compare the path sequence).
        std::vector<std::string> a, b;
        for (const auto& h : wire_hits) a.push_back(h.path);
        for (const auto& h : *direct) b.push_back(h.path);
        ASSERT_EQ(a, b);
        if (!q.creds) {
          ParseOptions po;
          po.now_ns = kNow;
          auto parsed = Query::Parse(q.query, po);
          ASSERT_TRUE(parsed.ok());
          ASSERT_EQ(a, model.SearchSorted(*parsed, q.scope, q.sort_by, q.descending, q.limit));
        }
      } else {
        std::vector<std::tuple<std::string, FileId, uint64_t, FileRecord>> a, b;
        for (const auto& h : wire_hits) a.emplace_back(h.path, h.record.id, h.acg, h.record);
        for (const auto& h : *direct) b.emplace_back(h.path, h.record.id, h.acg, h.record);
        auto by_key = [](const auto& x, const auto& y) {
          return std::tie(std::get<0>(x), std::get<1>(x)) <
                 std::tie(std::get<0>(y), std::get<1>(y));
        };
        std::sort(a.begin(), a.end(), by_key);
        std::sort(b.begin(), b.end(), by_key);
        ASSERT_EQ(a, b);
        if (!q.creds) {
          ParseOptions po;
          po.now_ns = kNow;
          auto parsed = Query::Parse(q.query, po);
          ASSERT_TRUE(parsed.ok());
          std::vector<std::string> paths;
          for (const auto& h : a) paths.push_back(std::get<0>(h));
          ASSERT_EQ(paths, model.Search(*parsed, q.scope));
          for (const auto& h : a) {  // the records are the model's, attributes included
            ASSERT_EQ(std::get<3>(h), model.files.at(std::get<1>(h)));
            ASSERT_EQ(std::get<2>(h), model.acg_of.at(std::get<1>(h)));
          }
        }
      }
    }
  }
}

TEST_F(NodeServiceTest, ApplyToAcgOwnedElsewhereIsRedirectedAndNothingApplied) {
  ASSERT_TRUE(Apply({Put(1, 1, "/a", 10)}).ok());
  const auto before = Snapshot();
  const auto acgs_before = EngineAcgs();
  ASSERT_EQ(before.size(), 1u);

  std::vector<wire::AcgLocation> redirects;
  Status st = Apply({Put(7, 2, "/b", 20)}, &redirects);
  EXPECT_EQ(st.code(), StatusCode::kRedirect) << st.ToString();
  ASSERT_EQ(redirects.size(), 1u);
  EXPECT_EQ(redirects[0].acg, 7u);
  EXPECT_EQ(redirects[0].node_id, 2u);
  EXPECT_EQ(redirects[0].endpoint, kOtherNode);

  // Mixed batch: the owned half is not applied either; only the foreign ACG is listed.
  redirects.clear();
  st = Apply({Put(1, 3, "/c", 30), Put(7, 4, "/d", 40), Put(2, 5, "/e", 50)}, &redirects);
  EXPECT_EQ(st.code(), StatusCode::kRedirect) << st.ToString();
  ASSERT_EQ(redirects.size(), 1u);
  EXPECT_EQ(redirects[0].acg, 7u);

  // An ACG the master does not know: owner 0.
  redirects.clear();
  st = Apply({Put(99, 6, "/f", 60), Put(7, 7, "/g", 70)}, &redirects);
  EXPECT_EQ(st.code(), StatusCode::kRedirect);
  ASSERT_EQ(redirects.size(), 2u);
  std::sort(redirects.begin(), redirects.end(),
            [](const auto& a, const auto& b) { return a.acg < b.acg; });
  EXPECT_EQ(redirects[0].acg, 7u);
  EXPECT_EQ(redirects[0].node_id, 2u);
  EXPECT_EQ(redirects[1].acg, 99u);
  EXPECT_EQ(redirects[1].node_id, 0u);

  EXPECT_EQ(Snapshot(), before);
  EXPECT_EQ(EngineAcgs(), acgs_before);
  EXPECT_EQ(service_->stats().redirects, 3u);

  // ACG 0 is a malformed update, not a routing question.
  EXPECT_EQ(Apply({Put(0, 8, "/h", 1)}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Snapshot(), before);
}

TEST_F(NodeServiceTest, OwnershipIsCachedOnlyWhenConfirmed) {
  const uint64_t calls0 = master_->locate_calls();
  ASSERT_TRUE(Apply({Put(3, 1, "/a", 1)}).ok());
  ASSERT_TRUE(Apply({Put(3, 2, "/b", 1)}).ok());
  EXPECT_EQ(master_->locate_calls(), calls0 + 1);  // confirmed once, then cached
  EXPECT_EQ(Apply({Put(7, 3, "/c", 1)}).code(), StatusCode::kRedirect);
  EXPECT_EQ(Apply({Put(7, 3, "/c", 1)}).code(), StatusCode::kRedirect);
  EXPECT_EQ(master_->locate_calls(), calls0 + 3);  // foreign answers are not cached ...
  master_->SetOwner(7, 1);                          // ... so a reassignment is seen at once
  EXPECT_TRUE(Apply({Put(7, 3, "/c", 1)}).ok());
  EXPECT_EQ(Snapshot().size(), 3u);
}

TEST_F(NodeServiceTest, WithoutMasterOnlyEngineAcgsAreServed) {
  ASSERT_TRUE(engine_->Apply(std::vector<Update>{Put(9, 1, "/pre", 5)}).ok());
  // A master endpoint nobody serves: look-ups time out.
  auto ch = rpc::Channel::Connect({.endpoint = UniqueName("nobody")});
  ASSERT_TRUE(ch.ok());
  NodeServiceOptions so;
  so.master = ch->get();
  so.master_timeout_ms = 200;
  StartService(so);
  EXPECT_TRUE(Apply({Put(9, 2, "/pre2", 6)}).ok());  // in the engine: owned
  Status st = Apply({Put(1, 3, "/new", 7)});
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();
  EXPECT_EQ(Snapshot().size(), 2u);
  client_.reset();
  server_.reset();
  service_.reset();
}

TEST_F(NodeServiceTest, GetRecord) {
  Update u = Put(2, 42, "/x/y.c", 1234);
  u.record.attrs["proj"] = std::string("alpha");
  ASSERT_TRUE(Apply({u}).ok());
  wire::GetRecordRequest req;
  req.acg = 2;
  req.file = FileId{1, 42};
  wire::RecordReply rep;
  ASSERT_TRUE(wire::WireCall(*client_, MsgType::kGetRecord, req, &rep).ok());
  EXPECT_EQ(rep.record, u.record);

  req.file = FileId{1, 43};
  EXPECT_EQ(wire::WireCall(*client_, MsgType::kGetRecord, req, &rep).code(),
            StatusCode::kNotFound);
  req.acg = 4;  // owned (the master says so) but empty
  EXPECT_EQ(wire::WireCall(*client_, MsgType::kGetRecord, req, &rep).code(),
            StatusCode::kNotFound);
  req.acg = 7;
  std::vector<wire::AcgLocation> redirects;
  EXPECT_EQ(wire::WireCall(*client_, MsgType::kGetRecord, req, &rep, {}, &redirects).code(),
            StatusCode::kRedirect);
  ASSERT_EQ(redirects.size(), 1u);
  EXPECT_EQ(redirects[0].node_id, 2u);
}

TEST_F(NodeServiceTest, ManyHitsStreamInBoundedChunksInOrder) {
  std::vector<Update> batch;
  for (uint64_t i = 1; i <= 2500; ++i) {
    batch.push_back(Put(1 + i % 3, i, "/d/f" + std::to_string(i), i * 7 % 2503));
  }
  ASSERT_TRUE(Apply(batch).ok());

  wire::SearchQuery q;
  q.query = "size>=0";
  q.sort_by = "size";
  std::vector<wire::WireHit> hits;
  std::vector<size_t> chunks;
  wire::SearchDone done;
  ASSERT_TRUE(Search(q, &hits, &done, &chunks).ok());
  EXPECT_EQ(chunks, (std::vector<size_t>{1000, 1000, 500}));
  EXPECT_EQ(done.hits, 2500u);
  ASSERT_EQ(hits.size(), 2500u);
  for (size_t i = 1; i < hits.size(); ++i) {
    ASSERT_LE(hits[i - 1].record.size, hits[i].record.size) << i;
  }

  q.descending = true;
  q.limit = 1234;
  chunks.clear();
  ASSERT_TRUE(Search(q, &hits, &done, &chunks).ok());
  EXPECT_EQ(chunks, (std::vector<size_t>{1000, 234}));
  ASSERT_EQ(hits.size(), 1234u);
  // i * 7 mod 2503 over i = 1..2500 takes 2500 distinct values below 2503: the largest first.
  std::vector<uint64_t> sizes;
  for (uint64_t i = 1; i <= 2500; ++i) sizes.push_back(i * 7 % 2503);
  std::sort(sizes.rbegin(), sizes.rend());
  for (size_t i = 0; i < hits.size(); ++i) ASSERT_EQ(hits[i].record.size, sizes[i]) << i;

  // A byte bound: a chunk ends at the hit that reaches it (all but the last reach it).
  NodeServiceOptions so;
  so.max_chunk_bytes = 8192;
  StartService(so);
  CollectStream out;
  std::string final_reply =
      service_->Handle(wire::EncodeRequest(MsgType::kSearch, q), rpc::PeerInfo{}, out);
  wire::ReplyEnvelope env;
  ASSERT_TRUE(wire::DecodeReply(final_reply, &env).ok());
  ASSERT_TRUE(env.status.ok()) << env.status.ToString();
  EXPECT_GT(out.chunks.size(), 5u);
  size_t total = 0;
  for (size_t i = 0; i < out.chunks.size(); ++i) {
    const std::string& c = out.chunks[i];
    EXPECT_TRUE(i + 1 == out.chunks.size() || c.size() >= 8192u) << "chunk " << i;
    EXPECT_LE(c.size(), 8192u + 512u);
    wire::SearchHitsChunk chunk;
    ASSERT_TRUE(wire::Decode(c, &chunk).ok());
    total += chunk.hits.size();
  }
  EXPECT_EQ(total, 1234u);
}

TEST_F(NodeServiceTest, ClosedStreamStopsTheSearch) {
  std::vector<Update> batch;
  for (uint64_t i = 1; i <= 3000; ++i) batch.push_back(Put(1, i, "/f" + std::to_string(i), i));
  ASSERT_TRUE(Apply(batch).ok());
  wire::SearchQuery q;
  q.query = "size>0";
  CollectStream out;
  out.open = false;  // the server is stopping
  std::string reply =
      service_->Handle(wire::EncodeRequest(MsgType::kSearch, q), rpc::PeerInfo{}, out);
  wire::ReplyEnvelope env;
  ASSERT_TRUE(wire::DecodeReply(reply, &env).ok());
  EXPECT_EQ(env.status.code(), StatusCode::kAborted);
  EXPECT_EQ(out.chunks.size(), 1u);  // nothing after the refused frame
}

TEST_F(NodeServiceTest, SortAndLimitMatchModel) {
  RecordGen gen(TestSeed() + 1);
  Model model;
  std::vector<Update> batch;
  for (uint64_t i = 1; i <= 400; ++i) {
    Update u;
    u.acg = 1 + i % 5;
    u.record = gen.NewRecord(FileId{1, i});
    batch.push_back(u);
    model.Apply(u);
  }
  ASSERT_TRUE(Apply(batch).ok());
  ParseOptions po;
  po.now_ns = kNow;
  for (const char* key : {"size", "mtime", "ctime", "atime", "uid", "gid", "path", "name"}) {
    for (bool desc : {false, true}) {
      for (uint64_t limit : {0, 1, 17}) {
        wire::SearchQuery q;
        q.query = "size>=1k | keyword=src";
        q.now_ns = kNow;
        q.sort_by = key;
        q.descending = desc;
        q.limit = limit;
        std::vector<wire::WireHit> hits;
        ASSERT_TRUE(Search(q, &hits).ok());
        std::vector<std::string> got;
        for (const auto& h : hits) got.push_back(h.path);
        auto parsed = Query::Parse(q.query, po);
        ASSERT_TRUE(parsed.ok());
        EXPECT_EQ(got, model.SearchSorted(*parsed, "/", key, desc, limit))
            << key << " " << desc << " " << limit;
      }
    }
  }
  // Unsorted with a limit: exactly `limit` of the matches.
  wire::SearchQuery q;
  q.query = "size>=0";
  q.limit = 5;
  std::vector<wire::WireHit> hits;
  ASSERT_TRUE(Search(q, &hits).ok());
  EXPECT_EQ(hits.size(), 5u);
}

TEST_F(NodeServiceTest, BadQueriesGetPositionedErrors) {
  wire::SearchQuery q;
  std::vector<wire::WireHit> hits;
  q.query = "size>>1m";
  Status st = Search(q, &hits);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("error at "), std::string::npos) << st.ToString();
  q.query = "size>1m";
  q.sort_by = "colour";
  EXPECT_EQ(Search(q, &hits).code(), StatusCode::kInvalidArgument);
  q.sort_by = "";
  q.scope = "relative/scope";
  EXPECT_EQ(Search(q, &hits).code(), StatusCode::kInvalidArgument);
}

TEST_F(NodeServiceTest, PingStatusAndIndexes) {
  wire::Ping ping{std::string("hello\0world", 11)};
  wire::Ping pong;
  ASSERT_TRUE(wire::WireCall(*client_, MsgType::kPing, ping, &pong).ok());
  EXPECT_EQ(pong.payload, ping.payload);

  ASSERT_TRUE(Apply({Put(1, 1, "/a", 1), Put(2, 2, "/b", 2), Put(2, 3, "/c", 3)}).ok());
  wire::NodeStatusReply status;
  ASSERT_TRUE(wire::WireCall(*client_, MsgType::kNodeStatus, wire::Empty{}, &status).ok());
  EXPECT_EQ(status.node_id, 1u);
  EXPECT_EQ(status.acgs, 2u);
  EXPECT_EQ(status.files + status.cached_updates, 3u);  // committed or still cached
  ASSERT_EQ(status.acg_list.size(), 2u);

  auto create = [&](const std::string& name, IndexType type) {
    wire::Empty e;
    return wire::WireCall(*client_, MsgType::kCreateIndex, wire::IndexDef{name, type}, &e);
  };
  auto drop = [&](const std::string& name) {
    wire::Empty e;
    return wire::WireCall(*client_, MsgType::kDropIndex, wire::IndexName{name}, &e);
  };
  auto list = [&]() {
    wire::IndexesReply r;
    EXPECT_TRUE(wire::WireCall(*client_, MsgType::kListIndexes, wire::Empty{}, &r).ok());
    std::vector<std::pair<std::string, IndexType>> out;
    for (const auto& d : r.indexes) out.emplace_back(d.name, d.type);
    return out;
  };
  using L = std::vector<std::pair<std::string, IndexType>>;
  EXPECT_TRUE(create("proj", IndexType::kBTree).ok());
  EXPECT_TRUE(create("proj", IndexType::kBTree).ok());  // idempotent
  EXPECT_EQ(create("proj", IndexType::kHash).code(), StatusCode::kAlreadyExists);
  EXPECT_FALSE(create("path", IndexType::kBTree).ok());  // built-in
  EXPECT_TRUE(create("alpha", IndexType::kHash).ok());
  EXPECT_EQ(list(), (L{{"alpha", IndexType::kHash}, {"proj", IndexType::kBTree}}));
  EXPECT_TRUE(drop("proj").ok());
  EXPECT_EQ(drop("proj").code(), StatusCode::kNotFound);
  EXPECT_EQ(list(), (L{{"alpha", IndexType::kHash}}));
  EXPECT_EQ(service_->IndexChangeSeq(), 4u);  // two creates of proj, alpha, one drop
}

// Garbage, truncated requests, unknown types and other protocol versions all get a
// well-formed error reply; the engine's contents do not change.
TEST_F(NodeServiceTest, HostileBytesGetErrorsAndChangeNothing) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("PROPELLER_SEED=" + std::to_string(seed));
  ASSERT_TRUE(Apply({Put(1, 1, "/keep/a", 1), Put(2, 2, "/keep/b", 2)}).ok());
  ASSERT_TRUE(engine_->CreateIndex("proj", IndexType::kBTree).ok());
  const auto before = Snapshot();
  const auto acgs_before = EngineAcgs();
  const auto indexes_before = engine_->ListIndexes().size();

  int replies = 0;
  auto expect_error = [&](const std::string& bytes, const std::string& what) {
    CollectStream out;
    std::string reply = service_->Handle(bytes, rpc::PeerInfo{}, out);
    wire::ReplyEnvelope env;
    ASSERT_TRUE(wire::DecodeReply(reply, &env).ok()) << what;
    EXPECT_FALSE(env.status.ok()) << what;
    EXPECT_TRUE(out.chunks.empty()) << what;
    ++replies;
  };

  // Every proper prefix of valid requests of each type.
  std::vector<std::string> valid;
  {
    wire::ApplyRequest a;
    a.updates = {Put(1, 100, "/new/x", 5), Put(2, 101, "/new/y", 6)};
    valid.push_back(wire::EncodeRequest(MsgType::kApply, a));
    wire::SearchQuery q;
    q.query = "size>0";
    q.creds = wire::WireCredentials{1000, 100, {1, 2}};
    valid.push_back(wire::EncodeRequest(MsgType::kSearch, q));
    valid.push_back(wire::EncodeRequest(MsgType::kGetRecord, wire::GetRecordRequest{1, {1, 1}}));
    valid.push_back(
        wire::EncodeRequest(MsgType::kCreateIndex, wire::IndexDef{"zz", IndexType::kHash}));
    valid.push_back(wire::EncodeRequest(MsgType::kDropIndex, wire::IndexName{"proj"}));
    valid.push_back(wire::EncodeRequest(MsgType::kPing, wire::Ping{"p"}));
  }
  for (const std::string& v : valid) {
    for (size_t n = 0; n < v.size(); ++n) {
      expect_error(v.substr(0, n), "prefix " + std::to_string(n));
    }
  }

  // Random bytes, and random bytes behind a valid-looking envelope of each served type.
  Random rnd(seed);
  for (int i = 0; i < 2000; ++i) {
    std::string junk(rnd.Uniform(120), '\0');
    for (char& c : junk) c = static_cast<char>(rnd.Uniform(256));
    CollectStream out;
    std::string reply = service_->Handle(junk, rpc::PeerInfo{}, out);
    wire::ReplyEnvelope env;
    ASSERT_TRUE(wire::DecodeReply(reply, &env).ok());
  }
  for (MsgType t : {MsgType::kApply, MsgType::kSearch, MsgType::kGetRecord,
                    MsgType::kCreateIndex, MsgType::kDropIndex}) {
    for (int i = 0; i < 300; ++i) {
      std::string junk(rnd.Uniform(64), '\0');
      for (char& c : junk) c = static_cast<char>(rnd.Uniform(256));
      CollectStream out;
      std::string reply =
          service_->Handle(wire::EncodeRequest(t, std::string_view(junk)), rpc::PeerInfo{}, out);
      wire::ReplyEnvelope env;
      ASSERT_TRUE(wire::DecodeReply(reply, &env).ok());
    }
  }

  // Types an index node does not serve: the master's, unassigned numbers.
  for (unsigned t : {0u, 1u, 2u, 3u, 4u, 6u, 11u, 12u, 14u, 15u, 17u, 31u, 41u, 63u, 65u, 999u}) {
    CollectStream out;
    std::string reply = service_->Handle(
        wire::EncodeRequest(static_cast<MsgType>(t), std::string_view()), rpc::PeerInfo{}, out);
    wire::ReplyEnvelope env;
    ASSERT_TRUE(wire::DecodeReply(reply, &env).ok());
    EXPECT_EQ(env.status.code(), StatusCode::kNotSupported) << t;
    ++replies;
  }
  // Envelope [version 2000, type 64 (ping), bin [""]]: another major version.
  const std::string other_version("\x93\xcd\x07\xd0\x40\xc4\x02\x91\xa0", 9);
  expect_error(other_version, "version 2000");

  EXPECT_GT(replies, 100);
  EXPECT_EQ(Snapshot(), before);
  EXPECT_EQ(EngineAcgs(), acgs_before);
  EXPECT_EQ(engine_->ListIndexes().size(), indexes_before);
  EXPECT_GT(service_->stats().bad_requests, 100u);
  // Still serving.
  wire::Ping pong;
  EXPECT_TRUE(wire::WireCall(*client_, MsgType::kPing, wire::Ping{"ok"}, &pong).ok());
}

// The destination's side of a migration, from bad parts to a whole copy the master will not
// give this node (this fake master does not serve kMoveAcg): every error leaves nothing
// adopted and nothing in the scratch directory.
// A migration's parts as a source on node 2 sends them: a real copy (FreezeAndCopyAcg) of a
// 50-file ACG made by another engine.
class AdoptionTest : public NodeServiceTest {
 protected:
  // The copy of ACG `acg` (inodes from `first_ino`), made in a directory of its own.
  void MakeCopy(uint64_t acg, uint64_t first_ino) {
    acg_ = acg;
    EngineOptions eo;
    eo.data_dir = other_.path() + "/" + std::to_string(acg);
    auto source = Engine::Open(eo);
    ASSERT_TRUE(source.ok());
    RecordGen gen(acg);
    std::vector<Update> batch;
    for (uint64_t i = 0; i < 50; ++i) {
      Update u;
      u.op = UpdateOp::kPut;
      u.acg = acg;
      u.record = gen.NewRecord(FileId{1, first_ino + i});
      batch.push_back(u);
    }
    ASSERT_TRUE((*source)->Apply(batch).ok());
    const std::string path = eo.data_dir + ".mdb";
    ASSERT_TRUE((*source)->FreezeAndCopyAcg(acg, path).ok());
    std::ifstream in(path, std::ios::binary);
    copy_.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    ASSERT_GT(copy_.size(), 100u);
    crc_ = Crc32cMask(Crc32c(copy_));
  }
  wire::AdoptAcgChunk Part(uint64_t offset, size_t n, uint32_t crc) const {
    wire::AdoptAcgChunk p;
    p.acg = acg_;
    p.from_node = 2;
    p.offset = offset;
    p.total_bytes = copy_.size();
    p.data = copy_.substr(offset, n);
    p.crc = crc;
    return p;
  }
  // The whole copy in two parts; the status of the last.
  Status SendCopy() {
    const size_t half = copy_.size() / 2;
    Status st = Call(MsgType::kAdoptAcg, Part(0, half, 0));
    if (!st.ok()) return st;
    return Call(MsgType::kAdoptAcg, Part(half, copy_.size() - half, crc_));
  }
  template <typename Msg>
  Status Call(MsgType type, const Msg& msg) {
    CollectStream out;
    wire::ReplyEnvelope env;
    EXPECT_TRUE(
        wire::DecodeReply(service_->Handle(wire::EncodeRequest(type, msg), rpc::PeerInfo{}, out),
                          &env)
            .ok());
    return env.status;
  }
  size_t ScratchFiles() const {
    size_t n = 0;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(scratch_.path() + "/migrate", ec)) {
      n += !e.is_directory();
    }
    return n;
  }
  // Files of ACG `acg` a search finds; `named` = a search limited to that ACG.
  size_t Found(uint64_t acg, bool named) {
    wire::SearchQuery q;
    q.query = "size>=0";
    if (named) q.acgs = {acg};
    std::vector<wire::WireHit> hits;
    EXPECT_TRUE(Search(q, &hits).ok());
    return static_cast<size_t>(
        std::count_if(hits.begin(), hits.end(), [&](const wire::WireHit& h) {
          return h.acg == acg;
        }));
  }
  NodeServiceOptions Options() const {
    NodeServiceOptions so;
    so.scratch_dir = scratch_.path() + "/migrate";
    return so;
  }

  TempDir scratch_, other_;
  uint64_t acg_ = 0;
  std::string copy_;
  uint32_t crc_ = 0;
};

TEST_F(AdoptionTest, AdoptionChecksItsPartsAndUndoesWhatTheMasterRefuses) {
  StartService(Options());
  ASSERT_NO_FATAL_FAILURE(MakeCopy(9, 100));
  const size_t half = copy_.size() / 2;
  // Out of order, beyond the total, from itself: refused.
  EXPECT_EQ(Call(MsgType::kAdoptAcg, Part(half, copy_.size() - half, crc_)).code(),
            StatusCode::kInvalidArgument);
  wire::AdoptAcgChunk beyond = Part(0, half, 0);
  beyond.total_bytes = half - 1;
  EXPECT_EQ(Call(MsgType::kAdoptAcg, beyond).code(), StatusCode::kInvalidArgument);
  wire::AdoptAcgChunk self = Part(0, half, 0);
  self.from_node = 1;
  EXPECT_EQ(Call(MsgType::kAdoptAcg, self).code(), StatusCode::kInvalidArgument);
  // Two parts, the last with a wrong checksum: nothing adopted, the parts gone.
  ASSERT_TRUE(Call(MsgType::kAdoptAcg, Part(0, half, 0)).ok());
  EXPECT_EQ(Call(MsgType::kAdoptAcg, Part(half, copy_.size() - half, crc_ ^ 1)).code(),
            StatusCode::kCorruption);
  EXPECT_EQ(ScratchFiles(), 0u);
  // The whole copy, intact: adopted, but the master refuses to flip the map (it answers
  // with an error), so it is dropped again (as having moved back to its source).
  EXPECT_FALSE(SendCopy().ok());
  EXPECT_EQ(EngineAcgs().count(9), 0u);
  EXPECT_EQ(engine_->MovedTo(9), 2u);
  EXPECT_EQ(ScratchFiles(), 0u);
  // Without a way to reach other nodes, this node moves nothing; a release of an ACG that is
  // not frozen here is OK (sent again).
  EXPECT_EQ(Call(MsgType::kMigrateAcg, wire::MigrateAcgRequest{9, 2}).code(),
            StatusCode::kNotSupported);
  EXPECT_TRUE(Call(MsgType::kReleaseAcg, wire::ReleaseAcgRequest{9}).ok());
}

// The master dies around the flip (its kMoveAcg reply never comes): the destination asks it
// who owns the ACG, and keeps, drops or holds the copy accordingly — never drops a copy the
// map may name, never serves one the source may still own.
TEST_F(AdoptionTest, AFlipWithoutAnAnswerIsSettledByTheMastersMap) {
  NodeServiceOptions so = Options();
  so.master_timeout_ms = 200;
  so.unsettled_wait_ms = 300;
  StartService(so);

  // 1. The flip committed, its reply lost: the map names this node, so the adoption stands.
  ASSERT_NO_FATAL_FAILURE(MakeCopy(20, 1000));
  master_->SetMoveOutcome(/*commit=*/true, Status::Timeout("reply lost"));
  ASSERT_TRUE(SendCopy().ok());
  EXPECT_EQ(Found(20, false), 50u);
  ASSERT_TRUE(Call(MsgType::kReleaseAcg, wire::ReleaseAcgRequest{20}).ok());
  EXPECT_TRUE(Apply({Put(20, 5000, "/after-move", 1)}).ok()) << "owned and thawed";

  // 2. The flip did not commit and the master stays silent: the copy is unsettled, kept but
  //    searched only when named; no thaw while nobody can say; dropped once the master,
  //    back, names the source (a heartbeat's not_yours).
  ASSERT_NO_FATAL_FAILURE(MakeCopy(21, 2000));
  master_->SetMoveOutcome(/*commit=*/false, Status::Timeout("reply lost"));
  master_->SetLocateSilent(true);
  Status st = SendCopy();
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();
  EXPECT_EQ(EngineAcgs().count(21), 1u) << "kept: the flip may have happened";
  EXPECT_EQ(Found(21, false), 0u) << "the source may own and change it meanwhile";
  EXPECT_EQ(Found(21, true), 50u) << "a search naming it follows the source's 'moved'";
  EXPECT_EQ(Found(20, false), 51u) << "other ACGs are searched as before";
  service_->ThawAbandoned(0);
  EXPECT_EQ(Found(21, false), 0u);
  master_->SetLocateSilent(false);
  master_->SetOwner(21, 2, kOtherNode);
  service_->ThawAbandoned(0);
  EXPECT_EQ(Found(21, false), 0u) << "the map names the source: never thawed here";
  service_->DropNotOwned({wire::AcgLocation{21, 2, kOtherNode}});
  EXPECT_EQ(EngineAcgs().count(21), 0u);
  EXPECT_EQ(engine_->MovedTo(21), 2u);
  // Not served any more, but kept: set aside for an administrator, never removed.
  size_t aside = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_.path() + "/stray")) {
    aside += e.path().filename().string().rfind("acg-21-", 0) == 0 &&
             std::filesystem::exists(e.path() / "data.mdb");
  }
  EXPECT_EQ(aside, 1u);

  // 3. Unsettled again, then the master, back, names this node: it is thawed and served.
  ASSERT_NO_FATAL_FAILURE(MakeCopy(22, 3000));
  master_->SetLocateSilent(true);
  EXPECT_EQ(SendCopy().code(), StatusCode::kUnavailable);
  EXPECT_EQ(Found(22, false), 0u);
  master_->SetLocateSilent(false);
  master_->SetOwner(22, 1, "inproc://self");
  service_->ThawAbandoned(0);
  EXPECT_EQ(Found(22, false), 50u);
  EXPECT_TRUE(Apply({Put(22, 6000, "/settled", 1)}).ok());
  EXPECT_EQ(ScratchFiles(), 0u);
}

// The source's side when a move fails and the master cannot say what happened: the ACG stays
// frozen here (never two owners) until the master answers, then goes on here or is dropped.
TEST_F(AdoptionTest, AStalledMoveWaitsForTheMastersWord) {
  // A destination that answers pings and refuses every part (a node failing mid-adoption).
  rpc::ServerOptions po;
  po.endpoint = UniqueName("peer");
  po.worker_threads = 1;
  auto peer = rpc::Server::Start(
      po, [](std::string_view bytes, const rpc::PeerInfo&, rpc::ReplyStream&) {
        wire::RequestEnvelope env;
        if (wire::DecodeRequest(bytes, &env).ok() && env.type == MsgType::kPing) {
          return wire::EncodeOkReply(wire::Ping{"pong"});
        }
        return wire::EncodeReply(Status::IOError("disk gone"), {});
      });
  ASSERT_TRUE(peer.ok());
  master_->AddNode(2, (*peer)->endpoint());
  NodeServiceOptions so = Options();
  so.master_timeout_ms = 200;
  so.owner_wait_ms = 300;
  so.connect_peer = [](const std::string& endpoint) {
    return rpc::Channel::Connect({.endpoint = endpoint});
  };
  StartService(so);
  ASSERT_TRUE(Apply({Put(3, 10, "/stalled", 1)}).ok());
  // Frozen: a second freeze is refused (and changes nothing).
  auto frozen = [&] {
    return engine_->FreezeAndCopyAcg(3, "").code() == StatusCode::kInvalidArgument;
  };

  // 1. The master is silent through the failure: frozen, and stays so while it is.
  master_->SetLocateSilent(true);
  wire::MigrateAcgReply rep;
  EXPECT_FALSE(service_->Migrate({3, 2}, &rep).ok());
  EXPECT_TRUE(frozen());
  service_->ResolveStalledMoves();
  EXPECT_TRUE(frozen());
  // It answers: node 1 (this one) owns it, so updates go on here.
  master_->SetLocateSilent(false);
  service_->ResolveStalledMoves();
  EXPECT_TRUE(Apply({Put(3, 11, "/stalled-2", 1)}).ok());
  EXPECT_EQ(engine_->MovedTo(3), 0u);

  // 2. Again, and this time the flip had committed: the copy here is dropped.
  master_->SetLocateSilent(true);
  EXPECT_FALSE(service_->Migrate({3, 2}, &rep).ok());
  EXPECT_TRUE(frozen());
  master_->SetOwner(3, 2, (*peer)->endpoint());
  master_->SetLocateSilent(false);
  service_->ResolveStalledMoves();
  EXPECT_EQ(engine_->MovedTo(3), 2u);
  EXPECT_EQ(EngineAcgs().count(3), 0u);
  std::vector<wire::AcgLocation> redirects;
  EXPECT_EQ(Apply({Put(3, 12, "/stalled-3", 1)}, &redirects).code(), StatusCode::kRedirect);
  EXPECT_EQ(ScratchFiles(), 0u);
}

TEST_F(NodeServiceTest, KernelCredentialsOverrideClaimedOnes) {
  // A directory only uid 1000 may enter, with a file inside.
  Update dir = Put(1, 10, "/private", 0);
  dir.record.type = FileType::kDirectory;
  dir.record.mode = 040700;
  dir.record.uid = 1000;
  dir.record.gid = 1000;
  Update root = Put(1, 1, "/", 0);
  root.record.type = FileType::kDirectory;
  root.record.mode = 040755;
  root.record.paths = {"/"};
  Update file = Put(1, 11, "/private/secret", 1);
  ASSERT_TRUE(Apply({root, dir, file}).ok());
  wire::SearchQuery q;
  q.query = "name=secret";
  auto count = [&](const rpc::PeerInfo& peer) {
    CollectStream out;
    std::string reply = service_->Handle(wire::EncodeRequest(MsgType::kSearch, q), peer, out);
    wire::ReplyEnvelope env;
    EXPECT_TRUE(wire::DecodeReply(reply, &env).ok());
    EXPECT_TRUE(env.status.ok()) << env.status.ToString();
    size_t n = 0;
    for (const std::string& c : out.chunks) {
      wire::SearchHitsChunk chunk;
      EXPECT_TRUE(wire::Decode(c, &chunk).ok());
      n += chunk.hits.size();
    }
    return n;
  };
  EXPECT_EQ(count(rpc::PeerInfo{}), 1u);  // no creds: trusted, unfiltered
  q.creds = wire::WireCredentials{1000, 1000, {}};
  EXPECT_EQ(count(rpc::PeerInfo{}), 1u);
  q.creds = wire::WireCredentials{1001, 1001, {}};
  EXPECT_EQ(count(rpc::PeerInfo{}), 0u);
  master_->SetVolume(1, "/");
  rpc::PeerInfo kernel;
  kernel.transport = rpc::PeerTransport::kIpc;
  kernel.uid = 1001;
  kernel.gid = 1001;
  q.creds = wire::WireCredentials{0, 0, {}};  // claims root
  EXPECT_EQ(count(kernel), 0u);
  q.creds.reset();
  EXPECT_EQ(count(kernel), 0u);
  kernel.uid = 1000;
  EXPECT_EQ(count(kernel), 1u);
}

TEST_F(NodeServiceTest, ReconcileIndexes) {
  using L = std::vector<std::pair<std::string, IndexType>>;
  auto have = [&]() {
    L out;
    for (const auto& d : service_->UserIndexes()) out.emplace_back(d.name, d.type);
    return out;
  };
  using D = wire::IndexDef;
  ASSERT_TRUE(service_->ReconcileIndexes({D{"a", IndexType::kBTree}, D{"b", IndexType::kHash}}, 0)
                  .ok());
  EXPECT_EQ(have(), (L{{"a", IndexType::kBTree}, {"b", IndexType::kHash}}));
  ASSERT_TRUE(service_->ReconcileIndexes({D{"b", IndexType::kHash}, D{"c", IndexType::kBTree}}, 0)
                  .ok());
  EXPECT_EQ(have(), (L{{"b", IndexType::kHash}, {"c", IndexType::kBTree}}));
  // A type change recreates the index; a built-in name in the catalogue is ignored.
  ASSERT_TRUE(service_->ReconcileIndexes(
      {D{"b", IndexType::kBTree}, D{"c", IndexType::kBTree}, D{"path", IndexType::kHash}}, 0).ok());
  EXPECT_EQ(have(), (L{{"b", IndexType::kBTree}, {"c", IndexType::kBTree}}));

  // A local create (seq 1) is not undone by a catalogue computed before it ...
  wire::Empty e;
  ASSERT_TRUE(wire::WireCall(*client_, MsgType::kCreateIndex, D{"d", IndexType::kHash}, &e).ok());
  const std::vector<D> old_catalogue = {D{"b", IndexType::kBTree}, D{"c", IndexType::kBTree}};
  ASSERT_TRUE(service_->ReconcileIndexes(old_catalogue, 0).ok());
  EXPECT_EQ(have(),
            (L{{"b", IndexType::kBTree}, {"c", IndexType::kBTree}, {"d", IndexType::kHash}}));
  // ... but is by one computed after it.
  ASSERT_TRUE(service_->ReconcileIndexes(old_catalogue, 1).ok());
  EXPECT_EQ(have(), (L{{"b", IndexType::kBTree}, {"c", IndexType::kBTree}}));
  // Same for a local drop (seq 2).
  ASSERT_TRUE(wire::WireCall(*client_, MsgType::kDropIndex, wire::IndexName{"c"}, &e).ok());
  ASSERT_TRUE(service_->ReconcileIndexes(old_catalogue, 1).ok());
  EXPECT_EQ(have(), (L{{"b", IndexType::kBTree}}));
  ASSERT_TRUE(service_->ReconcileIndexes(old_catalogue, 2).ok());
  EXPECT_EQ(have(), (L{{"b", IndexType::kBTree}, {"c", IndexType::kBTree}}));
  // A bad name is reported, and the rest is still reconciled.
  EXPECT_FALSE(service_->ReconcileIndexes({D{"bad name!", IndexType::kHash}}, 2).ok());
  EXPECT_EQ(have(), L{});
}

}  // namespace
}  // namespace propeller

namespace propeller {
namespace {

Update Edge(uint64_t acg, uint64_t src, uint64_t dst, uint32_t weight) {
  Update u;
  u.op = UpdateOp::kAddEdge;
  u.acg = acg;
  u.record.id = FileId{1, src};
  u.edge_dst = FileId{1, dst};
  u.edge_weight = weight;
  return u;
}

TEST_F(NodeServiceTest, ListEdgesReturnsTheCommittedAndCachedEdgesOfEveryAcg) {
  ASSERT_TRUE(Apply({Put(1, 1, "/a.c", 1), Put(1, 2, "/a.o", 1), Put(2, 3, "/b.c", 1),
                     Put(2, 4, "/b.o", 1)})
                  .ok());
  ASSERT_TRUE(Apply({Edge(1, 1, 2, 1), Edge(2, 3, 4, 2), Edge(1, 1, 2, 3)}).ok());
  // Brute force: the sum of weights per (acg, src, dst).
  std::map<std::tuple<uint64_t, uint64_t, uint64_t>, uint64_t> want = {{{1, 1, 2}, 4},
                                                                       {{2, 3, 4}, 2}};
  wire::EdgesReply all;
  ASSERT_TRUE(wire::WireCall(*client_, MsgType::kListEdges, wire::ListEdgesRequest{}, &all).ok());
  std::map<std::tuple<uint64_t, uint64_t, uint64_t>, uint64_t> got;
  for (const wire::WireEdge& e : all.edges) got[{e.acg, e.src.ino, e.dst.ino}] += e.weight;
  EXPECT_EQ(got, want);
  EXPECT_FALSE(all.truncated);
  wire::EdgesReply one;
  ASSERT_TRUE(wire::WireCall(*client_, MsgType::kListEdges, wire::ListEdgesRequest{2}, &one).ok());
  ASSERT_EQ(one.edges.size(), 1u);
  EXPECT_EQ(one.edges[0].acg, 2u);
  EXPECT_EQ(one.edges[0].weight, 2u);
  // An ACG this node does not hold: an error, not an empty answer.
  wire::EdgesReply none;
  EXPECT_FALSE(
      wire::WireCall(*client_, MsgType::kListEdges, wire::ListEdgesRequest{77}, &none).ok());
}

}  // namespace
}  // namespace propeller
