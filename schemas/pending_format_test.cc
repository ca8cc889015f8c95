// The queue record of a mount's pending updates (schemas/pending_format.h): round trips, the
// layout read back with msgpack-c itself, the compatibility rule, and damage (every flipped
// byte is caught; garbage never crashes a decoder).
#include "schemas/pending_format.h"

#include <gtest/gtest.h>
#include <msgpack.hpp>

#include <string>
#include <vector>

#include "common/crc32c.h"
#include "common/random.h"
#include "schemas/msgpack_util.h"
#include "schemas/record_format.h"

namespace propeller {
namespace {

struct Sample {
  std::vector<Update> updates;
  std::vector<PendingExtra> extras;
  std::vector<std::string> touched;
};

Sample MakeSample() {
  Sample s;
  Update put;
  put.op = UpdateOp::kPut;
  put.record.id = FileId{2, 77};
  put.record.paths = {"/src/a.c", "/src/b.c"};
  put.record.size = 4096;
  put.record.attrs["project"] = std::string("alpha");
  Update del;
  del.op = UpdateOp::kDelete;
  del.acg = 5;
  del.record.id = FileId{2, 78};
  del.record.paths = {"/src/gone"};
  del.record.ctime = 123;
  s.updates = {put, del};
  s.extras = {PendingExtra{"cc", {FileId{2, 1}, FileId{2, 2}}, false, 0},
              PendingExtra{"", {}, false, 41}};
  s.touched = {"/old/name"};
  return s;
}

std::string Record(const Sample& s) {
  std::string out;
  AppendPendingRecord(s.updates, s.extras, s.touched, &out);
  return out;
}

uint32_t U32(const std::string& b, size_t at) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[at + i]);
  return v;
}

TEST(PendingFormatTest, ARecordRoundTrips) {
  const Sample s = MakeSample();
  const std::string rec = Record(s);
  std::string_view payload;
  size_t consumed = 0;
  ASSERT_EQ(ParsePendingRecord(rec, &payload, &consumed), PendingParse::kOk);
  EXPECT_EQ(consumed, rec.size());
  std::vector<Update> updates;
  std::vector<PendingExtra> extras;
  std::vector<std::string> touched;
  ASSERT_TRUE(DecodePendingBatch(payload, &updates, &extras, &touched).ok());
  ASSERT_EQ(updates.size(), 2u);
  EXPECT_EQ(updates[0].record, s.updates[0].record);
  EXPECT_EQ(updates[1].op, UpdateOp::kDelete);
  EXPECT_EQ(updates[1].acg, 5u);
  EXPECT_EQ(updates[1].record.paths, s.updates[1].record.paths);
  EXPECT_EQ(extras, s.extras);
  EXPECT_EQ(touched, s.touched);
}

TEST(PendingFormatTest, TheLayoutIsWhatTheHeaderSays) {
  const Sample s = MakeSample();
  const std::string rec = Record(s);
  // [length][masked CRC-32C of the payload][payload]
  ASSERT_GT(rec.size(), kPendingRecordHeader);
  const uint32_t n = U32(rec, 0);
  ASSERT_EQ(n, rec.size() - kPendingRecordHeader);
  const std::string payload = rec.substr(kPendingRecordHeader);
  EXPECT_EQ(U32(rec, 4), Crc32cMask(Crc32c(payload)));
  // The payload read by msgpack-c: [1, bin(update batch), [[app, [[vol, ino]..], created,
  // generation]..], [touched..]].
  msgpack::object_handle oh = msgpack::unpack(payload.data(), payload.size());
  const msgpack::object& o = oh.get();
  ASSERT_EQ(o.type, msgpack::type::ARRAY);
  ASSERT_EQ(o.via.array.size, 4u);
  EXPECT_EQ(o.via.array.ptr[0].as<uint32_t>(), 1u);
  ASSERT_EQ(o.via.array.ptr[1].type, msgpack::type::BIN);
  std::string batch;
  EncodeUpdateBatch(s.updates, &batch);
  EXPECT_EQ(std::string(o.via.array.ptr[1].via.bin.ptr, o.via.array.ptr[1].via.bin.size), batch);
  const msgpack::object& extras = o.via.array.ptr[2];
  ASSERT_EQ(extras.via.array.size, 2u);
  const msgpack::object& e0 = extras.via.array.ptr[0];
  ASSERT_EQ(e0.via.array.size, 4u);
  EXPECT_EQ(e0.via.array.ptr[0].as<std::string>(), "cc");
  EXPECT_EQ(e0.via.array.ptr[1].via.array.size, 2u);
  EXPECT_EQ(e0.via.array.ptr[1].via.array.ptr[1].via.array.ptr[1].as<uint64_t>(), 2u);
  EXPECT_FALSE(e0.via.array.ptr[2].as<bool>());
  EXPECT_EQ(extras.via.array.ptr[1].via.array.ptr[3].as<uint64_t>(), 41u);
  ASSERT_EQ(o.via.array.ptr[3].via.array.size, 1u);
  EXPECT_EQ(o.via.array.ptr[3].via.array.ptr[0].as<std::string>(), "/old/name");
}

