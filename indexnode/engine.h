// Engine: the single-node indexing and search engine of an index node (docs/architecture.md §6),
// usable in-process by tests, benchmarks, the index-node daemon and the embedded mode.
//
// An Engine owns one data directory:
//   <data_dir>/wal/          the node's write-ahead log (segments; see schemas/wal_format.h)
//   <data_dir>/store/        the store: a few LMDB environments holding every ACG partition's
//                            data, each ACG a key range (see store.h, acg.h)
//   <data_dir>/acg/<id>/     each ACG partition's control directory (markers)
//   <data_dir>/indexes       the catalogue of user-defined indexes
//
// Write path: Apply() appends the batch to the WAL (one log for all ACGs, group commit), puts
// each update into its ACG's in-memory write cache and returns: the updates are acknowledged.
// Cached updates are committed into the ACG's LMDB indexes after `commit_timeout_ns`, when
// the cache exceeds its bound, or before a search touches that ACG. After a commit is durable
// the WAL prefix no ACG needs any more is deleted; Open() replays the rest.
//
// Durability (docs/architecture.md §10):
//   kDefault: Apply returns once the batch is written to the log file (survives kill -9 of the
//             process); a background thread fsyncs the log at least every
//             `group_commit_interval_ns` (10 ms), so a power loss loses at most that window.
//   kSync:    Apply returns only after an fsync that covers the batch; concurrent Apply calls
//             share one fsync (group commit).
//
// Search: parses the query once, skips ACGs whose summaries prove they cannot match, commits
// the caches of the rest, plans each ACG (K-D tree for numeric ranges, B-tree for paths and
// ranges, hash for keywords and equality), verifies candidates against the whole query, filters
// by credentials, and runs ACGs in parallel on a thread pool.
//
// Storage: every ACG's data lives in the node's store (indexnode/store.h), a fixed number of
// LMDB environments whatever the number of ACGs (layout 5, schemas/LAYOUT.md; a data
// directory of layout 3 or 4 is converted at its first open).
//
// Open ACGs are cached (docs/architecture.md §6): at most `max_open_acgs` ACGs, holding at most
// `max_open_acg_bytes` of hash tables, keep their index objects; beyond that the least
// recently used idle ones are closed, and are reopened on demand by a commit, a search their
// summary and K-D tree cannot rule out, Get or ListEdges. A closed ACG keeps its summary,
// counts, write cache and K-D tree in memory (indexnode/acg.h, indexnode/README.md).
//
// Thread-safety: every public method may be called from any number of threads concurrently.
#ifndef PROPELLER_INDEXNODE_ENGINE_H_
#define PROPELLER_INDEXNODE_ENGINE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/credentials.h"
#include "common/env.h"
#include "common/metrics.h"
#include "common/record.h"
#include "common/status.h"
#include "indexnode/index/index.h"
#include "indexnode/watch_hub.h"
#include "partitioner/split.h"

namespace propeller {

enum class Durability : uint8_t { kDefault, kSync };
const char* DurabilityName(Durability d);  // "default", "sync"

struct EngineOptions {
  std::string data_dir;                 // REQUIRED; created if missing
  Env* env = nullptr;                   // WAL and metadata I/O; null = Env::Default()
  Durability durability = Durability::kDefault;
  int64_t group_commit_interval_ns = 10'000'000;  // kDefault: fsync the log this often
  int64_t commit_timeout_ns = 5'000'000'000;      // commit an ACG's cache after this age
  size_t cache_bound_updates = 50'000;  // commit an ACG's cache beyond this many updates
  // Node-wide: the committer commits the largest caches beyond this. A cached update costs
  // ~180 bytes (its encoded record plus a 56-byte entry, in one block per Apply batch shared by
  // the batch's ACGs): 1 M bounds that at ~180 MB.
  size_t total_cache_bound_updates = 1'000'000;
  int search_threads = 0;               // 0 = number of cores
  // ACG commits of one pass that run at once (commits of ACGs in different store shards
  // proceed in parallel), on the search pool's threads and the committing one. 0 = number of
  // cores.
  int commit_threads = 0;
  uint64_t wal_segment_bytes = 64ull << 20;
  // The store (indexnode/store.h): its shard count when it is created (0 = one per core, at
  // most 16; an existing store keeps its own), and each shard's LMDB map size — address space
  // only, the file grows with its data; a shard that reaches it fails its commits with
  // ResourceExhausted.
  unsigned store_shards = 0;
  uint64_t store_map_size = 1ull << 40;
  // false: no background threads; caches are committed only by searches, CommitAll() and
  // the bounds (tests use this to control timing). The log sync thread still runs in kDefault.
  bool background_commit = true;

