// The kdtree index: the leaves of a nanoflann K-D tree with their bounding boxes + a linear
// delta + tombstones (see kdtree_index.h).
//
// Memory layout, per point version ("slot"), chosen for docs/architecture.md §11 (≤ 200 B per file
// for the whole node; this structure is the largest in-memory part):
//   float codes 24 B, one column per axis | inode 8 B | tombstone 1 bit
//   volume 4 B, only once the slots span more than one volume
//   FileId -> slot table: 4 B buckets at load 0.35-0.8                 (~5-11 B per point)
//   per leaf of <= 32 slots: its end and a box (4 + 48 B), per 16 leaves a box  (~2-3 B)
// nanoflann only orders the slots: a rebuild builds its tree over doubles mapped from the codes
// (BuildAdaptor), permutes the slots into the tree's leaf order, keeps each leaf's slot range
// and the box of its codes, and frees the tree. A search reads the boxes of the blocks of 16
// leaves, then of the leaves in a block that meets the query, and scans a meeting leaf's slots,
// reading only the axes the query bounds: `size>16m` reads 4 bytes per slot where whole points
// were 24, and no tree nodes (pointer chasing, ~5 B per point). At 10 M files in 1,000-file
// ACGs this cut `size>16m` by 17% and the keyword query by 4% against walking the tree over
// whole points (bench/results/scale). A rebuild or compaction leaves the slot vectors exactly
// full: a node loads every ACG's tree and most are never updated, and the delta the lazy
// rebuild tolerates (live/8 + rebuild_slack), reserved ahead in every tree, cost ~15 B per file
// in 1,000-file ACGs. Appends grow them by an eighth at a time, not by doubling.
//
// Why not nanoflann's KDTreeSingleIndexDynamicAdaptor: removePoint there only tombstones,
// points cannot move, and its logarithmic forest re-builds small trees on every insert; it also
// keeps its own copy of the index arrays. Our updates are "replace the point of id", so
// tombstone + append + periodic compaction is both simpler and smaller.
//
// A superset, never a miss: int64 -> double -> float rounds (CodeOf), and that rounding is
// monotone non-decreasing, so lo <= p <= hi implies CodeOf(lo) <= CodeOf(p) <= CodeOf(hi). A
// block or leaf is skipped only when its box (the minimum and maximum of its slots' codes)
// misses the box of the bounds' codes on some axis, which proves every slot in it is outside;
// every slot reached is tested against the box of codes. Hence Search returns exactly the ids
// whose codes are in the box of the bounds' codes: every match, plus points that round onto a
// bound.
// (Until 2026-11 the slots held the exact int64 points, 48 B, and answers were exact; the codes
// halve the structure that stays resident for every ACG, open or closed — acg.h.)
//
// Measured (50k points; size log-uniform with 20% empty, three times over 3 years, 21 uids;
// 2 shared cores, thread CPU time): MemoryBytes 84.8 B/point with int64 points (also at 100k;
// see MemoryPerPoint in the test for the float codes); build from LMDB
// 34 ms; a box of 3% of the size range x 3% of the mtime range (~46 hits, 0.09%) visited ~210
// leaves / 4.3k points of the tree in ~45 us against ~300 us for a linear scan. The log map for
// size (AxisKey) cut the points visited by 2.5x. Down-weighting uid/gid splits helped
// size/mtime boxes by ~30% but hurt uid queries as much, so all axes weigh the same.
// nanoflann builds recursively; every unbalanced split at least halves one axis's span, so
// the depth stays near log2(n) + 64 per axis (adversarial geometric data at 200k points: ~280
// levels, ~100 KB of stack).
#include "indexnode/index/kdtree_index.h"

#include <nanoflann.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <exception>
#include <limits>
#include <new>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/mutex.h"
#include "indexnode/index/kdtree_codes.h"
#include "schemas/keys.h"

namespace propeller {
namespace {

using kdtree_internal::Box;
using kdtree_internal::Code;
using kdtree_internal::CodeOf;
using kdtree_internal::kDims;
using kdtree_internal::MakeBox;

std::string DbName(const std::string& name) { return "kd." + name; }

constexpr size_t kPointValueBytes = 8 * kDims;  // 6 ordered int64
constexpr int kSizeAxis = 0;

// ---- Monotone maps of the codes (kdtree_codes.h) to the doubles of the tree's coordinates. ----

// File sizes are heavy tailed (most files are small, a few are huge). A linear axis makes
// nanoflann's sliding-midpoint split peel off one outlier per level. The bit pattern of a
// positive double grows monotonically and like 2^52 * log2, so L(x) = bits(x + 1) - bits(1)
// is a monotone log2(x + 1) * 2^52 with L(0) = 0 (a plain bits(x) would leave a gap of 2^62
// between 0 and 1, and the many empty files would then get one split and no more); negative
// values mirror it. (std::log is not guaranteed monotone; rounding additions are.) Other axes
// stay linear.
double AxisKey(int axis, float code) {
  const double d = code;
  if (axis != kSizeAxis) return d;
  constexpr uint64_t kOneBits = std::bit_cast<uint64_t>(1.0);
  if (d >= 0) return static_cast<double>(std::bit_cast<uint64_t>(d + 1.0) - kOneBits);
  return -static_cast<double>(std::bit_cast<uint64_t>(1.0 - d) - kOneBits);
}

// Maps one axis to about [0, 1] over the points of the last build, so nanoflann (which cuts the
// axis of largest spread) does not always cut the time axes, whose raw spans are ~1e17.
struct AxisScale {
  double offset = 0;
  double scale = 1;  // > 0 and finite
  double Map(int axis, float code) const { return (AxisKey(axis, code) - offset) * scale; }
};
using Scales = std::array<AxisScale, kDims>;

// What nanoflann reads while building: point i of the build, its axes already mapped (Map),
// row-major. nanoflann reads every coordinate O(log n) times while it partitions, so mapping
// them once up front (48 B per point, for the duration of the build) makes the build ~2x
// faster than mapping on every read. Valid only during the build; the pointer is cleared
// afterwards (nanoflann keeps a reference to this adaptor but Search never calls into nanoflann).
struct BuildAdaptor {
  const double* coords = nullptr;
  size_t count = 0;
  Scales scales{};

