// Engine::Impl, the engine behind engine.h, declared here and defined in four files, one per
// job: engine.cc (construction, the write path, commits, search, indexes, introspection),
// engine_open.cc (opening a data directory: its layout and upgrade, recovery of interrupted
// splits, merges and adoptions, the log's replay), engine_split.cc (splits and merges) and
// engine_move.cc (moves between nodes). Its parts with a job and a lock of their own are
// components (open_acgs.h, move_gate.h, split_reports.h, quarantine.h, periodic_thread.h,
// wal.h, store.h); every mutex here is a common/mutex.h type whose guarded members say so.
// Internal to the engine: include only from those files.
#ifndef PROPELLER_INDEXNODE_ENGINE_IMPL_H_
#define PROPELLER_INDEXNODE_ENGINE_IMPL_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "common/thread_pool.h"
#include "indexnode/acg.h"
#include "indexnode/attr_names.h"
#include "indexnode/dir_table.h"
#include "indexnode/engine.h"
#include "indexnode/move_gate.h"
#include "indexnode/open_acgs.h"
#include "indexnode/periodic_thread.h"
#include "indexnode/quarantine.h"
#include "indexnode/split_reports.h"
#include "indexnode/store.h"
#include "indexnode/wal.h"
#include "indexnode/watch_hub.h"

namespace propeller {

// InvalidArgument unless `u` is an update the engine can log and apply (Apply, and the log's
// replay).
Status ValidateUpdate(const Update& u);

class Engine::Impl {
 public:
  static EngineOptions WithDefaults(EngineOptions o);

  explicit Impl(const EngineOptions& o);

  ~Impl();

  Status Close();

  Status Open();

  static void TuneMalloc();

  // The ACG `id`, opening (creating) it when this process has not seen it yet.
  Result<Acg*> GetOrCreateAcg(uint64_t id);

  std::vector<Acg*> AllAcgs();

  // The ACGs searches and listings see: all but the target of a split in progress (it holds
  // copies of files its source still answers for).
  std::vector<Acg*> VisibleAcgs();
  // VisibleAcgs() without leaving out those merged away or retired (Search asks that in its
  // parallel judge): reads only the few ACGs a binary search for the hidden one visits.
  std::vector<Acg*> SearchableAcgs();

  // The ACG that holds file `id` for an update or lookup addressed to `acg_id`: a split leaves
  // routes behind in its source (Acg::RouteOf), followed here, also across later splits.
  uint64_t Route(uint64_t acg_id, FileId id);

  // ---- the cache of open ACGs (open_acgs.h) ----

  void OnAcgOpened(Acg* acg) { open_acgs_.Opened(acg); }
  void EnforceOpenBounds() { open_acgs_.Enforce(); }

  // ---- write path ----

  // Buffers of Apply (per thread, reused across calls) and of replay.
  struct ApplyScratch {
    struct Group {
      Acg* acg = nullptr;
      uint64_t acg_id = 0;
      uint32_t first = 0, last = 0;  // [first, last) of `order`
      uint32_t begin = 0, end = 0;   // the group's entries in the staged batch
    };
    std::vector<uint64_t> dest;   // batch position -> the ACG it goes to (routes followed)
    std::vector<uint32_t> order;  // batch positions grouped by ACG (stable)
    std::vector<uint32_t> entry_of;  // batch position -> its entry in the staged batch
    std::vector<Group> groups;
    std::string payload;          // the log record
    size_t bytes_per_update = 0;  // of the previous batch, to size the next one
  };

  // Groups the batch by ACG keeping the batch order inside each ACG — one lookup, one cache
  // lock and one reference per ACG instead of per update — and resolves (creates) the ACGs.
  // Groups `updates` by the ACG each goes to (following routes), creating ACGs this node has
  // not seen. An ACG that moved to another node (DropMovedAcg) gives a Redirect, or with
  // `skip_moved` (the log's replay) a group with a null acg, which the caller drops.
  Status GroupByAcg(std::span<const Update> updates, ApplyScratch* sc, bool skip_moved);

