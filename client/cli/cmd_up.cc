// propeller up: the embedded default (DESIGN §9) — a master and one index node in this
// process, on loopback, with one data directory. Same protocol, same code as a cluster of
// separate daemons; other propeller commands reach it at the default endpoint.
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "client/cli/args.h"
#include "client/cli/commands.h"
#include "client/cli/service_options.h"
#include "common/env.h"
#include "common/logging.h"
#include "indexnode/server/node_server.h"
#include "master/master_server.h"

namespace propeller::cli {
namespace {

constexpr const char* kUpHelp = R"(usage: propeller up [options]

Runs Propeller on this machine: a master and one index node in this process, listening on
loopback, until Ctrl-C (SIGINT) or SIGTERM stops it cleanly. Other propeller commands find it
at the default endpoint:
  propeller up --data /var/lib/propeller &
  propeller import /srv/data && propeller search 'size>1g'
Options:
  --data DIR            data directory (default $XDG_DATA_HOME/propeller, else
                        ~/.local/share/propeller); DIR/master and DIR/node are created
  --listen ENDPOINT     the master's endpoint (default tcp://127.0.0.1:7470)
  --node-listen ENDPOINT  the index node's endpoint (default tcp://127.0.0.1:7471)
  --durability LEVEL    default (fsync the log every 10 ms) or sync (fsync before each ack)
  --acg-threshold N     files per partition before a new one is started (default 50000)
  --ready-file FILE     write "master <endpoint>\nnode <endpoint>\n" there once serving
  --log-level LEVEL     debug, info (default), warning, error
Keep DIR outside any tree Propeller serves through a mount.
)";

}  // namespace

int RunUp(const GlobalOptions& /*global*/, const std::vector<std::string>& argv) {
  auto args = Args::Parse(argv,
                          {"--data", "--listen", "--node-listen", "--durability",
                           "--acg-threshold", "--ready-file", "--log-level"},
                          {"--help", "-h"});
  if (!args.ok()) return ReportError(args.status(), /*usage=*/true);
  if (args->Has("--help") || args->Has("-h")) {
    std::fputs(kUpHelp, stdout);
    return kExitOk;
  }
  if (!args->positional().empty()) {
    std::fprintf(stderr, "propeller: up takes no arguments (see --help)\n");
    return kExitUsage;
  }
  if (Status st = ApplyLogLevelOption(args->GetOr("--log-level", "info")); !st.ok()) {
    return ReportError(st, /*usage=*/true);
  }
  auto threshold = args->GetUint("--acg-threshold", 50'000);
  if (!threshold.ok()) return ReportError(threshold.status(), /*usage=*/true);
  if (*threshold == 0) {
    return ReportError(Status::InvalidArgument("--acg-threshold must be positive"), true);
  }
  auto durability_opt = ParseDurabilityOption(args->GetOr("--durability", "default"));
  if (!durability_opt.ok()) return ReportError(durability_opt.status(), /*usage=*/true);
  const Durability durability = *durability_opt;
  const std::string data = args->GetOr("--data", DefaultDataDir());
  Env* env = Env::Default();
  for (const std::string& dir : {data, JoinPath(data, "master"), JoinPath(data, "node")}) {
    if (Status st = env->CreateDirs(dir); !st.ok()) return ReportError(st);
  }

  // Signals are taken by sigwait below; block them before any thread starts so no other
  // thread receives them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  master::MasterOptions mo;
  mo.data_dir = JoinPath(data, "master");
  mo.listen = args->GetOr("--listen", master::kDefaultMasterEndpoint);
  mo.acg_threshold = *threshold;
  // The master's maps get the node's durability level (DESIGN §10): group commit every 10 ms
  // by default, an fsync per mutation with --durability sync.
  mo.sync = durability == Durability::kSync;
  mo.sync_interval_ms = 10;
  auto master = master::MasterServer::Start(mo);
  if (!master.ok()) return ReportError(master.status().WithContext("master"));

  IndexNodeOptions no;
  no.data_dir = JoinPath(data, "node");
  no.listen_endpoint = args->GetOr("--node-listen", kDefaultIndexNodeEndpoint);
  no.master_endpoint = (*master)->endpoint();
  no.durability = durability;
  auto node = IndexNodeServer::Start(no);
  if (!node.ok()) return ReportError(node.status().WithContext("index node"));

  // Serving starts once the node is registered (searches need it in the node table).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!(*node)->registered() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!(*node)->registered()) {
    return ReportError(Status::Timeout("the index node did not register with the master"));
  }
  if (auto ready = args->Get("--ready-file")) {
    Status st = WriteFileAtomically(env, *ready, "master " + (*master)->endpoint() + "\nnode " +
                                                     (*node)->endpoint() + "\n");
    if (!st.ok()) return ReportError(st);
  }
  std::fprintf(stderr,
               "propeller: up — master %s, index node %s, data in %s (%s durability). "
               "Ctrl-C stops.\n",
               (*master)->endpoint().c_str(), (*node)->endpoint().c_str(), data.c_str(),
               DurabilityName(durability));
  int sig = 0;
  sigwait(&stop_signals, &sig);
  std::fprintf(stderr, "propeller: stopping (signal %d): committing and syncing\n", sig);
  node->reset();    // commits every cache and syncs the log
  master->reset();
  return kExitOk;
}

}  // namespace propeller::cli