// A payload by hand: `version` and, past the four fields, `extra` more.
std::string HandMade(uint32_t version, int extra) {
  const Sample s = MakeSample();
  std::string payload;
  msgpack_util::StringSink sink(&payload);
  msgpack_util::Packer pk(sink);
  pk.pack_array(4 + static_cast<uint32_t>(extra));
  pk.pack_uint32(version);
  std::string batch;
  EncodeUpdateBatch(std::span<const Update>(s.updates.data(), 1), &batch);
  msgpack_util::PackBin(pk, batch);
  pk.pack_array(1);
  pk.pack_array(4);
  msgpack_util::PackString(pk, "x");
  pk.pack_array(0);
  pk.pack_true();
  pk.pack_uint64(3);
  pk.pack_array(0);
  for (int i = 0; i < extra; ++i) msgpack_util::PackString(pk, "later");
  return payload;
}

TEST(PendingFormatTest, LaterFieldsAreIgnoredAndNewerVersionsRefused) {
  std::vector<Update> updates;
  std::vector<PendingExtra> extras;
  std::vector<std::string> touched;
  ASSERT_TRUE(DecodePendingBatch(HandMade(1, 0), &updates, &extras, &touched).ok());
  EXPECT_TRUE(extras[0].created);
  EXPECT_EQ(extras[0].generation, 3u);
  EXPECT_TRUE(DecodePendingBatch(HandMade(1, 2), &updates, &extras, &touched).ok());
  EXPECT_EQ(DecodePendingBatch(HandMade(2, 0), &updates, &extras, &touched).code(),
            StatusCode::kCorruption);
  EXPECT_EQ(DecodePendingBatch(HandMade(0, 0), &updates, &extras, &touched).code(),
            StatusCode::kCorruption);
}

TEST(PendingFormatTest, EveryFlippedByteIsCaughtAndAShortRecordIsTruncated) {
  const std::string rec = Record(MakeSample());
  std::string_view payload;
  size_t consumed = 0;
  for (size_t i = 0; i < rec.size(); ++i) {
    std::string bad = rec;
    bad[i] = static_cast<char>(bad[i] ^ 0x01);
    EXPECT_NE(ParsePendingRecord(bad, &payload, &consumed), PendingParse::kOk) << "byte " << i;
  }
  for (size_t keep = 0; keep < rec.size(); ++keep) {
    EXPECT_EQ(ParsePendingRecord(std::string_view(rec).substr(0, keep), &payload, &consumed),
              PendingParse::kTruncated)
        << keep;
  }
  // A zero length (an unwritten, zeroed region) is no record.
  EXPECT_EQ(ParsePendingRecord(std::string(16, '\0'), &payload, &consumed),
            PendingParse::kBadRecord);
}

TEST(PendingFormatTest, GarbageNeverCrashesTheDecoder) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("PROPELLER_SEED=" + std::to_string(seed));
  Random rnd(seed);
  const std::string good = Record(MakeSample()).substr(kPendingRecordHeader);
  std::vector<Update> updates;
  std::vector<PendingExtra> extras;
  std::vector<std::string> touched;
  for (int round = 0; round < 3000; ++round) {
    std::string bytes = good;
    const int edits = 1 + static_cast<int>(rnd.Uniform(4));
    for (int e = 0; e < edits; ++e) {
      bytes[rnd.Uniform(bytes.size())] = static_cast<char>(rnd.Uniform(256));
    }
    if (rnd.Uniform(4) == 0) bytes.resize(rnd.Uniform(bytes.size()));
    const Status s = DecodePendingBatch(bytes, &updates, &extras, &touched);
    EXPECT_TRUE(s.ok() || s.code() == StatusCode::kCorruption) << s.ToString();
    if (s.ok()) {
      EXPECT_EQ(updates.size(), extras.size());
    }
  }
}

}  // namespace
}  // namespace propeller
