// Who may do what through an index node (schemas/access.h, docs/security.md): every write
// message from a local user or an unidentified peer is refused and changes nothing; what a user
// reads — hits, records, hard links, edges, whole volumes — is cut to what they could find by
// walking the tree; a user's attribute update is checked against the real file's permissions.
// Requests go through NodeService::Handle with the PeerInfo each transport would report.
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "indexnode/engine_test_util.h"
#include "indexnode/server/fake_master.h"
#include "indexnode/server/node_service.h"
#include "schemas/wire_call.h"

namespace propeller {
namespace {

using testing::CollectStream;
using testing::FakeMaster;
using testing::TempDir;
using wire::MsgType;

rpc::PeerInfo Local(uint32_t uid, uint32_t gid) {
  rpc::PeerInfo p;
  p.transport = rpc::PeerTransport::kIpc;
  p.uid = uid;
  p.gid = gid;
  return p;
}
rpc::PeerInfo PlainTcp() {
  rpc::PeerInfo p;
  p.transport = rpc::PeerTransport::kTcp;
  return p;
}
const rpc::PeerInfo kMember{};  // in-process

Update Record(uint64_t ino, std::vector<std::string> paths, uint32_t mode, uint32_t uid = 0,
              uint32_t volume = 1) {
  Update u;
  u.op = UpdateOp::kPut;
  u.acg = 1;
  u.record.id = FileId{volume, ino};
  u.record.paths = std::move(paths);
  u.record.type = (mode & S_IFMT) == S_IFDIR ? FileType::kDirectory : FileType::kRegular;
  u.record.mode = mode;
  u.record.uid = uid;
  u.record.gid = uid;
  u.record.size = ino;
  return u;
}

class NodeAccessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> n{0};
    master_ = FakeMaster::Start("inproc://node-access-master-" + std::to_string(n++));
    ASSERT_TRUE(master_);
    for (uint64_t acg = 1; acg <= 3; ++acg) master_->SetOwner(acg, 1, "inproc://self");
    auto ch = rpc::Channel::Connect({.endpoint = master_->endpoint()});
    ASSERT_TRUE(ch.ok());
    master_channel_ = std::move(ch).value();
    EngineOptions eo;
    eo.data_dir = dir_.path();
    eo.background_commit = false;
    eo.search_threads = 2;
    auto e = Engine::Open(eo);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    engine_ = std::move(e).value();
    NodeServiceOptions so;
    so.engine = engine_.get();
    so.master = master_channel_.get();
    so.node_id = 1;
    so.scratch_dir = dir_.path() + "/migrate";
    service_ = std::make_unique<NodeService>(so);
  }

  // The reply envelope's status (and, for searches, the hits) of one request.
  template <typename Req>
  Status Call(const rpc::PeerInfo& peer, MsgType type, const Req& req,
              std::vector<wire::WireHit>* hits = nullptr, std::string* body = nullptr) {
    CollectStream out;
    const std::string reply = service_->Handle(wire::EncodeRequest(type, req), peer, out);
    wire::ReplyEnvelope env;
    EXPECT_TRUE(wire::DecodeReply(reply, &env).ok());
    if (hits != nullptr) {
      hits->clear();
      for (const std::string& c : out.chunks) {
        wire::SearchHitsChunk chunk;
        EXPECT_TRUE(wire::Decode(c, &chunk).ok());
        for (auto& h : chunk.hits) hits->push_back(std::move(h));
      }
    }
    if (body != nullptr) body->assign(env.body);
    return env.status;
  }

  // Path -> record paths of every hit of `query` as `peer` sees them.
  std::map<std::string, std::vector<std::string>> Hits(const rpc::PeerInfo& peer,
                                                       const std::string& query = "size>=0") {
    wire::SearchQuery q;
    q.query = query;
    std::vector<wire::WireHit> hits;
    Status st = Call(peer, MsgType::kSearch, q, &hits);
    EXPECT_TRUE(st.ok()) << st.ToString();
    std::map<std::string, std::vector<std::string>> out;
    for (const auto& h : hits) out[std::to_string(h.record.id.volume) + ":" + h.path] = h.record.paths;
    return out;
  }

  Status Apply(const rpc::PeerInfo& peer, std::vector<Update> updates) {
    wire::ApplyRequest req;
    req.updates = std::move(updates);
    return Call(peer, MsgType::kApply, req);
  }

  TempDir dir_;
  std::unique_ptr<FakeMaster> master_;
  std::unique_ptr<rpc::Channel> master_channel_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<NodeService> service_;
};

