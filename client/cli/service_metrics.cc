#include "client/cli/service_metrics.h"

#include "indexnode/server/node_metrics.h"
#include "master/master_metrics.h"

namespace propeller::cli {

void RegisterEmbeddedMetrics(EmbeddedService* service, metrics::Registry* registry) {
  master::RegisterMasterMetrics(service->master.get(), registry);
  RegisterIndexNodeMetrics(service->node.get(), registry);
}

void RegisterMountMetrics(fuse::IndexWriter* writer, fuse::CaptureFs* fs,
                          metrics::Registry* registry) {
  registry->Add([writer, fs](metrics::Writer& w) {
    const fuse::IndexWriterStats s = writer->stats();
    w.Counter("propeller_mount_updates_sent_total",
              "Index updates acknowledged by the index at once.", s.sent);
    w.Counter("propeller_mount_updates_queued_total",
              "Index updates that went to the pending queue (the index could not take them).",
              s.queued);
    w.Counter("propeller_mount_updates_delivered_total",
              "Queued index updates delivered later.", s.delivered);
    w.Counter("propeller_mount_updates_refused_total",
              "Index updates the index refused as invalid (logged, dropped).", s.refused);
    w.Counter("propeller_mount_update_errors_total",
              "Operations failed with EIO: their update could be neither sent nor queued.",
              s.errors);
    w.Counter("propeller_mount_admit_refusals_total",
              "Operations refused with ENOSPC before they began (queue full).",
              s.admit_refusals);
    w.Gauge("propeller_mount_pending_updates", "Index updates in the pending queue now.",
            static_cast<double>(s.pending));
    w.Gauge("propeller_mount_degraded", "1 while the index cannot take updates, else 0.",
            s.degraded_since_ns != 0 ? 1 : 0);
    const fuse::CaptureFsStats f = fs->stats();
    w.Counter("propeller_mount_read_errors_total",
              "File system calls failed because the changed file could not be read.",
              f.read_errors);
    w.Counter("propeller_mount_edges_sent_total", "Provenance edges sent to the index.",
              f.edges_sent);
    w.Counter("propeller_mount_edge_errors_total", "Provenance edges dropped.", f.edge_errors);
    w.Counter("propeller_mount_query_dirs_total", "Query-directory listings computed.",
              f.query_dirs);
    w.Gauge("propeller_mount_processes", "Processes tracked now.",
            static_cast<double>(f.processes));
    w.Counter("propeller_mount_passthrough_opens_total",
              "Opens answered in kernel passthrough mode.", f.passthrough_opens);
    w.Counter("propeller_mount_polled_requests_total",
              "FUSE requests served by the polling reader.", f.polled_requests);
  });
}

}  // namespace propeller::cli
