// Parser tests: every operator, unit, date form, age form, precedence, quoting, limits, the
// canonical rendering, and malformed inputs with their exact messages and positions.
#include <chrono>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/query/query.h"
#include "common/query/resolve.h"

namespace propeller {
namespace {

constexpr int64_t kSec = 1'000'000'000;
constexpr int64_t kDay = 86'400 * kSec;
// 2024-06-01T00:00:00Z, the parse-time clock of these tests.
constexpr int64_t kNow = 1'717'200'000 * kSec;

ParseOptions Options() {
  ParseOptions options;
  options.now_ns = kNow;
  options.resolver.user = [](const std::string& name) -> std::optional<uint32_t> {
    if (name == "alice") return 1000;
    if (name == "dom user") return 1001;
    return std::nullopt;
  };
  options.resolver.group = [](const std::string& name) -> std::optional<uint32_t> {
    if (name == "staff") return 50;
    return std::nullopt;
  };
  return options;
}

Result<Query> Parse(std::string_view text) { return Query::Parse(text, Options()); }

// The error message of a query that must fail, or "OK <canonical>" when it parses.
std::string ErrorOf(std::string_view text) {
  Result<Query> q = Parse(text);
  if (q.ok()) return "OK " + q->ToString();
  EXPECT_EQ(q.status().code(), StatusCode::kInvalidArgument) << text;
  return q.status().message();
}

// The single predicate of a one-predicate query (fails the test otherwise).
Predicate PredOf(std::string_view text) {
  Result<Query> q = Parse(text);
  EXPECT_TRUE(q.ok()) << text << ": " << q.status().ToString();
  if (!q.ok()) return Predicate();
  EXPECT_EQ(q->root().kind, QueryNode::Kind::kPred) << text;
  return q->root().pred;
}

int64_t IntOf(std::string_view text) {
  const Predicate p = PredOf(text);
  const auto* v = std::get_if<int64_t>(&p.value);
  EXPECT_NE(v, nullptr) << text;
  return v ? *v : -1;
}

std::string StrOf(std::string_view text) {
  const Predicate p = PredOf(text);
  const auto* v = std::get_if<std::string>(&p.value);
  EXPECT_NE(v, nullptr) << text;
  return v ? *v : "<not a string>";
}

std::string Canon(std::string_view text) {
  Result<Query> q = Parse(text);
  EXPECT_TRUE(q.ok()) << text << ": " << q.status().ToString();
  return q.ok() ? q->ToString() : "";
}

TEST(QueryParser, EveryOperator) {
  const std::pair<const char*, CmpOp> cases[] = {
      {"name=a", CmpOp::kEq}, {"name!=a", CmpOp::kNe}, {"name<a", CmpOp::kLt},
      {"name<=a", CmpOp::kLe}, {"name>a", CmpOp::kGt}, {"name>=a", CmpOp::kGe},
      {"name~a", CmpOp::kMatch},
  };
  for (const auto& [text, op] : cases) {
    const Predicate p = PredOf(text);
    EXPECT_EQ(p.attr, Attr::kName) << text;
    EXPECT_EQ(p.op, op) << text;
    EXPECT_EQ(std::get<std::string>(p.value), "a") << text;
    EXPECT_EQ(p.pos, 1u) << text;
  }
  EXPECT_EQ(PredOf("size <= 5").op, CmpOp::kLe);
  EXPECT_EQ(PredOf("size>=5").op, CmpOp::kGe);
}

TEST(QueryParser, EveryBuiltinAttribute) {
  const std::pair<const char*, Attr> cases[] = {
      {"size=1", Attr::kSize},       {"mtime<1d", Attr::kMtime}, {"ctime<1d", Attr::kCtime},
      {"atime<1d", Attr::kAtime},    {"uid=1", Attr::kUid},      {"gid=1", Attr::kGid},
      {"mode=0644", Attr::kMode},    {"nlink=2", Attr::kNlink},  {"type=f", Attr::kType},
      {"name=x", Attr::kName},       {"ext=x", Attr::kExt},      {"path=/x", Attr::kPath},
      {"keyword=x", Attr::kKeyword}, {"sizes=1", Attr::kUser},
  };
  for (const auto& [text, attr] : cases) EXPECT_EQ(PredOf(text).attr, attr) << text;
  EXPECT_EQ(PredOf("sizes=1").user_attr, "sizes");
  EXPECT_EQ(PredOf("user.project=alpha").user_attr, "user.project");
}

TEST(QueryParser, SizeUnitsArePowersOf1024) {
  const std::pair<const char*, int64_t> cases[] = {
      {"0", 0}, {"1", 1}, {"1b", 1}, {"1B", 1},
      {"1k", 1024}, {"1K", 1024}, {"1kb", 1024}, {"1KB", 1024}, {"1kib", 1024}, {"1KiB", 1024},
      {"1m", 1 << 20}, {"16m", 16777216}, {"1MB", 1 << 20}, {"1MiB", 1 << 20},
      {"1g", int64_t{1} << 30}, {"1GB", int64_t{1} << 30}, {"1gib", int64_t{1} << 30},
      {"1t", int64_t{1} << 40}, {"1TiB", int64_t{1} << 40}, {"2tb", int64_t{2} << 40},
      {"1p", int64_t{1} << 50}, {"1PB", int64_t{1} << 50}, {"3pib", int64_t{3} << 50},
      // Fractions truncate to whole bytes, computed exactly (1.1 * 1024 = 1126.4).
      {"1.5g", 1610612736}, {"1.1k", 1126}, {"0.3k", 307}, {"1.5", 1}, {"0.999", 0},
      {"2.999999999999999999999999k", 3071},  // 3071.99999...: a double would say 3072
      {"0.0009765625k", 1},                   // exactly 1/1024 KiB
      {"007", 7},
      {"8191p", int64_t{8191} << 50},
      {"9223372036854775807", std::numeric_limits<int64_t>::max()},
  };
  for (const auto& [value, bytes] : cases) {
    const std::string text = std::string("size>") + value;
    EXPECT_EQ(IntOf(text), bytes) << text;
  }
  EXPECT_EQ(ErrorOf("size>8192p"), "error at 6: number out of range");  // 2^63
  EXPECT_EQ(ErrorOf("size>9223372036854775808"), "error at 6: number out of range");
  EXPECT_EQ(ErrorOf("size>99999999999999999999999"), "error at 6: number out of range");
  EXPECT_EQ(ErrorOf("size>1xyz"), "error at 6: unknown unit 'xyz' for size");
  EXPECT_EQ(ErrorOf("size>1e3"), "error at 6: unknown unit 'e3' for size");
  EXPECT_EQ(ErrorOf("size>-1"),
            "error at 6: expected a size such as 10, 1.5g or 16MiB, got '-1'");
  EXPECT_EQ(ErrorOf("size>\"12\""), "OK size > 12");  // quoted numbers read the same
}

TEST(QueryParser, PublicParseSize) {
  EXPECT_EQ(*ParseSize("16m"), 16777216u);
  EXPECT_EQ(*ParseSize("0"), 0u);
  EXPECT_EQ(*ParseSize("15p"), uint64_t{15} << 50);
  EXPECT_EQ(*ParseSize("16383p"), uint64_t{16383} << 50);  // up to 2^64 - 1 here
  EXPECT_EQ(*ParseSize("18446744073709551615"), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(ParseSize("16384p").status().message(), "number out of range");
  EXPECT_EQ(ParseSize("18446744073709551616").status().message(), "number out of range");
  EXPECT_EQ(ParseSize("").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseSize("m").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseSize("1 m").status().message(), "unknown unit ' m' for size");
  EXPECT_EQ(ParseSize("1.k").status().message(), "unknown unit '.k' for size");
}

TEST(QueryParser, AgesCountBackFromNowAndFlipTheOperator) {
  const std::pair<const char*, int64_t> units[] = {
      {"30s", 30 * kSec}, {"30sec", 30 * kSec}, {"1secs", kSec}, {"1second", kSec},
      {"2seconds", 2 * kSec}, {"10min", 600 * kSec}, {"10mins", 600 * kSec},
      {"1minute", 60 * kSec}, {"2minutes", 120 * kSec}, {"2h", 7200 * kSec},
      {"1hr", 3600 * kSec}, {"2hrs", 7200 * kSec}, {"1hour", 3600 * kSec},
      {"3hours", 3 * 3600 * kSec}, {"1d", kDay}, {"1D", kDay}, {"1day", kDay},
      {"2days", 2 * kDay}, {"1w", 7 * kDay}, {"1week", 7 * kDay}, {"2weeks", 14 * kDay},
      {"1y", 365 * kDay}, {"1yr", 365 * kDay}, {"1year", 365 * kDay}, {"2years", 730 * kDay},
      {"1.5h", 5400 * kSec}, {"0.5s", kSec / 2}, {"0.000000001s", 1}, {"0.0000000019s", 1},
      {"1MIN", 60 * kSec}, {"0d", 0},
  };
  for (const auto& [age, ns] : units) {
    const std::string text = std::string("mtime<") + age;
    const Predicate p = PredOf(text);
    EXPECT_EQ(p.op, CmpOp::kGt) << text;
    EXPECT_EQ(std::get<int64_t>(p.value), kNow - ns) << text;
  }
  // The four ordered operators flip; the instant is now - age in every case.
  const std::pair<const char*, CmpOp> flips[] = {
      {"mtime<1d", CmpOp::kGt}, {"mtime<=1d", CmpOp::kGe},
      {"mtime>1d", CmpOp::kLt}, {"mtime>=1d", CmpOp::kLe},
  };
  for (const auto& [text, op] : flips) {
    const Predicate p = PredOf(text);
    EXPECT_EQ(p.op, op) << text;
    EXPECT_EQ(std::get<int64_t>(p.value), kNow - kDay) << text;
  }
  EXPECT_EQ(PredOf("ctime > 1w").op, CmpOp::kLt);
  EXPECT_EQ(PredOf("atime>=1y").op, CmpOp::kLe);
  EXPECT_EQ(ErrorOf("mtime=1d"), "error at 6: an age needs < <= > or >=");
  EXPECT_EQ(ErrorOf("mtime != 1d"), "error at 7: an age needs < <= > or >=");
  EXPECT_EQ(ErrorOf("mtime<5"), "error at 7: age needs a unit, e.g. 1d");
  EXPECT_EQ(ErrorOf("mtime<1m"),
            "error at 7: ambiguous unit 'm' for a time: use 'min' for minutes");
  EXPECT_EQ(ErrorOf("mtime<1M"),
            "error at 7: ambiguous unit 'M' for a time: use 'min' for minutes");
  // An age is at most 292 years (int64 nanoseconds); the instant it gives is a FileTime, so
  // counting back from the earliest clock still works.
  EXPECT_EQ(ErrorOf("mtime<293y"), "error at 7: number out of range");
  EXPECT_EQ(ErrorOf("mtime<292y"), "OK mtime > 1732-08-11T00:00:00");
  ParseOptions early = Options();
  early.now_ns = std::numeric_limits<int64_t>::min() + 1;
  Result<Query> back = Query::Parse("mtime<1s", early);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->root().pred.time,
            FileTime{std::numeric_limits<int64_t>::min()} + 1 - kSec);
}

TEST(QueryParser, RealClockWhenNowIsZero) {
  ParseOptions options = Options();
  options.now_ns = 0;
  const auto before = std::chrono::system_clock::now();
  Result<Query> q = Query::Parse("mtime<1d", options);
  const auto after = std::chrono::system_clock::now();
  ASSERT_TRUE(q.ok());
  const auto ns = [](auto tp) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(tp.time_since_epoch()).count();
  };
  EXPECT_GE(q->now_ns(), ns(before));
  EXPECT_LE(q->now_ns(), ns(after));
  EXPECT_EQ(std::get<int64_t>(q->root().pred.value), q->now_ns() - kDay);
  EXPECT_EQ(Parse("size>1")->now_ns(), kNow);
}

TEST(QueryParser, DatesAreUtcInstantsAndKeepTheOperator) {
  const std::pair<const char*, int64_t> cases[] = {
      {"2024-05-01", 1714521600 * kSec},
      {"2024-05-01T12:00", 1714564800 * kSec},
      {"2024-05-01t12:00", 1714564800 * kSec},
      {"2024-05-01T12:00:30", 1714564830 * kSec},
      {"2024-05-01T12:00:30Z", 1714564830 * kSec},
      {"2024-05-01T12:00:30.5", 1714564830 * kSec + kSec / 2},
      {"2024-05-01T12:00:30.000000001", 1714564830 * kSec + 1},
      {"2024-02-29", 1709164800 * kSec},  // leap day
      {"2000-02-29", 951782400 * kSec},   // divisible by 400: leap
      {"1970-01-01", 0},
      {"1969-12-31T23:59:59", -kSec},
      {"1677-09-21T00:12:43.145224192", std::numeric_limits<int64_t>::min()},
      {"2262-04-11T23:47:16.854775807", std::numeric_limits<int64_t>::max()},
  };
  for (const auto& [date, ns] : cases) {
    for (const char* op : {">", "<", "<=", ">="}) {  // = and != in DateEqualityIsTheUnitWritten
      const std::string text = std::string("mtime") + op + date;
      const Predicate p = PredOf(text);
      EXPECT_EQ(std::string(CmpOpName(p.op)), op) << text;
      EXPECT_EQ(p.time, ns) << text;
    }
  }
  const char* invalid[] = {"2024-13-01", "2024-00-10", "2024-04-31", "2023-02-29",
                           "1900-02-29", "2024-01-32", "2024-01-00", "2024-05-01T24:00",
                           "2024-05-01T12:60", "2024-05-01T12:00:60"};
  for (const char* date : invalid) {
    EXPECT_EQ(ErrorOf(std::string("mtime>") + date),
              std::string("error at 7: invalid date '") + date + "'");
  }
  const char* bad_format[] = {"2024-5-1", "2024-05-01T12", "2024-05-01T12:00:3",
                              "2024-05-01T12:00:30.", "2024-05-01T12:00:30.1234567890",
                              "2024-05-01X", "2024-05-01T12:00Zz", "2024-05"};
  for (const char* date : bad_format) {
    EXPECT_EQ(ErrorOf(std::string("mtime>") + date),
              std::string("error at 7: invalid date '") + date +
                  "': use YYYY-MM-DD, YYYY-MM-DDTHH:MM or YYYY-MM-DDTHH:MM:SS (UTC)");
  }
  // Years 0001 to 9999, also beyond int64 nanoseconds (1677..2262): exact FileTimes.
  EXPECT_EQ(PredOf("mtime>1500-01-01").time, FileTime{-14831769600} * kSec);
  EXPECT_EQ(PredOf("mtime>2262-04-11T23:47:16.854775808").time,
            FileTime{std::numeric_limits<int64_t>::max()} + 1);
  EXPECT_EQ(PredOf("mtime>0001-01-01").time, FileTime{-62135596800} * kSec);
  EXPECT_EQ(PredOf("mtime<9999-12-31T23:59:59.999999999").time,
            FileTime{253402300799} * kSec + 999999999);
  EXPECT_EQ(ErrorOf("mtime>0000-12-31"),
            "error at 7: date '0000-12-31' is out of range (years 0001 to 9999)");
  EXPECT_EQ(ErrorOf("mtime~2024-05-01"), "error at 6: '~' does not apply to mtime");
}

TEST(QueryParser, UserAndGroupIds) {
  EXPECT_EQ(IntOf("uid=1000"), 1000);
  EXPECT_EQ(IntOf("uid=alice"), 1000);
  EXPECT_EQ(IntOf("uid=\"dom user\""), 1001);
  EXPECT_EQ(IntOf("gid=staff"), 50);
  EXPECT_EQ(IntOf("gid<=4294967295"), 4294967295);
  EXPECT_EQ(IntOf("uid=0"), 0);
  EXPECT_EQ(ErrorOf("uid=bob"), "error at 5: unknown user 'bob'");
  EXPECT_EQ(ErrorOf("gid=alice"), "error at 5: unknown group 'alice'");
  EXPECT_EQ(ErrorOf("uid=4294967296"), "error at 5: number out of range");
  EXPECT_EQ(ErrorOf("uid=-1"), "error at 5: number out of range");
  EXPECT_EQ(ErrorOf("gid~staff"), "error at 4: '~' does not apply to gid");
  ParseOptions no_resolver = Options();
  no_resolver.resolver.user = nullptr;
  EXPECT_EQ(Query::Parse("uid=alice", no_resolver).status().message(),
            "error at 5: unknown user 'alice'");
  EXPECT_TRUE(Query::Parse("uid=7", no_resolver).ok());
}

TEST(QueryParser, SystemResolver) {
  const NameResolver system = NameResolver::System();
  // Every Debian system (and container) has root:root as 0:0.
  EXPECT_EQ(system.user("root"), std::optional<uint32_t>(0));
  EXPECT_EQ(system.group("root"), std::optional<uint32_t>(0));
  EXPECT_EQ(system.user("no-such-user-propeller-test"), std::nullopt);
  EXPECT_EQ(system.group("no-such-group-propeller-test"), std::nullopt);
  EXPECT_EQ(system.user(""), std::nullopt);
  EXPECT_EQ(system.user(std::string("root\0x", 6)), std::nullopt);
  ParseOptions defaults;
  defaults.now_ns = kNow;
  Result<Query> q = Query::Parse("uid=root & gid=root", defaults);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ(q->ToString(), "uid = 0 & gid = 0");
}

TEST(QueryParser, Mode) {
  EXPECT_EQ(IntOf("mode=0644"), 0644);
  EXPECT_EQ(IntOf("mode=0755"), 0755);
  EXPECT_EQ(IntOf("mode=07777"), 07777);
  EXPECT_EQ(IntOf("mode=0"), 0);
  EXPECT_EQ(IntOf("mode=00"), 0);
  // Octal with or without the leading 0, as chmod and find -perm take it (was decimal: 420).
  EXPECT_EQ(IntOf("mode=644"), 0644);
  EXPECT_EQ(IntOf("mode=7777"), 07777);
  EXPECT_EQ(ErrorOf("mode=0789"),
            "error at 6: expected an octal mode such as 644 or 0755, got '0789'");
  EXPECT_EQ(ErrorOf("mode=420"), "OK mode = 0420");
  EXPECT_EQ(ErrorOf("mode=010000"),
            "error at 6: mode '010000' has bits beyond the permission bits (at most 07777)");
  EXPECT_EQ(ErrorOf("mode=4095"),
            "error at 6: expected an octal mode such as 644 or 0755, got '4095'");
  EXPECT_EQ(ErrorOf("mode=rwx"),
            "error at 6: expected an octal mode such as 644 or 0755, got 'rwx'");
  EXPECT_EQ(ErrorOf("mode~0644"), "error at 5: '~' does not apply to mode");
  EXPECT_EQ(ErrorOf("mode=~0644"), "error at 5: '=~' does not apply to mode");
}

TEST(QueryParser, PermTakesFindForms) {
  EXPECT_EQ(ErrorOf("perm=644"), "OK mode = 0644");
  EXPECT_EQ(ErrorOf("perm=-0220"), "OK perm = -0220");
  EXPECT_EQ(ErrorOf("perm=/111"), "OK perm = /0111");
  EXPECT_EQ(ErrorOf("perm!=-0220"), "OK !perm = -0220");
  EXPECT_EQ(ErrorOf("perm!=644"), "OK mode != 0644");
  EXPECT_EQ(ErrorOf("perm>644"), "error at 5: only = and != apply to perm");
  EXPECT_EQ(ErrorOf("perm=u+w"),
            "error at 6: expected perm=MODE, perm=-MODE (all of its bits) or perm=/MODE (any of "
            "them) with an octal MODE, got 'u+w'");
  EXPECT_EQ(ErrorOf("perm=-"),
            "error at 6: expected perm=MODE, perm=-MODE (all of its bits) or perm=/MODE (any of "
            "them) with an octal MODE, got '-'");
}

TEST(QueryParser, AliasesOfFind) {
  // find's -user, -group and -iname/-ipath spellings are built in, so they never fall through
  // to user attributes that nobody set.
  ParseOptions po;
  po.resolver.user = [](const std::string& n) -> std::optional<uint32_t> {
    return n == "root" ? std::optional<uint32_t>(0) : std::nullopt;
  };
  po.resolver.group = po.resolver.user;
  Result<Query> q = Query::Parse("user=root & owner=0 & group=root", po);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ(q->ToString(), "uid = 0 & uid = 0 & gid = 0");
  EXPECT_EQ(ErrorOf("iname=README.Md"), "OK iname = \"readme.md\"");
  EXPECT_EQ(ErrorOf("ipath~/SRC/*"), "OK ipath ~ \"/src/*\"");
  EXPECT_TRUE(IsBuiltinAttrName("perm"));
  EXPECT_TRUE(IsBuiltinAttrName("size"));
  EXPECT_TRUE(IsBuiltinAttrName("user"));
  EXPECT_FALSE(IsBuiltinAttrName("project"));
}

TEST(QueryParser, TheReservedNamesAreExactlyTheParsersBuiltIns) {
  // IsBuiltinAttrName (common/record.h: what attr set and index create refuse) and the
  // parser's table must agree, or a name could be set that no query reaches.
  for (const char* w : {"size", "mtime", "ctime", "atime", "uid", "gid", "mode", "nlink", "type",
                        "name", "ext", "path", "keyword", "user", "owner", "group", "perm",
                        "iname", "ipath", "project", "inode", "users", "perms", "kind", "id"}) {
    Result<query_internal::AttrRef> ref = query_internal::ResolveAttrName(w, 0, ParseOptions());
    ASSERT_TRUE(ref.ok()) << w;
    EXPECT_EQ(IsBuiltinAttrName(w), ref->attr != Attr::kUser) << w;
  }
}

TEST(QueryParser, RegexOperator) {
  // A regex keeps its backslashes, quoted or not; only \" is an escape of the string.
  EXPECT_EQ(ErrorOf("name=~\"^a.*\\.c$\""), "OK name =~ \"^a.*\\.c$\"");
  EXPECT_EQ(ErrorOf("name=~^a.*\\.c$"), "OK name =~ \"^a.*\\.c$\"");
  EXPECT_EQ(ErrorOf("name=~\"say \\\"hi\\\"\""), "OK name =~ \"say \\\"hi\\\"\"");
  EXPECT_EQ(ErrorOf("(name=~^a|size>1)"), "OK name =~ \"^a\" | size > 1");
  EXPECT_EQ(ErrorOf("name=~a.*c"), "OK name =~ \"a.*c\"");
  EXPECT_EQ(ErrorOf("path=~\"(src|lib)/\""), "OK path =~ \"(src|lib)/\"");
  EXPECT_EQ(ErrorOf("iname=~\"^READ\""), "OK iname =~ \"^READ\"");
  EXPECT_EQ(ErrorOf("size=~1"), "error at 5: '=~' does not apply to size");
  EXPECT_EQ(ErrorOf("keyword=~x"), "error at 8: '=~' does not apply to keyword");
  const std::string bad = ErrorOf("name=~\"a(\"");
  EXPECT_EQ(bad.rfind("error at 7: invalid regular expression 'a(': ", 0), 0u) << bad;
}

TEST(QueryParser, UnknownAttributesAreErrorsWhenTheNamesAreKnown) {
  const std::vector<std::string> known = {"project", "sample.id"};
  ParseOptions po;
  po.user_attrs = &known;
  auto error = [&](const char* text) {
    Result<Query> q = Query::Parse(text, po);
    return q.ok() ? "OK " + q->ToString() : q.status().message();
  };
  const std::string tail =
      "; a user attribute exists once `propeller attr set` gave it to a file or `propeller "
      "index create` made it an index";
  EXPECT_EQ(error("sise>1m"), "error at 1: unknown attribute 'sise' (did you mean size?)" + tail);
  EXPECT_EQ(error("mtiem<1d"), "error at 1: unknown attribute 'mtiem' (did you mean mtime?)" +
                                   tail);
  EXPECT_EQ(error("projet=x"),
            "error at 1: unknown attribute 'projet' (did you mean project?)" + tail);
  EXPECT_EQ(error("a=1 & colour=red"), "error at 1: unknown attribute 'a'" + tail);
  EXPECT_EQ(error("project=apollo"), "OK project = \"apollo\"");
  EXPECT_EQ(error("sample.id=7"), "OK sample.id = 7");
  // Without the list (a client that does not know them) any valid name is a user attribute.
  EXPECT_EQ(ErrorOf("sise>1m"), "OK sise > \"1m\"");
}

TEST(QueryParser, DateEqualityIsTheUnitWritten) {
  // = with a date is that day (minute, second, ...): find -newermt / GNU date semantics.
  EXPECT_EQ(ErrorOf("mtime=2024-05-01"),
            "OK mtime >= 2024-05-01T00:00:00 & mtime < 2024-05-02T00:00:00");
  EXPECT_EQ(ErrorOf("mtime!=2024-05-01"),
            "OK mtime < 2024-05-01T00:00:00 | mtime >= 2024-05-02T00:00:00");
  EXPECT_EQ(ErrorOf("ctime=2024-05-01T12:30"),
            "OK ctime >= 2024-05-01T12:30:00 & ctime < 2024-05-01T12:31:00");
  EXPECT_EQ(ErrorOf("atime=2024-05-01T12:30:15"),
            "OK atime >= 2024-05-01T12:30:15 & atime < 2024-05-01T12:30:16");
  EXPECT_EQ(ErrorOf("mtime=2024-05-01T12:30:15.5"),
            "OK mtime >= 2024-05-01T12:30:15.5 & mtime < 2024-05-01T12:30:15.6");
  EXPECT_EQ(ErrorOf("mtime=2024-12-31"),
            "OK mtime >= 2024-12-31T00:00:00 & mtime < 2025-01-01T00:00:00");
}

TEST(QueryParser, NlinkAndType) {
  EXPECT_EQ(IntOf("nlink>1"), 1);
  EXPECT_EQ(ErrorOf("nlink>x"), "error at 7: expected a number for nlink, got 'x'");
  EXPECT_EQ(ErrorOf("nlink>-1"), "error at 7: expected a number for nlink, got '-1'");
  for (const char* t : {"f", "d", "l", "o"}) {
    EXPECT_EQ(StrOf(std::string("type=") + t), t);
    EXPECT_EQ(StrOf(std::string("type!=") + t), t);
  }
  EXPECT_EQ(ErrorOf("type=x"), "error at 6: type must be one of f, d, l, o");
  EXPECT_EQ(ErrorOf("type=F"), "error at 6: type must be one of f, d, l, o");
  EXPECT_EQ(ErrorOf("type=fd"), "error at 6: type must be one of f, d, l, o");
  EXPECT_EQ(ErrorOf("type<f"), "error at 5: only = and != apply to type");
  EXPECT_EQ(ErrorOf("type~f"), "error at 5: only = and != apply to type");
}

TEST(QueryParser, StringsWordsAndQuoting) {
  EXPECT_EQ(StrOf("name=report.pdf"), "report.pdf");
  EXPECT_EQ(StrOf("path~/data/*/x_1-2:3+4@5%6"), "/data/*/x_1-2:3+4@5%6");
  EXPECT_EQ(StrOf("name~[!a]*"), "[!a]*");  // '!' right after '[' stays in the word
  EXPECT_EQ(StrOf("name~[^a]?"), "[^a]?");
  EXPECT_EQ(StrOf("name=caf\xc3\xa9"), "caf\xc3\xa9");  // UTF-8 needs no quotes
  EXPECT_EQ(StrOf("name=\"a b\""), "a b");
  EXPECT_EQ(StrOf(R"(name="say \"hi\" \\ bye")"), R"(say "hi" \ bye)");
  EXPECT_EQ(StrOf("name=\"\""), "");
  EXPECT_EQ(StrOf("name=\"a&b|c,(d)!e=f~g'h\nx\""), "a&b|c,(d)!e=f~g'h\nx");
  EXPECT_EQ(StrOf("ext=.TXT"), "txt");
  EXPECT_EQ(StrOf("ext=TxT"), "txt");
  EXPECT_EQ(StrOf("ext=..gz"), "gz");
  EXPECT_EQ(StrOf("ext=\".\""), "");
  EXPECT_EQ(StrOf("keyword=FireFox"), "firefox");
  EXPECT_EQ(StrOf("keyword=\xc3\xa9t\xc3\xa9"), "\xc3\xa9t\xc3\xa9");
  EXPECT_EQ(PredOf("keyword!=bin").op, CmpOp::kNe);
}

TEST(QueryParser, UserAttributeValues) {
  EXPECT_EQ(StrOf("project=alpha"), "alpha");
  EXPECT_EQ(IntOf("n=5"), 5);
  EXPECT_EQ(IntOf("n=-5"), -5);
  EXPECT_EQ(IntOf("n=-9223372036854775808"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(IntOf("n=007"), 7);
  EXPECT_EQ(std::get<double>(PredOf("n=1.5").value), 1.5);
  EXPECT_EQ(std::get<double>(PredOf("n=-2.5e3").value), -2500.0);
  EXPECT_EQ(std::get<double>(PredOf("n=1e3").value), 1000.0);
  EXPECT_EQ(std::get<double>(PredOf("n=1E+3").value), 1000.0);
  EXPECT_EQ(StrOf("n=\"5\""), "5");       // quoted: always a string
  EXPECT_EQ(StrOf("version=1.2.3"), "1.2.3");
  EXPECT_EQ(StrOf("version~1.2"), "1.2");  // '~' is a string operation
  EXPECT_EQ(StrOf("n=1e"), "1e");
  EXPECT_EQ(StrOf("n=-"), "-");
  EXPECT_EQ(StrOf("n=.5"), ".5");
  EXPECT_EQ(ErrorOf("n=9223372036854775808"), "error at 3: number out of range");
  EXPECT_EQ(ErrorOf("n=1e999"), "error at 3: number out of range");
  EXPECT_EQ(StrOf("a.b_c-d9=x"), "x");
  const std::string longest(64, 'a');
  EXPECT_EQ(PredOf(longest + "=1").user_attr, longest);
}

TEST(QueryParser, PrecedenceAndGrouping) {
  EXPECT_EQ(Canon("a=1 | b=2 & c=3"), "a = 1 | b = 2 & c = 3");
  EXPECT_EQ(Canon("a=1 & b=2 | c=3"), "a = 1 & b = 2 | c = 3");
  EXPECT_EQ(Canon("a=1, b=2 | c=3"), "a = 1 & b = 2 | c = 3");
  EXPECT_EQ(Canon("(a=1 & b=2) | c=3"), "a = 1 & b = 2 | c = 3");  // parentheses not needed
  EXPECT_EQ(Canon("a=1 | (b=2 | c=3)"), "a = 1 | (b = 2 | c = 3)");  // grouping kept
  EXPECT_EQ(Canon("(a=1 | b=2) & c=3"), "(a = 1 | b = 2) & c = 3");
  EXPECT_EQ(Canon("!a=1 & b=2"), "!a = 1 & b = 2");
  EXPECT_EQ(Canon("!(a=1 & b=2)"), "!(a = 1 & b = 2)");
  EXPECT_EQ(Canon("!!a=1"), "!!a = 1");
  EXPECT_EQ(Canon("a=1 & b=2 & c=3 & d=4"), "a = 1 & b = 2 & c = 3 & d = 4");
  EXPECT_EQ(Canon("a=1|b=2|c=3"), "a = 1 | b = 2 | c = 3");
  EXPECT_EQ(Canon("(a=1 & b=2) & c=3"), "(a = 1 & b = 2) & c = 3");
  EXPECT_EQ(Canon("((((a=1))))"), "a = 1");
  EXPECT_EQ(Canon("a=1 | !(b=2 | c=3), d=4"), "a = 1 | !(b = 2 | c = 3) & d = 4");

  Result<Query> q = Parse("a=1 | b=2 & c=3");
  ASSERT_TRUE(q.ok());
  ASSERT_EQ(q->root().kind, QueryNode::Kind::kOr);
  ASSERT_EQ(q->root().children.size(), 2u);
  EXPECT_EQ(q->root().children[0]->kind, QueryNode::Kind::kPred);
  EXPECT_EQ(q->root().children[1]->kind, QueryNode::Kind::kAnd);
  EXPECT_EQ(q->root().children[1]->children[1]->pred.pos, 13u);  // 'c' is the 13th byte
  EXPECT_EQ(q->text(), "a=1 | b=2 & c=3");
}

TEST(QueryParser, WhitespaceBetweenAnyTokens) {
  EXPECT_EQ(Canon(" \t\n size \r\n >= \v 1k \f & ( name ~ x | ! type = d ) "),
            "size >= 1024 & (name ~ \"x\" | !type = d)");
  EXPECT_EQ(Canon("size>=1k&(name~x|!type=d)"),
            "size >= 1024 & (name ~ \"x\" | !type = d)");
}

TEST(QueryParser, CanonicalRendering) {
  EXPECT_EQ(Canon("size>1g & mtime<1d"),
            "size > 1073741824 & mtime > 2024-05-31T00:00:00");
  EXPECT_EQ(Canon("mtime<1.5s"), "mtime > 2024-05-31T23:59:58.5");
  EXPECT_EQ(Canon("mtime>=2024-05-01T12:00:30.000000001"),
            "mtime >= 2024-05-01T12:00:30.000000001");
  EXPECT_EQ(Canon("mtime<1969-12-31T23:59:59.999999999"),
            "mtime < 1969-12-31T23:59:59.999999999");  // -1 ns
  EXPECT_EQ(Canon("mtime<1960-01-01T00:00:00.1"), "mtime < 1960-01-01T00:00:00.1");
  EXPECT_EQ(Canon("mtime<1677-09-21T00:12:43.145224192"),
            "mtime < 1677-09-21T00:12:43.145224192");
  EXPECT_EQ(Canon("mode=0644"), "mode = 0644");
  EXPECT_EQ(Canon("mode=0"), "mode = 00");
  EXPECT_EQ(Canon("ext=.TXT"), "ext = \"txt\"");
  EXPECT_EQ(Canon("n=1.0"), "n = 1.0");
  EXPECT_EQ(Canon("n=-0.0"), "n = -0.0");
  EXPECT_EQ(Canon("n=1e20"), "n = 1e+20");
  EXPECT_EQ(Canon("n=-7"), "n = -7");
  EXPECT_EQ(Canon("n=\"-7\""), "n = \"-7\"");
  EXPECT_EQ(Canon(R"(name="a\"b\\c")"), R"(name = "a\"b\\c")");
  EXPECT_EQ(Canon("uid=alice"), "uid = 1000");
  EXPECT_EQ(Canon("keyword=FOO"), "keyword = \"foo\"");
}

TEST(QueryParser, RoundTripPreservesTree) {
  const char* queries[] = {
      "size>1g & mtime<1d",
      "a=1 | b=2 & c=3 | !(d=4, e~\"x y\")",
      "mtime<=2w | ctime>=1y | atime<3min | mtime>=1.25h",
      "mtime>1677-09-21T00:12:43.145224192 & mtime<2262-04-11T23:47:16.854775807",
      "name~\"*.parquet\" & ext=PARQUET & path>=/data & keyword=run42",
      "n=1.5 | n=-1e-300 | n=5e-324 | n=1.7976931348623157e308 | n=\"1.5\" | s~\"\\\\\"",
      "mode=0 | mode=07777 | nlink>=2 | type!=l | uid<=alice | gid>staff",
      "!!!!(size<=0)",
  };
  for (const char* text : queries) {
    Result<Query> q = Parse(text);
    ASSERT_TRUE(q.ok()) << text << ": " << q.status().ToString();
    const std::string canonical = q->ToString();
    Result<Query> again = Parse(canonical);
    ASSERT_TRUE(again.ok()) << canonical << ": " << again.status().ToString();
    EXPECT_EQ(again->ToString(), canonical) << text;
  }
}

TEST(QueryParser, NestingLimit) {
  const auto nested = [](int n) { return std::string(n, '(') + "a=1" + std::string(n, ')'); };
  EXPECT_EQ(ErrorOf(nested(64)), "OK a = 1");
  EXPECT_EQ(ErrorOf(nested(65)), "error at 65: nesting too deep (at most 64 levels)");
  EXPECT_EQ(ErrorOf(std::string(64, '!') + "a=1").substr(0, 2), "OK");
  EXPECT_EQ(ErrorOf(std::string(65, '!') + "a=1"),
            "error at 65: nesting too deep (at most 64 levels)");
  std::string mixed;
  for (int i = 0; i < 32; ++i) mixed += "!(";
  EXPECT_EQ(ErrorOf(mixed + "a=1" + std::string(32, ')')).substr(0, 2), "OK");
  EXPECT_EQ(ErrorOf(mixed + "!a=1" + std::string(32, ')')),
            "error at 65: nesting too deep (at most 64 levels)");
  // Far deeper input is an error, not a stack overflow.
  EXPECT_EQ(ErrorOf(std::string(60000, '(')), "error at 65: nesting too deep (at most 64 levels)");
  // The canonical text never nests deeper than the input, so it always parses back, even at
  // the limit: 64 '!' (fully parenthesised "(!(!...)))" would nest 128 deep), and alternating
  // '&' / '|' lists where the input needs a parenthesis only on every '|' inside an '&'.
  std::string alternating;
  for (int i = 0; i < 64; ++i) alternating += "a=1 | b=2 & (";
  alternating += "c=3" + std::string(64, ')');
  for (const std::string& deep : {std::string(64, '!') + "a=1", alternating, mixed + "a=1" +
                                      std::string(32, ')')}) {
    Result<Query> q = Parse(deep);
    ASSERT_TRUE(q.ok()) << q.status().ToString();
    Result<Query> again = Parse(q->ToString());
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_EQ(again->ToString(), q->ToString());
  }
  // Sequences (not nesting) are not limited by depth.
  std::string wide = "(a=1)";
  for (int i = 0; i < 500; ++i) wide += "&(a=1)";
  EXPECT_TRUE(Parse(wide).ok());
}

TEST(QueryParser, PredicateLimit) {
  std::string text = "a=1";
  for (int i = 1; i < 1024; ++i) text += "&a=1";
  EXPECT_TRUE(Parse(text).ok());
  text += "&a=1";  // the 1025th starts at byte 1024 * 4 + 1
  EXPECT_EQ(ErrorOf(text), "error at 4097: too many predicates (at most 1024)");
}

// Resolved values can be longer than written ("1d" -> "2024-05-31T00:00:00"); a query whose
// rendering would exceed 64 KiB is refused, so that ToString() always parses back. The error
// is about the whole query, so it points at byte 1.
TEST(QueryParser, RenderedLengthLimit) {
  std::string text = "name=\"" + std::string(50000, 'x') + "\"";
  for (int i = 1; i < 1024; ++i) text += "&mtime<1d";
  ASSERT_LE(text.size(), 65536u);
  // "name = \"x...\"" is 50009 bytes, each " & mtime > 2024-05-31T00:00:00" 30 more.
  EXPECT_EQ(ErrorOf(text),
            "error at 1: query too long once its values are written out (80699 bytes, at most "
            "65536)");
  text.resize(text.size() - 9 * 500);  // 523 ages left: 50009 + 523 * 30 = 65699, still over
  EXPECT_EQ(ErrorOf(text),
            "error at 1: query too long once its values are written out (65699 bytes, at most "
            "65536)");
  text.resize(text.size() - 9 * 6);  // 517 ages left: 50009 + 517 * 30 = 65519 fits
  Result<Query> q = Parse(text);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ(q->ToString().size(), 65519u);
  EXPECT_TRUE(Parse(q->ToString()).ok());
}

TEST(QueryParser, LengthLimit) {
  std::string text = "size>1";
  text.resize(65536, ' ');
  EXPECT_TRUE(Parse(text).ok());
  text.push_back(' ');
  EXPECT_EQ(ErrorOf(text), "error at 65537: query too long (at most 65536 bytes)");
}

// Malformed input: the exact message, and N = the 1-based byte position of the offending
// token, the end of input being length + 1.
//
// Position choice for "size>>1m": one could point at byte 5, the first '>', but that is a
// valid operator; the token that is wrong is the second '>' at byte 6, where a value should
// start. We point at the offending token (6), consistently with every other message.
TEST(QueryParser, MalformedInputsExactMessages) {
  const std::pair<std::string, std::string> cases[] = {
      {"size>>1m", "error at 6: expected a value"},
      {"", "error at 1: empty query"},
      {"   ", "error at 4: empty query"},
      {"size", "error at 5: expected an operator (= != < <= > >= ~ =~)"},
      {"size 5", "error at 6: expected an operator (= != < <= > >= ~ =~)"},
      {"size ! = 1", "error at 6: expected an operator (= != < <= > >= ~ =~)"},
      {"size==1", "error at 6: expected a value"},
      {"size>", "error at 6: expected a value"},
      {"size> &x=1", "error at 7: expected a value"},
      {"name='x'", "error at 6: expected a value (strings take double quotes)"},
      {">5", "error at 1: expected an attribute name"},
      {"size>1 &", "error at 9: expected an attribute name"},
      {"size>1 & | name=x", "error at 10: expected an attribute name"},
      {"a=1 |", "error at 6: expected an attribute name"},
      {"!", "error at 2: expected an attribute name"},
      {"()", "error at 2: expected an attribute name"},
      {"\"size\">1", "error at 1: expected an attribute name"},
      {"\x01", "error at 1: expected an attribute name"},
      {"(size>1", "error at 8: expected ')'"},
      {"(size>1 name=x", "error at 9: expected ')'"},
      {"((a=1)", "error at 7: expected ')'"},
      {"size>1)", "error at 7: unexpected ')'"},
      {"size>1 name=x", "error at 8: unexpected 'name'"},
      {"size>1 $ name=x", "error at 8: unexpected '$'"},
      {"size>1 !", "error at 8: unexpected '!'"},
      {"name=\"a\"b", "error at 9: unexpected 'b'"},
      {"size>1 \x01", "error at 8: unexpected '\\x01'"},
      {"size>1 (a=1)", "error at 8: unexpected '('"},
      {"size>1xyz", "error at 6: unknown unit 'xyz' for size"},
      {"mtime<1m", "error at 7: ambiguous unit 'm' for a time: use 'min' for minutes"},
      {"mtime<1fortnight",
       "error at 7: unknown unit 'fortnight' for a time (use s, min, h, d, w or y)"},
      {"mtime>abc",
       "error at 7: expected an age (e.g. 1d) or a date (e.g. 2024-05-01) for mtime, got 'abc'"},
      {"atime<-1d",
       "error at 7: expected an age (e.g. 1d) or a date (e.g. 2024-05-01) for atime, got '-1d'"},
      {"size~1m", "error at 5: '~' does not apply to size"},
      {"nlink ~ 1", "error at 7: '~' does not apply to nlink"},
      {"uid=bob", "error at 5: unknown user 'bob'"},
      {"gid=nogroup", "error at 5: unknown group 'nogroup'"},
      {"mtime>2024-13-01", "error at 7: invalid date '2024-13-01'"},
      {"mtime<5", "error at 7: age needs a unit, e.g. 1d"},
      {"mtime=1d", "error at 6: an age needs < <= > or >="},
      {"type=x", "error at 6: type must be one of f, d, l, o"},
      {"type>=f", "error at 5: only = and != apply to type"},
      {"keyword~fire", "error at 8: only = and != apply to keyword"},
      {"keyword=firefox-bin",
       "error at 9: keyword 'firefox-bin' can never match: a keyword is one run of letters and "
       "digits"},
      {"size>8192p", "error at 6: number out of range"},
      {"uid=4294967296", "error at 5: number out of range"},
      {"name=\"abc", "error at 6: unterminated string (missing closing '\"')"},
      {"name=\"abc\\", "error at 6: unterminated string (missing closing '\"')"},
      {"name=\"a\\nb\"",
       "error at 8: unknown escape '\\n' in a string (only \\\" and \\\\ are allowed)"},
      {std::string("name=\"a\0b\"", 10), "error at 8: a string may not contain a NUL byte"},
      {"Size>1", "error at 1: attribute names are lowercase: did you mean 'size'?"},
      {"User.Project=x",
       "error at 1: attribute names are lowercase: did you mean 'user.project'?"},
      {"1size>1", "error at 1: expected an attribute name, got '1size'"},
      {"_x=1", "error at 1: expected an attribute name, got '_x'"},
      {"a/b=1", "error at 1: invalid attribute name 'a/b': use only a-z, 0-9, '_', '.' and '-'"},
      {"caf\xc3\xa9=1",
       "error at 1: invalid attribute name 'caf\xc3\xa9': use only a-z, 0-9, '_', '.' and '-'"},
      {std::string(65, 'a') + "=1", "error at 1: attribute name too long (at most 64 bytes)"},
      {"mode=0789", "error at 6: expected an octal mode such as 644 or 0755, got '0789'"},
      {"nlink=x", "error at 7: expected a number for nlink, got 'x'"},
      {"n=1e999", "error at 3: number out of range"},
      {"mtime<400y", "error at 7: number out of range"},
      {"a=1 & (b=2 | c=3 & (d=4 | e~))", "error at 29: expected a value"},
      {"size>1 & mtime<1m & uid=bob", "error at 16: ambiguous unit 'm' for a time: use 'min' for "
                                      "minutes"},  // the first error wins
  };
  for (const auto& [text, message] : cases) {
    EXPECT_EQ(ErrorOf(text), message) << "query: " << text;
  }
}

TEST(QueryParser, LongValuesAreCutInMessages) {
  const std::string value(100, 'x');
  EXPECT_EQ(ErrorOf("uid=" + value),
            "error at 5: unknown user '" + std::string(48, 'x') + "...'");
  EXPECT_EQ(ErrorOf("size>1" + value),
            "error at 6: unknown unit '" + std::string(48, 'x') + "...' for size");
  // Never inside a UTF-8 sequence: 47 ASCII bytes then a 2-byte character straddling byte 48.
  EXPECT_EQ(ErrorOf("uid=" + std::string(47, 'y') + "\xc3\xa9zzz"),
            "error at 5: unknown user '" + std::string(47, 'y') + "...'");
}

TEST(QueryParser, Names) {
  EXPECT_STREQ(AttrName(Attr::kSize), "size");
  EXPECT_STREQ(AttrName(Attr::kKeyword), "keyword");
  EXPECT_STREQ(AttrName(Attr::kNlink), "nlink");
  EXPECT_STREQ(CmpOpName(CmpOp::kNe), "!=");
  EXPECT_STREQ(CmpOpName(CmpOp::kMatch), "~");
  EXPECT_STREQ(CmpOpName(CmpOp::kGe), ">=");
}

}  // namespace
}  // namespace propeller
