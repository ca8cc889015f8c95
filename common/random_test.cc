// Tests for random.h: known splitmix64 outputs, determinism per seed, bounds, rough uniformity.
#include "common/random.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace propeller {
namespace {

TEST(RandomTest, SplitMix64KnownVector) {
  // Reference outputs of splitmix64 from state 0 (Vigna's splitmix64.c).
  uint64_t state = 0;
  EXPECT_EQ(SplitMix64(&state), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(SplitMix64(&state), 0x6E789E6AA1B965F4ull);
  EXPECT_EQ(SplitMix64(&state), 0x06C45D188009454Full);
}

// Independent transcription of xoshiro256** (Blackman & Vigna, xoshiro256starstar.c).
uint64_t RefRotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
uint64_t RefNext(uint64_t s[4]) {
  const uint64_t result = RefRotl(s[1] * 5, 7) * 9;
  const uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = RefRotl(s[3], 45);
  return result;
}

TEST(RandomTest, MatchesReferenceXoshiro256StarStar) {
  // The reference itself against the published outputs for state {1, 2, 3, 4}.
  uint64_t known[4] = {1, 2, 3, 4};
  const uint64_t kExpected[] = {11520ull, 0ull, 1509978240ull, 1215971899390074240ull,
                                1216172134540287360ull, 607988272756665600ull,
                                16172922978634559625ull};
  for (uint64_t e : kExpected) ASSERT_EQ(RefNext(known), e);
  // Random = splitmix64 seeding + that generator.
  for (uint64_t seed : {0ull, 1ull, 42ull, 0xFFFFFFFFFFFFFFFFull}) {
    uint64_t sm = seed;
    uint64_t s[4];
    for (uint64_t& w : s) w = SplitMix64(&sm);
    Random rnd(seed);
    for (int i = 0; i < 100; ++i) ASSERT_EQ(rnd.Next(), RefNext(s)) << "seed " << seed;
  }
}

TEST(RandomTest, SameSeedSameSequenceDifferentSeedDifferent) {
  Random a(123);
  Random b(123);
  Random c(124);
  int equal_to_c = 0;
  for (int i = 0; i < 1000; ++i) {
    const uint64_t x = a.Next();
    ASSERT_EQ(x, b.Next());
    if (x == c.Next()) ++equal_to_c;
  }
  EXPECT_EQ(equal_to_c, 0);
  Random zero(0);
  EXPECT_NE(zero.Next(), 0u);
}

TEST(RandomTest, UniformStaysInBounds) {
  Random rnd(TestSeed());
  SCOPED_TRACE("seed=" + std::to_string(TestSeed()));
  for (uint64_t n : {1ull, 2ull, 3ull, 7ull, 1000ull, (1ull << 63) + 1, ~0ull}) {
    for (int i = 0; i < 2000; ++i) ASSERT_LT(rnd.Uniform(n), n) << n;
  }
  for (int i = 0; i < 100; ++i) ASSERT_EQ(rnd.Uniform(1), 0u);
}

TEST(RandomTest, UniformHitsEveryValueRoughlyEqually) {
  Random rnd(TestSeed());
  SCOPED_TRACE("seed=" + std::to_string(TestSeed()));
  constexpr int kBuckets = 10;
  constexpr int kDraws = 100000;
  std::vector<int> counts(kBuckets, 0);
  for (int i = 0; i < kDraws; ++i) ++counts[rnd.Uniform(kBuckets)];
  // Expected 10000 per bucket, standard deviation ~95: 5% is over 5 sigma.
  for (int c : counts) {
    EXPECT_GT(c, 9500);
    EXPECT_LT(c, 10500);
  }
}

TEST(RandomTest, RangeIsInclusive) {
  Random rnd(TestSeed());
  SCOPED_TRACE("seed=" + std::to_string(TestSeed()));
  bool saw_lo = false;
  bool saw_hi = false;
  for (int i = 0; i < 10000; ++i) {
    const int64_t v = rnd.Range(-3, 3);
    ASSERT_GE(v, -3);
    ASSERT_LE(v, 3);
    saw_lo |= v == -3;
    saw_hi |= v == 3;
  }
  EXPECT_TRUE(saw_lo);
  EXPECT_TRUE(saw_hi);
  EXPECT_EQ(rnd.Range(5, 5), 5);
  const int64_t kMin = std::numeric_limits<int64_t>::min();
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  bool saw_negative = false;
  bool saw_positive = false;
  for (int i = 0; i < 100; ++i) {
    const int64_t v = rnd.Range(kMin, kMax);
    saw_negative |= v < 0;
    saw_positive |= v > 0;
  }
  EXPECT_TRUE(saw_negative && saw_positive);
  for (int i = 0; i < 100; ++i) ASSERT_GE(rnd.Range(kMax - 1, kMax), kMax - 1);
}

TEST(RandomTest, UniformDoubleAndOneIn) {
  Random rnd(TestSeed());
  SCOPED_TRACE("seed=" + std::to_string(TestSeed()));
  double sum = 0;
  for (int i = 0; i < 100000; ++i) {
    const double d = rnd.UniformDouble();
    ASSERT_GE(d, 0.0);
    ASSERT_LT(d, 1.0);
    sum += d;
  }
  EXPECT_NEAR(sum / 100000, 0.5, 0.01);
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(rnd.OneIn(1));
  int hits = 0;
  for (int i = 0; i < 100000; ++i) hits += rnd.OneIn(4) ? 1 : 0;
  EXPECT_NEAR(hits, 25000, 1000);
}

TEST(RandomTest, LogNormalMedianIsExpMu) {
  Random rnd(TestSeed());
  SCOPED_TRACE("seed=" + std::to_string(TestSeed()));
  std::vector<double> v;
  for (int i = 0; i < 20001; ++i) {
    const double x = rnd.LogNormal(2.0, 1.5);
    ASSERT_GT(x, 0.0);
    ASSERT_TRUE(std::isfinite(x));
    v.push_back(x);
  }
  std::nth_element(v.begin(), v.begin() + 10000, v.end());
  EXPECT_NEAR(std::log(v[10000]), 2.0, 0.05);
}

TEST(RandomTest, TestSeedReadsEnvironment) {
  const char* old = getenv("PROPELLER_SEED");
  const std::string saved = old ? old : "";
  setenv("PROPELLER_SEED", "12345", 1);
  EXPECT_EQ(TestSeed(), 12345u);
  setenv("PROPELLER_SEED", "0x10", 1);
  EXPECT_EQ(TestSeed(), 16u);
  setenv("PROPELLER_SEED", "garbage", 1);
  EXPECT_EQ(TestSeed(), kDefaultTestSeed);
  unsetenv("PROPELLER_SEED");
  EXPECT_EQ(TestSeed(), kDefaultTestSeed);
  if (old) setenv("PROPELLER_SEED", saved.c_str(), 1);
}

}  // namespace
}  // namespace propeller
