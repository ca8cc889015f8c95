// The `kdtree` index structure (index.h, docs/architecture.md §3/§6): multi-attribute range search
// over the kNumInodeAxes int64 axes (size, mtime, ctime, atime, uid, gid) of the files of one ACG.
//
// Persistence, one of two kinds (KdTreeOptions::scan_points):
//   - its own LMDB database "kd.<name>", key = FileIdKey(id) (12 bytes), value = 6 ordered int64
//     (48 bytes, AppendOrderedI64 in axis order) — schemas/keys.h. Every InsertPoint puts,
//     every RemovePoint deletes; Load scans the database and builds the tree.
//   - none: the points are read from where the caller keeps them anyway (an ACG's `files`
//     records hold the six axes), through scan_points. InsertPoint/RemovePoint then change only
//     memory (nothing at all while not loaded), so an update to a file writes its record's page
//     and not a second page of points as well: a 10,000-file ACG has 353 leaf pages of
//     records and had 176 of points (mdb_stat), and a commit of 1,000 random updates touches
//     an expected ~330 and ~175 of them. The caller must
//     make the source say what the index was told (the ACG writes the record in the same
//     transaction as it calls InsertPoint).
//
// In memory (kdtree_index.cc explains the layout and the numbers):
//   - one slot per point version: the point's float codes (each int64 coordinate rounded to
//     the nearest float, 24 bytes, one column per axis), the FileId (its volume kept per slot
//     only once the index holds more than one volume) and a tombstone bit;
//   - the "base" slots [0, base_end) in the leaf order of a nanoflann K-D tree built over them
//     (over doubles computed from the codes by a monotone per-axis map), each leaf with the
//     bounding box of its codes and each 16 leaves with theirs; the tree itself is freed.
//     Slots appended since the build (the "delta") are scanned linearly;
//   - an open-addressing table FileId -> live slot;
//   - per slot the caller's 64-bit tags (Index::InsertPoint; for the ACG's `inode` tree the
//     keyword bits of the file's paths), 8 bytes, kept in memory only: a tree with its own
//     database loads every point with every bit set. A box query's box_tags keeps the slots
//     whose tags have all of them, so `keyword=firefox & mtime<1w` is answered from memory
//     in an ACG where no recent file has `firefox` (a false "has" is verified away).
//   An update tombstones the old slot and appends a new one (nanoflann cannot move a point).
//   Search returns a SUPERSET of the exact answer (index.h allows it; callers verify): exactly
//   the ids whose codes lie in the box of the bounds' codes. Coordinates below 2^24 in absolute
//   value (uids, gids, sizes under 16 MiB) are exact; larger ones are within a relative 2^-24,
//   e.g. nanosecond timestamps of today within ~137 s. LMDB keeps the exact int64 points.
//
// Rebuilds (each O(n log n), so amortised O(log n) per change):
//   - lazily, by the first Search that finds more than live/8 + rebuild_slack slots outside the
//     tree or dead inside it (bounds the linear delta scan). Searches run concurrently under the
//     ACG's shared lock, so that rebuild is serialised by an internal mutex with a double check;
//     a bulk load followed by one search therefore builds once;
//   - at open, and when the ACG asks after a large commit (Rebalance).
// Compaction (O(n), no tree build): inside InsertPoint/RemovePoint when tombstones exceed
// live/4 + rebuild_slack — or, inside a BeginBatch/EndBatch bracket (one ACG commit), once at
// EndBatch — the tombstones go and the live slots keep their leaves (whose boxes shrink to
// them). It bounds memory when many updates arrive without a search; the tree is rebuilt
// only when a search needs it (above).
//
// Threading: as index.h — mutations from one thread at a time with no Search running; Search,
// Size and MemoryBytes from any number of threads concurrently.
#ifndef PROPELLER_INDEXNODE_INDEX_KDTREE_INDEX_H_
#define PROPELLER_INDEXNODE_INDEX_KDTREE_INDEX_H_

#include <lmdb.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"
#include "indexnode/index/index.h"

namespace propeller {

// A point source (KdTreeOptions::scan_points) is called with a transaction to read through, a
// `reserve` to call first with the number of points when known, and an `add` to call once per
// file with its point and tags (an error from `add` must be returned).
using KdReserve = std::function<void(uint64_t)>;
using KdAddPoint = std::function<Status(FileId, const KdPoint&, uint64_t tags)>;
using KdPointScan = std::function<Status(MDB_txn*, const KdReserve&, const KdAddPoint&)>;

// Tuning knobs; the defaults are what OpenIndex uses. Tests shrink them to exercise rebuilds.
struct KdTreeOptions {
  // Maximum points per leaf. 32 costs ~2 bytes of leaf boxes per point (10 would cost ~7) for
  // a few more exact checks per leaf that meets a query.
  size_t leaf_size = 32;
  // Slots outside the tree (or tombstoned) tolerated on top of the size-proportional thresholds:
  // scanning a few hundred points linearly costs well under a microsecond.
  uint32_t rebuild_slack = 256;
  // Set: the index keeps no database of its own (above) and Load reads the points through it.
  // Opening such an index drops a "kd.<name>" database left by an older version.
  KdPointScan scan_points;
  // Leads every key of the index's own database (index.h: OpenIndex): the points of many ACGs
  // share one database, each in its key range. Empty: the database is this index's alone.
  std::string key_prefix;
};

// The most points (live plus tombstoned) one kdtree index holds in memory; InsertPoint beyond it
// returns ResourceExhausted. 2^26 - 2 ≈ 67 M, far above one ACG.
inline constexpr uint32_t kMaxKdTreeSlots = (1u << 26) - 2;

// Opens (creating if missing) the LMDB database "kd.<name>" in the environment of `txn` (a write
// transaction that the caller commits; the database handle is valid only once it commits) and
// loads every point into a freshly built tree. With options.scan_points, drops that database
// instead if it exists and loads through scan_points.
// Errors: LMDB failures (LmdbStatus), Corruption for a key that is not 12 bytes or a value that
// is not 48 bytes, ResourceExhausted when allocation fails or there are more than
// kMaxKdTreeSlots points.
// The returned index keeps the database handle; it must not outlive the environment, and the
// database must not be dropped while it is in use.
Result<std::unique_ptr<Index>> OpenKdTreeIndex(MDB_txn* txn, const std::string& name);
Result<std::unique_ptr<Index>> OpenKdTreeIndex(MDB_txn* txn, const std::string& name,
                                               const KdTreeOptions& options);
// As above; with load = false nothing is read into memory until Load() (index.h).
Result<std::unique_ptr<Index>> OpenKdTreeIndex(MDB_txn* txn, const std::string& name,
                                               const KdTreeOptions& options, bool load);

// Deletes the database "kd.<name>" inside `txn` (a write transaction). OK when it does not exist.
// Any open index object of that name becomes unusable and must be discarded.
// With `key_prefix`, only the entries under it go (index.h: DropIndexData).
Status DropKdTreeIndexData(MDB_txn* txn, const std::string& name,
                           std::string_view key_prefix = {});

}  // namespace propeller

#endif  // PROPELLER_INDEXNODE_INDEX_KDTREE_INDEX_H_