  // Encodes the updates of sc->groups into one batch for the caches (outside the log lock;
  // under it the caches only take references). Accounted in total_cache_bytes_ until freed.
  std::shared_ptr<StagedBatch> Stage(std::span<const Update> updates, ApplyScratch* sc);

  // on_logged of a batch grouped before a split switched routes: caches each group's entries
  // with the ACG they go to now, in runs. Rare (only batches in flight at the switch). Under
  // the log lock. True when a cache went over its bound.
  bool CacheRerouted(const std::shared_ptr<StagedBatch>& staged, const ApplyScratch& sc,
                     int64_t now);

  Status Apply(std::span<const Update> updates);

  // Apply, unless the batch touches a frozen ACG: then nothing happens and *frozen names it.
  Status ApplyOnce(std::span<const Update> updates, uint64_t* frozen);
  // ApplyOnce while watches are registered (watch_hub.h): reads every file's record before
  // the batch, applies it, and publishes each change in order. Holds watch_mu_ exclusively.
  Status ApplyWatched(std::span<const Update> updates, uint64_t* frozen);
  // The record of `id` as searches will see it — committed state and the write cache —
  // without committing (nullopt: not indexed). Follows routes.
  Result<std::optional<FileRecord>> CurrentRecord(uint64_t acg, FileId id);
  Result<std::unique_ptr<EngineWatch>> Watch(const WatchSpec& spec);
  // The last watch ended: the ACGs stop counting their cached entries.
  void StopTrackingIds();

  // Commits caches that are too old or too big; with force_all, every cache. Every
  // store_trim_interval_ns it also bounds the store's mapped pages (TrimMapsIfOver).
  Status CommitDue(bool force_all);
  // The pages of the store's maps this process holds (file pages, counted in its RSS: every
  // record a commit or search read) are unmapped when they exceed max_open_acg_bytes
  // (Store::TrimMaps; the page cache keeps them). REQUIRES: commit_mu_ (one at a time).
  void TrimMapsIfOver() PROPELLER_REQUIRES(commit_mu_);

  // Commits `acg`'s cache up to the durable end of the log, so the indexes never hold an
  // update the log could lose in a power loss. durable_lsn = 0: sync the log now and use its
  // end (everything acknowledged before this call); otherwise an LSN already known durable.
  Status CommitAcg(Acg* acg, uint64_t durable_lsn = 0, uint64_t* committed = nullptr);
  // Commits `acgs` (of one store shard) up to `durable_lsn` in one transaction
  // (Acg::CommitGroup), and one by one if that fails; adds the updates committed to *committed.
  Status CommitGroup(std::span<Acg* const> acgs, uint64_t durable_lsn, uint64_t* committed);
  // Counts one ACG's commit of `n` updates (none when 0) in the stats; adds n to *committed
  // (may be null).
  void NoteCommitted(size_t n, uint64_t* committed);

  static void Subtract(std::atomic<uint64_t>* counter, uint64_t n);

  // Deletes the log segments every ACG has committed.
  Status TruncateLog();

  Status CommitAll();

  // Every commit path reports here (CommitDue, CommitAcg): Stats() shows the failure until a
  // commit succeeds again.
  void NoteCommit(const Status& s);

  // Stops the background threads. A split failing on the splitter thread stops the engine
  // from there (Crash): the splitter is then only told to stop, and joined at destruction.
  void StopCommitter();

  void SplitOversized(std::map<uint64_t, int64_t>* retry_at);

  // ---- search ----

  // `on_hit` may move from the hit it is given.
  Status Search(const SearchRequest& req, const std::function<bool(SearchHit&)>& on_hit,
                SearchStats* stats_out);

  // Matches of one ACG handed to the caller under one lock (Search).
  static constexpr size_t kHitBatch = 64;

