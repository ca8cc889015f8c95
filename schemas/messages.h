// The wire protocol between Propeller processes (docs/architecture.md §2, §7, §9): every message a
// client, the master and an index node exchange, as plain structs, with their msgpack encodings.
// Transport framing (request ids, streamed replies) is common/rpc's; this file gives the bytes
// inside a frame. Field tables, one per message, are in messages.cc next to the code; golden
// bytes are pinned in messages_test.cc.
//
// Envelopes. Every request frame body is
//   [protocol version: uint, message type: uint (MsgType), body: bin]
// and every final reply frame body is
//   [protocol version: uint, status code: int (StatusCode), message: str,
//    redirects: array of AcgLocation, body: bin]
// where `body` is the encoding of the message struct named below (an empty bin when the status
// is not OK). Partial frames of a streamed reply (Search) carry a SearchHitsChunk encoding
// directly, without an envelope. Each body is a msgpack array of its fields in the order
// declared below (array form, docs/pitfalls.md MP-2: ~5x faster than maps on hot paths).
//
// Compatibility rule: fields are only ever appended at the end of a body; a decoder ignores
// trailing fields it does not know and fills fields missing at the end with their defaults.
// A peer with a different protocol *major* version (kProtocolVersion / 1000) gets
// NotSupported("protocol version N, expected M") and nothing else. Message types are never
// reused; an unknown type gets NotSupported.
//
// Decoders take untrusted bytes: they never throw, never crash, and never allocate more than a
// small multiple of the input size (unpack limits: at most kMaxWireArray elements per array,
// strings bounded by the frame); garbage gives Corruption naming what was wrong. Encoders never
// fail. Every function is thread-safe.
#ifndef PROPELLER_SCHEMAS_MESSAGES_H_
#define PROPELLER_SCHEMAS_MESSAGES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "common/record.h"
#include "common/status.h"

namespace propeller::wire {

inline constexpr uint32_t kProtocolVersion = 1000;  // major 1, minor 0
inline constexpr size_t kMaxWireArray = 1u << 20;   // elements per array in one message

// Stable numbers; never reused. Master: 1-31, index node: 32-63, any daemon: 64+.
enum class MsgType : uint16_t {
  kRegisterNode = 1,    // RegisterNodeRequest -> RegisterNodeReply
  kHeartbeat = 2,       // HeartbeatRequest -> HeartbeatReply
  kLookupFiles = 3,     // FilesRequest -> LocationsReply (acg 0 = not mapped)
  kAssignFiles = 4,     // AssignFilesRequest -> LocationsReply
  kForgetFiles = 5,     // FilesRequest -> Empty
  kLocateAcgs = 6,      // LocateAcgsRequest -> AcgLocationsReply
  kListNodes = 7,       // Empty -> NodesReply
  kCreateIndex = 8,     // IndexDef -> Empty            (master and index nodes)
  kDropIndex = 9,       // IndexName -> Empty           (master and index nodes)
  kListIndexes = 10,    // Empty -> IndexesReply         (master and index nodes)
  kClusterStatus = 11,  // Empty -> ClusterStatusReply
  kRegisterVolume = 12, // RegisterVolumeRequest -> VolumeInfo
  kListVolumes = 13,    // Empty -> VolumesReply
  kIndexHolders = 14,   // IndexName -> NodesReply (up nodes holding that index)
  kNewAcg = 15,         // NewAcgRequest -> NewAcgReply (index node, before splitting an ACG)
  kSplitDone = 16,      // SplitDoneRequest -> SplitDoneReply (index node, after a split)
  kMoveAcg = 17,        // MoveAcgRequest -> Empty (index node that adopted a moved ACG)

  kApply = 32,          // ApplyRequest -> Empty, or Redirect with the ACGs' owners
  kSearch = 33,         // SearchQuery -> SearchHitsChunk* (partial frames), SearchDone (final)
  kGetRecord = 34,      // GetRecordRequest -> RecordReply
  kNodeStatus = 35,     // Empty -> NodeStatusReply
  kListEdges = 36,      // ListEdgesRequest -> EdgesReply
  kMigrateAcg = 37,     // MigrateAcgRequest -> MigrateAcgReply (to the ACG's owner)
  kAdoptAcg = 38,       // AdoptAcgChunk -> Empty (owner to destination, during a migration)
  kReleaseAcg = 39,     // ReleaseAcgRequest -> Empty (owner to destination, after its drop)
  kWatch = 40,          // WatchRequest -> WatchEventsChunk* (partial frames), Empty (final);
                        // also served by a mount's query engine (watch_messages.h)

