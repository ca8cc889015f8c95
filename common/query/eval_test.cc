// Evaluator tests: hand-made records, hand-computed expectations. Covers hard links (any path
// matches), missing attributes, int vs double comparisons beyond 2^53, boundary values where
// the record equals the predicate's value, and hand-built predicates with odd value types.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/query/query.h"
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

// A regular file with two hard links, exactly 1 GiB, modified exactly one day before kNow.
FileRecord LinkedFile() {
  FileRecord r;
  r.id = {1, 42};
  r.paths = {"/data/run42/Report.PDF", "/home/ann/report-link.pdf"};
  r.type = FileType::kRegular;
  r.size = uint64_t{1} << 30;
  r.mtime = kNow - kDay;
  r.ctime = kNow - 2 * kDay;
  r.atime = kNow;
  r.uid = 1000;
  r.gid = 50;
  r.mode = 0100644;
  r.nlink = 2;
  r.attrs["project"] = std::string("alpha");
  r.attrs["n"] = int64_t{5};
  r.attrs["big"] = int64_t{9007199254740993};  // 2^53 + 1: not representable as a double
  r.attrs["imax"] = std::numeric_limits<int64_t>::max();
  r.attrs["imin"] = std::numeric_limits<int64_t>::min();
  r.attrs["ratio"] = 0.5;
  r.attrs["nanv"] = std::nan("");
  r.attrs["minus"] = int64_t{-3};
  r.attrs["huge"] = 1e300;
  r.attrs["two63"] = 9223372036854775808.0;
  r.attrs["neg63"] = -9223372036854775808.0;
  r.attrs["empty"] = std::string();
  return r;
}

FileRecord RootDir() {
  FileRecord r;
  r.paths = {"/"};
  r.type = FileType::kDirectory;
  r.mode = 040755;
  r.nlink = 7;
  return r;
}

FileRecord NoPaths() {
  FileRecord r;
  r.type = FileType::kOther;
  r.size = std::numeric_limits<uint64_t>::max();
  r.mtime = std::numeric_limits<int64_t>::min();
  return r;
}

FileRecord Hidden() {
  FileRecord r;
  r.paths = {"/home/ann/.bashrc", "/home/ann/a*"};
  r.type = FileType::kSymlink;
  return r;
}

bool Eval(std::string_view text, const FileRecord& record) {
  Result<Query> q = Query::Parse(text, Options());
  EXPECT_TRUE(q.ok()) << text << ": " << q.status().ToString();
  return q.ok() && q->Matches(record);
}

struct Case {
  const char* query;
  bool expected;
};

void ExpectAll(const FileRecord& record, std::initializer_list<Case> cases) {
  for (const Case& c : cases) EXPECT_EQ(Eval(c.query, record), c.expected) << c.query;
}

TEST(QueryEval, SizeBoundaries) {
  ExpectAll(LinkedFile(), {
      {"size=1g", true}, {"size!=1g", false}, {"size<1g", false}, {"size<=1g", true},
      {"size>1g", false}, {"size>=1g", true}, {"size>1073741823", true},
      {"size<1073741825", true}, {"size>1.5g", false}, {"size<1.0000001g", true},
  });
  // A size above INT64_MAX (only possible in a record) still compares correctly.
  ExpectAll(NoPaths(), {
      {"size>9223372036854775807", true}, {"size<0", false}, {"size>=0", true},
      {"size=9223372036854775807", false},
  });
}

TEST(QueryEval, AgesAtTheBoundary) {
  // mtime is exactly 1 day before now: not "less than a day ago", but "at most a day ago".
  ExpectAll(LinkedFile(), {
      {"mtime<1d", false}, {"mtime<=1d", true}, {"mtime>1d", false}, {"mtime>=1d", true},
      {"mtime<25h", true}, {"mtime<23h", false}, {"mtime>23h", true}, {"mtime>=24.5h", false},
      {"mtime<1440min", false}, {"mtime<86401s", true},
      {"ctime<1d", false}, {"ctime>1d", true}, {"ctime>=2d", true}, {"ctime>2d", false},
      {"atime<1s", true}, {"atime<=0s", true}, {"atime<0s", false},  // atime == now
      {"atime>0s", false}, {"atime>=0s", true},
  });
}