  // ---- The cache of open ACGs (docs/architecture.md §6 Open ACGs; indexnode/README.md "Open
  // and closed ACGs") ----
  // An ACG stays open once opened: its index objects hold no memory to speak of, and it holds
  // no descriptor or map of its own (the store's are shared). What is bounded is the tables of
  // user hash indexes, loaded when a search first probes them: at most `max_open_acgs` ACGs
  // hold them, using at most `max_open_acg_bytes`; beyond either, the least recently used
  // ACGs that no operation is using unload theirs (Acg::TryUnload). 0 = unbounded.
  // max_open_acg_bytes also bounds the pages of the store's maps this process holds (records
  // that commits and searches read; file pages, counted in RSS): the background committer
  // checks them every `store_trim_interval_ns` and unmaps them beyond it (the page cache keeps
  // them).
  size_t max_open_acgs = 1024;
  uint64_t max_open_acg_bytes = 1ull << 30;
  int64_t store_trim_interval_ns = 10'000'000'000;
  // Compact the store's files before anything opens (Store::Compact): LMDB keeps the pages
  // that deletes freed inside its files; this rewrites each without them.
  // Takes a few seconds per GB and the space of a copy. `propeller-engine compact`.
  bool compact_store = false;
  // Hard bound on the memory of cached (acknowledged, uncommitted) updates, ~180 B each: an
  // Apply that finds the caches above it commits the largest ones itself before returning —
  // backpressure when updates outpace commits. Bursts below it are absorbed (at 10 M files a
  // commit costs ~10x an acknowledgement). 0 = unbounded.
  uint64_t max_cache_bytes = 1ull << 30;
  // ---- Automatic splits (docs/architecture.md §5) ----
  // A committed ACG with more files than this is split in two by a background thread (PlanSplit,
  // then SplitAcg), when split_target_id is set. 0 = never.
  uint64_t split_threshold_files = 50'000;
  // How often the background thread looks at ACG sizes.
  int64_t split_check_interval_ns = 1'000'000'000;
  // Asks the cluster for the id of a new ACG to take half of ACG `source` (the master gives
  // ids; docs/architecture.md §5). Called on the background thread; an error postpones that split
  // (retried after 30 s). Null: the engine never splits by itself.
  std::function<Result<uint64_t>(uint64_t source)> split_target_id;
  // Told after a split committed (on the background thread): `moved` went from `source` to
  // `target`. Until the cluster's map says so, the engine routes updates sent to `source`.
  // The split is also recorded for UnreportedSplits until SplitReported, so nothing depends
  // on this call being made (a crash may come first).
  std::function<void(uint64_t source, uint64_t target, const std::vector<FileId>& moved)>
      on_split;
  // Tests: called before an ACG's commit writes to LMDB, with that ACG locked and its updates
  // taken from the cache; a non-OK status fails the commit as an I/O error would (they go back
  // to the cache). Faults in LMDB's own I/O cannot be injected through `env`.
  std::function<Status(uint64_t acg)> commit_hook;
  // Tests: called on the splitting thread after each step of a split (1 snapshot copied,
  // 2 routes switched, 3 delta copied, 4 commit point, see engine.cc; searches wait during
  // 2-4), and 5 once searches go on, before the moved files are removed from the source and
  // before on_split. A hook may end the process.
  std::function<void(int step)> split_step_hook;

