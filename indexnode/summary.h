// AcgSummary: what an ACG partition could contain, small enough to keep for every ACG in
// memory, so a search skips partitions that cannot match without opening or committing them
// (docs/architecture.md §6; the idea of Magellan's Bloom filters and GUFI's directory summaries).
//
// It holds min/max of the six inode axes, a Bloom filter over keyword tokens and uids, and,
// for each power-of-two size class, the min/max mtime of the files in it: a conjunction of a
// size and an mtime range ("size>1g & mtime<1d", the commonest search there is) is pruned
// unless one file is both large enough and recent enough, where the separate min/max of each
// axis would keep every partition with one big file and one new one. It also holds the
// deepest directory every path lies under, which tells the planner when a keyword is in every
// path (EveryPathHasKeyword) and reading its posting chunks would list the whole ACG. And a
// second Bloom filter over (keyword, mtime week) pairs, for the same reason as the size
// classes: `keyword=firefox & mtime<1w` keeps only a partition where one file has both, where
// the keyword filter and the mtime range alone keep every partition with one firefox file and
// one new file (at 100 M files, 63% of the partitions that query searched had no candidate).
// It only ever widens as records arrive (deletions do not shrink it), so it stays a correct
// over-approximation without rescanning; it is rebuilt exactly when an ACG is rebuilt.
// A false "may match" costs a partition search; a false "cannot match" would lose results and
// must never happen: the tests check MayMatch against brute force.
//
// Thread-compatible: callers serialise access (the ACG's cache lock).
#ifndef PROPELLER_INDEXNODE_SUMMARY_H_
#define PROPELLER_INDEXNODE_SUMMARY_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/query/query.h"
#include "common/record.h"
#include "common/status.h"
#include "indexnode/index/index.h"

namespace propeller {

class AcgSummary {
 public:
  // 32 Ki bits, 3 probes: ~5% false positives at 5,000 distinct tokens per ACG (measured on the
  // benchmark generator's namespaces). 4 KiB per ACG: 4 MiB for 1,000 ACGs.
  static constexpr size_t kBloomBytes = 4096;
  static constexpr int kBloomProbes = 3;

  AcgSummary();

  // Widens the summary to cover `record`.
  void Add(const FileRecord& record);
  // Add() for a record whose paths the summary already covers (an update that did not rename):
  // only the inode axes and the uid. When the record's mtime moved to another week (WeekOf)
  // than the covered one's, AddKeywordWeeks(record) must follow.
  void AddAttributes(const FileRecord& record);
  void AddKeywordWeeks(const FileRecord& record);

  // The keyword-week filter. A summary decoded from a layout before 4 has none: its bits
  // cover only the records added since, and it prunes nothing until CompleteKeywordWeeks
  // gives it those of every record (Acg::ScanPoints, which reads every record anyway).
  static constexpr size_t kWeekBloomBytes = 8192;
  // A week: 2^49 ns, 6.5 days, of mtime (in ns since the epoch).
  static int64_t WeekOf(int64_t mtime_ns) { return mtime_ns >> 49; }
  // The filter's key of a keyword of hash `token_hash` (TokenHash) in a week.
  static uint64_t TokenHash(std::string_view token);
  static uint64_t WeekKey(uint64_t token_hash, int64_t week);
  // KeywordBits of a token of hash `token_hash`.
  static uint64_t TokenBits(uint64_t token_hash);
  // A query's mtime range over more weeks than this is not tested against the filter.
  static constexpr int64_t kMaxWeekProbes = 16;
  // A filter of keys, in the summary's layout, for a caller adding a whole ACG's keys.
  using WeekBloom = std::array<uint8_t, kWeekBloomBytes>;
  static void WeekBloomAdd(uint64_t key, WeekBloom* bloom);
  // Widens the filter by `bloom`, which holds the keys of every record the summary covers
  // (those added since may be missing: they are added here as they come), and from then on
  // prunes with it.
  void CompleteKeywordWeeks(const WeekBloom& bloom);
  bool keyword_weeks_complete() const { return weeks_complete_; }
  // Widens the summary to cover everything `other` covers.
  void Merge(const AcgSummary& other);
  bool empty() const { return empty_; }

  // False only when no record covered by the summary can satisfy `node`.
  bool MayMatch(const QueryNode& node) const;
  // The keyword token (PathKeywords) that one of the paths of every file satisfying `pred`
  // has: the `keyword` index's key for it, and what the filters are asked. keyword=t: t;
  // ext=e: e when it is one lowercase alphanumeric run; name=n: n's first token. nullopt
  // for any other predicate.
  static std::optional<std::string> RequiredToken(const Predicate& pred);
  // The bytes of the Bloom filter that MayMatch(node) may read, as offsets into bloom(): the
  // same for every summary, so a caller asking many summaries prefetches them ahead.
  static void BloomProbes(const QueryNode& node, std::vector<uint32_t>* offsets);
  // The filter's first byte (its address only: reading it needs the caller's lock).
  const uint8_t* bloom() const { return bloom_.data(); }

