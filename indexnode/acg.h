// Acg: one access-causality partition on an index node (docs/architecture.md §3, §6) — its key
// ranges in the node's store, its index structures, its write cache and its summary.
//
// Its data lives in one shard of the node's Store (store.h), every key led by
// AcgKeyPrefix(id) (P below), in these databases of the shard:
//   files       P ‖ FileIdKey(id) -> EncodeStoredRecord(record)  (schemas/record_format.h)
//   dirs        P ‖ FileIdKey(id) -> the same, directories only (permission checks)
//   edges       P ‖ EdgeKey(src, dst) -> EdgeValue                (schemas/keys.h)
//   meta        P ‖ "version" -> u64, P ‖ "applied_lsn" -> u64, P ‖ "summary" -> AcgSummary,
//               P ‖ "counts" -> files u64 ‖ edges u64,
//               P ‖ "idx:<name>" -> u8 IndexType for every index built in this ACG (+ 0x80:
//               a B-tree of posting chunks),
//               P ‖ "merged_into" -> u64 (a merge's commit point), P ‖ "cleanup" -> "1" while
//               moved files await removal (RecordMovedHeld / RemoveHeld)
//   moved       P ‖ FileIdKey(id) -> u64 ACG: files split off, and where to (routes)
//   bt.path     the built-in `path` B-tree (one entry per path of every record)
//   bp.keyword  the built-in `keyword` B-tree (PathKeywords of every path), in posting chunks
//               (index/btree_index.h); an ACG whose keyword index has an older format (a hash,
//               hs.keyword, or one key per entry, bt.keyword) rebuilds it when it opens
//   (the built-in `inode` K-D tree over size, mtime, ctime, atime, uid and gid has no database:
//   it loads its points from `files` (ScanPoints), so an attribute change writes one page, the
//   record's, not a second copy of the point; data directories of older versions have a
//   `kd.inode`, dropped at their first open)
//   bt.<name> / hs.<name>   user-defined indexes, fed by the user attribute <name>
// (index entries are P ‖ the index's key, index.h). <dir>/ is the ACG's control directory
// (markers: DAMAGED, and the engine's split, merge and adoption markers); no data.
// "applied_lsn" is committed in the same LMDB transaction as the updates it covers, so after
// any crash an update is in the indexes iff its LSN <= applied_lsn: replay is exact.
//
// Open and closed. An Acg object exists for every partition of the node for the node's
// lifetime. It opens at the first operation that needs LMDB (commit, a search that cannot be
// answered from the K-D tree, Get, edges, directories) — the engine opens every ACG at start
// — and then stays open: opening reconciles the index set with the node's catalogue (user
// indexes created or dropped while it was closed are built or dropped), reattaches the K-D
// tree and creates the index objects, which hold no memory to speak of (the store's
// environments are always open: opening maps nothing). What the engine's cache of open ACGs
// bounds is memory: the tables of user hash indexes, loaded when a search first probes them
// and unloaded by TryUnload. An ACG is closed again only by a failure (its in-memory state is
// dropped, to be rebuilt from LMDB at the next use) or by Retire. A closed ACG keeps in
// memory its id, directory, applied_lsn, counts, summary, write cache and K-D tree — a
// search whose K-D box has no point in it is answered without opening it.
//
// Threading and locks. Lock order: rw_ before cache_mu_ before summary_mu_; all below
// Wal::mu_ (AppendToCache runs under it). rw_ is held exclusively by Commit, opening, closing,
// loading and index reconciliation, and shared by searches and reads, which therefore never
// see a half-applied commit or a closing environment. The cache may grow while a commit runs;
// the commit takes what was cached when it started. An operation that needs the environment
// first pins the ACG (pins_), then opens it if closed; TryUnload refuses pinned ACGs and never
// blocks (try-lock), so the engine may call it on any ACG from any thread.
#ifndef PROPELLER_INDEXNODE_ACG_H_
#define PROPELLER_INDEXNODE_ACG_H_

#include <lmdb.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/mutex.h"
#include "common/query/query.h"
#include "common/record.h"
#include "common/status.h"
#include "indexnode/index/index.h"
#include "indexnode/index/kdtree_index.h"
#include "indexnode/index_table.h"
#include "indexnode/store.h"
#include "indexnode/summary.h"

