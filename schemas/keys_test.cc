// Property tests of the order-preserving key encodings (schemas/keys.h) against independent
// oracles (exact numeric comparison, unsigned byte-string comparison), plus golden bytes.
// Randomised tests use a fixed seed, overridable with PROPELLER_SEED, printed on failure.
#include "schemas/keys.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/random.h"

// GCC 12 reports a false -Wmaybe-uninitialized inside std::vector<std::variant<..., std::string>>
// reallocation (GCC bug 107138 family); the test builds such vectors.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace propeller {
namespace {

std::string Hex(std::string_view bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  for (char c : bytes) {
    out.push_back(kDigits[static_cast<uint8_t>(c) >> 4]);
    out.push_back(kDigits[static_cast<uint8_t>(c) & 0xF]);
  }
  return out;
}

int Sign(int v) { return (v > 0) - (v < 0); }

// memcmp-style comparison of byte strings, the order LMDB uses for keys.
int CompareBytes(std::string_view a, std::string_view b) {
  const size_t n = std::min(a.size(), b.size());
  const int c = n == 0 ? 0 : std::memcmp(a.data(), b.data(), n);
  if (c != 0) return Sign(c);
  return (a.size() > b.size()) - (a.size() < b.size());
}

template <typename T>
int CompareValues(T a, T b) {
  return (a > b) - (a < b);
}

// Doubles in the documented total order: -0.0 == +0.0, NaN after everything, NaN == NaN.
int CompareDoubles(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) - std::isnan(b);
  return CompareValues(a, b);
}

// Exact comparison of an int64 with a double (no rounding through double).
int CompareIntDouble(int64_t i, double d) {
  if (std::isnan(d)) return -1;
  constexpr double kTwo63 = 9223372036854775808.0;
  if (d >= kTwo63) return -1;
  if (d < -kTwo63) return 1;
  const double t = std::trunc(d);
  const int64_t ti = static_cast<int64_t>(t);  // in range: -2^63 <= t < 2^63
  if (i != ti) return i < ti ? -1 : 1;
  const double frac = d - t;  // exact
  return frac > 0 ? -1 : (frac < 0 ? 1 : 0);
}

int CompareNumbers(const AttrValue& a, const AttrValue& b) {
  if (a.index() == 0 && b.index() == 0) {
    return CompareValues(std::get<int64_t>(a), std::get<int64_t>(b));
  }
  if (a.index() == 1 && b.index() == 1) {
    return CompareDoubles(std::get<double>(a), std::get<double>(b));
  }
  if (a.index() == 0) return CompareIntDouble(std::get<int64_t>(a), std::get<double>(b));
  return -CompareIntDouble(std::get<int64_t>(b), std::get<double>(a));
}

std::string U64(uint64_t v) {
  std::string s;
  AppendOrderedU64(v, &s);
  return s;
}
std::string I64(int64_t v) {
  std::string s;
  AppendOrderedI64(v, &s);
  return s;
}
std::string Dbl(double v) {
  std::string s;
  AppendOrderedDouble(v, &s);
  return s;
}
std::string Val(const AttrValue& v) {
  std::string s;
  AppendIndexValue(v, &s);
  return s;
}
std::string Prefix(std::string_view p) {
  std::string s;
  AppendIndexStringPrefix(p, &s);
  return s;
}

double RandomDouble(std::mt19937_64& rng) {
  switch (rng() % 4) {
    case 0: {  // any bit pattern: subnormals, huge, NaN payloads, infinities
      const uint64_t bits = rng();
      double d;
      std::memcpy(&d, &bits, sizeof(d));
      return d;
    }
    case 1:
      return std::uniform_real_distribution<double>(-1e6, 1e6)(rng);
    case 2:
      return static_cast<double>(static_cast<int64_t>(rng() % 2001) - 1000);
    default:
      return static_cast<double>(static_cast<int64_t>(rng() % 2001) - 1000) / 8;
  }
}

TEST(KeysTest, U64OrderAndRoundTrip) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> values = {0, 1, 255, 256, 0x7FFFFFFFFFFFFFFFull, 0x8000000000000000ull,
                                  std::numeric_limits<uint64_t>::max()};
  for (int i = 0; i < 300; ++i) values.push_back(rng() >> (rng() % 64));
  for (uint64_t a : values) {
    ASSERT_EQ(DecodeOrderedU64(U64(a)), a);
    for (uint64_t b : values) {
      ASSERT_EQ(CompareBytes(U64(a), U64(b)), CompareValues(a, b)) << a << " vs " << b;
    }
  }
}

