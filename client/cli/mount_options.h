// The options of `propeller mount` (client/cli/cmd_mount.cc), from its command line and from a
// configuration file (`--config FILE`; the propeller-mount@NAME unit reads
// /etc/propeller/mount-NAME.toml; common/daemon/config_file.h). A file also holds what the
// command line gives otherwise: BACKING and MOUNTPOINT (`backing`, `mountpoint`) and the
// CLI's global options (`master`, `timeout-ms`, `cluster-key`, `curve-key`, `server-key`,
// `insecure`). The command line wins over the file; a mount has no default file.
// `propeller mount` and `propeller config check` both call ParseMountFlags.
//
// Threading: plain functions; any thread.
#ifndef PROPELLER_CLIENT_CLI_MOUNT_OPTIONS_H_
#define PROPELLER_CLIENT_CLI_MOUNT_OPTIONS_H_

#include <set>
#include <string>
#include <vector>

#include "client/lib/propeller.h"
#include "common/daemon/config_file.h"
#include "common/logging.h"
#include "common/status.h"
#include "indexnode/engine.h"

namespace propeller::cli {

struct MountFlags {
  std::string backing;     // as written, not resolved yet
  std::string mountpoint;  // as written
  std::string data;        // "" = the default ($XDG_DATA_HOME/propeller/mount, ...)
  Durability durability = Durability::kDefault;
  double cache_timeout_s = 1.0;
  int threads = 10;
  int64_t poll_us = 50;
  size_t dir_cache = 256;
  int64_t index_timeout_ms = 2000;
  int64_t search_wait_ms = 2000;
  std::string ready_file;  // "" = none
  LogLevel log_level = LogLevel::kInfo;
  std::string metrics_listen;  // --metrics-listen HOST:PORT; "" = none
  bool writeback = false;
  bool passthrough = true;
  bool import = true;
  bool reconcile = true;
  bool capture = true;
  bool allow_other = true;
  bool debug = false;
  ClientOptions client;    // the global options, the command line's over the file's

  std::string config_file;                  // the file read; "" when none
  std::vector<daemon::OptionValue> values;  // every option as given (file, then command line)
  bool help = false;                        // print MountHelp() and exit
};

// The option table: every option of `propeller mount`, once (the file-only keys included).
const std::vector<daemon::OptionSpec>& MountOptionSpecs();

// Parses `args` (after `mount`) and the --config file. `global` holds the global options the
// command line gave, and `global_given` their names ("master", "timeout-ms", ...): those win
// over the file's. Errors: InvalidArgument naming the option (exit 2), NotFound / IOError when
// the --config file cannot be read (exit 1). BACKING and MOUNTPOINT are required but not
// looked at (the mount resolves and checks them).
Result<MountFlags> ParseMountFlags(const ClientOptions& global,
                                   const std::set<std::string>& global_given,
                                   const std::vector<std::string>& args);

// The text of `propeller mount --help`.
std::string MountHelp();

}  // namespace propeller::cli

#endif  // PROPELLER_CLIENT_CLI_MOUNT_OPTIONS_H_