  void PruneRecentMovesLocked() PROPELLER_REQUIRES(acgs_mu_);

  // Fills stats->moved and ->adopted from the recent moves (limited to `wanted` if given),
  // with `searched` the ACGs this search takes.
  void NoteRecentMoves(const std::vector<Acg*>& searched, const std::vector<uint64_t>* wanted,
                       SearchStats* stats) PROPELLER_REQUIRES_SHARED(search_gate_);

  static void SortHits(const std::string& key, bool desc, std::vector<SearchHit>* hits);

  // The ACG `id` if it is here (not one that moved away).
  Acg* FindAcg(uint64_t id);

  bool RestrictToVisible(FileRecord* record, const Credentials& creds) const;

  Result<FileRecord> Get(uint64_t acg_id, FileId id);

  // ---- user indexes ----

  Status CreateIndex(const std::string& name, IndexType type);

  Status DropIndex(const std::string& name);

  std::vector<IndexSpec> Catalogue();
  // The user attributes `query` names that neither AttrNames nor the catalogue knows.
  std::vector<std::string> UnknownAttrs(const Query& query);

  // Makes `specs` the catalogue and brings every open ACG in line now; closed ACGs reconcile
  // when they next open.
  Status ApplyCatalogue(std::vector<IndexSpec> specs) PROPELLER_REQUIRES(catalogue_mu_);

  std::vector<IndexInfo> ListIndexes();

  // ---- introspection ----

  std::vector<AcgInfo> ListAcgs();

  EngineStats Stats();

  Status ListEdges(uint64_t acg_id,
                   std::vector<StoredEdge>* edges);

  Status SyncLog() { return wal_->Sync(); }

  // ---- splits ----

  // Moves the files `moving` of ACG `source` into the new ACG `target` (docs/architecture.md §5),
  // while updates and searches go on:
  //   1. commit the source and watch its commits; copy the moving files' records and edges
  //      from a snapshot into the target, built under a marker file and hidden from searches;
  //   2. then, with searches held at the gate and both ACGs locked: switch routes under the log
  //      lock (updates logged from here on go to the target), commit the source up to there,
  //      copy what its commits changed since the snapshot, and remove the moving files from the
  //      source — recording the routes in the same transaction, the split's commit point —
  //      then drop the marker and show the target.
  // A crash before the commit point leaves the source whole (Open removes the marked target;
  // the log replays into the source); after it, Open keeps the target and the recorded
  // routes send logged updates there. An error after the target exists stops the engine
  // (like CrashForTesting) so that reopening recovers by the same rules; only destruction is
  // valid then. `crash_after_step` (tests): stop after step 1..4 as if the process died.
  Status SplitAcg(uint64_t source_id, uint64_t target_id, std::span<const FileId> moving_ids,
                  int crash_after_step);

  Result<std::vector<FileId>> PlanSplit(uint64_t acg_id, double imbalance, int seed,
                                        SplitReport* report);

  // Updates that bring the target of a split to the source's state for some files: a kPut per
  // record, a kDelete per file gone, and kAddEdge for each edge's weight beyond what the
  // target has (`have`; edge weights only grow; an update carries at most 2^32-1).
  static void AppendSplitCopy(uint64_t target, const std::vector<FileRecord>& records,
                              const std::vector<FileId>& gone,
                              const std::vector<StoredEdge>& edges,
                              const std::vector<StoredEdge>& have,
                              std::vector<Update>* out);

  Result<std::vector<SplitNotice>> UnreportedSplits();

  Status SplitReported(uint64_t source, uint64_t target) {
    return reports_.Reported(source, target);
  }

