// NodeService in a migration (kAdoptAcg and the moves around it): the parts of a real ACG copy,
// bad parts, a master that refuses, loses a reply or stays silent, and a move that stalls.
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "common/crc32c.h"
#include "common/fault_env.h"
#include "indexnode/server/node_service_test_fixture.h"

namespace propeller {
namespace {

using testing::CollectStream;
using testing::kOtherNode;
using testing::NodeServiceTest;
using testing::RecordGen;
using testing::TempDir;
using testing::UniqueName;
using wire::MsgType;

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
  // Node 2 at the master: a destination that answers pings and refuses every part with
  // `refusal` (a node failing mid-adoption). Options for a source that moves ACGs to it.
  NodeServiceOptions WithRefusingPeer(const Status& refusal) {
    rpc::ServerOptions po;
    po.endpoint = UniqueName("peer");
    po.worker_threads = 1;
    auto peer = rpc::Server::Start(
        po, [refusal](std::string_view bytes, const rpc::PeerInfo&, rpc::ReplyStream&) {
          wire::RequestEnvelope env;
          if (wire::DecodeRequest(bytes, &env).ok() && env.type == MsgType::kPing) {
            return wire::EncodeOkReply(wire::Ping{"pong"});
          }
          return wire::EncodeReply(refusal, {});
        });
    EXPECT_TRUE(peer.ok()) << peer.status().ToString();
    if (peer.ok()) {
      peer_ = std::move(peer).value();
      master_->AddNode(2, peer_->endpoint());
    }
    NodeServiceOptions so = Options();
    so.master_timeout_ms = 200;
    so.owner_wait_ms = 300;
    so.connect_peer = [](const std::string& endpoint) {
      return rpc::Channel::Connect({.endpoint = endpoint});
    };
    return so;
  }

  TempDir scratch_, other_;
  std::unique_ptr<rpc::Server> peer_;
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

// The copy's file I/O goes through NodeServiceOptions::env: a full disk while a part is
// written (ENOSPC, "resource exhausted") and a failed sync of the last part are errors that
// adopt nothing; once the disk is back, the whole copy sent again goes through as before.
TEST_F(AdoptionTest, FaultsWritingTheCopyAdoptNothing) {
  FaultInjectionEnv fault(Env::Default());
  NodeServiceOptions so = Options();
  so.env = &fault;
  StartService(so);
  ASSERT_NO_FATAL_FAILURE(MakeCopy(30, 4000));
  const size_t half = copy_.size() / 2;

  // 1. Every write refused (ENOSPC): the first part is an error; nothing written or adopted.
  fault.SetTransientFault(ENOSPC);
  Status st = SendCopy();
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted) << st.ToString();
  EXPECT_GT(fault.TransientFaults(), 0);
  fault.ClearTransientFault();
  EXPECT_EQ(EngineAcgs().count(30), 0u);
  EXPECT_EQ(ScratchFiles(), 0u);

  // 2. The first part lands; the last part's sync fails (the scratch directory, the open and
  //    the append go through, then everything fails as after an I/O error on the device).
  ASSERT_TRUE(Call(MsgType::kAdoptAcg, Part(0, half, 0)).ok());
  fault.SetFailAfter(3);
  st = Call(MsgType::kAdoptAcg, Part(half, copy_.size() - half, crc_));
  EXPECT_EQ(st.code(), StatusCode::kIOError) << st.ToString();
  EXPECT_NE(st.ToString().find("sync"), std::string::npos) << st.ToString();
  EXPECT_TRUE(fault.Failed());
  EXPECT_EQ(EngineAcgs().count(30), 0u) << "an unsynced copy was adopted";
  EXPECT_EQ(engine_->MovedTo(30), 0u);
  fault.ResetState();

  // 3. Sent again from the start: adopted, then dropped because this fake master refuses the
  //    flip — the path of AdoptionChecksItsPartsAndUndoesWhatTheMasterRefuses.
  EXPECT_FALSE(SendCopy().ok());
  EXPECT_EQ(engine_->MovedTo(30), 2u);
  EXPECT_EQ(ScratchFiles(), 0u);
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
  StartService(WithRefusingPeer(Status::IOError("disk gone")));
  ASSERT_TRUE(peer_ != nullptr);
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
  master_->SetOwner(3, 2, peer_->endpoint());
  master_->SetLocateSilent(false);
  service_->ResolveStalledMoves();
  EXPECT_EQ(engine_->MovedTo(3), 2u);
  EXPECT_EQ(EngineAcgs().count(3), 0u);
  std::vector<wire::AcgLocation> redirects;
  EXPECT_EQ(Apply({Put(3, 12, "/stalled-3", 1)}, &redirects).code(), StatusCode::kRedirect);
  EXPECT_EQ(ScratchFiles(), 0u);
}

// The source's file I/O goes through NodeServiceOptions::env too: when the directory for the
// copy cannot be made (a full disk), the move is an error before anything is frozen, and the
// ACG's updates go on here.
TEST_F(AdoptionTest, ASourceThatCannotWriteItsCopyMovesNothing) {
  FaultInjectionEnv fault(Env::Default());
  NodeServiceOptions so = WithRefusingPeer(Status::IOError("no part should come"));
  ASSERT_TRUE(peer_ != nullptr);
  so.env = &fault;
  StartService(so);
  ASSERT_TRUE(Apply({Put(4, 10, "/stays", 1)}).ok());
  fault.SetTransientFault(ENOSPC);
  wire::MigrateAcgReply rep;
  Status st = service_->Migrate({4, 2}, &rep);
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted) << st.ToString();
  EXPECT_GT(fault.TransientFaults(), 0);
  fault.ClearTransientFault();
  EXPECT_EQ(engine_->MovedTo(4), 0u);
  EXPECT_EQ(Found(4, false), 1u);
  // Not frozen: an update is taken at once (a frozen ACG's would wait, then be refused).
  EXPECT_TRUE(Apply({Put(4, 11, "/stays-2", 1)}).ok());
  EXPECT_EQ(Found(4, false), 2u);
}

}  // namespace
}  // namespace propeller
