// propeller-master: the master daemon (docs/architecture.md §7; trust model: docs/security.md). See
// --help; the options are in master_flags.h.
//
// Exit codes: 0 stopped by SIGINT/SIGTERM after a clean shutdown, 1 runtime error (cannot
// open the data directory, cannot bind, bad key files, an unreadable --config file), 2 usage
// error.
#include <signal.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "common/daemon/metrics_server.h"
#include "common/daemon/notify.h"
#include "common/daemon/signals.h"
#include "common/logging.h"
#include "master/master_flags.h"
#include "master/master_metrics.h"

namespace {

constexpr char kProgram[] = "propeller-master";

}  // namespace

int main(int argc, char** argv) {
  using namespace propeller;
  const std::vector<std::string> args(argv + 1, argv + argc);
  Result<master::MasterFlags> flags = master::ParseMasterFlags(args);
  if (!flags.ok()) {
    const bool usage = flags.status().code() == StatusCode::kInvalidArgument;
    std::fprintf(stderr, "%s: %s%s\n", kProgram, flags.status().message().c_str(),
                 usage ? " (try --help)" : "");
    return usage ? 2 : 1;
  }
  if (flags->help) {
    std::fputs(master::MasterHelp().c_str(), stdout);
    return 0;
  }
  SetLogLevel(flags->log_level);

  // Before any thread starts, so that every thread inherits the mask and the signals are
  // taken by sigwait below, never by a worker in the middle of a transaction.
  const sigset_t signals = daemon::BlockStopSignals();
  signal(SIGPIPE, SIG_IGN);

  auto server = master::MasterServer::Start(flags->options);
  if (!server.ok()) {
    std::fprintf(stderr, "%s: %s\n", kProgram, server.status().message().c_str());
    return 1;
  }
  Log(LogLevel::kInfo, "propeller-master serving %s, data in %s%s%s",
      (*server)->endpoint().c_str(), flags->options.data_dir.c_str(),
      flags->config_file.empty() ? "" : ", configuration ", flags->config_file.c_str());
  metrics::Registry registry;  // after the server: the metrics listener stops first
  std::unique_ptr<daemon::MetricsServer> metrics_server;
  if (!flags->metrics_listen.empty()) {
    master::RegisterMasterMetrics(server->get(), &registry);
    auto m = daemon::MetricsServer::Start(flags->metrics_listen, &registry);
    if (!m.ok()) {
      std::fprintf(stderr, "%s: %s\n", kProgram, m.status().message().c_str());
      return 1;
    }
    metrics_server = std::move(*m);
  }
  const std::string status = "serving " + (*server)->endpoint();
  daemon::NotifyReady(status);
  const int sig = daemon::WaitForStopSignal(signals, [&] {
    daemon::Reload(kProgram, flags->values, [&]() -> Result<daemon::Reparsed> {
      PROPELLER_ASSIGN_OR_RETURN(master::MasterFlags next, master::ParseMasterFlags(args));
      return daemon::Reparsed{next.log_level, std::move(next.values)};
    }, status);
  });
  Log(LogLevel::kInfo, "propeller-master: %s, stopping", sig == SIGINT ? "SIGINT" : "SIGTERM");
  metrics_server.reset();
  server->reset();  // stops serving, closes the store (every acknowledged change is committed)
  return 0;
}
