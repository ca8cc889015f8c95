// The K-D tree's float codes of points and boxes, and the box tests a search makes 32 codes at a
// time (kdtree_index.cc, whose header comment says why a superset of codes is exact enough).
// Internal to the kdtree index; its tests may use it.
#ifndef PROPELLER_INDEXNODE_INDEX_KDTREE_CODES_H_
#define PROPELLER_INDEXNODE_INDEX_KDTREE_CODES_H_

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include <array>
#include <cstdint>
#include <limits>
#include <vector>

#include "indexnode/index/index.h"

namespace propeller::kdtree_internal {

constexpr int kDims = kNumInodeAxes;

// A point as kept in memory: each int64 coordinate rounded to the nearest float (through the
// nearest double). Both roundings are monotone non-decreasing, so lo <= v <= hi implies
// CodeOf(lo) <= CodeOf(v) <= CodeOf(hi): a point inside an int64 box has its code inside the
// box of codes, and Search returns a superset of the exact answer. Codes are exact for
// |v| < 2^24 (uids, gids, sizes below 16 MiB) and otherwise within a relative 2^-24 (±64 B at
// 1 GiB; ±137 s for nanosecond timestamps of today). 24 bytes instead of 48 per point.
using Code = std::array<float, kDims>;
inline float CodeOf(int64_t v) { return static_cast<float>(static_cast<double>(v)); }
inline Code CodeOf(const KdPoint& p) {
  Code c;
  for (int a = 0; a < kDims; ++a) c[a] = CodeOf(p[a]);
  return c;
}

// Bit i set when the interval [los[i], his[i]] meets [lo, hi], for i < n <= 32 (with
// los == his: when lo <= v[i] <= hi). Four at a time with SSE2 (every x86-64 has it): a box
// query tests whole leaves of one column, where a compare and a branch per code were 30% of
// `keyword=firefox & mtime<1w` at 10 M files (perf).
inline uint32_t Overlaps(const float* los, const float* his, uint32_t n, float lo, float hi) {
  uint32_t mask = 0;
  uint32_t i = 0;
#ifdef __SSE2__
  const __m128 vlo = _mm_set1_ps(lo);
  const __m128 vhi = _mm_set1_ps(hi);
  for (; i + 4 <= n; i += 4) {
    const __m128 meets = _mm_and_ps(_mm_cmpge_ps(_mm_loadu_ps(his + i), vlo),
                                    _mm_cmple_ps(_mm_loadu_ps(los + i), vhi));
    mask |= static_cast<uint32_t>(_mm_movemask_ps(meets)) << i;
  }
#endif
  for (; i < n; ++i) mask |= uint32_t{his[i] >= lo && los[i] <= hi} << i;
  return mask;
}

// The codes of an axis-aligned int64 box (unbounded sides: infinite).
struct Box {
  std::array<float, kDims> lo;
  std::array<float, kDims> hi;
  std::array<int, kDims> axes;  // the bounded axes, checked per point
  int num_axes = 0;
  bool empty = false;  // no int64 point can be inside
  uint64_t tags = 0;   // IndexQuery::box_tags: bits a point's tags must all have

  // Whether slot `s` of the columns `cols` (one per axis) is inside: only the bounded axes
  // are read, one float each.
  bool ContainsAt(const std::array<std::vector<float>, kDims>& cols, size_t s) const {
    for (int k = 0; k < num_axes; ++k) {
      const int a = axes[k];
      const float v = cols[a][s];
      if (v < lo[a] || v > hi[a]) return false;
    }
    return true;
  }
  // Whether the bounding box number `i` of `los`/`his` (columns of per-axis minima and maxima)
  // meets this box. False proves that every code it bounds is outside.
  bool Meets(const std::array<std::vector<float>, kDims>& los,
             const std::array<std::vector<float>, kDims>& his, size_t i) const {
    for (int k = 0; k < num_axes; ++k) {
      const int a = axes[k];
      if (his[a][i] < lo[a] || los[a][i] > hi[a]) return false;
    }
    return true;
  }
  // Bit i set when slot begin + i is inside, for i < n <= 32 (ContainsAt of each).
  uint32_t ContainsMask(const std::array<std::vector<float>, kDims>& cols, size_t begin,
                        uint32_t n) const {
    uint32_t mask = n == 32 ? ~uint32_t{0} : (uint32_t{1} << n) - 1;
    for (int k = 0; k < num_axes && mask != 0; ++k) {
      const int a = axes[k];
      const float* col = cols[a].data() + begin;
      mask &= Overlaps(col, col, n, lo[a], hi[a]);
    }
    return mask;
  }
  // Bit i set when bounding box begin + i of los/his meets this box, for i < n <= 32.
  uint32_t MeetsMask(const std::array<std::vector<float>, kDims>& los,
                     const std::array<std::vector<float>, kDims>& his, size_t begin,
                     uint32_t n) const {
    uint32_t mask = n == 32 ? ~uint32_t{0} : (uint32_t{1} << n) - 1;
    for (int k = 0; k < num_axes && mask != 0; ++k) {
      const int a = axes[k];
      mask &= Overlaps(los[a].data() + begin, his[a].data() + begin, n, lo[a], hi[a]);
    }
    return mask;
  }
};

inline Box MakeBox(const IndexQuery& q) {
  Box box;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  for (int a = 0; a < kDims; ++a) {
    box.lo[a] = q.box_lo[a] ? CodeOf(*q.box_lo[a]) : -kInf;
    box.hi[a] = q.box_hi[a] ? CodeOf(*q.box_hi[a]) : kInf;
    if (q.box_lo[a] || q.box_hi[a]) box.axes[box.num_axes++] = a;
    if (q.box_lo[a] && q.box_hi[a] && *q.box_lo[a] > *q.box_hi[a]) box.empty = true;
  }
  box.tags = q.box_tags;
  return box;
}

}  // namespace propeller::kdtree_internal

#endif  // PROPELLER_INDEXNODE_INDEX_KDTREE_CODES_H_
