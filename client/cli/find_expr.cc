#include "client/cli/find_expr.h"

#include <fnmatch.h>
#include <grp.h>
#include <pwd.h>
#include <regex.h>
#include <sys/stat.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string_view>

namespace propeller::cli {

// A test, an action or an operator of the expression.
struct FindNode {
  enum class Kind { kAnd, kOr, kNot, kComma, kLeaf };
  Kind kind = Kind::kLeaf;
  std::vector<std::unique_ptr<FindNode>> kids;
  // kLeaf: the test or action; sets *quit for -quit.
  std::function<bool(const FindFile&, std::string*, bool* quit)> run;
  std::string prefilter;  // kLeaf: a query every file it accepts satisfies, or ""
};

namespace {

using NodePtr = std::unique_ptr<FindNode>;
constexpr double kDaySeconds = 86400;

NodePtr Leaf(std::function<bool(const FindFile&)> test, std::string prefilter = "") {
  auto n = std::make_unique<FindNode>();
  n->run = [test = std::move(test)](const FindFile& f, std::string*, bool*) { return test(f); };
  n->prefilter = std::move(prefilter);
  return n;
}

NodePtr Join(FindNode::Kind kind, NodePtr a, NodePtr b) {
  auto n = std::make_unique<FindNode>();
  n->kind = kind;
  n->kids.push_back(std::move(a));
  n->kids.push_back(std::move(b));
  return n;
}

std::string_view BaseName(std::string_view path) {
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  if (path == "/") return path;
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

// A query string literal (docs/query.md: only \" and \\ are escapes).
std::string Quoted(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// find's numeric arguments: "+n" more than, "-n" less than, "n" exactly.
enum class Cmp { kLess, kEqual, kMore };
struct Number {
  Cmp cmp = Cmp::kEqual;
  double value = 0;
  std::string unit;  // what followed the number (-size)
};

Result<Number> ParseNumber(const std::string& option, const std::string& text, bool fraction,
                           bool unit) {
  Number n;
  std::string_view t = text;
  if (!t.empty() && (t[0] == '+' || t[0] == '-')) {
    n.cmp = t[0] == '+' ? Cmp::kMore : Cmp::kLess;
    t.remove_prefix(1);
  }
  size_t i = 0;
  while (i < t.size() && ((t[i] >= '0' && t[i] <= '9') || (fraction && t[i] == '.'))) ++i;
  const std::string digits(t.substr(0, i));
  if (digits.empty() || digits == "." || (!unit && i != t.size()) ||
      std::count(digits.begin(), digits.end(), '.') > 1) {
    return Status::InvalidArgument("invalid argument `" + text + "' to `" + option + "'");
  }
  n.value = std::strtod(digits.c_str(), nullptr);
  n.unit = std::string(t.substr(i));
  return n;
}

bool Compare(Cmp cmp, double have, double want) {
  switch (cmp) {
    case Cmp::kLess: return have < want;
    case Cmp::kEqual: return have == want;
    case Cmp::kMore: return have > want;
  }
  return false;
}

// Seconds from `b` to `a` (a - b), as a double like find's ts_difference.
double SecondsBetween(FileTime a, FileTime b) {
  return static_cast<double>(a - b) / 1e9;
}

// -mtime/-atime/-ctime (unit = a day) and -mmin/-amin/-cmin (a minute), by find's rule:
// the reference instant is now - n units (one day earlier for the day forms, one second later
// for "-n" of them), and "n" matches the unit just after it.
std::function<bool(const FindFile&)> TimeTest(Number n, FileTime now, bool days,
                                              FileTime FileRecord::*field) {
  double origin_shift = 0;  // seconds added to now for the origin
  if (days) {
    origin_shift = -kDaySeconds;                           // find: the start of "today"
    if (n.cmp == Cmp::kLess) origin_shift += kDaySeconds - 1;
  }
  const double unit = days ? kDaySeconds : 60;
  const double offset = n.value * unit;
  const FileTime reference =
      now + static_cast<FileTime>(std::llround((origin_shift - offset) * 1e9));
  return [cmp = n.cmp, reference, unit, field](const FindFile& f) {
    const double delta = SecondsBetween(f.record->*field, reference);
    switch (cmp) {
      case Cmp::kMore: return delta < 0;   // older than the reference
      case Cmp::kLess: return delta > 0;   // newer
      case Cmp::kEqual: return delta > 0 && delta <= unit;
    }
    return false;
  };
}

// A compiled -regex: GNU regex syntax as find's -regextype names it, matched against the
// whole path.
class FindRegex {
 public:
  static Result<std::shared_ptr<FindRegex>> Compile(const std::string& pattern,
                                                    reg_syntax_t syntax, bool icase) {
    auto re = std::shared_ptr<FindRegex>(new FindRegex);
    std::memset(&re->buf_, 0, sizeof(re->buf_));
    re_set_syntax(syntax | (icase ? RE_ICASE : 0));
    const char* error = re_compile_pattern(pattern.data(), pattern.size(), &re->buf_);
    if (error != nullptr) {
      return Status::InvalidArgument("invalid regular expression `" + pattern + "': " + error);
    }
    re->compiled_ = true;
    return re;
  }
  ~FindRegex() {
    if (compiled_) regfree(&buf_);
  }
  bool MatchesWhole(std::string_view text) const {
    // re_match may update the buffer's internal state: one caller at a time (find runs one
    // thread), so a copy per call is not needed.
    const regoff_t n = re_match(const_cast<re_pattern_buffer*>(&buf_), text.data(),
                                static_cast<regoff_t>(text.size()), 0, nullptr);
    return n >= 0 && static_cast<size_t>(n) == text.size();
  }

 private:
  FindRegex() = default;
  re_pattern_buffer buf_;
  bool compiled_ = false;
};

std::optional<reg_syntax_t> RegexSyntax(const std::string& type) {
  static const std::map<std::string, reg_syntax_t> kTypes = {
      {"findutils-default", RE_SYNTAX_EMACS | RE_DOT_NEWLINE},
      {"emacs", RE_SYNTAX_EMACS},
      {"posix-basic", RE_SYNTAX_POSIX_BASIC},
      {"posix-extended", RE_SYNTAX_POSIX_EXTENDED},
      {"posix-egrep", RE_SYNTAX_POSIX_EGREP},
      {"egrep", RE_SYNTAX_EGREP},
      {"grep", RE_SYNTAX_GREP},
      {"awk", RE_SYNTAX_AWK},
      {"posix-awk", RE_SYNTAX_POSIX_AWK},
      {"gnu-awk", RE_SYNTAX_GNU_AWK},
      {"ed", RE_SYNTAX_ED},
      {"sed", RE_SYNTAX_SED},
      {"posix-minimal-basic", RE_SYNTAX_POSIX_MINIMAL_BASIC},
  };
  auto it = kTypes.find(type);
  if (it == kTypes.end()) return std::nullopt;
  return it->second;
}

bool NameKnown(uint32_t id, bool user) {
  static std::map<std::pair<uint32_t, bool>, bool> cache;
  auto [it, fresh] = cache.emplace(std::make_pair(id, user), false);
  if (!fresh) return it->second;
  std::vector<char> buf(16384);
  if (user) {
    struct passwd pw, *found = nullptr;
    it->second = getpwuid_r(id, &pw, buf.data(), buf.size(), &found) == 0 && found != nullptr;
  } else {
    struct group gr, *found = nullptr;
    it->second = getgrgid_r(id, &gr, buf.data(), buf.size(), &found) == 0 && found != nullptr;
  }
  return it->second;
}

std::optional<uint32_t> LookUp(const std::string& name, bool user) {
  std::vector<char> buf(16384);
  if (user) {
    struct passwd pw, *found = nullptr;
    if (getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &found) == 0 && found) {
      return pw.pw_uid;
    }
  } else {
    struct group gr, *found = nullptr;
    if (getgrnam_r(name.c_str(), &gr, buf.data(), buf.size(), &found) == 0 && found) {
      return gr.gr_gid;
    }
  }
  if (!name.empty() && name.find_first_not_of("0123456789") == std::string::npos &&
      name.size() <= 10) {
    const unsigned long long v = std::strtoull(name.c_str(), nullptr, 10);
    if (v <= UINT32_MAX) return static_cast<uint32_t>(v);
  }
  return std::nullopt;
}

// The file-type letters of -type (comma-separated) as st_mode formats.
Result<std::vector<uint32_t>> ParseTypes(const std::string& text) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < text.size(); i += 2) {
    uint32_t fmt = 0;
    switch (text[i]) {
      case 'f': fmt = S_IFREG; break;
      case 'd': fmt = S_IFDIR; break;
      case 'l': fmt = S_IFLNK; break;
      case 'b': fmt = S_IFBLK; break;
      case 'c': fmt = S_IFCHR; break;
      case 'p': fmt = S_IFIFO; break;
      case 's': fmt = S_IFSOCK; break;
      default: return Status::InvalidArgument("unknown argument to -type: " + text);
    }
    if (i + 1 < text.size() && text[i + 1] != ',') {
      return Status::InvalidArgument("unknown argument to -type: " + text);
    }
    out.push_back(fmt);
  }
  if (out.empty()) return Status::InvalidArgument("-type needs an argument");
  return out;
}

// The st_mode format of a record: its mode's, else what its type says.
uint32_t FormatOf(const FileRecord& r) {
  if ((r.mode & S_IFMT) != 0) return r.mode & S_IFMT;
  switch (r.type) {
    case FileType::kRegular: return S_IFREG;
    case FileType::kDirectory: return S_IFDIR;
    case FileType::kSymlink: return S_IFLNK;
    default: return 0;
  }
}

// The recursive-descent parser over find's expression grammar.
class Parser {
 public:
  Parser(const std::vector<std::string>& args, size_t pos, FileTime now,
         const std::function<Result<FileTime>(const std::string&)>& stat_reference)
      : args_(args), pos_(pos), now_(now), stat_reference_(stat_reference) {}