TEST(QueryEval, DatesAtTheBoundary) {
  // mtime = 2024-05-31T00:00:00.
  ExpectAll(LinkedFile(), {
      {"mtime=2024-05-31", true}, {"mtime!=2024-05-31", false},
      {"mtime>2024-05-31", false}, {"mtime>=2024-05-31", true},
      {"mtime<2024-05-31", false}, {"mtime<=2024-05-31", true},
      {"mtime>2024-05-30T23:59:59.999999999", true}, {"mtime<2024-05-31T00:00:00.000000001", true},
      {"mtime>2024-05-01 & mtime<2024-06-01", true},
  });
  ExpectAll(NoPaths(), {
      {"mtime=1677-09-21T00:12:43.145224192", true}, {"mtime<1970-01-01", true},
  });
}

TEST(QueryEval, IdsModeNlinkType) {
  ExpectAll(LinkedFile(), {
      {"uid=alice", true}, {"uid=1000", true}, {"uid!=alice", false}, {"uid<1000", false},
      {"uid<=1000", true}, {"gid=staff", true}, {"gid>50", false},
      // mode compares the permission bits only (0100644 & 07777), always in octal.
      {"mode=0644", true}, {"mode=644", true}, {"mode=420", false}, {"mode!=0644", false},
      {"mode>0600", true},
      {"mode<0644", false}, {"mode=0755", false},
      {"nlink=2", true}, {"nlink>1", true}, {"nlink>=3", false},
      {"type=f", true}, {"type!=f", false}, {"type=d", false}, {"type!=d", true},
  });
  ExpectAll(RootDir(), {
      {"type=d", true}, {"mode=0755", true}, {"mode<0755", false}, {"nlink=7", true},
  });
  ExpectAll(Hidden(), {{"type=l", true}, {"type=f", false}});
  FileRecord setuid = RootDir();
  setuid.mode = 0104755;  // S_IFREG | setuid | 0755: the setuid bit is inside 07777
  ExpectAll(setuid, {{"mode=04755", true}, {"mode=0755", false}, {"mode>0755", true}});
  ExpectAll(NoPaths(), {{"type=o", true}});
}

TEST(QueryEval, PermAsFindPerm) {
  // 0100644: rw-r--r--. find -perm MODE / -MODE / /MODE.
  ExpectAll(LinkedFile(), {
      {"perm=644", true},   {"perm=0644", true},  {"perm=640", false},
      {"perm=-644", true},  {"perm=-600", true},  {"perm=-004", true},   {"perm=-664", false},
      {"perm=/022", false}, {"perm=/002", false}, {"perm=/060", true},   {"perm=/000", true},
      {"perm=-000", true},  {"perm!=-600", false}, {"perm!=/022", true},
  });
  FileRecord setuid = RootDir();
  setuid.mode = 0104755;
  ExpectAll(setuid, {{"perm=-4000", true}, {"perm=/6000", true}, {"perm=-6000", false}});
}

TEST(QueryEval, CaseInsensitiveAndRegex) {
  // Paths: /data/run42/Report.PDF and /home/ann/report-link.pdf.
  ExpectAll(LinkedFile(), {
      {"iname=report.pdf", true},    {"name=report.pdf", false},  {"iname=REPORT.PDF", true},
      {"iname~rePORT*", true},       {"iname~*LINK*", true},      {"iname!=report.pdf", false},
      {"ipath~/DATA/*", true},       {"path~/DATA/*", false},
      {"ipath=/DATA/RUN42/report.pdf", true},
      {"name=~\"^Report\\.\"", true}, {"name=~^Report\\.PDF$", true},
      {"name=~^report", true} /* the link */, {"name=~^report\\.", false},
      {"iname=~^REPORT-", true},
      {"path=~\"run[0-9]+/\"", true}, {"path=~\"run[a-z]+/\"", false},
      {"ext=~^p", true},             {"ext=~^P", true},           // ext is lowercased: PDF, pdf
      {"project=~^al", true},        {"project=~^AL", false},     {"n=~5", false},
  });
}

TEST(QueryEval, DateEqualityIsTheDay) {
  // LinkedFile: mtime 2024-05-31T00:00:00 exactly, ctime 2024-05-30T00:00:00, atime kNow.
  ExpectAll(LinkedFile(), {
      {"mtime=2024-05-31", true},        {"mtime=2024-05-30", false},
      {"mtime!=2024-05-31", false},      {"mtime!=2024-06-01", true},
      {"ctime=2024-05-30", true},        {"ctime=2024-05-30T00:00", true},
      {"ctime=2024-05-30T00:01", false}, {"atime=2024-06-01T00:00:00", true},
  });
  FileRecord late = LinkedFile();
  late.mtime = kNow - 1;  // 2024-05-31T23:59:59.999999999: still that day
  ExpectAll(late, {{"mtime=2024-05-31", true}, {"mtime=2024-06-01", false},
                   {"mtime=2024-05-31T23:59", true}, {"mtime=2024-05-31T23:59:59", true}});
}

