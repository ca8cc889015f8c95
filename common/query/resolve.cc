#include "common/query/resolve.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <vector>
#include <optional>

#include "common/query/values.h"

namespace propeller::query_internal {
namespace {

struct BuiltinName {
  const char* name;
  Attr attr;
  bool icase = false;
  bool perm = false;
};

// The built-in names and their aliases: `user`, `owner` and `group` as in find -user/-group,
// `perm` as find -perm, `iname`/`ipath` as find -iname/-ipath.
constexpr BuiltinName kBuiltins[] = {
    {"size", Attr::kSize},     {"mtime", Attr::kMtime},     {"ctime", Attr::kCtime},
    {"atime", Attr::kAtime},   {"uid", Attr::kUid},         {"gid", Attr::kGid},
    {"mode", Attr::kMode},     {"nlink", Attr::kNlink},     {"type", Attr::kType},
    {"name", Attr::kName},     {"ext", Attr::kExt},         {"path", Attr::kPath},
    {"keyword", Attr::kKeyword},
    {"user", Attr::kUid},      {"owner", Attr::kUid},       {"group", Attr::kGid},
    {"perm", Attr::kMode, false, true},
    {"iname", Attr::kName, true},
    {"ipath", Attr::kPath, true},
};

const BuiltinName* FindBuiltin(std::string_view name) {
  for (const BuiltinName& b : kBuiltins) {
    if (name == b.name) return &b;
  }
  return nullptr;
}

// Optimal string alignment distance (edits, and swaps of neighbours), capped at cap + 1.
size_t EditDistance(std::string_view a, std::string_view b, size_t cap) {
  if (a.size() > b.size() + cap || b.size() > a.size() + cap) return cap + 1;
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return std::min(d[a.size()][b.size()], cap + 1);
}

// " (did you mean size?)", " (did you mean mode or perm?)", or "" — the known names nearest
// to `word`: within 2 edits (1 for names of up to 4 bytes), or having it as a prefix.
std::string Suggest(std::string_view word, const std::vector<std::string>* user_attrs) {
  const size_t cap = word.size() <= 4 ? 1 : 2;
  std::vector<std::pair<size_t, std::string>> near;
  auto consider = [&](std::string_view name) {
    size_t d = EditDistance(word, name, cap);
    if (d > cap && name.size() > word.size() && word.size() >= 3 && name.starts_with(word)) {
      d = cap;
    }
    if (d <= cap) near.emplace_back(d, std::string(name));
  };
  for (const BuiltinName& b : kBuiltins) consider(b.name);
  if (user_attrs != nullptr) {
    for (const std::string& n : *user_attrs) consider(n);
  }
  if (near.empty()) return "";
  std::stable_sort(near.begin(), near.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  // Only the nearest: "mtiem" is one swap from mtime and two edits from ctime and atime.
  const size_t best = near.front().first;
  std::erase_if(near, [&](const auto& n) { return n.first > best; });
  std::string out = " (did you mean ";
  const size_t shown = std::min<size_t>(near.size(), 3);
  for (size_t i = 0; i < shown; ++i) {
    if (i > 0) out += i + 1 == shown ? " or " : ", ";
    out += near[i].second;
  }
  return out + "?)";
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

Result<AttrRef> ResolveAttrName(std::string_view word, size_t offset,
                                const ParseOptions& options) {
  AttrRef ref;
  if (const BuiltinName* builtin = FindBuiltin(word)) {
    ref.attr = builtin->attr;
    ref.icase = builtin->icase;
    ref.perm = builtin->perm;
    return ref;
  }
  if (IsValidUserAttrName(word)) {
    if (options.user_attrs != nullptr &&
        !std::binary_search(options.user_attrs->begin(), options.user_attrs->end(), word)) {
      return ErrorAt(offset, "unknown attribute " + QuoteForMessage(word) +
                                 Suggest(word, options.user_attrs) +
                                 "; a user attribute exists once `propeller attr set` gave it "
                                 "to a file or `propeller index create` made it an index");
    }
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
  pred.icase = raw.attr.icase;
  pred.pos = raw.attr_offset + 1;
  const std::string& text = raw.value.text;
  // The operators on text (~ and =~) do not apply to numbers, times, modes and types.
  const bool is_match = raw.op == CmpOp::kMatch || raw.op == CmpOp::kRegex;
  const bool is_equality = raw.op == CmpOp::kEq || raw.op == CmpOp::kNe;
  if (raw.op == CmpOp::kRegex) {
    const bool text_attr = raw.attr.attr == Attr::kName || raw.attr.attr == Attr::kPath ||
                           raw.attr.attr == Attr::kExt || raw.attr.attr == Attr::kUser;
    if (!text_attr) return NotApplicable(raw);
    // ext compares lowercased (ext=TXT is ext=txt), so its regex ignores case too.
    const bool icase = raw.attr.icase || raw.attr.attr == Attr::kExt;
    Result<std::shared_ptr<const CompiledRegex>> re = CompileRegex(text, icase);
    if (!re.ok()) return AtValue(raw, re.status());
    pred.regex = std::move(*re);
    pred.value = text;
    return pred;
  }
  if (raw.attr.perm) {
    // find -perm: MODE exactly these bits, -MODE all of them, /MODE any of them.
    if (!is_equality) return ErrorAt(raw.op_offset, "only = and != apply to perm");
    std::string_view bits = text;
    if (!bits.empty() && (bits[0] == '-' || bits[0] == '/')) {
      pred.op = bits[0] == '-' ? CmpOp::kBitsAll : CmpOp::kBitsAny;
      bits.remove_prefix(1);
    }
    Result<int64_t> mode = ParseMode(bits);
    if (!mode.ok()) {
      return ErrorAt(raw.value.offset, "expected perm=MODE, perm=-MODE (all of its bits) or "
                                       "perm=/MODE (any of them) with an octal MODE, got " +
                                           QuoteForMessage(text));
    }
    pred.value = *mode;
    return pred;
  }

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
      if (!mode.ok() && mode.status().message() == "not a number") {
        return ErrorAt(raw.value.offset, "expected an octal mode such as 644");
      }
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
      pred.value = pred.icase ? AsciiLower(text) : text;
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

Result<std::unique_ptr<QueryNode>> ResolveNode(const RawPredicate& raw,
                                               const ParseOptions& options, int64_t now_ns) {
  PROPELLER_ASSIGN_OR_RETURN(Predicate pred, ResolvePredicate(raw, options, now_ns));
  auto leaf = [](Predicate p) {
    auto node = std::make_unique<QueryNode>();
    node->kind = QueryNode::Kind::kPred;
    node->pred = std::move(p);
    return node;
  };
  auto join = [](QueryNode::Kind kind, std::unique_ptr<QueryNode> a,
                 std::unique_ptr<QueryNode> b) {
    auto node = std::make_unique<QueryNode>();
    node->kind = kind;
    node->children.push_back(std::move(a));
    node->children.push_back(std::move(b));
    return node;
  };
  const bool time = pred.attr == Attr::kMtime || pred.attr == Attr::kCtime ||
                    pred.attr == Attr::kAtime;
  if (time && (pred.op == CmpOp::kEq || pred.op == CmpOp::kNe) &&
      LooksLikeDate(raw.value.text)) {
    // "= a date" is the whole unit written: the day, the minute, the second, or the fraction.
    const FileTime start = pred.time;
    const FileTime end = start + DateUnitNanos(raw.value.text);
    const bool eq = pred.op == CmpOp::kEq;
    Predicate lo = pred, hi = pred;
    lo.op = eq ? CmpOp::kGe : CmpOp::kLt;
    lo.time = start;
    lo.value = PruningBound(lo.op, start);
    hi.op = eq ? CmpOp::kLt : CmpOp::kGe;
    hi.time = end;
    hi.value = PruningBound(hi.op, end);
    return join(eq ? QueryNode::Kind::kAnd : QueryNode::Kind::kOr, leaf(std::move(lo)),
                leaf(std::move(hi)));
  }
  if (raw.attr.perm && raw.op == CmpOp::kNe && pred.op != CmpOp::kNe) {
    // perm != -MODE: not (all of MODE's bits).
    auto node = std::make_unique<QueryNode>();
    node->kind = QueryNode::Kind::kNot;
    node->children.push_back(leaf(std::move(pred)));
    return node;
  }
  return leaf(std::move(pred));
}

}  // namespace propeller::query_internal

