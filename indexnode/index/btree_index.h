// The `btree` index structure (index.h, docs/architecture.md §3/§6): an ordered index of one
// attribute over the files of one ACG, answering kEqual, kRange and kPrefix.
//
// Storage: the LMDB named database "bt.<name>" holds one key per entry,
// IndexEntryKey(value, id) = AppendIndexValue(value) ‖ FileIdKey(id) -> "" (schemas/keys.h).
// Nothing lives in memory but the database handle and the entry count, so opening is O(1)
// and MemoryBytes() is 0.
//
// Posting chunks (OpenBTreeIndex(..., postings = true); the built-in `keyword` index): for an
// attribute whose values many files share, the database "bp.<name>" holds chunks instead,
// AppendIndexValue(value) ‖ FileIdKey(first id) -> the chunk's other ids, ascending and
// delta-coded (btree_index.cc: AppendDelta), at most 128 bytes of them. An entry then
// costs 1-2 bytes where a key of its own costs ~40 (value, id, LMDB's node header and slot),
// and an equality reads a few chunks instead of one key per file. Same answers, same queries;
// a change rewrites one chunk (or splits it in two).
//
// Semantics:
//  - Numbers share one key space: int64 3 and double 3.0 are the same entry; ranges compare
//    int64 and double values exactly. NaN sorts after +inf (a range without an upper bound
//    returns NaN entries; the caller's verification drops them).
//  - A range whose bounds are both numbers returns only number entries; both strings, only
//    string entries; a number bound with a string bound matches nothing (OK, no ids); no
//    bounds at all returns every entry of either type.
//  - Strings compare bytewise (memcmp). Keys keep at most kMaxEncodedStringBytes of a string:
//    a bound or equality value that long is widened to its whole truncated key (inclusive),
//    so the answer is then a superset; with bounds that fit, answers are exact even over
//    truncated entries. Two values with one truncated key are one entry per id: inserting
//    both and removing one removes the entry (a file has one value per index, so the ACG
//    never does this).
//  - kPrefix "" returns every string entry.
//  - Each id is reported at most once per Search.
//
// Threading: as index.h.
#ifndef PROPELLER_INDEXNODE_INDEX_BTREE_INDEX_H_
#define PROPELLER_INDEXNODE_INDEX_BTREE_INDEX_H_

#include <lmdb.h>

#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"
#include "indexnode/index/index.h"

namespace propeller {

// Opens (creating if missing) the database "bt.<name>" in the environment of `txn` (a write
// transaction that the caller commits; the database handle becomes usable by other
// transactions once it commits). Errors: LMDB failures (LmdbStatus).
// The returned index keeps the database handle; it must not outlive the environment, and the
// database must not be dropped while it is in use.
// Every key starts with `key_prefix` (index.h: OpenIndex); with a prefix, Size() is 0.
// `postings`: the chunked format above (an index is one or the other for its lifetime).
Result<std::unique_ptr<Index>> OpenBTreeIndex(MDB_txn* txn, const std::string& name,
                                              std::string_view key_prefix = {},
                                              bool postings = false);

// Deletes the databases "bt.<name>" and "bp.<name>" (or only their entries under
// `key_prefix`) inside `txn` (a write transaction). OK when it does not exist. Any open index object of that name (and key
// range) becomes unusable and must be discarded.
Status DropBTreeIndexData(MDB_txn* txn, const std::string& name,
                          std::string_view key_prefix = {});

}  // namespace propeller

#endif  // PROPELLER_INDEXNODE_INDEX_BTREE_INDEX_H_