  Result<NodePtr> ParseAll() {
    if (pos_ == args_.size()) return NodePtr();
    PROPELLER_ASSIGN_OR_RETURN(NodePtr e, ParseComma());
    if (pos_ != args_.size()) {
      return Status::InvalidArgument(args_[pos_] == ")" ? "unexpected `)'"
                                                        : "unexpected `" + args_[pos_] + "'");
    }
    return e;
  }

  bool has_action() const { return has_action_; }
  bool needs_children() const { return needs_children_; }
  int min_depth() const { return min_depth_; }
  int max_depth() const { return max_depth_; }

 private:
  bool AtOperand() const {
    if (pos_ >= args_.size()) return false;
    const std::string& a = args_[pos_];
    return a != ")" && a != "-o" && a != "-or" && a != ",";
  }

  Result<NodePtr> ParseComma() {
    PROPELLER_ASSIGN_OR_RETURN(NodePtr left, ParseOr());
    while (pos_ < args_.size() && args_[pos_] == ",") {
      ++pos_;
      PROPELLER_ASSIGN_OR_RETURN(NodePtr right, ParseOr());
      left = Join(FindNode::Kind::kComma, std::move(left), std::move(right));
    }
    return left;
  }

  Result<NodePtr> ParseOr() {
    PROPELLER_ASSIGN_OR_RETURN(NodePtr left, ParseAnd());
    while (pos_ < args_.size() && (args_[pos_] == "-o" || args_[pos_] == "-or")) {
      ++pos_;
      if (!AtOperand()) return Status::InvalidArgument("expected an expression after -o");
      PROPELLER_ASSIGN_OR_RETURN(NodePtr right, ParseAnd());
      left = Join(FindNode::Kind::kOr, std::move(left), std::move(right));
    }
    return left;
  }