TEST(KeysTest, I64OrderAndRoundTrip) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::vector<int64_t> values = {std::numeric_limits<int64_t>::min(),
                                 std::numeric_limits<int64_t>::min() + 1,
                                 -1,
                                 0,
                                 1,
                                 std::numeric_limits<int64_t>::max() - 1,
                                 std::numeric_limits<int64_t>::max()};
  for (int i = 0; i < 300; ++i) values.push_back(static_cast<int64_t>(rng() >> (rng() % 64)));
  for (int i = 0; i < 100; ++i) values.push_back(-static_cast<int64_t>(rng() >> (1 + rng() % 63)));
  for (int64_t a : values) {
    ASSERT_EQ(DecodeOrderedI64(I64(a)), a);
    for (int64_t b : values) {
      ASSERT_EQ(CompareBytes(I64(a), I64(b)), CompareValues(a, b)) << a << " vs " << b;
    }
  }
}

TEST(KeysTest, DoubleOrderAndRoundTrip) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const double inf = std::numeric_limits<double>::infinity();
  const double denorm = std::numeric_limits<double>::denorm_min();
  std::vector<double> values = {-inf,
                                -std::numeric_limits<double>::max(),
                                -1.5,
                                -1.0,
                                -std::numeric_limits<double>::min(),
                                -denorm * 3,
                                -denorm,
                                -0.0,
                                0.0,
                                denorm,
                                denorm * 3,
                                std::numeric_limits<double>::min(),
                                1.0,
                                1.5,
                                std::numeric_limits<double>::max(),
                                inf,
                                std::numeric_limits<double>::quiet_NaN(),
                                -std::numeric_limits<double>::quiet_NaN(),
                                std::numeric_limits<double>::signaling_NaN()};
  for (int i = 0; i < 400; ++i) values.push_back(RandomDouble(rng));
  for (double a : values) {
    const double back = DecodeOrderedDouble(Dbl(a));
    if (std::isnan(a)) {
      ASSERT_TRUE(std::isnan(back));
    } else {
      ASSERT_EQ(back, a);
      if (a == 0) {
        ASSERT_FALSE(std::signbit(back)) << "-0.0 decodes as +0.0";
      }
    }
    for (double b : values) {
      ASSERT_EQ(CompareBytes(Dbl(a), Dbl(b)), CompareDoubles(a, b)) << a << " vs " << b;
    }
  }
}

TEST(KeysTest, MixedNumbersSortNumerically) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  const int64_t kMin = std::numeric_limits<int64_t>::min();
  const double kTwo53 = 9007199254740992.0;
  const double kTwo63 = 9223372036854775808.0;
  std::vector<AttrValue> values = {
      int64_t{3}, 3.0, 2.9999, 3.0000001, int64_t{2}, int64_t{4}, 2.5, int64_t{0}, 0.0, -0.0,
      int64_t{-1}, -1.0, -0.5, kMax, kMax - 1, kMax - 512, kMax - 1023, kMax - 1024, kTwo63,
      std::nextafter(kTwo63, 0.0), kMin, kMin + 1, -kTwo63, std::nextafter(-kTwo63, -1e300),
      int64_t{9007199254740992}, int64_t{9007199254740993}, int64_t{9007199254740994}, kTwo53,
      kTwo53 + 2, int64_t{-9007199254740993}, -kTwo53, std::numeric_limits<double>::infinity(),
      -std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN(),
      std::numeric_limits<double>::denorm_min(), -std::numeric_limits<double>::denorm_min()};
  for (int i = 0; i < 300; ++i) {
    switch (rng() % 4) {
      case 0:
        values.push_back(static_cast<int64_t>(rng()));
        break;
      case 1:
        values.push_back(static_cast<int64_t>(rng() % 2001) - 1000);
        break;
      case 2: {  // an int near 2^53 or 2^63 and the double next to it
        const int64_t base = (rng() % 2) ? int64_t{1} << 53 : kMax - 2048;
        const int64_t v = base + static_cast<int64_t>(rng() % 2048) - 1024;
        values.push_back(v);
        values.push_back(static_cast<double>(v));
        break;
      }
      default:
        values.push_back(RandomDouble(rng));
    }
  }
  for (const AttrValue& a : values) {
    const std::string ea = Val(a);
    ASSERT_EQ(ea.size(), 17u);
    for (const AttrValue& b : values) {
      ASSERT_EQ(CompareBytes(ea, Val(b)), CompareNumbers(a, b))
          << Hex(ea) << " vs " << Hex(Val(b)) << " (types " << a.index() << ", " << b.index()
          << ")";
    }
  }
  // Numbers sort before strings.
  EXPECT_LT(CompareBytes(Val(std::numeric_limits<double>::quiet_NaN()), Val(std::string())), 0);
}

