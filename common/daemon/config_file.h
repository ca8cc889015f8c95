// Configuration files of the long-running programs: /etc/propeller/*.toml (docs/install.md,
// "Configuration files"). A file is flat TOML whose keys are the long option names of the
// program's table (options.h) without the dashes:
//
//     data = "/var/lib/propeller/master"     # --data /var/lib/propeller/master
//     node-timeout-ms = 5000                 # --node-timeout-ms 5000
//     insecure = false                       # a flag: true sets it, false leaves it out
//
// Reading one yields the options the command line would carry, each with its FILE:LINE, so a
// program checks a file's values with the same code as its command line, and `propeller config
// check` validates exactly what the program would accept.
//
// Threading: plain functions; any thread.
#ifndef PROPELLER_COMMON_DAEMON_CONFIG_FILE_H_
#define PROPELLER_COMMON_DAEMON_CONFIG_FILE_H_

#include <string>
#include <vector>

#include "common/daemon/options.h"
#include "common/status.h"

namespace propeller::daemon {

// Reads `path` against `specs`. Returns its options in file order, with origin "PATH:LINE".
// Errors: NotFound or IOError when the file cannot be read; InvalidArgument "PATH:LINE: ..."
// for a TOML syntax error, a table ([section]), an unknown key (with the closest known name),
// a key only the command line takes, or a value of the wrong type (a string where a number
// belongs, an array for an option given once, ...). Values themselves (ranges, endpoints) are
// checked by the program, which names the same FILE:LINE.
Result<std::vector<OptionValue>> ReadConfigFile(const std::vector<OptionSpec>& specs,
                                                const std::string& path);

// A program's options: those of its configuration file, then those of its command line.
struct LoadedOptions {
  std::string config_file;          // the file read; "" when none
  std::vector<OptionValue> values;  // file first, command line last (later ones win)
  std::vector<std::string> positional;
  bool help = false;                // --help or -h was given: print help, read no file
};

// Parses `args` with `specs`, which must have the command-line-only options "config" and
// "help". The file is `--config FILE` when given, else `default_config` when that is not
// empty and exists (a missing default file is fine; a missing --config file is not).
// A repeated option given on the command line replaces the file's values of it.
// Errors: those of ParseCommandLine and ReadConfigFile; InvalidArgument for an empty --config.
Result<LoadedOptions> LoadOptions(const std::vector<OptionSpec>& specs,
                                  const std::vector<std::string>& args,
                                  const std::string& default_config, bool allow_positional);

}  // namespace propeller::daemon

#endif  // PROPELLER_COMMON_DAEMON_CONFIG_FILE_H_
