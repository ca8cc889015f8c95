// Live-query messages (watch_messages.h): golden bytes, the compatibility rule, and hostile
// input (wrong kinds, truncations, garbage) that must give Corruption, never a crash.
#include "schemas/watch_messages.h"

#include <gtest/gtest.h>

#include <string>

#include "common/random.h"

namespace propeller::wire {
namespace {

std::string Hex(const std::string& s) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

std::string Unhex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  }
  return out;
}

bool SameEvents(const WatchEventsChunk& a, const WatchEventsChunk& b) {
  if (a.events.size() != b.events.size()) return false;
  for (size_t i = 0; i < a.events.size(); ++i) {
    const WatchEvent& x = a.events[i];
    const WatchEvent& y = b.events[i];
    if (x.kind != y.kind || x.path != y.path || !(x.record == y.record) || x.acg != y.acg) {
      return false;
    }
  }
  return true;
}

TEST(WatchMessagesTest, RequestGoldenBytes) {
  WatchRequest req;
  req.query = "a";
  std::string bytes;
  Encode(req, &bytes);
  // [ "a", "/", nil, nil, 0, 0, [] ]
  EXPECT_EQ(Hex(bytes), "97" "a161" "a12f" "c0" "c0" "00" "00" "90");
  WatchRequest back;
  ASSERT_TRUE(Decode(bytes, &back).ok());
  EXPECT_EQ(back.query, "a");
  EXPECT_EQ(back.scope, "/");
  // Only the query is required; later fields keep their defaults, unknown ones are ignored.
  ASSERT_TRUE(Decode(Unhex("91" "a162"), &back).ok());
  EXPECT_EQ(back.query, "b");
  EXPECT_EQ(back.max_queued, 0u);
  ASSERT_TRUE(Decode(Unhex("98" "a162" "a12f" "07" "c0" "00" "05" "90" "c3"), &back).ok());
  EXPECT_EQ(back.volume, std::optional<uint32_t>(7));
  EXPECT_EQ(back.max_queued, 5u);
  EXPECT_FALSE(Decode(Unhex("90"), &back).ok());
}

TEST(WatchMessagesTest, EventsRoundTripEveryKindAndByte) {
  WatchEventsChunk chunk;
  for (WatchKind kind : {WatchKind::kAdded, WatchKind::kRemoved, WatchKind::kChanged}) {
    WatchEvent e;
    e.kind = kind;
    e.path = "/d/";
    for (int b = 1; b < 256; ++b) {
      if (b != '/') e.path += static_cast<char>(b);  // every byte a name may hold
    }
    e.record.id = {3, 99};
    e.record.paths = {e.path};
    e.record.size = 12345;
    e.acg = 42;
    chunk.events.push_back(e);
  }
  chunk.unknown_attrs = {"sise", "prjo"};
  std::string bytes;
  Encode(chunk, &bytes);
  WatchEventsChunk back;
  const Status s = Decode(bytes, &back);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(SameEvents(chunk, back));
  EXPECT_EQ(back.unknown_attrs, chunk.unknown_attrs);
  // A frame of a 1.5 node (events only) decodes with no unknown names.
  WatchEventsChunk old;
  ASSERT_TRUE(Decode(Unhex("91" "90"), &old).ok());
  EXPECT_TRUE(old.events.empty());
  EXPECT_TRUE(old.unknown_attrs.empty());
  EXPECT_EQ(WatchKindSymbol(WatchKind::kAdded), '+');
  EXPECT_EQ(WatchKindSymbol(WatchKind::kRemoved), '-');
  EXPECT_EQ(WatchKindSymbol(WatchKind::kChanged), '~');
}

TEST(WatchMessagesTest, BadKindIsCorruption) {
  WatchEventsChunk chunk;
  chunk.events.emplace_back();
  chunk.events[0].record.id = {1, 1};
  std::string bytes;
  Encode(chunk, &bytes);
  // [[[kind, ...]]]: the kind is the first byte after the three array headers.
  for (char kind : {char{0}, char{4}, char{0x7f}}) {
    std::string bad = bytes;
    bad[3] = kind;
    WatchEventsChunk back;
    const Status s = Decode(bad, &back);
    EXPECT_EQ(s.code(), StatusCode::kCorruption);
    EXPECT_NE(s.message().find("kind"), std::string::npos) << s.ToString();
  }
}

TEST(WatchMessagesTest, HostileBytesNeverCrash) {
  WatchEventsChunk chunk;
  for (int i = 0; i < 3; ++i) {
    WatchEvent e;
    e.path = "/f" + std::to_string(i);
    e.record.id = {1, static_cast<uint64_t>(i + 1)};
    e.record.paths = {e.path};
    chunk.events.push_back(e);
  }
  std::string good;
  Encode(chunk, &good);
  Random rnd(7);
  for (int round = 0; round < 20000; ++round) {
    std::string bad = good;
    const int flips = 1 + static_cast<int>(rnd.Uniform(4));
    for (int f = 0; f < flips; ++f) {
      bad[rnd.Uniform(static_cast<uint32_t>(bad.size()))] = static_cast<char>(rnd.Uniform(256));
    }
    if (rnd.OneIn(3)) bad.resize(rnd.Uniform(static_cast<uint32_t>(bad.size())));
    WatchEventsChunk back;
    (void)Decode(bad, &back);  // any status; no crash, no hang
    WatchRequest req;
    (void)Decode(bad, &req);
  }
}

}  // namespace
}  // namespace propeller::wire