  // The deepest directory (ending in '/') that every path added so far lies under; "/" when
  // unknown (a summary decoded from layout 1 or 2, or a record without a path), "" while
  // nothing was added.
  const std::string& common_dir() const { return common_dir_; }
  // Whether `token` (a lowercase keyword) is a keyword of every path the summary covers: it is
  // one of common_dir()'s. A planning hint, never a filter: verification checks each record.
  bool EveryPathHasKeyword(std::string_view token) const;
  // A 64-bit filter of common_dir()'s keywords: KeywordBits(t) are all set in it for each.
  // What a caller can keep beside the summary and test without the summary's lock.
  uint64_t common_dir_bits() const;
  static uint64_t KeywordBits(std::string_view token);
  // The OR of KeywordBits(t) over every t of PathKeywords(path), without building the list; and
  // over every path of a record. The `inode` K-D tree keeps the latter per file as its tags
  // (kdtree_index.h), so a keyword is tested against a file in memory.
  static uint64_t PathKeywordBits(std::string_view path);
  static uint64_t RecordKeywordBits(const FileRecord& record);

  // Persistence in the ACG's meta database. Layout (little-endian):
  //   u8 version=4 ‖ u8 empty ‖ 6×(i64 min, i64 max) ‖ kBloomBytes bloom bits ‖
  //   kSizeClasses×(i64 min mtime, i64 max mtime) ‖   (an empty class: min > max)
  //   u16 n ‖ n bytes: common_dir() ‖
  //   u8 complete ‖ kWeekBloomBytes keyword-week bits    (version 4)
  // Version 3 is the same without the last part, version 2 also without the common
  // directory, version 1 also without the size classes; they decode to a summary that prunes
  // on what they hold (a common directory of "/", an incomplete keyword-week filter).
  void EncodeTo(std::string* out) const;
  Status DecodeFrom(std::string_view bytes);

  // Size class of a size: 0 for 0, else its bit length (1..63): class c holds [2^(c-1), 2^c).
  static constexpr int kSizeClasses = 64;
  static int SizeClass(int64_t size);

  static KdPoint PointOf(const FileRecord& record);
  // The longest common_dir() kept: a shorter prefix ending in '/' of a common directory is
  // common too.
  static constexpr size_t kMaxCommonDir = 1024;

 private:
  // Narrows common_dir_ to a directory that `path` lies under too.
  void NarrowCommonDir(std::string_view path);
  void BloomAdd(std::string_view key);
  bool BloomMayContain(std::string_view key) const;
  bool PredMayMatch(const Predicate& pred) const;
  // For an AND: false when its size and mtime predicates together exclude every size class.
  bool SizeMtimeMayMatch(const QueryNode& and_node) const;
  // For an AND: false when no keyword it requires is in a path of a file of a week its mtime
  // predicates admit.
  bool KeywordWeeksMayMatch(const QueryNode& and_node) const;

  // The mtime range of a size class's files; empty: min > max.
  struct ClassTimes {
    int64_t min = INT64_MAX;
    int64_t max = INT64_MIN;
  };

  // What MayMatch reads first is together, and the size classes are read by the mask of
  // those that hold a file: a search asks this of every ACG (100,000 at 100 M files), and
  // `size>1g & mtime<1d` used to read 33 classes' two arrays in each.
  bool empty_ = true;
  bool has_classes_ = true;  // false when decoded from layout version 1
  uint64_t class_mask_ = 0;  // bit c: class c holds a file
  KdPoint min_{};
  KdPoint max_{};
  std::array<ClassTimes, kSizeClasses> classes_{};
  std::array<uint8_t, kBloomBytes> bloom_{};  // in place: BloomProbes' offsets address it
  // The keyword-week filter: blocked, the probes of a key in one cache line. Complete: it
  // covers every record (a new summary's, or after CompleteKeywordWeeks).
  bool weeks_complete_ = true;
  alignas(64) WeekBloom weeks_{};
  std::string common_dir_;
  // common_dir_bits(), computed when first asked after common_dir_ changed (a commit's
  // summary of its own records changes it at every record it adds, and is never asked).
  mutable uint64_t dir_bits_ = 0;
  mutable bool dir_bits_valid_ = true;
};

}  // namespace propeller

#endif  // PROPELLER_INDEXNODE_SUMMARY_H_
