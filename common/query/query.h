// The query language (docs/query.md is its reference for users): AST, parser and evaluator.
//
//   query  := or
//   or     := and ( '|' and )*
//   and    := not ( ('&' | ',') not )*
//   not    := '!' not | '(' query ')' | pred
//   pred   := attr op value          op := = != < <= > >= ~
//
// A query is parsed once, at the start of a search, into an immutable Query that any number of
// threads may evaluate concurrently. Relative times ("mtime<1d") are resolved against
// ParseOptions::now_ns when parsing, so every ACG of one search sees the same instant.
//
// Semantics, per attribute:
//  - size, mtime, ctime, atime, uid, gid, mode, nlink: integers. Sizes take units k m g t p
//    (also kb, kib, KB, MiB …; powers of 1024 as in find -size). Times take a date
//    (2024-05-01, 2024-05-01T12:00, 2024-05-01T12:00:30[.fraction], UTC) or an age with a unit
//    s, min, h, d, w, y (also sec, hour, day, week, year and plurals). With an age the
//    comparison flips: "mtime<1d" = modified less than a day ago = mtime > now-1d;
//    "mtime=1d" is an error (ages are ranges). "m" alone is rejected for times as ambiguous.
//    uid and gid take a number or a user/group name (resolved by the NameResolver).
//    mode takes octal with a leading 0 (0644; without it the number is decimal) and compares
//    the permission bits (mode & 07777); values above 07777 are an error.
//  - type: f, d, l, o; only = and !=.
//  - name, ext, path: strings. A record with several paths (hard links) matches when any of its
//    paths does. '~' is a glob (fnmatch: * ? [..]) when the value has a glob character, else a
//    substring test. ext compares lowercased, without leading dots (ext=.TXT = ext=txt).
//  - keyword: equality against the path's keyword tokens (PathKeywords), lowercased; only = !=.
//    A value that cannot be a token (empty, or with punctuation: keyword=a-b) is an error.
//  - any other identifier names a user attribute (an index): numbers compare numerically with
//    int and double values (exactly, also beyond 2^53), strings compare with string values
//    (bytewise), other pairs never match; a record without the attribute matches no predicate
//    on it except '!='. Names match [a-z][a-z0-9_.-]{0,63}. A bare value that reads as a number
//    (-12, 1.5, 1e3) is a number, a quoted one a string; '~' always takes the value as text.
//  - 'a != v' is exactly '!(a = v)' for every attribute.
// Values are words (letters, digits, bytes >= 0x80 and . _ - / * ? [ ] : + @ %, and '!' or '^'
// right after '[' for globs) or "double-quoted strings" with \" and \\ escapes.
// Limits: 64 KiB of text, 64 levels of nesting ('(' and '!'), 1024 predicates.
#ifndef PROPELLER_COMMON_QUERY_QUERY_H_
#define PROPELLER_COMMON_QUERY_QUERY_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/record.h"
#include "common/status.h"

namespace propeller {

enum class Attr : uint8_t {
  kSize, kMtime, kCtime, kAtime, kUid, kGid,  // the built-in `inode` K-D tree axes, in order
  kMode, kNlink, kType, kName, kExt, kPath, kKeyword,
  kUser,  // a user attribute; the name is in Predicate::user_attr
};
inline constexpr int kNumInodeAxes = 6;  // kSize..kGid
// The axis of `attr` in the `inode` K-D tree (0..5), or -1 when it is not one of the six.
inline int InodeAxis(Attr attr) {
  return attr <= Attr::kGid ? static_cast<int>(attr) : -1;
}

// kRegex: `=~`, a POSIX extended regular expression found anywhere in the text.
// kBitsAll, kBitsAny: `perm=-MODE` and `perm=/MODE` (find -perm): every bit of MODE set, any.
enum class CmpOp : uint8_t { kEq, kNe, kLt, kLe, kGt, kGe, kMatch, kRegex, kBitsAll, kBitsAny };

// "size", "mtime", ...; for kUser the caller prints user_attr.
const char* AttrName(Attr attr);
const char* CmpOpName(CmpOp op);  // "=", "!=", ...

// A compiled `=~` pattern (regcomp), shared by the copies of its predicate; regexec on it is
// thread-safe.
struct CompiledRegex;

struct Predicate {
  Attr attr = Attr::kSize;
  std::string user_attr;  // kUser only
  CmpOp op = CmpOp::kEq;
  // name and path written `iname` / `ipath`: ASCII letters compare without case (the value is
  // kept lowercased; a regex is compiled with REG_ICASE).
  bool icase = false;
  std::shared_ptr<const CompiledRegex> regex;  // kRegex only
  // The value after resolution: integers for the numeric built-ins (times already absolute,
  // mode masked, ages flipped into op), the letter for type (a one-byte string: "f"),
  // lowercased text for ext/keyword; int64, double or string for user attributes.
  // For times: the bound the index structures use (int64 nanoseconds; a time beyond them is
  // replaced by a bound no tighter than it, or by a double meaning "prunes nothing"), while
  // `time` holds the exact instant that evaluation compares with.
  AttrValue value;
  FileTime time = 0;  // mtime/ctime/atime: the exact instant
  size_t pos = 0;  // 1-based position of the attribute in the query text, for messages
  // name, ext, path, keyword: "" = the predicate sees a record's paths as they are (in its
  // volume); else it sees them under this root ("/x" as ROOT/x, "/" as ROOT), and no index
  // or summary may answer it (Query::WithRoot leaves such a predicate where it cannot
  // rewrite one exactly).
  std::string root;
};

struct QueryNode {
  enum class Kind : uint8_t { kAnd, kOr, kNot, kPred };
  Kind kind = Kind::kPred;
  std::vector<std::unique_ptr<QueryNode>> children;  // kAnd/kOr: >= 2; kNot: 1; kPred: 0
  Predicate pred;                                    // kPred only
};

// Resolves user and group names for uid=/gid=. The default uses getpwnam_r/getgrnam_r.
struct NameResolver {
  std::function<std::optional<uint32_t>(const std::string&)> user;
  std::function<std::optional<uint32_t>(const std::string&)> group;
  static NameResolver System();
};

struct ParseOptions {
  int64_t now_ns = 0;  // the instant ages are measured from; 0 means "read the real clock"
  NameResolver resolver = NameResolver::System();
  // The user attributes that exist (sorted): any other name that is not built in is an error
  // naming the nearest known names, so a typo never silently matches nothing. Null: any valid
  // name is taken as a user attribute (the parser of a client that does not know them).
  const std::vector<std::string>* user_attrs = nullptr;
};


class Query {
 public:
  // Parses `text`. Errors are InvalidArgument with a message of the form
  //   "error at 5: expected a value"   (1-based byte position; the end is length+1)
  // Never throws, never crashes on any input; inputs over 64 KiB are rejected.
  static Result<Query> Parse(std::string_view text, const ParseOptions& options = {});