  size_t kdtree_get_point_count() const { return count; }
  double kdtree_get_pt(uint32_t i, size_t dim) const { return coords[size_t{i} * kDims + dim]; }
  template <class BBox>
  bool kdtree_get_bbox(BBox& /*bb*/) const {
    return false;  // let nanoflann compute it
  }
};

using Tree = nanoflann::KDTreeSingleIndexAdaptor<nanoflann::L2_Simple_Adaptor<double, BuildAdaptor>,
                                                 BuildAdaptor, kDims, uint32_t>;
using TreeNode = Tree::Node;

// The tree together with the adaptor it references (declared first so it outlives the tree)
// and the scales that map query bounds into the tree's coordinates.
struct BuiltTree {
  BuildAdaptor adaptor;
  Tree tree;
  BuiltTree(const BuildAdaptor& a, size_t leaf_size)
      : adaptor(a),
        tree(kDims, adaptor,
             nanoflann::KDTreeSingleIndexAdaptorParams(
                 leaf_size, nanoflann::KDTreeSingleIndexAdaptorFlags::SkipInitialBuildIndex)) {}
};

// ---- The FileId -> slot table: open addressing, linear probing, backward-shift delete. ----
// A bucket is tag(6 bits) | slot(26 bits); the tag (top hash bits) filters out 63/64 of the
// probes that would otherwise each read a slot's id (a cache miss).
constexpr uint32_t kSlotBits = 26;
constexpr uint32_t kSlotMask = (1u << kSlotBits) - 1;
constexpr uint32_t kEmptyBucket = 0xFFFFFFFFu;  // slot kSlotMask is never used
static_assert(kMaxKdTreeSlots < kSlotMask);
constexpr size_t kMinBuckets = 16;
// Leaves per block of the two-level bounding boxes (Store): a search reads a block's box, then
// its leaves' boxes only when the block's meets the query.
constexpr size_t kLeavesPerBlock = 16;

uint64_t HashId(FileId id) {
  uint64_t x = id.ino + 0x9E3779B97F4A7C15ull * (uint64_t{id.volume} + 1);
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return x;
}
uint32_t TagOf(uint64_t hash) { return static_cast<uint32_t>(hash >> 58) << kSlotBits; }

// Smallest power of two >= kMinBuckets holding n entries at load <= 0.7.
size_t BucketsFor(size_t n) { return std::max(kMinBuckets, std::bit_ceil(n * 10 / 7 + 1)); }


class KdTreeIndex final : public Index {
 public:
  KdTreeIndex(std::string name, const KdTreeOptions& options, MDB_dbi dbi)
      : name_(std::move(name)), options_(options), dbi_(dbi) {}

  IndexType type() const override { return IndexType::kKdTree; }
  const std::string& name() const override { return name_; }

  Status Insert(MDB_txn*, const AttrValue&, FileId) override {
    return Status::NotSupported("kdtree index " + name_ + ": use InsertPoint");
  }
  Status Remove(MDB_txn*, const AttrValue&, FileId) override {
    return Status::NotSupported("kdtree index " + name_ + ": use RemovePoint");
  }
  using Index::InsertPoint;
  Status InsertPoint(MDB_txn* txn, const KdPoint& point, FileId id, uint64_t tags) override;
  Status RemovePoint(MDB_txn* txn, FileId id) override;
  Status Search(MDB_txn* txn, const IndexQuery& q, const IdCallback& fn) const override;
  Status FilterBox(const IndexQuery& q, std::vector<FileId>* ids) const override;
  uint64_t Size() const override { return live_; }
  uint64_t MemoryBytes() const override;

  bool loaded() const override { return loaded_; }
  // Reads every point of the database into memory and builds the tree.
  Status Load(MDB_txn* txn) override;
  void Unload() override;
  Status Reattach(MDB_txn* txn) override;
  Status Rebalance() override;
  void BeginBatch() override { in_batch_ = true; }
  void EndBatch() override {
    in_batch_ = false;
    if (loaded_) AfterMutation();
  }
  void PrefetchFields(uint32_t axes) const override;
  void PrefetchBoxes(uint32_t axes) const override;

 private:
  Status LoadPoints(MDB_txn* txn);
  // LoadPoints' steps: room for n points; one point (ids come once each).
  void ReserveLoad(uint64_t n);
  Status AddLoaded(FileId id, const KdPoint& point, uint64_t tags);
  // Whether points live in this index's own database (dbi_) rather than behind scan_points.
  bool own_db() const { return !options_.scan_points; }
  // Everything a rebuild replaces, so a rebuild can construct the new one aside and swap it in
  // (a failed rebuild leaves the old one intact).
  struct Store {
    std::array<std::vector<float>, kDims> cols;  // cols[a][slot]: the slot's code on axis a
    std::vector<uint64_t> inos;
    // tags[slot]: the point's tags (InsertPoint). Not part of the geometry: a new tag for an
    // unchanged point is written in place.
    std::vector<uint64_t> tags;
    // The slots' volumes: every slot's is volume0 while `volumes` is empty — an ACG's files
    // are nearly always on one volume, and a lookup then reads no volume (one cache miss less
    // per candidate in FilterBox, 4 B less per slot) — else volumes[slot].
    uint32_t volume0 = 0;
    std::vector<uint32_t> volumes;
    std::vector<bool> dead;
    std::vector<uint32_t> buckets;  // power-of-two size, or empty when nothing was ever added
    // The base slots [0, base_end) in the leaf order of the last build: leaf k holds the
    // slots [leaf_end[k - 1], leaf_end[k]) (from 0 for k = 0), with bounding box
    // leaf_lo[a][k] .. leaf_hi[a][k] on each axis a; block j bounds the leaves
    // [j * kLeavesPerBlock, (j + 1) * kLeavesPerBlock) the same way (block_lo, block_hi).
    std::vector<uint32_t> leaf_end;
    std::array<std::vector<float>, kDims> leaf_lo, leaf_hi, block_lo, block_hi;
    uint32_t base_end = 0;            // slots [0, base_end) are in leaves
    uint32_t dead_base = 0;           // tombstones among them
    uint32_t dead_total = 0;          // tombstones among all slots