TEST(QueryEval, NamesAndPathsOfHardLinks) {
  // Two names: "Report.PDF" and "report-link.pdf"; a predicate holds when either does.
  ExpectAll(LinkedFile(), {
      {"name=Report.PDF", true}, {"name=report-link.pdf", true}, {"name=report.pdf", false},
      {"name!=Report.PDF", false}, {"name!=other", true},
      {"name~report", true},        // substring of the second name only
      {"name~REPORT", false},       // substring is case-sensitive
      {"name~*.PDF", true},         // glob, first name
      {"name~\"*.pdf\"", true},     // glob, second name
      {"name~r*t", false},          // a glob must match the whole name
      {"name~[!R]*", true},         // "report-link.pdf"
      {"name~[!Rr]*", false},
      {"name~?eport*", true},
      // Bytewise order: 'R' (0x52) < 'r' (0x72).
      {"name<Report", false}, {"name>Report", true}, {"name>report-link.pdf", false},
      {"name>=report-link.pdf", true}, {"name<S", true}, {"name<=Report.PDF", true},
      {"path=/data/run42/Report.PDF", true}, {"path=/data/run42", false},
      {"path~run4", true}, {"path~\"/data/*\"", true},  // '*' matches '/' too
      {"path~/home/*/report-*", true}, {"path~/home/*/Report*", false},
      {"path</e", true}, {"path>/h", true}, {"path>/i", false},
  });
}

TEST(QueryEval, GlobDetails) {
  ExpectAll(Hidden(), {
      {"name~*rc", true},           // no FNM_PERIOD: '*' matches a leading dot
      {"name~\"a\\\\*\"", true},    // pattern a\* : a literal '*' after 'a' (second path)
      {"name~\"b\\\\*\"", false},
      {"name~\"[.]bash*\"", true},
      {"name~bash", true},
      {"name~\"\"", true},          // the empty substring is in every name
  });
}

TEST(QueryEval, Extensions) {
  ExpectAll(LinkedFile(), {
      {"ext=pdf", true}, {"ext=PDF", true}, {"ext=.pdf", true}, {"ext!=pdf", false},
      {"ext=txt", false}, {"ext!=txt", true}, {"ext~p", true}, {"ext~\"p?f\"", true},
      {"ext=\"\"", false}, {"ext>pde", true}, {"ext<pdf", false},
  });
  // ".bashrc" has no extension, "a*" neither.
  ExpectAll(Hidden(), {{"ext=\"\"", true}, {"ext=bashrc", false}, {"ext!=\"\"", false}});
  ExpectAll(RootDir(), {{"ext=\"\"", true}, {"name=\"\"", true}, {"path=/", true}});
}

TEST(QueryEval, Keywords) {
  ExpectAll(LinkedFile(), {
      {"keyword=run42", true}, {"keyword=RUN42", true}, {"keyword=ann", true},
      {"keyword=report", true}, {"keyword=link", true}, {"keyword=pdf", true},
      {"keyword=run", false},  // a prefix of a token is not a token
      {"keyword!=run", true}, {"keyword!=data", false}, {"keyword=home", true},
  });
  ExpectAll(Hidden(), {{"keyword=bashrc", true}, {"keyword=a", true}, {"keyword=b", false}});
}

TEST(QueryEval, RecordWithoutPaths) {
  ExpectAll(NoPaths(), {
      {"name=x", false}, {"name!=x", true}, {"name~\"\"", false}, {"ext=\"\"", false},
      {"ext!=\"\"", true}, {"path<zzz", false}, {"path>=\"\"", false}, {"keyword=x", false},
      {"keyword!=x", true},
  });
}

