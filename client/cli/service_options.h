// Options shared by the commands that run the embedded service (`up`, `mount`): where it keeps
// its data, how much it logs and how durable its acknowledgements are.
#ifndef PROPELLER_CLIENT_CLI_SERVICE_OPTIONS_H_
#define PROPELLER_CLIENT_CLI_SERVICE_OPTIONS_H_

#include <string>

#include "common/status.h"
#include "indexnode/engine.h"

namespace propeller::cli {

// $XDG_DATA_HOME/propeller, else ~/.local/share/propeller, else /var/lib/propeller.
std::string DefaultDataDir();
// Sets the process's log level from --log-level (debug, info, warning, error);
// InvalidArgument for anything else.
Status ApplyLogLevelOption(const std::string& level);
// --durability: "default" or "sync"; InvalidArgument for anything else.
Result<Durability> ParseDurabilityOption(const std::string& text);

}  // namespace propeller::cli

#endif  // PROPELLER_CLIENT_CLI_SERVICE_OPTIONS_H_