  Result<NodePtr> ParseAnd() {
    if (!AtOperand()) {
      return Status::InvalidArgument(pos_ < args_.size()
                                         ? "expected an expression before `" + args_[pos_] + "'"
                                         : "expected an expression");
    }
    PROPELLER_ASSIGN_OR_RETURN(NodePtr left, ParseUnary());
    for (;;) {
      if (pos_ < args_.size() && (args_[pos_] == "-a" || args_[pos_] == "-and")) {
        ++pos_;
        if (!AtOperand()) return Status::InvalidArgument("expected an expression after -a");
      } else if (!AtOperand()) {
        return left;
      }
      PROPELLER_ASSIGN_OR_RETURN(NodePtr right, ParseUnary());
      left = Join(FindNode::Kind::kAnd, std::move(left), std::move(right));
    }
  }

  Result<NodePtr> ParseUnary() {
    const std::string& a = args_[pos_];
    if (a == "!" || a == "-not") {
      ++pos_;
      if (!AtOperand()) return Status::InvalidArgument("expected an expression after " + a);
      PROPELLER_ASSIGN_OR_RETURN(NodePtr inner, ParseUnary());
      auto n = std::make_unique<FindNode>();
      n->kind = FindNode::Kind::kNot;
      n->kids.push_back(std::move(inner));
      return n;
    }
    if (a == "(") {
      ++pos_;
      if (pos_ < args_.size() && args_[pos_] == ")") {
        return Status::InvalidArgument("empty parentheses are not allowed");
      }
      PROPELLER_ASSIGN_OR_RETURN(NodePtr inner, ParseComma());
      if (pos_ >= args_.size() || args_[pos_] != ")") {
        return Status::InvalidArgument("missing `)'");
      }
      ++pos_;
      return inner;
    }
    return ParsePrimary();
  }

