// Acg: one access-causality partition on an index node (DESIGN §3, §6) — its LMDB
// environment, its index structures, its write cache and its summary.
//
// On disk, <dir>/ holds one LMDB environment with these named databases:
//   files       FileIdKey(id) -> EncodeRecord(record)            (schemas/record_format.h)
//   dirs        FileIdKey(id) -> EncodeRecord(record), directories only (permission checks)
//   edges       EdgeKey(src, dst) -> ordered u64 weight           (schemas/keys.h)
//   meta        "version" -> u32, "applied_lsn" -> u64, "summary" -> AcgSummary bytes,
//               "idx:<name>" -> u8 IndexType for every index built in this ACG
//   bt.path     the built-in `path` B-tree (one entry per path of every record)
//   hs.keyword  the built-in `keyword` hash (PathKeywords of every path)
//   kd.inode    the built-in `inode` K-D tree (size, mtime, ctime, atime, uid, gid)
//   bt.<name> / hs.<name>   user-defined indexes, fed by the user attribute <name>
// "applied_lsn" is committed in the same LMDB transaction as the updates it covers, so after
// any crash an update is in the indexes iff its LSN <= applied_lsn: replay is exact.
//
// Threading and locks. Lock order: rw_ before cache_mu_; both below Wal::mu_ (AddToCache runs
// under it). rw_ is held exclusively by Commit/CreateIndex/DropIndex and shared by searches
// and Get, which therefore never see a half-applied commit. The cache may grow while a commit
// runs; the commit takes what was cached when it started.
#ifndef PROPELLER_INDEXNODE_ACG_H_
#define PROPELLER_INDEXNODE_ACG_H_

#include <lmdb.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <tuple>
#include <vector>

#include "common/query/query.h"
#include "common/record.h"
#include "common/status.h"
#include "indexnode/index/index.h"
#include "indexnode/summary.h"

namespace propeller {

struct IndexSpec {
  std::string name;
  IndexType type = IndexType::kBTree;
};

// What a search asks of one ACG.
struct AcgSearchRequest {
  const Query* query = nullptr;
  std::string scope = "/";
  std::optional<uint32_t> volume;
  // Called for each match with the first path in scope; return false to stop. The record is
  // a scratch object the callee may move from (each match is decoded afresh).
  std::function<bool(const std::string& path, FileRecord& record)> on_match;
  const std::atomic<bool>* stop = nullptr;  // polled between candidates; may be null
};

struct AcgSearchStats {
  uint64_t candidates = 0;
  uint64_t matches = 0;
};

class Acg {
 public:
  // Opens (creating if missing) the ACG `id` in directory `dir`. `user_indexes` is the node's
  // catalogue: missing ones are built from the records, ones not in it are dropped.
  static Result<std::unique_ptr<Acg>> Open(uint64_t id, const std::string& dir,
                                           uint64_t map_size,
                                           const std::vector<IndexSpec>& user_indexes);
  // Closes the environment. Cached updates are NOT committed (the log still has them).
  ~Acg();

  uint64_t id() const { return id_; }
  const std::string& dir() const { return dir_; }
  uint64_t applied_lsn() const { return applied_lsn_.load(); }

  // Adds a logged update to the write cache. Thread-safe.
  void AddToCache(uint64_t lsn, const Update& update, int64_t now_mono_ns);
  size_t cached() const;
  uint64_t oldest_cached_lsn() const;        // 0 when the cache is empty
  int64_t oldest_cached_time_ns() const;     // monotonic; 0 when empty
  bool MayMatch(const QueryNode& node) const;

  // Moves the cached updates with LSN <= up_to_lsn (a prefix of the cache) into the indexes
  // in one durable LMDB transaction. The engine passes the log's synced LSN, so the indexes
  // never get ahead of the durable log: after a power loss the state is exactly a prefix of
  // the log, and no batch spanning several ACGs is half-applied. On error the cache is kept
  // (and the in-memory structures reloaded from LMDB) so nothing acknowledged is lost.
  Status Commit(uint64_t up_to_lsn = UINT64_MAX);

  // Searches committed state (callers commit first for freshness). Thread-safe.
  Status Search(const AcgSearchRequest& request, AcgSearchStats* stats);
  // The committed record of `id` (callers commit first). NotFound when absent.
  Result<FileRecord> Get(FileId id);
  // Every directory record (committed and cached), for the node's permission table.
  Status ListDirectories(std::vector<FileRecord>* dirs);
  // The committed edges (callers commit first).
  Status ListEdges(std::vector<std::tuple<FileId, FileId, uint64_t>>* edges);

  Status CreateIndex(const IndexSpec& spec);
  Status DropIndex(const std::string& name);

  uint64_t files();
  uint64_t edges();
  uint64_t disk_bytes();
  uint64_t index_memory_bytes();

 private:
  struct CachedUpdate {
    uint64_t lsn;
    Update update;
  };

  Acg(uint64_t id, std::string dir);
  Status OpenEnv(uint64_t map_size);
  Status LoadIndexes(const std::vector<IndexSpec>& user_indexes);  // REQUIRES: rw_ exclusive
  Status CommitOnce(const std::vector<CachedUpdate>& batch);       // REQUIRES: rw_ exclusive
  Status ApplyOne(MDB_txn* txn, const Update& u);
  Status IndexRecord(MDB_txn* txn, const FileRecord& rec, bool insert);
  Status UpdateIndexes(MDB_txn* txn, const FileRecord* old_rec, const FileRecord* new_rec);
  Status ReadRecord(MDB_txn* txn, FileId id, FileRecord* rec, bool* found);
  Status BuildIndex(MDB_txn* txn, Index* index);
  Status ReloadLocked();  // REQUIRES: rw_ exclusive

  const uint64_t id_;
  const std::string dir_;

  // Constant after Open (the handles; the environment's map may grow under rw_ exclusive).
  MDB_env* env_ = nullptr;
  MDB_dbi files_dbi_ = 0, dirs_dbi_ = 0, edges_dbi_ = 0, meta_dbi_ = 0;
  uint64_t map_size_ = 0;  // Under rw_.

  mutable std::shared_mutex rw_;
  std::map<std::string, std::unique_ptr<Index>, std::less<>> indexes_;  // Under rw_.
  std::vector<IndexSpec> user_specs_;                                    // Under rw_.
  std::atomic<uint64_t> applied_lsn_{0};  // written under rw_ exclusive

  mutable std::mutex cache_mu_;
  std::vector<CachedUpdate> cache_;    // Under cache_mu_. In LSN order.
  int64_t oldest_cached_time_ns_ = 0;  // Under cache_mu_.
  // Commits whose records are out of the cache but not yet in the summary. The summary is
  // widened by the commit, not on the acknowledgement path (it was ~8% of Apply in a perf
  // profile): while the cache is non-empty or this is non-zero, MayMatch says yes and the search
  // commits first.
  int summary_pending_ = 0;            // Under cache_mu_.

  mutable std::mutex summary_mu_;      // Lock order: after rw_, never with cache_mu_ held.
  AcgSummary summary_;                 // Under summary_mu_.
};

}  // namespace propeller

#endif  // PROPELLER_INDEXNODE_ACG_H_