  kMountStatus = 48,    // Empty -> MountStatusReply (a mount's query engine)
  kRemoveVolume = 49,   // VolumeInfo (id and root) -> Empty: forget the volume and its files

  kPing = 64,           // Ping -> Ping (echo)
};
// "register-node", "apply", ...; "unknown" for numbers not listed.
const char* MsgTypeName(MsgType type);

struct Empty {};

// ---- membership -------------------------------------------------------------------------

struct RegisterNodeRequest {
  uint32_t node_id = 0;   // 0 = a new node; else the id this node had before (restart)
  std::string endpoint;   // where clients reach the node
};
struct RegisterNodeReply {
  uint32_t node_id = 0;
  uint32_t heartbeat_interval_ms = 1000;
};

struct AcgLoad {
  uint64_t acg = 0;
  uint64_t files = 0;
};
struct HeartbeatRequest {
  uint32_t node_id = 0;
  std::vector<AcgLoad> acgs;
  uint64_t free_disk_bytes = 0;
  double load = 0;           // 1-minute load average of the host
  uint64_t cached_updates = 0;
  std::vector<std::string> indexes;  // user-defined indexes this node has built
};
struct IndexDef {
  std::string name;
  IndexType type = IndexType::kBTree;
};
// The most files an index node merges in one go (the merge pauses searches for the copy);
// the master proposes no larger merge.
inline constexpr uint64_t kMaxMergeFiles = 20'000;
struct AcgMerge {
  uint64_t source = 0;  // small ACG to fold into `target` (same node, same app)
  uint64_t target = 0;
};
struct AcgLocation {
  uint64_t acg = 0;
  uint32_t node_id = 0;   // 0 = unknown ACG
  std::string endpoint;
};
struct HeartbeatReply {
  bool reregister = false;        // the master does not know this node id: register again
  std::vector<IndexDef> indexes;  // the user-index catalogue, for the node to reconcile
  std::vector<AcgMerge> merges;   // since 1.2: small ACGs this node should merge
  // Since 1.3: ACGs the node reported that the master maps to another node (node_id): copies
  // left behind by a migration a crash interrupted. The node drops them once it confirmed.
  std::vector<AcgLocation> not_yours;
  // Since 1.4: ACGs of this node's that the master wants on another node (node_id,
  // endpoint): a split half to a lighter node, a small ACG to the node of the small ACG of
  // its app it is to merge with. The node moves one at a time (kMigrateAcg's steps).
  std::vector<AcgLocation> moves;
};

struct NodeInfo {
  uint32_t node_id = 0;
  std::string endpoint;
  bool up = false;
  uint64_t acgs = 0;
  uint64_t files = 0;
  uint64_t free_disk_bytes = 0;
  double load = 0;
  int64_t last_heartbeat_ns = 0;  // wall clock of the master; 0 = never
};
struct NodesReply {
  std::vector<NodeInfo> nodes;
};

// ---- routing and placement (docs/architecture.md §5, §7) -----------------------------------

struct FilesRequest {
  std::vector<FileId> files;
  // kForgetFiles only (since 1.1): empty, or one per file — the generation of the mapping the
  // sender saw (FileLocation::generation); the master then forgets a file only while its
  // mapping still has that generation, so a forget that arrives after the inode number was
  // reused and placed afresh leaves the new mapping alone. Empty = forget unconditionally.
  std::vector<uint64_t> generations;
};
struct AssignItem {
  FileId file;
  std::string app;               // executable name of the creating process ("" = unknown)
  std::vector<FileId> producers; // files the process read before, heaviest edge first
  // Since 1.1: the file was just created (its inode number is new), so any mapping the master
  // still has for it belongs to a deleted file whose forget is pending or was lost: place it
  // afresh and give the mapping a new generation.
  bool fresh = false;
};
struct AssignFilesRequest {
  std::vector<AssignItem> items;
};
struct FileLocation {
  FileId file;
  uint64_t acg = 0;       // 0 = not mapped (lookup only)
  uint32_t node_id = 0;
  std::string endpoint;   // of node_id; "" when the node is unknown
  // Since 1.1: identifies this mapping of the file (a new one each time the file is placed
  // afresh); 0 = not mapped, or a master that does not track generations.
  uint64_t generation = 0;
};
struct LocationsReply {
  std::vector<FileLocation> locations;  // one per requested file, in request order
};
struct LocateAcgsRequest {
  std::vector<uint64_t> acgs;
};
struct AcgLocationsReply {
  std::vector<AcgLocation> locations;  // in request order
};

// ---- splits (docs/architecture.md §5; since 1.2) ------------------------------------------
// An index node splitting ACG `source` first asks for the id of the ACG that takes half of it
// (created on the asking node, tagged with the source's app), splits locally, then reports
// which files moved; the master remaps those still mapped to `source` (keeping each mapping's
// generation). The report is idempotent, so a node re-sends it until acknowledged.

struct NewAcgRequest {
  uint32_t node_id = 0;  // the asking node; must own `source`
  uint64_t source = 0;   // the ACG being split
};
struct NewAcgReply {
  uint64_t acg = 0;
};
struct SplitDoneRequest {
  uint32_t node_id = 0;  // must own both ACGs
  uint64_t source = 0;
  uint64_t target = 0;
  std::vector<FileId> files;  // moved from source to target (a part of them per request)
  // The source was merged into the target as a whole (Engine::MergeAcg): it is retired and
  // the app's placement moves to the target.
  bool merged = false;
};
struct SplitDoneReply {
  uint64_t remapped = 0;  // files that were mapped to `source` and now map to `target`
};

// ---- migration between index nodes (docs/architecture.md §5; since 1.3) -------------------
// The owner of ACG `acg` moves it to node `to` (kMigrateAcg, asked by an operator or a tool):
// it freezes and copies it (Engine::FreezeAndCopyAcg) and sends the copy in kAdoptAcg chunks;
// with the last one the destination adopts it (frozen), asks the master to flip the ACG's
// owner (kMoveAcg) and answers; the owner then drops its copy and sends kReleaseAcg, which
// lets the destination's updates go.

struct MoveAcgRequest {
  uint64_t acg = 0;
  uint32_t from_node = 0;  // must be the ACG's owner, unless it is `to_node` already
  uint32_t to_node = 0;    // the asking node
};
struct MigrateAcgRequest {
  uint64_t acg = 0;
  uint32_t to_node = 0;
};
struct MigrateAcgReply {
  uint64_t bytes = 0;  // of the compacted copy sent
  uint64_t files = 0;
  uint64_t micros = 0;  // from the freeze to the drop
};
// One part of the copy: bytes [offset, offset + data.size()) of `total_bytes`. The last part
// (offset + size == total_bytes) carries the masked CRC-32C of the whole copy.
struct AdoptAcgChunk {
  uint64_t acg = 0;
  uint32_t from_node = 0;
  uint64_t offset = 0;
  uint64_t total_bytes = 0;
  std::string data;  // bin
  uint32_t crc = 0;  // on the last part
};
struct ReleaseAcgRequest {
  uint64_t acg = 0;
};
// Bytes per AdoptAcgChunk: well under the frame limit (rpc kDefaultMaxMessageBytes).
inline constexpr size_t kAdoptChunkBytes = 8u << 20;

// ---- indexes and volumes ------------------------------------------------------------------

struct IndexName {
  std::string name;
};
struct IndexesReply {
  std::vector<IndexDef> indexes;  // user-defined indexes, by name
};

struct RegisterVolumeRequest {
  std::string root;  // absolute path of the volume's root on the client hosts
};
struct VolumeInfo {
  uint32_t volume = 0;
  std::string root;
  bool operator==(const VolumeInfo&) const = default;
};
struct VolumesReply {
  std::vector<VolumeInfo> volumes;
};

struct ClusterStatusReply {
  std::vector<NodeInfo> nodes;
  uint64_t acgs = 0;
  uint64_t files = 0;  // files mapped by the master
  std::vector<IndexDef> indexes;
  std::vector<VolumeInfo> volumes;
};

// ---- index node --------------------------------------------------------------------------

struct ApplyRequest {
  std::vector<Update> updates;  // encoded as in schemas/record_format.h's update batch
};

struct WireCredentials {
  uint32_t uid = 0;
  uint32_t gid = 0;
  std::vector<uint32_t> groups;
};
struct SearchQuery {
  std::string query;            // query text (docs/query.md)
  std::string scope = "/";
  std::optional<uint32_t> volume;
  std::optional<WireCredentials> creds;  // honoured only from trusted peers (see indexnode)
  uint64_t limit = 0;           // 0 = none
  std::string sort_by;          // "" or size, mtime, ctime, atime, uid, gid, path, name
  bool descending = false;
  int64_t now_ns = 0;           // instant for ages; 0 = the node's clock
  std::vector<uint64_t> acgs;   // since 1.3: only these ACGs; empty = every ACG of the node
  // Since 1.5: the root each volume's paths are shown under (Engine SearchRequest::
  // volume_roots): path predicates are about root + path, as results print. Empty: in-volume.
  std::vector<VolumeInfo> roots;
};
struct WireHit {
  std::string path;
  FileRecord record;
  uint64_t acg = 0;
};
struct SearchHitsChunk {
  std::vector<WireHit> hits;
};
// Encodes a SearchHitsChunk one hit at a time, straight from the engine's hit, with no WireHit
// copy of its path and record first (a few allocations per hit: 1 M files through the cluster,
// `size>16m` went from ~28 to ~26 ms). Finish gives exactly the bytes Encode(SearchHitsChunk)
// gives.
class SearchHitsChunkEncoder {
 public:
  void Add(const std::string& path, const FileRecord& record, uint64_t acg);
  size_t hits() const { return hits_; }
  size_t bytes() const { return body_.size(); }
  // Replaces *frame with the chunk of the hits added since the last Finish, and starts over.
  void Finish(std::string* frame);

