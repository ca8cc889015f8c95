#include "master/master_metrics.h"

#include "schemas/messages.h"
#include "schemas/wire_metrics.h"

namespace propeller::master {

void RegisterMasterMetrics(MasterServer* server, metrics::Registry* registry) {
  registry->Add([server](metrics::Writer& w) {
    const MasterService& service = server->service();
    w.CounterVec("propeller_master_requests_total", "Requests received, by message type.",
                 service.requests_by_type(), /*skip_zero=*/true);
    w.CounterVec("propeller_master_errors_total",
                 "Requests answered with an error, by status code.", service.errors_by_code(),
                 /*skip_zero=*/true);
    const metrics::CounterVec& by_type = service.requests_by_type();
    w.Counter("propeller_master_splits_total", "ACG splits and merges reported by index nodes.",
              by_type.value(wire::TypeIndex(wire::MsgType::kSplitDone)));
    w.Counter("propeller_master_moves_total", "ACG moves completed (reported by the adopting index node).",
              by_type.value(wire::TypeIndex(wire::MsgType::kMoveAcg)));
    w.Counter("propeller_master_file_assignments_total",
              "AssignFiles requests: placements of new files asked for.",
              by_type.value(wire::TypeIndex(wire::MsgType::kAssignFiles)));
    const rpc::ServerStats rpc = server->stats();
    w.Counter("propeller_master_malformed_frames_total", "Transport frames dropped unanswered.",
              rpc.malformed_frames);
    wire::ClusterStatusReply status;
    if (!server->master().ClusterStatus(&status).ok()) return;
    uint64_t up = 0;
    for (const wire::NodeInfo& n : status.nodes) up += n.up ? 1 : 0;
    w.Gauge("propeller_master_nodes", "Index nodes registered.",
            static_cast<double>(status.nodes.size()));
    w.Gauge("propeller_master_nodes_up", "Index nodes up (heartbeating).",
            static_cast<double>(up));
    w.Gauge("propeller_master_acgs", "ACGs in the cluster's map.",
            static_cast<double>(status.acgs));
    w.Gauge("propeller_master_files", "Files mapped to ACGs by the master.",
            static_cast<double>(status.files));
    w.Gauge("propeller_master_volumes", "Volumes registered.",
            static_cast<double>(status.volumes.size()));
  });
}

}  // namespace propeller::master
