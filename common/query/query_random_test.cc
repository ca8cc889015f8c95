// Randomized tests of the query language (seeded: PROPELLER_SEED=<n> replays a run; the seed is
// printed on failure).
//
//  - Fuzz: >= 100k random byte strings and >= 50k token soups go to Parse. It must never crash;
//    an error must read "error at N: <what>" with 1 <= N <= length + 1; a success must render
//    canonical text that parses back to the same text and the same matches.
//  - Differential: random valid queries are generated as text together with an oracle tree that
//    holds the meaning the generator intended (units, ages, dates and case folding worked out
//    here, independently). Each query is parsed and Query::Matches is compared with the oracle's
//    own evaluator on random records built to hit the boundaries (values equal to the
//    predicate's). The oracle shares no code with the library: its own date formatter, glob
//    (* and ?), keyword tokenizer, bytewise order and long-double numeric comparison (exact for
//    int64 and double on x86-64).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/query/query.h"
#include "common/random.h"
#include "common/record.h"

namespace propeller {
namespace {

constexpr int64_t kSec = 1'000'000'000;
constexpr int64_t kDay = 86'400 * kSec;
constexpr int64_t kNow = 1'717'200'000 * kSec;  // 2024-06-01T00:00:00Z

ParseOptions Options() {
  ParseOptions options;
  options.now_ns = kNow;
  options.resolver.user = [](const std::string& name) -> std::optional<uint32_t> {
    return name == "alice" ? std::optional<uint32_t>(1000) : std::nullopt;
  };
  options.resolver.group = [](const std::string& name) -> std::optional<uint32_t> {
    return name == "staff" ? std::optional<uint32_t>(50) : std::nullopt;
  };
  return options;
}

template <typename T>
const T& Pick(Random& rng, const std::vector<T>& items) {
  return items[rng.Uniform(items.size())];
}

std::string Printable(std::string_view s) {
  std::string out;
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out.push_back(ch);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Random records
// ---------------------------------------------------------------------------------------------

const std::vector<uint64_t>& SizePool() {
  static const std::vector<uint64_t> pool = {
      0, 1, 2, 1023, 1024, 1025, 1331, 1536, 2047, 2048, uint64_t{1} << 20, (uint64_t{1} << 20) + 1,
      uint64_t{3} << 19, uint64_t{1} << 30, 1610612736, uint64_t{1} << 40,
      static_cast<uint64_t>(std::numeric_limits<int64_t>::max()),
      static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) + 1,  // records only
      std::numeric_limits<uint64_t>::max()};
  return pool;
}

struct AgeUnit {
  const char* spelling;
  int64_t ns;
};

const std::vector<AgeUnit>& AgeUnits() {
  static const std::vector<AgeUnit> units = {
      {"s", kSec}, {"sec", kSec}, {"seconds", kSec}, {"min", 60 * kSec}, {"minutes", 60 * kSec},
      {"h", 3600 * kSec}, {"hours", 3600 * kSec}, {"d", kDay}, {"day", kDay}, {"DAYS", kDay},
      {"w", 7 * kDay}, {"week", 7 * kDay}, {"y", 365 * kDay}, {"years", 365 * kDay}};
  return units;
}

// Instants near kNow, many exactly "k units ago" so age predicates meet them at the boundary.
int64_t RandomTime(Random& rng) {
  const int64_t base = kNow - static_cast<int64_t>(rng.Uniform(4)) * Pick(rng, AgeUnits()).ns;
  switch (rng.Uniform(4)) {
    case 0: return base - 1;
    case 1: return base + 1;
    default: return base;
  }
}

const std::vector<uint32_t>& IdPool() {
  static const std::vector<uint32_t> pool = {0, 1, 50, 999, 1000, 1001, 4294967295u};
  return pool;
}
const std::vector<uint32_t>& PermPool() {
  static const std::vector<uint32_t> pool = {0, 0644, 0755, 0600, 07777, 04755, 0444};
  return pool;
}
const std::vector<uint32_t>& NlinkPool() {
  static const std::vector<uint32_t> pool = {0, 1, 2, 3, 100};
  return pool;
}

const std::vector<std::string>& Components() {
  static const std::vector<std::string> pool = {
      "a", "b", "A", "ab", "a.b", "x.TXT", "x.txt", ".hid", "run42", "r-1", "B.tar.gz",
      "caf\xc3\xa9", "a*b", "ba", "..x.Y", "README"};
  return pool;
}

const std::vector<std::string>& UserAttrNames() {
  static const std::vector<std::string> names = {"p", "q", "r.s"};
  return names;
}

const std::vector<int64_t>& IntPool() {
  static const std::vector<int64_t> pool = {-3, 0, 5, int64_t{1} << 53, (int64_t{1} << 53) + 1,
                                            std::numeric_limits<int64_t>::max(),
                                            std::numeric_limits<int64_t>::min()};
  return pool;
}
const std::vector<double>& DoublePool() {  // finite ones; records also get NaN and infinity
  static const std::vector<double> pool = {0.5, -3.0, 5.0, 9007199254740992.0,
                                           9223372036854775808.0, -9223372036854775808.0, -1e300,
                                           0.0};
  return pool;
}
const std::vector<std::string>& StringPool() {
  static const std::vector<std::string> pool = {"", "alpha", "beta", "5", "al", "Alpha", "a b"};
  return pool;
}

AttrValue RandomAttrValue(Random& rng) {
  switch (rng.Uniform(3)) {
    case 0: return Pick(rng, IntPool());
    case 1:
      if (rng.OneIn(8)) return rng.OneIn(2) ? std::nan("") : std::numeric_limits<double>::infinity();
      return Pick(rng, DoublePool());
    default: return Pick(rng, StringPool());
  }
}

FileRecord RandomRecord(Random& rng) {
  FileRecord r;
  const int npaths = static_cast<int>(rng.Uniform(4));
  for (int i = 0; i < npaths; ++i) {
    if (rng.OneIn(10)) {
      r.paths.push_back("/");
      continue;
    }
    std::string path;
    const int depth = 1 + static_cast<int>(rng.Uniform(3));
    for (int d = 0; d < depth; ++d) path += "/" + Pick(rng, Components());
    r.paths.push_back(path);
  }
  std::sort(r.paths.begin(), r.paths.end());
  r.paths.erase(std::unique(r.paths.begin(), r.paths.end()), r.paths.end());
  const FileType types[] = {FileType::kRegular, FileType::kDirectory, FileType::kSymlink,
                            FileType::kOther};
  r.type = types[rng.Uniform(4)];
  r.size = Pick(rng, SizePool());
  r.mtime = RandomTime(rng);
  r.ctime = RandomTime(rng);
  r.atime = RandomTime(rng);
  r.uid = Pick(rng, IdPool());
  r.gid = Pick(rng, IdPool());
  r.mode = (rng.OneIn(2) ? 0100000u : 040000u) | Pick(rng, PermPool());
  r.nlink = Pick(rng, NlinkPool());
  for (const std::string& name : UserAttrNames()) {
    if (!rng.OneIn(4)) r.attrs[name] = RandomAttrValue(rng);
  }
  return r;
}

std::string Describe(const FileRecord& r) {
  std::string out = "record{paths=[";
  for (const std::string& p : r.paths) out += "\"" + Printable(p) + "\" ";
  out += "] type=" + std::string(1, static_cast<char>(r.type)) +
         " size=" + std::to_string(r.size) + " mtime=" + FileTimeToString(r.mtime) +
         " ctime=" + FileTimeToString(r.ctime) + " atime=" + FileTimeToString(r.atime) +
         " uid=" + std::to_string(r.uid) + " gid=" + std::to_string(r.gid) +
         " mode=" + std::to_string(r.mode) + " nlink=" + std::to_string(r.nlink) + " attrs={";
  for (const auto& [k, v] : r.attrs) {
    out += k + ":";
    if (const auto* i = std::get_if<int64_t>(&v)) out += "int " + std::to_string(*i);
    if (const auto* d = std::get_if<double>(&v)) {
      char buf[40];
      std::snprintf(buf, sizeof(buf), "double %.17g", *d);
      out += buf;
    }
    if (const auto* s = std::get_if<std::string>(&v)) out += "\"" + Printable(*s) + "\"";
    out += " ";
  }
  return out + "}}";
}

// ---------------------------------------------------------------------------------------------
// The oracle: what a query means, evaluated without the library.
// ---------------------------------------------------------------------------------------------

enum class OAttr { kSize, kMtime, kCtime, kAtime, kUid, kGid, kMode, kNlink, kType, kName,
                   kExt, kPath, kKeyword, kUser };

struct OPred {
  OAttr attr = OAttr::kSize;
  std::string op;     // "=", "!=", "<", "<=", ">", ">=", "~" (already flipped for ages)
  __int128 num = 0;   // numeric built-ins
  std::string text;   // string built-ins (already folded for ext/keyword), and '~' texts
  std::string user;   // user attribute name
  AttrValue want;     // user attribute value (for '~' the text is used instead)
  __int128 unit = 0;  // a date compared with = or !=: the length of the unit it was written in
};

// The oracle's own reading of "= a date": the day, minute, second or nanosecond written.
__int128 DateUnit(const std::string& date) {
  if (date.find_first_of("Tt") == std::string::npos) return __int128{86400} * 1'000'000'000;
  if (date.find('.') != std::string::npos) return 1;  // OracleDate writes nine digits
  const auto colons = std::count(date.begin(), date.end(), ':');
  return colons == 1 ? __int128{60} * 1'000'000'000 : __int128{1'000'000'000};
}

bool TimeHolds(const OPred& p, __int128 t);

struct ONode {
  char kind = 'p';  // '&', '|', '!', 'p'
  std::vector<ONode> kids;
  OPred pred;
};

template <typename T>
bool Holds(const std::string& op, const T& a, const T& b) {
  if (op == "=") return a == b;
  if (op == "!=") return !(a == b);
  if (op == "<") return a < b;
  if (op == "<=") return a < b || a == b;
  if (op == ">") return b < a;
  if (op == ">=") return b < a || a == b;
  ADD_FAILURE() << "oracle: bad op " << op;
  return false;
}

bool BytesLess(const std::string& a, const std::string& b) {
  return std::lexicographical_compare(
      a.begin(), a.end(), b.begin(), b.end(),
      [](char x, char y) { return static_cast<unsigned char>(x) < static_cast<unsigned char>(y); });
}

struct Bytes {  // a string ordered bytewise, for Holds()
  const std::string& s;
  bool operator==(const Bytes& o) const { return s == o.s; }
  bool operator<(const Bytes& o) const { return BytesLess(s, o.s); }
};

// '*' any run (including '/'), '?' one byte, everything else literal.
bool OracleGlob(const char* p, const char* s) {
  if (*p == '\0') return *s == '\0';
  if (*p == '*') {
    for (const char* t = s;; ++t) {
      if (OracleGlob(p + 1, t)) return true;
      if (*t == '\0') return false;
    }
  }
  if (*s == '\0') return false;
  if (*p == '?' || *p == *s) return OracleGlob(p + 1, s + 1);
  return false;
}

bool OracleStringHolds(const std::string& op, const std::string& subject, const std::string& v) {
  if (op == "~") {
    if (v.find_first_of("*?") != std::string::npos) return OracleGlob(v.c_str(), subject.c_str());
    return subject.find(v) != std::string::npos;
  }
  return Holds(op, Bytes{subject}, Bytes{v});
}

std::string OracleBase(const std::string& path) { return path.substr(path.rfind('/') + 1); }

std::string Lower(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
  }
  return s;
}

