// Live queries on the apply path (Engine::Watch; indexnode/watch_hub.h, docs/architecture.md
// §9 "Live queries").
#include <optional>
#include <unordered_map>
#include <utility>

#include "common/query/query.h"
#include "indexnode/acg.h"
#include "indexnode/engine.h"
#include "indexnode/engine_impl.h"

namespace propeller {

Status Engine::Impl::ApplyWatched(std::span<const Update> updates, uint64_t* frozen) {
  WriterLock lock(&watch_mu_);
  // Each file's record before the batch, then after each of its updates in turn (a batch
  // may change one file several times).
  std::unordered_map<FileId, std::optional<FileRecord>, FileIdHash> state;
  for (const Update& u : updates) {
    if (u.op == UpdateOp::kAddEdge || state.count(u.record.id) != 0) continue;
    Result<std::optional<FileRecord>> before = CurrentRecord(u.acg, u.record.id);
    if (!before.ok()) {
      // The batch is applied all the same (a watch must not fail updates); the watches are
      // told they missed changes.
      watches_.LoseAll("the record of a changed file could not be read (" +
                       before.status().ToString() + ")");
      return ApplyOnce(updates, frozen);
    }
    state.emplace(u.record.id, std::move(*before));
  }
  Status s = ApplyOnce(updates, frozen);
  if (!s.ok() || *frozen != 0) return s;
  for (const Update& u : updates) {
    if (u.op == UpdateOp::kAddEdge) continue;
    std::optional<FileRecord>& current = state[u.record.id];
    std::optional<FileRecord> next = current;
    ApplyToState(u.op, u.record, &next);
    watches_.Publish(u.acg, current, next);
    current = std::move(next);
  }
  return s;
}

Result<std::optional<FileRecord>> Engine::Impl::CurrentRecord(uint64_t acg_id, FileId id) {
  if (any_routes_.load(std::memory_order_acquire)) acg_id = Route(acg_id, id);
  Acg* acg = FindAcg(acg_id);
  if (acg == nullptr) return std::optional<FileRecord>();  // a new ACG: nothing in it yet
  acg->TrackCachedIds(true);  // one made since the watch began (cheap when already on)
  return acg->GetCurrent(id);
}

Result<std::unique_ptr<EngineWatch>> Engine::Impl::Watch(const WatchSpec& spec) {
  if (crashed_) return Status::Aborted("engine crashed");
  {
    ParseOptions po;
    po.now_ns = spec.now_ns != 0 ? spec.now_ns : options_.env->NowNanos();
    PROPELLER_ASSIGN_OR_RETURN(Query query, Query::Parse(spec.query, po));
    std::vector<std::string> unknown = UnknownAttrs(query);
    if (!unknown.empty()) {
      if (spec.report_unknown_attrs == nullptr) {
        PROPELLER_RETURN_IF_ERROR(UnknownAttrError(spec.query, unknown, po));
      } else {
        *spec.report_unknown_attrs = std::move(unknown);
      }
    }
  }
  // Alone on watch_mu_: no batch is between its read of the records and its publication.
  WriterLock lock(&watch_mu_);
  PROPELLER_ASSIGN_OR_RETURN(std::unique_ptr<EngineWatch> watch, watches_.Add(spec));
  if (!tracking_ids_.load()) {
    for (Acg* acg : AllAcgs()) acg->TrackCachedIds(true);
    tracking_ids_.store(true);
  }
  return watch;
}

void Engine::Impl::StopTrackingIds() {
  WriterLock lock(&watch_mu_);
  if (watches_.active() || !tracking_ids_.load()) return;
  for (Acg* acg : AllAcgs()) acg->TrackCachedIds(false);
  tracking_ids_.store(false);
}

}  // namespace propeller
