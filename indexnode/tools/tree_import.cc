#include "indexnode/tools/tree_import.h"

#include <utility>

#include "common/tree_walk.h"

namespace propeller {
namespace {

constexpr size_t kBatch = 1000;

}  // namespace

Status ImportTree(const std::string& root, const ImportOptions& options,
                  const std::function<Status(std::vector<Update>&)>& emit, ImportStats* stats) {
  ImportStats local;
  if (stats == nullptr) stats = &local;
  std::vector<Update> batch;
  uint64_t acg = options.first_acg;
  uint64_t in_acg = 0;
  stats->acgs = 1;
  auto flush = [&]() -> Status {
    if (batch.empty()) return Status::OK();
    Status s = emit(batch);
    batch.clear();
    return s;
  };
  TreeWalkOptions walk_options;
  walk_options.volume = options.volume;
  TreeWalkStats walk_stats;
  Status s = WalkTree(
      root, walk_options,
      [&](FileRecord&& record) -> Status {
        Update u;
        u.op = UpdateOp::kPut;
        u.acg = acg;
        u.record = std::move(record);
        batch.push_back(std::move(u));
        if (++in_acg >= options.files_per_acg) {
          in_acg = 0;
          ++acg;
          ++stats->acgs;
        }
        return batch.size() >= kBatch ? flush() : Status::OK();
      },
      &walk_stats);
  if (s.ok()) s = flush();
  stats->files = walk_stats.files;
  stats->dirs = walk_stats.dirs;
  stats->skipped = walk_stats.skipped;
  return s;
}

}  // namespace propeller