// Extension per record.h: lowercased text after the last dot, leading dots not counting.
std::string OracleExt(const std::string& name) {
  size_t start = 0;
  while (start < name.size() && name[start] == '.') ++start;
  const size_t dot = name.rfind('.');
  if (dot == std::string::npos || dot < start) return "";
  return Lower(name.substr(dot + 1));
}

std::vector<std::string> OracleKeywords(const std::string& path) {
  std::vector<std::string> out;
  std::string cur;
  for (size_t i = 0; i <= path.size(); ++i) {
    const auto c = i < path.size() ? static_cast<unsigned char>(path[i]) : 0;
    if (i < path.size() && (std::isalnum(c) || c >= 0x80)) {
      cur.push_back(static_cast<char>(std::tolower(c)));
    } else if (!cur.empty()) {
      out.push_back(cur);
      cur.clear();
    }
  }
  return out;
}

bool OracleAnyPath(const FileRecord& r, const OPred& p) {
  const std::string op = p.op == "!=" ? "=" : p.op;
  bool any = false;
  for (const std::string& path : r.paths) {
    std::string subject;
    switch (p.attr) {
      case OAttr::kPath: subject = path; break;
      case OAttr::kName: subject = OracleBase(path); break;
      default: subject = OracleExt(OracleBase(path)); break;
    }
    any = any || OracleStringHolds(op, subject, p.text);
  }
  return p.op == "!=" ? !any : any;
}

