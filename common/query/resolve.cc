#include "common/query/resolve.h"

#include <limits>
#include <optional>

#include "common/query/values.h"

namespace propeller::query_internal {
namespace {

struct BuiltinName {
  const char* name;
  Attr attr;
};

constexpr BuiltinName kBuiltins[] = {
    {"size", Attr::kSize},   {"mtime", Attr::kMtime}, {"ctime", Attr::kCtime},
    {"atime", Attr::kAtime}, {"uid", Attr::kUid},     {"gid", Attr::kGid},
    {"mode", Attr::kMode},   {"nlink", Attr::kNlink}, {"type", Attr::kType},
    {"name", Attr::kName},   {"ext", Attr::kExt},     {"path", Attr::kPath},
    {"keyword", Attr::kKeyword},
};

std::optional<Attr> FindBuiltin(std::string_view name) {
  for (const BuiltinName& b : kBuiltins) {
    if (name == b.name) return b.attr;
  }
  return std::nullopt;
}

bool IsLowerAlpha(char c) { return c >= 'a' && c <= 'z'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

bool IsValidUserAttrName(std::string_view name) {
  if (name.empty() || name.size() > kMaxAttrNameBytes || !IsLowerAlpha(name[0])) return false;
  for (char c : name) {
    if (!IsLowerAlpha(c) && !IsDigit(c) && c != '_' && c != '.' && c != '-') return false;
  }
  return true;
}

std::string AsciiLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

CmpOp FlipForAge(CmpOp op) {
  switch (op) {
    case CmpOp::kLt: return CmpOp::kGt;  // less than 1d ago = after now-1d
    case CmpOp::kLe: return CmpOp::kGe;
    case CmpOp::kGt: return CmpOp::kLt;
    case CmpOp::kGe: return CmpOp::kLe;
    default: return op;
  }
}

// The value-position error carrying a helper's message.
Status AtValue(const RawPredicate& raw, const Status& st) {
  return ErrorAt(raw.value.offset, st.message());
}

Status NotApplicable(const RawPredicate& raw) {
  return ErrorAt(raw.op_offset, "'" + std::string(CmpOpName(raw.op)) + "' does not apply to " +
                                    AttrName(raw.attr.attr));
}

Result<int64_t> ResolveSize(const RawPredicate& raw) {
  Result<uint64_t> size = ParseSize(raw.value.text);
  if (!size.ok()) return AtValue(raw, size.status());
  if (*size > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return ErrorAt(raw.value.offset, "number out of range");
  }
  return static_cast<int64_t>(*size);
}

// The bound the index structures prune with for `op t` (Predicate::value): their coordinate
// is the time clamped into int64 nanoseconds (ClampToInt64), so a time beyond that range
// becomes a bound that admits at least every clamped time of a match, or, where none exists,
// a double, which prunes nothing.
AttrValue PruningBound(CmpOp op, FileTime t) {
  // A strict bound at the edge itself: every time beyond the edge clamps onto it.
  if (op == CmpOp::kGt && t == INT64_MAX) return INT64_MAX - 1;
  if (op == CmpOp::kLt && t == INT64_MIN) return INT64_MIN + 1;
  if (t >= INT64_MIN && t <= INT64_MAX) return static_cast<int64_t>(t);
  const bool above = t > INT64_MAX;
  switch (op) {
    case CmpOp::kEq: return above ? INT64_MAX : INT64_MIN;
    case CmpOp::kGe: if (above) return INT64_MAX; break;
    case CmpOp::kGt: if (above) return INT64_MAX - 1; break;
    case CmpOp::kLe: if (!above) return INT64_MIN; break;
    case CmpOp::kLt: if (!above) return INT64_MIN + 1; break;
    default: break;
  }
  return 0.0;
}

// Sets pred->op, pred->time and pred->value for a time attribute: a date keeps the operator,
// an age counts back from now and flips it.
Status ResolveTime(const RawPredicate& raw, int64_t now_ns, Predicate* pred) {
  const std::string& text = raw.value.text;
  if (LooksLikeDate(text)) {
    Result<FileTime> ns = ParseDateNanos(text);
    if (!ns.ok()) return AtValue(raw, ns.status());
    pred->time = *ns;
    pred->value = PruningBound(pred->op, pred->time);
    return Status::OK();
  }
  Result<int64_t> age = ParseAgeNanos(text);
  if (!age.ok()) {
    if (age.status().message() == "not an age") {
      return ErrorAt(raw.value.offset, std::string("expected an age (e.g. 1d) or a date (e.g. "
                                                   "2024-05-01) for ") +
                                           AttrName(raw.attr.attr) + ", got " +
                                           QuoteForMessage(text));
    }
    return AtValue(raw, age.status());
  }
  if (raw.op == CmpOp::kEq || raw.op == CmpOp::kNe) {
    return ErrorAt(raw.op_offset, "an age needs < <= > or >=");
  }
  pred->op = FlipForAge(raw.op);
  pred->time = static_cast<FileTime>(now_ns) - *age;  // 128 bits: no overflow
  pred->value = PruningBound(pred->op, pred->time);
  return Status::OK();
}

Result<int64_t> ResolveId(const RawPredicate& raw, const ParseOptions& options) {
  const std::string& text = raw.value.text;
  const bool is_user = raw.attr.attr == Attr::kUid;
  Result<uint64_t> id = ParseDecimal(text, std::numeric_limits<uint32_t>::max());
  if (id.ok()) return static_cast<int64_t>(*id);
  if (id.status().message() != "not a number") return AtValue(raw, id.status());
  if (text.size() > 1 && text[0] == '-' && ParseDecimal(text.substr(1), ~uint64_t{0}).ok()) {
    return ErrorAt(raw.value.offset, "number out of range");
  }
  const auto& lookup = is_user ? options.resolver.user : options.resolver.group;
  std::optional<uint32_t> resolved;
  if (lookup && !text.empty()) resolved = lookup(text);
  if (!resolved) {
    return ErrorAt(raw.value.offset, std::string(is_user ? "unknown user " : "unknown group ") +
                                         QuoteForMessage(text));
  }
  return static_cast<int64_t>(*resolved);
}

// A keyword token (PathKeywords) is a run of ASCII letters and digits or bytes >= 0x80.
bool CanBeKeyword(std::string_view text) {
  if (text.empty()) return false;
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (!(c >= 0x80 || IsLowerAlpha(ch) || IsDigit(ch))) return false;
  }
  return true;
}

}  // namespace

Result<AttrRef> ResolveAttrName(std::string_view word, size_t offset) {
  AttrRef ref;
  if (std::optional<Attr> builtin = FindBuiltin(word)) {
    ref.attr = *builtin;
    return ref;
  }
  if (IsValidUserAttrName(word)) {
    ref.attr = Attr::kUser;
    ref.user_attr = std::string(word);
    return ref;
  }
  const std::string lower = AsciiLower(word);
  if (lower != word && (FindBuiltin(lower) || IsValidUserAttrName(lower))) {
    return ErrorAt(offset, "attribute names are lowercase: did you mean '" + lower + "'?");
  }
  if (!IsLowerAlpha(lower[0])) {
    return ErrorAt(offset, "expected an attribute name, got " + QuoteForMessage(word));
  }
  if (word.size() > kMaxAttrNameBytes) {
    return ErrorAt(offset, "attribute name too long (at most 64 bytes)");
  }
  return ErrorAt(offset, "invalid attribute name " + QuoteForMessage(word) +
                             ": use only a-z, 0-9, '_', '.' and '-'");
}

Result<Predicate> ResolvePredicate(const RawPredicate& raw, const ParseOptions& options,
                                   int64_t now_ns) {
  Predicate pred;
  pred.attr = raw.attr.attr;
  pred.user_attr = raw.attr.user_attr;
  pred.op = raw.op;
  pred.pos = raw.attr_offset + 1;
  const std::string& text = raw.value.text;
  const bool is_match = raw.op == CmpOp::kMatch;
  const bool is_equality = raw.op == CmpOp::kEq || raw.op == CmpOp::kNe;

  switch (raw.attr.attr) {
    case Attr::kSize: {
      if (is_match) return NotApplicable(raw);
      PROPELLER_ASSIGN_OR_RETURN(pred.value, ResolveSize(raw));
      break;
    }
    case Attr::kMtime:
    case Attr::kCtime:
    case Attr::kAtime:
      if (is_match) return NotApplicable(raw);
      PROPELLER_RETURN_IF_ERROR(ResolveTime(raw, now_ns, &pred));
      break;
    case Attr::kUid:
    case Attr::kGid: {
      if (is_match) return NotApplicable(raw);
      PROPELLER_ASSIGN_OR_RETURN(pred.value, ResolveId(raw, options));
      break;
    }
    case Attr::kMode: {
      if (is_match) return NotApplicable(raw);
      Result<int64_t> mode = ParseMode(text);
      if (!mode.ok()) return AtValue(raw, mode.status());
      pred.value = *mode;
      break;
    }
    case Attr::kNlink: {
      if (is_match) return NotApplicable(raw);
      Result<uint64_t> n = ParseDecimal(text, std::numeric_limits<uint32_t>::max());
      if (!n.ok()) {
        if (n.status().message() == "not a number") {
          return ErrorAt(raw.value.offset, "expected a number for nlink, got " +
                                               QuoteForMessage(text));
        }
        return AtValue(raw, n.status());
      }
      pred.value = static_cast<int64_t>(*n);
      break;
    }
    case Attr::kType:
      if (!is_equality) return ErrorAt(raw.op_offset, "only = and != apply to type");
      if (text != "f" && text != "d" && text != "l" && text != "o") {
        return ErrorAt(raw.value.offset, "type must be one of f, d, l, o");
      }
      pred.value = text;
      break;
    case Attr::kName:
    case Attr::kPath:
      pred.value = text;
      break;
    case Attr::kExt: {
      // NameExtension never yields a dot, so every leading dot is noise: ".TXT" = "txt".
      std::string ext = AsciiLower(text);
      ext.erase(0, ext.find_first_not_of('.') == std::string::npos ? ext.size()
                                                                    : ext.find_first_not_of('.'));
      pred.value = std::move(ext);
      break;
    }
    case Attr::kKeyword: {
      if (!is_equality) return ErrorAt(raw.op_offset, "only = and != apply to keyword");
      std::string keyword = AsciiLower(text);
      if (!CanBeKeyword(keyword)) {
        return ErrorAt(raw.value.offset,
                       "keyword " + QuoteForMessage(text) +
                           " can never match: a keyword is one run of letters and digits");
      }
      pred.value = std::move(keyword);
      break;
    }
    case Attr::kUser: {
      // '~' is a string operation: "version~1.2" looks for the text "1.2".
      if (!is_match && !raw.value.quoted) {
        bool is_number = false;
        const Status st = ParseNumberLiteral(text, &is_number, &pred.value);
        if (!st.ok()) return AtValue(raw, st);
        if (is_number) break;
      }
      pred.value = text;
      break;
    }
  }
  return pred;
}

}  // namespace propeller::query_internal
