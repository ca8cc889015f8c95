// Tests of the FileRecord and Update-batch encodings (schemas/record_format.h): seeded round
// trips, golden bytes, compatibility rules, field validation, and a garbage/mutation sweep
// (decoders must return OK or Corruption on anything, never crash or throw).
// Randomised tests use a fixed seed, overridable with PROPELLER_SEED, printed on failure.
#include "schemas/record_format.h"

#include <gtest/gtest.h>
#include <msgpack.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/random.h"
#include "schemas/msgpack_util.h"

namespace propeller {

// Readable failure messages for record comparisons (found by gtest through ADL).
void PrintTo(const FileRecord& r, std::ostream* os) {
  *os << "{id " << r.id.volume << ":" << r.id.ino << " paths [";
  for (const std::string& p : r.paths) *os << p.size() << "B ";
  *os << "] parent " << r.parent_ino << " type " << static_cast<char>(r.type) << " size "
      << r.size << " m/c/a " << FileTimeToString(r.mtime) << "/" << FileTimeToString(r.ctime) << "/"
      << FileTimeToString(r.atime) << " uid " << r.uid
      << " gid " << r.gid << " mode " << r.mode << " nlink " << r.nlink << " attrs {";
  for (const auto& [name, value] : r.attrs) {
    *os << name.size() << "B=";
    std::visit([os](const auto& v) { *os << v; }, value);
    *os << "(" << value.index() << ") ";
  }
  *os << "}}";
}

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

std::string Unhex(std::string_view hex) {
  std::string out;
  auto nibble = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(nibble(hex[i]) * 16 + nibble(hex[i + 1])));
  }
  return out;
}

std::string RandomBytes(std::mt19937_64& rng, size_t max_len) {
  std::string s(rng() % (max_len + 1), '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

int64_t RandomI64(std::mt19937_64& rng) {
  switch (rng() % 4) {
    case 0:
      return static_cast<int64_t>(rng());
    case 1:
      return static_cast<int64_t>(rng() % 300) - 150;
    case 2:
      return rng() % 2 ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max();
    default:
      return static_cast<int64_t>(rng() >> (rng() % 64));
  }
}

AttrValue RandomAttr(std::mt19937_64& rng) {
  switch (rng() % 5) {
    case 0:
      return RandomI64(rng);
    case 1:  // whole-number doubles must stay doubles
      return static_cast<double>(static_cast<int64_t>(rng() % 2001) - 1000);
    case 2:
      return std::uniform_real_distribution<double>(-1e12, 1e12)(rng);
    case 3: {
      const double specials[] = {std::numeric_limits<double>::infinity(),
                                 -std::numeric_limits<double>::infinity(),
                                 std::numeric_limits<double>::denorm_min(), 1e308, -0.5};
      return specials[rng() % 5];
    }
    default:
      return RandomBytes(rng, 40);
  }
}

FileRecord RandomRecord(std::mt19937_64& rng) {
  FileRecord r;
  r.id = {static_cast<uint32_t>(rng() >> (rng() % 33)), rng() >> (rng() % 64)};
  const size_t num_paths = rng() % 4;
  for (size_t i = 0; i < num_paths; ++i) r.paths.push_back("/" + RandomBytes(rng, 300));
  r.parent_ino = rng() >> (rng() % 64);
  const FileType types[] = {FileType::kRegular, FileType::kDirectory, FileType::kSymlink,
                            FileType::kOther};
  r.type = types[rng() % 4];
  r.size = rng() >> (rng() % 64);
  r.mtime = RandomI64(rng);
  r.ctime = RandomI64(rng);
  r.atime = RandomI64(rng);
  r.uid = static_cast<uint32_t>(rng() >> (rng() % 33));
  r.gid = static_cast<uint32_t>(rng() >> (rng() % 33));
  r.mode = static_cast<uint32_t>(rng());
  r.nlink = static_cast<uint32_t>(rng() >> (rng() % 33));
  const size_t num_attrs = rng() % 5;
  for (size_t i = 0; i < num_attrs; ++i) r.attrs[RandomBytes(rng, 12)] = RandomAttr(rng);
  if (rng() % 2) r.inode_generation = static_cast<uint32_t>(rng() >> (rng() % 33));
  return r;
}

Update RandomUpdate(std::mt19937_64& rng) {
  Update u;
  u.op = static_cast<UpdateOp>(1 + rng() % 5);
  u.acg = rng() >> (rng() % 64);
  u.record = RandomRecord(rng);
  u.edge_dst = {static_cast<uint32_t>(rng()), rng()};
  u.edge_weight = static_cast<uint32_t>(rng() >> (rng() % 33));
  if (rng() % 2) u.edge_dst_generation = static_cast<uint32_t>(rng() >> (rng() % 33));
  return u;
}

// The record used for golden bytes and for hand-built variants.
FileRecord FixedRecord() {
  FileRecord r;
  r.id = {7, 0x1234};
  r.paths = {"/a"};
  r.parent_ino = 1;
  r.type = FileType::kRegular;
  r.size = 300;
  r.mtime = 1700000000123456789;
  r.ctime = -5;
  r.atime = 0;
  r.uid = 1000;
  r.gid = 100;
  r.mode = 0100644;
  r.nlink = 1;
  r.attrs = {{"i", int64_t{-200}}, {"n", 2.0}, {"s", std::string("x")}};
  return r;
}

const char kFixedRecordHex[] =
    "9f"                  // array of 15
    "01"                  // version 1
    "07"                  // volume 7
    "cd1234"              // ino 0x1234 (uint16)
    "91a22f61"            // paths ["/a"]
    "01"                  // parent_ino 1
    "66"                  // type 'f'
    "cd012c"              // size 300
    "cf17979cfe3d85cd15"  // mtime 1700000000123456789 (uint64)
    "fb"                  // ctime -5 (negative fixint)
    "00"                  // atime 0
    "cd03e8"              // uid 1000
    "64"                  // gid 100
    "cd81a4"              // mode 0100644
    "01"                  // nlink 1
    "93"                  // attrs, 3 pairs sorted by name
    "92a169d1ff38"        //   ["i", -200 (int16)]
    "92a16ecb4000000000000000"  // ["n", 2.0 as float64, not as the integer 2]
    "92a173a178";         //   ["s", "x"]

// A record written field by field with msgpack-c, so tests can change, drop or append fields.
using Field = std::function<void(msgpack::packer<msgpack::sbuffer>&)>;

std::vector<Field> FixedRecordFields() {
  using P = msgpack::packer<msgpack::sbuffer>;
  return {
      [](P& p) { p.pack_uint32(1); },
      [](P& p) { p.pack_uint32(7); },
      [](P& p) { p.pack_uint64(0x1234); },
      [](P& p) {
        p.pack_array(1);
        p.pack(std::string("/a"));
      },
      [](P& p) { p.pack_uint64(1); },
      [](P& p) { p.pack_uint8('f'); },
      [](P& p) { p.pack_uint64(300); },
      [](P& p) { p.pack_int64(1700000000123456789); },
      [](P& p) { p.pack_int64(-5); },
      [](P& p) { p.pack_int64(0); },
      [](P& p) { p.pack_uint32(1000); },
      [](P& p) { p.pack_uint32(100); },
      [](P& p) { p.pack_uint32(0100644); },
      [](P& p) { p.pack_uint32(1); },
      [](P& p) {
        p.pack_array(3);
        p.pack_array(2);
        p.pack(std::string("i"));
        p.pack_int64(-200);
        p.pack_array(2);
        p.pack(std::string("n"));
        // pack_float/pack_double write whole numbers as integers; 2.5 stays a float32,
        // which a reader accepts as a double.
        p.pack_float(2.5f);
        p.pack_array(3);     // a pair with a trailing element: tolerated
        p.pack(std::string("s"));
        p.pack(std::string("x"));
        p.pack_nil();
      },
  };
}

std::string Build(const std::vector<Field>& fields) {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pk.pack_array(static_cast<uint32_t>(fields.size()));
  for (const Field& f : fields) f(pk);
  return std::string(buf.data(), buf.size());
}

std::string Encode(const FileRecord& r) {
  std::string s;
  EncodeRecord(r, &s);
  return s;
}

std::string Encode(const std::vector<Update>& batch) {
  std::string s;
  EncodeUpdateBatch(batch, &s);
  return s;
}

TEST(RecordFormatTest, RecordRoundTrip) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 3000; ++i) {
    const FileRecord r = RandomRecord(rng);
    std::string bytes = "prefix";  // Encode appends
    EncodeRecord(r, &bytes);
    ASSERT_EQ(bytes.substr(0, 6), "prefix");
    FileRecord back;
    back.paths = {"stale"};  // decoding replaces the whole record
    const Status s = DecodeRecord(std::string_view(bytes).substr(6), &back);
    ASSERT_TRUE(s.ok()) << s.ToString() << " at " << i;
    ASSERT_EQ(back, r) << "at " << i;
    // Same variant alternative for every attribute (2.0 stays a double, 2 an int).
    for (const auto& [name, value] : r.attrs) ASSERT_EQ(back.attrs[name].index(), value.index());
  }
}