bool OracleUser(const FileRecord& r, const OPred& p) {
  const auto it = r.attrs.find(p.user);
  if (it == r.attrs.end()) return p.op == "!=";
  const AttrValue& have = it->second;
  const auto* have_s = std::get_if<std::string>(&have);
  if (p.op == "~") return have_s != nullptr && OracleStringHolds("~", *have_s, p.text);
  const auto* want_s = std::get_if<std::string>(&p.want);
  if ((have_s == nullptr) != (want_s == nullptr)) return p.op == "!=";
  if (have_s != nullptr) return Holds(p.op, Bytes{*have_s}, Bytes{*want_s});
  // long double holds every int64 and every double exactly (64-bit mantissa on x86-64).
  const auto as_ld = [](const AttrValue& v) -> long double {
    if (const auto* i = std::get_if<int64_t>(&v)) return static_cast<long double>(*i);
    return static_cast<long double>(std::get<double>(v));
  };
  const long double a = as_ld(have), b = as_ld(p.want);
  if (std::isnan(a) || std::isnan(b)) return p.op == "!=";
  return Holds(p.op, a, b);
}

bool OracleEval(const ONode& n, const FileRecord& r) {
  switch (n.kind) {
    case '&':
      for (const ONode& k : n.kids) {
        if (!OracleEval(k, r)) return false;
      }
      return true;
    case '|':
      for (const ONode& k : n.kids) {
        if (OracleEval(k, r)) return true;
      }
      return false;
    case '!':
      return !OracleEval(n.kids[0], r);
    default:
      break;
  }
  const OPred& p = n.pred;
  switch (p.attr) {
    case OAttr::kSize: return Holds<__int128>(p.op, r.size, p.num);
    case OAttr::kMtime: return TimeHolds(p, r.mtime);
    case OAttr::kCtime: return TimeHolds(p, r.ctime);
    case OAttr::kAtime: return TimeHolds(p, r.atime);
    case OAttr::kUid: return Holds<__int128>(p.op, r.uid, p.num);
    case OAttr::kGid: return Holds<__int128>(p.op, r.gid, p.num);
    case OAttr::kMode: return Holds<__int128>(p.op, r.mode % 4096, p.num);
    case OAttr::kNlink: return Holds<__int128>(p.op, r.nlink, p.num);
    case OAttr::kType: return Holds(p.op, std::string(1, static_cast<char>(r.type)), p.text);
    case OAttr::kName:
    case OAttr::kExt:
    case OAttr::kPath: return OracleAnyPath(r, p);
    case OAttr::kKeyword: {
      bool found = false;
      for (const std::string& path : r.paths) {
        for (const std::string& k : OracleKeywords(path)) found = found || k == p.text;
      }
      return p.op == "=" ? found : !found;
    }
    case OAttr::kUser: return OracleUser(r, p);
  }
  return false;
}