// The tree of volume 1 ("/" on the host, so only the index's own directories matter):
//   /            0755 root
//   /private     0700 uid 1000, holding "secret" (also hard-linked as /pub/link) and "only"
//   /pub         0755 root, holding "file"
void LoadTree(const std::function<Status(std::vector<Update>)>& apply) {
  ASSERT_TRUE(apply({Record(1, {"/"}, S_IFDIR | 0755), Record(2, {"/private"}, S_IFDIR | 0700, 1000),
                     Record(3, {"/pub"}, S_IFDIR | 0755),
                     Record(10, {"/private/secret", "/pub/link"}, S_IFREG | 0644, 1000),
                     Record(11, {"/private/only"}, S_IFREG | 0644, 1000),
                     Record(12, {"/pub/file"}, S_IFREG | 0644)})
                  .ok());
}

TEST_F(NodeAccessTest, UsersAndUnidentifiedPeersChangeNothing) {
  master_->SetVolume(1, "/");
  LoadTree([&](std::vector<Update> u) { return Apply(kMember, std::move(u)); });
  const auto before = Hits(kMember);
  ASSERT_EQ(before.size(), 7u);  // file 10 has two names, each a hit

  Update put = Record(99, {"/pub/planted"}, S_IFREG | 0644, 1001);
  put.record.size = 123 << 20;
  Update del;
  del.op = UpdateOp::kDelete;
  del.acg = 1;
  del.record.id = FileId{1, 12};
  Update edge;
  edge.op = UpdateOp::kAddEdge;
  edge.acg = 1;
  edge.record.id = FileId{1, 12};
  edge.edge_dst = FileId{1, 11};
  edge.edge_weight = 1;
  for (const rpc::PeerInfo& peer : {Local(1001, 1001), PlainTcp()}) {
    SCOPED_TRACE(peer.transport == rpc::PeerTransport::kTcp ? "tcp" : "ipc user");
    for (const Update& u : {put, del, edge}) {
      EXPECT_EQ(Apply(peer, {u}).code(), StatusCode::kPermissionDenied)
          << static_cast<int>(u.op);
    }
    EXPECT_EQ(Call(peer, MsgType::kCreateIndex, wire::IndexDef{"project", IndexType::kHash}).code(),
              StatusCode::kPermissionDenied);
    EXPECT_EQ(Call(peer, MsgType::kDropIndex, wire::IndexName{"project"}).code(),
              StatusCode::kPermissionDenied);
    EXPECT_EQ(Call(peer, MsgType::kMigrateAcg, wire::MigrateAcgRequest{1, 2}).code(),
              StatusCode::kPermissionDenied);
    wire::AdoptAcgChunk chunk;
    chunk.acg = 3;
    chunk.total_bytes = 4;
    chunk.data = "junk";
    EXPECT_EQ(Call(peer, MsgType::kAdoptAcg, chunk).code(), StatusCode::kPermissionDenied);
    EXPECT_EQ(Call(peer, MsgType::kReleaseAcg, wire::ReleaseAcgRequest{1}).code(),
              StatusCode::kPermissionDenied);
  }
  // An unidentified peer reads nothing either, whatever it claims to be.
  wire::SearchQuery q;
  q.query = "size>=0";
  q.creds = wire::WireCredentials{0, 0, {}};
  EXPECT_EQ(Call(PlainTcp(), MsgType::kSearch, q).code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(Call(PlainTcp(), MsgType::kGetRecord, wire::GetRecordRequest{1, FileId{1, 10}}).code(),
            StatusCode::kPermissionDenied);
  wire::Ping pong;
  EXPECT_TRUE(Call(PlainTcp(), MsgType::kPing, wire::Ping{"x"}).ok());

  EXPECT_EQ(Hits(kMember), before);
  EXPECT_TRUE(engine_->ListIndexes().size() == 3u);  // the built-in ones only
  std::vector<StoredEdge> edges;
  ASSERT_TRUE(engine_->ListEdges(1, &edges).ok());
  EXPECT_TRUE(edges.empty());

  // Root (or the service's own user) on the unix socket administers.
  EXPECT_TRUE(Apply(Local(0, 0), {edge}).ok());
  EXPECT_TRUE(Call(Local(0, 0), MsgType::kCreateIndex, wire::IndexDef{"project", IndexType::kHash})
                  .ok());
}

TEST_F(NodeAccessTest, UsersReadOnlyWhatTheyCouldWalkTo) {
  master_->SetVolume(1, "/");
  LoadTree([&](std::vector<Update> u) { return Apply(kMember, std::move(u)); });
  Update edge;
  edge.op = UpdateOp::kAddEdge;
  edge.acg = 1;
  edge.edge_weight = 1;
  edge.record.id = FileId{1, 11};  // private -> public
  edge.edge_dst = FileId{1, 12};
  Update edge2 = edge;
  edge2.record.id = FileId{1, 10};  // hard-linked into /pub -> public
  ASSERT_TRUE(Apply(kMember, {edge, edge2}).ok());

  // uid 1001: /private is closed; /pub/link is the same file as /private/secret. Whether the
  // file shows up under its public link depends on the path a search matched it by (one per
  // record today); either way no private path is shown, not even among the record's paths.
  auto other = Hits(Local(1001, 1001));
  if (other.count("1:/pub/link")) {
    EXPECT_EQ(other["1:/pub/link"], std::vector<std::string>{"/pub/link"});
    other.erase("1:/pub/link");
  }
  const std::map<std::string, std::vector<std::string>> want = {
      {"1:/", {"/"}}, {"1:/private", {"/private"}}, {"1:/pub", {"/pub"}},
      {"1:/pub/file", {"/pub/file"}}};
  EXPECT_EQ(other, want);
  for (const auto& [path, paths] : Hits(Local(1001, 1001), "name=link")) {
    EXPECT_EQ(paths, std::vector<std::string>{"/pub/link"}) << path;
  }
  // The owner sees everything, both links of the file.
  const auto owner = Hits(Local(1000, 1000));
  ASSERT_TRUE(owner.count("1:/private/secret"));
  EXPECT_EQ(owner.at("1:/private/secret"),
            (std::vector<std::string>{"/private/secret", "/pub/link"}));
  // A claimed identity changes nothing on the unix socket.
  wire::SearchQuery q;
  q.query = "name=only";
  q.creds = wire::WireCredentials{1000, 1000, {}};
  std::vector<wire::WireHit> hits;
  std::string done_bytes;
  ASSERT_TRUE(Call(Local(1001, 1001), MsgType::kSearch, q, &hits, &done_bytes).ok());
  EXPECT_TRUE(hits.empty());
  // Not even the statistics tell that such a file exists.
  wire::SearchDone done;
  ASSERT_TRUE(wire::Decode(done_bytes, &done).ok());
  EXPECT_EQ(done.candidates, 0u);
  EXPECT_EQ(done.acgs_skipped, 0u);
  q.creds.reset();
  ASSERT_TRUE(Call(kMember, MsgType::kSearch, q, &hits, &done_bytes).ok());
  ASSERT_TRUE(wire::Decode(done_bytes, &done).ok());
  EXPECT_EQ(done.candidates, 1u);
  EXPECT_EQ(hits.size(), 1u);

  // Records: the private-only file is absent; the linked one shows only its public path.
  std::string body;
  EXPECT_EQ(Call(Local(1001, 1001), MsgType::kGetRecord, wire::GetRecordRequest{1, FileId{1, 11}})
                .code(),
            StatusCode::kNotFound);
  ASSERT_TRUE(Call(Local(1001, 1001), MsgType::kGetRecord, wire::GetRecordRequest{1, FileId{1, 10}},
                   nullptr, &body)
                  .ok());
  wire::RecordReply rec;
  ASSERT_TRUE(wire::Decode(body, &rec).ok());
  EXPECT_EQ(rec.record.paths, std::vector<std::string>{"/pub/link"});

  // Edges: only between files the user sees.
  auto edges_of = [&](const rpc::PeerInfo& peer) {
    std::string b;
    EXPECT_TRUE(Call(peer, MsgType::kListEdges, wire::ListEdgesRequest{}, nullptr, &b).ok());
    wire::EdgesReply r;
    EXPECT_TRUE(wire::Decode(b, &r).ok());
    std::set<uint64_t> sources;
    for (const auto& e : r.edges) sources.insert(e.src.ino);
    return sources;
  };
  EXPECT_EQ(edges_of(kMember), (std::set<uint64_t>{10, 11}));
  EXPECT_EQ(edges_of(Local(1001, 1001)), (std::set<uint64_t>{10}));

  // A volume whose root lies below a directory the user may not enter: nothing of it.
  TempDir hidden;
  ASSERT_EQ(::chmod(hidden.path().c_str(), 0700), 0);
  const std::string root = hidden.path() + "/vol";
  ASSERT_EQ(::mkdir(root.c_str(), 0755), 0);
  master_->SetVolume(2, root);
  ASSERT_TRUE(Apply(kMember, {Record(1, {"/"}, S_IFDIR | 0755, 0, 2),
                              Record(5, {"/open"}, S_IFREG | 0644, 0, 2)})
                  .ok());
  EXPECT_TRUE(Hits(Local(1001, 1001), "name=open").empty());
  EXPECT_EQ(Hits(Local(0, 0), "name=open").size(), 1u);
  ASSERT_EQ(::chmod(hidden.path().c_str(), 0755), 0);
  EXPECT_EQ(Hits(Local(1001, 1001), "name=open").size(), 1u);
}

// A user may set an attribute only where the kernel would let them set the file's user.*
// xattr: their own file, or one they may write; never a file of another user's they may only
// read, and never through a claim in the request.
TEST_F(NodeAccessTest, UserAttributesAreCheckedAgainstTheFile) {
  TempDir files;
  ASSERT_EQ(::chmod(files.path().c_str(), 0755), 0);
  master_->SetVolume(1, files.path());
  struct File {
    std::string name;
    uid_t uid;
    mode_t mode;
    bool allowed;  // for uid 1001
  };
  const File cases[] = {{"mine", 1001, 0644, true},
                        {"roots", 0, 0644, false},
                        {"shared", 0, 0666, true},
                        {"readonly-mine", 1001, 0444, false}};
  std::vector<Update> records = {Record(1, {"/"}, S_IFDIR | 0755)};
  std::map<std::string, uint64_t> ino;
  for (const File& f : cases) {
    const std::string path = files.path() + "/" + f.name;
    std::ofstream(path) << "x";
    ASSERT_EQ(::chown(path.c_str(), f.uid, f.uid), 0);
    ASSERT_EQ(::chmod(path.c_str(), f.mode), 0);
    struct stat st;
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    ino[f.name] = st.st_ino;
    records.push_back(Record(st.st_ino, {"/" + f.name}, S_IFREG | f.mode, f.uid));
  }
  ASSERT_TRUE(Apply(kMember, records).ok());
  for (const File& f : cases) {
    SCOPED_TRACE(f.name);
    Update set;
    set.op = UpdateOp::kSetAttrs;
    set.acg = 1;
    set.record.id = FileId{1, ino[f.name]};
    set.record.attrs["project"] = std::string("alpha");
    Status st = Apply(Local(1001, 1001), {set});
    if (f.allowed) {
      EXPECT_TRUE(st.ok()) << st.ToString();
    } else {
      EXPECT_EQ(st.code(), StatusCode::kPermissionDenied) << st.ToString();
      EXPECT_EQ(st.message().find(files.path()), std::string::npos) << "names a path";
    }
    set.op = UpdateOp::kRemoveAttrs;
    EXPECT_EQ(Apply(Local(1001, 1001), {set}).ok(), f.allowed);
    set.op = UpdateOp::kSetAttrs;
    EXPECT_EQ(Apply(Local(1001, 1001), {set}).ok(), f.allowed);
  }
  // Exactly the allowed files carry the attribute.
  std::set<std::string> tagged;
  for (const auto& [path, paths] : Hits(kMember, "project=alpha")) tagged.insert(path);
  EXPECT_EQ(tagged, (std::set<std::string>{"1:/mine", "1:/shared"}));
  // A file replaced under the same name (another inode) is not the indexed one.
  const std::string mine = files.path() + "/mine";
  ASSERT_EQ(::unlink(mine.c_str()), 0);
  std::ofstream(mine) << "new";
  ASSERT_EQ(::chown(mine.c_str(), 1001, 1001), 0);
  Update set;
  set.op = UpdateOp::kSetAttrs;
  set.acg = 1;
  set.record.id = FileId{1, ino["mine"]};
  set.record.attrs["project"] = std::string("beta");
  struct stat now;
  ASSERT_EQ(::stat(mine.c_str(), &now), 0);
  if (now.st_ino != ino["mine"]) {
    EXPECT_EQ(Apply(Local(1001, 1001), {set}).code(), StatusCode::kPermissionDenied);
  }
}

// Without the master a node cannot tell which volumes a user may reach: a user's search then
// fails clearly instead of answering with less than they may see.
TEST_F(NodeAccessTest, UnknownVolumeRootsFailAUsersSearch) {
  LoadTree([&](std::vector<Update> u) { return Apply(kMember, std::move(u)); });
  auto nowhere = rpc::Channel::Connect({.endpoint = "ipc://" + dir_.path() + "/no-master.sock"});
  ASSERT_TRUE(nowhere.ok());
  NodeServiceOptions so;
  so.engine = engine_.get();
  so.master = nowhere->get();
  so.node_id = 1;
  so.master_timeout_ms = 200;
  service_ = std::make_unique<NodeService>(so);
  wire::SearchQuery q;
  q.query = "name=file";
  const Status st = Call(Local(1001, 1001), MsgType::kSearch, q);
  EXPECT_TRUE(st.code() == StatusCode::kUnavailable || st.code() == StatusCode::kTimeout)
      << st.ToString();
  EXPECT_TRUE(Call(Local(0, 0), MsgType::kSearch, q).ok());  // root needs no volume check
}

}  // namespace
}  // namespace propeller
