// JsonString: valid JSON for any bytes, and the bytes back by the documented rule (an
// independent decoder here: \uDCxx is byte xx, \u00xx below 0x80 the byte, UTF-8 as is).
#include "common/json.h"

#include <gtest/gtest.h>

#include <string>

#include "common/random.h"

namespace propeller {
namespace {

// Decodes a JsonString literal by the rule of common/json.h. Fails the test on anything the
// writer never produces.
std::string Decode(const std::string& lit) {
  EXPECT_GE(lit.size(), 2u);
  EXPECT_EQ(lit.front(), '"');
  EXPECT_EQ(lit.back(), '"');
  std::string out;
  for (size_t i = 1; i + 1 < lit.size(); ++i) {
    const auto c = static_cast<unsigned char>(lit[i]);
    EXPECT_TRUE(c >= 0x20 && c != 0x7F && c != '"') << "raw byte " << int{c};
    if (c != '\\') {
      out += static_cast<char>(c);
      continue;
    }
    const char e = lit[++i];
    if (e == '"' || e == '\\') {
      out += e;
      continue;
    }
    EXPECT_EQ(e, 'u');
    const unsigned cp = static_cast<unsigned>(std::stoul(lit.substr(i + 1, 4), nullptr, 16));
    i += 4;
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else {
      EXPECT_TRUE(cp >= 0xDC80 && cp <= 0xDCFF) << std::hex << cp;
      out += static_cast<char>(cp - 0xDC00);
    }
  }
  return out;
}

// Whether `s` is strict UTF-8 (RFC 3629), decoded by hand.
bool StrictUtf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    const int n = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : c >= 0xC0 ? 1 : -1;
    if (n < 0 || c > 0xF4 || i + static_cast<size_t>(n) >= s.size()) return false;
    uint32_t cp = c & (0x3F >> n);
    for (int k = 1; k <= n; ++k) {
      const auto d = static_cast<unsigned char>(s[i + static_cast<size_t>(k)]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    const uint32_t min = n == 1 ? 0x80 : n == 2 ? 0x800 : 0x10000;
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += static_cast<size_t>(n) + 1;
  }
  return true;
}

TEST(JsonStringTest, EveryByteComesBack) {
  for (int b = 0; b < 256; ++b) {
    const std::string s = std::string("a") + static_cast<char>(b) + "z";
    const std::string lit = JsonString(s);
    EXPECT_EQ(Decode(lit), s) << b;
    EXPECT_TRUE(StrictUtf8(lit)) << b;
  }
  EXPECT_EQ(JsonString("\xff"), "\"\\udcff\"");  // not U+00FF (ÿ), which is text
  EXPECT_EQ(JsonString("\xc3\xbf"), "\"\xc3\xbf\"");  // ÿ itself stays ÿ
}

TEST(JsonStringTest, OnlyStrictUtf8PassesAsIs) {
  // Overlong '/', an encoded surrogate (U+DCFF), and a code point above U+10FFFF: bytes.
  for (const std::string bad : {"\xc0\xaf", "\xe0\x80\xaf", "\xed\xb3\xbf", "\xf4\x90\x80\x80",
                                "\xf5\x80\x80\x80", "\xe2\x82"}) {
    const std::string lit = JsonString(bad);
    EXPECT_EQ(Decode(lit), bad);
    EXPECT_EQ(lit.find('\xed'), std::string::npos);
    EXPECT_NE(lit.find("\\udc"), std::string::npos) << lit;
  }
  for (const std::string good : {"\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xed\x9f\xbf",
                                 "\xf4\x8f\xbf\xbf", "caf\xc3\xa9"}) {
    EXPECT_EQ(JsonString(good), "\"" + good + "\"");
  }
}

TEST(JsonStringTest, RandomBytesRoundTrip) {
  Random rnd(42);
  for (int i = 0; i < 20000; ++i) {
    std::string s(rnd.Uniform(12), '\0');
    for (char& c : s) c = static_cast<char>(rnd.Uniform(256));
    const std::string lit = JsonString(s);
    ASSERT_EQ(Decode(lit), s);
    ASSERT_TRUE(StrictUtf8(lit));
  }
}

}  // namespace
}  // namespace propeller
