// Engine: the single-node indexing and search engine of an index node (DESIGN §6), usable
// in-process by tests, benchmarks, the index-node daemon and the embedded mode.
//
// An Engine owns one data directory:
//   <data_dir>/wal/          the node's write-ahead log (segments; see schemas/wal_format.h)
//   <data_dir>/acg/<id>/     one LMDB environment per ACG partition (see acg.h)
//   <data_dir>/indexes       the catalogue of user-defined indexes
//
// Write path: Apply() appends the batch to the WAL (one log for all ACGs, group commit), puts
// each update into its ACG's in-memory write cache and returns: the updates are acknowledged.
// Cached updates are committed into the ACG's LMDB indexes after `commit_timeout_ns`, when
// the cache exceeds its bound, or before a search touches that ACG. After a commit is durable
// the WAL prefix no ACG needs any more is deleted; Open() replays the rest.
//
// Durability (DESIGN §10):
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
// Thread-safety: every public method may be called from any number of threads concurrently.
#ifndef PROPELLER_INDEXNODE_ENGINE_H_
#define PROPELLER_INDEXNODE_ENGINE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/env.h"
#include "common/record.h"
#include "common/status.h"
#include "indexnode/index/index.h"

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
  // Node-wide: commit the largest caches beyond this. A cached update costs ~300-400 bytes of
  // heap; 500k bounds that at ~200 MB and keeps ingest from fragmenting the heap further.
  size_t total_cache_bound_updates = 500'000;
  int search_threads = 0;               // 0 = number of cores
  uint64_t wal_segment_bytes = 64ull << 20;
  uint64_t acg_map_size = 4ull << 30;   // initial LMDB map size per ACG (sparse; grows)
  // false: no background threads; caches are committed only by searches, CommitAll() and
  // the bounds (tests use this to control timing). The log sync thread still runs in kDefault.
  bool background_commit = true;
};

// Caller identity for permission filtering (DESIGN §10). uid 0 sees everything.
struct Credentials {
  uint32_t uid = 0;
  uint32_t gid = 0;
  std::vector<uint32_t> groups;  // supplementary groups
};

struct SearchRequest {
  std::string query;                 // DESIGN §8 text
  std::string scope = "/";           // only paths equal to or below this (absolute, in-volume)
  std::optional<uint32_t> volume;    // only this volume; unset = all
  std::optional<Credentials> creds;  // unset = no filtering (trusted, in-process callers)
  size_t limit = 0;                  // 0 = no limit
  // Sort key: "" (unordered), or size, mtime, ctime, atime, uid, gid, path, name.
  std::string sort_by;
  bool descending = false;
  int64_t now_ns = 0;                // instant for ages; 0 = now
};

struct SearchHit {
  std::string path;    // the record's first path inside the scope
  FileRecord record;
  uint64_t acg = 0;
};

struct SearchStats {
  uint64_t acgs_total = 0;
  uint64_t acgs_skipped = 0;    // by summaries
  uint64_t acgs_committed = 0;  // caches committed because this search touched them
  uint64_t candidates = 0;      // records verified
  uint64_t hits = 0;
};

struct AcgInfo {
  uint64_t id = 0;
  uint64_t files = 0;
  uint64_t edges = 0;
  uint64_t cached_updates = 0;
  uint64_t disk_bytes = 0;
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
  uint64_t index_memory_bytes = 0;// in-memory hash and K-D structures
  uint64_t next_lsn = 0;
};

class Engine {
 public:
  // Opens or creates the engine in options.data_dir and replays the log. Errors: IOError,
  // Corruption (a damaged log or ACG, with the file named), InvalidArgument (bad options).
  static Result<std::unique_ptr<Engine>> Open(const EngineOptions& options);

  // Commits every cache, syncs, stops background threads.
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

  // The current record of `id` in `acg` (cache included). NotFound when absent.
  Result<FileRecord> Get(uint64_t acg, FileId id);

  // User-defined indexes (DESIGN §3), fed by the user attribute of the same name. Creating
  // builds the index in every ACG. AlreadyExists / NotFound / InvalidArgument (bad name,
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
  Status ListEdges(uint64_t acg, std::vector<std::tuple<FileId, FileId, uint64_t>>* edges);

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
