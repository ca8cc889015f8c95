// Random: a seeded, deterministic pseudo-random generator for tests and benchmarks
// (docs/style.md rule 7: randomness goes through a seam, and every random test takes a seed and
// prints it on failure).
//
// The generator is xoshiro256** (Blackman & Vigna), seeded by expanding the 64-bit seed with
// splitmix64. The sequence for a given seed is part of this header's contract: tests replay a
// failure from its printed seed, so changing the algorithm invalidates recorded seeds.
// Not for cryptography.
//
// Threading: a Random object is not thread-safe; give each thread its own (e.g. seed + thread
// index). TestSeed() is thread-safe.
#ifndef PROPELLER_COMMON_RANDOM_H_
#define PROPELLER_COMMON_RANDOM_H_

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>

namespace propeller {

// One step of splitmix64: advances *state and returns the next output. Exposed because it is a
// good one-shot mixer of 64-bit values and so tests can pin the seeding against known vectors.
inline uint64_t SplitMix64(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

class Random {
 public:
  // Every seed, including 0, gives a valid, distinct stream.
  explicit Random(uint64_t seed) {
    uint64_t sm = seed;
    for (uint64_t& word : s_) word = SplitMix64(&sm);
  }

  // 64 uniformly random bits.
  uint64_t Next() {
    const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, n), without modulo bias. REQUIRES: n > 0 (returns 0 when n == 0).
  uint64_t Uniform(uint64_t n) {
    if (n == 0) return 0;
    // Reject the lowest (2^64 mod n) values so every residue is equally likely.
    const uint64_t threshold = (0 - n) % n;
    for (;;) {
      const uint64_t r = Next();
      if (r >= threshold) return r % n;
    }
  }

  // Uniform in [lo, hi], both inclusive. REQUIRES: lo <= hi (returns lo otherwise).
  int64_t Range(int64_t lo, int64_t hi) {
    if (lo >= hi) return lo;
    const uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo) + 1;
    // span == 0 means the full 64-bit range.
    const uint64_t offset = span == 0 ? Next() : Uniform(span);
    return static_cast<int64_t>(static_cast<uint64_t>(lo) + offset);
  }

  // Uniform in [0, 1), with 53 random bits.
  double UniformDouble() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

  // True with probability 1/n. REQUIRES: n > 0 (n == 0 behaves like n == 1).
  bool OneIn(uint64_t n) { return n <= 1 || Uniform(n) == 0; }

  // exp(N(mu, sigma^2)): skewed sizes such as file sizes. Uses Box–Muller.
  double LogNormal(double mu, double sigma) {
    // 1 - UniformDouble() is in (0, 1], so the log is finite.
    const double u1 = 1.0 - UniformDouble();
    const double u2 = UniformDouble();
    constexpr double kTwoPi = 6.283185307179586476925286766559;
    const double normal = std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * u2);
    return std::exp(mu + sigma * normal);
  }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

  uint64_t s_[4];
};

// The default seed of randomized tests when PROPELLER_SEED is not set. Fixed so a plain test
// run is reproducible; CI or a developer hunting bugs sets PROPELLER_SEED to explore others.
inline constexpr uint64_t kDefaultTestSeed = 20240501;

// The seed for randomized tests: the environment variable PROPELLER_SEED parsed as an unsigned
// number (as strtoull with base 0: decimal, 0x hex) when it is set and valid, otherwise
// kDefaultTestSeed (20240501).
// Tests print it (e.g. SCOPED_TRACE) so a failure can be replayed with PROPELLER_SEED=<seed>.
inline uint64_t TestSeed() {
  const char* text = std::getenv("PROPELLER_SEED");
  if (text == nullptr || *text == '\0') return kDefaultTestSeed;
  char* end = nullptr;
  const unsigned long long value = std::strtoull(text, &end, 0);
  if (end == nullptr || *end != '\0' || text[0] == '-') return kDefaultTestSeed;
  return static_cast<uint64_t>(value);
}

}  // namespace propeller

#endif  // PROPELLER_COMMON_RANDOM_H_
