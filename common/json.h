// JSON text for arbitrary bytes: what every JSON output of Propeller (the CLI's --json, the
// engine tool's, the status pages) writes strings with.
#ifndef PROPELLER_COMMON_JSON_H_
#define PROPELLER_COMMON_JSON_H_

#include <string>
#include <string_view>

namespace propeller {

// A JSON string literal (quotes included) of arbitrary bytes: valid UTF-8 (strict: no
// overlong forms, no surrogates, nothing above U+10FFFF) as it is; '"' and '\\' escaped;
// control characters as \u00XX; every other byte B as the lone surrogate \uDCBB (Python's
// "surrogateescape"). The output is valid JSON, and no character can be mistaken for an
// escaped byte, so the bytes come back exactly (docs/cli.md "Search output").
std::string JsonString(std::string_view bytes);

}  // namespace propeller

#endif  // PROPELLER_COMMON_JSON_H_
