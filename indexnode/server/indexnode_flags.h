// The options of propeller-indexnode (docs/cluster.md), from its command line and its
// configuration file (/etc/propeller/indexnode.toml by default, or --config: a host with
// several nodes gives each its own, as the propeller-indexnode@ unit does;
// common/daemon/config_file.h). propeller-indexnode and `propeller config check` both call
// ParseIndexNodeFlags, so a checked file is one the node accepts.
//
// Threading: plain functions; any thread.
#ifndef PROPELLER_INDEXNODE_SERVER_INDEXNODE_FLAGS_H_
#define PROPELLER_INDEXNODE_SERVER_INDEXNODE_FLAGS_H_

#include <string>
#include <vector>

#include "common/daemon/config_file.h"
#include "common/logging.h"
#include "common/status.h"
#include "indexnode/server/node_server.h"

namespace propeller {

inline constexpr char kDefaultIndexNodeConfig[] = "/etc/propeller/indexnode.toml";

struct IndexNodeFlags {
  // With the fault-test hooks of --test-hold-in-split and --test-hold-in-migrate set.
  IndexNodeOptions options;
  LogLevel log_level = LogLevel::kInfo;
  std::string metrics_listen;               // --metrics-listen HOST:PORT; "" = none
  std::string config_file;                  // the file read; "" when none
  std::vector<daemon::OptionValue> values;  // every option as given (file, then command line)
  bool help = false;                        // print IndexNodeHelp() and exit
};

// The option table: every option of the index node, once.
const std::vector<daemon::OptionSpec>& IndexNodeOptionSpecs();

// Parses the node's arguments (without the program name) and its configuration file:
// `--config FILE`, else `default_config` when it exists ("" = none); the command line wins.
// Errors: InvalidArgument naming the option (exit 2); NotFound / IOError when --config's file
// cannot be read (exit 1).
Result<IndexNodeFlags> ParseIndexNodeFlags(
    const std::vector<std::string>& args,
    const std::string& default_config = kDefaultIndexNodeConfig);

// The text of --help.
std::string IndexNodeHelp();

}  // namespace propeller

#endif  // PROPELLER_INDEXNODE_SERVER_INDEXNODE_FLAGS_H_
