// Dataset: a seeded, reproducible generator of realistic file records for the benchmarks.
//
// Record(i) is a pure function of (options, i), so a 10 M-file namespace never has to be held
// in memory: callers generate it in chunks (AppendPuts) and regenerate any record on demand
// (for example to build an update of file i). Same seed, same records, on every machine.
//
// Shape of the namespace (numbers are the defaults):
//  - File i has id (volume 1, ino i + 1) and belongs to application group g = i / 10,000; the
//    group is one ACG partition (acg = g + 1) and owns its own subtree
//    "/<top>/<app>-<g>/...", e.g. "/home/firefox-17/cache-3/src-1/thumbs_1234.jpg".
//  - Inside a group, files sit 32 to a leaf directory, and leaf directories hang from a tree of
//    fan-out 8 (3 levels for 10,000 files). Component names come from a fixed vocabulary
//    (it contains "firefox", "src", "cache", ...); siblings always get distinct names.
//  - size: lognormal with median 16 KiB and sigma 2.98, so ~1% of files exceed 16 MiB, plus a
//    heavy tail of 0.04% drawn log-uniformly from 1 GiB to 64 GiB, so ~0.05% exceed 1 GiB.
//  - mtime: 0.5% uniformly within the last day before now_ns, the rest uniformly over the
//    three years before that. ctime >= mtime (equal for 90%), mtime <= atime <= now_ns.
//  - uid: 300 users (1000..1299); 80% of a group's files belong to its owner, 18% to a random
//    user, 2% to root. gid: 100 groups (100..199), mostly the user's primary group.
//  - extension from a weighted list (c, h, o, py, log, jpg, parquet, ...), mode from the
//    extension (0755 for executables and libraries, otherwise mostly 0644).
//
// Thread-safety: a Dataset is immutable after construction; any number of threads may call
// its const methods concurrently.
#ifndef PROPELLER_BENCH_DATASET_H_
#define PROPELLER_BENCH_DATASET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/record.h"

namespace propeller::bench {

struct DatasetOptions {
  uint64_t seed = 42;
  uint64_t files_per_acg = 10'000;  // files of one application group = one ACG; >= 1
  uint32_t volume = 1;
  // The instant "now" of the data set (ns since the epoch): every mtime/ctime/atime is at or
  // before it, and searches with an age ("mtime<1d") must use it as their now. Fixed by
  // default (2024-06-01T00:00:00Z) so results do not depend on the day the benchmark runs.
  int64_t now_ns = 1'717'200'000'000'000'000;
};

inline constexpr int64_t kNanosPerSecond = 1'000'000'000;
inline constexpr int64_t kNanosPerDay = 86'400 * kNanosPerSecond;

class Dataset {
 public:
  explicit Dataset(const DatasetOptions& options);

  const DatasetOptions& options() const { return options_; }

  // The record of file `index` (0-based). Pure: equal arguments give equal records.
  FileRecord Record(uint64_t index) const;

  // The ACG (application group) of file `index`: index / files_per_acg + 1.
  uint64_t AcgOf(uint64_t index) const { return index / options_.files_per_acg + 1; }

  // A kPut update creating file `index` in its ACG.
  Update Put(uint64_t index) const;

  // Appends Put(i) for i in [begin, end) to *out.
  void AppendPuts(uint64_t begin, uint64_t end, std::vector<Update>* out) const;

  // Changes *record as a write followed by close() would: a new size (from the same size
  // distribution, drawn for `version`), mtime = ctime within the second before now_ns, atime
  // unchanged unless it would precede mtime. Allocates nothing; cheap enough to call inside a
  // timed loop's setup. Pure in (record->id, version).
  void Touch(uint64_t version, FileRecord* record) const;

  // The size of file `index` without building the whole record (for expected counts).
  uint64_t SizeOf(uint64_t index) const;
  // The mtime of file `index` without building the whole record.
  int64_t MtimeOf(uint64_t index) const;

  // The directory path of file `index` ("/home/firefox-17/cache-3/src-1").
  std::string DirectoryOf(uint64_t index) const;

 private:
  uint64_t Hash(uint64_t stream, uint64_t a, uint64_t b = 0) const;
  uint64_t SampleSize(uint64_t stream, uint64_t a, uint64_t b) const;

  DatasetOptions options_;
  int dir_levels_;         // levels of the fan-out tree above the leaf directories
  uint64_t group_dirs_;    // leaf directories per group
};

}  // namespace propeller::bench

#endif  // PROPELLER_BENCH_DATASET_H_
