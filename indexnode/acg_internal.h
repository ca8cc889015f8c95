// Helpers shared by the files that implement Acg (acg.cc, acg_commit.cc, acg_search.cc,
// acg_split.cc). Not for other users.
#ifndef PROPELLER_INDEXNODE_ACG_INTERNAL_H_
#define PROPELLER_INDEXNODE_ACG_INTERNAL_H_

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>

#include "indexnode/index/index.h"
#include "indexnode/index_table.h"
#include "common/record.h"

namespace propeller::acg_internal {

// Index::BeginBatch on every index for the scope's lifetime, EndBatch whatever happens: one
// restructuring of the in-memory indexes per transaction (on failure the caller drops their
// in-memory state anyway).
class IndexBatchScope {
 public:
  explicit IndexBatchScope(const IndexTable* indexes) : indexes_(indexes) {
    indexes_->ForEach([](Index* index) { index->BeginBatch(); });
  }
  ~IndexBatchScope() {
    indexes_->ForEach([](Index* index) { index->EndBatch(); });
  }
  IndexBatchScope(const IndexBatchScope&) = delete;
  IndexBatchScope& operator=(const IndexBatchScope&) = delete;

 private:
  const IndexTable* indexes_;
};

// The keywords of every path of `rec` (PathKeywords), once each.
inline std::set<std::string> KeywordSet(const FileRecord& rec) {
  std::set<std::string> out;
  for (const std::string& p : rec.paths) {
    for (std::string& t : PathKeywords(p)) out.insert(std::move(t));
  }
  return out;
}

// User indexes of type kdtree are accepted by the catalogue but not fed: the K-D structure
// indexes the six inode axes (InsertPoint), not a single attribute value. Queries on such an
// attribute verify every record.
inline bool FedByAttribute(const IndexSpec& spec) { return spec.type != IndexType::kKdTree; }

// "ACG 7", for messages.
inline std::string AcgName(uint64_t id) { return "ACG " + std::to_string(id); }

}  // namespace propeller::acg_internal

#endif  // PROPELLER_INDEXNODE_ACG_INTERNAL_H_
