// Placement: which ACG a newly seen file joins (docs/architecture.md §5 Placement of new files),
// decided by the master inside the store transaction that records the decision.
//
// For each item, in request order (later items see the mappings of earlier ones):
//   1. a file already mapped keeps its ACG;
//   2. else it joins the ACG of its first mapped producer (producers come heaviest edge
//      first), whatever that ACG's size — splitting an ACG that outgrew the threshold is the
//      index node's job;
//   3. else the app's current ACG, if it holds fewer than `acg_threshold` files and its node
//      is up (a new file must be writable now; files of a down node's ACG wait for the node);
//   4. else a new ACG (ids from 1, never reused) on the up node with the fewest files — ties
//      to the lowest node id — which becomes the app's current ACG.
// No up node when rule 4 is needed: Unavailable, and nothing of the batch is kept.
//
// A node's files (its load) = for each ACG the store maps to it, the larger of the store's
// count and the count the node's last heartbeat reported for that ACG, plus the files the
// node reported for ACGs the store does not map to it. Taking the larger per ACG rather than
// the sum keeps a file that is both mapped and indexed from counting twice.
//
// Deterministic: the same store state, context and items give the same mappings.
// Thread-compatible: runs on the one thread that holds the MasterStore::Txn.
#ifndef PROPELLER_MASTER_PLACEMENT_H_
#define PROPELLER_MASTER_PLACEMENT_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "common/status.h"
#include "master/store.h"
#include "schemas/messages.h"

namespace propeller::master {

struct PlacementContext {
  uint64_t acg_threshold = 50000;  // >= 1
  std::set<uint32_t> up_nodes;
  // Per node, the files per ACG its last heartbeat reported (up nodes only matter; shared
  // with NodeState::acgs, never null).
  std::map<uint32_t, std::shared_ptr<const std::map<uint64_t, uint64_t>>> reported;
};

using AcgVisitor = std::function<void(uint64_t acg, const AcgRecord& rec)>;
// The load (as defined above) of every node in ctx.up_nodes; `for_each_acg` calls its
// argument once for every ACG of the store (MasterStore::Txn::ForEachAcg, or a loop over
// MasterStore::Acgs()).
std::map<uint32_t, uint64_t> NodeLoads(const std::function<void(const AcgVisitor&)>& for_each_acg,
                                       const PlacementContext& ctx);

// Applies the rules above to `items` inside `txn`; (*acgs)[i] is the ACG of items[i].file and
// (*generations)[i] (optional) its mapping's generation. A mapped file keeps its ACG and
// generation, except an item marked `fresh` (a just-created inode number): its old mapping
// belongs to a deleted file, so it is placed by the rules as if unmapped and always gets a
// new generation (a forget still in flight for the old mapping then misses it).
// Errors: Unavailable (no up node for a new ACG), InvalidArgument (an app tag longer than
// kMaxAppBytes), the Txn's LMDB errors. The outputs are reset first (Update may call this
// twice).
Status PlaceFiles(MasterStore::Txn& txn, const PlacementContext& ctx,
                  const std::vector<wire::AssignItem>& items, std::vector<uint64_t>* acgs,
                  std::vector<uint64_t>* generations = nullptr);

}  // namespace propeller::master

#endif  // PROPELLER_MASTER_PLACEMENT_H_
