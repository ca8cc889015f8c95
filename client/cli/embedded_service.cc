#include "client/cli/embedded_service.h"

#include <chrono>
#include <thread>

#include "common/env.h"
#include "common/secure_dir.h"

namespace propeller::cli {

EmbeddedService::~EmbeddedService() { (void)Stop(); }

Status EmbeddedService::Stop() {
  Status stopped = node ? node->Stop() : Status::OK();  // commits every cache, syncs the log
  node.reset();
  master.reset();
  return stopped;
}

Result<std::unique_ptr<EmbeddedService>> StartEmbeddedService(const EmbeddedServiceOptions& o) {
  if (Status st = PrepareDataDir(o.data_dir); !st.ok()) {
    return st.WithContext("data directory " + o.data_dir);
  }
  // The master's map (which file is in which ACG, the volumes) next to an index that needs
  // it: without it the node would be registered anew and every file placed again.
  const std::string node_id = JoinPath(JoinPath(o.data_dir, "node"), "node_id");
  const std::string map = JoinPath(JoinPath(o.data_dir, "master"), "data.mdb");
  if (Env::Default()->FileExists(node_id) && !Env::Default()->FileExists(map)) {
    return Status::NotFound("the master's map " + map + " is missing, but " + o.data_dir +
                            "/node holds an index that needs it. Restore it from a backup, or "
                            "move " + o.data_dir + " away to start afresh");
  }
  auto service = std::make_unique<EmbeddedService>();
  const std::string master_alias = "direct://propeller-" + o.tag + "-master";
  const std::string node_alias = "direct://propeller-" + o.tag + "-node";

  master::MasterOptions mo;
  mo.data_dir = JoinPath(o.data_dir, "master");
  mo.data_dir_checked = true;
  mo.listen = o.master_listen;
  mo.local_alias = master_alias;
  mo.acg_threshold = o.acg_threshold;
  // The master's maps get the node's durability level:
  // group commit every 10 ms by default (an fsync per created file would cost more than the
  // whole FUSE round trip), an fsync per mutation with sync.
  mo.sync = o.durability == Durability::kSync;
  mo.sync_interval_ms = 10;
  mo.cluster_key_file = o.cluster_key_file;
  mo.insecure = o.insecure;
  auto master = master::MasterServer::Start(mo);
  if (!master.ok()) return master.status().WithContext("master");
  service->master = std::move(master).value();

  IndexNodeOptions no;
  no.data_dir = JoinPath(o.data_dir, "node");
  no.data_dir_checked = true;
  no.listen_endpoint = o.node_listen;
  no.master_endpoint = master_alias;  // in-process: no socket between the two
  no.local_alias = node_alias;
  no.durability = o.durability;
  no.cluster_key_file = o.cluster_key_file;
  no.insecure = o.insecure;
  no.search_gate = o.search_gate;
  auto node = IndexNodeServer::Start(no);
  if (!node.ok()) return node.status().WithContext("index node");
  service->node = std::move(node).value();

  // Searches need the node in the master's node table.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!service->node->registered() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!service->node->registered()) {
    return Status::Timeout("the index node did not register with the master");
  }
  ClientOptions& co = service->client_options;
  co.master_endpoint = service->master->endpoint();
  co.endpoint_aliases[service->master->endpoint()] = master_alias;
  co.endpoint_aliases[service->node->advertised_endpoint()] = node_alias;
  co.cluster_key_file = o.cluster_key_file;
  co.insecure = o.insecure;
  return service;
}

}  // namespace propeller::cli