namespace propeller {

class AcgPlanner;  // acg_search.cc

class Acg;

// An operation that finds its ACG closed again after opening it (a large commit closes the ACG
// it committed; see acg.cc) reopens it, at most this many times before reporting Unavailable.
inline constexpr int kMaxOpenAttempts = 1000;

struct IndexSpec {
  std::string name;
  IndexType type = IndexType::kBTree;
  bool operator==(const IndexSpec&) const = default;
};

// What a query needs of every ACG it searches, computed once per query (Acg::ShapeOf) rather
// than in each of its 10,000 ACGs.
struct AcgQueryShape {
  std::vector<std::string> index_names;  // the in-memory structures its plan may probe
  bool keyword_probe = false;            // it is, or is an AND of, a keyword equality
  uint32_t box_axes = 0;                 // bit a: a predicate on inode axis a (not under NOT)
};

// What a search asks of one ACG.
struct AcgSearchRequest {
  const Query* query = nullptr;
  const AcgQueryShape* shape = nullptr;  // Acg::ShapeOf(*query); null: computed per ACG
  std::string_view scope = "/";          // outlives the search
  std::optional<uint32_t> volume;
  // Sorted; records of these volumes are left out (another pass of the search answers them
  // with their own query: Engine::Search with volume roots). Null = none.
  const std::vector<uint32_t>* skip_volumes = nullptr;
  // Called for each matching path: a record with hard links matches once per link in scope
  // that satisfies the query with its own name and path. Return false to stop. The record is
  // a scratch object the callee may move from (each match is decoded afresh, or copied).
  std::function<bool(const std::string& path, FileRecord& record)> on_match;
  const std::atomic<bool>* stop = nullptr;  // polled between candidates; may be null
};

struct AcgSearchStats {
  uint64_t candidates = 0;
  uint64_t matches = 0;
  // The K-D tree (in memory) proved "no match": no LMDB transaction, nothing opened or loaded.
  bool answered_closed = false;
};

// One acknowledged update in a write cache. The record (kPut, kSetAttrs, kRemoveAttrs) is kept
// encoded (EncodeRecord) in its StagedBatch's bytes — ~3x smaller than an Update object, no
// allocation per update — and decoded by the commit that applies it.
struct CachedUpdate {
  uint64_t offset = 0;  // the record's encoding: [offset, offset + size) of the batch's bytes
  uint32_t size = 0;    // 0 for kDelete and kAddEdge
  UpdateOp op = UpdateOp::kPut;
  uint32_t edge_weight = 0;  // kAddEdge
  FileId id;                 // the record's id; kAddEdge: the source
  FileId edge_dst;           // kAddEdge
  // The record's inode generation (kPut: as in its encoding); kAddEdge: the source's.
  uint32_t generation = 0;
  uint32_t edge_dst_generation = 0;  // kAddEdge
};

// The cache entries of one logged batch, grouped by ACG and shared by the caches of every ACG
// the batch touches: acknowledging costs one allocation per batch and a reference per ACG,
// not a copy per update. Freed when the last of those ACGs has committed its part.
struct StagedBatch {
  StagedBatch() = default;
  StagedBatch(const StagedBatch&) = delete;
  StagedBatch& operator=(const StagedBatch&) = delete;
  // Subtracts bytes() from *live_bytes when set (the engine's accounting of cache memory).
  ~StagedBatch();
  uint64_t bytes() const { return entries.capacity() * sizeof(CachedUpdate) + data.capacity(); }

  uint64_t lsn = 0;  // set before any cache references the batch
  std::vector<CachedUpdate> entries;
  std::string data;  // the encoded records of `entries`
  std::atomic<uint64_t>* live_bytes = nullptr;
};

// Appends `update` to `batch`: its entry, and its record's encoding if the op has one.
void StageUpdate(const Update& update, StagedBatch* batch);

// What the engine provides to its ACGs.
struct AcgContext {
  Store* store = nullptr;  // where the ACGs' data lives
  // The node's catalogue of user indexes, read whenever the ACG opens (it may have changed
  // while the ACG was closed). Called with the ACG's rw_ held exclusively: must not take
  // locks that are held while waiting for an ACG lock.
  std::function<std::vector<IndexSpec>()> catalogue;
  // Called after the ACG opened on demand (not by Open), with no ACG lock held and the ACG
  // pinned (the engine counts it).
  std::function<void(Acg*)> on_open;
  // Called after the ACG loaded hash tables, with no ACG lock held and the ACG pinned: the
  // engine accounts for them and unloads others' (TryUnload).
  std::function<void(Acg*)> on_load;
  // Monotonic "time" for least-recently-used ordering; each use of the ACG stamps it.
  std::atomic<uint64_t>* use_clock = nullptr;
  // How many ACGs are busy (cached updates, or a commit not yet in the summary): a commit
  // pass with none to do skips its walk of every ACG (100,000 at 100 M files). May be null.
  std::atomic<int64_t>* busy_acgs = nullptr;
  // Tests (EngineOptions::commit_hook): called with rw_ held before a commit writes to LMDB,
  // after it took its updates out of the cache; non-OK fails the commit as an I/O error would.
  std::function<Status(uint64_t acg)> commit_hook;
};

class Acg {
 public:
  // Opens (creating if missing) the ACG `id` in ctx.store, with control directory `dir`, reads
  // its meta data and reconciles its indexes with ctx.catalogue(). The ACG is left OPEN (the
  // caller accounts for it); `ctx` must outlive the Acg. InvalidArgument for an id above
  // kMaxStoredAcgId.
  static Result<std::unique_ptr<Acg>> Open(uint64_t id, const std::string& dir,
                                           const AcgContext* ctx);
  // Cached updates are NOT committed (the log still has them).
  ~Acg();

  uint64_t id() const { return id_; }
  const std::string& dir() const { return dir_; }
  uint64_t applied_lsn() const { return applied_lsn_.load(); }