TEST(QueryEval, UserAttributes) {
  ExpectAll(LinkedFile(), {
      // strings
      {"project=alpha", true}, {"project!=alpha", false}, {"project=beta", false},
      {"project>alpha", false}, {"project>=alpha", true}, {"project<b", true},
      {"project~lph", true}, {"project~\"a*\"", true}, {"project~\"b*\"", false},
      {"empty=\"\"", true}, {"empty~\"\"", true},
      // type mismatch: false, and '!=' true
      {"project=5", false}, {"project!=5", true}, {"project<5", false},
      {"n=\"5\"", false}, {"n!=\"5\"", true}, {"n~5", false},
      // int attribute against int and double values
      {"n=5", true}, {"n=5.0", true}, {"n=5e0", true}, {"n<5.5", true}, {"n>4.9999", true},
      {"n>5", false}, {"n>=5", true}, {"n!=5.0", false}, {"n=5.000000000000001", false},
      {"minus=-3", true}, {"minus<-2", true}, {"minus<-3.5", false}, {"minus>-3.5", true},
      // beyond 2^53: big = 2^53 + 1 must differ from the double 2^53
      {"big=9007199254740993", true}, {"big=9007199254740992", false},
      {"big=9007199254740992.0", false}, {"big>9007199254740992.0", true},
      {"big<=9007199254740992.0", false}, {"big<9007199254740994.0", true},
      {"imax<9223372036854775807.0", true},  // the double is 2^63
      {"imax=9223372036854775807.0", false}, {"imax=9223372036854775807", true},
      {"imin=-9223372036854775808.0", true}, {"imin=-9223372036854775808", true},
      {"imin>-9223372036854775809.0", false},  // that double is also -2^63
      // double attribute against int and double values
      {"ratio=0.5", true}, {"ratio=1", false}, {"ratio<1", true}, {"ratio>0", true},
      {"ratio>=0.5", true}, {"ratio>0.5", false},
      {"huge>9223372036854775807", true}, {"huge<9223372036854775807", false},
      {"two63>9223372036854775807", true}, {"two63=9223372036854775807", false},
      {"neg63=-9223372036854775808", true}, {"neg63<-9223372036854775807", true},
      // NaN is unordered: every comparison false, '!=' true
      {"nanv=1", false}, {"nanv!=1", true}, {"nanv<1", false}, {"nanv>=1", false},
      {"nanv=1.5", false}, {"nanv!=1.5", true}, {"nanv>-1e308", false},
      // missing attribute: only '!=' holds
      {"nope=1", false}, {"nope!=1", true}, {"nope<1", false}, {"nope~x", false},
      {"nope!=x", true}, {"nope>=\"\"", false},
  });
}

TEST(QueryEval, BooleanStructure) {
  const FileRecord r = LinkedFile();
  ExpectAll(r, {
      {"size=1g & type=f", true}, {"size=1g & type=d", false}, {"size=1 | type=f", true},
      {"size=1 | type=d", false}, {"!size=1", true}, {"!!size=1", false},
      {"size=1 | type=d | nlink=2", true}, {"(size=1 | type=f) & nlink=3", false},
      {"size=1 | type=f & nlink=3", false}, {"size=1g | type=d & nlink=3", true},
      {"!(size=1 | type=d)", true}, {"!size=1 , !type=d", true},
      {"nope=1 | !nope=1", true}, {"nope!=1 & !nope=1", true},
  });
}

// 'a != v' is exactly '!(a = v)' for every attribute, on every record.
TEST(QueryEval, NotEqualIsNegatedEqual) {
  const char* predicates[] = {
      "size=1g", "mtime=2024-05-31", "uid=1000", "gid=50", "mode=0644", "nlink=2", "type=f",
      "name=Report.PDF", "ext=pdf", "ext=\"\"", "path=/", "keyword=ann", "project=alpha",
      "n=5", "n=\"5\"", "nanv=1", "nope=1", "ratio=0.5", "big=9007199254740992.0",
  };
  const FileRecord records[] = {LinkedFile(), RootDir(), NoPaths(), Hidden()};
  for (const char* eq : predicates) {
    std::string ne(eq);
    ne.insert(ne.find('='), "!");
    for (const FileRecord& r : records) {
      EXPECT_EQ(Eval(ne, r), !Eval(eq, r)) << ne;
      EXPECT_EQ(Eval(std::string("!") + eq, r), !Eval(eq, r)) << eq;
    }
  }
}

// PredicateMatches on a predicate built by hand (as the planner does), not by Parse.
bool HandBuilt(Attr attr, CmpOp op, const AttrValue& value, const std::string& user_attr = "") {
  Predicate p;
  p.attr = attr;
  p.user_attr = user_attr;
  p.op = op;
  p.value = value;
  return PredicateMatches(p, LinkedFile());
}

