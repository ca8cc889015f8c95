// NodeService: the request handler of an index node (docs/architecture.md §6, §9): it turns wire
// requests (schemas/messages.h) into Engine calls and Engine results into wire replies. It is the
// rpc::Handler of IndexNodeServer, and tests call Handle() directly with arbitrary bytes.
//
// Requests served (everything else, including the master's message types, gets NotSupported):
//   kApply        all or nothing: every ACG of the batch must be owned by this node (below),
//                 otherwise nothing is applied and the reply is StatusCode::kRedirect listing,
//                 for each ACG not owned here, the owner the master knows (node_id 0 = unknown
//                 ACG). ACG 0 is InvalidArgument.
//   kSearch       SearchHitsChunk partial frames of at most `max_chunk_hits` hits and about
//                 `max_chunk_bytes` bytes each, then a SearchDone final reply. With sort_by the
//                 chunks are in sort order; limit is applied on this node. A malformed query is
//                 InvalidArgument carrying the parser's positioned message ("error at 5: ...").
//   kGetRecord    NotFound when absent; kRedirect when the ACG is not owned here.
//   kNodeStatus, kCreateIndex (idempotent: an existing user index of the same type is OK),
//   kDropIndex, kListIndexes (user indexes by name, from a copy refreshed after every index
//   change made through this service), kPing (echo).
//   kWatch        a live query (schemas/watch_messages.h, Engine::Watch): an empty chunk once
//                 registered, then WatchEventsChunk frames as updates change its matches and
//                 heartbeats while none do, until the client goes away or the watch ends
//                 (ResourceExhausted when it fell behind, Aborted when the node stops).
//   kMigrateAcg   moves an ACG this node owns to another node (docs/architecture.md §5;
//                 schemas/messages.h "migration"): freeze and copy (Engine::FreezeAndCopyAcg),
//                 send the copy in kAdoptAcg parts, drop it here once the destination adopted
//                 it and the master names the destination, then kReleaseAcg. Needs
//                 `connect_peer` and `scratch_dir`. Synchronous: the reply comes when the move
//                 is over.
//   kAdoptAcg     the destination's side: the parts go to `scratch_dir`; with the last one
//                 (CRC-checked) the engine adopts the copy frozen and the master flips the
//                 ACG's owner (kMoveAcg); an error undoes the adoption.
//   kReleaseAcg   the source dropped its copy: updates to the adopted ACG go on here.
// Malformed envelopes and bodies get an error reply (Corruption, or NotSupported for another
// protocol major version); nothing reaches the engine unless its request decoded completely.
//
// Ownership (cluster rule): the master's ACG->node map is the truth. ACGs present in the engine
// when the service starts (less those ConfirmOwnership finds mapped elsewhere), and ACGs the
// master confirmed as this node's, are owned; the
// confirmation is cached until the ACG migrates away (kMigrateAcg). ACGs the
// master places elsewhere, or does not know, are asked about again on the next request, so a
// master-side reassignment to this node is picked up at once. Without a reachable master only
// already-owned ACGs are served; the others get Unavailable (retry later).
//
// Access (schemas/access.h, docs/security.md): the sender's role comes from the transport.
// Members (in-process, admitted CURVE keys) may send everything, and their SearchQuery.creds
// is the permission filter (unset = everything). Administrators and users on the unix socket
// search as the kernel names them (uid, gid and groups; whatever the request claims), and
// what they read — hits, records, edges — is cut to what they could find by walking the tree
// (CallerAccess). A user's kApply may only set or remove user attributes of files they may
// write; every other change from a user, and everything but kPing from an unidentified peer,
// is PermissionDenied and changes nothing.
//
// Threading: Handle() and every other method may be called from any number of threads at
// once. Index creation, dropping and reconciliation are serialized among themselves.
#ifndef PROPELLER_INDEXNODE_SERVER_NODE_SERVICE_H_
#define PROPELLER_INDEXNODE_SERVER_NODE_SERVICE_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "common/env.h"
#include "common/mutex.h"
#include "common/rpc/rpc.h"
#include "common/status.h"
#include "indexnode/engine.h"
#include "indexnode/server/caller_access.h"
#include "indexnode/server/node_metrics.h"
#include "schemas/access.h"
#include "schemas/messages.h"