  // ---- the write cache (no environment needed) ----
  // Adds entries [begin, end) of a logged batch — this ACG's updates in it — to the cache.
  // Thread-safe; cheap (it runs under the log lock). Returns the number of cached updates.
  size_t AppendToCache(std::shared_ptr<const StagedBatch> batch, uint32_t begin, uint32_t end,
                       int64_t now_mono_ns);
  size_t cached() const;
  // Whether the ACG has cached updates or a commit not yet in its summary (no lock: a search
  // asks every ACG this before it asks cached()).
  bool busy() const { return busy_.load(std::memory_order_acquire); }
  // Bytes of cached entries and records (this ACG's parts of the batches it references).
  uint64_t cache_bytes() const { return cache_bytes_.load(std::memory_order_relaxed); }
  // The oldest LSN not yet committed: cached, or taken by a commit that has not succeeded yet.
  uint64_t oldest_cached_lsn() const;        // 0 when there is none
  int64_t oldest_cached_time_ns() const;     // monotonic; 0 when empty
  // The summary's verdict; true while updates are cached or being committed.
  bool MayMatch(const QueryNode& node) const;
  // Whether the summary says `token` is a keyword of every committed path (AcgSummary::
  // EveryPathHasKeyword): the planner's hint that the keyword's postings would list every file.
  bool EveryPathHasKeyword(std::string_view token) const;

  // Moves the cached updates with LSN <= up_to_lsn (a prefix of the cache) into the indexes
  // in one durable LMDB transaction, opening the ACG if needed. The engine passes the log's
  // synced LSN, so the indexes never get ahead of the durable log: after a power loss the
  // state is exactly a prefix of the log, and no batch spanning several ACGs is half-applied.
  // On error the cache is kept (and the in-memory structures dropped, to be reloaded from
  // LMDB) so nothing acknowledged is lost. On success `updates` (may be null) receives how
  // many cached updates left the cache.
  Status Commit(uint64_t up_to_lsn = UINT64_MAX, size_t* updates = nullptr)
      PROPELLER_EXCLUDES(rw_);
  // Commit for each of `acgs` — ACGs of one store shard — in one LMDB transaction: one sync
  // and one copy of the shared upper pages for all, where one Commit each syncs once per
  // ACG. All or nothing: on error every ACG keeps its cache, as after a failed Commit (the
  // caller may then commit them one by one, so one bad ACG does not hold the others back).
  // (*updates)[i]: how many cached updates left acgs[i]'s cache. An ACG whose lock another
  // thread holds (a search, a split) is not waited for but left in *busy, uncommitted, for
  // the caller to Commit alone.
  static Status CommitGroup(std::span<Acg* const> acgs, uint64_t up_to_lsn,
                            std::vector<size_t>* updates, std::vector<Acg*>* busy);

  // Searches committed state (callers commit first for freshness). Thread-safe. A closed ACG
  // whose loaded K-D tree proves the query has no candidate stays closed.
  Status Search(const AcgSearchRequest& request, AcgSearchStats* stats) PROPELLER_EXCLUDES(rw_);
  // The shape of `query` for AcgSearchRequest::shape.
  static AcgQueryShape ShapeOf(const Query& query);
  // Asks the CPU for the lines of this object a search reads first; reads nothing. A search
  // asks it of the next ACG while it searches one: each is a few cache misses otherwise, and a
  // keyword query visits 10,000 ACGs at 10 M files.
  void PrefetchForSearch() const PROPELLER_NO_THREAD_SAFETY_ANALYSIS {
    __builtin_prefetch(&pins_);
    __builtin_prefetch(&rw_);
    __builtin_prefetch(&inode_);
    __builtin_prefetch(&indexes_);
    __builtin_prefetch(&cleanup_pending_);
    __builtin_prefetch(&busy_);
    __builtin_prefetch(&summary_);
  }
  // The steps, one ACG nearer each, of a search's pipeline over the K-D trees of the ACGs ahead
  // of the one it searches (each is a chain of cache misses otherwise, and a search asks
  // 100,000 ACGs at 100 M files): 0 the tree's object, 1 its fields, 2 the boxes of `axes`
  // (Index::PrefetchFields). Reads only under rw_ shared, which it does not wait for: an ACG
  // a commit holds is not prefetched.
  void PrefetchKdTree(int step, uint32_t axes) const PROPELLER_EXCLUDES(rw_);
  // Asks the cache for what MayMatch reads of a query whose filter bytes are `bloom_bytes`
  // (AcgSummary::BloomProbes): a search asks every ACG in turn, each a few cache misses.
  // Addresses only, nothing read: no lock needed.
  void PrefetchSummary(const std::vector<uint32_t>& bloom_bytes) const
      PROPELLER_NO_THREAD_SAFETY_ANALYSIS {
    __builtin_prefetch(&busy_);
    __builtin_prefetch(&summary_mu_);
    __builtin_prefetch(&summary_);
    for (uint32_t b : bloom_bytes) __builtin_prefetch(summary_.bloom() + b);
  }
  // The committed record of `id` (callers commit first). NotFound when absent.
  Result<FileRecord> Get(FileId id) PROPELLER_EXCLUDES(rw_);
  // The record of `id` with this ACG's cached updates folded in, without committing them
  // (nullopt: absent). A commit never runs meanwhile (rw_ shared), so every update is seen
  // once, in the cache or in the store. Costs a scan of the cache (watches: Engine::Watch).
  Result<std::optional<FileRecord>> GetCurrent(FileId id) PROPELLER_EXCLUDES(rw_);
  // While on, the cache counts its entries per file, and GetCurrent reads only the entries of
  // its file instead of scanning the cache (the engine turns it on while watches exist: each
  // acknowledged update then pays a hash update).
  void TrackCachedIds(bool on);
  // Every committed directory record, for the node's permission table.
  Status ListDirectories(std::vector<FileRecord>* dirs) PROPELLER_EXCLUDES(rw_);
  // The ids of the committed records, in key order (callers commit first).
  Status ListFileIds(std::vector<FileId>* ids) PROPELLER_EXCLUDES(rw_);
  // The ids of the committed records and of the sources of committed edges, sorted and unique:
  // everything a merge moves (callers commit first).
  Status ListHeldIds(std::vector<FileId>* ids) PROPELLER_EXCLUDES(rw_);
  // The committed edges (callers commit first).
  Status ListEdges(std::vector<StoredEdge>* edges) PROPELLER_EXCLUDES(rw_);