// Moves some fields of `r` onto (or one unit next to) the values the query compares with, so
// the boundaries of every comparison are exercised, not only the fixed pools.
void PullToBoundaries(Random& rng, const ONode& n, FileRecord* r) {
  for (const ONode& kid : n.kids) PullToBoundaries(rng, kid, r);
  if (n.kind != 'p' || rng.OneIn(2)) return;
  const OPred& p = n.pred;
  // A date's unit has two edges: its start and its end.
  const __int128 edge = p.unit != 0 && rng.OneIn(2) ? p.num + p.unit : p.num;
  const __int128 v = edge + static_cast<int>(rng.Uniform(3)) - 1;
  const auto clamp = [&](__int128 lo, __int128 hi) { return std::min(std::max(v, lo), hi); };
  constexpr __int128 kI64Min = std::numeric_limits<int64_t>::min();
  constexpr __int128 kI64Max = std::numeric_limits<int64_t>::max();
  constexpr __int128 kU32Max = std::numeric_limits<uint32_t>::max();
  switch (p.attr) {
    case OAttr::kSize:
      r->size = static_cast<uint64_t>(clamp(0, std::numeric_limits<uint64_t>::max()));
      break;
    case OAttr::kMtime: r->mtime = static_cast<int64_t>(clamp(kI64Min, kI64Max)); break;
    case OAttr::kCtime: r->ctime = static_cast<int64_t>(clamp(kI64Min, kI64Max)); break;
    case OAttr::kAtime: r->atime = static_cast<int64_t>(clamp(kI64Min, kI64Max)); break;
    case OAttr::kUid: r->uid = static_cast<uint32_t>(clamp(0, kU32Max)); break;
    case OAttr::kGid: r->gid = static_cast<uint32_t>(clamp(0, kU32Max)); break;
    case OAttr::kNlink: r->nlink = static_cast<uint32_t>(clamp(0, kU32Max)); break;
    case OAttr::kMode:
      r->mode = (r->mode & ~07777u) | static_cast<uint32_t>(clamp(0, 07777));
      break;
    case OAttr::kUser:
      if (const auto* i = std::get_if<int64_t>(&p.want)) {
        const __int128 w = static_cast<__int128>(*i) + static_cast<int>(rng.Uniform(3)) - 1;
        r->attrs[p.user] = static_cast<int64_t>(std::min(std::max(w, kI64Min), kI64Max));
      } else if (const auto* d = std::get_if<double>(&p.want)) {
        const double next[] = {std::nextafter(*d, -1e308), *d, std::nextafter(*d, 1e308)};
        r->attrs[p.user] = next[rng.Uniform(3)];
      } else {
        r->attrs[p.user] = p.want;
      }
      break;
    default:
      break;
  }
}

// ---------------------------------------------------------------------------------------------
// The generator: a random query as text plus its oracle tree.
// ---------------------------------------------------------------------------------------------

// A civil date for t >= 1970, computed by walking years and months (independent of <chrono>).
bool TimeHolds(const OPred& p, __int128 t) {
  if (p.unit != 0 && (p.op == "=" || p.op == "!=")) {
    const bool in = t >= p.num && t < p.num + p.unit;
    return p.op == "=" ? in : !in;
  }
  return Holds<__int128>(p.op, t, p.num);
}

