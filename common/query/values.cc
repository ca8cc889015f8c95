#include "common/query/values.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <chrono>
#include <cstdio>
#include <limits>
#include <system_error>

#include "common/query/query.h"

namespace propeller {
namespace query_internal {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

std::string AsciiLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

// Splits "12.5kb" into the integer digits "12", the fraction digits "5" and the rest "kb".
// A '.' not followed by a digit is left in the rest.
struct SplitNumber {
  std::string_view int_digits;
  std::string_view frac_digits;
  std::string_view rest;
};

SplitNumber Split(std::string_view text) {
  SplitNumber out;
  size_t i = 0;
  while (i < text.size() && IsDigit(text[i])) ++i;
  out.int_digits = text.substr(0, i);
  if (i + 1 < text.size() && text[i] == '.' && IsDigit(text[i + 1])) {
    const size_t start = i + 1;
    i = start;
    while (i < text.size() && IsDigit(text[i])) ++i;
    out.frac_digits = text.substr(start, i - start);
  }
  out.rest = text.substr(i);
  return out;
}

// floor(int_digits.frac_digits * mult), exactly: multiplies the decimal digit string by `mult`
// (schoolbook, right to left) and keeps the digits left of the point. A double would round
// 1.1g or 0.3s one unit off. REQUIRES: mult <= 2^59.
Result<uint64_t> ScaleDecimal(std::string_view int_digits, std::string_view frac_digits,
                              uint64_t mult) {
  std::string digits;
  digits.reserve(int_digits.size() + frac_digits.size());
  digits.append(int_digits).append(frac_digits);
  uint64_t carry = 0;  // stays <= mult, so each step fits in 64 bits
  for (size_t i = digits.size(); i-- > 0;) {
    const uint64_t t = static_cast<uint64_t>(digits[i] - '0') * mult + carry;
    digits[i] = static_cast<char>('0' + t % 10);
    carry = t / 10;
  }
  uint64_t value = carry;
  for (size_t i = 0; i < int_digits.size(); ++i) {
    if (__builtin_mul_overflow(value, uint64_t{10}, &value) ||
        __builtin_add_overflow(value, static_cast<uint64_t>(digits[i] - '0'), &value)) {
      return Status::InvalidArgument("number out of range");
    }
  }
  return value;
}

struct Unit {
  const char* name;
  uint64_t mult;
};

constexpr uint64_t kKi = 1024;
constexpr Unit kSizeUnits[] = {
    {"", 1},           {"b", 1},
    {"k", kKi},        {"kb", kKi},        {"kib", kKi},
    {"m", kKi << 10},  {"mb", kKi << 10},  {"mib", kKi << 10},
    {"g", kKi << 20},  {"gb", kKi << 20},  {"gib", kKi << 20},
    {"t", kKi << 30},  {"tb", kKi << 30},  {"tib", kKi << 30},
    {"p", kKi << 40},  {"pb", kKi << 40},  {"pib", kKi << 40},
};

constexpr uint64_t kS = kNanosPerSecond;
constexpr Unit kAgeUnits[] = {
    {"s", kS},           {"sec", kS},          {"secs", kS},
    {"second", kS},      {"seconds", kS},
    {"min", 60 * kS},    {"mins", 60 * kS},    {"minute", 60 * kS},  {"minutes", 60 * kS},
    {"h", 3600 * kS},    {"hr", 3600 * kS},    {"hrs", 3600 * kS},
    {"hour", 3600 * kS}, {"hours", 3600 * kS},
    {"d", 86400 * kS},   {"day", 86400 * kS},  {"days", 86400 * kS},
    {"w", 7 * 86400 * kS}, {"week", 7 * 86400 * kS}, {"weeks", 7 * 86400 * kS},
    {"y", 365 * 86400 * kS}, {"yr", 365 * 86400 * kS}, {"yrs", 365 * 86400 * kS},
    {"year", 365 * 86400 * kS}, {"years", 365 * 86400 * kS},
};

template <size_t N>
std::optional<uint64_t> FindUnit(const Unit (&units)[N], std::string_view unit) {
  const std::string lower = AsciiLower(unit);
  for (const Unit& u : units) {
    if (lower == u.name) return u.mult;
  }
  return std::nullopt;
}

// Reads exactly `n` digits at text[*i]; advances *i.
bool ReadFixedDigits(std::string_view text, size_t* i, int n, int* out) {
  if (*i + n > text.size()) return false;
  int v = 0;
  for (int k = 0; k < n; ++k) {
    const char c = text[*i + k];
    if (!IsDigit(c)) return false;
    v = v * 10 + (c - '0');
  }
  *i += n;
  *out = v;
  return true;
}

bool ReadChar(std::string_view text, size_t* i, char a, char b = 0) {
  if (*i < text.size() && (text[*i] == a || (b != 0 && text[*i] == b))) {
    ++*i;
    return true;
  }
  return false;
}

}  // namespace

std::string QuoteForMessage(std::string_view text) {
  constexpr size_t kMaxShown = 48;
  size_t n = text.size();
  bool cut = false;
  if (n > kMaxShown) {
    n = kMaxShown;
    // Back off to the start of a UTF-8 sequence so the message stays valid UTF-8.
    while (n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;
    cut = true;
  }
  std::string out = "'";
  for (size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  if (cut) out += "...";
  out += "'";
  return out;
}

Result<int64_t> ParseAgeNanos(std::string_view text) {
  const SplitNumber num = Split(text);
  if (num.int_digits.empty()) return Status::InvalidArgument("not an age");
  if (num.rest.empty()) return Status::InvalidArgument("age needs a unit, e.g. 1d");
  if (AsciiLower(num.rest) == "m") {
    return Status::InvalidArgument("ambiguous unit " + QuoteForMessage(num.rest) +
                                   " for a time: use 'min' for minutes");
  }
  const std::optional<uint64_t> mult = FindUnit(kAgeUnits, num.rest);
  if (!mult) {
    return Status::InvalidArgument("unknown unit " + QuoteForMessage(num.rest) +
                                   " for a time (use s, min, h, d, w or y)");
  }
  PROPELLER_ASSIGN_OR_RETURN(uint64_t ns, ScaleDecimal(num.int_digits, num.frac_digits, *mult));
  if (ns > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return Status::InvalidArgument("number out of range");
  }
  return static_cast<int64_t>(ns);
}

bool LooksLikeDate(std::string_view text) {
  if (text.size() < 5 || text[4] != '-') return false;
  for (int i = 0; i < 4; ++i) {
    if (!IsDigit(text[i])) return false;
  }
  return true;
}

Result<FileTime> ParseDateNanos(std::string_view text) {
  const Status bad_format = Status::InvalidArgument(
      "invalid date " + QuoteForMessage(text) +
      ": use YYYY-MM-DD, YYYY-MM-DDTHH:MM or YYYY-MM-DDTHH:MM:SS (UTC)");
  size_t i = 0;
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  int64_t frac_ns = 0;
  if (!ReadFixedDigits(text, &i, 4, &year) || !ReadChar(text, &i, '-') ||
      !ReadFixedDigits(text, &i, 2, &month) || !ReadChar(text, &i, '-') ||
      !ReadFixedDigits(text, &i, 2, &day)) {
    return bad_format;
  }
  if (ReadChar(text, &i, 'T', 't')) {
    if (!ReadFixedDigits(text, &i, 2, &hour) || !ReadChar(text, &i, ':') ||
        !ReadFixedDigits(text, &i, 2, &minute)) {
      return bad_format;
    }
    if (ReadChar(text, &i, ':')) {
      if (!ReadFixedDigits(text, &i, 2, &second)) return bad_format;
      if (ReadChar(text, &i, '.')) {
        int ndigits = 0;
        while (i < text.size() && IsDigit(text[i]) && ndigits < 9) {
          frac_ns = frac_ns * 10 + (text[i] - '0');
          ++i;
          ++ndigits;
        }
        if (ndigits == 0 || (i < text.size() && IsDigit(text[i]))) return bad_format;
        for (; ndigits < 9; ++ndigits) frac_ns *= 10;
      }
    }
    ReadChar(text, &i, 'Z', 'z');
  }
  if (i != text.size()) return bad_format;

  const std::chrono::year_month_day ymd{std::chrono::year{year},
                                        std::chrono::month{static_cast<unsigned>(month)},
                                        std::chrono::day{static_cast<unsigned>(day)}};
  if (!ymd.ok() || hour > 23 || minute > 59 || second > 59) {
    return Status::InvalidArgument("invalid date " + QuoteForMessage(text));
  }
  if (year < 1) {
    return Status::InvalidArgument("date " + QuoteForMessage(text) +
                                   " is out of range (years 0001 to 9999)");
  }
  const int64_t days = std::chrono::sys_days{ymd}.time_since_epoch().count();
  // 128 bits (FileTime): years 1 to 9999 at nanosecond precision.
  return static_cast<FileTime>(days) * kNanosPerDay +
         static_cast<FileTime>(hour * 3600 + minute * 60 + second) * kNanosPerSecond + frac_ns;
}

std::string FormatDateNanos(FileTime ns) {
  __int128 days = ns / kNanosPerDay;
  __int128 rem = ns % kNanosPerDay;
  if (rem < 0) {
    rem += kNanosPerDay;
    days -= 1;
  }
  const std::chrono::year_month_day ymd{
      std::chrono::sys_days{std::chrono::days{static_cast<int64_t>(days)}}};
  const int64_t secs = static_cast<int64_t>(rem / kNanosPerSecond);
  int64_t frac = static_cast<int64_t>(rem % kNanosPerSecond);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%04d-%02u-%02uT%02d:%02d:%02d", static_cast<int>(ymd.year()),
                static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
                static_cast<int>(secs / 3600), static_cast<int>(secs / 60 % 60),
                static_cast<int>(secs % 60));
  std::string out = buf;
  if (frac != 0) {
    int width = 9;
    while (frac % 10 == 0) {
      frac /= 10;
      --width;
    }
    std::snprintf(buf, sizeof(buf), ".%0*lld", width, static_cast<long long>(frac));
    out += buf;
  }
  return out;
}

Result<uint64_t> ParseDecimal(std::string_view text, uint64_t max) {
  if (text.empty()) return Status::InvalidArgument("not a number");
  for (char c : text) {
    if (!IsDigit(c)) return Status::InvalidArgument("not a number");
  }
  uint64_t v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size() || v > max) {
    return Status::InvalidArgument("number out of range");
  }
  return v;
}

Result<int64_t> ParseMode(std::string_view text) {
  // Always octal, as chmod and find -perm take modes: "644" is 0644 (an earlier version read
  // it as decimal, which matched nothing anyone meant).
  constexpr uint64_t kMaxMode = 07777;
  if (text.empty()) return Status::InvalidArgument("not a number");
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '7') {
      return Status::InvalidArgument("expected an octal mode such as 644 or 0755, got " +
                                     QuoteForMessage(text));
    }
    v = v * 8 + static_cast<uint64_t>(c - '0');
    if (v > kMaxMode) {
      return Status::InvalidArgument("mode " + QuoteForMessage(text) +
                                     " has bits beyond the permission bits (at most 07777)");
    }
  }
  return static_cast<int64_t>(v);
}

