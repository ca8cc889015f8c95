// MetricsServer: the opt-in HTTP listener of --metrics-listen (docs/metrics.md), serving one
// metrics::Registry as Prometheus text on GET /metrics, for propeller-master,
// propeller-indexnode, `propeller mount` and `propeller up`.
//
// Only GET (and HEAD) of /metrics is answered; every other method or path gets 404 without
// running anything. A local client cannot exhaust the daemon through it: two handler threads,
// at most kMaxQueuedConnections accepted connections waiting for them (the accepting thread
// then stops accepting, and the kernel's backlog of 5 refuses the rest), request bodies over
// 1 KiB refused (413), request lines and headers bounded by cpp-httplib (8 KiB each: 414/400),
// 2-second read and write timeouts and one request per connection.
//
// The metrics carry counts, sizes and latencies only — no file names, paths, queries or user
// names — so the listener needs no authentication; still, bind it to 127.0.0.1 unless a
// scraper on another host needs it (docs/metrics.md).
//
// Threading: Start and the destructor from one thread; address() from any thread.
#ifndef PROPELLER_COMMON_DAEMON_METRICS_SERVER_H_
#define PROPELLER_COMMON_DAEMON_METRICS_SERVER_H_

#include <memory>
#include <string>

#include "common/metrics.h"
#include "common/status.h"

namespace propeller::daemon {

// "HOST:PORT" (HOST a name or IPv4 address, or an IPv6 address in brackets; PORT 0-65535, 0 =
// any free port). InvalidArgument naming `what` otherwise.
Status ParseListenAddress(const std::string& what, const std::string& text, std::string* host,
                          int* port);

class MetricsServer {
 public:
  static constexpr size_t kMaxQueuedConnections = 8;

  // Binds `listen` ("HOST:PORT") and serves `registry` on a background thread, logging
  // "metrics: serving http://HOST:PORT/metrics" (the chosen port for port 0) at info level.
  // `registry` must outlive the server. InvalidArgument for a bad address, IOError when the
  // bind fails.
  static Result<std::unique_ptr<MetricsServer>> Start(const std::string& listen,
                                                      const metrics::Registry* registry);
  // Stops accepting, waits for the handler threads.
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // "HOST:PORT" with the bound port.
  const std::string& address() const;

 private:
  class Impl;
  explicit MetricsServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace propeller::daemon

#endif  // PROPELLER_COMMON_DAEMON_METRICS_SERVER_H_