  // ---- splitting (Engine::SplitAcg; docs/architecture.md §5) ----
  using FileIdSet = std::unordered_set<FileId, FileIdHash>;
  // The ACG that file `id` moved to when a split took it out of this one, or 0. Thread-safe
  // and cheap (Apply routes every update through it).
  uint64_t RouteOf(FileId id) const;
  bool has_routes() const { return has_routes_.load(std::memory_order_acquire); }
  // The ACG this one was merged into (Engine::MergeAcg), or 0. A merged ACG routes every
  // update and lookup there and holds no files.
  uint64_t merged_into() const { return merged_into_.load(std::memory_order_acquire); }
  // Routes everything to `target` from now on, in memory (the caller holds the log lock);
  // RecordMovedHeld(..., merge = true) makes it durable.
  void MergeInto(uint64_t target);
  // Forgets an in-memory MergeInto (a merge that did not complete).
  void UnmergeInto();
  // True when some file moved from here to ACG `target` (a split into it committed).
  bool RoutesTo(uint64_t target) const;
  // Sends `ids` to `target` from now on, in memory only (the caller holds the log lock, so no
  // logged update is cached on the wrong side). RecordMovedHeld makes it durable.
  void AddRoutes(const FileIdSet& ids, uint64_t target);
  // Forgets in-memory routes to `target` (a split that did not complete).
  void DropRoutes(uint64_t target);

  // The ACG's lock, for a split's exclusive section (`WriterLock lock(acg->mutex());`, which
  // the ...Held methods below require): searches and commits of this ACG wait; Apply still
  // caches. Lock order: see the top of this file.
  SharedMutex* mutex() const PROPELLER_LOCK_RETURNED(rw_) { return &rw_; }
  // From now on, every commit records the ids it applied (for a split's catch-up), until
  // StopWatch (StopWatchHeld with mutex() held).
  void StartWatch() PROPELLER_EXCLUDES(rw_);
  void StopWatch() PROPELLER_EXCLUDES(rw_);
  void StopWatchHeld() PROPELLER_REQUIRES(rw_);
  // Commit (see Commit) with mutex() held.
  Status CommitHeld(uint64_t up_to_lsn) PROPELLER_REQUIRES(rw_);
  // No commit of this ACG succeeds any more (a split failed after switching routes; the
  // engine stops).
  void FreezeHeld() PROPELLER_REQUIRES(rw_) { frozen_ = true; }
  // The committed records of `ids` (absent ones in *absent) and the edges from them.
  // `watched_only`: only those of `ids` recorded since StartWatch or the previous such export
  // (the watch goes on, from empty).
  Status ExportHeld(const FileIdSet& ids, bool watched_only, std::vector<FileRecord>* records,
                    std::vector<FileId>* absent, std::vector<StoredEdge>* edges)
      PROPELLER_REQUIRES(rw_);
  // Applies `updates` (kPut, kDelete, kAddEdge) in one transaction, which also records
  // `applied_lsn` as this ACG's applied LSN.
  Status ImportHeld(std::span<const Update> updates, uint64_t applied_lsn)
      PROPELLER_REQUIRES(rw_);
  // Records durably that `ids` moved to `target` (`merge`: that this whole ACG was merged
  // into it, merged_into), and that their records here await RemoveHeld: the commit point
  // of a split or merge. From here on searches skip the moved records (they are answered
  // where they moved) and updates follow the routes.
  Status RecordMovedHeld(const FileIdSet& ids, uint64_t target, bool merge)
      PROPELLER_REQUIRES(rw_);
  // Removes `ids` (records, index entries, edges from them); `last` ends the clean-up that
  // RecordMovedHeld started. Also undoes a merge's copy.
  Status RemoveHeld(const FileIdSet& ids, bool last) PROPELLER_REQUIRES(rw_);
  // True when moved files may still be here (RecordMovedHeld without the last RemoveHeld,
  // also across a restart). Without rw_: the engine asks it under its split_mu_, which every
  // writer of it (a split, merge or clean-up) holds too.
  bool cleanup_pending() const { return cleanup_pending_.load(std::memory_order_acquire); }
  // The moved ids that still have a record or edges here (for a clean-up after a restart).
  Result<FileIdSet> MovedStillHeld() PROPELLER_EXCLUDES(rw_);
  // The ids of the committed records and of the sources of edges, sorted, with mutex() held
  // (a merge moves all of them).
  Status ListFileIdsHeld(std::vector<FileId>* ids) PROPELLER_REQUIRES(rw_);

