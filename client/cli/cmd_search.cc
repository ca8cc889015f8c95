// propeller search QUERY [--scope DIR] [--limit N] [--sort ATTR [--desc]]
//                        [--count | --long | --format FMT | --json | -0] [--stats]
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "client/cli/args.h"
#include "client/cli/commands.h"

namespace propeller::cli {
namespace {

constexpr const char* kSearchHelp = R"(usage: propeller search QUERY [options]

Prints the indexed files matching QUERY, one path per line:
  propeller search 'size>1g & mtime<1d'
  propeller search 'keyword=firefox & mtime<1w' --scope /home/ann --sort size --desc
  propeller search 'ext=parquet' -0 | xargs -0 ls -l

QUERY: ATTR OP VALUE, combined with & (or ,), |, ! and parentheses.
  ATTR   size mtime ctime atime uid/user/owner gid/group mode perm nlink type
         name iname path ipath ext keyword, or a user attribute (attr set, index create)
  OP     = != < <= > >=, ~ (glob, or substring without * ? [), =~ (regular expression)
  VALUE  sizes 10k 16m 1g; ages 30s 10min 2h 1d 1w 1y (mtime<1d: less than a day ago);
         dates 2024-05-01[T12:00] UTC (mtime=2024-05-01: that day); octal modes 644;
         perm=-220 (all bits) perm=/111 (any); "quoted strings"
  An unknown attribute is an error ('sise>1m': did you mean size?). The full reference,
  with examples: docs/query.md.

Options:
  --scope DIR     only files under DIR (default: every indexed volume)
  --limit N       at most N results (default: all)
  --sort ATTR     order by size, mtime, ctime, atime, uid, gid, path or name
  --desc          descending order (needs --sort)
  --count         print only the number of matches
  --long          size, mtime and path per line
  --format FMT    each match as FMT says, as find -printf does: %p path, %f name,
                  %h directory, %s size, %m mode (octal), %u %g owner and group names,
                  %U %G their numbers, %n links, %y type (f d l o), %t mtime (local, as
                  find), %T@ mtime in seconds, %% a percent sign; \n \t \0 \\ escapes
  --json          one JSON object per line (path, volume, ino, type, size, times, owner,
                  mode, attrs); bytes that are not UTF-8 are written as \udcXX
  -0              NUL-separated paths, for xargs -0 (the exact bytes)
  --stats         print nodes, partitions searched and skipped, and time on stderr
Only one of --count, --long, --format, --json and -0.
Results contain only files you could find by walking the tree with your permissions.
Exit status: 0 (also with no matches), 1 error (bad query, cluster unreachable), 2 usage.
)";

}  // namespace

int RunSearch(const GlobalOptions& global, const std::vector<std::string>& argv) {
  auto args = Args::Parse(argv, {"--scope", "--limit", "--sort", "--format"},
                          {"--json", "-0", "--desc", "--long", "--count", "--stats", "--help",
                           "-h"});
  if (!args.ok()) return ReportError(args.status(), /*usage=*/true);
  if (args->Has("--help") || args->Has("-h")) {
    std::fputs(kSearchHelp, stdout);
    return kExitOk;
  }
  if (args->positional().size() != 1) {
    std::fputs("propeller: search takes exactly one QUERY (quote it; see --help)\n", stderr);
    return kExitUsage;
  }
  int forms = 0;
  for (const char* f : {"--count", "--long", "--format", "--json", "-0"}) forms += args->Has(f);
  if (forms > 1) {
    std::fputs("propeller: only one of --count, --long, --format, --json and -0 (see --help)\n",
               stderr);
    return kExitUsage;
  }
  if (args->Has("--desc") && !args->Has("--sort")) {
    std::fputs("propeller: --desc needs --sort ATTR (see --help)\n", stderr);
    return kExitUsage;
  }
  std::optional<Format> format;
  if (auto f = args->Get("--format")) {
    Result<Format> parsed = Format::Parse(*f);
    if (!parsed.ok()) return ReportError(parsed.status(), /*usage=*/true);
    format = std::move(*parsed);
  }
  auto limit = args->GetUint("--limit", 0);
  if (!limit.ok()) return ReportError(limit.status(), /*usage=*/true);
  ClientSearchOptions options;
  options.limit = *limit;
  options.sort_by = args->GetOr("--sort", "");
  options.descending = args->Has("--desc");
  if (auto scope = args->Get("--scope")) {
    options.scope = ScopeArgument(*scope);
  } else {
    options.scope = DefaultScope(global);
  }
  auto client = ConnectOrReport(global);
  if (!client) return kExitError;

  const bool json = args->Has("--json"), nul = args->Has("-0"), lng = args->Has("--long");
  const bool count = args->Has("--count");
  uint64_t matches = 0;
  std::string line;
  ClientSearchStats stats;
  const auto start = std::chrono::steady_clock::now();
  Status st = client->Search(
      args->positional()[0], options,
      [&](const ClientHit& hit) {
        ++matches;
        if (count) return true;
        if (format) {
          line.clear();
          format->Append(hit.path, hit.record, &line);
          std::fwrite(line.data(), 1, line.size(), stdout);
        } else if (json) {
          std::string line = RecordJson(hit.path, hit.record);
          std::fprintf(stdout, "%s\n", line.c_str());
        } else if (nul) {
          std::fwrite(hit.path.data(), 1, hit.path.size(), stdout);
          std::fputc('\0', stdout);
        } else if (lng) {
          std::fprintf(stdout, "%12llu  %s  %s\n",
                       static_cast<unsigned long long>(hit.record.size),
                       FormatTime(hit.record.mtime).c_str(), hit.path.c_str());
        } else {
          std::fprintf(stdout, "%s\n", hit.path.c_str());
        }
        return !std::ferror(stdout);  // a closed pipe (| head) ends the search
      },
      &stats);
  if (st.ok() && count) std::fprintf(stdout, "%llu\n", static_cast<unsigned long long>(matches));
  std::fflush(stdout);
  if (!st.ok()) return ReportError(st);
  if (args->Has("--stats")) {
    const double ms = std::chrono::duration<double, std::milli>(
                          std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "%s from %s; %s, %llu skipped by summaries; %s verified; %.2f ms\n",
                 Counted(stats.hits, "hit").c_str(), Counted(stats.nodes, "node").c_str(),
                 Counted(stats.acgs_total, "partition").c_str(),
                 static_cast<unsigned long long>(stats.acgs_skipped),
                 Counted(stats.candidates, "candidate").c_str(), ms);
  }
  return kExitOk;
}

}  // namespace propeller::cli