  // True when `record` satisfies the whole query (a path predicate: some path of it does).
  bool Matches(const FileRecord& record) const;
  // True when the link `path` of `record` satisfies the query: the path predicates (name,
  // ext, path, keyword) see that path only, as find sees one name of a hard-linked file.
  bool MatchesLink(const FileRecord& record, const std::string& path) const;
  const QueryNode& root() const { return *root_; }
  const std::string& text() const { return text_; }
  int64_t now_ns() const { return now_ns_; }
  // The query as it applies to the in-volume paths of a volume whose paths are shown under
  // `root` (its registered root, or a mount point): path predicates (name, ext, path,
  // keyword) are meant for the paths results print, ROOT + in-volume path, and the records
  // hold in-volume paths. Exact for every record of that volume: keyword tokens of the root
  // become true or false, path equalities and globs whose literal part covers the root lose
  // it (and stay answerable by the indexes), what cannot be rewritten is evaluated under the
  // root (Predicate::root). *changed (may be null) says whether anything differs. root "/"
  // or "": an unchanged copy.
  Query WithRoot(std::string_view root, bool* changed = nullptr) const;

  // A canonical rendering with resolved values and parentheses only where the tree needs them,
  // e.g. "size > 1073741824 & (name ~ \"*.c\" | mtime > 2024-05-31T00:00:00)". Parse reads it
  // back into the same tree with the same meaning, independent of the clock and the resolver
  // (times are absolute dates, ids numbers); Parse rejects a query whose rendering would exceed
  // its 64 KiB limit, so Parse(ToString()) always succeeds. Empty for a moved-from Query.
  std::string ToString() const;

  Query(Query&&) = default;
  Query& operator=(Query&&) = default;

 private:
  Query() = default;
  std::unique_ptr<QueryNode> root_;
  std::string text_;
  int64_t now_ns_ = 0;
};

// Whether `query` has a path predicate (name, ext, path, keyword): only such a query reads
// differently under a root (Query::WithRoot).
bool HasPathPredicates(const Query& query);

// The user attribute names `query` asks about, sorted and unique.
std::vector<std::string> UserAttrNames(const Query& query);

// The parser's "unknown attribute" error for the first of `unknown` (user attribute names of
// `text`, as UserAttrNames gives them) that `text` names, with its position and the nearest
// built-in names; OK when `text` names none of them.
Status UnknownAttrError(std::string_view text, const std::vector<std::string>& unknown,
                        const ParseOptions& options);

// Evaluates one predicate against one record (the building block of Query::Matches; the
// planner uses it to verify candidates). Never throws.
bool PredicateMatches(const Predicate& pred, const FileRecord& record);
// A path predicate (name, ext, path, keyword) on the one path `path`.
bool PathPredicateMatches(const Predicate& pred, const std::string& path);

// Parses a size with an optional unit ("16m" -> 16777216). InvalidArgument on garbage.
Result<uint64_t> ParseSize(std::string_view text);

}  // namespace propeller

#endif  // PROPELLER_COMMON_QUERY_QUERY_H_
