#include "common/json.h"

#include <cstdio>

namespace propeller {
namespace {

// Length of the valid UTF-8 sequence at s[i], or 0. Strict (RFC 3629): no overlong forms, no
// surrogates (U+D800-U+DFFF), nothing above U+10FFFF — so a surrogate in the JSON output can
// only be an escaped byte (JsonString).
size_t Utf8Length(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  const size_t n = c >= 0xF0 && c <= 0xF4   ? 4
                   : c >= 0xE0 && c <= 0xEF ? 3
                   : c >= 0xC2 && c <= 0xDF ? 2
                                            : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 0;
  }
  const auto c1 = static_cast<unsigned char>(s[i + 1]);
  if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 >= 0xA0) || (c == 0xF0 && c1 < 0x90) ||
      (c == 0xF4 && c1 >= 0x90)) {
    return 0;
  }
  return n;
}

}  // namespace

std::string JsonString(std::string_view s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
      ++i;
    } else if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
      ++i;
    } else if (c < 0x80) {
      out += static_cast<char>(c);
      ++i;
    } else if (size_t n = Utf8Length(s, i); n != 0) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      // A byte that is not UTF-8 becomes the lone surrogate U+DC00+byte (Python's
      // "surrogateescape"): no text can hold one, so nothing is lost or confused with a
      // character (docs/cli.md "Search output"); os.fsencode(json.loads(line)["path"])
      // gives the bytes back.
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", 0xDC00 + c);
      out += buf;
      ++i;
    }
  }
  return out + "\"";
}

}  // namespace propeller