  // glibc malloc tuning for a long-running node, process-wide, applied by the first engine that
  // opens: M_MMAP_THRESHOLD fixed at 256 KiB, so large blocks (LMDB's per-environment buffers,
  // hash tables of closed ACGs, drained caches) are mmapped and return to the kernel when freed
  // instead of pinning the heap (glibc's adaptive threshold otherwise moves them to the heap
  // after the first free, where LMDB's 2 MiB calloc per environment open is also memset), and
  // malloc_trim(0) after commit passes that drained many updates. false: leave malloc alone.
  bool tune_malloc = true;
};

struct SearchRequest {
  std::string query;                 // query text (docs/query.md)
  std::string scope = "/";           // only paths equal to or below this (absolute, in-volume)
  std::optional<uint32_t> volume;    // only this volume; unset = all
  // Unset = no filtering (members of the service, docs/security.md). Set: a hit is shown only
  // when the caller could find it by walking the tree, and its record keeps only such paths
  // (hard links elsewhere stay hidden).
  std::optional<Credentials> creds;
  // With creds: whether the caller may see anything of a volume (the directories above its
  // root allow them to reach it; the index holds only what lies below a root). Null = every
  // volume. Called from the search threads, at most once per hit.
  std::function<bool(uint32_t volume)> volume_visible;
  size_t limit = 0;                  // 0 = no limit
  // Sort key: "" (unordered), or size, mtime, ctime, atime, uid, gid, path, name.
  std::string sort_by;
  bool descending = false;
  int64_t now_ns = 0;                // instant for ages; 0 = now
  std::vector<uint64_t> acgs;        // only these ACGs (sorted or not); empty = every ACG
  std::vector<uint64_t> exclude;     // never these ACGs, even when listed in `acgs`
  // A query naming a user attribute this node does not know (AttrNames) is refused with the
  // parser's "unknown attribute" error — unless this is set (one node of a cluster, where
  // another node may know it): then the search runs and SearchStats::unknown_attrs names them.
  bool report_unknown_attrs = false;
  // Volume -> the root its paths are shown under (the volume's root, or a mount point): the
  // path predicates (name, ext, path, keyword) are about those paths (Query::WithRoot), as
  // results print them; hits still carry in-volume paths. A volume not listed: its
  // in-volume paths (an engine without a cluster).
  std::map<uint32_t, std::string> volume_roots;
};

struct SearchHit {
  std::string path;    // the record's first path inside the scope
  FileRecord record;
  uint64_t acg = 0;
};

struct SearchStats {
  uint64_t acgs_total = 0;
  uint64_t acgs_skipped = 0;    // by summaries
  // Ruled out by their K-D tree (in memory) without an LMDB transaction or opening them.
  uint64_t acgs_answered_closed = 0;
  uint64_t acgs_committed = 0;  // caches committed because this search touched them
  uint64_t candidates = 0;      // records verified
  uint64_t hits = 0;
  // For a cluster search racing a migration (see Engine::AdoptAcg): the ACGs (with the
  // destination DropMovedAcg recorded) that moved away in the last kRecentMoveNs and so were
  // not searched here, and those adopted in that time that this search did include. Limited
  // to SearchRequest::acgs when that is set.
  std::vector<std::pair<uint64_t, uint64_t>> moved;
  std::vector<uint64_t> adopted;
  // With SearchRequest::report_unknown_attrs: the query's user attributes unknown here.
  std::vector<std::string> unknown_attrs;
};
// How long Search reports an ACG as lately moved or adopted (SearchStats): far longer than
// any search's requests can take to reach their nodes.
inline constexpr int64_t kRecentMoveNs = 120'000'000'000;

struct AcgInfo {
  uint64_t id = 0;
  uint64_t files = 0;
  uint64_t edges = 0;
  uint64_t cached_updates = 0;
  uint64_t disk_bytes = 0;
};

// A split committed on this node that the cluster has not acknowledged yet: `files` went from
// ACG `source` to ACG `target` (Engine::UnreportedSplits).
struct SplitNotice {
  uint64_t source = 0;
  uint64_t target = 0;
  std::vector<FileId> files;
  bool merged = false;  // a merge (Engine::MergeAcg): all of `source` went, and it is retired
};

struct IndexInfo {
  std::string name;
  IndexType type = IndexType::kBTree;
  bool builtin = false;
};

struct EngineStats {
  uint64_t acgs = 0;
  uint64_t files = 0;
  uint64_t cached_updates = 0;
  uint64_t wal_bytes = 0;
  uint64_t disk_bytes = 0;        // all LMDB files + WAL
  uint64_t index_memory_bytes = 0;// in-memory hash and K-D structures (loaded ones)
  uint64_t next_lsn = 0;
  uint64_t open_acgs = 0;         // ACGs with their index objects open now
  uint64_t acg_opens = 0;         // ACG opens since Engine::Open (incl. reopens)
  uint64_t loaded_acgs = 0;       // ACGs holding hash tables now (what max_open_acgs counts)
  uint64_t open_acg_bytes = 0;    // their bytes (what max_open_acg_bytes counts)
  uint64_t acg_unloads = 0;       // hash tables unloaded for the bounds since Engine::Open
  // The store's mapped pages resident in this process (file pages in its RSS), and how often
  // they were trimmed for max_open_acg_bytes since Engine::Open.
  uint64_t store_resident_bytes = 0;
  uint64_t map_trims = 0;
  // The store: its LMDB environments (fixed: they do not grow with the ACGs) and the
  // descriptors they hold.
  uint64_t store_environments = 0;
  uint64_t cache_bytes = 0;       // memory of cached updates (what max_cache_bytes bounds)
  // Since Engine::Open: ACG commits that committed something, and the updates they took. Their
  // ratio is what a commit's cost is spread over (each commit rewrites every B-tree page its
  // updates touch).
  uint64_t acg_commits = 0;
  uint64_t committed_updates = 0;
  // The LMDB transactions those commits took: a commit pass commits the ACGs of one store
  // shard together (one transaction and one sync for up to 65,536 updates).
  uint64_t store_commits = 0;
  // Commit passes that failed since Engine::Open (a full disk, an I/O error), the error of the
  // last one while commits keep failing ("" once one succeeds), and since when (wall clock
  // ns; 0 = not failing). The updates wait in the caches and the log meanwhile.
  uint64_t commit_failures = 0;
  std::string commit_error;
  int64_t commit_failing_since_ns = 0;
  // Splits and merges committed on this node since Engine::Open, and the durations of the
  // commit passes (one per committer tick with something due, or CommitAll) since then.
  uint64_t splits = 0;
  uint64_t merges = 0;
  metrics::HistogramSnapshot commit_seconds;
};

class Engine {
 public:
  // Opens or creates the engine in options.data_dir and replays the log. Errors: IOError,
  // Corruption (a damaged log or ACG, with the file named), InvalidArgument (bad options).
  static Result<std::unique_ptr<Engine>> Open(const EngineOptions& options);

