// Store: the index node's physical store (docs in schemas/LAYOUT.md, layout 5) — a fixed,
// small number of LMDB environments ("shards") that hold the data of every ACG of the node.
//
// The ACG is the logical unit (acg.h); the store is the physical one. ACG `id` lives in shard
// id % shard_count(), and every key it writes, in every database of that shard, starts with
// AcgKeyPrefix(id) (schemas/keys.h): its records, directories, edges, meta data, routes and
// index entries are one key range per database. So the node holds shard_count() maps and
// descriptors whatever the number of ACGs — a search that touches every ACG opens, maps and
// closes nothing per ACG — and commits of ACGs in different shards run in parallel (LMDB
// allows one writer per environment).
//
// On disk, <dir>/ holds SHARDS (the shard count, fixed when the store is created: ACGs are
// placed by it) and shard-<k>/ (data.mdb, lock.mdb, and CLEAN after a clean close:
// common/lmdb_check.h). Each shard has the databases files, dirs, edges, meta and moved, and
// the index databases the ACGs create (bt.<name>, bp.<name>, hs.<name>, kd.<name>).
//
// Moving one ACG: ExportAcg writes its key ranges, compacted, into a new LMDB file (the
// migration's unit), and IngestAcg puts such a file's entries into the store under an ACG's
// prefix; DropAcg deletes an ACG's key ranges.
//
// Thread-safe: the environments are LMDB's (MDB_NOTLS: read transactions may move between
// threads); the handles below are fixed after Open. Callers never nest two write
// transactions of one shard in a thread (LMDB's writer lock is not recursive).
#ifndef PROPELLER_INDEXNODE_STORE_H_
#define PROPELLER_INDEXNODE_STORE_H_

#include <lmdb.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/env.h"
#include "common/status.h"

namespace propeller {

struct StoreOptions {
  std::string dir;       // created 0700 if missing
  unsigned shards = 0;   // for a new store; 0: one per core, at most kMaxStoreShards
  // The map of each shard: address space only (the file grows with its data), so it is large.
  uint64_t map_size = uint64_t{1} << 40;
  Env* env = nullptr;    // null: Env::Default()
};

inline constexpr unsigned kMaxStoreShards = 16;

class Store {
 public:
  // One environment and its fixed databases.
  struct Shard {
    unsigned index = 0;
    std::string dir;
    MDB_env* env = nullptr;
    MDB_dbi files = 0, dirs = 0, edges = 0, meta = 0, moved = 0;
    const char* map = nullptr;  // the map's start (LocateMap), or null when not found
  };

  // Opens (creating if missing) the store. A shard whose data file fails its check
  // (common/lmdb_check.h: deep unless it closed cleanly) is moved to `quarantine_dir` and
  // recreated empty; its index is appended to *damaged with the reason (the caller rebuilds
  // the ACGs that lived there). `quarantine_dir` empty: damage is an error instead.
  static Result<std::unique_ptr<Store>> Open(const StoreOptions& options,
                                             const std::string& quarantine_dir,
                                             std::vector<std::pair<unsigned, std::string>>* damaged);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  unsigned shard_count() const { return static_cast<unsigned>(shards_.size()); }
  Shard* ShardOf(uint64_t acg) { return shards_[acg % shards_.size()].get(); }
  Shard* shard(unsigned k) { return shards_[k].get(); }
  const std::string& dir() const { return options_.dir; }

  // Writes ACG `acg`'s key ranges of every database into a new LMDB file at `path` (one
  // environment, MDB_NOSUBDIR, same database names, keys as stored), synced. One read
  // transaction: a consistent snapshot while commits go on.
  Status ExportAcg(uint64_t acg, const std::string& path);
  // Replaces ACG `acg`'s key ranges with the entries of an ExportAcg file (of any ACG: keys
  // are moved to `acg`'s prefix), in one transaction. Corruption when the file holds a key
  // outside its one ACG's range or is not such a file.
  Status IngestAcg(uint64_t acg, const std::string& path);
  // Layout 3 (schemas/LAYOUT.md): replaces ACG `acg`'s key ranges with the entries of the
  // LMDB environment in `dir` (an ACG of that layout, keys without a prefix), in one
  // transaction; writes its counts (P ‖ "counts") from the old databases' sizes. A K-D tree
  // copy of the `inode` index (kd.inode, older still) is not carried over.
  Status IngestLegacyAcg(uint64_t acg, const std::string& dir);
  // Deletes ACG `acg`'s key ranges from every database of its shard, in one transaction.
  Status DropAcg(uint64_t acg);
  // Calls fn(id) once for every ACG that has a `meta` entry (an ACG's meta always holds its
  // format version), in id order per shard.
  Status ForEachAcg(const std::function<void(uint64_t)>& fn);

  // Bytes allocated on disk by the shards' files.
  uint64_t disk_bytes() const;
  // Bytes of the shards' maps resident in this process (the kernel's Rss of each map in
  // /proc/self/smaps): file pages the process mapped by reading, which count in its RSS. 0
  // for a shard whose map address is unknown (LocateMap).
  uint64_t ResidentBytes() const;
  // Unmaps the shards' pages from this process (MADV_DONTNEED over each map; the page cache
  // keeps them, and the next read maps them again with a minor fault). Safe at any time: the
  // maps are read-only (writes go through pwrite) and readers just fault again.
  void TrimMaps();
  // Rewrites every shard's data file compacted (LMDB's MDB_CP_COMPACT copy: the live pages
  // only, renumbered, so a file that lost data shrinks; pages are copied as they are, not
  // refilled), through a copy beside it that replaces it whole. Needs free space for
  // the copy. REQUIRES: nothing uses the store (no ACG is open: the environments are
  // reopened). Bytes allocated before and after, for the log.
  Status Compact(uint64_t* before_bytes, uint64_t* after_bytes);
  // At shutdown, with no transaction running: closes the environments and records each data
  // file as known good (CLEAN), so the next open skips the deep check.
  void CloseClean();

 private:
  explicit Store(StoreOptions options) : options_(std::move(options)) {}
  Status OpenShard(unsigned k, const std::string& quarantine_dir,
                   std::vector<std::pair<unsigned, std::string>>* damaged);
  Status OpenEnv(Shard* shard);
  // The start of `shard`'s map, or null (store.cc).
  static const char* LocateMap(const Shard& shard);
  // The used part of `shard`'s map: [map, map + bytes); 0 bytes when unknown.
  static size_t UsedMapBytes(const Shard& shard);
  // IngestAcg and IngestLegacyAcg: `source_prefix_bytes` is the prefix size of the source's
  // keys (kAcgKeyPrefixSize for an export, 0 for layout 3).
  Status Ingest(uint64_t acg, MDB_env* source, size_t source_prefix_bytes,
                const std::string& what);

  StoreOptions options_;
  std::vector<std::unique_ptr<Shard>> shards_;
};

// The names of the databases of an LMDB environment (the keys of its main database).
Status ListDatabases(MDB_txn* txn, std::vector<std::string>* names);

}  // namespace propeller

#endif  // PROPELLER_INDEXNODE_STORE_H_
