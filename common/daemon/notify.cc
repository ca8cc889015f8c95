#include "common/daemon/notify.h"

#include <systemd/sd-daemon.h>
#include <time.h>

#include <cstdint>

namespace propeller::daemon {
namespace {

// unset_environment 0: the daemons' own children (none today) could notify too.
void Send(const std::string& message) { (void)sd_notify(0, message.c_str()); }

}  // namespace

void NotifyReady(const std::string& status) { Send("READY=1\nSTATUS=" + status); }

void NotifyReloading() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  const uint64_t usec = static_cast<uint64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
  Send("RELOADING=1\nSTATUS=reloading the configuration\nMONOTONIC_USEC=" +
       std::to_string(usec));
}

void NotifyStopping() { Send("STOPPING=1\nSTATUS=stopping"); }

void NotifyStatus(const std::string& status) { Send("STATUS=" + status); }

}  // namespace propeller::daemon