std::string RandomString(std::mt19937_64& rng, size_t max_len) {
  static const char kAlphabet[] = {'\x00', '\x01', '\x02', 'a', 'b', '\xfe', '\xff'};
  std::string s(rng() % (max_len + 1), 'a');
  for (char& c : s) c = kAlphabet[rng() % sizeof(kAlphabet)];
  return s;
}

TEST(KeysTest, StringsSortBytewiseWithEmbeddedZeroAndFF) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::vector<std::string> values = {"", std::string(1, '\0'), std::string(2, '\0'), "\xff",
                                     "\xff\xff", "a", std::string("a\0", 2), "a\x01"};
  for (int i = 0; i < 500; ++i) values.push_back(RandomString(rng, 6));
  for (const std::string& a : values) {
    for (const std::string& b : values) {
      ASSERT_EQ(CompareBytes(Val(a), Val(b)), CompareBytes(a, b))
          << Hex(a) << " vs " << Hex(b);
    }
  }
}

// A long string: `len` bytes mostly 'a', with zeros sprinkled so escapes land on the limit.
std::string LongString(std::mt19937_64& rng, size_t len) {
  std::string s(len, 'a');
  for (char& c : s) {
    const uint64_t r = rng() % 8;
    if (r == 0) c = '\0';
    if (r == 1) c = 'b';
  }
  return s;
}

TEST(KeysTest, PrefixProperty) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  // Short strings: AppendIndexStringPrefix(p) prefixes AppendIndexValue(s) iff s starts with p.
  for (int i = 0; i < 200000; ++i) {
    const std::string s = RandomString(rng, 5);
    const std::string p = (rng() % 3 == 0) ? s.substr(0, rng() % (s.size() + 1))
                                           : RandomString(rng, 3);
    ASSERT_EQ(Val(s).starts_with(Prefix(p)), s.starts_with(p)) << Hex(s) << " / " << Hex(p);
  }
  EXPECT_EQ(Prefix(""), std::string("\x03"));
  // Long strings (truncated keys): never a miss; exact while the prefix fits in the kept part.
  for (int i = 0; i < 3000; ++i) {
    const std::string s = LongString(rng, 380 + rng() % 200);
    std::string p = s.substr(0, rng() % (s.size() + 1));
    if (rng() % 2 && !p.empty()) p.back() = p.back() == 'a' ? 'b' : 'a';
    const std::string key = Val(s);
    const std::string pk = Prefix(p);
    ASSERT_LE(key.size(), 3 + kMaxEncodedStringBytes);
    if (s.starts_with(p)) {
      ASSERT_TRUE(key.starts_with(pk)) << "miss at " << i;
    }
    const bool prefix_truncated = pk.size() - 1 < p.size() + std::count(p.begin(), p.end(), '\0');
    const size_t kept = key.size() - 3;  // the escaped bytes the key holds
    if (!prefix_truncated && pk.size() - 1 <= kept) {
      ASSERT_EQ(key.starts_with(pk), s.starts_with(p)) << "case " << i;
    }
  }
}

TEST(KeysTest, TruncationLimitsAndMonotonicity) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const std::string fits(kMaxEncodedStringBytes, 'a');
  EXPECT_EQ(Val(fits), "\x03" + fits + std::string("\x00\x01", 2));
  EXPECT_EQ(Val(fits + "a"), "\x03" + fits + std::string("\x00\x02", 2));
  // An escape pair is never split: 439 bytes + a zero would need 441.
  const std::string edge = std::string(kMaxEncodedStringBytes - 1, 'a') + std::string(1, '\0');
  EXPECT_EQ(Val(edge), "\x03" + edge.substr(0, kMaxEncodedStringBytes - 1) +
                           std::string("\x00\x02", 2));
  // A complete key of a prefix sorts below the truncated key that extends it.
  EXPECT_LT(CompareBytes(Val(fits), Val(fits + "a")), 0);

  std::vector<std::string> values;
  const std::string base = LongString(rng, 430);
  for (int i = 0; i < 400; ++i) {
    // Share long prefixes so many comparisons are decided near the truncation point.
    std::string s = base.substr(0, 400 + rng() % 31) + LongString(rng, rng() % 40);
    values.push_back(std::move(s));
  }
  for (const std::string& a : values) {
    const std::string ka = Val(a);
    ASSERT_LE(ka.size(), 3 + kMaxEncodedStringBytes);
    for (const std::string& b : values) {
      const int exact = CompareBytes(a, b);
      const int encoded = CompareBytes(ka, Val(b));
      if (exact < 0) {
        ASSERT_LE(encoded, 0) << Hex(a) << " vs " << Hex(b);
      }
      if (exact == 0) {
        ASSERT_EQ(encoded, 0);
      }
      // Keys that both hold the whole string are exact.
      if (ka.back() == '\x01' && Val(b).back() == '\x01') {
        ASSERT_EQ(encoded, exact);
      }
    }
  }
}