FileTime DateUnitNanos(std::string_view text) {
  const size_t t = text.find_first_of("Tt");
  if (t == std::string_view::npos) return kNanosPerDay;
  const size_t dot = text.find('.', t);
  if (dot != std::string_view::npos) {
    size_t digits = 0;
    while (dot + 1 + digits < text.size() && text[dot + 1 + digits] >= '0' &&
           text[dot + 1 + digits] <= '9') {
      ++digits;
    }
    FileTime unit = 1;
    for (size_t i = digits; i < 9; ++i) unit *= 10;
    return unit;
  }
  const size_t colons = static_cast<size_t>(std::count(text.begin() + t, text.end(), ':'));
  return colons >= 2 ? FileTime{kNanosPerSecond} : FileTime{60 * kNanosPerSecond};
}

Result<std::shared_ptr<const CompiledRegex>> CompileRegex(const std::string& pattern,
                                                          bool icase) {
  if (pattern.find('\0') != std::string::npos) {
    return Status::InvalidArgument("a regular expression cannot contain NUL");
  }
  auto re = std::make_shared<CompiledRegex>();
  const int rc = regcomp(&re->re, pattern.c_str(),
                         REG_EXTENDED | REG_NOSUB | (icase ? REG_ICASE : 0));
  if (rc != 0) {
    char why[256];
    regerror(rc, &re->re, why, sizeof(why));
    // Nothing was allocated; a zeroed regex_t is what regfree (the destructor) accepts.
    std::memset(&re->re, 0, sizeof(re->re));
    return Status::InvalidArgument("invalid regular expression " + QuoteForMessage(pattern) +
                                   ": " + why);
  }
  return std::shared_ptr<const CompiledRegex>(std::move(re));
}

