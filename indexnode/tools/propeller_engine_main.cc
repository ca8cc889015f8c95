// propeller-engine: the single-node engine from the command line — import a tree, search it,
// manage indexes, show statistics. The index-node daemon and the full `propeller` CLI (cluster
// issue) build on the same Engine; this tool is how the engine is used on its own today.
//
// Exit codes: 0 success, 1 the operation failed (message on stderr), 2 bad usage.
#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/logging.h"
#include "indexnode/engine.h"
#include "indexnode/tools/tree_import.h"

namespace propeller {
namespace {

constexpr char kUsage[] = R"(usage: propeller-engine [OPTIONS] COMMAND [ARGS]

Single-node Propeller engine: real-time metadata indexing and search.

Commands:
  import TREE              index every file under TREE (paths are stored relative to TREE)
  search QUERY             print the paths matching QUERY, e.g. 'size>1m & mtime<1d'
  stats                    partitions, files, memory and disk use
  compact                  rewrite the store's files with full pages and no free ones (after
                           a bulk load or many deletes; needs room for a copy of the largest
                           shard)
  index create NAME TYPE   create a user index (TYPE: btree, hash) fed by attribute NAME
  index list               list indexes
  index drop NAME          drop a user index
  demo [TREE]              index TREE (default /usr/share) into a fresh temporary data
                           directory, run a few searches and print them

Options:
  --data DIR               data directory (default: $PROPELLER_DATA, else ~/.propeller/engine)
  --durability LEVEL       default (fsync every 10 ms) or sync (fsync before acknowledging)
  --scope PATH             search: only under PATH (absolute, relative to the imported TREE)
  --limit N                search: at most N results
  --sort KEY [--desc]      search: order by size, mtime, ctime, atime, uid, gid, path or name
  --json                   search: one JSON object per line
  -0                       search: NUL-separated paths (for xargs -0)
  --stats                  search: print planner statistics to stderr
  -h, --help               this help

Query language (docs/query.md): attr op value, combined with & (or ,), |, ! and parentheses.
  attrs: size mtime ctime atime uid/user/owner gid/group mode perm nlink type name iname
         path ipath ext keyword <user attribute>
  ops:   = != < <= > >= ~ (glob or substring) =~ (regular expression)
  values: 10k 16m 1g; ages 30s 10min 2h 1d 1w 1y; dates 2024-05-01[T12:00] (= is that day);
          octal modes 644; perm=-220 (all bits) perm=/111 (any bit); "quoted strings"
Exit codes: 0 success, 1 failure, 2 bad usage.
)";

struct Args {
  std::string data;
  Durability durability = Durability::kDefault;
  SearchRequest search;
  bool json = false;
  bool nul = false;
  bool stats = false;
  std::vector<std::string> rest;
};

int Usage(const std::string& msg) {
  std::fprintf(stderr, "propeller-engine: %s\nTry 'propeller-engine --help'.\n", msg.c_str());
  return 2;
}

int Fail(const Status& s) {
  std::fprintf(stderr, "propeller-engine: %s\n", s.ToString().c_str());
  return 1;
}

std::string DefaultDataDir() {
  if (const char* d = std::getenv("PROPELLER_DATA"); d && *d) return d;
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : ".") + "/.propeller/engine";
}

void PrintHit(const SearchHit& h, const Args& a) {
  if (a.nul) {
    std::fwrite(h.path.data(), 1, h.path.size(), stdout);
    std::fputc('\0', stdout);
  } else if (a.json) {
    const FileRecord& r = h.record;
    // The path as common/json.h writes any bytes (a name need not be UTF-8).
    std::printf("{\"path\":%s,\"ino\":%" PRIu64 ",\"type\":\"%c\",\"size\":%" PRIu64
                ",\"mtime\":%s,\"uid\":%u,\"gid\":%u,\"mode\":%u,\"acg\":%" PRIu64 "}\n",
                JsonString(h.path).c_str(), r.id.ino, static_cast<char>(r.type), r.size,
                FileTimeToString(r.mtime).c_str(),
                r.uid, r.gid, r.mode, h.acg);
  } else {
    std::printf("%s\n", h.path.c_str());
  }
}