  // Moves every file of the small ACG `source` into ACG `target` on this node
  // (docs/architecture.md §5: small ACGs of one application are merged). Everything happens at one
  // switch, with searches held at the gate and both ACGs locked:
  //   - under the log lock, `source` starts routing everything to `target`;
  //   - both are committed up to there; the source's records and edges are copied into the
  //     target (a MERGING marker in the target's directory, written first, names the source);
  //   - one source transaction deletes its files and records merged_into: the commit point;
  //   - the marker goes.
  // A crash before the commit point is undone by Open (RecoverMerge: the copies leave the
  // target; the log replays into the source); after it the merge stands. `crash_after_step`
  // (tests): 1 = after the copy, 2 = after the commit point.
  Status MergeAcg(uint64_t source_id, uint64_t target_id, int crash_after_step);

  // After the commit point of a split or merge: removes the moved files' records from
  // `source` a chunk at a time (searches of `source` skip them meanwhile and wait for one
  // chunk at most). A failure is logged: the records stay hidden, and the next Open finishes
  // the clean-up.
  void CleanUpMoved(Acg* source, const Acg::FileIdSet& ids);

  // The switch of a split or merge runs between LockSwitch and UnlockSwitch, with searches
  // held at the gate (they run before or after it, never across) and both ACGs locked (in
  // this order). On failure (`s` not OK) UnlockSwitch freezes both ACGs: neither may commit
  // again before the engine stops: after the switch, a commit of the source would move its
  // applied LSN past updates that only the (discarded) target has. Errors leave the locks
  // before the caller stops the engine: Crash() waits for the committer, which may be waiting
  // for them.
  void LockSwitch(Acg* source, Acg* target)
      PROPELLER_ACQUIRE(search_gate_, source->mutex(), target->mutex());
  void UnlockSwitch(Acg* source, Acg* target, const Status& s)
      PROPELLER_RELEASE(search_gate_, source->mutex(), target->mutex());

  // Open: ACG `target` has a MERGING marker. If its source recorded the merge, only the
  // marker is left to remove; otherwise the copies of the source's files leave the target
  // (every file is still in the source), with the merge's report.
  Status RecoverMerge(Acg* target);

  // ---- moving ACGs between nodes (engine.h: FreezeAndCopyAcg, AdoptAcg, DropMovedAcg) ----
  //
  // Source side: FreezeAndCopyAcg marks the ACG frozen, waits (apply_gate_) until no Apply
  // that missed the mark is still running, commits it and copies its environment; Apply
  // batches touching it wait from then on. DropMovedAcg records the move in <data>/moved
  // (its commit point), retires the ACG with searches held off for that instant, removes its
  // directory and wakes the waiting batches, which get a Redirect. ThawAcg instead lets them
  // through (the move did not happen).
  // Destination side: AdoptAcg renames the copy into acg/<id> under an ADOPTED marker, gives
  // it this node's log position as its applied LSN, and removes the marker: its commit point.
  // Open discards a directory still marked (the source keeps the ACG until the cluster's map
  // names this node, which only happens after AdoptAcg returned) and finishes a drop that a
  // crash interrupted (a directory the moved file names).

  Status FreezeAndCopyAcg(uint64_t id, const std::string& path);

  Status ThawAcg(uint64_t id);

  Status DropMovedAcg(uint64_t id, uint64_t destination, const std::string& set_aside);

  Status AdoptAcg(uint64_t id, const std::string& path, bool frozen);

  uint64_t MovedTo(uint64_t id);

  // NotFound, or the Redirect of an ACG that moved away.
  Status NotHere(uint64_t id);
  Status MovedError(uint64_t id);
  static Status MovedStatus(uint64_t id, uint64_t destination);

  // Only a plain ACG moves: routes (a split or merge source), a split in progress and an
  // unreported split into it (its record lives in its directory here) keep it on this node.
  Status CheckMovable(Acg* acg);

  // <data>/moved: "PMV1\n", then "<acg> <destination>\n" per moved ACG, then "crc <hex>\n"
  // with the masked CRC-32C of everything before it. Replaced atomically.
  std::string MovedPath() const { return JoinPath(options_.data_dir, "moved"); }
  Status WriteMoved(const std::map<uint64_t, uint64_t>& moved);
  Status ReadMoved(std::map<uint64_t, uint64_t>* moved);