TEST(KeysTest, EntryKeyRoundTrip) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 2000; ++i) {
    AttrValue v;
    switch (rng() % 3) {
      case 0:
        v = static_cast<int64_t>(rng());
        break;
      case 1:
        v = RandomDouble(rng);
        break;
      default:
        v = (rng() % 10 == 0) ? LongString(rng, 500) : RandomString(rng, 20);
    }
    const FileId id{static_cast<uint32_t>(rng()), rng()};
    const std::string key = IndexEntryKey(v, id);
    ASSERT_LE(key.size(), 511u);  // LMDB's key limit
    std::string_view value_part;
    FileId back;
    ASSERT_TRUE(SplitIndexEntryKey(key, &value_part, &back).ok()) << Hex(key);
    EXPECT_EQ(value_part, Val(v));
    EXPECT_EQ(back, id);
  }
  std::string_view vp;
  FileId id;
  EXPECT_EQ(SplitIndexEntryKey("", &vp, &id).code(), StatusCode::kCorruption);
  EXPECT_EQ(SplitIndexEntryKey(std::string("\x03\x00\x01", 3), &vp, &id).code(),
            StatusCode::kCorruption);  // no FileId
  EXPECT_EQ(SplitIndexEntryKey(std::string("\x03\x00\x07", 3) + std::string(12, 'x'), &vp, &id)
                .code(),
            StatusCode::kCorruption);  // bad escape
  EXPECT_EQ(SplitIndexEntryKey(std::string(29, '\x04'), &vp, &id).code(),
            StatusCode::kCorruption);  // unknown tag
  EXPECT_EQ(SplitIndexEntryKey(std::string(30, '\x02'), &vp, &id).code(),
            StatusCode::kCorruption);  // number with one byte too many
  // Random bytes never crash and either split cleanly or are Corruption.
  for (int i = 0; i < 20000; ++i) {
    std::string junk = RandomString(rng, 40);
    if (!junk.empty()) junk[0] = static_cast<char>(2 + rng() % 2);
    const Status s = SplitIndexEntryKey(junk, &vp, &id);
    ASSERT_TRUE(s.ok() || s.code() == StatusCode::kCorruption);
    if (s.ok()) {
      ASSERT_EQ(vp.size() + kFileIdKeySize, junk.size());
    }
  }
}

TEST(KeysTest, FileIdAndEdgeKeys) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::vector<FileId> ids = {{0, 0}, {0, 1}, {1, 0}, {UINT32_MAX, UINT64_MAX}};
  for (int i = 0; i < 200; ++i) ids.push_back({static_cast<uint32_t>(rng() % 3), rng() % 5});
  for (int i = 0; i < 100; ++i) ids.push_back({static_cast<uint32_t>(rng()), rng()});
  for (const FileId& a : ids) {
    std::string ka;
    AppendFileIdKey(a, &ka);
    ASSERT_EQ(ka.size(), kFileIdKeySize);
    FileId back;
    ASSERT_TRUE(DecodeFileIdKey(ka, &back).ok());
    ASSERT_EQ(back, a);
    for (const FileId& b : ids) {
      std::string kb;
      AppendFileIdKey(b, &kb);
      ASSERT_EQ(CompareBytes(ka, kb), a < b ? -1 : (b < a ? 1 : 0));
      std::string edge;
      AppendEdgeKey(a, b, &edge);
      FileId src, dst;
      ASSERT_TRUE(DecodeEdgeKey(edge, &src, &dst).ok());
      ASSERT_EQ(src, a);
      ASSERT_EQ(dst, b);
    }
  }
  FileId id, other;
  EXPECT_EQ(DecodeFileIdKey(std::string(11, '\0'), &id).code(), StatusCode::kCorruption);
  EXPECT_EQ(DecodeFileIdKey(std::string(13, '\0'), &id).code(), StatusCode::kCorruption);
  EXPECT_EQ(DecodeEdgeKey(std::string(23, '\0'), &id, &other).code(), StatusCode::kCorruption);
}

