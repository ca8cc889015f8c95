// Evaluation of parsed queries against records: PredicateMatches and Query::Matches.
//
// Comparisons never convert an int64 to double (which would make 2^53+1 equal 2^53): mixed
// int/double comparisons are done exactly, see CompareIntDouble. Everything tolerates a
// Predicate built by hand with an unexpected value type (the predicate is then false, and '!='
// true), because the planner builds predicates too and this must never throw.
#include <fnmatch.h>

#include <cmath>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "common/query/query.h"
#include "common/query/values.h"
#include "common/record.h"

namespace propeller {
namespace {

// -1, 0, +1, or nullopt when the values are unordered (NaN).
using Order = std::optional<int>;

template <typename T>
Order CompareValues(T a, T b) {
  return a < b ? -1 : (a > b ? 1 : 0);
}

// Exact comparison of an integer in [-2^63, 2^64) with a double.
Order CompareIntDouble(__int128 a, double b) {
  if (std::isnan(b)) return std::nullopt;
  constexpr double kTwo64 = 18446744073709551616.0;     // 2^64, exact in a double
  constexpr double kMinusTwo63 = -9223372036854775808.0;  // -2^63, exact
  if (b >= kTwo64) return -1;
  if (b < kMinusTwo63) return 1;
  // |b| < 2^64 here, so its integral part is exact in 128 bits, and b - trunc(b) is exact.
  const double whole = std::trunc(b);
  const auto t = static_cast<__int128>(whole);
  if (a != t) return a < t ? -1 : 1;
  const double frac = b - whole;
  return frac > 0 ? -1 : (frac < 0 ? 1 : 0);
}

// Applies `op` to a three-way result; '!=' is the negation of '=' (so unordered -> true).
bool Holds(CmpOp op, Order order) {
  if (op == CmpOp::kNe) return !(order && *order == 0);
  if (!order) return false;
  switch (op) {
    case CmpOp::kEq: return *order == 0;
    case CmpOp::kLt: return *order < 0;
    case CmpOp::kLe: return *order <= 0;
    case CmpOp::kGt: return *order > 0;
    case CmpOp::kGe: return *order >= 0;
    default: return false;  // '~' on numbers never matches (the parser rejects it)
  }
}

// An integer field of the record against the predicate's numeric value.
bool IntFieldMatches(CmpOp op, __int128 field, const AttrValue& value) {
  if (const auto* i = std::get_if<int64_t>(&value)) {
    return Holds(op, CompareValues<__int128>(field, *i));
  }
  if (const auto* d = std::get_if<double>(&value)) return Holds(op, CompareIntDouble(field, *d));
  return op == CmpOp::kNe;
}

bool HasGlobChar(std::string_view pattern) {
  return pattern.find_first_of("*?[") != std::string_view::npos;
}

// One string against the value: bytewise order, '~' glob (fnmatch, no flags: '*' crosses '/'
// and a leading '.') or substring.
bool StringHolds(CmpOp op, std::string_view subject, const std::string& value) {
  if (op == CmpOp::kMatch) {
    if (!HasGlobChar(value)) return subject.find(value) != std::string_view::npos;
    const std::string subject_z(subject);  // fnmatch wants NUL-terminated text
    return fnmatch(value.c_str(), subject_z.c_str(), 0) == 0;
  }
  // string_view compares with char_traits<char>::compare, i.e. memcmp: unsigned bytes.
  const int c = subject.compare(value);
  return Holds(op, c < 0 ? -1 : (c > 0 ? 1 : 0));
}

// One string against a text predicate: its regex (=~), or StringHolds, with ASCII letters
// folded for iname/ipath (whose value the parser lowercased).
bool TextHolds(const Predicate& pred, CmpOp op, std::string_view subject,
               const std::string& value) {
  if (op == CmpOp::kRegex) return pred.regex != nullptr && pred.regex->Search(subject);
  if (!pred.icase) return StringHolds(op, subject, value);
  std::string folded(subject);
  for (char& c : folded) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return StringHolds(op, folded, value);
}

enum class PathPart { kName, kExt, kPath };

// True when one of `paths` (the record's, or the one link evaluated) satisfies the predicate
// ('!=' = none equals).
bool AnyPathMatches(std::span<const std::string> paths, PathPart part, const Predicate& pred,
                    CmpOp op) {
  const auto* text = std::get_if<std::string>(&pred.value);
  if (text == nullptr) return op == CmpOp::kNe;
  if (op == CmpOp::kNe) return !AnyPathMatches(paths, part, pred, CmpOp::kEq);
  for (const std::string& path : paths) {
    bool hit = false;
    switch (part) {
      case PathPart::kPath: hit = TextHolds(pred, op, path, *text); break;
      case PathPart::kName: hit = TextHolds(pred, op, PathBaseName(path), *text); break;
      case PathPart::kExt:
        hit = TextHolds(pred, op, NameExtension(PathBaseName(path)), *text);
        break;
    }
    if (hit) return true;
  }
  return false;
}

// find -perm -MODE / /MODE on the permission bits.
bool BitsMatch(CmpOp op, uint32_t mode, const AttrValue& value) {
  const auto* bits = std::get_if<int64_t>(&value);
  if (bits == nullptr) return false;
  const auto want = static_cast<uint32_t>(*bits) & 07777;
  const uint32_t have = mode & 07777;
  if (op == CmpOp::kBitsAll) return (have & want) == want;
  return want == 0 || (have & want) != 0;  // as find: /000 matches every file
}

bool KeywordMatches(std::span<const std::string> paths, CmpOp op, const AttrValue& value) {
  const auto* keyword = std::get_if<std::string>(&value);
  if (keyword == nullptr || (op != CmpOp::kEq && op != CmpOp::kNe)) return op == CmpOp::kNe;
  bool found = false;
  for (const std::string& path : paths) {
    if (PathHasKeyword(path, *keyword)) {
      found = true;
      break;
    }
  }
  return op == CmpOp::kEq ? found : !found;
}

bool TypeMatches(const FileRecord& record, CmpOp op, const AttrValue& value) {
  const auto* letter = std::get_if<std::string>(&value);
  if (letter == nullptr || (op != CmpOp::kEq && op != CmpOp::kNe)) return op == CmpOp::kNe;
  const bool equal = letter->size() == 1 && (*letter)[0] == static_cast<char>(record.type);
  return op == CmpOp::kEq ? equal : !equal;
}

// A user attribute value against the predicate's value. Numbers compare with numbers (int
// and double exactly), strings with strings; anything else is a mismatch (false; '!=' true).
bool UserValueMatches(const Predicate& pred, const AttrValue& have) {
  const CmpOp op = pred.op;
  const AttrValue& want = pred.value;
  const auto* have_s = std::get_if<std::string>(&have);
  const auto* want_s = std::get_if<std::string>(&want);
  if (have_s != nullptr || want_s != nullptr) {
    if (have_s == nullptr || want_s == nullptr) return op == CmpOp::kNe;
    if (op == CmpOp::kNe) return *have_s != *want_s;
    return TextHolds(pred, op, *have_s, *want_s);
  }
  if (op == CmpOp::kMatch || op == CmpOp::kRegex) return false;
  const auto* have_i = std::get_if<int64_t>(&have);
  const auto* want_i = std::get_if<int64_t>(&want);
  Order order;
  if (have_i && want_i) {
    order = CompareValues(*have_i, *want_i);
  } else if (have_i) {
    order = CompareIntDouble(*have_i, std::get<double>(want));
  } else if (want_i) {
    const Order o = CompareIntDouble(*want_i, std::get<double>(have));
    if (o) order = -*o;
  } else {
    const double a = std::get<double>(have), b = std::get<double>(want);
    if (!std::isnan(a) && !std::isnan(b)) order = CompareValues(a, b);
  }
  return Holds(op, order);
}

bool LinkPredicateMatches(const Predicate& pred, const FileRecord& record,
                          std::span<const std::string> paths);

bool NodeMatches(const QueryNode& node, const FileRecord& record,
                 std::span<const std::string> paths) {
  switch (node.kind) {
    case QueryNode::Kind::kAnd:
      for (const auto& child : node.children) {
        if (!NodeMatches(*child, record, paths)) return false;
      }
      return true;
    case QueryNode::Kind::kOr:
      for (const auto& child : node.children) {
        if (NodeMatches(*child, record, paths)) return true;
      }
      return false;
    case QueryNode::Kind::kNot:
      return !node.children.empty() && !NodeMatches(*node.children[0], record, paths);
    case QueryNode::Kind::kPred:
      return LinkPredicateMatches(node.pred, record, paths);
  }
  return false;
}

bool IsPathAttr(Attr attr) {
  return attr == Attr::kName || attr == Attr::kExt || attr == Attr::kPath ||
         attr == Attr::kKeyword;
}

// A path predicate (name, ext, path, keyword) on `paths` — with Predicate::root, on the
// paths under that root ("/" is the root itself).
bool PathPredHolds(const Predicate& pred, std::span<const std::string> paths) {
  if (!pred.root.empty()) {
    std::vector<std::string> host;
    host.reserve(paths.size());
    for (const std::string& p : paths) host.push_back(p == "/" ? pred.root : pred.root + p);
    Predicate plain = pred;
    plain.root.clear();
    return PathPredHolds(plain, host);
  }
  const CmpOp op = pred.op;
  switch (pred.attr) {
    case Attr::kName: return AnyPathMatches(paths, PathPart::kName, pred, op);
    case Attr::kExt: return AnyPathMatches(paths, PathPart::kExt, pred, op);
    case Attr::kPath: return AnyPathMatches(paths, PathPart::kPath, pred, op);
    case Attr::kKeyword: return KeywordMatches(paths, op, pred.value);
    default: return false;
  }
}

// PredicateMatches with the path predicates (name, ext, path, keyword) evaluated on `paths`.
bool LinkPredicateMatches(const Predicate& pred, const FileRecord& record,
                          std::span<const std::string> paths) {
  if (IsPathAttr(pred.attr)) return PathPredHolds(pred, paths);
  return PredicateMatches(pred, record);
}

}  // namespace

bool PredicateMatches(const Predicate& pred, const FileRecord& record) {
  const CmpOp op = pred.op;
  switch (pred.attr) {
    case Attr::kSize: return IntFieldMatches(op, record.size, pred.value);
    case Attr::kMtime: return Holds(op, CompareValues<FileTime>(record.mtime, pred.time));
    case Attr::kCtime: return Holds(op, CompareValues<FileTime>(record.ctime, pred.time));
    case Attr::kAtime: return Holds(op, CompareValues<FileTime>(record.atime, pred.time));
    case Attr::kUid: return IntFieldMatches(op, record.uid, pred.value);
    case Attr::kGid: return IntFieldMatches(op, record.gid, pred.value);
    case Attr::kMode:
      if (op == CmpOp::kBitsAll || op == CmpOp::kBitsAny) {
        return BitsMatch(op, record.mode, pred.value);
      }
      return IntFieldMatches(op, record.mode & 07777, pred.value);
    case Attr::kNlink: return IntFieldMatches(op, record.nlink, pred.value);
    case Attr::kType: return TypeMatches(record, op, pred.value);
    case Attr::kName:
    case Attr::kExt:
    case Attr::kPath:
    case Attr::kKeyword:
      return PathPredHolds(pred, record.paths);
    case Attr::kUser: {
      const auto it = record.attrs.find(pred.user_attr);
      if (it == record.attrs.end()) return op == CmpOp::kNe;
      return UserValueMatches(pred, it->second);
    }
  }
  return op == CmpOp::kNe;
}

bool PathPredicateMatches(const Predicate& pred, const std::string& path) {
  return PathPredHolds(pred, std::span<const std::string>(&path, 1));
}

bool Query::Matches(const FileRecord& record) const {
  return root_ != nullptr && NodeMatches(*root_, record, record.paths);
}

bool Query::MatchesLink(const FileRecord& record, const std::string& path) const {
  return root_ != nullptr && NodeMatches(*root_, record, std::span<const std::string>(&path, 1));
}

}  // namespace propeller