Result<std::unique_ptr<Engine>> OpenEngine(const Args& a, bool compact = false) {
  EngineOptions o;
  o.data_dir = a.data;
  o.durability = a.durability;
  o.compact_store = compact;
  return Engine::Open(o);
}

int Import(Engine* engine, const std::string& tree) {
  ImportStats st;
  auto start = std::chrono::steady_clock::now();
  uint64_t last_report = 0;
  Status s = ImportTree(
      tree, ImportOptions{},
      [&](std::vector<Update>& batch) {
        Status as = engine->Apply(batch);
        uint64_t done = st.files + st.dirs;
        if (isatty(STDERR_FILENO) && done - last_report >= 20000) {
          std::fprintf(stderr, "\rimported %" PRIu64 " entries", done);
          last_report = done;
        }
        return as;
      },
      &st);
  if (!s.ok()) return Fail(s.WithContext("importing " + tree));
  s = engine->CommitAll();
  if (!s.ok()) return Fail(s);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr, "%simported %" PRIu64 " files and %" PRIu64 " directories into %" PRIu64
               " partitions in %.2f s (%.0f entries/s); %" PRIu64 " skipped\n",
               isatty(STDERR_FILENO) ? "\r" : "", st.files, st.dirs, st.acgs, secs,
               static_cast<double>(st.files + st.dirs) / std::max(secs, 1e-9), st.skipped);
  return 0;
}

int Search(Engine* engine, const Args& a) {
  SearchStats stats;
  auto start = std::chrono::steady_clock::now();
  Status s = engine->Search(a.search, [&](const SearchHit& h) {
    PrintHit(h, a);
    return true;
  }, &stats);
  if (!s.ok()) return Fail(s);
  if (a.stats) {
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                          start).count();
    std::fprintf(stderr, "%" PRIu64 " hits, %" PRIu64 " candidates, %" PRIu64 "/%" PRIu64
                 " partitions skipped by summaries, %.2f ms\n", stats.hits, stats.candidates,
                 stats.acgs_skipped, stats.acgs_total, ms);
  }
  return 0;
}

int Stats(Engine* engine) {
  EngineStats st = engine->Stats();
  std::printf("partitions:        %" PRIu64 "\nfiles:             %" PRIu64
              "\ncached updates:    %" PRIu64 "\nlog bytes:         %" PRIu64
              "\ndisk bytes:        %" PRIu64 "\nindex memory:      %" PRIu64 " bytes\n",
              st.acgs, st.files, st.cached_updates, st.wal_bytes, st.disk_bytes,
              st.index_memory_bytes);
  return 0;
}

int Demo(Args a) {
  std::string tree = a.rest.size() > 1 ? a.rest[1] : "/usr/share";
  char tmpl[] = "/tmp/propeller-demo-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return Fail(Status::IOError("mkdtemp", errno));
  a.data = tmpl;
  int rc = 0;
  {
    auto engine = OpenEngine(a);
    if (!engine.ok()) return Fail(engine.status());
    std::printf("== indexing %s into %s\n", tree.c_str(), a.data.c_str());
    std::fflush(stdout);
    rc = Import(engine->get(), tree);
    const char* queries[] = {"size>1m", "ext=png & size>100k", "keyword=doc & type=d",
                             "name~*.conf | name~*.cfg", "mtime<1w"};
    for (const char* q : queries) {
      if (rc != 0) break;
      std::printf("\n== search '%s' (first 5, largest first)\n", q);
      std::fflush(stdout);
      Args sa = a;
      sa.search.query = q;
      sa.search.limit = 5;
      sa.search.sort_by = "size";
      sa.search.descending = true;
      sa.stats = true;
      rc = Search(engine->get(), sa);
      std::fflush(stdout);
    }
    if (rc == 0) {
      std::printf("\n== stats\n");
      Stats(engine->get());
    }
  }
  std::error_code ec;
  std::filesystem::remove_all(a.data, ec);
  return rc;
}

