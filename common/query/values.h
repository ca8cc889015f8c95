// Conversions between value text and numbers for the query language (private to common/query/):
// sizes with units, ages, UTC dates, numeric literals. Each returns InvalidArgument with a
// message that the parser prefixes with the value's position ("error at N: <message>").
// Pure functions; thread-safe.
#ifndef PROPELLER_COMMON_QUERY_VALUES_H_
#define PROPELLER_COMMON_QUERY_VALUES_H_

#include <regex.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/record.h"
#include "common/status.h"

namespace propeller {

struct CompiledRegex {
  regex_t re;
  explicit CompiledRegex() = default;
  CompiledRegex(const CompiledRegex&) = delete;
  CompiledRegex& operator=(const CompiledRegex&) = delete;
  ~CompiledRegex() { regfree(&re); }
  // Whether the expression matches somewhere in `text` (which may hold any bytes but NUL).
  bool Search(std::string_view text) const {
    regmatch_t span[1];
    span[0].rm_so = 0;
    span[0].rm_eo = static_cast<regoff_t>(text.size());
    return regexec(&re, text.data(), 1, span, REG_STARTEND) == 0;
  }
};

}  // namespace propeller

namespace propeller::query_internal {

inline constexpr int64_t kNanosPerDay = 86'400 * kNanosPerSecond;

// "'text'" for messages: cut after 48 bytes (never inside a UTF-8 sequence), control bytes
// shown as \xNN.
std::string QuoteForMessage(std::string_view text);

// An age such as "30s", "1.5h", "2weeks" in nanoseconds (fractions truncated). Units (ASCII
// case-insensitive): s sec secs second seconds, min mins minute minutes, h hr hrs hour hours,
// d day days, w week weeks, y yr yrs year years (365 days). Errors: "age needs a unit, e.g. 1d",
// "ambiguous unit 'm' for a time: use 'min' for minutes", "unknown unit 'x' for a time (...)",
// "number out of range" (over ~292 years), and "not an age" when `text` does not start with a
// digit (the caller words that one).
Result<int64_t> ParseAgeNanos(std::string_view text);

// True when `text` starts like a date ("dddd-"), so date errors beat age errors.
bool LooksLikeDate(std::string_view text);

// A UTC date: YYYY-MM-DD, YYYY-MM-DDTHH:MM, YYYY-MM-DDTHH:MM:SS, the last optionally with a
// fraction of up to 9 digits (.5, .123456789); 't' for 'T' and a trailing 'Z' are accepted.
// Returns nanoseconds since the epoch. Errors: "invalid date 'x'" (impossible field values,
// such as month 13 or February 30), "invalid date 'x': use ..." (bad format), "date 'x' is out
// of range" (outside what int64 nanoseconds can hold: 1677-09-21 to 2262-04-11).
Result<FileTime> ParseDateNanos(std::string_view text);

// The inverse of ParseDateNanos for any int64: "YYYY-MM-DDTHH:MM:SS" plus ".fraction" (trailing
// zeros dropped) when the nanoseconds are not zero.
std::string FormatDateNanos(FileTime ns);

// A non-negative decimal integer no larger than `max`. Errors: "number out of range", and
// "not a number" when `text` is not all digits.
Result<uint64_t> ParseDecimal(std::string_view text, uint64_t max);

// A file mode, always octal as chmod takes it (644, 0644); at most 07777. Errors: "not a
// number" (empty), "expected an octal mode ..." and "mode 'x' has bits beyond ...".
Result<int64_t> ParseMode(std::string_view text);

// The length of the unit a date written as `text` names: a day for YYYY-MM-DD, a minute for
// ...THH:MM, a second for ...:SS, 10^-n s for n digits of fraction.
// REQUIRES: ParseDateNanos(text) succeeded.
FileTime DateUnitNanos(std::string_view text);

// Compiles a POSIX extended regular expression for `=~`. Errors: "invalid regular expression
// 'x': <regerror's words>".
Result<std::shared_ptr<const CompiledRegex>> CompileRegex(const std::string& pattern,
                                                          bool icase);

// A numeric literal -?D+(.D+)?([eE][+-]?D+)?: int64 without fraction or exponent, else double.
// Sets *is_number to whether `text` has that form (else it is a string and *value is left
// alone); "number out of range" when it has but does not fit.
Status ParseNumberLiteral(std::string_view text, bool* is_number, AttrValue* value);

// Renders a double so that ParseNumberLiteral reads back the same double (always with a '.'
// or an exponent, so it is not taken for an integer). REQUIRES: finite.
std::string FormatDouble(double v);

}  // namespace propeller::query_internal

#endif  // PROPELLER_COMMON_QUERY_VALUES_H_
