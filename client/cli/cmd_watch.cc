// propeller watch QUERY [--scope DIR] [--json | -0] [--queue N]
#include <cstdio>
#include <string>

#include "client/cli/args.h"
#include "client/cli/commands.h"

namespace propeller::cli {
namespace {

constexpr const char* kWatchHelp = R"(usage: propeller watch QUERY [options]

Prints, as they happen, the changes to the set of files matching QUERY — one line each,
in the order the index applied them — until interrupted (Ctrl-C):
  + PATH   PATH started matching (created, renamed here, changed to match)
  - PATH   PATH stopped matching (deleted, renamed away, changed not to match)
  ~ PATH   PATH matches and its file changed (written, chmod, touched, ...)
A rename of a match prints '- OLD' then '+ NEW'. Each hard link is a path of its own.
  propeller watch 'ext=log & size>100m'
  propeller watch 'name~*.parquet' --scope /data/run42 --json

QUERY is the language of `propeller search` (docs/query.md). Ages are measured from the
moment the watch starts: 'mtime<1d' means changed within a day before it began; a file does
not stop matching by growing old. User attributes are not checked against the known names
(an attribute may appear after the watch begins).

Options:
  --scope DIR   only files under DIR (default: every indexed volume)
  --json        one JSON object per line: {"event":"+", "path":..., and the record}
  -0            'K PATH' entries ended by NUL instead of a newline (the exact bytes)
  --queue N     changes each index node may hold while this command is busy writing
                (default 10,000; at most 1,000,000)
"propeller watch: watching" is printed on stderr once every index node has registered the
watch: every change acknowledged after that line is reported. Changes you may not see (by
the tree's permissions) are not. A watch that falls behind — its output not read fast
enough — ends with an error saying so; it never skips changes silently.
Exit status: 0 when the output was closed, 1 error (bad query, cluster unreachable, fell
behind, a node stopped), 2 usage.
)";

}  // namespace

int RunWatch(const GlobalOptions& global, const std::vector<std::string>& argv) {
  auto args = Args::Parse(argv, {"--scope", "--queue"}, {"--json", "-0", "--help", "-h"});
  if (!args.ok()) return ReportError(args.status(), /*usage=*/true);
  if (args->Has("--help") || args->Has("-h")) {
    std::fputs(kWatchHelp, stdout);
    return kExitOk;
  }
  if (args->positional().size() != 1) {
    std::fputs("propeller: watch takes exactly one QUERY (quote it; see --help)\n", stderr);
    return kExitUsage;
  }
  if (args->Has("--json") && args->Has("-0")) {
    std::fputs("propeller: only one of --json and -0 (see --help)\n", stderr);
    return kExitUsage;
  }
  auto queue = args->GetUint("--queue", 0);
  if (!queue.ok()) return ReportError(queue.status(), /*usage=*/true);
  ClientWatchOptions options;
  options.max_queued = *queue;
  if (auto scope = args->Get("--scope")) {
    options.scope = ScopeArgument(*scope);
  } else {
    options.scope = DefaultScope(global);
  }
  auto client = ConnectOrReport(global);
  if (!client) return kExitError;

  const bool json = args->Has("--json"), nul = args->Has("-0");
  options.on_ready = [] {
    std::fputs("propeller watch: watching\n", stderr);
    std::fflush(stderr);
  };
  options.on_idle = [] { return !std::ferror(stdout); };
  std::string line;
  Status st = client->Watch(args->positional()[0], options, [&](const ClientWatchEvent& e) {
    if (json) {
      const std::string record = RecordJson(e.path, e.record);
      line = std::string("{\"event\":\"") + e.kind + "\"," + record.substr(1) + "\n";
    } else {
      line = std::string(1, e.kind) + " " + e.path + (nul ? '\0' : '\n');
    }
    std::fwrite(line.data(), 1, line.size(), stdout);
    std::fflush(stdout);
    return !std::ferror(stdout);  // a closed pipe ends the watch
  });
  if (std::ferror(stdout)) return kExitOk;
  return ReportError(st.ok() ? Status::Aborted("the watch ended") : st);
}

}  // namespace propeller::cli
