// The stop and reload signals of the long-running programs: SIGINT and SIGTERM stop them
// cleanly, SIGHUP reloads what can change without a restart (under systemd: ExecReload sends
// SIGHUP, deploy/systemd/). One thread takes the signals with sigwait(); every other thread
// has them blocked, so none is interrupted in the middle of a transaction.
//
// Threading: BlockStopSignals before any thread starts; WaitForStopSignal from one thread.
#ifndef PROPELLER_COMMON_DAEMON_SIGNALS_H_
#define PROPELLER_COMMON_DAEMON_SIGNALS_H_

#include <signal.h>

#include <functional>
#include <string>
#include <vector>

#include "common/daemon/options.h"
#include "common/logging.h"
#include "common/status.h"

namespace propeller::daemon {

// Blocks SIGINT, SIGTERM and SIGHUP in the calling thread (and so in the threads it starts
// later) and returns that set.
sigset_t BlockStopSignals();

// Waits for SIGINT or SIGTERM in `signals` and returns it, after sending STOPPING=1 to systemd
// (notify.h). Each SIGHUP meanwhile calls `on_reload` (when set) and goes on waiting.
int WaitForStopSignal(const sigset_t& signals, const std::function<void()>& on_reload);

// What a program's options are after re-reading its configuration file.
struct Reparsed {
  LogLevel log_level = LogLevel::kInfo;
  std::vector<OptionValue> values;  // as LoadedOptions::values
};

// One reload, as SIGHUP asks: sends RELOADING=1, calls `reparse` (the program's own parser
// over its configuration file and original command line), applies the new log level, logs a
// warning for every other option whose value changed from `running` (those take effect at the
// next restart) and sends READY=1 with `status`. When `reparse` fails, logs why and keeps
// running as before. `program` prefixes the log lines.
void Reload(const std::string& program, const std::vector<OptionValue>& running,
            const std::function<Result<Reparsed>()>& reparse, const std::string& status);

}  // namespace propeller::daemon

#endif  // PROPELLER_COMMON_DAEMON_SIGNALS_H_
