// propeller up: the embedded default — a master and one index node in this process, with one
// data directory, reachable by local users through unix sockets only (docs/security.md). Same
// protocol, same code as a cluster of separate daemons; other propeller commands find it by
// itself (DefaultMasterEndpoint).
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "client/cli/args.h"
#include "client/cli/commands.h"
#include "client/cli/embedded_service.h"
#include "client/cli/service_options.h"
#include "client/cli/service_metrics.h"
#include "common/daemon/metrics_server.h"
#include "common/env.h"
#include "common/logging.h"
#include "common/secure_dir.h"

namespace propeller::cli {
namespace {

constexpr const char* kUpHelp = R"(usage: propeller up [options]

Runs Propeller on this machine: a master and one index node in this process, until Ctrl-C
(SIGINT) or SIGTERM stops it cleanly. Local users reach it through unix sockets in the
runtime directory (/run/propeller for root, else $XDG_RUNTIME_DIR/propeller), where the kernel
names each caller: everyone searches with their own permissions, and only root or the user
running it changes the index. Other propeller commands find it by themselves:
  propeller up --data /var/lib/propeller &
  propeller import /srv/data && propeller search 'size>1g'
No network port is opened unless --listen names a tcp:// endpoint.
Options:
  --data DIR            data directory (default $XDG_DATA_HOME/propeller, else
                        ~/.local/share/propeller); created 0700, DIR/master and DIR/node
  --listen ENDPOINT     the master's endpoint (default ipc://RUNTIME/master.sock). A
                        tcp:// endpoint is CURVE-authenticated with the cluster key (made
                        at the first start, see --cluster-key)
  --node-listen ENDPOINT  the index node's endpoint (default ipc://RUNTIME/node.sock)
  --cluster-key FILE    key of tcp:// endpoints (default $PROPELLER_CLUSTER_KEY, else
                        /etc/propeller/cluster.key for root)
  --insecure            tcp:// endpoints without authentication: anyone who reaches them may
                        read and change the whole index. Tests only
  --durability LEVEL    default (fsync the log every 10 ms) or sync (fsync before each ack)
  --acg-threshold N     files per partition before a new one is started (default 50000)
  --ready-file FILE     write "master <endpoint>\nnode <endpoint>\n" there once serving
  --log-level LEVEL     debug, info (default), warning, error
  --metrics-listen HOST:PORT  serve Prometheus metrics of the master and the index node on
                        http://HOST:PORT/metrics (default none; port 0 = any free port,
                        logged). Counts, sizes and latencies only; prefer 127.0.0.1
Keep DIR outside any tree Propeller serves through a mount.
)";

}  // namespace

int RunUp(const GlobalOptions& /*global*/, const std::vector<std::string>& argv) {
  auto args = Args::Parse(argv,
                          {"--data", "--listen", "--node-listen", "--durability",
                           "--acg-threshold", "--ready-file", "--log-level", "--cluster-key",
                           "--metrics-listen"},
                          {"--help", "-h", "--insecure"});
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
  auto durability = ParseDurabilityOption(args->GetOr("--durability", "default"));
  if (!durability.ok()) return ReportError(durability.status(), /*usage=*/true);

  EmbeddedServiceOptions eo;
  eo.data_dir = args->GetOr("--data", DefaultDataDir());
  const std::string runtime = DefaultRuntimeDir();
  eo.master_listen = args->GetOr("--listen", "ipc://" + runtime + "/master.sock");
  eo.node_listen = args->GetOr("--node-listen", "ipc://" + runtime + "/node.sock");
  if (!args->Has("--listen") || !args->Has("--node-listen")) {
    if (Status st = PrepareRuntimeDir(runtime); !st.ok()) return ReportError(st);
  }
  eo.tag = "up-" + std::to_string(::getpid());
  eo.durability = *durability;
  eo.acg_threshold = *threshold;
  eo.cluster_key_file = args->GetOr("--cluster-key", "");
  eo.insecure = args->Has("--insecure");
  const std::string metrics_listen = args->GetOr("--metrics-listen", "");
  if (!metrics_listen.empty()) {
    std::string host;
    int port = 0;
    Status st = daemon::ParseListenAddress("--metrics-listen", metrics_listen, &host, &port);
    if (!st.ok()) return ReportError(st, /*usage=*/true);
  }

  // Signals are taken by sigwait below; block them before any thread starts so no other
  // thread receives them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  auto service = StartEmbeddedService(eo);
  if (!service.ok()) return ReportError(service.status());
  metrics::Registry registry;  // after the service: the listener below stops first
  std::unique_ptr<daemon::MetricsServer> metrics_server;
  if (!metrics_listen.empty()) {
    RegisterEmbeddedMetrics(service->get(), &registry);
    auto m = daemon::MetricsServer::Start(metrics_listen, &registry);
    if (!m.ok()) return ReportError(m.status());
    metrics_server = std::move(*m);
  }
  const std::string master = (*service)->master->endpoint();
  const std::string node = (*service)->node->endpoint();
  if (auto ready = args->Get("--ready-file")) {
    Status st = WriteFileAtomically(Env::Default(), *ready,
                                    "master " + master + "\nnode " + node + "\n");
    if (!st.ok()) return ReportError(st);
  }
  std::fprintf(stderr,
               "propeller: up — master %s, index node %s, data in %s (%s durability). "
               "Ctrl-C stops.\n",
               master.c_str(), node.c_str(), eo.data_dir.c_str(), DurabilityName(eo.durability));
  int sig = 0;
  sigwait(&stop_signals, &sig);
  std::fprintf(stderr, "propeller: stopping (signal %d): committing and syncing\n", sig);
  metrics_server.reset();
  Status stopped = (*service)->Stop();  // commits every cache and syncs the log
  if (!stopped.ok()) return ReportError(stopped.WithContext("stopping"));
  return kExitOk;
}

}  // namespace propeller::cli
