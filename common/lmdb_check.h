// CheckLmdbFile: validates an LMDB data file before LMDB maps it (docs/faults.md, "Damaged
// files"). LMDB trusts its file: a data file shorter than its meta page says faults with
// SIGBUS when the map is touched, and a flipped bit in a page header or a node offset sends
// it through a wild pointer (SIGSEGV) at the first read of that page. Neither can be caught,
// so the file is read here first, with pread, never through a map.
//
// Quick check (always): both meta pages (magic, version, page size, root page numbers within
// the file) and the file's size against the newest meta's last page. Deep check (when the
// file may have changed since it was last known good, LmdbFileMark below): every page
// reachable from the free database, the main database and every named database —
// page numbers within the file and reached once, page headers, node offsets and sizes within
// their page, keys in order within a page, overflow runs within the file, depths consistent,
// and each database's pages and entries as many as its record says.
// It reads the whole file once (about 50 ms per 100 MB from the page cache).
//
// This knows LMDB 0.9's on-disk format (MDB_DATA_VERSION 1, 64-bit builds): page header
// (mp_pgno, mp_pad, mp_flags, lower, upper), node header (mn_lo, mn_hi, mn_flags, mn_ksize),
// MDB_meta and MDB_db. Keys are compared as LMDB's default comparator does (memcmp, then
// length); integer-key databases (the free list) are not order-checked.
#ifndef PROPELLER_COMMON_LMDB_CHECK_H_
#define PROPELLER_COMMON_LMDB_CHECK_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace propeller {

struct LmdbCheckStats {
  uint64_t pages = 0;     // pages read by a deep check (overflow runs count as one)
  uint64_t last_page = 0;  // the newest meta's last page number
  // A deep check's reachable branch and leaf pages (tests damage them).
  std::vector<uint64_t> branch_pages, leaf_pages;
};

// OK, or Corruption naming `path` and what is wrong (the page, the offset); IOError when it
// cannot be read. `deep`: the walk above, else the quick check only.
Status CheckLmdbFile(const std::string& path, bool deep, LmdbCheckStats* stats = nullptr);

// What a data file looked like when it was last known good (size and modification time),
// written next to it as `mark_path` after a clean close. A file that matches its mark has not
// been written since: the quick check suffices.
Status WriteLmdbFileMark(const std::string& data_path, const std::string& mark_path);
bool LmdbFileMatchesMark(const std::string& data_path, const std::string& mark_path);

}  // namespace propeller

#endif  // PROPELLER_COMMON_LMDB_CHECK_H_
