// The three index structures of an ACG partition behind one interface (docs/architecture.md §3,
// §6):
//
//   btree  — an LMDB named database "bt.<name>" of IndexEntryKey(value, id) -> "" (schemas/keys.h),
//            or "bp.<name>" of posting chunks (btree_index.h; the built-in `keyword` index).
//            Answers kEqual, kRange and kPrefix (strings).
//   hash   — an in-memory hash table value -> ids, persisted in LMDB "hs.<name>" as
//            FileIdKey(id) ‖ AppendIndexValue(value) -> "" and rebuilt from it on open.
//            Answers kEqual only.
//   kdtree — an in-memory K-D tree (nanoflann) over kNumInodeAxes numeric axes, persisted in
//            LMDB "kd.<name>" as FileIdKey(id) -> 6 ordered int64 and rebuilt from it on open,
//            or (KdTreeOptions::scan_points, the ACG's `inode` tree) read from the caller's
//            records. Answers kBox (an axis-aligned box; each axis optionally bounded).
//
// Every Search returns a SUPERSET of the exact answer is allowed only where documented
// (truncated long strings in btree keys, double rounding in the K-D tree); callers verify each
// candidate against the record. A structure never misses an entry that matches.
//
// Threading: one ACG is changed by one thread at a time (the ACG's commit, holding the ACG's
// exclusive lock); Search may run from many threads concurrently while no change runs (shared
// lock). The LMDB transaction passed in must belong to the ACG's environment and the calling
// thread. In-memory changes are made immediately, not at commit: if the LMDB transaction is
// aborted instead of committed, the caller must discard the index object and reopen it.
#ifndef PROPELLER_INDEXNODE_INDEX_INDEX_H_
#define PROPELLER_INDEXNODE_INDEX_INDEX_H_

#include <lmdb.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/lmdb_util.h"
#include "common/query/query.h"
#include "common/record.h"
#include "common/status.h"

namespace propeller {

// IndexType, IndexTypeName and ParseIndexType live in common/record.h (the wire needs them).

// Index names: 1-64 bytes of [a-z0-9_.-], starting with a letter, not a built-in attribute
// name other than the built-in indexes themselves. Empty string when valid, else the reason.
std::string ValidateIndexName(std::string_view name);

// A point on the kNumInodeAxes axes: size, mtime, ctime, atime, uid, gid.
using KdPoint = std::array<int64_t, kNumInodeAxes>;

struct IndexBound {
  AttrValue value;
  bool inclusive = true;
};

struct IndexQuery {
  enum class Kind : uint8_t { kEqual, kRange, kPrefix, kBox };
  Kind kind = Kind::kEqual;
  AttrValue value;                 // kEqual
  std::optional<IndexBound> lo;    // kRange; unset = unbounded
  std::optional<IndexBound> hi;    // kRange; unset = unbounded
  std::string prefix;              // kPrefix
  // kBox: per axis inclusive bounds; unset = unbounded on that side.
  std::array<std::optional<int64_t>, kNumInodeAxes> box_lo{};
  std::array<std::optional<int64_t>, kNumInodeAxes> box_hi{};
  // kBox: bits every candidate's tags must have (Index::InsertPoint); 0 = no condition.
  uint64_t box_tags = 0;
};

// Called once per candidate id; return false to stop early.
using IdCallback = std::function<bool(FileId)>;

class Index {
 public:
  virtual ~Index() = default;
  virtual IndexType type() const = 0;
  virtual const std::string& name() const = 0;

  // Adds the entry (value, id). For btree/hash `value` is the attribute value; for kdtree use
  // InsertPoint. Inserting an entry that exists is OK (no duplicate results).
  virtual Status Insert(MDB_txn* txn, const AttrValue& value, FileId id) = 0;
  // Removes the entry (value, id); OK when absent.
  virtual Status Remove(MDB_txn* txn, const AttrValue& value, FileId id) = 0;
  // kdtree only (others: NotSupported). Insert replaces any previous point of `id`. `tags` is
  // the caller's 64-bit filter of what else the file has (the ACG's `inode` tree: its paths'
  // KeywordBits, summary.h); a box query with box_tags keeps only points whose tags hold all
  // of them. The three-argument form gives every bit, which every such query keeps.
  virtual Status InsertPoint(MDB_txn* txn, const KdPoint& point, FileId id, uint64_t tags) = 0;
  Status InsertPoint(MDB_txn* txn, const KdPoint& point, FileId id) {
    return InsertPoint(txn, point, id, kAllTags);
  }
  static constexpr uint64_t kAllTags = ~uint64_t{0};
  virtual Status RemovePoint(MDB_txn* txn, FileId id) = 0;

  // Calls fn for each candidate id of q (each id at most once). NotSupported when this
  // structure cannot answer q.kind. `txn` is a read (or the current write) transaction.
  virtual Status Search(MDB_txn* txn, const IndexQuery& q, const IdCallback& fn) const = 0;