TEST(RecordFormatTest, DoubleTypeIsPreserved) {
  FileRecord r;
  r.attrs = {{"d", 2.0},
             {"i", int64_t{2}},
             {"z", -0.0},
             {"nan", std::numeric_limits<double>::quiet_NaN()},
             {"big", 1e300}};
  FileRecord back;
  ASSERT_TRUE(DecodeRecord(Encode(r), &back).ok());
  ASSERT_TRUE(std::holds_alternative<double>(back.attrs["d"]));
  EXPECT_EQ(std::get<double>(back.attrs["d"]), 2.0);
  ASSERT_TRUE(std::holds_alternative<int64_t>(back.attrs["i"]));
  EXPECT_EQ(std::get<int64_t>(back.attrs["i"]), 2);
  ASSERT_TRUE(std::holds_alternative<double>(back.attrs["z"]));
  EXPECT_TRUE(std::signbit(std::get<double>(back.attrs["z"])));
  ASSERT_TRUE(std::holds_alternative<double>(back.attrs["nan"]));
  EXPECT_TRUE(std::isnan(std::get<double>(back.attrs["nan"])));
  EXPECT_EQ(std::get<double>(back.attrs["big"]), 1e300);
  // A whole-number float32 written by another writer is a double too.
  std::string hex = kFixedRecordHex;
  const size_t at = hex.find("cb4000000000000000");
  ASSERT_NE(at, std::string::npos);
  hex.replace(at, 18, "ca40000000");
  ASSERT_TRUE(DecodeRecord(Unhex(hex), &back).ok());
  EXPECT_EQ(back, FixedRecord());
}

TEST(RecordFormatTest, BatchRoundTrip) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 500; ++i) {
    std::vector<Update> batch(rng() % 8);
    for (Update& u : batch) u = RandomUpdate(rng);
    std::vector<Update> back = {Update{}};
    const Status s = DecodeUpdateBatch(Encode(batch), &back);
    ASSERT_TRUE(s.ok()) << s.ToString() << " at " << i;
    ASSERT_EQ(back, batch) << "at " << i;
  }
}

