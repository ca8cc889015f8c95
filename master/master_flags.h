// The options of propeller-master (docs/cluster.md), from its command line and its
// configuration file (/etc/propeller/master.toml by default; common/daemon/config_file.h).
// propeller-master and `propeller config check` both call ParseMasterFlags, so a checked file is
// one the master accepts.
//
// Threading: plain functions; any thread.
#ifndef PROPELLER_MASTER_MASTER_FLAGS_H_
#define PROPELLER_MASTER_MASTER_FLAGS_H_

#include <string>
#include <vector>

#include "common/daemon/config_file.h"
#include "common/logging.h"
#include "common/status.h"
#include "master/master_server.h"

namespace propeller::master {

inline constexpr char kDefaultMasterConfig[] = "/etc/propeller/master.toml";

struct MasterFlags {
  MasterOptions options;
  LogLevel log_level = LogLevel::kInfo;
  std::string metrics_listen;               // --metrics-listen HOST:PORT; "" = none
  std::string config_file;                  // the file read; "" when none
  std::vector<daemon::OptionValue> values;  // every option as given (file, then command line)
  bool help = false;                        // print MasterHelp() and exit; nothing else is set
};

// The option table: every option of the master, once.
const std::vector<daemon::OptionSpec>& MasterOptionSpecs();

// Parses the master's arguments (without the program name) and its configuration file:
// `--config FILE`, else `default_config` when it exists ("" = none). Values of the command line
// win over the file's. Errors: InvalidArgument naming the option ("--threads ..." or
// "FILE:LINE: threads ...") for unknown or malformed options and contradictions (exit 2);
// NotFound / IOError when --config's file cannot be read (exit 1).
Result<MasterFlags> ParseMasterFlags(const std::vector<std::string>& args,
                                     const std::string& default_config = kDefaultMasterConfig);

// The text of --help.
std::string MasterHelp();

}  // namespace propeller::master

#endif  // PROPELLER_MASTER_MASTER_FLAGS_H_