  // ACGs without a log: the log (with every acknowledged update not committed yet) was
  // removed. Starting would answer without those updates and without saying so: refuse, unless
  // an administrator put the file kStartWithoutLog in the log's directory (then it is removed
  // and the engine starts with what the ACGs committed). Every engine that ever held an ACG
  // keeps at least one log segment (a clean close keeps the last).
  Status CheckLogPresent(const std::vector<std::string>& acg_names);

  Status RemoveDir(const std::string& dir) { return options_.env->RemoveRecursively(dir); }
  // An ACG's data in the store, then its control directory (in this order: a directory
  // without data is an empty ACG, data without a directory is dropped at the next Open).
  Status RemoveAcgData(uint64_t id);

  // The data directory's layout (schemas/LAYOUT.md): <data>/LAYOUT holds its number; a
  // directory without one is of layout 3 (or new). A newer layout is refused.
  Status CheckLayout();
  bool upgrading_ = false;  // CheckLayout found an older layout (Open reports progress)

  // Converts the ACG directories of layout 3 (acg/<id>/data.mdb, one environment each) into
  // the store, logging progress: each ACG in one transaction of its shard (the commit point),
  // after which its old files go. An interrupted conversion resumes at the next open (the
  // ingest replaces a partial copy). Damaged ones were quarantined by CheckAtOpen first.
  Status UpgradeLayout3(const std::vector<std::string>& names);

  // Drops the store's key ranges of ACGs that have no directory (a removal cut short).
  Status DropOrphanRanges(const std::vector<std::string>& names);

  void Crash();

 private:
  // Routes chain when a split's target is split again; a cycle cannot arise (targets are new
  // ACGs), this only bounds the walk.
  static constexpr int kMaxRouteHops = 64;
  static constexpr char kSplitMarker[] = "SPLITTING";
  static constexpr char kMergeMarker[] = "MERGING";
  // An adopted copy's directory is acg/<id>.adopt until it is complete, then acg/<id> with
  // this marker until its commit point (AdoptAcg).
  static constexpr char kAdoptSuffix[] = ".adopt";
  static constexpr char kAdoptMarker[] = "ADOPTED";
  // How long an Apply waits for a move of one of its ACGs to end.
  static constexpr int64_t kMoveWaitNs = 10'000'000'000;
  // Moved files removed from their source per transaction after a split or merge.
  static constexpr size_t kCleanupChunk = 2048;
  // Catch-up passes before a split's switch, until one copies at most kSplitSmallDelta updates.
  static constexpr size_t kSplitCatchUpPasses = 4;
  static constexpr size_t kSplitSmallDelta = 256;

 public:
  // ---- damaged ACGs (docs/faults.md, "Damaged files") ----

  bool IsDamaged(uint64_t id) { return !quarantine_.WhyOf(id).empty(); }

  std::map<uint64_t, std::string> DamagedAcgs();

  Status MarkRebuilt(uint64_t id) { return quarantine_.MarkRebuilt(id); }

  // Why ACG `acg` cannot answer searches, or "".
  std::string DamageOf(Acg* acg);

 private:
  std::string AcgDir(uint64_t id) const {
    return JoinPath(JoinPath(options_.data_dir, "acg"), std::to_string(id));
  }
  std::string SplitMarkerPath(uint64_t id) const { return JoinPath(AcgDir(id), kSplitMarker); }
  std::string MergeMarkerPath(uint64_t id) const { return JoinPath(AcgDir(id), kMergeMarker); }

