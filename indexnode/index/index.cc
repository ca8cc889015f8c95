// Index type names, index-name validation, dispatch to the three structures, and the one
// LMDB-error-to-Status mapping used by all of them.
#include "indexnode/index/index.h"

#include <cerrno>

#include "common/query/query.h"
#include "indexnode/index/btree_index.h"
#include "indexnode/index/hash_index.h"
#include "indexnode/index/kdtree_index.h"

namespace propeller {

std::string ValidateIndexName(std::string_view name) {
  // Syntax only: a catalogue written before a name became built in (`perm`, `user`) still
  // opens, and its index can still be dropped. New indexes: CheckNewIndexName.
  const std::string why = CheckUserAttrName(name);
  if (why.empty() || IsBuiltinAttrName(name)) return "";
  return "index " + why.substr(2);
}

Result<std::unique_ptr<Index>> OpenIndex(MDB_txn* txn, IndexType type, const std::string& name) {
  return OpenIndex(txn, type, name, /*load=*/true);
}

Result<std::unique_ptr<Index>> OpenIndex(MDB_txn* txn, IndexType type, const std::string& name,
                                         bool load, std::string_view key_prefix) {
  const std::string problem = ValidateIndexName(name);
  if (!problem.empty()) return Status::InvalidArgument(problem);
  switch (type) {
    case IndexType::kBTree:
      return OpenBTreeIndex(txn, name, key_prefix);
    case IndexType::kHash:
      return OpenHashIndex(txn, name, load, key_prefix);
    case IndexType::kKdTree: {
      KdTreeOptions options;
      options.key_prefix = std::string(key_prefix);
      return OpenKdTreeIndex(txn, name, options, load);
    }
  }
  return Status::InvalidArgument("unknown index type " + std::to_string(static_cast<int>(type)));
}

Status DropIndexData(MDB_txn* txn, IndexType type, const std::string& name,
                     std::string_view key_prefix) {
  const std::string problem = ValidateIndexName(name);
  if (!problem.empty()) return Status::InvalidArgument(problem);
  switch (type) {
    case IndexType::kBTree:
      return DropBTreeIndexData(txn, name, key_prefix);
    case IndexType::kHash:
      return DropHashIndexData(txn, name, key_prefix);
    case IndexType::kKdTree:
      return DropKdTreeIndexData(txn, name, key_prefix);
  }
  return Status::InvalidArgument("unknown index type " + std::to_string(static_cast<int>(type)));
}

Status DropIndexDatabase(MDB_txn* txn, const std::string& db_name, std::string_view key_prefix) {
  MDB_dbi dbi;
  int rc = mdb_dbi_open(txn, db_name.c_str(), 0, &dbi);
  if (rc == MDB_NOTFOUND) return Status::OK();
  if (rc != MDB_SUCCESS) return LmdbStatus(rc, "open " + db_name);
  if (!key_prefix.empty()) {
    return DeleteKeyRange(txn, dbi, key_prefix).WithContext("dropping " + db_name);
  }
  rc = mdb_drop(txn, dbi, /*del=*/1);
  if (rc != MDB_SUCCESS) return LmdbStatus(rc, "drop " + db_name);
  return Status::OK();
}

}  // namespace propeller
