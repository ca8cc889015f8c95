// propeller-indexnode: the index-node daemon (docs/architecture.md §2, §6). Serves updates,
// searches and index management for the ACGs the master placed on it; registers with the master and
// heartbeats. Runs until SIGINT or SIGTERM, then commits, syncs and exits 0.
//
// Exit codes: 0 clean stop, 1 runtime error (cannot open the data directory, bind, ...),
// 2 bad usage.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "common/logging.h"
#include "indexnode/server/node_server.h"

namespace propeller {
namespace {

constexpr char kProg[] = "propeller-indexnode";
constexpr char kDefaultMaster[] = "tcp://127.0.0.1:7470";

constexpr char kUsage[] = R"(usage: propeller-indexnode --data DIR [OPTIONS]

Propeller index node: holds ACG partitions of the file-metadata index, applies file-indexing
updates and answers searches for them. Registers with the master and heartbeats; runs until
SIGINT or SIGTERM, then commits, syncs and exits.

Options:
  --data DIR             data directory (REQUIRED; created if missing)
  --master ENDPOINT      the master (default tcp://127.0.0.1:7470)
  --listen ENDPOINT      where to serve (default tcp://127.0.0.1:7471; port 0 = any free port)
  --advertise ENDPOINT   what the master tells clients (default: the bound endpoint; set it
                         when listening on 0.0.0.0)
  --durability LEVEL     default (fsync every 10 ms) or sync (fsync before acknowledging)
  --cluster-key FILE     the cluster's key pair, copied from the master's host (it makes
                         one at its first start): tcp:// links are CURVE-authenticated
                         with it (default $PROPELLER_CLUSTER_KEY, else
                         /etc/propeller/cluster.key for root)
  --curve-key FILE       instead of the cluster key: this node's own key pair (needs
                         --allow to serve tcp://, --master-key to dial a tcp:// master)
  --allow FILE           more public keys to admit; with --curve-key, all of them: list
                         the index nodes' shared key too, so that other nodes may move
                         ACGs here
  --master-key FILE      the master's public key (with --curve-key)
  --insecure             tcp:// without authentication: anyone who reaches the port may
                         read and change this node's index. Tests only
  --threads N            request handler threads (default 4)
  --split-threshold N    split an ACG in two (METIS) once it holds more than N files
                         (default 50000; 0 = never). The master names the new half.
  --log-level LEVEL      debug, info, warning or error (default info)
  -h, --help             this help

Example:
  propeller-indexnode --data /var/lib/propeller/node1 --master tcp://10.0.0.1:7470 \
      --listen tcp://0.0.0.0:7471 --advertise tcp://10.0.0.2:7471

Exit codes: 0 clean stop, 1 runtime error, 2 bad usage.
)";

int Usage(const std::string& msg) {
  std::fprintf(stderr, "%s: %s\nTry '%s --help'.\n", kProg, msg.c_str(), kProg);
  return 2;
}

bool ParseLogLevel(std::string_view s, LogLevel* level) {
  if (s == "debug") *level = LogLevel::kDebug;
  else if (s == "info") *level = LogLevel::kInfo;
  else if (s == "warning" || s == "warn") *level = LogLevel::kWarning;
  else if (s == "error") *level = LogLevel::kError;
  else return false;
  return true;
}

int Main(int argc, char** argv) {
  IndexNodeOptions opt;
  opt.master_endpoint = kDefaultMaster;
  LogLevel level = LogLevel::kInfo;
  int hold_step = 0;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (arg == "--insecure") {
      opt.insecure = true;
      continue;
    }
    std::string value;
    bool has_inline = false;
    if (arg.rfind("--", 0) == 0) {
      if (size_t eq = arg.find('='); eq != std::string::npos) {
        value = arg.substr(eq + 1);
        arg = arg.substr(0, eq);
        has_inline = true;
      }
    }
    auto take = [&]() -> bool {
      if (has_inline) return true;
      if (i + 1 >= argc) return false;
      value = argv[++i];
      return true;
    };
    if (arg == "--data" || arg == "--master" || arg == "--listen" || arg == "--advertise" ||
        arg == "--durability" || arg == "--curve-key" || arg == "--allow" ||
        arg == "--cluster-key" ||
        arg == "--master-key" || arg == "--threads" || arg == "--log-level" ||
        arg == "--split-threshold" || arg == "--test-hold-in-split" ||
        arg == "--test-hold-in-migrate" || arg == "--test-release-wait-ms") {
      if (!take()) return Usage("option " + arg + " needs a value");
    } else if (arg.rfind("-", 0) == 0) {
      return Usage("unknown option '" + arg + "'");
    } else {
      return Usage("unexpected argument '" + arg + "'");
    }
    if (value.empty()) return Usage("option " + arg + " needs a non-empty value");
    if (arg == "--data") {
      opt.data_dir = value;
    } else if (arg == "--master") {
      opt.master_endpoint = value;
    } else if (arg == "--listen") {
      opt.listen_endpoint = value;
    } else if (arg == "--advertise") {
      opt.advertised_endpoint = value;
    } else if (arg == "--durability") {
      if (value == "default") {
        opt.durability = Durability::kDefault;
      } else if (value == "sync") {
        opt.durability = Durability::kSync;
      } else {
        return Usage("--durability must be 'default' or 'sync', not '" + value + "'");
      }
    } else if (arg == "--cluster-key") {
      opt.cluster_key_file = value;
    } else if (arg == "--curve-key") {
      opt.curve_key_file = value;
    } else if (arg == "--allow") {
      opt.allow_file = value;
    } else if (arg == "--master-key") {
      opt.master_key_file = value;
    } else if (arg == "--threads") {
      int n = 0;
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
      if (ec != std::errc() || end != value.data() + value.size() || n < 1 || n > 256) {
        return Usage("--threads must be a number from 1 to 256, not '" + value + "'");
      }
      opt.worker_threads = n;
    } else if (arg == "--split-threshold") {
      uint64_t n = 0;
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
      if (ec != std::errc() || end != value.data() + value.size()) {
        return Usage("--split-threshold must be a number of files (0 = never split), not '" +
                     value + "'");
      }
      opt.engine.split_threshold_files = n;
    } else if (arg == "--test-hold-in-split") {
      // Fault tests only (not in --help): at step N (1-5) of its first split the splitter
      // creates <data>/split-hold and waits until it is removed, so a test can kill this node
      // or the master at that point (EngineOptions::split_step_hook).
      int n = 0;
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
      if (ec != std::errc() || end != value.data() + value.size() || n < 1 || n > 5) {
        return Usage("--test-hold-in-split must be a step from 1 to 5, not '" + value + "'");
      }
      hold_step = n;
    } else if (arg == "--test-hold-in-migrate") {
      // Fault tests only (not in --help): the first time a migration reaches step N (1-5,
      // NodeServiceOptions::migrate_step_hook) the node creates <data>/migrate-hold and
      // waits until it is removed.
      int n = 0;
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
      if (ec != std::errc() || end != value.data() + value.size() || n < 1 || n > 5) {
        return Usage("--test-hold-in-migrate must be a step from 1 to 5, not '" + value + "'");
      }
      // `opt` lives as long as main; --data may come after this option.
      auto held = std::make_shared<std::atomic<bool>>(false);
      opt.migrate_step_hook = [n, dir = &opt.data_dir, held](int step) {
        if (step != n || held->exchange(true)) return;
        const std::string hold = *dir + "/migrate-hold";
        if (FILE* f = std::fopen(hold.c_str(), "w")) std::fclose(f);
        while (::access(hold.c_str(), F_OK) == 0) ::usleep(10'000);
      };
    } else if (arg == "--test-release-wait-ms") {
      // Fault tests only: IndexNodeOptions::release_wait_ms.
      int64_t n = 0;
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
      if (ec != std::errc() || end != value.data() + value.size() || n < 0) {
        return Usage("--test-release-wait-ms must be a number of milliseconds");
      }
      opt.release_wait_ms = n;
    } else if (arg == "--log-level") {
      if (!ParseLogLevel(value, &level)) {
        return Usage("--log-level must be debug, info, warning or error, not '" + value + "'");
      }
    }
  }
  if (opt.data_dir.empty()) return Usage("--data DIR is required");
  if (!opt.curve_key_file.empty() && opt.allow_file.empty()) {
    return Usage("--curve-key needs --allow FILE (the client keys to admit)");
  }
  if (!opt.master_key_file.empty() && opt.curve_key_file.empty()) {
    return Usage("--master-key needs --curve-key FILE (this node's key pair)");
  }
  SetLogLevel(level);
  if (hold_step != 0) {
    const std::string hold = opt.data_dir + "/split-hold";
    auto held = std::make_shared<std::atomic<bool>>(false);
    opt.engine.split_step_hook = [hold_step, hold, held](int step) {
      if (step != hold_step || held->exchange(true)) return;
      if (FILE* f = std::fopen(hold.c_str(), "w")) std::fclose(f);
      while (::access(hold.c_str(), F_OK) == 0) ::usleep(10'000);
    };
  }

  // Block the stop signals before any thread exists so that every thread inherits the mask
  // and only sigwait() below receives them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  // A client that vanishes mid-reply must not kill the daemon.
  signal(SIGPIPE, SIG_IGN);

  Result<std::unique_ptr<IndexNodeServer>> server = IndexNodeServer::Start(opt);
  if (!server.ok()) {
    const Status& st = server.status();
    std::fprintf(stderr, "%s: %s\n", kProg,
                 st.message().empty() ? st.ToString().c_str() : st.message().c_str());
    return 1;
  }
  int sig = 0;
  while (sigwait(&stop_signals, &sig) != 0) {
  }
  Log(LogLevel::kInfo, "%s received, stopping", sig == SIGINT ? "SIGINT" : "SIGTERM");
  // Stops serving, commits and syncs the engine. A failed final sync means acknowledged
  // updates may not be durable: say so in the exit status.
  Status stopped = (*server)->Stop();
  server->reset();
  if (!stopped.ok()) {
    std::fprintf(stderr, "%s: stopping failed: %s\n", kProg, stopped.ToString().c_str());
    return 1;
  }
  Log(LogLevel::kInfo, "stopped");
  return 0;
}

}  // namespace
}  // namespace propeller

int main(int argc, char** argv) { return propeller::Main(argc, argv); }