namespace propeller {

struct NodeServiceOptions {
  Engine* engine = nullptr;          // REQUIRED; must outlive the service
  // The master, for ownership look-ups (LocateAcgs). May be null: then only the ACGs already
  // in the engine are owned. Must outlive the service.
  rpc::Channel* master = nullptr;
  uint32_t node_id = 0;              // this node's id at the master; 0 = not registered yet
  int64_t master_timeout_ms = 2000;  // per LocateAcgs call (one retry)
  // Bounds of one SearchHitsChunk frame: ~1 MB keeps a frame far below the transport's
  // 64 MB limit and lets the client start merging early; 1000 hits amortize the frame cost.
  size_t max_chunk_hits = 1000;
  size_t max_chunk_bytes = 1u << 20;
  // Tests: called at each step of a migration; a hook may end the process. Source: 3 = the
  // ACG frozen and copied, before the first part is sent; 1 = the destination adopted the
  // copy and the map names it, before the drop; 5 = dropped, before kReleaseAcg.
  // Destination: 2 = the copy adopted, before asking the master to flip the map; 4 = the
  // map flipped, before answering the source.
  std::function<void(int step)> migrate_step_hook;
  // Migration: a directory on the data directory's file system for copies in transit, and
  // how to reach another node (null: this node neither sends nor receives ACGs).
  std::string scratch_dir;
  // The file I/O of those copies (writing, reading, syncing and removing them); null =
  // Env::Default(). Tests inject faults through it. The engine's own steps of a move (the
  // LMDB copy, adopting it) go through EngineOptions::env and LMDB.
  Env* env = nullptr;
  // A destination whose flip (kMoveAcg) got no answer asks the master this long who owns
  // the ACG before it keeps the copy unsettled; within the source's 15 s per part, after the
  // flip's own 3 x master_timeout_ms.
  int64_t unsettled_wait_ms = 6000;
  // A source whose send failed asks the master this long who owns the ACG; without an
  // answer the ACG stays frozen until one comes (ResolveStalledMoves).
  int64_t owner_wait_ms = 30'000;
  std::function<Result<std::unique_ptr<rpc::Channel>>(const std::string& endpoint)>
      connect_peer;
  // Where DropNotOwned keeps a copy another node owns (renamed there, never removed); "" =
  // remove it.
  std::string stray_dir;
  // Who may do what (schemas/access.h); trust_plain_tcp only with --insecure.
  wire::AccessPolicy access = wire::DefaultAccessPolicy();
  // Asked before every search with its query; a failure is the search's answer. The embedded
  // node of a mount: "index catching up" while the mount's queue holds updates under the
  // scope (client/fuse/index_writer.h). Null = none.
  std::function<Status(const wire::SearchQuery&)> search_gate;
  // Live queries (kWatch, node_watch.cc): each holds one rpc worker thread for as long as it
  // runs, so the node's server has this many workers more than it needs for requests; a
  // user (not a member or root) holds at most max_watches_per_user of them. Beyond either,
  // kWatch is ResourceExhausted. An idle watch gets a heartbeat frame this often.
  size_t max_watches = 32;
  size_t max_watches_per_user = 4;
  int64_t watch_heartbeat_ms = 1000;
};

// Counters for tests and status output.
struct NodeServiceStats {
  uint64_t requests = 0;
  uint64_t bad_requests = 0;     // envelope or body failed to decode
  uint64_t redirects = 0;        // Apply/GetRecord answered with kRedirect
  uint64_t master_lookups = 0;   // LocateAcgs calls made
};

class NodeService {
 public:
  // REQUIRES: options.engine != null. Reads the engine's ACG list (they are owned).
  explicit NodeService(const NodeServiceOptions& options);
  ~NodeService();
  NodeService(const NodeService&) = delete;
  NodeService& operator=(const NodeService&) = delete;

  // Handles one request frame body; returns the final reply frame body (always a well-formed
  // reply envelope). Partial frames (Search) are sent through `out` before returning. Never
  // throws; garbage in `request` yields an error reply and leaves the engine untouched.
  std::string Handle(std::string_view request, const rpc::PeerInfo& peer, rpc::ReplyStream& out);