std::string OracleDate(int64_t t, Random& rng) {
  int64_t secs = t / kSec;
  const int64_t nanos = t % kSec;
  int64_t days = secs / 86400;
  int64_t sod = secs % 86400;
  int year = 1970;
  const auto leap = [](int y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; };
  while (days >= (leap(year) ? 366 : 365)) days -= leap(year++) ? 366 : 365;
  const int mdays[] = {31, leap(year) ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  int month = 0;
  while (days >= mdays[month]) days -= mdays[month++];
  char buf[64];
  const int hh = static_cast<int>(sod / 3600), mm = static_cast<int>(sod / 60 % 60),
            ss = static_cast<int>(sod % 60);
  const char sep = rng.OneIn(4) ? 't' : 'T';
  if (nanos == 0 && sod == 0 && rng.OneIn(2)) {
    std::snprintf(buf, sizeof(buf), "%04d-%02d-%02d", year, month + 1, static_cast<int>(days) + 1);
  } else if (nanos == 0 && ss == 0 && rng.OneIn(2)) {
    std::snprintf(buf, sizeof(buf), "%04d-%02d-%02d%c%02d:%02d", year, month + 1,
                  static_cast<int>(days) + 1, sep, hh, mm);
  } else {
    std::snprintf(buf, sizeof(buf), "%04d-%02d-%02d%c%02d:%02d:%02d", year, month + 1,
                  static_cast<int>(days) + 1, sep, hh, mm, ss);
    if (nanos != 0) std::snprintf(buf + 19, sizeof(buf) - 19, ".%09lld", static_cast<long long>(nanos));
  }
  std::string out = buf;
  if (rng.OneIn(5) && out.size() > 10) out += "Z";
  return out;
}

class Generator {
 public:
  explicit Generator(Random& rng) : rng_(rng) {}

  // Builds a node and its text; `depth` bounds nesting.
  ONode Node(int depth, std::string* text) {
    const uint64_t roll = rng_.Uniform(10);
    if (depth >= 4 || roll < 4) return Pred(text);
    if (roll < 6) {
      ONode n;
      n.kind = '!';
      std::string kid_text;
      n.kids.push_back(Node(depth + 1, &kid_text));
      *text = "!" + Space() + Group(n.kids[0], kid_text, /*force=*/n.kids[0].kind == '&' ||
                                                                       n.kids[0].kind == '|');
      return n;
    }
    ONode n;
    n.kind = roll < 8 ? '&' : '|';
    const int count = 2 + static_cast<int>(rng_.Uniform(3));
    std::string out;
    for (int i = 0; i < count; ++i) {
      std::string kid_text;
      n.kids.push_back(Node(depth + 1, &kid_text));
      const ONode& kid = n.kids.back();
      // Only an '|' inside an '&' needs parentheses; elsewhere they are optional.
      const bool force = n.kind == '&' && kid.kind == '|';
      if (i > 0) {
        out += Space();
        out += n.kind == '|' ? "|" : (rng_.OneIn(3) ? "," : "&");
        out += Space();
      }
      out += Group(kid, kid_text, force);
    }
    *text = out;
    return n;
  }

 private:
  std::string Space() {
    switch (rng_.Uniform(6)) {
      case 0: return " ";
      case 1: return "  ";
      case 2: return "\t";
      case 3: return "\n ";
      default: return "";
    }
  }

  std::string Group(const ONode&, const std::string& text, bool force) {
    if (force || rng_.OneIn(4)) return "(" + Space() + text + Space() + ")";
    return text;
  }

  std::string Op(bool ordered_only = false, bool allow_match = false) {
    static const std::vector<std::string> all = {"=", "!=", "<", "<=", ">", ">="};
    static const std::vector<std::string> ordered = {"<", "<=", ">", ">="};
    if (allow_match && rng_.OneIn(4)) return "~";
    return Pick(rng_, ordered_only ? ordered : all);
  }

  // A value word, quoted (with escapes) at random or when it must be.
  std::string Quote(const std::string& value, bool must) {
    if (!must && !value.empty() && !rng_.OneIn(3)) return value;
    std::string out = "\"";
    for (char c : value) {
      if (c == '"' || c == '\\') out.push_back('\\');
      out.push_back(c);
    }
    return out + "\"";
  }

  std::string SizeText(__int128* bytes) {
    struct Unit { const char* spelling; uint64_t mult; };
    static const std::vector<Unit> units = {
        {"k", 1024}, {"KB", 1024}, {"KiB", 1024}, {"m", 1 << 20}, {"MiB", 1 << 20},
        {"g", 1 << 30}, {"GB", 1 << 30}, {"t", uint64_t{1} << 40}, {"p", uint64_t{1} << 50}};
    if (rng_.OneIn(3)) {
      // A decimal with a unit: floor(I.F * mult), computed here in 128 bits.
      const Unit& u = Pick(rng_, units);
      const int64_t whole = static_cast<int64_t>(rng_.Uniform(3000));
      const int frac_digits = static_cast<int>(rng_.Uniform(4));
      int64_t frac = 0, scale = 1;
      for (int i = 0; i < frac_digits; ++i) {
        frac = frac * 10 + static_cast<int64_t>(rng_.Uniform(10));
        scale *= 10;
      }
      *bytes = (static_cast<__int128>(whole) * scale + frac) * u.mult / scale;
      std::string text = std::to_string(whole);
      if (frac_digits > 0) {
        std::string f = std::to_string(frac);
        text += "." + std::string(frac_digits - f.size(), '0') + f;
      }
      return text + u.spelling;
    }
    uint64_t v = Pick(rng_, SizePool());
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) v = 1536;
    *bytes = v;
    if (v == 1536 && rng_.OneIn(2)) return "1.5k";
    if (v != 0 && v % 1024 == 0 && rng_.OneIn(2)) {
      for (int k = 4; k >= 1; --k) {
        const uint64_t mult = uint64_t{1} << (10 * k);
        if (v % mult == 0) {
          static const char* names[] = {"", "k", "m", "g", "t"};
          return std::to_string(v / mult) + (rng_.OneIn(2) ? names[k] : Lower(names[k]) + "ib");
        }
      }
    }
    return std::to_string(v);
  }

  ONode Pred(std::string* text) {
    ONode n;
    OPred& p = n.pred;
    std::string attr, value;
    switch (rng_.Uniform(14)) {
      case 0: {
        attr = "size";
        p.attr = OAttr::kSize;
        p.op = Op();
        value = Quote(SizeText(&p.num), false);
        break;
      }
      case 1:
      case 2:
      case 3: {
        static const OAttr attrs[] = {OAttr::kMtime, OAttr::kCtime, OAttr::kAtime};
        static const char* names[] = {"mtime", "ctime", "atime"};
        const int which = static_cast<int>(rng_.Uniform(3));
        attr = names[which];
        p.attr = attrs[which];
        if (rng_.OneIn(2)) {  // an age: instant = now - age, operator flipped
          const AgeUnit& u = Pick(rng_, AgeUnits());
          const int64_t count = static_cast<int64_t>(rng_.Uniform(4));
          const std::string op = Op(/*ordered_only=*/true);
          p.op = op == "<" ? ">" : op == "<=" ? ">=" : op == ">" ? "<" : "<=";
          p.num = kNow - count * u.ns;
          *text = attr + Space() + op + Space() + std::to_string(count) + u.spelling;
          return n;
        }
        const int64_t t = RandomTime(rng_);
        p.op = Op();
        p.num = t;
        value = OracleDate(t, rng_);
        p.unit = DateUnit(value);
        break;
      }
      case 4:
      case 5: {
        const bool uid = rng_.OneIn(2);
        attr = uid ? "uid" : "gid";
        p.attr = uid ? OAttr::kUid : OAttr::kGid;
        p.op = Op();
        const uint32_t id = Pick(rng_, IdPool());
        p.num = id;
        value = std::to_string(id);
        if (uid && id == 1000 && rng_.OneIn(2)) value = "alice";
        if (!uid && id == 50 && rng_.OneIn(2)) value = "staff";
        break;
      }
      case 6: {
        attr = "mode";
        p.attr = OAttr::kMode;
        p.op = Op();
        const uint32_t perm = Pick(rng_, PermPool());
        p.num = perm;
        char buf[16];
        std::snprintf(buf, sizeof(buf), rng_.OneIn(2) ? "0%o" : "%o", perm);  // always octal
        value = buf;
        break;
      }
      case 7: {
        attr = "nlink";
        p.attr = OAttr::kNlink;
        p.op = Op();
        p.num = Pick(rng_, NlinkPool());
        value = std::to_string(static_cast<int64_t>(p.num));
        break;
      }
      case 8: {
        attr = "type";
        p.attr = OAttr::kType;
        p.op = rng_.OneIn(2) ? "=" : "!=";
        static const std::vector<std::string> letters = {"f", "d", "l", "o"};
        p.text = Pick(rng_, letters);
        value = p.text;
        break;
      }
      case 9:
      case 10: {
        const bool is_name = rng_.OneIn(2);
        attr = is_name ? "name" : "path";
        p.attr = is_name ? OAttr::kName : OAttr::kPath;
        p.op = Op(false, /*allow_match=*/true);
        p.text = StringValue(is_name, p.op == "~");
        value = Quote(p.text, p.text.empty());
        break;
      }
      case 11: {
        attr = "ext";
        p.attr = OAttr::kExt;
        p.op = Op(false, /*allow_match=*/true);
        static const std::vector<std::string> exts = {"txt", "TXT", ".txt", "gz", ".GZ", "y",
                                                      "b", "", "t*", "?z", "x", "..txt"};
        const std::string raw = Pick(rng_, exts);
        std::string folded = Lower(raw);
        folded.erase(0, std::min(folded.find_first_not_of('.'), folded.size()));
        p.text = folded;
        value = Quote(raw, raw.empty());
        break;
      }
      case 12: {
        attr = "keyword";
        p.attr = OAttr::kKeyword;
        p.op = rng_.OneIn(2) ? "=" : "!=";
        static const std::vector<std::string> words = {"a", "B", "run42", "RUN", "txt", "x",
                                                       "caf\xc3\xa9", "hid", "readme", "tar"};
        const std::string raw = Pick(rng_, words);
        p.text = Lower(raw);
        value = Quote(raw, false);
        break;
      }
      default: {
        p.attr = OAttr::kUser;
        p.user = Pick(rng_, UserAttrNames());
        attr = p.user;
        p.op = Op(false, /*allow_match=*/true);
        value = UserValue(&p);
        break;
      }
    }
    *text = attr + Space() + p.op + Space() + value;
    return n;
  }

  // Names, paths, substrings of them, and globs made from them with * and ?.
  std::string StringValue(bool is_name, bool match) {
    std::string base = Pick(rng_, Components());
    if (!is_name) {
      base = "/" + base;
      if (rng_.OneIn(2)) base += "/" + Pick(rng_, Components());
    }
    if (!match || rng_.OneIn(4)) {
      if (rng_.OneIn(4)) base = base.substr(0, rng_.Uniform(base.size() + 1));
      return base;
    }
    if (base.find_first_of("*?") != std::string::npos || rng_.OneIn(2)) {
      // A substring (or a glob when the name itself holds a '*').
      const size_t from = rng_.Uniform(base.size() + 1);
      return base.substr(from, rng_.Uniform(base.size() - from + 1));
    }
    std::string glob;
    for (size_t i = 0; i < base.size(); ++i) {
      switch (rng_.Uniform(6)) {
        case 0: glob += "?"; break;
        case 1: glob += "*"; break;
        case 2: glob += "*"; i += rng_.Uniform(3); break;
        default: glob.push_back(base[i]); break;
      }
    }
    return glob;
  }

  std::string UserValue(OPred* p) {
    switch (rng_.Uniform(3)) {
      case 0: {
        const int64_t v = Pick(rng_, IntPool());
        p->want = v;
        p->text = std::to_string(v);
        return p->text;
      }
      case 1: {
        const double v = Pick(rng_, DoublePool());
        p->want = v;
        char buf[40];
        std::snprintf(buf, sizeof(buf), "%.17g", v);
        p->text = buf;
        if (p->text.find_first_of(".e") == std::string::npos) p->text += ".0";
        return p->text;
      }
      default: {
        const std::string v = Pick(rng_, StringPool());
        p->want = v;
        p->text = v;
        // Quoted when it would otherwise read as a number, a space, or nothing.
        const bool must = v.empty() || v == "5" || v.find(' ') != std::string::npos;
        return Quote(v, must);
      }
    }
  }

  Random& rng_;
};

