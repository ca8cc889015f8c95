// The propeller CLI's commands (docs/architecture.md §9). Each takes its arguments after the
// command name and returns the process exit code: 0 success, 1 runtime error (printed as one line
// on stderr: "propeller: <what went wrong>"), 2 usage error.
#ifndef PROPELLER_CLIENT_CLI_COMMANDS_H_
#define PROPELLER_CLIENT_CLI_COMMANDS_H_

#include <map>
#include <set>
#include <string>
#include <vector>

#include "client/lib/propeller.h"
#include "common/json.h"
#include "common/status.h"

namespace propeller::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;
inline constexpr int kExitUsage = 2;

// Options shared by every command that talks to a cluster.
struct GlobalOptions {
  ClientOptions client;
  // The global options the command line gave, without dashes ("master", "timeout-ms"): they
  // win over a mount's configuration file (mount_options.h).
  std::set<std::string> given;
};

int RunSearch(const GlobalOptions& global, const std::vector<std::string>& args);
int RunFind(const GlobalOptions& global, const std::vector<std::string>& args);
int RunIndex(const GlobalOptions& global, const std::vector<std::string>& args);
int RunAttr(const GlobalOptions& global, const std::vector<std::string>& args);
int RunStatus(const GlobalOptions& global, const std::vector<std::string>& args);
int RunImport(const GlobalOptions& global, const std::vector<std::string>& args);
int RunUp(const GlobalOptions& global, const std::vector<std::string>& args);
int RunMount(const GlobalOptions& global, const std::vector<std::string>& args);
int RunAcg(const GlobalOptions& global, const std::vector<std::string>& args);
int RunVolume(const GlobalOptions& global, const std::vector<std::string>& args);
int RunWatch(const GlobalOptions& global, const std::vector<std::string>& args);
// `propeller config check FILE [--for master|indexnode|mount]` (cmd_config.cc).
int RunConfig(const GlobalOptions& global, const std::vector<std::string>& args);

// Prints "propeller: <status message>" and returns kExitError (kExitUsage for
// InvalidArgument raised by argument parsing — callers pass usage=true).
int ReportError(const Status& status, bool usage = false);
// Connects or reports; null on failure (already reported).
std::unique_ptr<Client> ConnectOrReport(const GlobalOptions& global);

// `search --format`: find -printf's common directives over a hit (see kSearchHelp).
class Format {
 public:
  // InvalidArgument naming an unknown directive or escape, or a trailing '%' or '\'.
  static Result<Format> Parse(std::string_view text);
  void Append(const std::string& path, const FileRecord& record, std::string* out) const;

 private:
  struct Piece {
    char directive = 0;   // 0: literal text
    std::string literal;
  };
  // The user or group name of `id` (its number when there is none), looked up once.
  const std::string& NameOf(uint32_t id, bool user) const;
  std::vector<Piece> pieces_;
  mutable std::map<uint32_t, std::string> users_, groups_;
};
// "1 partition", "2 partitions": a count with its noun, singular or plural (`plural` when
// not the noun plus "s").
std::string Counted(uint64_t n, std::string_view noun, std::string_view plural = "");
// "2024-05-01T12:00:00Z" (UTC) for nanoseconds since the epoch.
std::string FormatTime(FileTime ns);
// The absolute path a --scope argument names: a real directory resolved as the volume roots
// were at import (symlinks, ".."), a path that does not exist here taken as written (relative
// to the working directory when it is relative).
std::string ScopeArgument(const std::string& arg);
// The scope of a search or watch given no --scope: the mount point of the Propeller mount the
// working directory is in, when no service was named (--master, $PROPELLER_MASTER), so that a
// plain search from inside a mount prints, and matches, the paths the user sees there
// (docs/cli.md "Global options"); "" (every volume of the service) otherwise.
std::string DefaultScope(const GlobalOptions& global);
// A record as one JSON object (path first).
std::string RecordJson(const std::string& path, const FileRecord& r);

}  // namespace propeller::cli

#endif  // PROPELLER_CLIENT_CLI_COMMANDS_H_
