#include "master/placement.h"

#include <algorithm>
#include <optional>

namespace propeller::master {
namespace {

uint64_t Reported(const PlacementContext& ctx, uint32_t node, uint64_t acg) {
  auto n = ctx.reported.find(node);
  if (n == ctx.reported.end()) return 0;
  auto a = n->second->find(acg);
  return a == n->second->end() ? 0 : a->second;
}

}  // namespace

std::map<uint32_t, uint64_t> NodeLoads(const std::function<void(const AcgVisitor&)>& for_each_acg,
                                       const PlacementContext& ctx) {
  // load(n) = sum over ACGs owned by n of max(store, reported) + reported for the others
  //         = reported total of n + sum over ACGs owned by n of max(0, store - reported),
  // which needs one pass over the ACGs and no lookups.
  std::map<uint32_t, uint64_t> loads;
  for (uint32_t node : ctx.up_nodes) {
    uint64_t total = 0;
    auto n = ctx.reported.find(node);
    if (n != ctx.reported.end()) {
      for (const auto& [acg, files] : *n->second) total += files;
    }
    loads[node] = total;
  }
  for_each_acg([&](uint64_t acg, const AcgRecord& rec) {
    auto it = loads.find(rec.node_id);
    if (it == loads.end()) return;
    const uint64_t rep = Reported(ctx, rec.node_id, acg);
    if (rec.files > rep) it->second += rec.files - rep;
  });
  return loads;
}

Status PlaceFiles(MasterStore::Txn& txn, const PlacementContext& ctx,
                  const std::vector<wire::AssignItem>& items, std::vector<uint64_t>* acgs,
                  std::vector<uint64_t>* generations) {
  acgs->clear();
  acgs->reserve(items.size());
  if (generations != nullptr) generations->clear();
  for (const wire::AssignItem& item : items) {
    if (item.app.size() > kMaxAppBytes) {
      return Status::InvalidArgument("app tag longer than " + std::to_string(kMaxAppBytes) +
                                     " bytes");
    }
  }
  // Built when the first new ACG is needed, then kept current as files are mapped, so a
  // batch of many new apps costs one pass over the ACG table, not one per new ACG.
  std::optional<std::map<uint32_t, uint64_t>> loads;
  for (const wire::AssignItem& item : items) {
    PROPELLER_ASSIGN_OR_RETURN(const FileMapping mapped, txn.Mapping(item.file));
    uint64_t acg = item.fresh ? 0 : mapped.acg;
    if (acg != 0) {
      acgs->push_back(acg);
      if (generations != nullptr) generations->push_back(mapped.generation);
      continue;
    }
    for (const FileId& producer : item.producers) {
      if (producer == item.file) continue;  // its own old mapping is not a producer
      PROPELLER_ASSIGN_OR_RETURN(acg, txn.FileAcg(producer));
      if (acg != 0) break;
    }
    if (acg == 0) {
      const uint64_t app_acg = txn.AppAcg(item.app);
      const AcgRecord* rec = app_acg == 0 ? nullptr : txn.FindAcg(app_acg);
      if (rec != nullptr && rec->files < ctx.acg_threshold &&
          ctx.up_nodes.count(rec->node_id) != 0) {
        acg = app_acg;
      }
    }
    if (acg == 0) {
      if (ctx.up_nodes.empty()) {
        return Status::Unavailable("no index node is up to hold a new ACG");
      }
      if (!loads.has_value()) {
        loads = NodeLoads([&](const AcgVisitor& fn) { txn.ForEachAcg(fn); }, ctx);
      }
      // Fewest files; std::map iterates by id, and min_element keeps the first of equals.
      const auto least = std::min_element(
          loads->begin(), loads->end(),
          [](const auto& a, const auto& b) { return a.second < b.second; });
      PROPELLER_ASSIGN_OR_RETURN(acg, txn.CreateAcg(least->first, item.app));
      PROPELLER_RETURN_IF_ERROR(txn.SetAppAcg(item.app, acg));
    }
    const AcgRecord* rec = txn.FindAcg(acg);
    const uint64_t before = rec->files;
    const uint32_t node = rec->node_id;
    uint64_t gen = 0;
    PROPELLER_RETURN_IF_ERROR(txn.MapFile(item.file, acg, /*renew=*/true, &gen));
    if (loads.has_value() && mapped.acg != acg) {
      auto it = loads->find(node);
      if (it != loads->end()) {
        const uint64_t rep = Reported(ctx, node, acg);
        it->second += std::max(before + 1, rep) - std::max(before, rep);
      }
      // (A fresh file moved away from its old ACG leaves that node's load a file high for
      // the rest of this batch: placement only needs loads roughly right.)
    }
    acgs->push_back(acg);
    if (generations != nullptr) generations->push_back(gen);
  }
  return Status::OK();
}

}  // namespace propeller::master
