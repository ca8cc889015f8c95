// libpropeller: the C++ client API of a Propeller cluster (docs/architecture.md §9). A Client talks
// to the master for routing and placement and to the index nodes for updates and searches; it needs
// nothing but an endpoint of the master. (C callers: client/lib/propeller_c.h.)
//
//   auto client = propeller::Client::Connect({});          // PROPELLER_MASTER or the default
//   (*client)->Search("size>1m & ext=parquet", {.scope = "/data/run42"},
//                     [](const propeller::ClientHit& hit) { puts(hit.path.c_str()); return true; });
//
// Routing: the client caches file -> (ACG, node) and ACG -> node. Entries may go stale (a node
// restarted elsewhere, an ACG moved): an index node answers a request for an ACG it does not own
// with a redirect, and the client drops what it knew, asks the master again and retries, so a
// stale cache costs one round trip and never a wrong answer.
//
// Searches go to every up index node in parallel; each node filters, sorts and limits, and the
// client merges (one total order: SortsBefore in common/record.h) and limits again. If a node
// that should answer is down, the search fails with Unavailable naming it: results are never
// silently incomplete.
//
// Paths: a hit's `path` is the volume's root followed by the in-volume path
// ("/data" + "/run42/a.parquet"); `scope` is given the same way (a host path inside a volume) or,
// with `volume` set, as an in-volume path.
//
// Threading: every method may be called from any number of threads at once.
#ifndef PROPELLER_CLIENT_LIB_PROPELLER_H_
#define PROPELLER_CLIENT_LIB_PROPELLER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/credentials.h"
#include "common/record.h"
#include "common/status.h"
#include "schemas/messages.h"

