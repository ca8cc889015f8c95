// Helpers shared by the files that implement Acg (acg.cc, acg_split.cc). Not for other users.
#ifndef PROPELLER_INDEXNODE_ACG_INTERNAL_H_
#define PROPELLER_INDEXNODE_ACG_INTERNAL_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "indexnode/index/index.h"

namespace propeller::acg_internal {

// Index::BeginBatch on every index for the scope's lifetime, EndBatch whatever happens: one
// restructuring of the in-memory indexes per transaction (on failure the caller drops their
// in-memory state anyway).
class IndexBatchScope {
 public:
  explicit IndexBatchScope(std::map<std::string, Index*, std::less<>>* indexes)
      : indexes_(indexes) {
    for (auto& [name, index] : *indexes_) index->BeginBatch();
  }
  ~IndexBatchScope() {
    for (auto& [name, index] : *indexes_) index->EndBatch();
  }
  IndexBatchScope(const IndexBatchScope&) = delete;
  IndexBatchScope& operator=(const IndexBatchScope&) = delete;

 private:
  std::map<std::string, Index*, std::less<>>* indexes_;
};

// "ACG 7", for messages.
inline std::string AcgName(uint64_t id) { return "ACG " + std::to_string(id); }

}  // namespace propeller::acg_internal

#endif  // PROPELLER_INDEXNODE_ACG_INTERNAL_H_