    uint32_t slots() const { return static_cast<uint32_t>(inos.size()); }
    FileId IdAt(uint32_t slot) const {
      return FileId{volumes.empty() ? volume0 : volumes[slot], inos[slot]};
    }
    // Whether appending a slot of `volume` needs the per-slot volumes.
    bool NeedsVolumes(uint32_t volume) const {
      return volumes.empty() && !inos.empty() && volume != volume0;
    }
    // Whether the slot's tags have every bit of `want`.
    bool HasTags(uint32_t slot, uint64_t want) const { return (tags[slot] & want) == want; }
    // Whether the slot holds `code`: axis by axis, so a changed point (an update's usual case:
    // its size or mtime moved) costs one column's cache miss, not six.
    bool Holds(uint32_t slot, const Code& code) const {
      for (int a = 0; a < kDims; ++a) {
        if (cols[a][slot] != code[a]) return false;
      }
      return true;
    }
    Code PointAt(uint32_t slot) const {
      Code c;
      for (int a = 0; a < kDims; ++a) c[a] = cols[a][slot];
      return c;
    }
    // Appends a slot. REQUIRES: room reserved in every vector (ReserveOneMore) when the
    // caller must not throw.
    void Push(const Code& code, FileId id, uint64_t tag) {
      if (NeedsVolumes(id.volume)) volumes.assign(inos.size(), volume0);
      if (inos.empty() && volumes.empty()) volume0 = id.volume;
      if (!volumes.empty()) volumes.push_back(id.volume);
      for (int a = 0; a < kDims; ++a) cols[a].push_back(code[a]);
      inos.push_back(id.ino);
      tags.push_back(tag);
      dead.push_back(false);
    }
    // Takes the leaves' ends (ascending, the last one base_end) and computes their boxes and
    // their blocks' boxes from the slots' codes. May throw std::bad_alloc.
    void SetLeaves(std::vector<uint32_t> ends);
    void Reserve(size_t n) {
      for (auto& c : cols) c.reserve(n);
      inos.reserve(n);
      tags.reserve(n);
      if (!volumes.empty()) volumes.reserve(n);
      dead.reserve(n);
    }
    // The bucket index holding id, or -1.
    int64_t FindBucket(FileId id, uint64_t hash) const;
    // Places (id at slot) in an empty bucket. REQUIRES: id absent, a free bucket exists.
    void PlaceBucket(uint64_t hash, uint32_t slot);
    void EraseBucket(size_t pos);
    // Rebuilds the table with `n` buckets (a power of two) from the buckets in use. May throw.
    void Rehash(size_t n);
    // Reserves room for one more slot in every vector (a full one grows by an eighth) and, if
    // `new_id`, in the table, without changing any content. May throw std::bad_alloc (then
    // nothing observable changed).
    void ReserveOneMore(bool new_id, uint32_t live, uint32_t volume);
  };

  // The prologue of Search and FilterBox: q must be a box, the index loaded; a rebuild a
  // mutation asked for happens here, once (see stale_).
  Status Fresh(const IndexQuery& q) const;
  // Compacts live slots into a new Store, builds the tree over them and swaps it in.
  // REQUIRES: exclusive access — a mutation, or a Search holding rebuild_mu_ while stale_.
  // ResourceExhausted (old state kept) when allocation fails.
  Status Rebuild() const;
  // Drops the tombstones and builds no tree: the live base slots keep their leaf order, in
  // the same leaves (their boxes recomputed, so they only shrink; a leaf left empty goes),
  // the live delta follows them. O(slots) where Rebuild is O(n log n) in nanoflann; whether
  // the delta has outgrown the tree stays the lazy rebuild's question (WantsLazyRebuild).
  // REQUIRES: exclusive access (a mutation). ResourceExhausted (old state kept) when
  // allocation fails.
  Status Compact();
  // Whether the unindexed or dead part is large enough for the next Search to rebuild.
  bool WantsLazyRebuild() const {
    const uint64_t outside = store_.slots() - store_.base_end + store_.dead_base;
    return outside > uint64_t{live_} / 8 + options_.rebuild_slack;
  }
  // After a mutation: compacts when tombstones pile up, else flags a lazy rebuild.
  void AfterMutation();
  Status PutPoint(MDB_txn* txn, FileId id, const KdPoint& point);

  // Constant after construction.
  const std::string name_;
  const KdTreeOptions options_;

  // Changed only by mutations (exclusive).
  MDB_dbi dbi_;            // and by Reattach
  bool loaded_ = false;    // and by Load/Unload
  bool in_batch_ = false;  // between BeginBatch and EndBatch: no compaction
  uint32_t live_ = 0;      // ids with a point == entries in the table
  std::string key_buf_;    // scratch for LMDB keys and values
  std::string value_buf_;