// The overload that takes the records' encodings (the engine's write cache already has them)
// writes exactly the bytes of the one that encodes them itself.
TEST(RecordFormatTest, BatchWithSuppliedRecordsIsIdentical) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (int round = 0; round < 200; ++round) {
    std::vector<Update> batch(rng() % 20);
    for (Update& u : batch) u = RandomUpdate(rng);
    std::vector<std::string> records(batch.size());
    for (size_t i = 0; i < batch.size(); ++i) {
      if (rng() % 3 != 0) records[i] = Encode(batch[i].record);  // else: encoded by the log
    }
    std::string plain, supplied;
    EncodeUpdateBatch(batch, &plain);
    EncodeUpdateBatch(
        batch, [&](size_t i) { return std::string_view(records[i]); }, &supplied);
    ASSERT_EQ(Hex(plain), Hex(supplied));
  }
}

TEST(RecordFormatTest, GoldenRecord) {
  EXPECT_EQ(Hex(Encode(FixedRecord())), kFixedRecordHex);
  FileRecord back;
  ASSERT_TRUE(DecodeRecord(Unhex(kFixedRecordHex), &back).ok());
  EXPECT_EQ(back, FixedRecord());
}

TEST(RecordFormatTest, GoldenBatch) {
  FileRecord target;
  target.id = {7, 5};
  Update del;
  del.op = UpdateOp::kDelete;
  del.acg = 9;
  del.record = target;
  Update edge;
  edge.op = UpdateOp::kAddEdge;
  edge.acg = 9;
  edge.record = target;
  edge.edge_dst = {7, 6};
  edge.edge_weight = 3;
  const std::vector<Update> batch = {del, edge};
  const std::string kRecord = "9f" "01" "07" "05" "90" "00" "66" "00" "00" "00" "00" "00" "00"
                              "00" "01" "90";  // defaults: nlink 1, type 'f', no paths/attrs
  const std::string expected = "92" "01"  // [version 1,
                               "92"       //  [
                               "96" "02" "09" + kRecord + "00" "00" "00" +  // delete, acg 9
                               "96" "05" "09" + kRecord + "07" "06" "03";   // edge -> {7,6} w 3
  EXPECT_EQ(Hex(Encode(batch)), expected);
  std::vector<Update> back;
  ASSERT_TRUE(DecodeUpdateBatch(Unhex(expected), &back).ok());
  EXPECT_EQ(back, batch);
  // The empty batch.
  EXPECT_EQ(Hex(Encode(std::vector<Update>())), "920190");
}

// The inode generation is appended as field 15 when it is known, and only then, so a record
// without one keeps its bytes (and a reader of 15 fields ignores it).
TEST(RecordFormatTest, GoldenGenerations) {
  FileRecord r = FixedRecord();
  r.inode_generation = 0x01020304;
  std::string hex = kFixedRecordHex;
  hex.replace(0, 2, "dc0010");  // array of 16 (array16: 16 does not fit a fixarray)
  hex += "ce01020304";          // generation (uint32)
  EXPECT_EQ(Hex(Encode(r)), hex);
  FileRecord back;
  ASSERT_TRUE(DecodeRecord(Unhex(hex), &back).ok());
  EXPECT_EQ(back, r);
  // The head decoder stops before it: generation 0, like paths and attrs left empty.
  back.inode_generation = 5;
  ASSERT_TRUE(DecodeRecordHead(Unhex(hex), &back).ok());
  EXPECT_EQ(back.inode_generation, 0u);
  // Not a uint32: Corruption naming the field.
  std::string bad = hex.substr(0, hex.size() - 10) + "cf0000000100000000";
  Status s = DecodeRecord(Unhex(bad), &back);
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_NE(s.message().find("generation"), std::string::npos) << s.ToString();

  Update edge;
  edge.op = UpdateOp::kAddEdge;
  edge.record.id = {7, 5};
  edge.edge_dst = {7, 6};
  edge.edge_weight = 1;
  edge.edge_dst_generation = 300;
  const std::string batch = Encode(std::vector<Update>{edge});
  // [1, [[5, 0, record, 7, 6, 1, 300]]]
  EXPECT_NE(Hex(batch).find("9705"), std::string::npos) << Hex(batch);
  EXPECT_EQ(Hex(batch).substr(Hex(batch).size() - 12), "070601cd012c");
  std::vector<Update> updates;
  ASSERT_TRUE(DecodeUpdateBatch(batch, &updates).ok());
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_EQ(updates[0], edge);
}

TEST(RecordFormatTest, HandBuiltRecordDecodes) {
  FileRecord expected = FixedRecord();
  expected.attrs["n"] = 2.5;
  FileRecord back;
  const Status s = DecodeRecord(Build(FixedRecordFields()), &back);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(back, expected);
}