  // Brings the indexes of an open ACG in line with ctx.catalogue() now (builds new user
  // indexes from the records, drops removed ones); a closed ACG does it when it next opens.
  Status SyncIndexes() PROPELLER_EXCLUDES(rw_);

  // ---- moving to another node (Engine::FreezeAndCopyAcg, AdoptAcg, DropMovedAcg) ----
  // Writes a compacted copy of the committed key ranges to the new file `path` and syncs it
  // (Store::ExportAcg; Store::IngestAcg takes it in). Callers commit first and keep updates
  // away.
  Status CopyTo(const std::string& path);
  // Records `lsn` durably as the applied LSN: an adopted copy takes the adopting node's log
  // position, so that node's replay gives it exactly the records logged after the adoption.
  Status SetAppliedLsn(uint64_t lsn) PROPELLER_EXCLUDES(rw_);
  // The ACG left this node: waits for operations holding it, drops the in-memory indexes, and
  // makes every later open fail with NotFound. Its key ranges stay (Store::DropAcg).
  void Retire() PROPELLER_EXCLUDES(rw_);
  bool retired() const { return retired_.load(std::memory_order_acquire); }

  // Damage found in the ACG's data while serving — a stored record failing its checksum
  // (schemas/record_format.h, EncodeStoredRecord) — or "" while none was. Kept in memory and
  // in <dir>/DAMAGED (kDamagedMark), so the engine quarantines the ACG at its next start.
  std::string damage() const;

  uint64_t files() const { return files_.load(std::memory_order_relaxed); }
  uint64_t edges() const { return edges_.load(std::memory_order_relaxed); }
  // An estimate of the bytes the ACG's entries take in its shard, from its counts.
  uint64_t disk_bytes() const;
  // Heap bytes of loaded in-memory index structures (the K-D tree, loaded hash tables).
  uint64_t index_memory_bytes() PROPELLER_EXCLUDES(rw_);

  // ---- for the engine's cache of open ACGs ----
  bool is_open() const { return open_.load(std::memory_order_acquire); }
  bool pinned() const { return pins_.load(std::memory_order_relaxed) > 0; }  // a hint
  uint64_t last_used() const { return last_used_.load(std::memory_order_relaxed); }
  // What TryUnload would release: its loaded hash tables. 0 when closed.
  uint64_t open_bytes() const { return hash_bytes(); }
  // Bytes of loaded hash tables. 0 when closed.
  uint64_t hash_bytes() const {
    return is_open() ? hash_bytes_.load(std::memory_order_relaxed) : 0;
  }
  // Unloads the loaded hash tables (user hash indexes; they load again when a search probes
  // them) if the ACG is idle (not pinned) and its lock is free right now; never blocks. True
  // when it unloaded any. The ACG stays open: its index objects hold no memory to speak of,
  // and reopening one per search was the cost a bounded store removes.
  bool TryUnload();
  // At shutdown, after the last commit: closes the ACG unless updates are still cached.
  void CloseClean() PROPELLER_EXCLUDES(rw_);

 private:
  // Marks the ACG in use for its lifetime (TryUnload leaves it) and stamps its last use.
  class Pin {
   public:
    explicit Pin(Acg* acg);
    ~Pin();
    Pin(const Pin&) = delete;
    Pin& operator=(const Pin&) = delete;

   private:
    Acg* acg_;
  };