// ---------------------------------------------------------------------------------------------
// Fuzz
// ---------------------------------------------------------------------------------------------

// Checks one Parse outcome; returns false (after reporting) when it is wrong.
bool CheckOutcome(const std::string& text, Random& rng) {
  Result<Query> q = Query::Parse(text, Options());
  if (!q.ok()) {
    const std::string& msg = q.status().message();
    const std::string prefix = "error at ";
    size_t colon = msg.find(": ");
    if (q.status().code() != StatusCode::kInvalidArgument || msg.rfind(prefix, 0) != 0 ||
        colon == std::string::npos || colon == prefix.size() || colon + 2 >= msg.size()) {
      ADD_FAILURE() << "malformed error for \"" << Printable(text) << "\": "
                    << q.status().ToString();
      return false;
    }
    const std::string digits = msg.substr(prefix.size(), colon - prefix.size());
    if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 6) {
      ADD_FAILURE() << "bad position in \"" << Printable(text) << "\": " << msg;
      return false;
    }
    const size_t n = std::stoul(digits);
    if (n < 1 || n > text.size() + 1) {
      ADD_FAILURE() << "position " << n << " outside 1.." << text.size() + 1 << " for \""
                    << Printable(text) << "\": " << msg;
      return false;
    }
    return true;
  }
  const std::string canonical = q->ToString();
  Result<Query> again = Query::Parse(canonical, Options());
  if (!again.ok() || again->ToString() != canonical) {
    ADD_FAILURE() << "round trip of \"" << Printable(text) << "\" via \"" << Printable(canonical)
                  << "\": " << (again.ok() ? again->ToString() : again.status().ToString());
    return false;
  }
  for (int i = 0; i < 3; ++i) {
    const FileRecord r = RandomRecord(rng);
    if (q->Matches(r) != again->Matches(r)) {
      ADD_FAILURE() << "round trip changed the meaning of \"" << Printable(text) << "\" on "
                    << Describe(r);
      return false;
    }
  }
  return true;
}

