// Options of the long-running programs (propeller-master, propeller-indexnode, `propeller
// mount`), from the command line and from a TOML configuration file (docs/install.md,
// "Configuration files").
//
// Each program declares its options once, in a table of OptionSpec. The table drives the
// command-line parser, the configuration file reader (config_file.h) and the option list of
// --help, so an option cannot be settable in one place and missing from another. Both produce
// the same thing: an ordered list of OptionValue, each with where it came from. A program
// applies the file's values first and the command line's after them, so the command line wins.
//
// Threading: plain functions over values; any thread.
#ifndef PROPELLER_COMMON_DAEMON_OPTIONS_H_
#define PROPELLER_COMMON_DAEMON_OPTIONS_H_

#include <string>
#include <string_view>
#include <vector>

#include "common/logging.h"
#include "common/status.h"

namespace propeller::daemon {

// What a configuration file must write for an option (the command line always takes text).
enum class OptionKind {
  kFlag,     // no value on the command line; `key = true` / `key = false` in a file
  kString,   // --name TEXT; `key = "text"`
  kInteger,  // --name N; `key = 5000`
  kNumber,   // --name X (integer or decimal); `key = 1.5` or `key = 2`
};

enum class OptionScope {
  kEverywhere,        // command line and configuration file
  kCommandLineOnly,   // --config, --help and the fault-test hooks (--test-*), hidden from files
  kFileOnly,          // given by other means on the command line (a mount's BACKING, or the
                      // CLI's global options such as --master), so only the file spells it
};

struct OptionSpec {
  std::string_view name;        // long name without the dashes: "node-timeout-ms"
  OptionKind kind = OptionKind::kString;
  std::string_view value_name;  // in --help: "N", "DIR"; empty for flags
  std::string_view help;        // one paragraph for --help; empty = not listed (test hooks)
  // A valid value other than the default, as the command line writes it ("" for a flag):
  // what the tests set every option of every table to (tests/config_test.cc).
  std::string_view example;
  OptionScope scope = OptionScope::kEverywhere;
  bool repeated = false;        // may be given more than once (a file then writes an array)
};

// One option as given. `value` is the text the command line would carry ("" for a flag that is
// set; a flag set to false in a file yields no OptionValue at all).
struct OptionValue {
  std::string name;    // as in OptionSpec::name
  std::string value;
  std::string origin;  // "" for the command line, else "FILE:LINE"

  // How an error message names this option: "--name" from the command line, "FILE:LINE: name"
  // from a file.
  std::string Describe() const;
};

// The result of a command line: its options, in order, and the other arguments.
struct CommandLine {
  std::vector<OptionValue> options;
  std::vector<std::string> positional;
};

// Parses `args` (without the program and command names): "--name VALUE", "--name=VALUE",
// "--" ends the options. "-h" is taken as "--help" when the table has a "help" flag.
// InvalidArgument naming the option for an unknown option, a missing value, a value given to
// a flag, an option that only a file may set, or a repeated option that is not `repeated`.
// `allow_positional` false makes every other argument an error too.
Result<CommandLine> ParseCommandLine(const std::vector<OptionSpec>& specs,
                                     const std::vector<std::string>& args,
                                     bool allow_positional);

// The spec named `name`, or null.
const OptionSpec* FindOption(const std::vector<OptionSpec>& specs, std::string_view name);

// The closest name in `specs` to `name` (a typo of at most a third of its letters), or "".
std::string SuggestOption(const std::vector<OptionSpec>& specs, std::string_view name);

// The option list of --help: "  --name VALUE   help", wrapped at 96 columns, in table order,
// options without help left out.
std::string OptionHelp(const std::vector<OptionSpec>& specs);

// A whole number in [lo, hi], or InvalidArgument "WHAT wants a whole number from LO to HI,
// not 'TEXT'" (`what` is OptionValue::Describe()).
Result<long long> ParseIntOption(const std::string& what, const std::string& text, long long lo,
                                 long long hi);

// --log-level: debug, info, warning (or warn) or error; InvalidArgument naming `what` otherwise.
Result<LogLevel> ParseLogLevelOption(const std::string& what, const std::string& text);

// The options every long-running program spells and handles the same way, for their tables:
// --metrics-listen HOST:PORT (docs/metrics.md), --log-level LEVEL (SIGHUP re-reads it) and
// --help (command line only).
OptionSpec MetricsListenOption();
OptionSpec LogLevelOption();
OptionSpec HelpOption();

// Where a program keeps what the shared options above set.
struct SharedOptionTargets {
  std::string* metrics_listen = nullptr;
  LogLevel* log_level = nullptr;
};
// Applies `v` when it is --metrics-listen or --log-level (true), after checking its value
// (InvalidArgument naming it); false, changing nothing, for any other option.
Result<bool> ApplySharedOption(const OptionValue& v, const SharedOptionTargets& to);

}  // namespace propeller::daemon

#endif  // PROPELLER_COMMON_DAEMON_OPTIONS_H_