int Main(int argc, char** argv) {
  Args a;
  a.data = DefaultDataDir();
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](const char* name) -> const char* {
      if (i + 1 >= argc) return nullptr;
      (void)name;
      return argv[++i];
    };
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (arg == "--data") {
      const char* v = value("--data");
      if (!v) return Usage("--data needs a directory");
      a.data = v;
    } else if (arg == "--durability") {
      const char* v = value("--durability");
      if (!v) return Usage("--durability needs 'default' or 'sync'");
      if (std::strcmp(v, "default") == 0) {
        a.durability = Durability::kDefault;
      } else if (std::strcmp(v, "sync") == 0) {
        a.durability = Durability::kSync;
      } else {
        return Usage(std::string("unknown durability '") + v + "' (use default or sync)");
      }
    } else if (arg == "--scope") {
      const char* v = value("--scope");
      if (!v) return Usage("--scope needs a path");
      a.search.scope = v;
    } else if (arg == "--limit") {
      const char* v = value("--limit");
      char* end = nullptr;
      if (!v || (a.search.limit = std::strtoull(v, &end, 10), *end != '\0')) {
        return Usage("--limit needs a number");
      }
    } else if (arg == "--sort") {
      const char* v = value("--sort");
      if (!v) return Usage("--sort needs a key");
      a.search.sort_by = v;
    } else if (arg == "--desc") {
      a.search.descending = true;
    } else if (arg == "--json") {
      a.json = true;
    } else if (arg == "-0") {
      a.nul = true;
    } else if (arg == "--stats") {
      a.stats = true;
    } else if (arg.size() > 1 && arg[0] == '-' && a.rest.empty()) {
      return Usage("unknown option '" + arg + "'");
    } else {
      a.rest.push_back(arg);
    }
  }
  if (a.rest.empty()) return Usage("no command given");
  const std::string& cmd = a.rest[0];
  if (cmd == "demo") return Demo(a);
  if (cmd != "import" && cmd != "search" && cmd != "stats" && cmd != "index" &&
      cmd != "compact") {
    return Usage("unknown command '" + cmd + "'");
  }
  if ((cmd == "import" || cmd == "search") && a.rest.size() != 2) {
    return Usage(cmd + " takes exactly one argument");
  }
  if (cmd == "compact" && a.rest.size() != 1) return Usage("compact takes no argument");
  auto engine = OpenEngine(a, /*compact=*/cmd == "compact");
  if (!engine.ok()) return Fail(engine.status().WithContext("opening " + a.data));
  Engine* e = engine->get();
  if (cmd == "compact") {  // done by the open; say what it left
    const EngineStats st = e->Stats();
    std::printf("compacted %s: %.1f MB on disk for %llu files\n", a.data.c_str(),
                static_cast<double>(st.disk_bytes) / 1e6,
                static_cast<unsigned long long>(st.files));
    Status closed = e->Close();
    return closed.ok() ? 0 : Fail(closed);
  }
  if (cmd == "import") return Import(e, a.rest[1]);
  if (cmd == "search") {
    a.search.query = a.rest[1];
    return Search(e, a);
  }
  if (cmd == "stats") return Stats(e);
  // index ...
  if (a.rest.size() >= 2 && a.rest[1] == "list") {
    for (const IndexInfo& i : e->ListIndexes()) {
      std::printf("%-24s %-7s %s\n", i.name.c_str(), IndexTypeName(i.type),
                  i.builtin ? "built-in" : "user");
    }
    return 0;
  }
  if (a.rest.size() == 4 && a.rest[1] == "create") {
    auto type = ParseIndexType(a.rest[3]);
    if (!type.ok()) return Usage(type.status().message());
    Status s = e->CreateIndex(a.rest[2], *type);
    return s.ok() ? 0 : Fail(s);
  }
  if (a.rest.size() == 3 && a.rest[1] == "drop") {
    Status s = e->DropIndex(a.rest[2]);
    return s.ok() ? 0 : Fail(s);
  }
  return Usage("index takes: create NAME TYPE | list | drop NAME");
}

}  // namespace
}  // namespace propeller

int main(int argc, char** argv) { return propeller::Main(argc, argv); }
