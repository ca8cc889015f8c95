#include "indexnode/server/node_metrics.h"

#include "indexnode/server/node_server.h"
#include "indexnode/server/node_service.h"

namespace propeller {

void NodeRequestMetrics::Record(wire::MsgType type, std::string_view reply,
                                std::chrono::steady_clock::time_point start) {
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  requests.Add(wire::TypeIndex(type));
  const int code = wire::PeekReplyCode(reply);
  if (code > 0) errors.Add(static_cast<size_t>(code));
  if (type == wire::MsgType::kApply) {
    apply_seconds.Observe(seconds);
  } else if (type == wire::MsgType::kSearch) {
    search_seconds.Observe(seconds);
  }
}

namespace {

void WriteRequests(const NodeRequestMetrics& m, metrics::Writer& w) {
  w.CounterVec("propeller_node_requests_total", "Requests received, by message type.",
               m.requests, /*skip_zero=*/true);
  w.CounterVec("propeller_node_errors_total", "Requests answered with an error, by status code.",
               m.errors, /*skip_zero=*/true);
  w.Counter("propeller_node_updates_total", "Updates acknowledged (in Apply requests).",
            m.updates.value());
  w.Counter("propeller_node_update_batches_total", "Apply requests acknowledged.",
            m.update_batches.value());
  w.Counter("propeller_node_searches_total", "Search requests received.",
            m.requests.value(wire::TypeIndex(wire::MsgType::kSearch)));
  w.Family("propeller_node_apply_seconds",
           "Apply request latency, arrival to acknowledgement (or error).",
           metrics::Type::kHistogram);
  w.Histogram(m.apply_seconds.Snapshot());
  w.Family("propeller_node_search_seconds", "Search request latency, arrival to the last hit.",
           metrics::Type::kHistogram);
  w.Histogram(m.search_seconds.Snapshot());
}

void WriteEngine(Engine* engine, metrics::Writer& w) {
  const EngineStats s = engine->Stats();
  w.Gauge("propeller_node_acgs", "ACGs (partitions) held by this node.",
          static_cast<double>(s.acgs));
  w.Gauge("propeller_node_files", "Files in the ACGs of this node.", static_cast<double>(s.files));
  w.Gauge("propeller_node_cached_updates", "Updates in the write caches, not yet committed.",
          static_cast<double>(s.cached_updates));
  w.Gauge("propeller_node_cache_bytes", "Memory of the write caches.",
          static_cast<double>(s.cache_bytes));
  w.Gauge("propeller_node_log_bytes", "Bytes of the write-ahead log.",
          static_cast<double>(s.wal_bytes));
  w.Gauge("propeller_node_disk_bytes", "Bytes on disk: LMDB files and the log.",
          static_cast<double>(s.disk_bytes));
  w.Gauge("propeller_node_index_memory_bytes", "Memory of the loaded hash and K-D indexes.",
          static_cast<double>(s.index_memory_bytes));
  w.Gauge("propeller_node_open_acgs", "ACGs with their index objects open.",
          static_cast<double>(s.open_acgs));
  w.Counter("propeller_node_acg_commits_total", "ACG commits that committed something.",
            s.acg_commits);
  w.Counter("propeller_node_committed_updates_total", "Updates committed from the caches.",
            s.committed_updates);
  w.Counter("propeller_node_store_commits_total", "LMDB transactions of the commits.",
            s.store_commits);
  w.Counter("propeller_node_commit_failures_total", "Commit passes that failed.",
            s.commit_failures);
  w.Gauge("propeller_node_commit_failing", "1 while commits keep failing, else 0.",
          s.commit_failing_since_ns != 0 ? 1 : 0);
  w.Family("propeller_node_commit_seconds", "Duration of commit passes that committed.",
           metrics::Type::kHistogram);
  w.Histogram(s.commit_seconds);
  w.Counter("propeller_node_splits_total", "ACG splits committed on this node.", s.splits);
  w.Counter("propeller_node_merges_total", "ACG merges committed on this node.", s.merges);
  // Per-ACG sizes as one histogram (not a series per ACG), to bound the series count.
  metrics::Histogram sizes(metrics::SizeBuckets());
  for (const AcgInfo& info : engine->ListAcgs()) sizes.Observe(static_cast<double>(info.files));
  w.Family("propeller_node_acg_files", "Files per ACG: one observation per ACG held.",
           metrics::Type::kHistogram);
  w.Histogram(sizes.Snapshot());
}

}  // namespace

void RegisterIndexNodeMetrics(IndexNodeServer* server, metrics::Registry* registry) {
  registry->Add([server](metrics::Writer& w) {
    NodeService* service = server->service();
    WriteRequests(service->request_metrics(), w);
    const NodeServiceStats st = service->stats();
    w.Counter("propeller_node_bad_requests_total", "Requests whose message failed to decode.",
              st.bad_requests);
    w.Counter("propeller_node_redirects_total",
              "Requests for ACGs owned elsewhere (answered with a redirect).", st.redirects);
    w.Counter("propeller_node_moves_out_total", "ACG migrations out of this node requested.",
              service->request_metrics().requests.value(
                  wire::TypeIndex(wire::MsgType::kMigrateAcg)));
    w.Gauge("propeller_node_registered", "1 once the master accepted this node's registration.",
            server->registered() ? 1 : 0);
    w.Counter("propeller_node_heartbeats_total", "Heartbeats the master acknowledged.",
              server->heartbeats());
    WriteEngine(server->engine(), w);
  });
}

}  // namespace propeller