  // glibc's M_MMAP_THRESHOLD with tune_malloc (EngineOptions).
  static constexpr int kMmapThreshold = 256 << 10;
  // How often the committer looks at the caches.
  static constexpr int64_t kCommitterTickNs = 50'000'000;
  // The most cached updates one group commit takes (CommitDue; a single ACG may exceed it).
  static constexpr size_t kGroupCommitUpdates = 65'536;
  // A commit pass that drained at least this many updates returns freed heap to the kernel.
  static constexpr uint64_t kTrimAfterUpdates = 100'000;

  EngineOptions options_;
  SplitReports reports_;  // splits and merges the master has not been told of
  Quarantine quarantine_;  // damaged ACGs waiting for their rebuild
  std::unique_ptr<ThreadPool> pool_;
  size_t commit_lanes_ = 1;  // ACG commits run at once in one pass. Constant after Open.
  std::unique_ptr<ThreadPool> commit_pool_;  // commit_lanes_ - 1 workers, or null
  std::unique_ptr<Wal> wal_;
  std::string catalogue_path_;
  AttrNames attr_names_;  // the user attribute names accepted here (set at Open)
  DirTable dir_table_;
  // Live queries. Batches are applied under watch_mu_ shared while no watch is registered,
  // and exclusively while one is (ApplyWatched), so a watch registered under it exclusively
  // sees every batch acknowledged after Watch returned, and each batch's changes in order.
  SharedMutex watch_mu_;
  // The ACGs count their cached entries per file (Acg::TrackCachedIds): on while watches
  // exist, turned off by the first batch after the last one ends. Written under watch_mu_.
  std::atomic<bool> tracking_ids_{false};
  WatchHub watches_{[this](uint32_t volume, const std::string& path, const Credentials& creds) {
    return dir_table_.Visible(volume, path, creds);
  }};
  std::atomic<bool> crashed_{false};
  std::atomic<uint64_t> total_cached_{0};
  // Bytes of the staged batches caches still reference (StagedBatch::bytes()).
  std::atomic<uint64_t> total_cache_bytes_{0};
  std::atomic<uint64_t> use_clock_{0};
  std::atomic<int64_t> busy_acgs_{0};  // AcgContext::busy_acgs
  std::atomic<uint64_t> acg_commits_{0};        // Stats
  std::atomic<uint64_t> store_commits_{0};      // Stats
  std::atomic<uint64_t> committed_updates_{0};
  std::atomic<uint64_t> splits_{0}, merges_{0};  // Stats: done since Open
  // Stats: the duration of each commit pass (CommitDue), in seconds.
  metrics::Histogram commit_seconds_{metrics::LatencyBuckets()};