  // Stops the background threads, commits every cache and syncs and closes the log. Returns
  // the first error: a failed final commit loses nothing (the log keeps the updates), but a
  // failed final sync means acknowledged updates may not be durable, and a daemon must exit
  // non-zero. After it only destruction is valid. The destructor closes when this was not
  // called (and logs the error).
  Status Close();
  ~Engine();

  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Acknowledges `updates` (see durability above). All or nothing: on error none of the
  // batch is acknowledged (a partially written log record is discarded on replay).
  // InvalidArgument for a bad record (invalid path, acg 0, op out of range).
  Status Apply(std::span<const Update> updates);

  // Streams matches to `on_hit` (called from one thread at a time, in no particular order
  // unless sort_by is set); return false from it to stop. `stats` may be null.
  Status Search(const SearchRequest& request, const std::function<bool(const SearchHit&)>& on_hit,
                SearchStats* stats = nullptr);
  // Convenience: collects the hits.
  Result<std::vector<SearchHit>> SearchAll(const SearchRequest& request,
                                           SearchStats* stats = nullptr);

  // Live query (indexnode/watch_hub.h): from when this returns, every acknowledged update
  // that makes a path of `spec`'s scope start or stop matching its query, or changes a
  // matching file, becomes an event of the watch, in the order the updates were applied.
  // Destroy the watch to end it. InvalidArgument for a bad query or scope (user attribute
  // names are not checked: an attribute may appear after the watch began).
  Result<std::unique_ptr<EngineWatch>> Watch(const WatchSpec& spec);