const std::vector<std::string>& SoupTokens() {
  static const std::vector<std::string> tokens = {
      "size", "mtime", "ctime", "atime", "uid", "gid", "mode", "nlink", "type", "name", "ext",
      "path", "keyword", "user.x", "p", "Size", "1abc", "a/b",
      "=", "!=", "<", "<=", ">", ">=", "~", "==", "=!", "<>",
      "1", "0", "-5", "1k", "1.5g", "16MiB", "1xyz", "8192p", "1d", "1m", "30min", "2.5h",
      "2024-05-01", "2024-13-01", "2024-02-30", "2024-05-01T12:00", "2024-05-01T12:00:30.5Z",
      "1500-01-01", "alice", "bob", "staff", "0644", "0789", "010000", "f", "d", "x", "*.txt",
      "[!a]*", "1e3", "1e999", "99999999999999999999", "-9223372036854775808", "1.0", "\"q\"",
      "\"es\\\"c\"", "\"open", "\"bad\\q\"", "\"\"",
      "&", "&", ",", "|", "|", "!", "!", "(", "(", ")", ")",
      " ", "  ", "\t", "\n", "'", "$", std::string(1, '\0'), "\xff", "\xc3\xa9"};
  return tokens;
}

TEST(QueryRandom, FuzzNeverCrashesAndErrorsAreWellFormed) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed) + " (replay with PROPELLER_SEED=" +
               std::to_string(seed) + ")");
  Random rng(seed);
  static const std::string kAlphabet =
      "sizemtypegidnlkwor=!<>~&|,() \t\"\\-.0123456789kKMgGdhwyT:*?[]abcxZ_/'$\xc3\xa9";
  int failures = 0, parsed = 0;
  constexpr int kRandomStrings = 100'000;
  for (int i = 0; i < kRandomStrings && failures < 10; ++i) {
    std::string text;
    const size_t len = rng.Uniform(i % 10 == 0 ? 200 : 40);
    for (size_t k = 0; k < len; ++k) {
      text.push_back(i % 2 == 0 ? static_cast<char>(rng.Uniform(256))
                                : kAlphabet[rng.Uniform(kAlphabet.size())]);
    }
    if (!CheckOutcome(text, rng)) ++failures;
  }
  constexpr int kSoups = 60'000;
  for (int i = 0; i < kSoups && failures < 10; ++i) {
    std::string text;
    if (i % 2 == 0) {
      // Pure soup: any tokens in any order.
      const int ntokens = 1 + static_cast<int>(rng.Uniform(16));
      for (int k = 0; k < ntokens; ++k) text += Pick(rng, SoupTokens());
    } else {
      // Mostly well-formed: predicates joined by separators, sometimes one stray token.
      static const std::vector<std::pair<std::string, std::string>> preds = {
          {"size", "1k"}, {"size", "1.5g"}, {"mtime", "1d"}, {"mtime", "2024-05-01"},
          {"uid", "alice"}, {"name", "*.txt"}, {"name", "\"q r\""}, {"ext", ".TXT"},
          {"mode", "0644"}, {"type", "f"}, {"keyword", "x"}, {"p", "1.0"}, {"p", "-5"},
          {"p", "\"q\""}, {"path", "/a/b"}, {"nlink", "2"}};
      static const std::vector<std::string> ops = {"=", "!=", "<", "<=", ">", ">=", "~"};
      static const std::vector<std::string> seps = {" & ", " | ", ",", "&", "|", " , "};
      const int npreds = 1 + static_cast<int>(rng.Uniform(6));
      int open = 0;
      for (int k = 0; k < npreds; ++k) {
        if (k > 0) text += Pick(rng, seps);
        if (rng.OneIn(4)) text += "!";
        if (rng.OneIn(5)) {
          text += "(";
          ++open;
        }
        const auto& [attr, value] = Pick(rng, preds);
        text += attr + Pick(rng, ops) + value;
        if (open > 0 && rng.OneIn(3)) {
          text += ")";
          --open;
        }
        if (rng.OneIn(12)) text += Pick(rng, SoupTokens());
      }
      text += std::string(static_cast<size_t>(open), ')');
    }
    Result<Query> q = Query::Parse(text, Options());
    if (q.ok()) ++parsed;
    if (!CheckOutcome(text, rng)) ++failures;
  }
  EXPECT_EQ(failures, 0);
  // The soups must reach the success path too, or the round-trip checks would test nothing.
  EXPECT_GT(parsed, kSoups / 100);
}