  // Lock order: catalogue_mu_ > commit_mu_ > acgs_mu_ > (Acg locks); the components' locks
  // (open_acgs_, frozen_, reports_, quarantine_) are leaves, open_acgs_'s taken with no Acg
  // lock held (eviction try-locks ACGs after releasing it); specs_mu_ is a leaf
  // (Acg::OpenLocked reads the catalogue through it while holding the Acg's lock);
  // Wal::mu_ > Acg cache locks.
  Mutex catalogue_mu_;
  Mutex specs_mu_;
  // Written under catalogue_mu_ too.
  std::vector<IndexSpec> user_indexes_ PROPELLER_GUARDED_BY(specs_mu_);
  std::unique_ptr<Store> store_;  // set by Open; outlives acgs_
  AcgContext ctx_;  // constant after Open; outlives acgs_
  SharedMutex acgs_mu_;
  std::map<uint64_t, std::unique_ptr<Acg>> acgs_ PROPELLER_GUARDED_BY(acgs_mu_);  // never shrinks
  // acgs_'s values in id order, for AllAcgs, VisibleAcgs and SearchableAcgs: a walk of the
  // map's nodes took 2.5 ms per search at 10,000 ACGs. Rebuilt (under acg_list_mu_, with
  // acgs_mu_ held shared) when acgs_changes_ moved on; every change of acgs_ adds one to it.
  uint64_t acgs_changes_ PROPELLER_GUARDED_BY(acgs_mu_) = 0;
  Mutex acg_list_mu_ PROPELLER_ACQUIRED_AFTER(acgs_mu_);
  std::vector<Acg*> acg_list_ PROPELLER_GUARDED_BY(acg_list_mu_);
  uint64_t acg_list_changes_ PROPELLER_GUARDED_BY(acg_list_mu_) = UINT64_MAX;
  // A copy of acg_list_, current. REQUIRES acgs_mu_ (shared or exclusive).
  std::vector<Acg*> AcgListLocked() PROPELLER_REQUIRES_SHARED(acgs_mu_);
  // Retired ACGs replaced in acgs_ by an adopted copy of the same id: kept, so pointers that
  // threads took before stay valid.
  std::vector<std::unique_ptr<Acg>> retired_ PROPELLER_GUARDED_BY(acgs_mu_);
  // ACG -> node it moved to (<data>/moved).
  std::map<uint64_t, uint64_t> moved_ PROPELLER_GUARDED_BY(acgs_mu_);
  std::atomic<bool> any_moved_{false};  // moved_ is not empty
  // When ACGs moved away or were adopted, monotonic ns (SearchStats::moved, adopted); pruned
  // after kRecentMoveNs.
  std::map<uint64_t, int64_t> moved_at_ PROPELLER_GUARDED_BY(acgs_mu_);
  std::map<uint64_t, int64_t> adopted_at_ PROPELLER_GUARDED_BY(acgs_mu_);
  std::atomic<bool> any_recent_moves_{false};  // a move or adoption happened since Open
  // The target of a split in progress, or 0.
  uint64_t hidden_acg_ PROPELLER_GUARDED_BY(acgs_mu_) = 0;

  // ---- splits (SplitAcg) ----
  Mutex split_mu_;  // one split at a time
  PeriodicThread splitter_;  // SplitOversized; stopped with the committer
  // ACG -> monotonic ns before which its split is not retried. The splitter thread's only.
  std::map<uint64_t, int64_t> split_retry_at_;
  // Searches hold it shared throughout; a split's last step holds it exclusively, so that no
  // search sees a moved file in both ACGs or in neither. Lock order: before any Acg's rw_.
  SharedMutex search_gate_;
  std::atomic<bool> any_routes_{false};     // some ACG has routes: Apply follows them
  std::atomic<uint64_t> route_epoch_{0};    // changed (under the log lock) when routes switch
  std::atomic<uint64_t> split_hold_lsn_{0};  // TruncateLog keeps LSNs >= this; 0 = none
  OpenAcgs open_acgs_;  // the bound on open ACGs (bounds set at Open)
  Mutex commit_mu_;  // serialises CommitDue passes
  // When CommitDue last looked at the store's mapped pages (EngineOptions::
  // store_trim_interval_ns: the kernel walks the maps' page tables for /proc/self/smaps, ~6%
  // of a batched-update run at 10 M files when it looked every 2 s).
  int64_t last_map_check_ns_ PROPELLER_GUARDED_BY(commit_mu_) = 0;
  std::atomic<uint64_t> map_trims_{0};  // Stats

  // ---- moves (FreezeAndCopyAcg) ----
  ApplyGate apply_gate_;
  FrozenAcgs frozen_;  // ACGs whose updates wait (being moved)

  bool closed_ = false;   // Close() ran; by the owner's thread only
  Mutex health_mu_;  // a leaf
  uint64_t commit_failures_ PROPELLER_GUARDED_BY(health_mu_) = 0;
  // The last commit's, when it failed.
  Status commit_error_ PROPELLER_GUARDED_BY(health_mu_);
  // Wall clock; 0 = not failing.
  int64_t failing_since_ns_ PROPELLER_GUARDED_BY(health_mu_) = 0;

  PeriodicThread committer_;  // CommitDue every tick, and when a cache is over its bound
};

}  // namespace propeller

#endif  // PROPELLER_INDEXNODE_ENGINE_IMPL_H_