  Result<std::string> Arg(const std::string& option) {
    if (pos_ >= args_.size()) {
      return Status::InvalidArgument("missing argument to `" + option + "'");
    }
    return args_[pos_++];
  }

  Result<NodePtr> ParsePrimary() {
    const std::string p = args_[pos_++];
    // Options: they hold for every file, and act wherever they stand.
    if (p == "-maxdepth" || p == "-mindepth") {
      PROPELLER_ASSIGN_OR_RETURN(std::string v, Arg(p));
      if (v.empty() || v.find_first_not_of("0123456789") != std::string::npos || v.size() > 9) {
        return Status::InvalidArgument("expected a non-negative integer argument to " + p +
                                       ", but got `" + v + "'");
      }
      (p == "-maxdepth" ? max_depth_ : min_depth_) = std::atoi(v.c_str());
      return Leaf([](const FindFile&) { return true; });
    }
    if (p == "-regextype") {
      PROPELLER_ASSIGN_OR_RETURN(std::string v, Arg(p));
      std::optional<reg_syntax_t> s = RegexSyntax(v);
      if (!s) return Status::InvalidArgument("unknown regular expression type `" + v + "'");
      syntax_ = *s;
      return Leaf([](const FindFile&) { return true; });
    }
    if (p == "-true") return Leaf([](const FindFile&) { return true; });
    if (p == "-false") return Leaf([](const FindFile&) { return false; }, "size<0");
    if (p == "-name" || p == "-iname") {
      PROPELLER_ASSIGN_OR_RETURN(std::string pat, Arg(p));
      const int flags = p == "-iname" ? FNM_CASEFOLD : 0;
      std::string pre;
      if (pat.find('\\') == std::string::npos) {
        const bool glob = pat.find_first_of("*?[") != std::string::npos;
        pre = std::string(p == "-iname" ? "iname" : "name") + (glob ? "~" : "=") + Quoted(pat);
      }
      return Leaf(
          [pat, flags](const FindFile& f) {
            const std::string name(BaseName(f.path));
            return fnmatch(pat.c_str(), name.c_str(), flags) == 0;
          },
          pre);
    }
    if (p == "-path" || p == "-ipath" || p == "-wholename" || p == "-iwholename") {
      PROPELLER_ASSIGN_OR_RETURN(std::string pat, Arg(p));
      const int flags = p[1] == 'i' ? FNM_CASEFOLD : 0;
      return Leaf([pat, flags](const FindFile& f) {
        return fnmatch(pat.c_str(), f.path.c_str(), flags) == 0;
      });
    }
    if (p == "-regex" || p == "-iregex") {
      PROPELLER_ASSIGN_OR_RETURN(std::string pat, Arg(p));
      PROPELLER_ASSIGN_OR_RETURN(std::shared_ptr<FindRegex> re,
                                 FindRegex::Compile(pat, syntax_, p == "-iregex"));
      return Leaf([re](const FindFile& f) { return re->MatchesWhole(f.path); });
    }
    if (p == "-type") {
      PROPELLER_ASSIGN_OR_RETURN(std::string v, Arg(p));
      PROPELLER_ASSIGN_OR_RETURN(std::vector<uint32_t> formats, ParseTypes(v));
      std::string pre;
      for (uint32_t fmt : formats) {
        const char* letter = fmt == S_IFREG ? "f" : fmt == S_IFDIR ? "d"
                             : fmt == S_IFLNK ? "l" : "o";
        pre += std::string(pre.empty() ? "" : " | ") + "type=" + letter;
      }
      if (formats.size() > 1) pre = "(" + pre + ")";
      return Leaf(
          [formats](const FindFile& f) {
            const uint32_t fmt = FormatOf(*f.record);
            return std::find(formats.begin(), formats.end(), fmt) != formats.end();
          },
          pre);
    }
    if (p == "-size") {
      PROPELLER_ASSIGN_OR_RETURN(std::string v, Arg(p));
      PROPELLER_ASSIGN_OR_RETURN(Number n, ParseNumber(p, v, /*fraction=*/false, /*unit=*/true));
      uint64_t unit = 512;
      if (n.unit == "c") unit = 1;
      else if (n.unit == "w") unit = 2;
      else if (n.unit == "k") unit = 1024;
      else if (n.unit == "M") unit = 1 << 20;
      else if (n.unit == "G") unit = 1 << 30;
      else if (!n.unit.empty() && n.unit != "b") {
        return Status::InvalidArgument("invalid -size type `" + n.unit + "'");
      }
      const auto want = static_cast<uint64_t>(n.value);
      std::string pre;
      if (n.cmp == Cmp::kMore) pre = "size>" + std::to_string(want * unit);
      if (n.cmp == Cmp::kLess && want > 0) pre = "size<=" + std::to_string((want - 1) * unit);
      return Leaf(
          [n, unit, want](const FindFile& f) {
            const uint64_t s = f.record->size;
            const uint64_t units = s / unit + (s % unit != 0 ? 1 : 0);  // rounded up, as find
            return Compare(n.cmp, static_cast<double>(units), static_cast<double>(want));
          },
          pre);
    }
    if (p == "-empty") {
      needs_children_ = true;
      return Leaf([](const FindFile& f) {
        const uint32_t fmt = FormatOf(*f.record);
        return (fmt == S_IFREG && f.record->size == 0) || (fmt == S_IFDIR && f.empty_dir);
      });
    }
    if (p == "-mtime" || p == "-atime" || p == "-ctime" || p == "-mmin" || p == "-amin" ||
        p == "-cmin") {
      PROPELLER_ASSIGN_OR_RETURN(std::string v, Arg(p));
      PROPELLER_ASSIGN_OR_RETURN(Number n, ParseNumber(p, v, /*fraction=*/true, false));
      FileTime FileRecord::*field = p[1] == 'm' ? &FileRecord::mtime
                                    : p[1] == 'a' ? &FileRecord::atime
                                                  : &FileRecord::ctime;
      return Leaf(TimeTest(n, now_, p.ends_with("time"), field));
    }
    if (p == "-newer" || p == "-anewer" || p == "-cnewer") {
      PROPELLER_ASSIGN_OR_RETURN(std::string ref, Arg(p));
      PROPELLER_ASSIGN_OR_RETURN(FileTime t, stat_reference_(ref));
      FileTime FileRecord::*field = p == "-newer" ? &FileRecord::mtime
                                    : p == "-anewer" ? &FileRecord::atime
                                                     : &FileRecord::ctime;
      return Leaf([t, field](const FindFile& f) { return f.record->*field > t; });
    }
    if (p == "-user" || p == "-group") {
      PROPELLER_ASSIGN_OR_RETURN(std::string v, Arg(p));
      const bool user = p == "-user";
      std::optional<uint32_t> id = LookUp(v, user);
      if (!id) {
        return Status::InvalidArgument("`" + v + "' is not the name of a known " +
                                       (user ? "user" : "group"));
      }
      const uint32_t want = *id;
      return Leaf(
          [want, user](const FindFile& f) {
            return (user ? f.record->uid : f.record->gid) == want;
          },
          std::string(user ? "uid=" : "gid=") + std::to_string(want));
    }
    if (p == "-uid" || p == "-gid" || p == "-links" || p == "-inum") {
      PROPELLER_ASSIGN_OR_RETURN(std::string v, Arg(p));
      PROPELLER_ASSIGN_OR_RETURN(Number n, ParseNumber(p, v, /*fraction=*/false, false));
      const char which = p[1];
      return Leaf([n, which](const FindFile& f) {
        const double have = which == 'u'   ? f.record->uid
                            : which == 'g' ? f.record->gid
                            : which == 'l' ? f.record->nlink
                                           : static_cast<double>(f.record->id.ino);
        return Compare(n.cmp, have, n.value);
      });
    }
    if (p == "-nouser" || p == "-nogroup") {
      const bool user = p == "-nouser";
      return Leaf([user](const FindFile& f) {
        return !NameKnown(user ? f.record->uid : f.record->gid, user);
      });
    }
    if (p == "-perm") {
      PROPELLER_ASSIGN_OR_RETURN(std::string v, Arg(p));
      char form = 0;
      std::string digits = v;
      if (!v.empty() && (v[0] == '-' || v[0] == '/')) {
        form = v[0];
        digits = v.substr(1);
      }
      if (digits.empty() || digits.size() > 4 ||
          digits.find_first_not_of("01234567") != std::string::npos) {
        return Status::InvalidArgument("-perm " + v + ": only octal modes are answered from "
                                       "the index (symbolic modes such as u+w are not)");
      }
      const uint32_t want = static_cast<uint32_t>(std::strtoul(digits.c_str(), nullptr, 8));
      return Leaf([want, form](const FindFile& f) {
        const uint32_t have = f.record->mode & 07777;
        if (form == '-') return (have & want) == want;
        if (form == '/') return want == 0 || (have & want) != 0;
        return have == want;
      });
    }
    // Actions.
    if (p == "-print" || p == "-print0") {
      has_action_ = true;
      const char end = p == "-print" ? '\n' : '\0';
      auto n = std::make_unique<FindNode>();
      n->run = [end](const FindFile& f, std::string* out, bool*) {
        *out += f.path;
        *out += end;
        return true;
      };
      return n;
    }
    if (p == "-printf") {
      has_action_ = true;
      PROPELLER_ASSIGN_OR_RETURN(std::string fmt, Arg(p));
      PROPELLER_ASSIGN_OR_RETURN(Format format, Format::Parse(fmt));
      auto shared = std::make_shared<Format>(std::move(format));
      auto n = std::make_unique<FindNode>();
      n->run = [shared](const FindFile& f, std::string* out, bool*) {
        shared->Append(f.path, *f.record, out);
        return true;
      };
      return n;
    }
    if (p == "-quit") {
      has_action_ = true;
      auto n = std::make_unique<FindNode>();
      n->run = [](const FindFile&, std::string*, bool* quit) {
        *quit = true;
        return true;
      };
      return n;
    }
    if (p == "-ls" || p == "-fls") {
      return Status::InvalidArgument(p + " is not answered from the index: it prints disk "
                                     "blocks, which the index does not keep (use -printf)");
    }
    if (p == "-exec" || p == "-execdir" || p == "-ok" || p == "-okdir" || p == "-delete" ||
        p == "-prune" || p == "-fprint" || p == "-fprint0" || p == "-fprintf") {
      return Status::InvalidArgument(p + " is not supported by propeller find (it answers "
                                     "from the index): pipe -print0 into xargs -0 instead");
    }
    if (!p.empty() && p[0] == '-') {
      return Status::InvalidArgument("unknown or unsupported predicate `" + p +
                                     "' (see propeller find --help)");
    }
    return Status::InvalidArgument("paths must precede the expression: `" + p + "'");
  }

