// Small LMDB helpers shared by every LMDB user (the index node's ACG store and indexes, the
// master's store): byte views of MDB_val, RAII guards for transactions and cursors, and the
// one mapping of LMDB return codes to Status.
//
// Header-only, so that propeller_common itself does not link LMDB: only targets that link
// propeller::lmdb (indexnode, master) include it. Thread-compatible, like LMDB's handles.
#ifndef PROPELLER_COMMON_LMDB_UTIL_H_
#define PROPELLER_COMMON_LMDB_UTIL_H_

#include <lmdb.h>

#include <cerrno>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace propeller {

// An MDB_val naming `s`'s bytes (LMDB does not write through it for keys and put values).
inline MDB_val Val(std::string_view s) {
  return MDB_val{s.size(), const_cast<char*>(s.data())};
}
inline std::string_view View(const MDB_val& v) {
  return std::string_view(static_cast<const char*>(v.mv_data), v.mv_size);
}

// Maps an LMDB return code to a Status, "<what>: <mdb_strerror>": MDB_SUCCESS -> OK,
// MDB_NOTFOUND -> NotFound, MDB_KEYEXIST -> AlreadyExists, the full conditions (map, dbs,
// readers, txn, ENOSPC, ENOMEM) -> ResourceExhausted, damage -> Corruption, misuse ->
// InvalidArgument or Internal, MDB_MAP_RESIZED -> Unavailable (retry after
// mdb_env_set_mapsize(0)), other errno values -> IOError.
inline Status LmdbStatus(int rc, std::string_view what) {
  if (rc == MDB_SUCCESS) return Status::OK();
  std::string msg(what);
  msg += ": ";
  msg += mdb_strerror(rc);
  switch (rc) {
    case MDB_NOTFOUND:
      return Status::NotFound(msg);
    case MDB_KEYEXIST:
      return Status::AlreadyExists(msg);
    case MDB_MAP_FULL:
    case MDB_DBS_FULL:
    case MDB_READERS_FULL:
    case MDB_TXN_FULL:
    case MDB_CURSOR_FULL:
    case MDB_PAGE_FULL:
    case ENOMEM:
    case ENOSPC:
      return Status::ResourceExhausted(msg);
    case MDB_CORRUPTED:
    case MDB_PAGE_NOTFOUND:
    case MDB_INVALID:
    case MDB_VERSION_MISMATCH:
      return Status::Corruption(msg);
    case MDB_BAD_VALSIZE:
    case MDB_BAD_DBI:
    case MDB_INCOMPATIBLE:
    case EINVAL:
      return Status::InvalidArgument(msg);
    case MDB_MAP_RESIZED:
      return Status::Unavailable(msg);
    case MDB_BAD_TXN:
    case MDB_BAD_RSLOT:
    case MDB_TLS_FULL:
      return Status::Internal(msg);
    default:
      // Positive values are errno from the operating system (EIO, EACCES, ...).
      return rc > 0 ? Status::IOError(msg) : Status::Internal(msg);
  }
}

// Aborts a transaction unless it was committed.
class TxnGuard {
 public:
  explicit TxnGuard(MDB_txn* txn) : txn_(txn) {}
  ~TxnGuard() {
    if (txn_ != nullptr) mdb_txn_abort(txn_);
  }
  TxnGuard(const TxnGuard&) = delete;
  TxnGuard& operator=(const TxnGuard&) = delete;
  int Commit() {
    const int rc = mdb_txn_commit(txn_);
    txn_ = nullptr;  // commit frees the transaction whatever it returns
    return rc;
  }
  MDB_txn* get() const { return txn_; }

 private:
  MDB_txn* txn_;
};

// Closes a cursor unless closed already. A write transaction's cursor must be closed before
// the transaction commits or aborts (LMDB frees them when it ends), so a guard is declared
// after the TxnGuard it belongs to.
class CursorGuard {
 public:
  explicit CursorGuard(MDB_cursor* cur) : cur_(cur) {}
  ~CursorGuard() { Close(); }
  CursorGuard(const CursorGuard&) = delete;
  CursorGuard& operator=(const CursorGuard&) = delete;
  void Close() {
    if (cur_ != nullptr) mdb_cursor_close(cur_);
    cur_ = nullptr;
  }
  MDB_cursor* get() const { return cur_; }

 private:
  MDB_cursor* cur_;
};

// Deletes every entry of `dbi` whose key starts with `prefix` (all entries when it is empty)
// in `txn`, a write transaction. *deleted (may be null) receives how many went.
inline Status DeleteKeyRange(MDB_txn* txn, MDB_dbi dbi, std::string_view prefix,
                             uint64_t* deleted = nullptr) {
  if (deleted != nullptr) *deleted = 0;
  MDB_cursor* raw = nullptr;
  int rc = mdb_cursor_open(txn, dbi, &raw);
  if (rc != MDB_SUCCESS) return LmdbStatus(rc, "mdb_cursor_open");
  CursorGuard cur(raw);
  MDB_val k = Val(prefix), v;
  rc = prefix.empty() ? mdb_cursor_get(raw, &k, &v, MDB_FIRST)
                      : mdb_cursor_get(raw, &k, &v, MDB_SET_RANGE);
  while (rc == MDB_SUCCESS && View(k).starts_with(prefix)) {
    rc = mdb_cursor_del(raw, 0);
    if (rc != MDB_SUCCESS) return LmdbStatus(rc, "deleting a key range");
    if (deleted != nullptr) ++*deleted;
    // After a delete MDB_NEXT yields the entry that took the deleted one's place.
    rc = mdb_cursor_get(raw, &k, &v, MDB_NEXT);
  }
  if (rc != MDB_SUCCESS && rc != MDB_NOTFOUND) return LmdbStatus(rc, "scanning a key range");
  return Status::OK();
}

}  // namespace propeller

#endif  // PROPELLER_COMMON_LMDB_UTIL_H_