 private:
  std::string body_;  // the hits, encoded
  size_t hits_ = 0;
};
struct SearchDone {
  uint64_t acgs_total = 0;
  uint64_t acgs_skipped = 0;
  uint64_t candidates = 0;
  uint64_t hits = 0;
  // Since 1.3, for searches that race a migration (Client::Search): ACGs that moved away from
  // this node lately and were not searched here (node_id = where they went), and ACGs this
  // node adopted lately that the search did include.
  std::vector<AcgLocation> moved;
  std::vector<uint64_t> adopted;
  // Since 1.4: the query's user attributes this node does not know (indexnode/attr_names.h);
  // the client refuses the query when no node knows one.
  std::vector<std::string> unknown_attrs;
};

struct GetRecordRequest {
  uint64_t acg = 0;
  FileId file;
};
struct RecordReply {
  FileRecord record;
};

struct NodeStatusReply {
  uint32_t node_id = 0;
  uint64_t acgs = 0;
  uint64_t files = 0;
  uint64_t cached_updates = 0;
  uint64_t wal_bytes = 0;
  uint64_t disk_bytes = 0;
  uint64_t index_memory_bytes = 0;
  std::vector<AcgLoad> acg_list;
  // Since 1.5: why the node's commits fail (a full disk, say), "" while they succeed, and
  // since when. Updates wait in the caches and the log meanwhile.
  std::string commit_error;
  int64_t failing_since_ns = 0;
  // Since 1.6: damaged ACGs not rebuilt yet, "ACG <id>: why" each (docs/faults.md).
  std::vector<std::string> damaged_acgs;
};

// A mount's side of the index (client/fuse/index_writer.h): the updates it could not deliver
// yet. Since 1.6.
struct MountStatusReply {
  uint64_t pending = 0;           // updates waiting in the mount's queue
  int64_t degraded_since_ns = 0;  // wall clock; 0 = the index takes updates
  std::string last_error;         // why it could not, last time
  uint64_t sent = 0;              // updates acknowledged at once
  uint64_t queued = 0;            // updates that went through the queue
  uint64_t delivered = 0;         // of those, delivered
  uint64_t refused = 0;           // updates the index refused as invalid (dropped, logged)
  uint64_t errors = 0;            // operations failed: could be neither sent nor queued
  uint64_t admit_refusals = 0;    // operations refused (ENOSPC) before they began
};

struct Ping {
  std::string payload;
};

// ---- ACG edges (index node) ---------------------------------------------------------------

struct ListEdgesRequest {
  uint64_t acg = 0;  // 0 = every ACG the node holds
};
struct WireEdge {
  uint64_t acg = 0;
  FileId src;
  FileId dst;
  uint64_t weight = 0;
  uint32_t src_generation = 0;  // the ends' inode generations when captured; 0 = unknown
  uint32_t dst_generation = 0;
};
struct EdgesReply {
  std::vector<WireEdge> edges;
  bool truncated = false;  // more edges than one reply carries (kMaxEdgesPerReply)
};
inline constexpr size_t kMaxEdgesPerReply = 1 << 19;

// ---- encodings ----------------------------------------------------------------------------
// Encode appends to *out. Decode replaces *msg entirely.
#define PROPELLER_WIRE_MESSAGE(T)              \
  void Encode(const T& msg, std::string* out); \
  Status Decode(std::string_view bytes, T* msg);
PROPELLER_WIRE_MESSAGE(Empty)
PROPELLER_WIRE_MESSAGE(RegisterNodeRequest)
PROPELLER_WIRE_MESSAGE(RegisterNodeReply)
PROPELLER_WIRE_MESSAGE(HeartbeatRequest)
PROPELLER_WIRE_MESSAGE(HeartbeatReply)
PROPELLER_WIRE_MESSAGE(NodesReply)
PROPELLER_WIRE_MESSAGE(FilesRequest)
PROPELLER_WIRE_MESSAGE(AssignFilesRequest)
PROPELLER_WIRE_MESSAGE(LocationsReply)
PROPELLER_WIRE_MESSAGE(LocateAcgsRequest)
PROPELLER_WIRE_MESSAGE(AcgLocationsReply)
PROPELLER_WIRE_MESSAGE(NewAcgRequest)
PROPELLER_WIRE_MESSAGE(NewAcgReply)
PROPELLER_WIRE_MESSAGE(SplitDoneRequest)
PROPELLER_WIRE_MESSAGE(SplitDoneReply)
PROPELLER_WIRE_MESSAGE(IndexDef)
PROPELLER_WIRE_MESSAGE(IndexName)
PROPELLER_WIRE_MESSAGE(IndexesReply)
PROPELLER_WIRE_MESSAGE(RegisterVolumeRequest)
PROPELLER_WIRE_MESSAGE(VolumeInfo)
PROPELLER_WIRE_MESSAGE(VolumesReply)
PROPELLER_WIRE_MESSAGE(ClusterStatusReply)
PROPELLER_WIRE_MESSAGE(ApplyRequest)
PROPELLER_WIRE_MESSAGE(SearchQuery)
PROPELLER_WIRE_MESSAGE(SearchHitsChunk)
PROPELLER_WIRE_MESSAGE(SearchDone)
PROPELLER_WIRE_MESSAGE(GetRecordRequest)
PROPELLER_WIRE_MESSAGE(RecordReply)
PROPELLER_WIRE_MESSAGE(NodeStatusReply)
PROPELLER_WIRE_MESSAGE(MountStatusReply)
PROPELLER_WIRE_MESSAGE(Ping)
PROPELLER_WIRE_MESSAGE(ListEdgesRequest)
PROPELLER_WIRE_MESSAGE(EdgesReply)
PROPELLER_WIRE_MESSAGE(MoveAcgRequest)
PROPELLER_WIRE_MESSAGE(MigrateAcgRequest)
PROPELLER_WIRE_MESSAGE(MigrateAcgReply)
PROPELLER_WIRE_MESSAGE(AdoptAcgChunk)
PROPELLER_WIRE_MESSAGE(ReleaseAcgRequest)
#undef PROPELLER_WIRE_MESSAGE

// A decoded request envelope. `body` points into the bytes given to DecodeRequest.
struct RequestEnvelope {
  uint32_t version = 0;
  MsgType type = MsgType::kPing;
  std::string_view body;
};
// A decoded reply envelope. `body` points into the bytes given to DecodeReply.
struct ReplyEnvelope {
  uint32_t version = 0;
  Status status;                        // the remote status, code and message as sent
  std::vector<AcgLocation> redirects;   // with StatusCode::kRedirect: who owns what
  std::string_view body;
};

std::string EncodeRequest(MsgType type, std::string_view body);
template <typename T>
  requires(!std::is_convertible_v<const T&, std::string_view>)
std::string EncodeRequest(MsgType type, const T& msg) {
  std::string body;
  Encode(msg, &body);
  return EncodeRequest(type, std::string_view(body));
}
// Corruption for a malformed envelope; NotSupported for another major protocol version (the
// envelope is still filled in so the caller can answer).
Status DecodeRequest(std::string_view bytes, RequestEnvelope* envelope);

// An OK reply carrying `body`, or an error reply (status not OK; body ignored).
std::string EncodeReply(const Status& status, std::string_view body,
                        const std::vector<AcgLocation>& redirects = {});
template <typename T>
std::string EncodeOkReply(const T& msg) {
  std::string body;
  Encode(msg, &body);
  return EncodeReply(Status::OK(), body);
}
// Decodes the envelope only: the remote status lands in envelope->status, and the returned
// Status is about the bytes themselves (Corruption, NotSupported).
Status DecodeReply(std::string_view bytes, ReplyEnvelope* envelope);

}  // namespace propeller::wire

#endif  // PROPELLER_SCHEMAS_MESSAGES_H_
