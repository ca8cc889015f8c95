// Runs every fuzz entry point (fuzz_targets.h) on its seeds and on a few thousand seeded
// mutations and random inputs each, so the gcc (+ASan/UBSan) build exercises the same checks as
// the clang/libFuzzer runs of scripts/fuzz.sh. A broken contract aborts the binary (the failing
// input is then replayed with the printed seed: PROPELLER_SEED=<seed>).
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "common/random.h"
#include "schemas/fuzz/fuzz_targets.h"
#include "schemas/fuzz/fuzz_util.h"
#include "schemas/messages.h"
#include "schemas/record_format.h"

namespace propeller::fuzz {
namespace {

int RunTarget(Target target, const std::string& input) {
  const auto* data = reinterpret_cast<const uint8_t*>(input.data());
  switch (target) {
    case Target::kRequest: return FuzzRequest(data, input.size());
    case Target::kReply: return FuzzReply(data, input.size());
    case Target::kRecord: return FuzzRecord(data, input.size());
    case Target::kStorage: return FuzzStorage(data, input.size());
  }
  return 0;
}

// One libFuzzer-like mutation: flip, set, insert, erase, duplicate, truncate or splice.
std::string Mutate(std::mt19937_64& rng, std::string s, const std::vector<std::string>& pool) {
  const int steps = 1 + static_cast<int>(rng() % 4);
  for (int step = 0; step < steps; ++step) {
    const size_t at = s.empty() ? 0 : rng() % s.size();
    switch (rng() % 7) {
      case 0:
        if (!s.empty()) s[at] = static_cast<char>(s[at] ^ (1 << (rng() % 8)));
        break;
      case 1: {
        const char interesting[] = {'\0', '\x7f', '\x80', '\xc0', '\xc1', '\xcc', '\xcf',
                                    '\xd3', '\xdc', '\xdd', '\xdf', '\xff'};
        if (!s.empty()) s[at] = interesting[rng() % sizeof(interesting)];
        break;
      }
      case 2:
        s.insert(s.begin() + static_cast<std::ptrdiff_t>(at), static_cast<char>(rng()));
        break;
      case 3:
        if (!s.empty()) s.erase(at, 1 + rng() % 8);
        break;
      case 4:
        if (!s.empty()) s.insert(at, s.substr(at, 1 + rng() % 16));
        break;
      case 5:
        s.resize(at);
        break;
      default: {
        const std::string& other = pool[rng() % pool.size()];
        if (!other.empty()) s.insert(at, other.substr(rng() % other.size(), 1 + rng() % 32));
        break;
      }
    }
  }
  return s;
}

class FuzzSmokeTest : public ::testing::TestWithParam<Target> {};

TEST_P(FuzzSmokeTest, SeedsMutationsAndRandomInputs) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed + static_cast<uint64_t>(GetParam()));
  const std::vector<std::string> seeds = Seeds(GetParam());
  ASSERT_GE(seeds.size(), 3u);
  for (const std::string& s : seeds) {
    EXPECT_EQ(RunTarget(GetParam(), s), 0);
    // Every truncation of a seed.
    for (size_t len = 0; len < s.size(); ++len) RunTarget(GetParam(), s.substr(0, len));
  }
  for (int i = 0; i < 4000; ++i) {
    RunTarget(GetParam(), Mutate(rng, seeds[rng() % seeds.size()], seeds));
  }
  for (int i = 0; i < 1000; ++i) {
    std::string random(rng() % 64, '\0');
    for (char& c : random) c = static_cast<char>(rng());
    RunTarget(GetParam(), random);
  }
}

// The seeds are what they claim: valid envelopes and records (else fuzzing starts from noise).
TEST(FuzzSeedsTest, SeedsAreValidEncodings) {
  size_t requests = 0, replies = 0, records = 0, batches = 0;
  for (const std::string& s : Seeds(Target::kRequest)) {
    wire::RequestEnvelope e;
    if (wire::DecodeRequest(s, &e).ok()) ++requests;
  }
  for (const std::string& s : Seeds(Target::kReply)) {
    wire::ReplyEnvelope e;
    if (wire::DecodeReply(s, &e).ok()) ++replies;
  }
  for (const std::string& s : Seeds(Target::kRecord)) {
    FileRecord r;
    std::vector<Update> u;
    if (DecodeRecord(s, &r).ok()) ++records;
    if (DecodeUpdateBatch(s, &u).ok()) ++batches;
  }
  EXPECT_EQ(requests, std::size(fuzz::kRequestTypes));  // one envelope per request type
  EXPECT_EQ(replies, fuzz::kNumReplyTypes + 2);  // one per reply type, an error and a redirect
  EXPECT_EQ(records, 2u);
  EXPECT_EQ(batches, 1u);
}

INSTANTIATE_TEST_SUITE_P(AllTargets, FuzzSmokeTest, ::testing::ValuesIn(kAllTargets),
                         [](const ::testing::TestParamInfo<Target>& info) {
                           return std::string(TargetName(info.param));
                         });

}  // namespace
}  // namespace propeller::fuzz