TEST(KeysTest, GoldenBytes) {
  std::string s;
  AppendFileIdKey({0x01020304, 0x05060708090a0b0cull}, &s);
  EXPECT_EQ(Hex(s), "01020304" "05060708090a0b0c");
  EXPECT_EQ(Hex(U64(0x0102)), "0000000000000102");
  EXPECT_EQ(Hex(I64(-1)), "7fffffffffffffff");
  EXPECT_EQ(Hex(I64(0)), "8000000000000000");
  EXPECT_EQ(Hex(I64(std::numeric_limits<int64_t>::min())), "0000000000000000");
  EXPECT_EQ(Hex(Dbl(1.0)), "bff0000000000000");
  EXPECT_EQ(Hex(Dbl(-1.0)), "400fffffffffffff");
  EXPECT_EQ(Hex(Dbl(-0.0)), "8000000000000000");
  EXPECT_EQ(Hex(Dbl(std::numeric_limits<double>::infinity())), "fff0000000000000");
  EXPECT_EQ(Hex(Dbl(-std::numeric_limits<double>::quiet_NaN())), "fff8000000000000");
  // 3 and 3.0 share one key; 2.5 keeps tie-break 2.
  EXPECT_EQ(Hex(Val(int64_t{3})), "02" "c008000000000000" "8000000000000003");
  EXPECT_EQ(Hex(Val(3.0)), "02" "c008000000000000" "8000000000000003");
  EXPECT_EQ(Hex(Val(2.5)), "02" "c004000000000000" "8000000000000002");
  EXPECT_EQ(Hex(Val(int64_t{-1})), "02" "400fffffffffffff" "7fffffffffffffff");
  // INT64_MAX rounds toward zero to 2^63-1024, below the double 2^63.
  EXPECT_EQ(Hex(Val(std::numeric_limits<int64_t>::max())),
            "02" "c3dfffffffffffff" "ffffffffffffffff");
  EXPECT_EQ(Hex(Val(9223372036854775808.0)), "02" "c3e0000000000000" "ffffffffffffffff");
  EXPECT_EQ(Hex(Val(std::string("a\0b", 3))), "03" "6100ff62" "0001");
  EXPECT_EQ(Hex(Val(std::string())), "03" "0001");
  EXPECT_EQ(Hex(Prefix(std::string("a\0", 2))), "03" "6100ff");
  EXPECT_EQ(Hex(IndexEntryKey(std::string("x"), {1, 2})),
            "03" "78" "0001" "00000001" "0000000000000002");
  s.clear();
  AppendEdgeKey({1, 2}, {3, 4}, &s);
  EXPECT_EQ(Hex(s), "00000001" "0000000000000002" "00000003" "0000000000000004");
  // Edge values: the weight alone while no generation is known (format 2's 8 bytes), else
  // weight, source and destination generations.
  s.clear();
  AppendEdgeValue(EdgeValue{5, 0, 0}, &s);
  EXPECT_EQ(Hex(s), "0000000000000005");
  s.clear();
  AppendEdgeValue(EdgeValue{5, 0x01020304, 7}, &s);
  EXPECT_EQ(Hex(s), "0000000000000005" "01020304" "00000007");
  EdgeValue v{9, 9, 9};
  ASSERT_TRUE(DecodeEdgeValue(s, &v).ok());
  EXPECT_EQ(v.weight, 5u);
  EXPECT_EQ(v.src_generation, 0x01020304u);
  EXPECT_EQ(v.dst_generation, 7u);
  ASSERT_TRUE(DecodeEdgeValue(s.substr(0, 8), &v).ok());
  EXPECT_EQ(v.weight, 5u);
  EXPECT_EQ(v.src_generation, 0u);
  EXPECT_EQ(v.dst_generation, 0u);
  for (size_t n : {0, 7, 9, 15, 17}) {
    EXPECT_EQ(DecodeEdgeValue(std::string(n, '\0'), &v).code(), StatusCode::kCorruption) << n;
  }
}

}  // namespace
}  // namespace propeller
