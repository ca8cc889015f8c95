// security_probe: what an attacker on the host sends to a Propeller endpoint directly, without
// the CLI or the library (tests/security_test.cc runs it as an unprivileged user).
//
//   security_probe ENDPOINT [--acg N] [--file VOLUME:INO]... [--volume N] [--root ROOT]
//                           [--other-uid U] [--curve KEYPAIR --server-key PUBLIC]
//                           [--timeout-ms N] [--only ATTEMPT]
//
// Every request type of the protocol is tried once, the reads with forged credentials (none,
// uid 0, another user's), the writes with plausible bodies aimed at real ACGs and files:
// remove-volume names the first --file's volume with ROOT, its root, as the CLI's `volume
// remove` would (the master removes nothing for a wrong pair, so a wrong body proves nothing).
// --only runs that one attempt (the test's control that root's same request goes through). One
// line per attempt:
//   <attempt> <status code> [<path>|<path>...]...
// where the status code is the number of common/status.h (0 = OK) and the paths are what a
// read returned: search hits (each hit's path, then its record's paths), records, volume roots.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/rpc/rpc.h"
#include "schemas/messages.h"
#include "schemas/wire_call.h"

namespace propeller {
namespace {

using wire::MsgType;

struct Probe {
  std::unique_ptr<rpc::Channel> channel;
  rpc::CallOptions call;
  std::string only;  // when set, every other attempt is skipped