  Acg(uint64_t id, std::string dir, const AcgContext* ctx);
  // Opens the ACG if it is closed, then calls ctx_->on_open (outside rw_).
  // REQUIRES: pinned.
  Status EnsureOpen() PROPELLER_EXCLUDES(rw_);
  // Loads the named indexes that are not loaded; does nothing if the ACG is closed (the caller
  // checks under its lock and retries). REQUIRES: pinned.
  Status EnsureLoaded(const std::vector<std::string>& names) PROPELLER_EXCLUDES(rw_);
  Status OpenLocked(bool first) PROPELLER_REQUIRES(rw_);  // REQUIRES: closed
  void CloseLocked() PROPELLER_REQUIRES(rw_);
  Status OpenEnv(bool first) PROPELLER_REQUIRES(rw_);
  // Keys: P ‖ suffix, and the first / next entry of a cursor within the ACG's range
  // (MDB_NOTFOUND past it).
  std::string Key(std::string_view suffix) const { return prefix_ + std::string(suffix); }
  std::string FileKey(FileId id) const;
  int First(MDB_cursor* cur, MDB_val* k, MDB_val* v) const;
  int Next(MDB_cursor* cur, MDB_val* k, MDB_val* v) const;
  // A key of the ACG's range without its prefix.
  std::string_view Unprefixed(const MDB_val& k) const {
    return View(k).substr(std::min(k.mv_size, prefix_.size()));
  }
  Status ReconcileIndexes(MDB_txn* txn, const std::vector<IndexSpec>& user_indexes)
      PROPELLER_REQUIRES(rw_);
  // The search of an open ACG; `planned`, when not null, is its candidate set (sorted, unique,
  // planned under the shared lock the caller still holds), else it plans here — with
  // `memory_planner` when not null (one that planned from memory under that same lock; it
  // keeps what it found). REQUIRES: open_.
  Status SearchOpen(const AcgSearchRequest& request, AcgSearchStats* stats,
                    const std::vector<FileId>* planned, AcgPlanner* memory_planner = nullptr)
      PROPELLER_REQUIRES_SHARED(rw_);
  // Whether every index of `names` that exists here is loaded.
  bool Loaded(const std::vector<std::string>& names) const PROPELLER_REQUIRES_SHARED(rw_);
  struct Slice {  // entries [begin, end) of a batch
    std::shared_ptr<const StagedBatch> batch;
    uint32_t begin = 0;
    uint32_t end = 0;
  };
  static uint64_t SliceBytes(const Slice& s);
  // What a commit took out of the cache, until it is durable or goes back.
  struct Taken {
    std::vector<Slice> slices;
    size_t count = 0;     // updates
    uint64_t bytes = 0;   // SliceBytes
    // Set by ApplyTaken, for FinishTakenLocked once the transaction committed.
    uint64_t lsn = 0, files = 0, edges = 0;
  };
  // True when the cache holds an update with LSN <= up_to_lsn. Thread-safe.
  bool HasDue(uint64_t up_to_lsn) const;
  // Moves the cached updates with LSN <= up_to_lsn into *t (none: t->count == 0); from now
  // on searches count them as being committed.
  Status TakeDueLocked(uint64_t up_to_lsn, Taken* t) PROPELLER_REQUIRES(rw_);
  // Writes *t into the indexes in `txn` (a write transaction of this ACG's shard, which the
  // caller commits), with the applied LSN, summary and counts. REQUIRES: open.
  Status ApplyTaken(MDB_txn* txn, Taken* t) PROPELLER_REQUIRES(rw_);
  // ApplyTaken in a transaction of its own, then CommittedLocked. REQUIRES: as ApplyTaken.
  Status WriteTaken(Taken* t) PROPELLER_REQUIRES(rw_);
  // The in-memory counts of `t`'s transaction, once it committed.
  void CommittedLocked(const Taken& t) PROPELLER_REQUIRES(rw_);
  // After the transaction of ApplyTaken: `s` ok, it committed (CommittedLocked ran); else
  // the updates go back to the front of the cache and the in-memory structures are dropped.
  void FinishTakenLocked(Taken* t, const Status& s) PROPELLER_REQUIRES(rw_);
  // The body of Commit. *reopened: the environment was opened here.
  Status CommitLocked(uint64_t up_to_lsn, size_t* updates, bool* reopened)
      PROPELLER_REQUIRES(rw_);
  Status EnsureOpenLocked(bool* reopened) PROPELLER_REQUIRES(rw_);
  // CommitGroup's locking of a member (wait: Lock, else TryLock; true when locked) and its
  // unlocking, outside the analysis: see acg_commit.cc.
  bool LockForGroup(bool wait) PROPELLER_NO_THREAD_SAFETY_ANALYSIS;
  void UnlockForGroup() PROPELLER_NO_THREAD_SAFETY_ANALYSIS;
  // Applies one update and widens `widened` to cover its record.
  // Applies `u` in `txn`; `files` is a cursor on the records database (left anywhere);
  // `encoded` is EncodeRecord(u.record) when the caller has it (else empty).
  // A kPut without an inode generation keeps `carried` (the last one an earlier kPut of this
  // commit gave the file) or else the stored record's; a kPut whose generation differs from
  // the stored record's makes the file new (commit_renewed_).
  Status ApplyOne(MDB_txn* txn, MDB_cursor* files, const Update& u, std::string_view encoded,
                  AcgSummary* widened, uint32_t carried = 0) PROPELLER_REQUIRES(rw_);
  Status UpdateIndexes(MDB_txn* txn, const FileRecord* old_rec, const FileRecord* new_rec)
      PROPELLER_REQUIRES(rw_);
  Status ReadRecord(MDB_txn* txn, FileId id, FileRecord* rec, bool* found);
  // The record bytes of a stored value, or Corruption naming this ACG's data file (which
  // also records the damage: damage()).
  Status UnwrapStored(std::string_view stored, std::string_view* record) const;
  Status DecodeStored(std::string_view stored, FileRecord* record) const;
  // Files whose edges go, each with the inode generation whose edges stay (0: none stay).
  using GoneFiles = std::unordered_map<FileId, uint32_t, FileIdHash>;
  // Removes every edge of which a file of `gone` is an end, unless the edge names that end
  // with the generation to keep.
  Status DropEdgesOf(MDB_txn* txn, const GoneFiles& gone) PROPELLER_REQUIRES(rw_);
  // Writes P ‖ "counts" as they are after this transaction's changes (files_ and edges_ plus
  // delta_files_ and delta_edges_) in `txn`; *files and *edges receive them.
  Status SaveCounts(MDB_txn* txn, uint64_t* files, uint64_t* edges) PROPELLER_REQUIRES(rw_);
  // Calls fn(edge) for every edge in `txn`, in key order; Corruption for a malformed entry.
  Status ScanEdges(MDB_txn* txn, const std::function<void(const StoredEdge&)>& fn);
  Status BuildIndex(MDB_txn* txn, Index* index);
  // The `inode` K-D tree's source (KdTreeOptions::scan_points): the six axes of every record,
  // tagged with the keywords of its paths (AcgSummary::RecordKeywordBits).
  // (Called through a std::function by the tree's Load, which the analysis does not follow:
  // every Load of `inode` runs under rw_.)
  Status ScanPoints(MDB_txn* txn, const KdReserve& reserve, const KdAddPoint& add)
      PROPELLER_REQUIRES_SHARED(rw_);
  // Before a scan of every record: asks the kernel to read the span of their pages (acg.cc).
  void WillNeedRecords(MDB_cursor* cur) const;
  void RefreshOpenBytes() PROPELLER_REQUIRES(rw_);
  // Runs `fn` in a read transaction, opening the environment if needed.
  Status ReadHeld(const std::function<Status(MDB_txn*)>& fn) PROPELLER_REQUIRES(rw_);
  // Appends the ids of the committed records, in key order, read in `txn`.
  Status ScanFileIds(MDB_txn* txn, std::vector<FileId>* ids);
  // Appends the ids of ListHeldIds, read in `txn`, and sorts and deduplicates *ids.
  Status ScanHeldIds(MDB_txn* txn, std::vector<FileId>* ids);
  // Runs `fn` in a read transaction of the open ACG (opening it, and reopening it if a commit
  // closes it meanwhile), pinned and under rw_ shared.
  Status WithReadTxn(const std::function<Status(MDB_txn*)>& fn) PROPELLER_EXCLUDES(rw_);

