// Seed inputs of the fuzz targets (fuzz_targets.h): one valid encoding of every message with
// non-trivial values, in the layout each target expects.
#include <cstdint>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "schemas/fuzz/fuzz_targets.h"
#include "schemas/fuzz/fuzz_util.h"
#include "schemas/keys.h"
#include "schemas/messages.h"
#include "schemas/watch_messages.h"
#include "schemas/record_format.h"
#include "schemas/wal_format.h"

namespace propeller::fuzz {
namespace {

using namespace wire;  // NOLINT: a list of message literals

FileRecord SampleRecord() {
  FileRecord r;
  r.id = {7, 0x1234};
  r.paths = {"/a", "/src/b.c"};
  r.parent_ino = 1;
  r.type = FileType::kRegular;
  r.size = 300;
  r.mtime = 1700000000123456789;
  r.ctime = -5;
  r.uid = 1000;
  r.gid = 100;
  r.mode = 0100644;
  r.attrs = {{"i", int64_t{-200}}, {"n", 2.0}, {"s", std::string("x")}};
  return r;
}

std::vector<Update> SampleUpdates() {
  Update put;
  put.acg = 9;
  put.record = SampleRecord();
  Update del;
  del.op = UpdateOp::kDelete;
  del.acg = 9;
  del.record.id = {7, 5};
  Update edge;
  edge.op = UpdateOp::kAddEdge;
  edge.acg = 9;
  edge.record.id = {7, 5};
  edge.edge_dst = {7, 6};
  edge.edge_weight = 3;
  return {put, del, edge};
}

NodeInfo SampleNode() {
  return NodeInfo{2, "tcp://127.0.0.1:7471", true, 4, 1000, uint64_t{1} << 40, 0.75,
                  1700000000000000000};
}

template <typename T>
std::string Body(const T& msg) {
  std::string out;
  Encode(msg, &out);
  return out;
}

// The request body of each kRequestTypes entry, in that order.
std::vector<std::string> RequestBodies() {
  SearchQuery query;
  query.query = "size>1 and name=*.c";
  query.scope = "/src";
  query.volume = 3;
  query.creds = WireCredentials{1000, 100, {4, 27}};
  query.limit = 50;
  query.sort_by = "mtime";
  query.descending = true;
  query.now_ns = 1700000000000000000;
  return {
      Body(RegisterNodeRequest{0, "tcp://127.0.0.1:7471"}),
      Body(HeartbeatRequest{3, {{1, 10}, {2, 300}}, uint64_t{1} << 40, 0.5, 7, {"tag"}}),
      Body(FilesRequest{{{1, 2}, {1, 0x123456789}}}),
      Body(AssignFilesRequest{{{{1, 2}, "cc", {{1, 3}, {1, 4}}}, {{1, 5}, "", {}}}}),
      Body(FilesRequest{{{1, 2}}}),
      Body(LocateAcgsRequest{{1, 2, 1u << 20}}),
      Body(Empty{}),
      Body(IndexDef{"tag", IndexType::kHash}),
      Body(IndexName{"tag"}),
      Body(Empty{}),
      Body(Empty{}),
      Body(RegisterVolumeRequest{"/home"}),
      Body(Empty{}),
      Body(IndexName{"size"}),
      Body(ApplyRequest{SampleUpdates()}),
      Body(query),
      Body(GetRecordRequest{9, {7, 0x1234}}),
      Body(Empty{}),
      Body(Ping{"hello"}),
      Body(ListEdgesRequest{5}),
      Body(NewAcgRequest{2, 7}),
      Body(SplitDoneRequest{2, 7, 9, {{1, 10}, {1, 0x123456789}}}),
  };
}

// The reply body of each kReplyTypeNames entry, in that order.
std::vector<std::string> ReplyBodies() {
  ClusterStatusReply status;
  status.nodes = {SampleNode(), NodeInfo{3, "tcp://h:1", false, 0, 0, 0, 0, 0}};
  status.acgs = 4;
  status.files = 1000;
  status.indexes = {{"tag", IndexType::kHash}, {"score", IndexType::kKdTree}};
  status.volumes = {{1, "/home"}, {2, "/data"}};
  return {
      Body(Empty{}),
      Body(RegisterNodeReply{2, 1000}),
      Body(HeartbeatReply{false, {{"tag", IndexType::kBTree}}}),
      Body(NodesReply{{SampleNode()}}),
      Body(LocationsReply{{{{1, 0x1234}, 5, 2, "tcp://h:1"}, {{1, 7}, 0, 0, ""}}}),
      Body(AcgLocationsReply{{{1, 2, "tcp://h:1"}, {9, 0, ""}}}),
      Body(IndexesReply{{{"tag", IndexType::kBTree}, {"where", IndexType::kKdTree}}}),
      Body(VolumeInfo{1, "/home"}),
      Body(VolumesReply{{{1, "/home"}, {2, "/data"}}}),
      Body(status),
      Body(SearchHitsChunk{{{"/a", SampleRecord(), 9}, {"/src/b.c", SampleRecord(), 9}}}),
      Body(SearchDone{10, 3, 500, 2}),
      Body(RecordReply{SampleRecord()}),
      Body(NodeStatusReply{2, 4, 1000, 7, 1 << 20, 1 << 30, 1 << 24, {{1, 10}, {2, 300}}}),
      Body(Ping{"hello"}),
      Body(EdgesReply{{{5, {1, 10}, {1, 11}, 3}, {5, {1, 12}, {1, 11}, 1}}, false}),
      Body(NewAcgReply{9}),
      Body(SplitDoneReply{2}),
      Body(MountStatusReply{12, 1'700'000'000'000'000'000, "no connection to ipc:///x", 5, 12,
                            0, 0, 0, 0}),
      Body(WatchEventsChunk{{{WatchKind::kAdded, "/a", SampleRecord(), 9},
                             {WatchKind::kRemoved, "/src/b.c", SampleRecord(), 9}}}),
  };
}

std::vector<std::string> WithSelectors(const std::vector<std::string>& bodies) {
  std::vector<std::string> out;
  for (size_t i = 0; i < bodies.size(); ++i) out.push_back(std::string(1, char(i)) + bodies[i]);
  return out;
}

}  // namespace

const char* TargetName(Target target) {
  switch (target) {
    case Target::kRequest: return "request";
    case Target::kReply: return "reply";
    case Target::kRecord: return "record";
    case Target::kStorage: return "storage";
  }
  return "unknown";
}

std::vector<std::string> Seeds(Target target) {
  std::vector<std::string> seeds;
  switch (target) {
    case Target::kRequest: {
      const std::vector<std::string> bodies = RequestBodies();
      seeds = WithSelectors(bodies);
      for (size_t i = 0; i < bodies.size(); ++i) {
        seeds.push_back(EncodeRequest(kRequestTypes[i], std::string_view(bodies[i])));
      }
      break;
    }
    case Target::kReply: {
      const std::vector<std::string> bodies = ReplyBodies();
      seeds = WithSelectors(bodies);
      for (const std::string& body : bodies) seeds.push_back(EncodeReply(Status::OK(), body));
      seeds.push_back(EncodeReply(Status::NotFound("no such acg"), ""));
      seeds.push_back(
          EncodeReply(Status::Redirect("moved"), "", {{9, 2, "tcp://h:1"}, {10, 0, ""}}));
      break;
    }
    case Target::kRecord: {
      std::string record;
      EncodeRecord(SampleRecord(), &record);
      seeds.push_back(record);
      record.clear();
      EncodeRecord(FileRecord{}, &record);
      seeds.push_back(record);
      std::string batch;
      const std::vector<Update> updates = SampleUpdates();
      EncodeUpdateBatch(updates, &batch);
      seeds.push_back(batch);
      break;
    }
    case Target::kStorage: {
      auto add = [&seeds](int decoder, const std::string& bytes) {
        seeds.push_back(std::string(1, char(decoder)) + bytes);
      };
      std::string key;
      AppendFileIdKey({7, 0x1234}, &key);
      add(0, key);
      key.clear();
      AppendEdgeKey({7, 5}, {7, 6}, &key);
      add(1, key);
      add(2, IndexEntryKey(int64_t{-3}, {7, 5}));
      add(2, IndexEntryKey(std::string("a\0b", 3), {7, 5}));
      add(2, IndexEntryKey(std::string(500, 'x'), {7, 5}));  // truncated string value
      std::string wal;
      AppendWalHeader(&wal);
      add(3, wal);
      std::string batch;
      const std::vector<Update> updates = SampleUpdates();
      EncodeUpdateBatch(updates, &batch);
      std::string record;
      AppendWalRecord(42, batch, &record);
      add(4, record);
      add(5, WalSegmentName(42));
      std::string ordered;
      AppendOrderedDouble(-2.5, &ordered);
      add(6, ordered);
      ordered.clear();
      AppendOrderedI64(std::numeric_limits<int64_t>::min(), &ordered);
      add(6, ordered);
      break;
    }
  }
  return seeds;
}

}  // namespace propeller::fuzz