// Random predicates and deep structures near the limits.
TEST(QueryRandom, FuzzAtTheLimits) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  Random rng(seed ^ 0x5eed);
  for (int i = 0; i < 200; ++i) {
    std::string text;
    const int depth = 55 + static_cast<int>(rng.Uniform(20));
    for (int d = 0; d < depth; ++d) text += rng.OneIn(2) ? "!" : "(";
    text += "a=1";
    text += std::string(static_cast<size_t>(rng.Uniform(80)), ')');
    EXPECT_TRUE(CheckOutcome(text, rng));
  }
  // Mixed nesting: the canonical text must parse back whenever the input parsed.
  static const std::vector<std::string> openers = {"!", "(", "a=1 & (", "a=1 | (", "a=1 & !(",
                                                   "!(b=2 | ", "(c=3, "};
  for (int i = 0; i < 2000; ++i) {
    std::string text;
    int open = 0;
    const int levels = 40 + static_cast<int>(rng.Uniform(30));
    for (int d = 0; d < levels; ++d) {
      const std::string& o = Pick(rng, openers);
      text += o;
      if (o.back() == '(') ++open;
    }
    text += "a=1";
    if (!rng.OneIn(10)) text += std::string(static_cast<size_t>(open), ')');
    EXPECT_TRUE(CheckOutcome(text, rng));
  }
}

// ---------------------------------------------------------------------------------------------
// Differential
// ---------------------------------------------------------------------------------------------

TEST(QueryRandom, DifferentialAgainstOracle) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed) + " (replay with PROPELLER_SEED=" +
               std::to_string(seed) + ")");
  Random rng(seed + 1);
  Generator gen(rng);
  constexpr int kQueries = 6000;
  constexpr int kRecordsPerQuery = 24;
  int failures = 0;
  int64_t matched = 0, evaluated = 0;
  for (int i = 0; i < kQueries && failures < 5; ++i) {
    std::string text;
    const ONode oracle = gen.Node(0, &text);
    Result<Query> q = Query::Parse(text, Options());
    if (!q.ok()) {
      ADD_FAILURE() << "generated query rejected: \"" << Printable(text)
                    << "\": " << q.status().ToString();
      ++failures;
      continue;
    }
    Result<Query> again = Query::Parse(q->ToString(), Options());
    ASSERT_TRUE(again.ok()) << q->ToString() << ": " << again.status().ToString();
    for (int k = 0; k < kRecordsPerQuery; ++k) {
      FileRecord r = RandomRecord(rng);
      if (rng.OneIn(2)) PullToBoundaries(rng, oracle, &r);
      const bool want = OracleEval(oracle, r);
      const bool got = q->Matches(r);
      ++evaluated;
      matched += want ? 1 : 0;
      if (got != want || again->Matches(r) != want) {
        ADD_FAILURE() << "query \"" << Printable(text) << "\" (canonical " << q->ToString()
                      << "): library says " << got << ", re-parsed canonical says "
                      << again->Matches(r) << ", oracle says " << want << " on " << Describe(r);
        ++failures;
        break;
      }
    }
  }
  EXPECT_EQ(failures, 0);
  // Both outcomes must be common, or the comparison would be weak.
  EXPECT_GT(matched, evaluated / 10);
  EXPECT_LT(matched, evaluated * 9 / 10);
}

}  // namespace
}  // namespace propeller