  // Lock order: rebuild_mu_ is a leaf lock. It serialises a lazy rebuild inside Search (while
  // other Searches may run) and MemoryBytes against it. stale_ is set only by mutations and
  // cleared (release) by the Search that rebuilt, under rebuild_mu_; a Search that reads it
  // false (acquire) sees the finished store_. No member is PROPELLER_GUARDED_BY it: what it
  // guards is the lazy rebuild, not store_, which mutations (under the owner's exclusive lock,
  // Acg::rw_) and searches of a fresh store read and write without it.
  mutable Mutex rebuild_mu_;
  mutable std::atomic<bool> stale_{false};
  // Changed by mutations, and by the lazy rebuild under rebuild_mu_ (see above).
  mutable Store store_;
};

int64_t KdTreeIndex::Store::FindBucket(FileId id, uint64_t hash) const {
  if (buckets.empty()) return -1;
  const size_t mask = buckets.size() - 1;
  const uint32_t tag = TagOf(hash);
  for (size_t pos = hash & mask;; pos = (pos + 1) & mask) {
    const uint32_t b = buckets[pos];
    if (b == kEmptyBucket) return -1;
    if ((b & ~kSlotMask) == tag && IdAt(b & kSlotMask) == id) return static_cast<int64_t>(pos);
  }
}

void KdTreeIndex::Store::PlaceBucket(uint64_t hash, uint32_t slot) {
  const size_t mask = buckets.size() - 1;
  size_t pos = hash & mask;
  while (buckets[pos] != kEmptyBucket) pos = (pos + 1) & mask;
  buckets[pos] = TagOf(hash) | slot;
}

void KdTreeIndex::Store::EraseBucket(size_t pos) {
  // Backward shift: move later members of the probe run into the hole when their home bucket
  // is not inside (hole, member], so every remaining id stays reachable without tombstones.
  const size_t mask = buckets.size() - 1;
  size_t hole = pos;
  for (size_t next = (hole + 1) & mask; buckets[next] != kEmptyBucket; next = (next + 1) & mask) {
    const size_t home = HashId(IdAt(buckets[next] & kSlotMask)) & mask;
    const bool home_in_range = hole <= next ? (hole < home && home <= next)
                                            : (hole < home || home <= next);
    if (!home_in_range) {
      buckets[hole] = buckets[next];
      hole = next;
    }
  }
  buckets[hole] = kEmptyBucket;
}

void KdTreeIndex::Store::SetLeaves(std::vector<uint32_t> ends) {
  leaf_end = std::move(ends);
  const size_t leaves = leaf_end.size();
  const size_t blocks = (leaves + kLeavesPerBlock - 1) / kLeavesPerBlock;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  for (int a = 0; a < kDims; ++a) {
    const std::vector<float>& col = cols[a];
    leaf_lo[a].assign(leaves, kInf);
    leaf_hi[a].assign(leaves, -kInf);
    block_lo[a].assign(blocks, kInf);
    block_hi[a].assign(blocks, -kInf);
    uint32_t begin = 0;
    for (size_t k = 0; k < leaves; ++k) {
      float lo = kInf, hi = -kInf;
      for (uint32_t s = begin; s < leaf_end[k]; ++s) {
        lo = std::min(lo, col[s]);
        hi = std::max(hi, col[s]);
      }
      leaf_lo[a][k] = lo;
      leaf_hi[a][k] = hi;
      const size_t j = k / kLeavesPerBlock;
      block_lo[a][j] = std::min(block_lo[a][j], lo);
      block_hi[a][j] = std::max(block_hi[a][j], hi);
      begin = leaf_end[k];
    }
  }
}

void KdTreeIndex::Store::Rehash(size_t n) {
  std::vector<uint32_t> previous(n, kEmptyBucket);
  previous.swap(buckets);
  for (uint32_t b : previous) {
    if (b != kEmptyBucket) PlaceBucket(HashId(IdAt(b & kSlotMask)), b & kSlotMask);
  }
}

void KdTreeIndex::Store::ReserveOneMore(bool new_id, uint32_t live, uint32_t volume) {
  // By an eighth: a rebuild leaves the vectors exactly full, and doubling them at the first
  // update would hold twice the tree until the next rebuild. Still amortised O(1) per slot
  // (each slot is copied at most ~9 times over the growth of its tree).
  auto grow = [](auto& v) {
    if (v.size() == v.capacity()) v.reserve(v.capacity() + v.capacity() / 8 + 16);
  };
  for (auto& c : cols) grow(c);
  grow(inos);
  grow(tags);
  if (NeedsVolumes(volume)) {
    // Push will fill it: room for every slot and the new one.
    volumes.reserve(inos.capacity());
  } else if (!volumes.empty()) {
    grow(volumes);
  }
  grow(dead);
  if (new_id && (uint64_t{live} + 1) * 5 > uint64_t{buckets.size()} * 4) {  // load > 0.8
    Rehash(std::max(kMinBuckets, buckets.size() * 2));
  }
}

Status KdTreeIndex::Rebuild() const {
  try {
    Store next;
    std::vector<uint32_t> order;
    order.reserve(live_);
    for (uint32_t s = 0; s < store_.slots(); ++s) {
      if (!store_.dead[s]) order.push_back(s);
    }
    const size_t n = order.size();
    next.Reserve(n);  // exactly: most trees are never updated (ReserveOneMore)
    next.buckets.assign(BucketsFor(n), kEmptyBucket);
    if (n > 0) {
      BuildAdaptor adaptor;
      adaptor.count = n;
      for (int a = 0; a < kDims; ++a) {
        const std::vector<float>& col = store_.cols[a];
        double lo = AxisKey(a, col[order[0]]);
        double hi = lo;
        for (uint32_t s : order) {
          const double k = AxisKey(a, col[s]);
          lo = std::min(lo, k);
          hi = std::max(hi, k);
        }
        adaptor.scales[a].offset = lo;
        adaptor.scales[a].scale = hi > lo ? 1.0 / (hi - lo) : 1.0;
      }
      std::vector<double> coords(n * kDims);
      for (size_t i = 0; i < n; ++i) {
        for (int a = 0; a < kDims; ++a) {
          coords[i * kDims + a] = adaptor.scales[a].Map(a, store_.cols[a][order[i]]);
        }
      }
      adaptor.coords = coords.data();
      BuiltTree built(adaptor, std::max<size_t>(1, options_.leaf_size));
      built.tree.buildIndex();
      // Lay the slots out in leaf order (see the file comment) and keep each leaf's range and
      // bounding box; the tree itself goes with `built`.
      for (uint32_t i : built.tree.vAcc) {
        const uint32_t s = order[i];
        next.Push(store_.PointAt(s), store_.IdAt(s), store_.tags[s]);
      }
      std::vector<uint32_t> ends;
      std::vector<const TreeNode*> stack{built.tree.root_node};
      while (!stack.empty()) {
        const TreeNode* node = stack.back();
        stack.pop_back();
        if (node->child1 == nullptr && node->child2 == nullptr) {
          if (node->node_type.lr.right > node->node_type.lr.left) {
            ends.push_back(static_cast<uint32_t>(node->node_type.lr.right));
          }
          continue;
        }
        if (node->child2 != nullptr) stack.push_back(node->child2);
        if (node->child1 != nullptr) stack.push_back(node->child1);
      }
      std::sort(ends.begin(), ends.end());
      next.SetLeaves(std::move(ends));
      for (uint32_t s = 0; s < n; ++s) next.PlaceBucket(HashId(next.IdAt(s)), s);
      next.base_end = static_cast<uint32_t>(n);
    }
    store_ = std::move(next);
    return Status::OK();
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted("kdtree index " + name_ + ": out of memory in rebuild");
  } catch (const std::exception& e) {
    return Status::Internal("kdtree index " + name_ + ": rebuild: " + e.what());
  }
}

Status KdTreeIndex::Compact() {
  try {
    Store next;
    next.Reserve(live_);  // the updates that follow grow it (ReserveOneMore)
    next.buckets.assign(BucketsFor(live_), kEmptyBucket);
    auto keep = [&](uint32_t s) {
      if (!store_.dead[s]) next.Push(store_.PointAt(s), store_.IdAt(s), store_.tags[s]);
    };
    std::vector<uint32_t> ends;
    ends.reserve(store_.leaf_end.size());
    uint32_t begin = 0;
    for (uint32_t end : store_.leaf_end) {  // the last leaf ends at base_end
      for (uint32_t s = begin; s < end; ++s) keep(s);
      if (next.slots() > (ends.empty() ? 0 : ends.back())) ends.push_back(next.slots());
      begin = end;
    }
    next.base_end = next.slots();
    for (uint32_t s = store_.base_end; s < store_.slots(); ++s) keep(s);
    next.SetLeaves(std::move(ends));
    for (uint32_t s = 0; s < next.slots(); ++s) next.PlaceBucket(HashId(next.IdAt(s)), s);
    store_ = std::move(next);
    return Status::OK();
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted("kdtree index " + name_ + ": out of memory in compaction");
  }
}

void KdTreeIndex::AfterMutation() {
  if (!in_batch_ && store_.dead_total > live_ / 4 + options_.rebuild_slack) {
    // Bounds memory when updates come without searches, without building a tree that the
    // next updates would outdate again before any search used it (a commit-only stream of
    // updates rebuilt every ACG's tree every few commits: bench/results/scale, ninth sitting).
    // On failure the old (larger but consistent) state stays and the next mutation tries
    // again.
    (void)Compact();
  }
  stale_.store(WantsLazyRebuild(), std::memory_order_release);
}

Status KdTreeIndex::PutPoint(MDB_txn* txn, FileId id, const KdPoint& point) {
  if (!own_db()) return Status::OK();  // the caller's records hold it
  key_buf_.assign(options_.key_prefix);
  AppendFileIdKey(id, &key_buf_);
  value_buf_.clear();
  for (int64_t v : point) AppendOrderedI64(v, &value_buf_);
  MDB_val key{key_buf_.size(), key_buf_.data()};
  MDB_val value{value_buf_.size(), value_buf_.data()};
  const int rc = mdb_put(txn, dbi_, &key, &value, 0);
  if (rc != MDB_SUCCESS) return LmdbStatus(rc, "kdtree index " + name_ + ": put");
  return Status::OK();
}

Status KdTreeIndex::InsertPoint(MDB_txn* txn, const KdPoint& point, FileId id, uint64_t tags) {
  if (!loaded_) return PutPoint(txn, id, point);
  uint64_t hash = HashId(id);
  int64_t pos = store_.FindBucket(id, hash);
  const Code code = CodeOf(point);
  if (pos >= 0 && store_.Holds(store_.buckets[pos] & kSlotMask, code)) {
    // Unchanged in memory but for the tags, which no tree structure depends on; keep LMDB
    // authoritative.
    PROPELLER_RETURN_IF_ERROR(PutPoint(txn, id, point));
    store_.tags[store_.buckets[pos] & kSlotMask] = tags;
    return Status::OK();
  }
  if (store_.slots() >= kMaxKdTreeSlots) {
    if (store_.dead_total > 0) {
      PROPELLER_RETURN_IF_ERROR(Compact());
      pos = store_.FindBucket(id, hash);
    }
    if (store_.slots() >= kMaxKdTreeSlots) {
      return Status::ResourceExhausted("kdtree index " + name_ + ": too many points");
    }
  }
  // Allocate before writing LMDB so that after a successful put nothing can fail.
  try {
    store_.ReserveOneMore(/*new_id=*/pos < 0, live_, id.volume);
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted("kdtree index " + name_ + ": out of memory");
  }
  pos = store_.FindBucket(id, hash);  // a rehash moves buckets
  PROPELLER_RETURN_IF_ERROR(PutPoint(txn, id, point));

  const uint32_t slot = store_.slots();
  store_.Push(code, id, tags);
  if (pos >= 0) {
    const uint32_t old = store_.buckets[pos] & kSlotMask;
    store_.dead[old] = true;
    ++store_.dead_total;
    if (old < store_.base_end) ++store_.dead_base;
    store_.buckets[pos] = TagOf(hash) | slot;
  } else {
    store_.PlaceBucket(hash, slot);
    ++live_;
  }
  AfterMutation();
  return Status::OK();
}

Status KdTreeIndex::RemovePoint(MDB_txn* txn, FileId id) {
  if (own_db()) {
    key_buf_.assign(options_.key_prefix);
    AppendFileIdKey(id, &key_buf_);
    MDB_val key{key_buf_.size(), key_buf_.data()};
    const int rc = mdb_del(txn, dbi_, &key, nullptr);
    if (rc != MDB_SUCCESS && rc != MDB_NOTFOUND) {
      return LmdbStatus(rc, "kdtree index " + name_ + ": delete");
    }
  }
  if (!loaded_) return Status::OK();
  const int64_t pos = store_.FindBucket(id, HashId(id));
  if (pos < 0) return Status::OK();
  const uint32_t slot = store_.buckets[pos] & kSlotMask;
  store_.dead[slot] = true;
  ++store_.dead_total;
  if (slot < store_.base_end) ++store_.dead_base;
  store_.EraseBucket(static_cast<size_t>(pos));
  --live_;
  AfterMutation();
  return Status::OK();
}

Status KdTreeIndex::Fresh(const IndexQuery& q) const {
  if (q.kind != IndexQuery::Kind::kBox) {
    return Status::NotSupported("kdtree index " + name_ + " answers only box queries");
  }
  if (!loaded_) return Status::Internal("kdtree index " + name_ + ": searched while not loaded");
  if (stale_.load(std::memory_order_acquire)) {
    MutexLock lock(&rebuild_mu_);
    if (stale_.load(std::memory_order_relaxed)) {
      // A failed rebuild (out of memory) still leaves a correct store: answer from it, and do
      // not retry until the next mutation, so no Search rebuilds while another reads.
      (void)Rebuild();
      stale_.store(false, std::memory_order_release);
    }
  }
  return Status::OK();
}

Status KdTreeIndex::FilterBox(const IndexQuery& q, std::vector<FileId>* ids) const {
  PROPELLER_RETURN_IF_ERROR(Fresh(q));
  const Box box = MakeBox(q);
  if (box.empty) {
    ids->clear();
    return Status::OK();
  }
  const Store& st = store_;
  if (st.buckets.empty()) {
    ids->clear();
    return Status::OK();
  }
  // Each candidate costs a few cache misses (its bucket, then its slot's id and point), and
  // one after the other they were the largest item of `keyword=firefox & mtime<1w` (perf,
  // 1 M files). In groups: the buckets of a group are prefetched, then each candidate's
  // slot by its first bucket of the same tag, then the candidates are decided, so the misses
  // of a group overlap instead of adding up. The decision is FindBucket's, unchanged.
  constexpr size_t kGroup = 64;
  const size_t mask = st.buckets.size() - 1;
  uint64_t hashes[kGroup];
  size_t kept = 0;
  const size_t n = ids->size();
  for (size_t begin = 0; begin < n; begin += kGroup) {
    const size_t end = std::min(n, begin + kGroup);
    for (size_t i = begin; i < end; ++i) {
      hashes[i - begin] = HashId((*ids)[i]);
      __builtin_prefetch(&st.buckets[hashes[i - begin] & mask]);
    }
    for (size_t i = begin; i < end; ++i) {
      const uint64_t hash = hashes[i - begin];
      const uint32_t tag = TagOf(hash);
      for (size_t pos = hash & mask;; pos = (pos + 1) & mask) {
        const uint32_t b = st.buckets[pos];
        if (b == kEmptyBucket) break;
        if ((b & ~kSlotMask) == tag) {
          const uint32_t slot = b & kSlotMask;
          __builtin_prefetch(&st.inos[slot]);
          if (!st.volumes.empty()) __builtin_prefetch(&st.volumes[slot]);
          for (int k = 0; k < box.num_axes; ++k) __builtin_prefetch(&st.cols[box.axes[k]][slot]);
          if (box.tags != 0) __builtin_prefetch(&st.tags[slot]);
          break;
        }
      }
    }
    for (size_t i = begin; i < end; ++i) {
      const FileId id = (*ids)[i];
      const int64_t pos = st.FindBucket(id, hashes[i - begin]);
      if (pos < 0) continue;
      const uint32_t slot = st.buckets[pos] & kSlotMask;
      if (box.ContainsAt(st.cols, slot) && st.HasTags(slot, box.tags)) (*ids)[kept++] = id;
    }
  }
  ids->resize(kept);
  return Status::OK();
}

void KdTreeIndex::PrefetchFields(uint32_t axes) const {
  __builtin_prefetch(&loaded_);
  __builtin_prefetch(&stale_);
  __builtin_prefetch(&store_.leaf_end);
  __builtin_prefetch(&store_.tags);
  for (uint32_t m = axes; m != 0; m &= m - 1) {
    const int a = std::countr_zero(m);
    __builtin_prefetch(&store_.cols[a]);
    __builtin_prefetch(&store_.leaf_lo[a]);
    __builtin_prefetch(&store_.leaf_hi[a]);
    __builtin_prefetch(&store_.block_lo[a]);
    __builtin_prefetch(&store_.block_hi[a]);
  }
}

void KdTreeIndex::PrefetchBoxes(uint32_t axes) const {
  // A stale store may be being rebuilt by a search (under rebuild_mu_ only): not read then.
  if (!loaded_ || stale_.load(std::memory_order_acquire) || store_.leaf_end.empty()) return;
  const Store& st = store_;
  __builtin_prefetch(st.leaf_end.data());
  for (uint32_t m = axes; m != 0; m &= m - 1) {
    const int a = std::countr_zero(m);
    __builtin_prefetch(st.block_lo[a].data());
    __builtin_prefetch(st.block_hi[a].data());
    __builtin_prefetch(st.leaf_lo[a].data());
    __builtin_prefetch(st.leaf_hi[a].data());
  }
}

Status KdTreeIndex::Search(MDB_txn* /*txn*/, const IndexQuery& q, const IdCallback& fn) const {
  PROPELLER_RETURN_IF_ERROR(Fresh(q));

  const Box box = MakeBox(q);
  if (box.empty) return Status::OK();
  const Store& st = store_;

  // 32 slots at a time: which are inside (one mask per axis); those go to `inside`, and
  // every kBatch of them the live ones with the tags are answered. The tags of the batch are
  // fetched together first: one at a time, each a cache miss behind the last, they were half
  // of the scan's time (`keyword=firefox & mtime<1w`, 100 M files).
  constexpr uint32_t kBatch = 64;
  uint32_t inside[kBatch];
  uint32_t pending = 0;
  auto flush = [&] {
    if (box.tags != 0) {
      for (uint32_t i = 0; i < pending; ++i) __builtin_prefetch(&st.tags[inside[i]]);
    }
    for (uint32_t i = 0; i < pending; ++i) {
      const uint32_t s = inside[i];
      if (st.HasTags(s, box.tags) && !st.dead[s] && !fn(st.IdAt(s))) return false;
    }
    pending = 0;
    return true;
  };
  auto scan = [&](uint32_t begin, uint32_t end) {
    for (uint32_t b = begin; b < end; b += 32) {
      const uint32_t n = std::min<uint32_t>(32, end - b);
      for (uint32_t in = box.ContainsMask(st.cols, b, n); in != 0; in &= in - 1) {
        inside[pending++] = b + static_cast<uint32_t>(std::countr_zero(in));
        if (pending == kBatch && !flush()) return false;
      }
    }
    return true;
  };

  // The leaves, a block of them at a time: a block or leaf whose box misses the query's holds
  // no match (every code it bounds is outside), and a leaf that meets it is scanned.
  static_assert(kLeavesPerBlock <= 32);
  const size_t leaves = st.leaf_end.size();
  for (size_t j = 0; j * kLeavesPerBlock < leaves; ++j) {
    if (!box.Meets(st.block_lo, st.block_hi, j)) continue;
    const size_t first = j * kLeavesPerBlock;
    const uint32_t n = static_cast<uint32_t>(std::min(leaves - first, kLeavesPerBlock));
    const uint32_t meets = box.MeetsMask(st.leaf_lo, st.leaf_hi, first, n);
    // The meeting leaves' columns are asked for together before the first is scanned, so
    // their misses overlap (at 100 M files a leaf's scan mostly waited for its column).
    for (uint32_t m = meets; m != 0; m &= m - 1) {
      const size_t k = first + static_cast<size_t>(std::countr_zero(m));
      const uint32_t b = k == 0 ? 0 : st.leaf_end[k - 1];
      const uint32_t e = st.leaf_end[k];
      for (int x = 0; x < box.num_axes; ++x) {
        const float* col = st.cols[box.axes[x]].data();
        __builtin_prefetch(col + b);
        if (e - b > 16) __builtin_prefetch(col + b + 16);  // a leaf's second line
      }
    }
    for (uint32_t m = meets; m != 0; m &= m - 1) {
      const size_t k = first + static_cast<size_t>(std::countr_zero(m));
      if (!scan(k == 0 ? 0 : st.leaf_end[k - 1], st.leaf_end[k])) return Status::OK();
    }
  }
  if (scan(st.base_end, st.slots())) (void)flush();
  return Status::OK();
}

uint64_t KdTreeIndex::MemoryBytes() const {
  MutexLock lock(&rebuild_mu_);
  const Store& st = store_;
  uint64_t bytes = sizeof(*this) + name_.capacity() + key_buf_.capacity() + value_buf_.capacity();
  for (const auto& c : st.cols) bytes += c.capacity() * sizeof(float);
  bytes += st.inos.capacity() * sizeof(uint64_t);
  bytes += st.tags.capacity() * sizeof(uint64_t);
  bytes += st.volumes.capacity() * sizeof(uint32_t);
  bytes += st.dead.capacity() / 8;
  bytes += st.buckets.capacity() * sizeof(uint32_t);
  bytes += st.leaf_end.capacity() * sizeof(uint32_t);
  for (int a = 0; a < kDims; ++a) {
    bytes += (st.leaf_lo[a].capacity() + st.leaf_hi[a].capacity() + st.block_lo[a].capacity() +
              st.block_hi[a].capacity()) * sizeof(float);
  }
  return bytes;
}

Status KdTreeIndex::Load(MDB_txn* txn) {
  if (loaded_) return Status::OK();
  Status s = LoadPoints(txn);
  if (!s.ok()) {
    Unload();
    return s;
  }
  loaded_ = true;
  return Status::OK();
}

void KdTreeIndex::Unload() {
  MutexLock lock(&rebuild_mu_);
  store_ = Store();
  live_ = 0;
  loaded_ = false;
  stale_.store(false, std::memory_order_release);
}

Status KdTreeIndex::Reattach(MDB_txn* txn) {
  // Drops an older version's database again in case the transaction that opened this index
  // (and dropped it) was aborted; normally a lookup that finds nothing.
  if (!own_db()) {
    return options_.key_prefix.empty() ? DropKdTreeIndexData(txn, name_) : Status::OK();
  }
  const std::string db = DbName(name_);
  const int rc = mdb_dbi_open(txn, db.c_str(), MDB_CREATE, &dbi_);
  if (rc != MDB_SUCCESS) return LmdbStatus(rc, "reopen " + db);
  return Status::OK();
}

Status KdTreeIndex::Rebalance() {
  if (!loaded_ || !stale_.load(std::memory_order_acquire)) return Status::OK();
  MutexLock lock(&rebuild_mu_);
  Status s = Rebuild();
  stale_.store(false, std::memory_order_release);  // as in Search: no retry until a mutation
  return s;
}

void KdTreeIndex::ReserveLoad(uint64_t n) {
  store_.Reserve(std::min<uint64_t>(n, kMaxKdTreeSlots));
}

Status KdTreeIndex::AddLoaded(FileId id, const KdPoint& point, uint64_t tags) {
  if (store_.slots() >= kMaxKdTreeSlots) {
    return Status::ResourceExhausted("kdtree index " + name_ + ": too many points");
  }
  // Each id comes once (unique keys), so the table needs no lookup; Rebuild fills it.
  store_.Push(CodeOf(point), id, tags);
  ++live_;
  return Status::OK();
}

Status KdTreeIndex::LoadPoints(MDB_txn* txn) {
  try {
    if (!own_db()) {
      PROPELLER_RETURN_IF_ERROR(options_.scan_points(
          txn, [this](uint64_t n) { ReserveLoad(n); },
          [this](FileId id, const KdPoint& point, uint64_t tags) {
            return AddLoaded(id, point, tags);
          }));
      // Rebuild compacts (nothing is dead), builds the tree and fills the id table.
      return Rebuild();
    }
    const std::string& prefix = options_.key_prefix;
    int rc;
    if (prefix.empty()) {  // the database is this index's alone: its size is the point count
      MDB_stat stat;
      rc = mdb_stat(txn, dbi_, &stat);
      if (rc != MDB_SUCCESS) return LmdbStatus(rc, "kdtree index " + name_ + ": stat");
      if (stat.ms_entries > kMaxKdTreeSlots) {
        return Status::ResourceExhausted("kdtree index " + name_ + ": too many points");
      }
      ReserveLoad(stat.ms_entries);
    }
    MDB_cursor* cursor = nullptr;
    rc = mdb_cursor_open(txn, dbi_, &cursor);
    if (rc != MDB_SUCCESS) return LmdbStatus(rc, "kdtree index " + name_ + ": cursor");
    std::unique_ptr<MDB_cursor, void (*)(MDB_cursor*)> closer(cursor, mdb_cursor_close);
    MDB_val key = Val(prefix);
    MDB_val value;
    for (rc = mdb_cursor_get(cursor, &key, &value, prefix.empty() ? MDB_FIRST : MDB_SET_RANGE);
         rc == MDB_SUCCESS; rc = mdb_cursor_get(cursor, &key, &value, MDB_NEXT)) {
      std::string_view k = View(key);
      if (!k.starts_with(prefix)) break;  // past this index's key range
      k.remove_prefix(prefix.size());
      FileId id;
      PROPELLER_RETURN_IF_ERROR(DecodeFileIdKey(k, &id).WithContext("kdtree index " + name_));
      if (value.mv_size != kPointValueBytes) {
        return Status::Corruption("kdtree index " + name_ + ": point value of " +
                                  std::to_string(value.mv_size) + " bytes, want 48");
      }
      KdPoint point;
      const char* bytes = static_cast<const char*>(value.mv_data);
      for (int a = 0; a < kDims; ++a) point[a] = DecodeOrderedI64(std::string_view(bytes + 8 * a, 8));
      // Tags are not stored: every bit, which every tag filter keeps (Index::InsertPoint).
      PROPELLER_RETURN_IF_ERROR(AddLoaded(id, point, kAllTags));
    }
    if (rc != MDB_NOTFOUND) return LmdbStatus(rc, "kdtree index " + name_ + ": scan");
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted("kdtree index " + name_ + ": out of memory in load");
  }
  return Rebuild();
}

}  // namespace

Result<std::unique_ptr<Index>> OpenKdTreeIndex(MDB_txn* txn, const std::string& name,
                                               const KdTreeOptions& options) {
  return OpenKdTreeIndex(txn, name, options, /*load=*/true);
}

Result<std::unique_ptr<Index>> OpenKdTreeIndex(MDB_txn* txn, const std::string& name,
                                               const KdTreeOptions& options, bool load) {
  MDB_dbi dbi = 0;
  if (options.scan_points) {
    // An older version's copy (a shared store, with key prefixes, never had one).
    if (options.key_prefix.empty()) PROPELLER_RETURN_IF_ERROR(DropKdTreeIndexData(txn, name));
  } else {
    const std::string db = DbName(name);
    const int rc = mdb_dbi_open(txn, db.c_str(), MDB_CREATE, &dbi);
    if (rc != MDB_SUCCESS) return LmdbStatus(rc, "open " + db);
  }
  auto index = std::make_unique<KdTreeIndex>(name, options, dbi);
  if (load) PROPELLER_RETURN_IF_ERROR(index->Load(txn));
  return std::unique_ptr<Index>(std::move(index));
}

Result<std::unique_ptr<Index>> OpenKdTreeIndex(MDB_txn* txn, const std::string& name) {
  return OpenKdTreeIndex(txn, name, KdTreeOptions{});
}

Status DropKdTreeIndexData(MDB_txn* txn, const std::string& name,
                           std::string_view key_prefix) {
  return DropIndexDatabase(txn, DbName(name), key_prefix);
}

}  // namespace propeller