  // Sends one request; prints "<name> <code>" and returns the reply body (empty on error).
  template <typename Req, typename Rep>
  bool Try(const char* name, MsgType type, const Req& req, Rep* rep, std::string* extra,
           const std::function<bool(std::string_view)>& on_chunk = nullptr) {
    if (!only.empty() && only != name) return false;
    Status st = wire::WireCall(*channel, type, req, rep, call, nullptr, on_chunk);
    std::printf("%s %d%s\n", name, static_cast<int>(st.code()), extra->c_str());
    std::fflush(stdout);
    return st.ok();
  }
};

std::string Paths(const FileRecord& r) {
  std::string out;
  for (const std::string& p : r.paths) out += (out.empty() ? "" : "|") + p;
  return out;
}

int Main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: security_probe ENDPOINT [options]\n");
    return 2;
  }
  rpc::ChannelOptions co;
  co.endpoint = argv[1];
  uint64_t acg = 1;
  uint32_t volume = 1;
  uint32_t other_uid = 0;
  std::string root = "/";
  std::vector<FileId> files;
  Probe probe;
  probe.call.timeout_ms = 1500;
  probe.call.retries = 0;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--acg") {
      acg = std::strtoull(value.c_str(), nullptr, 10);
    } else if (flag == "--volume") {
      volume = static_cast<uint32_t>(std::strtoul(value.c_str(), nullptr, 10));
    } else if (flag == "--root") {
      root = value;
    } else if (flag == "--only") {
      probe.only = value;
    } else if (flag == "--other-uid") {
      other_uid = static_cast<uint32_t>(std::strtoul(value.c_str(), nullptr, 10));
    } else if (flag == "--file") {
      const size_t colon = value.find(':');
      files.push_back(FileId{static_cast<uint32_t>(std::strtoul(value.c_str(), nullptr, 10)),
                             std::strtoull(value.c_str() + colon + 1, nullptr, 10)});
    } else if (flag == "--timeout-ms") {
      probe.call.timeout_ms = std::strtoll(value.c_str(), nullptr, 10);
    } else if (flag == "--curve") {
      auto keys = rpc::ReadKeyFile(value);
      if (!keys.ok()) {
        std::fprintf(stderr, "%s\n", keys.status().ToString().c_str());
        return 1;
      }
      co.curve = *keys;
    } else if (flag == "--server-key") {
      auto keys = rpc::ReadKeyFile(value);
      if (!keys.ok()) return 1;
      co.server_public_key = keys->public_key;
    }
  }
  auto ch = rpc::Channel::Connect(co);
  if (!ch.ok()) {
    std::fprintf(stderr, "%s\n", ch.status().ToString().c_str());
    return 1;
  }
  probe.channel = std::move(ch).value();
  const FileId file = files.empty() ? FileId{volume, 1} : files.front();

  // ---- reads, with forged credentials ----
  struct Claim {
    const char* name;
    std::optional<wire::WireCredentials> creds;
  };
  const wire::WireCredentials as_root{0, 0, {0}}, as_other{other_uid, other_uid, {}};
  for (const Claim& c : {Claim{"search-no-creds", std::nullopt}, Claim{"search-as-root", as_root},
                         Claim{"search-as-other", as_other}}) {
    wire::SearchQuery q;
    q.query = "size>=0";
    q.creds = c.creds;
    std::string none, hits;
    wire::SearchDone done;
    probe.Try(c.name, MsgType::kSearch, q, &done, &none, [&](std::string_view bytes) {
      wire::SearchHitsChunk chunk;
      if (!wire::Decode(bytes, &chunk).ok()) return false;
      for (const auto& h : chunk.hits) hits += " " + h.path + "|" + Paths(h.record);
      return true;
    });
    if (!hits.empty()) std::printf("%s-hits%s\n", c.name, hits.c_str());
  }
  for (const FileId& f : files) {
    wire::RecordReply rec;
    std::string extra;
    if (probe.Try("get-record", MsgType::kGetRecord, wire::GetRecordRequest{acg, f}, &rec,
                  &extra)) {
      std::printf("get-record-paths %s\n", Paths(rec.record).c_str());
    }
  }
  {
    wire::EdgesReply edges;
    std::string extra;
    if (probe.Try("list-edges", MsgType::kListEdges, wire::ListEdgesRequest{}, &edges, &extra)) {
      std::printf("list-edges-count %zu\n", edges.edges.size());
    }
    wire::VolumesReply volumes;
    if (probe.Try("list-volumes", MsgType::kListVolumes, wire::Empty{}, &volumes, &extra)) {
      std::string roots;
      for (const auto& v : volumes.volumes) roots += " " + v.root;
      std::printf("list-volumes-roots%s\n", roots.c_str());
    }
    wire::ClusterStatusReply status;
    if (probe.Try("cluster-status", MsgType::kClusterStatus, wire::Empty{}, &status, &extra)) {
      std::string roots;
      for (const auto& v : status.volumes) roots += " " + v.root;
      std::printf("cluster-status-roots%s\n", roots.c_str());
    }
  }

  // ---- writes: each must be refused ----
  std::string none;
  wire::Empty empty;
  auto apply = [&](const char* name, Update u) {
    u.acg = acg;
    wire::ApplyRequest req;
    req.updates = {u};
    probe.Try(name, MsgType::kApply, req, &empty, &none);
  };
  Update put;
  put.record.id = FileId{volume, 999'999};
  put.record.paths = {"/planted-by-probe"};
  put.record.size = 123ull << 20;
  put.record.mode = 0100644;
  apply("apply-put", put);
  Update del;
  del.op = UpdateOp::kDelete;
  del.record.id = file;
  apply("apply-delete", del);
  Update edge;
  edge.op = UpdateOp::kAddEdge;
  edge.record.id = file;
  edge.edge_dst = FileId{file.volume, file.ino + 1};
  edge.edge_weight = 1;
  apply("apply-edge", edge);
  Update attr;
  attr.op = UpdateOp::kSetAttrs;
  attr.record.id = file;
  attr.record.attrs["planted"] = int64_t{1};
  apply("apply-setattr", attr);
  attr.op = UpdateOp::kRemoveAttrs;
  apply("apply-rmattr", attr);
  probe.Try("create-index", MsgType::kCreateIndex, wire::IndexDef{"planted", IndexType::kHash},
            &empty, &none);
  probe.Try("drop-index", MsgType::kDropIndex, wire::IndexName{"planted"}, &empty, &none);
  wire::VolumeInfo vol;
  probe.Try("register-volume", MsgType::kRegisterVolume, wire::RegisterVolumeRequest{"/probe"},
            &vol, &none);
  probe.Try("remove-volume", MsgType::kRemoveVolume, wire::VolumeInfo{file.volume, root}, &empty,
            &none);
  wire::LocationsReply locs;
  wire::AssignFilesRequest assign;
  assign.items.push_back({FileId{volume, 999'998}, "probe", {}, true});
  probe.Try("assign-files", MsgType::kAssignFiles, assign, &locs, &none);
  probe.Try("forget-files", MsgType::kForgetFiles, wire::FilesRequest{{file}, {}}, &empty, &none);
  wire::RegisterNodeReply reg;
  probe.Try("register-node", MsgType::kRegisterNode,
            wire::RegisterNodeRequest{0, "ipc:///tmp/probe.sock"}, &reg, &none);
  wire::HeartbeatRequest hb;
  hb.node_id = 1;
  wire::HeartbeatReply hbr;
  probe.Try("heartbeat", MsgType::kHeartbeat, hb, &hbr, &none);
  wire::NewAcgReply nar;
  probe.Try("new-acg", MsgType::kNewAcg, wire::NewAcgRequest{1, acg}, &nar, &none);
  wire::SplitDoneReply sdr;
  wire::SplitDoneRequest sd;
  sd.node_id = 1;
  sd.source = acg;
  sd.target = acg + 1000;
  sd.files = {file};
  probe.Try("split-done", MsgType::kSplitDone, sd, &sdr, &none);
  probe.Try("move-acg", MsgType::kMoveAcg, wire::MoveAcgRequest{acg, 1, 2}, &empty, &none);
  wire::MigrateAcgReply mig;
  probe.Try("migrate-acg", MsgType::kMigrateAcg, wire::MigrateAcgRequest{acg, 2}, &mig, &none);
  wire::AdoptAcgChunk chunk;
  chunk.acg = acg + 2000;
  chunk.from_node = 2;
  chunk.total_bytes = 5;
  chunk.data = "probe";
  probe.Try("adopt-acg", MsgType::kAdoptAcg, chunk, &empty, &none);
  probe.Try("release-acg", MsgType::kReleaseAcg, wire::ReleaseAcgRequest{acg}, &empty, &none);
  return 0;
}

}  // namespace
}  // namespace propeller

int main(int argc, char** argv) { return propeller::Main(argc, argv); }