TEST(QueryEval, HandBuiltPredicatesWithOddValueTypes) {
  // A double against an integer field compares exactly (size is 1073741824).
  EXPECT_TRUE(HandBuilt(Attr::kSize, CmpOp::kGt, AttrValue(1073741823.5)));
  EXPECT_FALSE(HandBuilt(Attr::kSize, CmpOp::kGt, AttrValue(1073741824.5)));
  // The wrong value type: false, and '!=' true.
  EXPECT_FALSE(HandBuilt(Attr::kSize, CmpOp::kGt, AttrValue(std::string("1g"))));
  EXPECT_TRUE(HandBuilt(Attr::kSize, CmpOp::kNe, AttrValue(std::string("1g"))));
  EXPECT_FALSE(HandBuilt(Attr::kType, CmpOp::kEq, AttrValue(int64_t{'f'})));
  EXPECT_TRUE(HandBuilt(Attr::kType, CmpOp::kEq, AttrValue(std::string("f"))));
  EXPECT_FALSE(HandBuilt(Attr::kType, CmpOp::kLt, AttrValue(std::string("f"))));
  EXPECT_FALSE(HandBuilt(Attr::kName, CmpOp::kEq, AttrValue(int64_t{1})));
  EXPECT_TRUE(HandBuilt(Attr::kName, CmpOp::kNe, AttrValue(int64_t{1})));
  EXPECT_FALSE(HandBuilt(Attr::kKeyword, CmpOp::kMatch, AttrValue(std::string("ann"))));
  EXPECT_FALSE(HandBuilt(Attr::kUser, CmpOp::kMatch, AttrValue(int64_t{5}), "n"));
  EXPECT_TRUE(HandBuilt(Attr::kUser, CmpOp::kEq, AttrValue(int64_t{5}), "n"));
  // A corrupt enum: false ('!=' true), never a crash.
  EXPECT_FALSE(HandBuilt(static_cast<Attr>(200), CmpOp::kEq, AttrValue(int64_t{5})));
  EXPECT_TRUE(HandBuilt(static_cast<Attr>(200), CmpOp::kNe, AttrValue(int64_t{5})));
}

TEST(QueryEval, MovedFromQueryMatchesNothing) {
  Result<Query> q = Query::Parse("size>=0", Options());
  ASSERT_TRUE(q.ok());
  EXPECT_TRUE(q->Matches(LinkedFile()));
  Query moved = std::move(q.value());
  EXPECT_TRUE(moved.Matches(LinkedFile()));
  EXPECT_FALSE(q->Matches(LinkedFile()));  // NOLINT: moved-from on purpose
  EXPECT_EQ(q->ToString(), "");
}

}  // namespace
}  // namespace propeller

namespace propeller {
namespace {

// Times of every year (docs/search.md "Times"): hand-computed expectations for files dated
// before 1970, before 1677 and after 2262 (beyond int64 nanoseconds), and dates from 0001 to
// 9999 in queries, which render and parse back to the same instant.
TEST(EvalTest, TimesOfEveryYearCompareRight) {
  FileRecord y2400, y1500, y1950;
  y2400.paths = {"/a"};
  y2400.mtime = FileTimeOf(13569465600, 0);  // 2400-01-01
  y1500.paths = {"/b"};
  y1500.mtime = FileTimeOf(-14831769600, 0);  // 1500-01-01
  y1950.paths = {"/c"};
  y1950.mtime = FileTimeOf(-631152000, 0);  // 1950-01-01
  auto matches = [](const std::string& q, const FileRecord& r) {
    auto parsed = Query::Parse(q, Options());
    EXPECT_TRUE(parsed.ok()) << q << ": " << parsed.status().ToString();
    return parsed.ok() && parsed->Matches(r);
  };
  // The case: a file dated 2400 is not older than 1900.
  EXPECT_FALSE(matches("mtime<1900-01-01", y2400));
  EXPECT_TRUE(matches("mtime>2300-01-01", y2400));
  EXPECT_TRUE(matches("mtime=2400-01-01", y2400));
  EXPECT_TRUE(matches("mtime<1d", y2400));  // "less than a day old": in the future, too
  EXPECT_TRUE(matches("mtime<1900-01-01", y1500));
  EXPECT_TRUE(matches("mtime>1499-12-31T23:59:59.999999999", y1500));
  EXPECT_FALSE(matches("mtime>1500-01-01", y1500));
  EXPECT_TRUE(matches("mtime<1970-01-01 & mtime>1949-12-31", y1950));
  EXPECT_TRUE(matches("mtime>1y", y1950));  // older than a year
  EXPECT_FALSE(matches("mtime>1y", y2400));
  for (const char* text : {"0001-01-01T00:00:00", "9999-12-31T23:59:59.999999999",
                           "1500-06-15T12:30:00.5", "2400-02-29T00:00:00"}) {
    auto q = Query::Parse(std::string("mtime>") + text, Options());
    ASSERT_TRUE(q.ok()) << text << ": " << q.status().ToString();
    EXPECT_EQ(q->ToString(), std::string("mtime > ") + text);
    auto again = Query::Parse(q->ToString(), Options());
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->ToString(), q->ToString());
  }
  EXPECT_FALSE(Query::Parse("mtime<0000-12-31", Options()).ok());
  EXPECT_FALSE(Query::Parse("mtime<2023-02-29", Options()).ok());
}

}  // namespace
}  // namespace propeller