TEST(RecordFormatTest, ForwardCompatibleTrailingFields) {
  using P = msgpack::packer<msgpack::sbuffer>;
  std::vector<Field> fields = FixedRecordFields();
  fields.push_back([](P& p) { p.pack_uint32(77); });  // field 15: the inode generation
  fields.push_back([](P& p) { p.pack(std::string("a future field")); });
  fields.push_back([](P& p) {
    p.pack_array(2);
    p.pack_uint32(1);
    p.pack_map(0);
  });
  FileRecord expected = FixedRecord();
  expected.attrs["n"] = 2.5;
  expected.inode_generation = 77;
  FileRecord back;
  Status s = DecodeRecord(Build(fields), &back);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(back, expected);

  // A batch and an update with trailing fields.
  const std::string rec = Build(fields);
  msgpack::sbuffer buf;
  P pk(buf);
  pk.pack_array(3);
  pk.pack_uint32(1);
  pk.pack_array(1);
  pk.pack_array(9);
  pk.pack_uint8(1);
  pk.pack_uint64(42);
  buf.write(rec.data(), rec.size());
  pk.pack_uint32(0);
  pk.pack_uint64(0);
  pk.pack_uint32(0);
  pk.pack_uint32(9);  // update field 6: the edge's destination generation
  pk.pack_true();     // update field 7
  pk.pack_nil();      // update field 8
  pk.pack(std::string("batch field 2"));
  std::vector<Update> updates;
  s = DecodeUpdateBatch(std::string_view(buf.data(), buf.size()), &updates);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_EQ(updates[0].op, UpdateOp::kPut);
  EXPECT_EQ(updates[0].acg, 42u);
  EXPECT_EQ(updates[0].record, expected);
  EXPECT_EQ(updates[0].edge_dst_generation, 9u);
}

TEST(RecordFormatTest, VersionChecks) {
  using P = msgpack::packer<msgpack::sbuffer>;
  for (uint32_t version : {0u, 3u, 1000u}) {
    std::vector<Field> fields = FixedRecordFields();
    fields[0] = [version](P& p) { p.pack_uint32(version); };
    FileRecord r;
    const Status s = DecodeRecord(Build(fields), &r);
    EXPECT_EQ(s.code(), StatusCode::kCorruption);
    EXPECT_NE(s.message().find("unsupported version " + std::to_string(version)),
              std::string::npos)
        << s.ToString();
  }
  for (const char* hex : {"920090", "920290", "92cd03e890"}) {  // batch versions 0, 2, 1000
    std::vector<Update> updates;
    const Status b = DecodeUpdateBatch(Unhex(hex), &updates);
    EXPECT_EQ(b.code(), StatusCode::kCorruption) << hex;
    EXPECT_NE(b.message().find("unsupported version"), std::string::npos) << b.ToString();
  }
  std::vector<Update> updates;
  EXPECT_TRUE(DecodeUpdateBatch(Unhex("920190"), &updates).ok());
  EXPECT_TRUE(updates.empty());
}

TEST(RecordFormatTest, FieldValidation) {
  using P = msgpack::packer<msgpack::sbuffer>;
  struct Case {
    size_t index;
    Field field;
    const char* what;
  };
  const std::vector<Case> cases = {
      {1, [](P& p) { p.pack_uint64(uint64_t{1} << 32); }, "volume"},
      {1, [](P& p) { p.pack_int64(-1); }, "volume"},
      {2, [](P& p) { p.pack(std::string("x")); }, "ino"},
      {3, [](P& p) { p.pack(std::string("/a")); }, "paths"},
      {3, [](P& p) { p.pack_array(1); p.pack_uint8(1); }, "paths"},
      {5, [](P& p) { p.pack_uint8('x'); }, "type"},
      {5, [](P& p) { p.pack_uint32(0x100 + 'f'); }, "type"},
      {7, [](P& p) { p.pack_uint64(uint64_t{1} << 63); }, "mtime"},
      {8, [](P& p) { p.pack_double(0.5); }, "ctime"},
      {10, [](P& p) { p.pack_uint64(uint64_t{1} << 32); }, "uid"},
      {13, [](P& p) { p.pack_nil(); }, "nlink"},
      {14, [](P& p) { p.pack_map(0); }, "attrs"},
      {14, [](P& p) { p.pack_array(1); p.pack_array(1); p.pack(std::string("a")); }, "attrs"},
      {14, [](P& p) { p.pack_array(1); p.pack_array(2); p.pack_uint8(1); p.pack_uint8(1); },
       "attrs"},
      {14, [](P& p) { p.pack_array(1); p.pack_array(2); p.pack(std::string("a")); p.pack_nil(); },
       "attrs"},
      {14, [](P& p) { p.pack_array(1); p.pack_array(2); p.pack(std::string("a"));
                      p.pack_uint64(uint64_t{1} << 63); }, "attrs"},
      {14, [](P& p) {
         p.pack_array(2);
         for (int i = 0; i < 2; ++i) {
           p.pack_array(2);
           p.pack(std::string("dup"));
           p.pack_uint8(1);
         }
       }, "attrs"},
  };
  for (const Case& c : cases) {
    std::vector<Field> fields = FixedRecordFields();
    fields[c.index] = c.field;
    FileRecord r;
    const Status s = DecodeRecord(Build(fields), &r);
    EXPECT_EQ(s.code(), StatusCode::kCorruption) << c.what;
    EXPECT_NE(s.message().find(c.what), std::string::npos) << s.ToString();
  }
  // Too few fields; not an array; trailing bytes; empty input.
  std::vector<Field> fields = FixedRecordFields();
  fields.pop_back();
  FileRecord r;
  EXPECT_EQ(DecodeRecord(Build(fields), &r).code(), StatusCode::kCorruption);
  EXPECT_EQ(DecodeRecord(Unhex("01"), &r).code(), StatusCode::kCorruption);
  EXPECT_EQ(DecodeRecord(Unhex(kFixedRecordHex) + "x", &r).code(), StatusCode::kCorruption);
  EXPECT_EQ(DecodeRecord("", &r).code(), StatusCode::kCorruption);
  // Update ops outside 1..5.
  for (const char* op : {"00", "06", "ff"}) {
    std::vector<Update> updates;
    const std::string bytes = Unhex(std::string("92019196") + op + "00" +
                                    "9f010705900066000000000000000190" + "000000");
    const Status s = DecodeUpdateBatch(bytes, &updates);
    EXPECT_EQ(s.code(), StatusCode::kCorruption) << op;
    EXPECT_NE(s.message().find("op"), std::string::npos) << s.ToString();
  }
  // The same bytes with op 1 decode, so the cases above fail for the op alone.
  std::vector<Update> updates;
  EXPECT_TRUE(DecodeUpdateBatch(Unhex("920191960100"
                                      "9f010705900066000000000000000190"
                                      "000000"),
                                &updates)
                  .ok());
}

