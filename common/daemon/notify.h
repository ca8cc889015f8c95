// Readiness and state notifications to systemd (Type=notify units, deploy/systemd/). Each
// call sends one sd_notify(3) message when the process runs under a service manager that set
// $NOTIFY_SOCKET, and does nothing otherwise, so the programs behave the same outside
// systemd. Failures to send are ignored: systemd itself times a unit out that never gets
// READY=1.
//
// Threading: any thread.
#ifndef PROPELLER_COMMON_DAEMON_NOTIFY_H_
#define PROPELLER_COMMON_DAEMON_NOTIFY_H_

#include <string>

namespace propeller::daemon {

// "READY=1" with STATUS=`status`: the program serves (listening, or mounted).
void NotifyReady(const std::string& status);
// "RELOADING=1" with the current CLOCK_MONOTONIC time (MONOTONIC_USEC, which systemd 253's
// Type=notify-reload also wants). Follow with NotifyReady when the reload is done.
void NotifyReloading();
// "STOPPING=1": a clean stop has begun.
void NotifyStopping();
// "STATUS=`status`" alone (what `systemctl status` shows).
void NotifyStatus(const std::string& status);

}  // namespace propeller::daemon

#endif  // PROPELLER_COMMON_DAEMON_NOTIFY_H_
