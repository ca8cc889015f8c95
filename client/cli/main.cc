// propeller: the command-line client of a Propeller cluster (docs/architecture.md §9).
#include <csignal>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "client/cli/args.h"
#include "client/cli/commands.h"

namespace {

constexpr const char* kHelp = R"(usage: propeller [global options] COMMAND [args]

Real-time file-metadata search. Commands:
  up                 run Propeller here: master + one index node in this process (the
                     embedded default; keeps running until Ctrl-C)
  mount BACKING MNT  serve BACKING at MNT with capture, exact indexing and query
                     directories (ls 'MNT/?size>1m'); embedded service unless --master
  import DIR         index an existing directory tree (resumable, with progress)
  search QUERY       find indexed files: propeller search 'size>1g & mtime<1d'
  find [PATH...] [EXPRESSION]   GNU find's expressions, answered from the index
  watch QUERY        live query: '+ PATH' / '- PATH' / '~ PATH' as files start or stop
                     matching or a match changes, until Ctrl-C
  index create|list|drop   user-defined indexes
  attr set|get|rm    user attributes of a file
  status             master, index nodes, volumes, indexes
  volume list|remove ROOT|ID   the indexed directory trees; remove one from the index
  acg stats|show FILE|export|move ACG NODE
                               the captured access-causality graphs; move an ACG
  config check FILE  check a configuration file of propeller-master, propeller-indexnode
                     or a mount (/etc/propeller/*.toml)
Run `propeller COMMAND --help` for a command's options.

Global options (before or after the command):
  --master ENDPOINT  the master (default $PROPELLER_MASTER, else that of the Propeller mount
                     the current directory is in, else the unix socket of a local
                     `propeller up` (yours, then root's), else the one master all mounts
                     of this host use, else tcp://127.0.0.1:7470)
  --timeout-ms N     per-request timeout (default 5000)
  --cluster-key FILE the cluster key, for tcp:// endpoints (default $PROPELLER_CLUSTER_KEY,
                     else /etc/propeller/cluster.key for root)
  --curve-key FILE   instead: this client's own CURVE key pair (with --server-key)
  --server-key FILE  the cluster's CURVE public key
  --insecure         tcp:// without CURVE (a cluster started with --insecure)
  --help, --version
Exit status: 0 success, 1 error (message on stderr), 2 usage error.

Quick start:
  propeller up --data /var/lib/propeller &
  propeller import /usr/share
  propeller search 'size>10m' --sort size --desc --limit 10
)";

// Applies the global option at all[*i] (and its value) to *global. Returns -1 when done
// with it, an exit status to end with, or -2 when all[*i] is not a global option.
int TakeGlobalOption(const std::vector<std::string>& all, size_t* i,
                     propeller::cli::GlobalOptions* global) {
  using namespace propeller::cli;
  std::string a = all[*i];
  std::optional<std::string> inline_value;  // --master=X
  if (const size_t eq = a.find('='); a.rfind("--", 0) == 0 && eq != std::string::npos) {
    inline_value = a.substr(eq + 1);
    a.resize(eq);
  }
  if (a == "--insecure" && !inline_value) {
    global->client.insecure = true;
    global->given.insert("insecure");
    return -1;
  }
  const bool takes_value = a == "--master" || a == "--timeout-ms" || a == "--curve-key" ||
                           a == "--server-key" || a == "--cluster-key";
  if (!takes_value) return -2;
  if (!inline_value && *i + 1 >= all.size()) {
    std::fprintf(stderr, "propeller: %s needs a value\n", a.c_str());
    return kExitUsage;
  }
  const std::string v = inline_value ? *inline_value : all[++*i];
  global->given.insert(a.substr(2));
  if (a == "--master") global->client.master_endpoint = v;
  if (a == "--curve-key") global->client.curve_key_file = v;
  if (a == "--cluster-key") global->client.cluster_key_file = v;
  if (a == "--server-key") global->client.server_key_file = v;
  if (a == "--timeout-ms") {
    char* end = nullptr;
    long long ms = std::strtoll(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || ms <= 0) {
      std::fprintf(stderr, "propeller: --timeout-ms takes a positive integer\n");
      return kExitUsage;
    }
    global->client.timeout_ms = ms;
  }
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace propeller::cli;
  std::signal(SIGPIPE, SIG_IGN);  // a closed pipe (| head) becomes a write error, not a kill
  std::vector<std::string> all(argv + 1, argv + argc);
  size_t i = 0;
  GlobalOptions global;
  for (; i < all.size(); ++i) {
    const std::string& a = all[i];
    if (a.empty() || a[0] != '-') break;
    if (a == "--help" || a == "-h") {
      std::fputs(kHelp, stdout);
      return kExitOk;
    }
    if (a == "--version") {
      std::puts("propeller 0.1 (protocol 1.0)");
      return kExitOk;
    }
    const int taken = TakeGlobalOption(all, &i, &global);
    if (taken == -2) {
      std::fprintf(stderr, "propeller: unknown option %s (see --help)\n", a.c_str());
      return kExitUsage;
    }
    if (taken >= 0) return taken;
  }
  if (i == all.size()) {
    std::fputs(kHelp, stderr);
    return kExitUsage;
  }
  const std::string command = all[i];
  // Global options may also follow the command (`propeller search Q --master X`); "--" ends
  // them, and `up` keeps --insecure and --cluster-key as its own options.
  std::vector<std::string> rest;
  for (size_t j = i + 1; j < all.size(); ++j) {
    if (all[j] == "--") {
      rest.insert(rest.end(), all.begin() + static_cast<long>(j), all.end());
      break;
    }
    if (command == "up" && (all[j] == "--insecure" || all[j] == "--cluster-key" ||
                            all[j].rfind("--cluster-key=", 0) == 0)) {
      // `up`'s own options of these names (the key it serves with): passed on, value too.
      rest.push_back(all[j]);
      if (all[j] == "--cluster-key" && j + 1 < all.size()) rest.push_back(all[++j]);
      continue;
    }
    const int taken = TakeGlobalOption(all, &j, &global);
    if (taken == -2) {
      rest.push_back(all[j]);
    } else if (taken >= 0) {
      return taken;
    }
  }
  if (command == "search") return RunSearch(global, rest);
  if (command == "watch") return RunWatch(global, rest);
  if (command == "find") return RunFind(global, rest);
  if (command == "import") return RunImport(global, rest);
  if (command == "index") return RunIndex(global, rest);
  if (command == "attr") return RunAttr(global, rest);
  if (command == "status") return RunStatus(global, rest);
  if (command == "up") return RunUp(global, rest);
  if (command == "mount") return RunMount(global, rest);
  if (command == "acg") return RunAcg(global, rest);
  if (command == "volume") return RunVolume(global, rest);
  if (command == "config") return RunConfig(global, rest);
  std::fprintf(stderr, "propeller: unknown command '%s' (see propeller --help)\n",
               command.c_str());
  return kExitUsage;
}