TEST(RecordFormatTest, HugeClaimsFailFast) {
  // Headers claiming 4G elements or bytes: rejected by the unpack limits before allocating.
  const char* claims[] = {"dd ffffffff", "dbffffffff", "c6ffffffff", "dfffffffff",
                          "dd00010000" "01", "9f" "dd7fffffff"};
  for (const char* hex : claims) {
    std::string h;
    for (const char* p = hex; *p; ++p) if (*p != ' ') h.push_back(*p);
    FileRecord r;
    std::vector<Update> u;
    EXPECT_EQ(DecodeRecord(Unhex(h), &r).code(), StatusCode::kCorruption) << hex;
    EXPECT_EQ(DecodeUpdateBatch(Unhex(h), &u).code(), StatusCode::kCorruption) << hex;
  }
  // Deep nesting: 10k nested arrays.
  const std::string deep(10000, '\x91');
  FileRecord r;
  EXPECT_EQ(DecodeRecord(deep + "\x01", &r).code(), StatusCode::kCorruption);
}

// Garbage, truncations and bit flips: every result is OK or Corruption, and an OK result
// re-encodes to a decodable value. Runs >= 200k decodes of each decoder kind in total.
TEST(RecordFormatTest, GarbageNeverCrashes) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::vector<std::string> valid;
  for (int i = 0; i < 40; ++i) valid.push_back(Encode(RandomRecord(rng)));
  std::vector<std::string> valid_batches;
  for (int i = 0; i < 40; ++i) {
    std::vector<Update> batch(1 + rng() % 3);
    for (Update& u : batch) u = RandomUpdate(rng);
    valid_batches.push_back(Encode(batch));
  }
  size_t ok_count = 0;
  size_t runs = 0;
  auto check = [&](const std::string& bytes) {
    FileRecord r;
    const Status s = DecodeRecord(bytes, &r);
    ASSERT_TRUE(s.ok() || s.code() == StatusCode::kCorruption) << s.ToString();
    if (s.ok()) {
      ++ok_count;
      FileRecord again;
      ASSERT_TRUE(DecodeRecord(Encode(r), &again).ok());
    }
    std::vector<Update> u;
    const Status b = DecodeUpdateBatch(bytes, &u);
    ASSERT_TRUE(b.ok() || b.code() == StatusCode::kCorruption) << b.ToString();
    if (b.ok()) ++ok_count;
    ++runs;
  };
  auto mutate = [&](std::string s) {
    if (s.empty()) return s;
    switch (rng() % 4) {
      case 0:  // truncate
        s.resize(rng() % s.size());
        break;
      case 1: {  // 1-3 bit flips
        const int flips = 1 + static_cast<int>(rng() % 3);
        for (int i = 0; i < flips; ++i) s[rng() % s.size()] ^= static_cast<char>(1 << (rng() % 8));
        break;
      }
      case 2:  // a random byte
        s[rng() % s.size()] = static_cast<char>(rng());
        break;
      default:  // splice random bytes in
        s.insert(rng() % s.size(), RandomBytes(rng, 6));
    }
    return s;
  };
  for (int i = 0; i < 70000; ++i) {
    ASSERT_NO_FATAL_FAILURE(check(RandomBytes(rng, 48)));
    ASSERT_NO_FATAL_FAILURE(check(mutate(valid[rng() % valid.size()])));
    ASSERT_NO_FATAL_FAILURE(check(mutate(valid_batches[rng() % valid_batches.size()])));
  }
  // Every prefix of a few encodings.
  for (int k = 0; k < 3; ++k) {
    const std::string& v = valid_batches[k];
    for (size_t n = 0; n < v.size(); ++n) ASSERT_NO_FATAL_FAILURE(check(v.substr(0, n)));
  }
  EXPECT_GE(runs, 200000u);
  // Sanity: the mutation sweep is not rejecting everything for one trivial reason.
  EXPECT_GT(ok_count, 100u);
}

