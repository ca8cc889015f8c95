// The master's metrics (docs/metrics.md, prefix propeller_master_): requests by message type
// and errors by status code (MasterService's counters), and the cluster's figures read at
// scrape time (Master::ClusterStatus: nodes, ACGs, files, volumes).
//
// Threading: RegisterMasterMetrics from one thread before serving; the collector runs on the
// scraping thread.
#ifndef PROPELLER_MASTER_MASTER_METRICS_H_
#define PROPELLER_MASTER_MASTER_METRICS_H_

#include "common/metrics.h"
#include "master/master_server.h"

namespace propeller::master {

// Adds the master's families to `registry`. `server` must outlive the registry's use.
void RegisterMasterMetrics(MasterServer* server, metrics::Registry* registry);

}  // namespace propeller::master

#endif  // PROPELLER_MASTER_MASTER_METRICS_H_
