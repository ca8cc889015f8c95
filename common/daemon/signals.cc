#include "common/daemon/signals.h"

#include <pthread.h>

#include <map>

#include "common/daemon/notify.h"

namespace propeller::daemon {

sigset_t BlockStopSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}

int WaitForStopSignal(const sigset_t& signals, const std::function<void()>& on_reload) {
  for (;;) {
    int sig = 0;
    if (sigwait(&signals, &sig) != 0) continue;
    if (sig == SIGHUP) {
      if (on_reload) on_reload();
      continue;
    }
    NotifyStopping();
    return sig;
  }
}

namespace {

// Each option's values, the log level left out (it is what a reload applies).
std::map<std::string, std::vector<std::string>> ByName(const std::vector<OptionValue>& values) {
  std::map<std::string, std::vector<std::string>> out;
  for (const OptionValue& v : values) {
    if (v.name == "log-level") continue;
    auto& list = out[v.name];
    // A later value replaces an earlier one (command line over file), as the parsers apply them.
    list.assign(1, v.value);
  }
  return out;
}

}  // namespace

void Reload(const std::string& program, const std::vector<OptionValue>& running,
            const std::function<Result<Reparsed>()>& reparse, const std::string& status) {
  NotifyReloading();
  Result<Reparsed> next = reparse();
  if (!next.ok()) {
    Log(LogLevel::kError, "%s: reload refused, running on unchanged: %s", program.c_str(),
        next.status().message().c_str());
    NotifyReady(status + "; the last reload failed: " + next.status().message());
    return;
  }
  SetLogLevel(next->log_level);
  const auto before = ByName(running);
  const auto after = ByName(next->values);
  std::string changed;
  for (const auto& [name, values] : after) {
    auto it = before.find(name);
    if (it == before.end() || it->second != values) changed += (changed.empty() ? "" : ", ") + name;
  }
  for (const auto& [name, values] : before) {
    if (after.count(name) == 0) changed += (changed.empty() ? "" : ", ") + name;
  }
  if (!changed.empty()) {
    Log(LogLevel::kWarning, "%s: reload: %s changed; that takes effect at the next restart",
        program.c_str(), changed.c_str());
  }
  Log(LogLevel::kInfo, "%s: configuration reloaded (log level applied)", program.c_str());
  NotifyReady(status);
}

}  // namespace propeller::daemon