// Times beyond int64 nanoseconds (years 1 to 9999, before 1677 and after 2262) round-trip
// exactly through both decoders; a record whose times fit is still written as version 1
// (older readers read it), one that needs the wider form as version 2; the wider form in a
// version-1 record, or nanoseconds >= 10^9, is Corruption.
TEST(RecordFormatTest, TimesOfEveryYearRoundTrip) {
  auto date = [](int64_t sec, int64_t nsec) { return FileTimeOf(sec, nsec); };
  const FileTime times[] = {
      date(-62135596800, 0),            // 0001-01-01T00:00:00
      date(-14831769600, 123456789),    // 1500-01-01T00:00:00.123456789
      date(-631152000, 999999999),      // 1950-01-01T00:00:00.999999999
      date(-1, 999999999),              // 1969-12-31T23:59:59.999999999
      date(13569465600, 1),             // 2400-01-01T00:00:00.000000001
      date(253402300799, 999999999),    // 9999-12-31T23:59:59.999999999
      FileTime{INT64_MAX}, FileTime{INT64_MIN}, FileTime{INT64_MAX} + 1, FileTime{INT64_MIN} - 1};
  for (FileTime t : times) {
    SCOPED_TRACE(FileTimeToString(t));
    FileRecord r;
    r.id = FileId{1, 2};
    r.paths = {"/a"};
    r.mtime = t;
    r.ctime = 5;
    r.atime = -t;
    const std::string bytes = Encode(r);
    const bool wide = t > INT64_MAX || t < INT64_MIN || -t > INT64_MAX || -t < INT64_MIN;
    EXPECT_EQ(static_cast<uint8_t>(bytes[1]), wide ? 2 : 1);
    FileRecord fast, tree;
    ASSERT_TRUE(DecodeRecord(bytes, &fast).ok());
    EXPECT_EQ(fast, r);
    ASSERT_TRUE(msgpack_util::ParseAndDecode("record", bytes, bytes.size(),
                                             16,
                                             [&](const msgpack::object& o) {
                                               return msgpack_util::DecodeRecordObject(o, &tree);
                                             })
                    .ok());
    EXPECT_EQ(tree, r);
    EXPECT_EQ(FileTimeOf(FileTimeSeconds(t), FileTimeNanos(t)), t);
    EXPECT_GE(FileTimeNanos(t), 0);
    EXPECT_LT(FileTimeNanos(t), kNanosPerSecond);
  }
  // Version 1 with the wide form, and out-of-range nanoseconds, are refused.
  FileRecord r;
  r.id = FileId{1, 2};
  r.paths = {"/a"};
  r.mtime = FileTime{INT64_MAX} + 5;
  std::string bytes = Encode(r);
  std::string v1 = bytes;
  v1[1] = 1;
  FileRecord out;
  EXPECT_EQ(DecodeRecord(v1, &out).code(), StatusCode::kCorruption);
  const size_t at = bytes.find(static_cast<char>(0x92));  // the [sec, nsec] array
  ASSERT_NE(at, std::string::npos);
  std::string bad_ns = bytes;
  // nsec is the byte after the int64 seconds (0xd3 + 8 bytes); make it 0xce 0x3b9aca00 = 1e9.
  bad_ns.replace(at + 10, 1, std::string("\xce\x3b\x9a\xca\x00", 5));
  EXPECT_EQ(DecodeRecord(bad_ns, &out).code(), StatusCode::kCorruption);
}

// EncodeRecord writes with msgpack_util::Writer; msgpack-c's packer is the oracle for the
// bytes (smallest integer, string and array forms; doubles always float64), on random records
// and on every boundary of every form.
TEST(RecordFormatTest, EncoderMatchesMsgpackPacker) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  auto packer_encode = [](const FileRecord& r) {
    msgpack::sbuffer buf;
    msgpack::packer<msgpack::sbuffer> pk(buf);
    auto fits = [](FileTime t) { return t >= INT64_MIN && t <= INT64_MAX; };
    auto pack_time = [&](FileTime t) {
      if (fits(t)) {
        pk.pack_int64(static_cast<int64_t>(t));
      } else {
        pk.pack_array(2);
        pk.pack_int64(FileTimeSeconds(t));
        pk.pack_uint64(static_cast<uint64_t>(FileTimeNanos(t)));
      }
    };
    pk.pack_array(r.inode_generation != 0 ? 16 : 15);
    pk.pack_uint32(fits(r.mtime) && fits(r.ctime) && fits(r.atime) ? 1 : kRecordFormatVersion);
    pk.pack_uint32(r.id.volume);
    pk.pack_uint64(r.id.ino);
    pk.pack_array(static_cast<uint32_t>(r.paths.size()));
    for (const std::string& p : r.paths) pk.pack(p);
    pk.pack_uint64(r.parent_ino);
    pk.pack_uint8(static_cast<uint8_t>(r.type));
    pk.pack_uint64(r.size);
    pack_time(r.mtime);
    pack_time(r.ctime);
    pack_time(r.atime);
    pk.pack_uint32(r.uid);
    pk.pack_uint32(r.gid);
    pk.pack_uint32(r.mode);
    pk.pack_uint32(r.nlink);
    pk.pack_array(static_cast<uint32_t>(r.attrs.size()));
    for (const auto& [name, value] : r.attrs) {
      pk.pack_array(2);
      pk.pack(name);
      if (const auto* i = std::get_if<int64_t>(&value)) {
        pk.pack_int64(*i);
      } else if (const auto* d = std::get_if<double>(&value)) {
        uint64_t bits;
        std::memcpy(&bits, d, 8);
        char b[9] = {static_cast<char>(0xcb)};
        for (int k = 8; k >= 1; --k, bits >>= 8) b[k] = static_cast<char>(bits & 0xff);
        buf.write(b, 9);
      } else {
        pk.pack(std::get<std::string>(value));
      }
    }
    if (r.inode_generation != 0) pk.pack_uint32(r.inode_generation);
    return std::string(buf.data(), buf.size());
  };
  std::vector<FileRecord> records;
  for (int i = 0; i < 300; ++i) records.push_back(RandomRecord(rng));
  // Every boundary of the integer, string and array forms.
  const uint64_t kU[] = {0, 127, 128, 255, 256, 65535, 65536, 0xffffffffull, 0x100000000ull,
                         std::numeric_limits<uint64_t>::max()};
  const int64_t kI[] = {0, -1, -32, -33, -128, -129, -32768, -32769, -2147483648ll,
                        -2147483649ll, std::numeric_limits<int64_t>::min(), 127, 128, 65536,
                        std::numeric_limits<int64_t>::max()};
  const size_t kLen[] = {0, 31, 32, 255, 256, 65535, 65536};
  for (size_t k = 0; k < std::size(kU); ++k) {
    FileRecord r = FixedRecord();
    r.id.ino = kU[k];
    r.size = kU[k];
    r.parent_ino = kU[(k + 3) % std::size(kU)];
    r.uid = static_cast<uint32_t>(std::min<uint64_t>(kU[k], 0xffffffffull));
    r.id.volume = r.uid;
    records.push_back(r);
  }
  for (int64_t v : kI) {
    FileRecord r = FixedRecord();
    r.mtime = v;
    r.ctime = -v - 1;
    r.attrs["i"] = v;
    records.push_back(r);
  }
  for (size_t len : kLen) {
    FileRecord r = FixedRecord();
    r.paths = {"/" + std::string(len, 'p')};
    r.attrs[std::string(len, 'n')] = std::string(len, 'v');
    records.push_back(r);
  }
  for (size_t n : {15, 16, 65535, 65536}) {
    FileRecord r = FixedRecord();
    r.paths.clear();
    for (size_t k = 0; k < n; ++k) r.paths.push_back("/" + std::to_string(k));
    std::sort(r.paths.begin(), r.paths.end());
    records.push_back(r);
  }
  for (const FileRecord& r : records) {
    ASSERT_EQ(Hex(Encode(r)), Hex(packer_encode(r)));
    FileRecord back;
    ASSERT_TRUE(DecodeRecord(Encode(r), &back).ok());
  }
}