Status ParseNumberLiteral(std::string_view text, bool* is_number, AttrValue* value) {
  *is_number = false;
  size_t i = 0;
  if (i < text.size() && text[i] == '-') ++i;
  const size_t int_start = i;
  while (i < text.size() && IsDigit(text[i])) ++i;
  if (i == int_start) return Status::OK();
  bool is_double = false;
  if (i < text.size() && text[i] == '.') {
    const size_t start = ++i;
    while (i < text.size() && IsDigit(text[i])) ++i;
    if (i == start) return Status::OK();
    is_double = true;
  }
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
    const size_t start = i;
    while (i < text.size() && IsDigit(text[i])) ++i;
    if (i == start) return Status::OK();
    is_double = true;
  }
  if (i != text.size()) return Status::OK();

  *is_number = true;
  const char* first = text.data();
  const char* last = text.data() + text.size();
  if (!is_double) {
    int64_t v = 0;
    const auto [ptr, ec] = std::from_chars(first, last, v);
    if (ec != std::errc() || ptr != last) return Status::InvalidArgument("number out of range");
    *value = v;
    return Status::OK();
  }
  double d = 0;
  const auto [ptr, ec] = std::from_chars(first, last, d);
  if (ec != std::errc() || ptr != last) return Status::InvalidArgument("number out of range");
  *value = d;
  return Status::OK();
}

std::string FormatDouble(double v) {
  char buf[64];
  const auto [ptr, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  std::string out(buf, ec == std::errc() ? ptr : buf);
  if (out.find_first_of(".e") == std::string::npos) out += ".0";
  return out;
}

}  // namespace query_internal

Result<uint64_t> ParseSize(std::string_view text) {
  using query_internal::QuoteForMessage;
  const query_internal::SplitNumber num = query_internal::Split(text);
  if (num.int_digits.empty()) {
    return Status::InvalidArgument("expected a size such as 10, 1.5g or 16MiB, got " +
                                   QuoteForMessage(text));
  }
  const std::optional<uint64_t> mult = query_internal::FindUnit(query_internal::kSizeUnits,
                                                                num.rest);
  if (!mult) {
    return Status::InvalidArgument("unknown unit " + QuoteForMessage(num.rest) + " for size");
  }
  return query_internal::ScaleDecimal(num.int_digits, num.frac_digits, *mult);
}

}  // namespace propeller