  const uint64_t id_;
  const std::string dir_;
  const AcgContext* const ctx_;
  Store::Shard* const shard_;
  const std::string prefix_;  // AcgKeyPrefix(id_)

  std::atomic<int> pins_{0};
  std::atomic<uint64_t> last_used_{0};
  std::atomic<bool> open_{false};  // written under rw_ exclusive
  std::atomic<uint64_t> hash_bytes_{0};     // for open_bytes()
  std::atomic<uint64_t> files_{0};
  std::atomic<uint64_t> edges_{0};
  std::atomic<uint64_t> applied_lsn_{0};  // written under rw_ exclusive

  // Lock order: before cache_mu_, summary_mu_, routes_mu_ and damage_mu_ (written, not
  // checked: clang checks the order only with -Wthread-safety-beta).
  mutable SharedMutex rw_
      PROPELLER_ACQUIRED_BEFORE(cache_mu_, summary_mu_, routes_mu_, damage_mu_);
  // The shard's environment and databases (fixed).
  MDB_env* const env_;
  const MDB_dbi files_dbi_, dirs_dbi_, edges_dbi_, meta_dbi_, moved_dbi_;
  // Changes to the counts by the running write transaction (written under rw_ exclusive).
  int64_t delta_files_ PROPELLER_GUARDED_BY(rw_) = 0;
  int64_t delta_edges_ PROPELLER_GUARDED_BY(rw_) = 0;
  // The `inode` K-D tree: kept across closes once created (reattached at open), loaded lazily.
  std::unique_ptr<Index> inode_ PROPELLER_GUARDED_BY(rw_);
  // B-tree and hash indexes (built-in and user): only while open.
  std::map<std::string, std::unique_ptr<Index>, std::less<>> owned_ PROPELLER_GUARDED_BY(rw_);
  // Every index by name while open; just `inode` while closed.
  acg_internal::IndexTable indexes_ PROPELLER_GUARDED_BY(rw_);
  // User indexes built here (last reconcile).
  std::vector<IndexSpec> user_specs_ PROPELLER_GUARDED_BY(rw_);
  // Scratch of ApplyTaken/ApplyOne, kept so each update's decoding reuses the strings of the
  // previous one instead of allocating. Under rw_ exclusive. (What grows with a commit's size
  // is the commit's own, ApplyTaken's locals.)
  struct CommitRef {  // one cached update, by its file: the commit's apply order
    FileId id;
    uint32_t slice;
    uint32_t index;
  };
  mutable Mutex damage_mu_;
  mutable std::string damage_ PROPELLER_GUARDED_BY(damage_mu_);
  Update commit_update_ PROPELLER_GUARDED_BY(rw_);
  FileRecord commit_old_ PROPELLER_GUARDED_BY(rw_);
  // The last ApplyOne removed a record.
  bool commit_deleted_ PROPELLER_GUARDED_BY(rw_) = false;
  // The files a kPut of this commit made new (another inode generation than the stored
  // record's), with the new generation: their older edges go. Emptied, memory and all, by
  // each commit.
  GoneFiles commit_renewed_ PROPELLER_GUARDED_BY(rw_);
  FileRecord commit_merged_ PROPELLER_GUARDED_BY(rw_);
  std::string commit_key_ PROPELLER_GUARDED_BY(rw_);
  std::string commit_bytes_ PROPELLER_GUARDED_BY(rw_);
  std::string commit_stored_ PROPELLER_GUARDED_BY(rw_);