// DecodeRecord reads the bytes directly (msgpack_util::Reader); the tree-based decoder
// (msgpack-c's object tree + DecodeRecordObject, still used for records inside wire messages)
// is the oracle: on valid encodings, hand-built variants (other integer widths, float32,
// appended fields and pair elements, maps) and ~150k corrupted inputs, both must accept the
// same inputs and decode them to the same record — also when the output record already holds
// another record's strings (the direct decoder reuses them).
TEST(RecordFormatTest, DirectDecoderAgreesWithTreeDecoder) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  auto tree_decode = [](const std::string& bytes, FileRecord* r) {
    return msgpack_util::ParseAndDecode(
        "record", bytes, bytes.size(), 16,
        [r](const msgpack::object& o) { return msgpack_util::DecodeRecordObject(o, r); });
  };
  std::vector<std::string> inputs;
  for (int i = 0; i < 60; ++i) inputs.push_back(Encode(RandomRecord(rng)));
  {
    // Hand-built: every integer as int64/uint64 forms, a float32 attr, extra pair elements
    // (nested), appended record fields of every kind.
    msgpack::sbuffer buf;
    msgpack::packer<msgpack::sbuffer> pk(buf);
    pk.pack_array(20);
    buf.write("\xd3\x00\x00\x00\x00\x00\x00\x00\x01", 9);  // version 1 as int64
    buf.write("\xcf\x00\x00\x00\x00\x00\x00\x00\x07", 9);  // volume as uint64
    buf.write("\xd0\x05", 2);                                  // ino as int8
    pk.pack_array(2);
    pk.pack(std::string("/a/b"));
    pk.pack(std::string("/c"));
    pk.pack_uint64(3);
    pk.pack_uint8('f');
    buf.write("\xd1\x01\x00", 3);  // size 256 as int16
    buf.write("\xd0\xff", 2);      // mtime -1 as int8
    pk.pack_int64(std::numeric_limits<int64_t>::min());
    pk.pack_int64(std::numeric_limits<int64_t>::max());
    pk.pack_uint32(std::numeric_limits<uint32_t>::max());
    pk.pack_uint32(0);
    pk.pack_uint32(0755);
    pk.pack_uint32(1);
    pk.pack_array(3);
    pk.pack_array(2);
    pk.pack(std::string("f32"));
    pk.pack_float(1.5f);
    pk.pack_array(4);
    pk.pack(std::string("int"));
    pk.pack_int64(-5);
    pk.pack_map(1);
    pk.pack(1);
    pk.pack_array(0);
    pk.pack_nil();
    pk.pack_array(2);
    pk.pack(std::string("str"));
    pk.pack(std::string("value"));
    buf.write("\xcf\x00\x00\x00\x00\x00\x00\x00\x0c", 9);  // generation 12 as uint64
    pk.pack_nil();                      // appended field 16
    pk.pack_bin(3);
    pk.pack_bin_body("xyz", 3);         // 17
    pk.pack_map(2);                     // 18
    pk.pack(std::string("k"));
    pk.pack_array(1);
    pk.pack_true();
    pk.pack(2);
    pk.pack_double(2.25);
    buf.write("\xd6\x01\x00\x00\x00\x00", 6);  // 19: fixext 4
    inputs.emplace_back(buf.data(), buf.size());
  }
  size_t both_ok = 0;
  size_t checked = 0;
  auto check = [&](const std::string& bytes) {
    FileRecord want, got, reused = RandomRecord(rng);
    const Status ws = tree_decode(bytes, &want);
    const Status gs = DecodeRecord(bytes, &got);
    const Status rs = DecodeRecord(bytes, &reused);
    ++checked;
    ASSERT_EQ(ws.ok(), gs.ok()) << Hex(bytes) << "\n tree: " << ws.ToString()
                                << "\n direct: " << gs.ToString();
    ASSERT_EQ(gs.ok(), rs.ok());
    // DecodeRecordHead reads only the fields before attrs: it may accept a record whose tail
    // is bad, but never a bad head, and on a good record gives the record minus paths and attrs.
    FileRecord head = RandomRecord(rng);
    const Status hs = DecodeRecordHead(bytes, &head);
    if (!ws.ok()) {
      EXPECT_EQ(gs.code(), StatusCode::kCorruption) << gs.ToString();
      if (!hs.ok()) {
        EXPECT_EQ(hs.code(), StatusCode::kCorruption) << hs.ToString();
      }
      return;
    }
    ++both_ok;
    // Compared through their encodings: a NaN attribute is not == itself.
    ASSERT_EQ(Hex(Encode(want)), Hex(Encode(got))) << Hex(bytes);
    ASSERT_EQ(Hex(Encode(want)), Hex(Encode(reused))) << Hex(bytes);
    ASSERT_TRUE(hs.ok()) << Hex(bytes) << " " << hs.ToString();
    FileRecord want_head = want;
    want_head.paths.clear();
    want_head.attrs.clear();
    want_head.inode_generation = 0;
    ASSERT_EQ(Hex(Encode(want_head)), Hex(Encode(head))) << Hex(bytes);
  };
  for (const std::string& in : inputs) ASSERT_NO_FATAL_FAILURE(check(in));
  ASSERT_EQ(both_ok, inputs.size());  // every valid input decodes
  for (int i = 0; i < 50000; ++i) {
    std::string s = inputs[rng() % inputs.size()];
    switch (rng() % 4) {
      case 0:
        s.resize(rng() % s.size());
        break;
      case 1:
        for (int k = 0, n = 1 + static_cast<int>(rng() % 3); k < n; ++k) {
          s[rng() % s.size()] ^= static_cast<char>(1 << (rng() % 8));
        }
        break;
      case 2:
        s[rng() % s.size()] = static_cast<char>(rng());
        break;
      default:
        s.insert(rng() % s.size(), RandomBytes(rng, 6));
    }
    ASSERT_NO_FATAL_FAILURE(check(s));
  }
  // Deep nesting in an appended field: at the depth limit and one beyond it.
  for (int depth : {14, 15, 16}) {
    msgpack::sbuffer buf;
    msgpack::packer<msgpack::sbuffer> pk(buf);
    std::string base = Encode(FixedRecord());
    pk.pack_array(17);
    buf.write(base.data() + 1, base.size() - 1);  // the 15 fields of a fixarray(15) encoding
    pk.pack_uint32(3);                            // the generation
    for (int k = 0; k < depth; ++k) pk.pack_array(k + 1 < depth ? 1 : 0);
    ASSERT_NO_FATAL_FAILURE(check(std::string(buf.data(), buf.size())));
  }
  EXPECT_GT(both_ok, inputs.size() + 100);  // the mutations also produce valid records
  EXPECT_GE(checked, 50000u);
}


