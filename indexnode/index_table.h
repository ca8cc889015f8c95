// acg_internal::IndexTable: an ACG's indexes by name (acg.h), and the names of the built-in
// ones. Part of the ACG's implementation, in its own header because acg.h holds one.
#ifndef PROPELLER_INDEXNODE_INDEX_TABLE_H_
#define PROPELLER_INDEXNODE_INDEX_TABLE_H_

#include <array>
#include <cassert>
#include <map>
#include <string>
#include <string_view>

#include "indexnode/index/index.h"

namespace propeller::acg_internal {

// The built-in indexes every ACG has (acg.h).
inline constexpr char kPathIndex[] = "path";
inline constexpr char kKeywordIndex[] = "keyword";
inline constexpr char kInodeIndex[] = "inode";

// An ACG's indexes by name. The three built-in ones sit in fixed slots of the table itself:
// a search asks for them in every ACG it visits and a commit for every update it applies, and
// the nodes of a map are each a cold cache line there (the map lookups were 5% of a keyword
// search over 10,000 ACGs). User indexes are in a map.
class IndexTable {
 public:
  // The index `name`, or nullptr.
  Index* Find(std::string_view name) const {
    const int slot = BuiltinSlot(name);
    if (slot >= 0) return builtin_[slot];
    auto it = user_.find(name);
    return it == user_.end() ? nullptr : it->second;
  }
  // The index `name`, which the caller knows is there.
  Index* At(std::string_view name) const {
    Index* index = Find(name);
    assert(index != nullptr);
    return index;
  }
  void Set(const std::string& name, Index* index) {
    const int slot = BuiltinSlot(name);
    if (slot >= 0) {
      builtin_[slot] = index;
    } else {
      user_[name] = index;
    }
  }
  void Clear() {
    builtin_ = {};
    user_.clear();
  }
  // fn(index) for every index.
  template <typename Fn>
  void ForEach(Fn&& fn) const {
    for (Index* index : builtin_) {
      if (index != nullptr) fn(index);
    }
    for (const auto& [name, index] : user_) fn(index);
  }

 private:
  static int BuiltinSlot(std::string_view name) {
    if (name == kInodeIndex) return 0;
    if (name == kKeywordIndex) return 1;
    if (name == kPathIndex) return 2;
    return -1;
  }

  std::array<Index*, 3> builtin_{};
  std::map<std::string, Index*, std::less<>> user_;
};

}  // namespace propeller::acg_internal

#endif  // PROPELLER_INDEXNODE_INDEX_TABLE_H_