  const std::vector<std::string>& args_;
  size_t pos_;
  const FileTime now_;
  const std::function<Result<FileTime>(const std::string&)>& stat_reference_;
  reg_syntax_t syntax_ = RE_SYNTAX_EMACS | RE_DOT_NEWLINE;  // find's default regex type
  bool has_action_ = false;
  bool needs_children_ = false;
  int min_depth_ = 0;
  int max_depth_ = -1;
};

// Evaluates `n`; *quit becomes true when -quit ran (then false is returned and nothing else
// is evaluated).
bool Eval(const FindNode& n, const FindFile& f, std::string* out, bool* quit) {
  switch (n.kind) {
    case FindNode::Kind::kLeaf: return n.run(f, out, quit) && !*quit;
    case FindNode::Kind::kNot: {
      const bool v = Eval(*n.kids[0], f, out, quit);
      return !*quit && !v;
    }
    case FindNode::Kind::kAnd:
      return Eval(*n.kids[0], f, out, quit) && !*quit && Eval(*n.kids[1], f, out, quit);
    case FindNode::Kind::kOr: {
      if (Eval(*n.kids[0], f, out, quit)) return true;
      return !*quit && Eval(*n.kids[1], f, out, quit);
    }
    case FindNode::Kind::kComma:
      Eval(*n.kids[0], f, out, quit);
      return !*quit && Eval(*n.kids[1], f, out, quit);
  }
  return false;
}

void CollectPrefilter(const FindNode& n, std::vector<std::string>* out) {
  if (n.kind == FindNode::Kind::kAnd) {
    for (const auto& k : n.kids) CollectPrefilter(*k, out);
  } else if (n.kind == FindNode::Kind::kLeaf && !n.prefilter.empty()) {
    out->push_back(n.prefilter);
  }
}

}  // namespace