  // A split's watch (StartWatch): ids applied by commits since (written under rw_ exclusive).
  bool watching_ PROPELLER_GUARDED_BY(rw_) = false;
  bool frozen_ PROPELLER_GUARDED_BY(rw_) = false;  // FreezeHeld
  FileIdSet watched_ PROPELLER_GUARDED_BY(rw_);

  // Files split off to other ACGs: id -> ACG. Loaded from the `moved` database at the first
  // open, extended by AddRoutes. Lock order: a leaf.
  mutable Mutex routes_mu_;
  std::unordered_map<FileId, uint64_t, FileIdHash> routes_ PROPELLER_GUARDED_BY(routes_mu_);
  std::atomic<bool> has_routes_{false};
  // "cleanup" in meta: moved records await RemoveHeld. Written under rw_ exclusive (and the
  // engine's split_mu_); an atomic because cleanup_pending() reads it without rw_.
  std::atomic<bool> cleanup_pending_{false};
  static constexpr char kCleanupKey[] = "cleanup";
 public:
  // Files in an ACG's directory: damage found while serving (damage()), and the data file's
  // size and time at the last clean close (common/lmdb_check.h: WriteLmdbFileMark).
  static constexpr char kDamagedMark[] = "DAMAGED";
  static constexpr char kCleanMark[] = "CLEAN";
 private:

  mutable Mutex cache_mu_;
  std::vector<Slice> cache_ PROPELLER_GUARDED_BY(cache_mu_);  // in LSN order
  // While track_ids_ (TrackCachedIds): how many record-changing entries (not kAddEdge) of
  // each file cache_ holds, so GetCurrent reads only those.
  bool track_ids_ PROPELLER_GUARDED_BY(cache_mu_) = false;
  std::unordered_map<FileId, uint32_t, FileIdHash> cached_ids_ PROPELLER_GUARDED_BY(cache_mu_);
  void CountCachedIds(const Slice& slice, int delta) PROPELLER_REQUIRES(cache_mu_);
  size_t cached_ PROPELLER_GUARDED_BY(cache_mu_) = 0;         // updates in cache_
  int64_t oldest_cached_time_ns_ PROPELLER_GUARDED_BY(cache_mu_) = 0;
  std::atomic<uint64_t> cache_bytes_{0};  // written under cache_mu_
  // Commits whose records are out of the cache but not yet in the summary. The summary is
  // widened by the commit, not on the acknowledgement path (it was ~8% of Apply in a perf
  // profile): while the cache is non-empty or this is non-zero, MayMatch says yes and the
  // search commits first.
  int summary_pending_ PROPELLER_GUARDED_BY(cache_mu_) = 0;
  void SetBusyLocked(bool busy) PROPELLER_REQUIRES(cache_mu_);
  // The oldest LSN of the updates a running commit took out of the cache; 0 = none.
  uint64_t committing_lsn_ PROPELLER_GUARDED_BY(cache_mu_) = 0;

  // What a search asks of every ACG (100,000 at 100 M files) before it searches any: whether
  // it is still this node's, damaged, busy, and what its summary says. Together, so that the
  // question touches a few adjacent cache lines of the ACG, not one line per field.
  std::atomic<uint64_t> merged_into_{0};  // see merged_into(); "merged_into" in meta
  std::atomic<bool> retired_{false};      // written under rw_ exclusive; never cleared
  mutable std::atomic<bool> damaged_{false};  // !damage_.empty(); set under damage_mu_
  // !cache_.empty() || summary_pending_ > 0, written under cache_mu_ (MayMatch reads it),
  // through SetBusyLocked (which keeps ctx_->busy_acgs).
  std::atomic<bool> busy_{false};
  // summary_.common_dir_bits(), written under summary_mu_ when the summary changes, read
  // without it (EveryPathHasKeyword).
  std::atomic<uint64_t> common_dir_bits_{0};
  // Lock order: after rw_, never with cache_mu_ held.
  mutable Mutex summary_mu_ PROPELLER_ACQUIRED_BEFORE(cache_mu_);
  AcgSummary summary_ PROPELLER_GUARDED_BY(summary_mu_);
};

}  // namespace propeller

#endif  // PROPELLER_INDEXNODE_ACG_H_
