#include "client/cli/service_options.h"

#include <cstdlib>

#include "common/logging.h"

namespace propeller::cli {

std::string DefaultDataDir() {
  if (const char* x = std::getenv("XDG_DATA_HOME"); x != nullptr && *x == '/') {
    return std::string(x) + "/propeller";
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home == '/') {
    return std::string(home) + "/.local/share/propeller";
  }
  return "/var/lib/propeller";
}

Status ApplyLogLevelOption(const std::string& level) {
  if (level == "debug") {
    SetLogLevel(LogLevel::kDebug);
  } else if (level == "info") {
    SetLogLevel(LogLevel::kInfo);
  } else if (level == "warning") {
    SetLogLevel(LogLevel::kWarning);
  } else if (level == "error") {
    SetLogLevel(LogLevel::kError);
  } else {
    return Status::InvalidArgument("--log-level takes debug, info, warning or error");
  }
  return Status::OK();
}

Result<Durability> ParseDurabilityOption(const std::string& text) {
  if (text == "default") return Durability::kDefault;
  if (text == "sync") return Durability::kSync;
  return Status::InvalidArgument("--durability takes default or sync");
}

}  // namespace propeller::cli