namespace propeller {

// How a search answers while a mount still queues updates under its scope (docs/faults.md):
// Unavailable, its message holding this phrase (after any context added on the way).
inline constexpr std::string_view kIndexCatchingUp = "index catching up";
inline bool IsIndexCatchingUp(const Status& s) {
  return s.code() == StatusCode::kUnavailable &&
         std::string_view(s.message()).find(kIndexCatchingUp) != std::string_view::npos;
}

// A standalone propeller-master's default endpoint.
inline constexpr const char* kDefaultMasterEndpoint = "tcp://127.0.0.1:7470";

// The master a client talks to when none is named: $PROPELLER_MASTER; else the unix socket of
// a local `propeller up` — this user's own (<runtime dir>/master.sock, common/secure_dir.h),
// then root's (/run/propeller/master.sock) — when one exists; else kDefaultMasterEndpoint.
std::string DefaultMasterEndpoint();

struct ClientOptions {
  // "" = DefaultMasterEndpoint().
  std::string master_endpoint;
  // Link security of tcp:// endpoints (docs/security.md; ipc:// needs none, the kernel names
  // this process): the cluster key ("" = rpc::DefaultClusterKeyFile(); read when a tcp://
  // endpoint is first dialed), or this client's own key pair with the servers' public key, or
  // `insecure` (a cluster started with --insecure).
  std::string cluster_key_file;
  std::string curve_key_file;
  std::string server_key_file;
  bool insecure = false;
  int64_t timeout_ms = 5000;  // per request
  // Endpoint -> the endpoint to dial instead (embedded mode: the in-process master's and
  // node's tcp:// endpoints -> their inproc:// aliases, ~3x cheaper per call).
  std::map<std::string, std::string> endpoint_aliases;
  // Tests only: called before each Apply request of Update is sent, on the thread that sends
  // it (see Client::Update).
  std::function<void()> before_apply_for_test;
};

using ClientCredentials = Credentials;  // uid, gid, supplementary groups

struct ClientSearchOptions {
  std::string scope = "/";  // a host path inside a volume, or in-volume when `volume` is set
  std::optional<uint32_t> volume;
  // Filter by what this user may see (docs/architecture.md §10). Unset = the calling process's own
  // credentials (geteuid/getegid/getgroups); uid 0 sees every file.
  std::optional<ClientCredentials> creds;
  size_t limit = 0;        // 0 = none
  std::string sort_by;     // "" or size, mtime, ctime, atime, uid, gid, path, name
  bool descending = false;
  int64_t now_ns = 0;      // instant for ages; 0 = this host's clock
  // With `volume`: the root its paths show under for the path predicates (name, ext, path,
  // keyword: docs/query.md "Paths"); "" = the volume's registered root. A mount's query
  // engine gives its mount point. Hits' paths are under the registered root either way.
  std::string paths_under;
};

struct ClientHit {
  std::string path;  // volume root + in-volume path
  FileRecord record;
  uint64_t acg = 0;
  uint32_t node_id = 0;
};

struct ClientSearchStats {
  uint64_t nodes = 0;
  uint64_t acgs_total = 0;
  uint64_t acgs_skipped = 0;
  uint64_t candidates = 0;
  uint64_t hits = 0;
};

// A live query (Client::Watch; docs/cli.md `propeller watch`).
struct ClientWatchOptions {
  std::string scope = "/";  // as ClientSearchOptions::scope
  std::optional<uint32_t> volume;
  std::optional<ClientCredentials> creds;  // as ClientSearchOptions::creds
  // Changes each index node may hold for this watch while the caller is busy (0 = the
  // node's default, 10,000); past it the watch ends with ResourceExhausted ("fell behind").
  size_t max_queued = 0;
  int64_t now_ns = 0;  // instant for ages (fixed for the whole watch); 0 = now
  std::string paths_under;  // as ClientSearchOptions::paths_under
  // Called once, when every index node has registered the watch: each update acknowledged
  // after it is reported. On the calling thread, before any event.
  std::function<void()> on_ready;
  // Called about once a second while nothing changes (on the calling thread); return false
  // to end the watch. Null = none.
  std::function<bool()> on_idle;
};

struct ClientWatchEvent {
  char kind = '+';    // '+' started matching, '-' stopped matching, '~' a match changed
  std::string path;   // as ClientHit::path
  FileRecord record;  // after the change ('-': before it)
  uint32_t node_id = 0;
};

// One file-indexing change. For kPut the record is the file's whole new state; kDelete needs
// record.id only; kSetAttrs/kRemoveAttrs use record.id and record.attrs; kAddEdge adds the ACG
// edge record.id -> edge_dst. `app` and `producers` steer the placement of files the master has
// not seen yet (docs/architecture.md §5). `created` (kPut only) says the file was just created, so
// its inode number is new: whatever the master still maps under it belongs to a deleted file (a
// forget still queued, or lost in a crash), and the file is placed afresh. Set it only when the
// creation is certain (O_EXCL, mkdir, ...): an existing file placed afresh could be indexed in
// two ACGs. `acg` and `generation` (kDelete): the file's route taken before its name went
// (Client::ResolveRoutes); 0 = look it up when sending, which after an unlink may find the
// mapping of a new file that reused the inode number meanwhile; acg 0 with generation
// kNotIndexed: resolved as not indexed (nothing to delete). A kDelete may carry the
// unlinked path and the ctime seen before the unlink in `record` (DeleteApplies,
// common/record.h), so the index node spares such a new file.
inline constexpr uint64_t kNotIndexed = ~uint64_t{0};
struct FileUpdate {
  UpdateOp op = UpdateOp::kPut;
  FileRecord record;
  std::string app;
  std::vector<FileId> producers;
  FileId edge_dst;
  uint32_t edge_weight = 1;
  uint32_t edge_dst_generation = 0;  // kAddEdge: Update::edge_dst_generation
  bool created = false;
  uint64_t acg = 0;
  uint64_t generation = 0;
};

// One captured access-causality edge: a process read `src`, then wrote `dst`
// (docs/architecture.md §3); `weight` counts the executions that did. The generations are the ends'
// inode generations when it was captured (0 = unknown): an edge whose end's generation is not that
// file's record's any more belonged to a deleted file that had the same number (`acg show` and
// `acg export` leave such edges out).
struct AcgEdge {
  uint64_t acg = 0;
  FileId src;
  FileId dst;
  uint64_t weight = 0;
  uint32_t src_generation = 0;
  uint32_t dst_generation = 0;
};

// Apply requests one Client sends to one index node at a time; further concurrent Update
// calls for that node queue and share the next request (Client::Update).
inline constexpr int kMaxAppliesInFlightPerNode = 4;

// How Update calls reached the index nodes (Client::update_stats).
struct ClientUpdateStats {
  uint64_t apply_calls = 0;        // Apply requests sent
  uint64_t updates_sent = 0;       // updates they carried (resends count again)
  uint64_t coalesced_calls = 0;    // Apply requests that carried several callers' updates
  uint64_t callers_coalesced = 0;  // callers whose updates rode in another caller's request
  uint64_t callers_waiting = 0;    // now: callers queued (their node's requests all in flight)
};

struct NodeStatus {
  wire::NodeInfo info;                    // as the master sees the node
  std::optional<wire::NodeStatusReply> node;  // from the node itself; unset when unreachable
  std::string error;                      // why `node` is unset
};
struct ClusterStatus {
  std::string master_endpoint;
  uint64_t acgs = 0;
  uint64_t files = 0;
  std::vector<NodeStatus> nodes;
  std::vector<wire::IndexDef> indexes;
  std::vector<wire::VolumeInfo> volumes;
};

class Client {
 public:
  // Creates a client for the master at options.master_endpoint. Does not contact it yet
  // (the first call does). InvalidArgument for bad options, NotFound/InvalidArgument for
  // unreadable key files.
  static Result<std::unique_ptr<Client>> Connect(const ClientOptions& options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Streams the matches of `query` to `on_hit` (always on the calling thread; return false to
  // stop). With sort_by the hits arrive in order after all nodes answered; otherwise as they
  // come, and a limit ends the search once reached. Errors: InvalidArgument (bad query, scope
  // or sort key, with the parser's position), Unavailable (master or a node down), Timeout.
  Status Search(const std::string& query, const ClientSearchOptions& options,
                const std::function<bool(const ClientHit&)>& on_hit,
                ClientSearchStats* stats = nullptr);
  Result<std::vector<ClientHit>> SearchAll(const std::string& query,
                                           const ClientSearchOptions& options,
                                           ClientSearchStats* stats = nullptr);

  // Streams the changes to the set of matches of `query` (indexnode/watch_hub.h) to
  // `on_event`, on the calling thread, until it returns false (then OK). A rename is '-'
  // of the old path then '+' of the new; each index node's changes arrive in the order it
  // applied them. Searches' rules apply: a scope inside a mount goes to that mount's query
  // engine, results are filtered by credentials. The watch covers the index nodes up when it
  // starts. Errors end it: InvalidArgument (bad query or scope), ResourceExhausted (it fell
  // behind, or too many watches), Unavailable/Timeout (a node or the mount stopped
  // answering), Aborted (a node is stopping).
  Status Watch(const std::string& query, const ClientWatchOptions& options,
               const std::function<bool(const ClientWatchEvent&)>& on_event);

  // Volumes: RegisterVolume is idempotent (same root, same id). `root` must be absolute.
  Result<uint32_t> RegisterVolume(const std::string& root);
  Result<std::vector<wire::VolumeInfo>> ListVolumes();
  // Removes volume `volume` (root `root`): deletes every record of it from the index nodes,
  // then the master forgets the volume and its files. Searches of `root` then fail with "not
  // inside an indexed volume"; importing it again makes a new volume. *removed (optional)
  // receives the number of records deleted.
  Status RemoveVolume(uint32_t volume, const std::string& root, uint64_t* removed = nullptr);
  // The volume containing host path `path` and the in-volume path; NotFound if none does
  // (the longest registered root wins).
  Result<std::pair<uint32_t, std::string>> ResolvePath(const std::string& path);
  // The FileId of the file at host path `path`: its volume (ResolvePath) and inode (lstat).
  Result<FileId> FileIdOf(const std::string& path);

  // Sends the changes and returns once every index node concerned acknowledged them (they are
  // in its log). Updates are grouped per node and sent in parallel; a redirect refreshes the
  // routing and resends that group. Files seen for the first time are placed by the master.
  // Not atomic across nodes: on error some groups may have been applied.
  // Concurrent calls share requests (docs/architecture.md §4): while kMaxAppliesInFlightPerNode
  // Apply requests to a node are in flight, the groups other threads have for that node queue,
  // and go together in the next Apply (at most 4,096 updates; a call's own group is never
  // split). Each call still returns only once its own updates are acknowledged, with its own
  // outcome (ClientUpdateStats counts what was shared).
  // A delete's record is gone from the index when this returns; telling the master to forget
  // the file's placement (which only steers placement and ACG sizes) is queued and sent in
  // batches by a background thread, conditional on the mapping's generation, so a late forget
  // never removes the mapping of a new file that reused the inode number.
  Status Update(std::span<const FileUpdate> updates);
  // Fills `acg` and `generation` of every kDelete in `updates` that has none with the file's
  // current route (cache or master; left 0 for a file nobody indexed). Call it before removing
  // the name, so the delete goes where the file was even if its inode number is reused before
  // Update runs.
  Status ResolveRoutes(std::span<FileUpdate> updates);

  // Sends every queued forget now and waits for the master's answer (tests, shutdown; the
  // destructor does it too). Returns the first error of the batches it waited for.
  Status FlushForgets();

  // The current record of `id`. NotFound when the file is not indexed.
  Result<FileRecord> Get(FileId id);
  // User attributes (docs/architecture.md §3): set or remove one attribute of an indexed file
  // in the index alone. The file's own `user.NAME` extended attribute is where an attribute
  // lives: the next reading of the file (a change through a mount, an import) puts what the
  // file holds. `propeller attr set` writes both (docs/query.md "User attributes").
  Status SetAttr(FileId id, const std::string& name, const AttrValue& value);
  Status RemoveAttr(FileId id, const std::string& name);

  // User-defined indexes: recorded by the master, then built on every up node at once.
  Status CreateIndex(const std::string& name, IndexType type);
  Status DropIndex(const std::string& name);
  Result<std::vector<wire::IndexDef>> ListIndexes();

  // The master's view (nodes, ACGs, files, indexes, volumes) plus each up node's own status,
  // asked in parallel; an unreachable node is reported, not an error.
  Result<ClusterStatus> GetStatus();

  // Every ACG edge the up index nodes hold (committed first). ResourceExhausted when a node
  // holds more than one reply carries.
  Result<std::vector<AcgEdge>> ListEdges();

  // Moves ACG `acg` to index node `to_node` (docs/architecture.md §5): its owner freezes it, sends
  // a compacted copy of its data (one file), and drops it once `to_node` adopted it and the
  // master names `to_node`.
  // Updates and searches go on meanwhile (updates to that ACG wait for the move, for at most
  // a few seconds). Returns the copy's size, the ACG's files and the time from freeze to drop.
  // `timeout_ms` bounds the whole move (copy, transfer, adoption, drop).
  Result<wire::MigrateAcgReply> MoveAcg(uint64_t acg, uint32_t to_node,
                                        int64_t timeout_ms = 600'000);

  const std::string& master_endpoint() const;
  ClientUpdateStats update_stats();

  // While a Deadline lives, the calls this thread makes through any Client (and the threads
  // they fan out to) give up once `ms` milliseconds have passed since it was made: each
  // request waits at most the time left and is not re-sent, so Update, Get and ResolveRoutes
  // return Timeout or Unavailable by then. The mount bounds every file operation this way
  // (docs/faults.md). Nested deadlines: the earlier one wins.
  class Deadline {
   public:
    explicit Deadline(int64_t ms);
    ~Deadline();
    Deadline(const Deadline&) = delete;
    Deadline& operator=(const Deadline&) = delete;

   private:
    int64_t saved_ns_;
  };

 private:
  class Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace propeller

#endif  // PROPELLER_CLIENT_LIB_PROPELLER_H_
