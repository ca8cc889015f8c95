// propeller-indexnode: the index-node daemon (docs/architecture.md §2, §6). Serves updates,
// searches and index management for the ACGs the master placed on it; registers with the master and
// heartbeats. Runs until SIGINT or SIGTERM, then commits, syncs and exits 0. The options are in
// indexnode_flags.h.
//
// Exit codes: 0 clean stop, 1 runtime error (cannot open the data directory, bind, an
// unreadable --config file, ...), 2 bad usage.
#include <signal.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "common/daemon/metrics_server.h"
#include "common/daemon/notify.h"
#include "common/daemon/signals.h"
#include "common/logging.h"
#include "indexnode/server/indexnode_flags.h"
#include "indexnode/server/node_metrics.h"
#include "indexnode/server/node_server.h"

namespace propeller {
namespace {

constexpr char kProg[] = "propeller-indexnode";

int Main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  Result<IndexNodeFlags> flags = ParseIndexNodeFlags(args);
  if (!flags.ok()) {
    if (flags.status().code() != StatusCode::kInvalidArgument) {
      std::fprintf(stderr, "%s: %s\n", kProg, flags.status().message().c_str());
      return 1;
    }
    std::fprintf(stderr, "%s: %s\nTry '%s --help'.\n", kProg, flags.status().message().c_str(),
                 kProg);
    return 2;
  }
  if (flags->help) {
    std::fputs(IndexNodeHelp().c_str(), stdout);
    return 0;
  }
  SetLogLevel(flags->log_level);

  // Block the stop signals before any thread exists so that every thread inherits the mask
  // and only sigwait() below receives them.
  const sigset_t signals = daemon::BlockStopSignals();
  // A client that vanishes mid-reply must not kill the daemon.
  signal(SIGPIPE, SIG_IGN);

  Result<std::unique_ptr<IndexNodeServer>> server = IndexNodeServer::Start(flags->options);
  if (!server.ok()) {
    const Status& st = server.status();
    std::fprintf(stderr, "%s: %s\n", kProg,
                 st.message().empty() ? st.ToString().c_str() : st.message().c_str());
    return 1;
  }
  // Declared after the server: destroyed (stops serving) before it.
  metrics::Registry registry;
  std::unique_ptr<daemon::MetricsServer> metrics_server;
  if (!flags->metrics_listen.empty()) {
    RegisterIndexNodeMetrics(server->get(), &registry);
    Result<std::unique_ptr<daemon::MetricsServer>> m =
        daemon::MetricsServer::Start(flags->metrics_listen, &registry);
    if (!m.ok()) {
      std::fprintf(stderr, "%s: %s\n", kProg, m.status().message().c_str());
      return 1;
    }
    metrics_server = std::move(*m);
  }
  // Ready once listening: the node registers with the master in the background and serves
  // the ACGs it owns meanwhile (docs/cluster.md), so waiting for the master here would only
  // make the unit's start fail while the master is down.
  const std::string status = "listening on " + (*server)->endpoint() + ", master " +
                             flags->options.master_endpoint;
  daemon::NotifyReady(status);
  const int sig = daemon::WaitForStopSignal(signals, [&] {
    daemon::Reload(kProg, flags->values, [&]() -> Result<daemon::Reparsed> {
      PROPELLER_ASSIGN_OR_RETURN(IndexNodeFlags next, ParseIndexNodeFlags(args));
      return daemon::Reparsed{next.log_level, std::move(next.values)};
    }, status);
  });
  Log(LogLevel::kInfo, "%s received, stopping", sig == SIGINT ? "SIGINT" : "SIGTERM");
  // Stops serving, commits and syncs the engine. A failed final sync means acknowledged
  // updates may not be durable: say so in the exit status.
  metrics_server.reset();
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