  // The current record of `id` in `acg` (cache included). NotFound when absent.
  Result<FileRecord> Get(uint64_t acg, FileId id);
  // Keeps in record->paths only those `creds` could find by walking the tree (every ancestor
  // directory grants r and x, as searches filter); false when none is left. uid 0 keeps all.
  bool RestrictToVisible(FileRecord* record, const Credentials& creds);

  // User-defined indexes (docs/architecture.md §3), fed by the user attribute of the same name.
  // Creating builds the index in every ACG. AlreadyExists / NotFound / InvalidArgument (bad name,
  // built-in name).
  Status CreateIndex(const std::string& name, IndexType type);
  Status DropIndex(const std::string& name);
  std::vector<IndexInfo> ListIndexes();

  // Commits every ACG's cache into its indexes and deletes the log prefix no longer needed.
  Status CommitAll();
  // Forces an fsync of the log now.
  Status SyncLog();

  std::vector<AcgInfo> ListAcgs();
  EngineStats Stats();
  // The edges of `acg` (src, dst, weight), for tests and the partitioner.
  Status ListEdges(uint64_t acg, std::vector<StoredEdge>* edges);

  // Moves the files `moving` of ACG `source` into the new ACG `target` (docs/architecture.md §5:
  // the node-side half of a split). Updates and searches continue meanwhile; searches pause only
  // for the final switch. Afterwards updates and Get addressed to `source` for a moved file
  // are routed to `target` (also after a restart: the routes are stored in `source`); this
  // holds for every id in `moving`, also one `source` did not hold (nothing moves for it, but
  // its later updates go to `target`). Every file is in exactly one ACG at
  // every instant a search can observe, and after a crash at any point. Errors:
  // InvalidArgument (target 0 or == source), NotFound (no source), AlreadyExists (target
  // exists); an I/O error after the target was created stops the engine (reopen to recover,
  // see engine.cc).
  Status SplitAcg(uint64_t source, uint64_t target, std::span<const FileId> moving);
  // The half of `acg` a split should move (docs/architecture.md §5): a 2-way METIS partition of the
  // graph of its files and the edges between them (symmetrised; balanced halves within `imbalance`,
  // minimal weight of cut; deterministic for `seed`), the lighter half. `report` (may be null)
  // receives the partition's figures. NotFound for an unknown ACG.
  Result<std::vector<FileId>> PlanSplit(uint64_t acg, double imbalance = 0.05, int seed = 1,
                                        SplitReport* report = nullptr);
  // Moves every file of the small ACG `source` (at most 20,000 files) into ACG `target` of
  // this node, with searches paused for the move (docs/architecture.md §5: small ACGs of one
  // application are merged). Afterwards `source` is hidden and routes every update and Get to
  // `target`, also after a restart; every file is in exactly one ACG at every instant a search can
  // observe and after a crash at any point. OK at once when `source` was merged into `target`
  // already. Errors: InvalidArgument (equal or zero ids, a source too large, an ACG merged
  // before), NotFound; an I/O error during the move stops the engine (reopen to recover).
  Status MergeAcg(uint64_t source, uint64_t target);
  // Test hook: MergeAcg, but the process "dies" after step 1 (copied) or 2 (committed).
  Status MergeAcgCrashingForTesting(uint64_t source, uint64_t target, int step);

