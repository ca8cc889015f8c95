// The metrics of `propeller up` and `propeller mount` (docs/metrics.md): the embedded master's
// and index node's families on one endpoint, and a mount's (prefix propeller_mount_), read at
// scrape time from IndexWriterStats and CaptureFsStats.
//
// Threading: Register* from one thread before serving; collectors run on the scraping thread.
#ifndef PROPELLER_CLIENT_CLI_SERVICE_METRICS_H_
#define PROPELLER_CLIENT_CLI_SERVICE_METRICS_H_

#include "client/cli/embedded_service.h"
#include "client/fuse/capture_fs.h"
#include "client/fuse/index_writer.h"
#include "common/metrics.h"

namespace propeller::cli {

// `service` must outlive the registry's use.
void RegisterEmbeddedMetrics(EmbeddedService* service, metrics::Registry* registry);
// `writer` and `fs` must outlive the registry's use.
void RegisterMountMetrics(fuse::IndexWriter* writer, fuse::CaptureFs* fs,
                          metrics::Registry* registry);

}  // namespace propeller::cli

#endif  // PROPELLER_CLIENT_CLI_SERVICE_METRICS_H_
