// SearchHitsChunkEncoder (messages.h) against the oracle it replaces on the index node:
// Encode(SearchHitsChunk) of the same hits, byte for byte, and Decode of its frames.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "schemas/messages.h"

namespace propeller::wire {
namespace {

class Hits {
 public:
  explicit Hits(uint64_t seed) : rng_(seed) {}

  WireHit Next() {
    WireHit h;
    h.path = Path();
    h.record.id = FileId{static_cast<uint32_t>(Below(4)), rng_()};
    const size_t links = 1 + Below(3);
    for (size_t i = 0; i < links; ++i) h.record.paths.push_back(i == 0 ? h.path : Path());
    h.record.parent_ino = rng_();
    constexpr FileType kTypes[] = {FileType::kRegular, FileType::kDirectory, FileType::kSymlink,
                                   FileType::kOther};
    h.record.type = kTypes[Below(4)];
    h.record.size = rng_() >> Below(64);
    // Times of either record format: int64 nanoseconds, and beyond them (format 2).
    h.record.mtime = static_cast<int64_t>(rng_());
    h.record.ctime = -static_cast<int64_t>(Below(1u << 30));
    h.record.atime = Below(4) == 0 ? FileTimeOf(INT64_MAX, 5) : static_cast<int64_t>(rng_() >> 2);
    h.record.uid = static_cast<uint32_t>(rng_());
    h.record.gid = static_cast<uint32_t>(Below(70000));
    h.record.mode = static_cast<uint32_t>(Below(07777));
    h.record.nlink = static_cast<uint32_t>(links);
    if (Below(2) == 0) h.record.attrs["project"] = std::string("p") + std::to_string(Below(9));
    if (Below(2) == 0) h.record.attrs["score"] = static_cast<int64_t>(rng_()) >> Below(60);
    if (Below(3) == 0) h.record.attrs["ratio"] = 0.25 * static_cast<double>(Below(100));
    h.record.inode_generation = Below(2) == 0 ? 0 : static_cast<uint32_t>(rng_());
    h.acg = rng_() >> Below(64);
    return h;
  }

 private:
  uint64_t Below(uint64_t n) { return rng_() % n; }
  std::string Path() {
    std::string p;
    const size_t parts = 1 + Below(6);
    for (size_t i = 0; i < parts; ++i) p += "/d" + std::to_string(Below(1000));
    return p + std::string(Below(40), 'x');
  }

  std::mt19937_64 rng_;
};

TEST(SearchHitsChunkEncoderTest, GivesTheBytesOfEncodeForEveryChunkSize) {
  Hits gen(20261127);
  SearchHitsChunkEncoder encoder;
  std::string frame;
  // 0 hits; fixarray (< 16), array16 (< 65536) and array32 headers.
  for (size_t n : {0, 1, 2, 15, 16, 17, 300, 65535, 65536, 70000}) {
    SearchHitsChunk chunk;
    for (size_t i = 0; i < n; ++i) {
      chunk.hits.push_back(gen.Next());
      encoder.Add(chunk.hits.back().path, chunk.hits.back().record, chunk.hits.back().acg);
    }
    ASSERT_EQ(encoder.hits(), n);
    std::string want;
    Encode(chunk, &want);
    encoder.Finish(&frame);
    ASSERT_EQ(frame, want) << n << " hits";
    EXPECT_EQ(encoder.hits(), 0u);
    EXPECT_EQ(encoder.bytes(), 0u);
    SearchHitsChunk back;
    ASSERT_TRUE(Decode(frame, &back).ok()) << n << " hits";
    ASSERT_EQ(back.hits.size(), n);
    for (size_t i = 0; i < n; ++i) {
      EXPECT_EQ(back.hits[i].path, chunk.hits[i].path);
      EXPECT_EQ(back.hits[i].record, chunk.hits[i].record) << "hit " << i;
      EXPECT_EQ(back.hits[i].acg, chunk.hits[i].acg);
    }
  }
}

TEST(SearchHitsChunkEncoderTest, FinishReplacesTheFrameAndStartsOver) {
  Hits gen(7);
  SearchHitsChunkEncoder encoder;
  const WireHit a = gen.Next(), b = gen.Next();
  std::string frame = "left over from the previous chunk";
  encoder.Add(a.path, a.record, a.acg);
  encoder.Finish(&frame);
  std::string want;
  Encode(SearchHitsChunk{{a}}, &want);
  EXPECT_EQ(frame, want);
  encoder.Add(b.path, b.record, b.acg);
  EXPECT_EQ(encoder.hits(), 1u);
  encoder.Finish(&frame);
  want.clear();
  Encode(SearchHitsChunk{{b}}, &want);
  EXPECT_EQ(frame, want);
}

}  // namespace
}  // namespace propeller::wire