  // The committed splits and merges not yet acknowledged with SplitReported. Each is recorded
  // in the target's directory before its commit point and survives restarts, so the
  // cluster's map can always be brought up to date (the master's SplitDone is idempotent).
  // Cheap when there are none. Errors: IOError, Corruption (a damaged record).
  Result<std::vector<SplitNotice>> UnreportedSplits();
  // The cluster knows about the move from `source` into `target`: forget its record. OK when
  // there is none.
  Status SplitReported(uint64_t source, uint64_t target);
  // Test hook: SplitAcg, but the process "dies" (CrashForTesting) after step 1-4 (engine.cc).
  Status SplitAcgCrashingForTesting(uint64_t source, uint64_t target,
                                    std::span<const FileId> moving, int step);

  // ---- Moving an ACG to another node in bulk (docs/architecture.md §5) ----
  // Only a plain ACG moves: not one with routes (a split or merge source), nor one being split
  // into or holding an unreported split (InvalidArgument).
  //
  // Source, step 1: stops updates to ACG `acg` — from here an Apply whose batch touches it,
  // directly or through a split's routes, waits (at most 10 s, then Unavailable) until
  // ThawAcg or DropMovedAcg — commits it, and writes a compacted copy of its data (its key
  // ranges as a single-file LMDB environment, Store::ExportAcg), synced, to the new file
  // `path` ("" = no copy: the ACG is only frozen, e.g. to drop a copy another node owns).
  // Every update acknowledged before the call is in the copy. On error the ACG is thawed.
  Status FreezeAndCopyAcg(uint64_t acg, const std::string& path);
  // Source, the move did not happen: the waiting batches go on here.
  Status ThawAcg(uint64_t acg);
  // Source, step 2 (after the destination adopted the copy and the cluster's map names it):
  // records durably that `acg` moved to `destination` (an opaque non-zero tag: the node
  // server's node id), removes it between two searches, deletes its directory and wakes the
  // waiting batches. From then on an update or Get that reaches it, directly or through a
  // route, and the log's replay of its old records, get Redirect ("ACG n moved to node d"),
  // never a new empty ACG. REQUIRES: frozen by FreezeAndCopyAcg. OK when asked again.
  // `set_aside` (not "") keeps the directory, renamed to that path, instead of removing it:
  // a copy the cluster says is another node's is kept for an administrator to look at.
  Status DropMovedAcg(uint64_t acg, uint64_t destination, const std::string& set_aside = "");

  // Damaged ACGs (docs/faults.md): a data file found damaged at start (common/lmdb_check.h)
  // or while serving (a record failing its checksum) is quarantined — moved to
  // <data>/quarantine/acg-<id>-<time>, never removed, a log line naming the file — and an
  // empty ACG takes its place, marked to rebuild. Until MarkRebuilt, a search that would
  // include it fails with Unavailable saying why; updates go on. ACG -> why.
  std::map<uint64_t, std::string> DamagedAcgs();
  // The ACG holds every file again (its volume was re-indexed): searches may use it.
  Status MarkRebuilt(uint64_t acg);
  // Destination: installs the file `path` written by FreezeAndCopyAcg (on any node) as ACG
  // `acg` here. The file is renamed into the data directory (copied when on another file
  // system). The ACG's applied LSN becomes this node's log position, so a crash replays
  // exactly the updates it acknowledged after this call. All or nothing, also across a crash
  // (an interrupted adoption is discarded by Open). AlreadyExists when `acg` is here.
  // `frozen`: updates to it wait from the start, as after FreezeAndCopyAcg, until ThawAcg (a
  // migration keeps both copies identical until the source has dropped its own).
  Status AdoptAcg(uint64_t acg, const std::string& path, bool frozen = false);
  // The destination `acg` moved to (DropMovedAcg), or 0.
  uint64_t MovedTo(uint64_t acg);

  // Test hook: stops every thread and closes every file WITHOUT committing caches, syncing or
  // truncating anything — as if the process died here. Afterwards only destruction is valid.
  void CrashForTesting();

 private:
  class Impl;
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace propeller

#endif  // PROPELLER_INDEXNODE_ENGINE_H_