  // A restarted node: asks the master once who owns the ACGs on disk and stops owning those
  // it maps to another node (copies a migration's source kept when it died after the flip;
  // a heartbeat's not_yours drops them later), so no update is acknowledged into them. Call
  // before serving. Without an answer (or without a node id yet) every ACG on disk stays
  // owned, so a node restarted while the master is down still serves its ACGs.
  void ConfirmOwnership();

  // This node's id at the master (set by IndexNodeServer once registered). Ownership answers
  // from the master are compared with it.
  void set_node_id(uint32_t id) { node_id_.store(id); }
  uint32_t node_id() const { return node_id_.load(); }

  // ---- user-index reconciliation (HeartbeatReply) ----
  // A counter bumped by every CreateIndex/DropIndex request this service handles. Read it
  // before sending a heartbeat and pass it to ReconcileIndexes with the reply, so a catalogue
  // the master computed before a local change cannot undo that change.
  uint64_t IndexChangeSeq() const;
  // Makes the engine's user indexes equal to `catalogue`: creates the missing ones, drops the
  // ones not listed, recreates one whose type differs — except indexes changed by a request
  // with sequence number > `as_of_seq`. Continues past a failure and returns the first error.
  Status ReconcileIndexes(const std::vector<wire::IndexDef>& catalogue, uint64_t as_of_seq);
  // The user-defined indexes, sorted by name, as of the last index change made through this
  // service (a cached copy: it never waits behind an index build, which holds the engine's
  // catalogue lock for as long as the build takes).
  std::vector<wire::IndexDef> UserIndexes() const;

  NodeServiceStats stats() const;
  // The request metrics (node_metrics.h), valid while this service lives.
  const NodeRequestMetrics& request_metrics() const { return metrics_; }

  // ---- migration ----
  // The source's steps of a migration (kMigrateAcg; IndexNodeServer for the master's
  // HeartbeatReply.moves); *reply gets the figures. One at a time: a second call waits.
  Status Migrate(const wire::MigrateAcgRequest& req, wire::MigrateAcgReply* reply);

  // ---- migration clean-up (HeartbeatReply.not_yours; called by the membership thread) ----
  // Stops serving the listed ACGs that the master, asked again now, still maps to another
  // node, and sets their directories aside in stray_dir: copies a crash left behind in a
  // migration (a source that died after the map flipped, a destination that died before it
  // flipped). Skips an ACG whose move is in progress here.
  void DropNotOwned(const std::vector<wire::AcgLocation>& acgs);
  // Source side: ACGs whose move failed while the master could not say who owns them stay
  // frozen; once it answers, each is thawed (this node's) or dropped (the destination's).
  void ResolveStalledMoves();
  // Thaws ACGs adopted more than `after_ms` ago whose source never sent kReleaseAcg (it died
  // between its drop and the release). An adoption whose flip is unsettled (the master did
  // not answer it) is thawed only once the master names this node as the owner.
  void ThawAbandoned(int64_t after_ms);

 private:
  // One ACG's place: owned here, or elsewhere (with what the master said).
  struct Ownership {
    std::vector<wire::AcgLocation> elsewhere;  // empty = all owned here
  };
  Result<Ownership> CheckOwnership(std::vector<uint64_t> acgs);
  void MarkOwned(const std::vector<uint64_t>& acgs);

