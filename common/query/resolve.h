// Turns the syntax of one predicate (attribute word, operator, value text) into a resolved
// Predicate (private to common/query/): built-in attribute lookup, units, ages flipped into
// absolute times, names resolved to ids, per-attribute operator checks. The rules are the
// "Semantics, per attribute" of query.h. Thread-safe as long as the resolver functions are.
#ifndef PROPELLER_COMMON_QUERY_RESOLVE_H_
#define PROPELLER_COMMON_QUERY_RESOLVE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/query/lexer.h"
#include "common/query/query.h"
#include "common/status.h"

namespace propeller::query_internal {

inline constexpr size_t kMaxAttrNameBytes = 64;

struct AttrRef {
  Attr attr = Attr::kUser;
  std::string user_attr;  // kUser only
  bool icase = false;     // iname, ipath
  bool perm = false;      // perm: mode with find -perm's value forms
};

// Looks up `word` (the attribute as written at `offset`): a built-in name or alias, or a user
// attribute whose name matches [a-z][a-z0-9_.-]{0,63} (and, when options.user_attrs is set,
// is one of them). Errors point at `offset` and name the nearest known names.
Result<AttrRef> ResolveAttrName(std::string_view word, size_t offset,
                                const ParseOptions& options);

struct RawPredicate {
  AttrRef attr;
  size_t attr_offset = 0;
  CmpOp op = CmpOp::kEq;
  size_t op_offset = 0;
  ValueToken value;
};

// Resolves one predicate; `now_ns` is the instant ages count back from. Errors about the
// operator point at op_offset, errors about the value at value.offset.
Result<Predicate> ResolvePredicate(const RawPredicate& raw, const ParseOptions& options,
                                   int64_t now_ns);

// ResolvePredicate, as a query node: a date compared with = or != becomes the range of the
// unit written (mtime=2024-05-01 is that day: mtime >= 2024-05-01 & mtime < 2024-05-02), and
// perm != -MODE or /MODE the negation of the = form.
Result<std::unique_ptr<QueryNode>> ResolveNode(const RawPredicate& raw,
                                               const ParseOptions& options, int64_t now_ns);

}  // namespace propeller::query_internal

#endif  // PROPELLER_COMMON_QUERY_RESOLVE_H_
