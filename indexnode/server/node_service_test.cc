// NodeService against the engine it wraps and a brute-force model: seeded random updates and
// queries through the real transport (inproc://), ownership and redirects with a fake master,
// streaming, sort and limit, index management, and hostile bytes. PROPELLER_SEED=<n> replays.
#include "indexnode/server/node_service.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "common/query/query.h"
#include "common/random.h"
#include "indexnode/server/node_service_test_fixture.h"

namespace propeller {
namespace {

using testing::CollectStream;
using testing::HitKey;
using testing::kNow;
using testing::kOtherNode;
using testing::Model;
using testing::NodeServiceTest;
using testing::RecordGen;
using testing::UniqueName;
using wire::MsgType;

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