  std::string HandleRequest(const wire::RequestEnvelope& env, CallerAccess& caller,
                            rpc::ReplyStream& out);
  std::string HandleApply(std::string_view body, CallerAccess& caller);
  std::string HandleSearch(std::string_view body, CallerAccess& caller, rpc::ReplyStream& out);
  std::string HandleWatch(std::string_view body, CallerAccess& caller, rpc::ReplyStream& out);
  std::string HandleGetRecord(std::string_view body, CallerAccess& caller);
  std::string HandleNodeStatus(std::string_view body);
  std::string HandleListEdges(std::string_view body, CallerAccess& caller);
  std::string HandleCreateIndex(std::string_view body);
  std::string HandleDropIndex(std::string_view body);
  std::string HandleListIndexes(std::string_view body);
  std::string HandlePing(std::string_view body);
  std::string HandleMigrate(std::string_view body);
  std::string HandleAdopt(std::string_view body);
  std::string HandleRelease(std::string_view body);
  // One LocateAcgs call for `acgs` (one retry): *out gets a location per ACG, in order.
  // REQUIRES: options_.master != null.
  Status LocateAtMaster(const std::vector<uint64_t>& acgs, std::vector<wire::AcgLocation>* out);
  // The master's owner of `acg` now; 0 = unknown (or the master unreachable).
  uint32_t MasterOwnerOf(uint64_t acg);
  // After a failed step: the master's owner of `acg`, asked again each second for about
  // `budget`; 0 = unknown.
  uint32_t OwnerAfterFailure(uint64_t acg, std::chrono::milliseconds budget);
  std::string BadRequest(const char* what, const Status& st);
  // Re-reads the engine's user indexes into user_indexes_.
  void RefreshIndexListLocked() PROPELLER_REQUIRES(index_mu_);

  // Constant after construction.
  const NodeServiceOptions options_;
  Env* const env_;  // options_.env or Env::Default()
  Engine* const engine_;
  VolumeRoots volume_roots_;  // thread-safe

  std::atomic<uint32_t> node_id_;

  // A leaf (never held while calling the master or the engine).
  mutable SharedMutex owned_mu_;
  std::unordered_set<uint64_t> owned_ PROPELLER_GUARDED_BY(owned_mu_);

  // Serializes index changes (requests and reconciliation); lock order: index_mu_ before
  // list_mu_ and the engine's own locks (it is never held while calling back into this
  // class).
  mutable Mutex index_mu_ PROPELLER_ACQUIRED_BEFORE(list_mu_);
  std::atomic<uint64_t> index_seq_{0};  // Written under index_mu_; read without it.
  // Name -> sequence number of its last change by request.
  std::map<std::string, uint64_t> index_changed_ PROPELLER_GUARDED_BY(index_mu_);
  // Failures already logged.
  std::set<std::string> reconcile_warned_ PROPELLER_GUARDED_BY(index_mu_);

  mutable Mutex list_mu_;  // after index_mu_ in the lock order
  std::vector<wire::IndexDef> user_indexes_ PROPELLER_GUARDED_BY(list_mu_);

  std::atomic<uint64_t> requests_{0}, bad_requests_{0}, redirects_{0}, master_lookups_{0};
  NodeRequestMetrics metrics_;
  Mutex watches_mu_;  // a leaf
  size_t watches_ PROPELLER_GUARDED_BY(watches_mu_) = 0;  // running kWatch handlers
  // uid -> running kWatch handlers.
  std::map<uint32_t, size_t> user_watches_ PROPELLER_GUARDED_BY(watches_mu_);
  // One migration out of this node at a time, and one adoption into it: they guard no
  // member but the steps of a move (Migrate, HandleAdopt; DropNotOwned and
  // ResolveStalledMoves try-lock them to stay out of a move's way). Before adopted_mu_ and
  // owned_mu_ in the lock order.
  Mutex migrate_mu_ PROPELLER_ACQUIRED_BEFORE(adopt_mu_, adopted_mu_, owned_mu_);
  Mutex adopt_mu_ PROPELLER_ACQUIRED_BEFORE(adopted_mu_, owned_mu_);
  Mutex adopted_mu_;  // a leaf
  // Adopted copies, frozen until released.
  std::map<uint64_t, std::chrono::steady_clock::time_point> adopted_frozen_
      PROPELLER_GUARDED_BY(adopted_mu_);
  // Adopted copies whose flip failed without the master saying who owns them: not owned,
  // frozen, left out of searches that do not name them.
  std::set<uint64_t> unsettled_ PROPELLER_GUARDED_BY(adopted_mu_);
  // Source: ACG -> destination of a move that failed while the master could not say who
  // owns the ACG; frozen here until it can.
  std::map<uint64_t, uint32_t> stalled_out_ PROPELLER_GUARDED_BY(adopted_mu_);
};

}  // namespace propeller

#endif  // PROPELLER_INDEXNODE_SERVER_NODE_SERVICE_H_
