// The `hash` index structure (index.h, docs/architecture.md §3/§6): equality lookups (kEqual only)
// on one attribute over the files of one ACG — the `keyword` index and user hash indexes.
//
// Storage: the LMDB named database "hs.<name>" holds one key per entry,
// FileIdKey(id) ‖ AppendIndexValue(value) -> "" (schemas/keys.h), and the whole index is
// rebuilt in memory from it on open: a hash table from the encoded value to the set of ids
// (hash_index.cc describes the layout and its cost per entry).
//
// Semantics: values are compared by their index encoding, so int64 3 and double 3.0 are the
// same value (one entry per id), and strings longer than kMaxEncodedStringBytes compare by
// their truncated key — a lookup of such a string returns a superset (the caller verifies),
// and two such values under one id are one entry. Each id is reported at most once.
//
// Threading: as index.h. In-memory changes are made at Insert/Remove time; if the transaction
// aborts, discard the object and reopen.
#ifndef PROPELLER_INDEXNODE_INDEX_HASH_INDEX_H_
#define PROPELLER_INDEXNODE_INDEX_HASH_INDEX_H_

#include <lmdb.h>

#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"
#include "indexnode/index/index.h"

namespace propeller {

// Opens (creating if missing) the database "hs.<name>" in the environment of `txn` (a write
// transaction that the caller commits; the database handle becomes usable by other
// transactions once it commits) and loads every entry into memory.
// Errors: LMDB failures (LmdbStatus); Corruption for a stored key that is not a FileId key
// followed by a well-formed index value.
// The returned index keeps the database handle; it must not outlive the environment, and the
// database must not be dropped while it is in use.
Result<std::unique_ptr<Index>> OpenHashIndex(MDB_txn* txn, const std::string& name);
// As above; with load = false nothing is read into memory until Load() (index.h).
// `key_prefix` leads every key (index.h: OpenIndex); Load reads only that key range.
Result<std::unique_ptr<Index>> OpenHashIndex(MDB_txn* txn, const std::string& name, bool load,
                                             std::string_view key_prefix = {});

// Deletes the database "hs.<name>" inside `txn` (a write transaction). OK when it does not
// exist. Any open index object of that name becomes unusable and must be discarded.
// With `key_prefix`, only that key range's entries go (index.h: DropIndexData).
Status DropHashIndexData(MDB_txn* txn, const std::string& name,
                         std::string_view key_prefix = {});

}  // namespace propeller

#endif  // PROPELLER_INDEXNODE_INDEX_HASH_INDEX_H_