FindProgram::FindProgram() = default;
FindProgram::FindProgram(FindProgram&&) noexcept = default;
FindProgram& FindProgram::operator=(FindProgram&&) noexcept = default;
FindProgram::~FindProgram() = default;

Result<FindProgram> FindProgram::Parse(
    const std::vector<std::string>& args, FileTime now_ns,
    const std::function<Result<FileTime>(const std::string&)>& stat_reference) {
  FindProgram prog;
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& a = args[i];
    if ((!a.empty() && a[0] == '-' && a != "-") || a == "(" || a == "!" || a == ",") break;
    prog.starts_.push_back(a);
  }
  if (prog.starts_.empty()) prog.starts_.push_back(".");
  Parser parser(args, i, now_ns, stat_reference);
  PROPELLER_ASSIGN_OR_RETURN(NodePtr root, parser.ParseAll());
  if (!parser.has_action()) {
    // find: with no action, the whole expression is followed by -print.
    auto print = std::make_unique<FindNode>();
    print->run = [](const FindFile& f, std::string* out, bool*) {
      *out += f.path;
      *out += '\n';
      return true;
    };
    root = root ? Join(FindNode::Kind::kAnd, std::move(root), std::move(print))
                : std::move(print);
  }
  prog.root_ = std::move(root);
  prog.min_depth_ = parser.min_depth();
  prog.max_depth_ = parser.max_depth();
  prog.needs_children_ = parser.needs_children();
  return prog;
}

std::string FindProgram::Prefilter() const {
  if (needs_children_) return "size>=0";
  std::vector<std::string> parts;
  CollectPrefilter(*root_, &parts);
  if (parts.empty()) return "size>=0";
  std::string q;
  for (const std::string& p : parts) q += (q.empty() ? "" : " & ") + p;
  return q;
}

bool FindProgram::Run(const FindFile& file, std::string* out) const {
  if (file.depth < min_depth_ || (max_depth_ >= 0 && file.depth > max_depth_)) return true;
  bool quit = false;
  Eval(*root_, file, out, &quit);
  return !quit;
}

}  // namespace propeller::cli