  // Appends Search's answer to *out, in the order Search calls fn. A structure may override it
  // to do without a call through std::function per id.
  virtual Status Collect(MDB_txn* txn, const IndexQuery& q, std::vector<FileId>* out) const {
    return Search(txn, q, [out](FileId id) {
      out->push_back(id);
      return true;
    });
  }

  // kdtree only (others: NotSupported): keeps of `ids` (sorted, unique) those whose point lies
  // in q's box, as Search would answer them — one table lookup per id instead of a search of
  // the tree, for a candidate set much smaller than the box's answer.
  virtual Status FilterBox(const IndexQuery& q, std::vector<FileId>* ids) const {
    (void)q;
    (void)ids;
    return Status::NotSupported("FilterBox");
  }

  // Number of entries (ids for kdtree, (value,id) pairs otherwise). For planning and stats.
  // For a hash or kdtree index that is not loaded (below): 0.
  virtual uint64_t Size() const = 0;
  // Bytes of heap memory held by in-memory structures (0 for btree and when not loaded).
  virtual uint64_t MemoryBytes() const = 0;

  // ---- Lazy loading (the cache of open ACGs, docs/architecture.md §6 Open ACGs: an ACG that
  // is closed, or open only to be committed, does not pay for in-memory structures it does
  // not search) ----
  // Whether the in-memory contents are loaded. btree indexes have none and are always loaded.
  // An index that is not loaded still takes Insert/Remove/InsertPoint/RemovePoint — they change
  // only LMDB, which is authoritative (a kdtree reading scan_points changes nothing: its source
  // is) — and Load() later reads the result. Search on an index
  // that is not loaded returns Internal (a caller bug).
  virtual bool loaded() const = 0;
  // Reads the in-memory contents from LMDB through `txn` (read-only or write); OK and no-op when
  // loaded. On error the index stays unloaded.
  virtual Status Load(MDB_txn* txn) = 0;
  // Drops the in-memory contents and returns their memory; a no-op for btree.
  virtual void Unload() = 0;
  // After the LMDB environment was closed and opened again: opens this index's database in the
  // new environment through `txn` (a write transaction the caller commits; creating the
  // database if missing) and keeps the in-memory contents. LMDB must hold what it held when
  // the old environment closed.
  virtual Status Reattach(MDB_txn* txn) = 0;
  // Restructures in-memory contents now if they have drifted (the kdtree's rebuild), so the
  // next Search does not pay for it. The ACG calls it after large commits (in-memory
  // structures are rebalanced at commit, docs/architecture.md §6). OK and no-op for
  // structures that never need it.
  virtual Status Rebalance() = 0;
  // Between BeginBatch() and EndBatch() — one ACG commit — mutations skip the restructuring
  // they would otherwise do to bound memory (the kdtree's compaction when tombstones pile up),
  // which a commit of many updates would repeat several times; EndBatch does it once if due.
  // Memory then grows by at most the batch's mutations. Default: no-ops.
  virtual void BeginBatch() {}
  virtual void EndBatch() {}
  // Ask the CPU for what a box search bounding `axes` (bit a: axis a) reads first, reading
  // nothing else: the structure's own fields, then (once those are cached) the boxes they
  // point to. A search over many ACGs asks them of the ACGs ahead of the one it searches,
  // where each is otherwise a chain of cache misses. REQUIRES: the owner's shared lock (a
  // mutation replaces what they point to). No-ops by default.
  virtual void PrefetchFields(uint32_t /*axes*/) const {}
  virtual void PrefetchBoxes(uint32_t /*axes*/) const {}
};

// Opens (creating if missing) the structure `name` of `type` in the LMDB environment of `txn`
// (a write transaction; the caller commits it), loading in-memory contents from LMDB.
Result<std::unique_ptr<Index>> OpenIndex(MDB_txn* txn, IndexType type, const std::string& name);
// As above; with load = false the in-memory contents are not read (see Index::loaded()).
// `key_prefix` (may be empty) leads every key the index writes and bounds every scan: indexes
// of many ACGs share one database, each in its own key range (the ACG's prefix, schemas/keys.h).
Result<std::unique_ptr<Index>> OpenIndex(MDB_txn* txn, IndexType type, const std::string& name,
                                         bool load, std::string_view key_prefix = {});
// Deletes the index's entries (inside `txn`): the whole LMDB database when `key_prefix` is
// empty, else the entries under `key_prefix` (the database stays for other key ranges).
Status DropIndexData(MDB_txn* txn, IndexType type, const std::string& name,
                     std::string_view key_prefix = {});
// The implementation of DropIndexData for one database; OK when the database does not exist.
Status DropIndexDatabase(MDB_txn* txn, const std::string& db_name, std::string_view key_prefix);

}  // namespace propeller

#endif  // PROPELLER_INDEXNODE_INDEX_INDEX_H_
