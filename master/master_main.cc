// propeller-master: the master daemon (docs/architecture.md §7; trust model: docs/security.md). See
// --help.
//
// Exit codes: 0 stopped by SIGINT/SIGTERM after a clean shutdown, 1 runtime error (cannot
// open the data directory, cannot bind, bad key files), 2 usage error.
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "common/logging.h"
#include "master/master_server.h"

namespace {

using propeller::master::MasterOptions;

constexpr char kProgram[] = "propeller-master";

void PrintHelp() {
  const MasterOptions d;
  std::printf(
      "propeller-master: the Propeller master. It keeps the file -> ACG and ACG -> index-node\n"
      "maps, the node table, the index catalogue and the volumes in an LMDB store, places new\n"
      "files on index nodes, and watches index-node heartbeats.\n"
      "\n"
      "Usage: propeller-master --data DIR [options]\n"
      "\n"
      "  --data DIR            data directory (created if missing; required)\n"
      "  --listen ENDPOINT     where to serve (default %s); tcp://HOST:PORT, ipc://PATH.\n"
      "                        tcp:// is CURVE-authenticated with the cluster key; on\n"
      "                        ipc:// local users search with their own permissions\n"
      "  --cluster-key FILE    the cluster's key pair, made here at the first start when\n"
      "                        missing; copy it (mode 0600) to the index nodes and client\n"
      "                        hosts (default $PROPELLER_CLUSTER_KEY, else\n"
      "                        /etc/propeller/cluster.key for root)\n"
      "  --curve-key FILE      instead of the cluster key: this master's own key pair\n"
      "                        (needs --allow)\n"
      "  --allow FILE          public keys of admitted clients and nodes, one per line\n"
      "  --insecure            serve tcp:// without authentication: anyone who reaches the\n"
      "                        port may read and change the whole index. Tests only\n"
      "  --node-timeout-ms N   a node silent this long is marked down (default %lld)\n"
      "  --acg-threshold N     files in an application's ACG before a new one is opened\n"
      "                        (default %llu)\n"
      "  --merge-after-ms N    merge an app's small ACGs on a node (below a quarter of the\n"
      "                        threshold) once they stayed small this long (default %lld;\n"
      "                        0 = never)\n"
      "  --no-split-moves      keep both halves of a split on the splitting node (default:\n"
      "                        the new half moves to the node with the fewest files when\n"
      "                        that node stays below the splitting one even with it)\n"
      "  --threads N           request worker threads (default %d)\n"
      "  --log-level LEVEL     debug, info, warning or error (default info)\n"
      "  --help                this text\n"
      "\n"
      "Stops cleanly on SIGINT or SIGTERM. Exit codes: 0 clean stop, 1 runtime error,\n"
      "2 usage error.\n"
      "\n"
      "Example:\n"
      "  propeller-master --data /var/lib/propeller/master --listen tcp://127.0.0.1:7470\n",
      propeller::master::kDefaultMasterEndpoint, static_cast<long long>(d.node_timeout_ms),
      static_cast<unsigned long long>(d.acg_threshold), static_cast<long long>(d.merge_after_ms),
      d.worker_threads);
}

[[noreturn]] void UsageError(const std::string& message) {
  std::fprintf(stderr, "%s: %s (try --help)\n", kProgram, message.c_str());
  std::exit(2);
}

// Parses a decimal integer in [lo, hi] or exits with a usage error naming `flag`.
long long ParseInt(const std::string& flag, const std::string& text, long long lo, long long hi) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || v < lo || v > hi) {
    UsageError(flag + " wants a whole number from " + std::to_string(lo) + " to " +
               std::to_string(hi) + ", not '" + text + "'");
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  MasterOptions options;
  propeller::LogLevel level = propeller::LogLevel::kInfo;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      PrintHelp();
      return 0;
    }
    std::string value;
    bool has_value = false;
    const size_t eq = arg.find('=');
    if (arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg.resize(eq);
      has_value = true;
    }
    auto next = [&]() -> std::string {
      if (has_value) return value;
      if (i + 1 >= argc) UsageError(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--data") {
      options.data_dir = next();
      if (options.data_dir.empty()) UsageError("--data needs a directory");
    } else if (arg == "--listen") {
      options.listen = next();
    } else if (arg == "--cluster-key") {
      options.cluster_key_file = next();
    } else if (arg == "--insecure") {
      options.insecure = true;
    } else if (arg == "--curve-key") {
      options.curve_key_file = next();
    } else if (arg == "--allow") {
      options.allow_file = next();
    } else if (arg == "--node-timeout-ms") {
      options.node_timeout_ms = ParseInt(arg, next(), 1, 86400000);
    } else if (arg == "--acg-threshold") {
      options.acg_threshold = static_cast<uint64_t>(ParseInt(arg, next(), 1, 1000000000000LL));
    } else if (arg == "--merge-after-ms") {
      options.merge_after_ms = ParseInt(arg, next(), 0, 86400000LL * 365);
    } else if (arg == "--no-split-moves") {
      options.move_split_halves = false;
    } else if (arg == "--test-exit-after-move") {
      // Fault tests only (not in --help): the master dies (SIGKILL-like, no clean stop) right
      // after committing an ACG move, before replying, as a crash there would.
      options.move_commit_hook = [](uint64_t) { ::_exit(9); };
    } else if (arg == "--threads") {
      options.worker_threads = static_cast<int>(ParseInt(arg, next(), 1, 256));
    } else if (arg == "--log-level") {
      const std::string l = next();
      if (l == "debug") {
        level = propeller::LogLevel::kDebug;
      } else if (l == "info") {
        level = propeller::LogLevel::kInfo;
      } else if (l == "warning") {
        level = propeller::LogLevel::kWarning;
      } else if (l == "error") {
        level = propeller::LogLevel::kError;
      } else {
        UsageError("--log-level wants debug, info, warning or error, not '" + l + "'");
      }
    } else {
      UsageError("unknown argument '" + arg + "'");
    }
  }
  if (options.data_dir.empty()) UsageError("--data DIR is required");
  if (options.listen.rfind("tcp://", 0) != 0 && options.listen.rfind("ipc://", 0) != 0 &&
      options.listen.rfind("inproc://", 0) != 0) {
    UsageError("--listen wants tcp://HOST:PORT or ipc://PATH, not '" + options.listen + "'");
  }
  if (options.curve_key_file.empty() != options.allow_file.empty()) {
    UsageError("--curve-key and --allow go together");
  }
  propeller::SetLogLevel(level);

  // Block the stop signals before any thread starts so that every thread inherits the mask
  // and they are taken by sigwait below, never by a worker in the middle of a transaction.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  auto server = propeller::master::MasterServer::Start(options);
  if (!server.ok()) {
    std::fprintf(stderr, "%s: %s\n", kProgram, server.status().message().c_str());
    return 1;
  }
  propeller::Log(propeller::LogLevel::kInfo, "propeller-master serving %s, data in %s",
                 (*server)->endpoint().c_str(), options.data_dir.c_str());
  int sig = 0;
  while (sigwait(&stop_signals, &sig) != 0) {
  }
  propeller::Log(propeller::LogLevel::kInfo, "propeller-master: %s, stopping",
                 sig == SIGINT ? "SIGINT" : "SIGTERM");
  server->reset();  // stops serving, closes the store (every acknowledged change is committed)
  return 0;
}