// ParseAndDecode keeps one msgpack zone per thread and clears it after each decode: a decode
// that parses again inside (nested) must not clear the outer object's memory (ASan would see
// it), big objects that need more than the first chunk must not disturb later ones, and a
// parse that throws must give the zone back.
TEST(RecordFormatTest, ParseAndDecodeReusesItsZoneAndNests) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  auto decode = [](const std::string& bytes, FileRecord* r) {
    return msgpack_util::ParseAndDecode(
        "record", bytes, bytes.size(), 16,
        [r](const msgpack::object& o) { return msgpack_util::DecodeRecordObject(o, r); });
  };
  const FileRecord outer = RandomRecord(rng);
  const FileRecord inner = RandomRecord(rng);
  const std::string outer_bytes = Encode(outer), inner_bytes = Encode(inner);
  FileRecord got_outer, got_inner;
  Status st = msgpack_util::ParseAndDecode(
      "record", outer_bytes, outer_bytes.size(), 16, [&](const msgpack::object& o) {
        // Parse and decode another record twice first (a shared zone cleared by the first
        // would be overwritten by the second), then read the outer object.
        for (int k = 0; k < 2; ++k) {
          Status s = decode(inner_bytes, &got_inner);
          if (!s.ok()) return s;
        }
        return msgpack_util::DecodeRecordObject(o, &got_outer);
      });
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(got_outer, outer);
  EXPECT_EQ(got_inner, inner);
  // Records of every size, some far beyond the zone's first 8 KiB chunk, one after another.
  for (int i = 0; i < 300; ++i) {
    FileRecord r = RandomRecord(rng);
    if (i % 7 == 0) {
      for (int p = 0; p < 400; ++p) r.paths.push_back("/big/" + std::to_string(p));
    }
    FileRecord back;
    ASSERT_TRUE(decode(Encode(r), &back).ok()) << i;
    ASSERT_EQ(back, r) << i;
  }
  // Nesting deeper than allowed throws inside msgpack-c (Corruption here); the zone is free
  // again afterwards.
  const Status too_deep = msgpack_util::ParseAndDecode(
      "record", outer_bytes, outer_bytes.size(), /*max_depth=*/1,
      [](const msgpack::object&) { return Status::OK(); });
  EXPECT_EQ(too_deep.code(), StatusCode::kCorruption) << too_deep.ToString();
  FileRecord again;
  ASSERT_TRUE(decode(outer_bytes, &again).ok());
  EXPECT_EQ(again, outer);
}

}  // namespace
}  // namespace propeller
