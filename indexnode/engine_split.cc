// Engine::Impl (engine_impl.h): splits and merges of ACGs on this node (indexnode/README.md,
// "Splitting an ACG"; engine.h SplitAcg, MergeAcg, PlanSplit), the background splitter, and
// their recovery.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/lmdb_check.h"
#include "common/logging.h"
#include "common/secure_dir.h"
#include "indexnode/engine_impl.h"
#include "schemas/keys.h"
#include "schemas/messages.h"

namespace propeller {

void Engine::Impl::SplitOversized(std::map<uint64_t, int64_t>* retry_at) {
  constexpr int64_t kRetryNs = 30'000'000'000;
  for (Acg* acg : VisibleAcgs()) {
    if (crashed_) return;
    const uint64_t source = acg->id();
    if (acg->files() <= options_.split_threshold_files) continue;
    const int64_t now = options_.env->MonotonicNanos();
    auto it = retry_at->find(source);
    if (it != retry_at->end() && now < it->second) continue;
    const int64_t t0 = now;
    SplitReport report;
    Result<std::vector<FileId>> plan = PlanSplit(source, 0.05, /*seed=*/1, &report);
    Result<uint64_t> target = plan.ok() ? options_.split_target_id(source) : plan.status();
    Status s = target.ok() ? SplitAcg(source, *target, *plan, 0) : target.status();
    if (!s.ok()) {
      Log(LogLevel::kWarning, "split of ACG %llu (%llu files): %s; retrying in 30 s",
          static_cast<unsigned long long>(source),
          static_cast<unsigned long long>(acg->files()), s.ToString().c_str());
      (*retry_at)[source] = options_.env->MonotonicNanos() + kRetryNs;
      if (crashed_) return;
      continue;
    }
    retry_at->erase(source);
    Log(LogLevel::kInfo,
        "split ACG %llu: %zu of %u files to ACG %llu in %.3f s (partition %.3f s, cut %.2f%%)",
        static_cast<unsigned long long>(source), plan->size(), report.vertices,
        static_cast<unsigned long long>(*target),
        static_cast<double>(options_.env->MonotonicNanos() - t0) / 1e9,
        report.partition_seconds, report.cut_percent);
    if (options_.on_split) options_.on_split(source, *target, *plan);
  }
}

Status Engine::Impl::SplitAcg(uint64_t source_id, uint64_t target_id,
                              std::span<const FileId> moving_ids, int crash_after_step) {
  if (crashed_) return Status::Aborted("engine crashed");
  MutexLock split_lock(&split_mu_);
  if (target_id == 0 || target_id == source_id) {
    return Status::InvalidArgument("split target must be a new ACG id other than the source");
  }
  Acg* source = FindAcg(source_id);
  if (source == nullptr) return NotHere(source_id);
  if (frozen_.IsFrozen(source_id)) {
    return Status::Unavailable("ACG " + std::to_string(source_id) + " is being moved");
  }
  if (FindAcg(target_id) != nullptr || options_.env->FileExists(AcgDir(target_id)) ||
      MovedTo(target_id) != 0) {
    return Status::AlreadyExists("ACG " + std::to_string(target_id) + " exists");
  }
  const int64_t t_start = options_.env->MonotonicNanos();
  Acg::FileIdSet moving(moving_ids.begin(), moving_ids.end());
  const std::string what =
      "splitting ACG " + std::to_string(source_id) + " into " + std::to_string(target_id);
  PROPELLER_RETURN_IF_ERROR(CommitAcg(source).WithContext(what));
  source->StartWatch();
  // From here on a failure stops the engine: Open decides from the marker and the routes.
  auto fail = [&](const Status& s) {
    Log(LogLevel::kError, "%s: %s; the engine stops (reopen to recover)", what.c_str(),
        s.ToString().c_str());
    Crash();
    return s.WithContext(what + " (engine stopped; reopen to recover)");
  };
  auto crash_at = [&](int step) {
    if (options_.split_step_hook) options_.split_step_hook(step);
    return crash_after_step == step;
  };

  Status s = options_.env->CreateDirs(AcgDir(target_id));
  if (s.ok()) {
    s = WriteFileAtomically(options_.env, SplitMarkerPath(target_id),
                            std::to_string(source_id) + "\n");
  }
  if (s.ok()) {  // the cluster's record of the split, kept until SplitReported
    s = reports_.Write(target_id, source_id, moving_ids);
  }
  if (!s.ok()) {  // nothing refers to the directory yet (Open removes it: no routes)
    source->StopWatch();
    return s.WithContext(what);
  }
  {
    WriterLock lock(&acgs_mu_);
    hidden_acg_ = target_id;
  }
  Result<Acg*> created = GetOrCreateAcg(target_id);
  if (!created.ok()) return fail(created.status());
  Acg* target = *created;

  // Step 1: the snapshot copy.
  std::vector<FileRecord> records;
  std::vector<FileId> absent;
  std::vector<StoredEdge> edges;
  uint64_t snapshot_lsn = 0;
  {
    WriterLock lock(source->mutex());
    s = source->ExportHeld(moving, /*watched_only=*/false, &records, &absent, &edges);
    snapshot_lsn = source->applied_lsn();
  }
  std::vector<Update> copy;
  if (s.ok()) {
    AppendSplitCopy(target_id, records, {}, edges, {}, &copy);
    WriterLock lock(target->mutex());
    s = target->ImportHeld(copy, snapshot_lsn);
  }
  if (!s.ok()) return fail(s);
  if (crash_at(1)) return fail(Status::Aborted("crash after step 1 (test)"));

  // What the source's commits changed in the moving files since the last copy, copied as
  // deltas against the target (edge weights only grow).
  auto copy_delta = [&](uint64_t applied_lsn, size_t* n)
                        PROPELLER_REQUIRES(source->mutex(), target->mutex()) -> Status {
    std::vector<FileRecord> changed, unused_records;
    std::vector<FileId> gone, unused_absent;
    std::vector<StoredEdge> edges_now, edges_copied;
    PROPELLER_RETURN_IF_ERROR(
        source->ExportHeld(moving, /*watched_only=*/true, &changed, &gone, &edges_now));
    Acg::FileIdSet touched;
    for (const FileRecord& r : changed) touched.insert(r.id);
    for (const FileId& id : gone) touched.insert(id);
    PROPELLER_RETURN_IF_ERROR(target->ExportHeld(touched, /*watched_only=*/false,
                                                 &unused_records, &unused_absent,
                                                 &edges_copied));
    copy.clear();
    AppendSplitCopy(target_id, changed, gone, edges_now, edges_copied, &copy);
    *n = copy.size();
    return target->ImportHeld(copy, applied_lsn);
  };
  // Catch-up passes while searches go on (only the two ACGs' own searches wait, for one
  // pass each): the switch below then copies only what changed during the last one.
  size_t passes = 0;
  while (passes < kSplitCatchUpPasses) {
    ++passes;
    size_t n = 0;
    s = [&]() -> Status {
      WriterLock source_lock(source->mutex());
      WriterLock target_lock(target->mutex());
      PROPELLER_RETURN_IF_ERROR(wal_->Sync());
      PROPELLER_RETURN_IF_ERROR(source->CommitHeld(wal_->synced_lsn()));
      return copy_delta(source->applied_lsn(), &n);
    }();
    if (!s.ok()) return fail(s);
    if (n <= kSplitSmallDelta) break;
  }

  // Step 2: the switch. Errors leave the block first: Crash() waits for the committer,
  // which may be waiting for these locks.
  const int64_t t_switch = options_.env->MonotonicNanos();
  size_t delta_updates = 0;
  int64_t t_remove = 0;
  LockSwitch(source, target);
  s = [&]() PROPELLER_REQUIRES(source->mutex(), target->mutex()) -> Status {
    uint64_t switch_lsn = 0;
    wal_->RunLocked([&](uint64_t next_lsn) {
      switch_lsn = next_lsn - 1;  // every record up to here was cached by the old routes
      split_hold_lsn_.store(next_lsn);
      source->AddRoutes(moving, target_id);
      any_routes_.store(true);
      route_epoch_.fetch_add(1);
    });
    if (crash_at(2)) return Status::Aborted("crash after step 2 (test)");
    PROPELLER_RETURN_IF_ERROR(wal_->Sync());  // commits never get ahead of the durable log
    PROPELLER_RETURN_IF_ERROR(source->CommitHeld(switch_lsn));
    PROPELLER_RETURN_IF_ERROR(copy_delta(switch_lsn, &delta_updates));
    source->StopWatchHeld();
    if (crash_at(3)) return Status::Aborted("crash after step 3 (test)");
    t_remove = options_.env->MonotonicNanos();
    PROPELLER_RETURN_IF_ERROR(source->RecordMovedHeld(moving, target_id, false));  // commit
    if (crash_at(4)) return Status::Aborted("crash after step 4 (test)");
    PROPELLER_RETURN_IF_ERROR(options_.env->RemoveFile(SplitMarkerPath(target_id)));
    PROPELLER_RETURN_IF_ERROR(options_.env->SyncDir(AcgDir(target_id)));
    reports_.Note(target_id, source_id);
    WriterLock lock(&acgs_mu_);
    hidden_acg_ = 0;
    split_hold_lsn_.store(0);
    return Status::OK();
  }();
  UnlockSwitch(source, target, s);
  if (!s.ok()) return fail(s);
  const int64_t t_end = options_.env->MonotonicNanos();
  if (options_.split_step_hook) options_.split_step_hook(5);
  CleanUpMoved(source, moving);
  Log(LogLevel::kInfo,
      "%s: %zu files and %zu edges copied in %.3f s (%zu catch-up passes); switch "
      "(searches paused) %.3f s: commit and a delta of %zu updates %.3f s, routes %.3f s; "
      "then the moved files left the source in %.3f s",
      what.c_str(), records.size(), edges.size(),
      static_cast<double>(t_switch - t_start) / 1e9, passes,
      static_cast<double>(t_end - t_switch) / 1e9, delta_updates,
      static_cast<double>(t_remove - t_switch) / 1e9,
      static_cast<double>(t_end - t_remove) / 1e9,
      static_cast<double>(options_.env->MonotonicNanos() - t_end) / 1e9);
  OnAcgOpened(source);
  OnAcgOpened(target);
  splits_.fetch_add(1, std::memory_order_relaxed);
  return Status::OK();
}

Result<std::vector<FileId>> Engine::Impl::PlanSplit(uint64_t acg_id, double imbalance, int seed,
                                                    SplitReport* report) {
  if (crashed_) return Status::Aborted("engine crashed");
  Acg* acg = FindAcg(acg_id);
  if (acg == nullptr) return Status::NotFound("no ACG " + std::to_string(acg_id));
  PROPELLER_RETURN_IF_ERROR(CommitAcg(acg));
  std::vector<FileId> ids;
  PROPELLER_RETURN_IF_ERROR(acg->ListFileIds(&ids));  // sorted
  std::vector<StoredEdge> edges;
  PROPELLER_RETURN_IF_ERROR(acg->ListEdges(&edges));
  EnforceOpenBounds();
  if (ids.size() > static_cast<size_t>(CsrGraph::kMaxIndex)) {
    return Status::ResourceExhausted("ACG too large to partition");
  }
  auto vertex = [&](const FileId& id) -> int64_t {
    auto it = std::lower_bound(ids.begin(), ids.end(), id);
    return it != ids.end() && *it == id ? it - ids.begin() : -1;
  };
  // Edges to files elsewhere (or deleted) do not tie two of this ACG's files.
  std::vector<WeightedEdge> graph_edges;
  for (const StoredEdge& e : edges) {
    const int64_t u = vertex(e.src), v = vertex(e.dst);
    if (u >= 0 && v >= 0) {
      graph_edges.push_back(
          WeightedEdge{static_cast<uint32_t>(u), static_cast<uint32_t>(v), e.weight});
    }
  }
  const CsrGraph graph =
      CsrGraph::FromDirectedEdges(static_cast<uint32_t>(ids.size()), graph_edges);
  SplitOptions so;
  so.imbalance = imbalance;
  so.seed = seed;
  PROPELLER_ASSIGN_OR_RETURN(Split split, SplitInTwo(graph, so));
  std::vector<FileId> lighter;
  for (size_t v = 0; v < ids.size(); ++v) {
    if (split.side[v] == 1) lighter.push_back(ids[v]);
  }
  if (report != nullptr) *report = split.report;
  return lighter;
}

Result<std::vector<SplitNotice>> Engine::Impl::UnreportedSplits() {
  return reports_.Unreported([this](uint64_t source, uint64_t target) {
    Acg* from = FindAcg(source);
    return from != nullptr && from->merged_into() == target;
  });
}

Status Engine::Impl::MergeAcg(uint64_t source_id, uint64_t target_id, int crash_after_step) {
  if (crashed_) return Status::Aborted("engine crashed");
  MutexLock split_lock(&split_mu_);
  if (source_id == 0 || target_id == 0 || source_id == target_id) {
    return Status::InvalidArgument("a merge needs two distinct non-zero ACG ids");
  }
  Acg* source = FindAcg(source_id);
  Acg* target = FindAcg(target_id);
  if (source == nullptr || target == nullptr) {
    return Status::NotFound("no ACG " + std::to_string(source == nullptr ? source_id
                                                                            : target_id));
  }
  if (frozen_.IsFrozen(source_id) || frozen_.IsFrozen(target_id)) {
    const uint64_t moving = frozen_.IsFrozen(source_id) ? source_id : target_id;
    return Status::Unavailable("ACG " + std::to_string(moving) + " is being moved");
  }
  if (source->merged_into() == target_id) return Status::OK();  // asked again: done
  if (source->merged_into() != 0 || target->merged_into() != 0) {
    const Acg* merged = source->merged_into() != 0 ? source : target;
    return Status::InvalidArgument("ACG " + std::to_string(merged->id()) +
                                   " was merged into ACG " +
                                   std::to_string(merged->merged_into()));
  }
  if (source->files() > wire::kMaxMergeFiles) {
    return Status::InvalidArgument("ACG " + std::to_string(source_id) + " holds " +
                                   std::to_string(source->files()) +
                                   " files; only ACGs of at most " +
                                   std::to_string(wire::kMaxMergeFiles) + " are merged");
  }
  const int64_t t0 = options_.env->MonotonicNanos();
  const std::string what =
      "merging ACG " + std::to_string(source_id) + " into " + std::to_string(target_id);
  // Nothing refers to the marker until the copy: Open's undo then finds nothing to remove.
  PROPELLER_RETURN_IF_ERROR(WriteFileAtomically(options_.env, MergeMarkerPath(target_id),
                                                std::to_string(source_id) + "\n")
                                .WithContext(what));
  size_t moved = 0;
  Acg::FileIdSet all;
  LockSwitch(source, target);
  Status s = [&]() PROPELLER_REQUIRES(source->mutex(), target->mutex()) -> Status {
    uint64_t switch_lsn = 0;
    wal_->RunLocked([&](uint64_t next_lsn) {
      switch_lsn = next_lsn - 1;
      source->MergeInto(target_id);
      any_routes_.store(true);
      route_epoch_.fetch_add(1);
    });
    PROPELLER_RETURN_IF_ERROR(wal_->Sync());
    PROPELLER_RETURN_IF_ERROR(source->CommitHeld(switch_lsn));
    PROPELLER_RETURN_IF_ERROR(target->CommitHeld(switch_lsn));
    std::vector<FileId> ids;
    PROPELLER_RETURN_IF_ERROR(source->ListFileIdsHeld(&ids));
    all.insert(ids.begin(), ids.end());
    std::vector<FileRecord> records;
    std::vector<FileId> absent;
    std::vector<StoredEdge> edges;
    PROPELLER_RETURN_IF_ERROR(source->ExportHeld(all, false, &records, &absent, &edges));
    moved = records.size();
    PROPELLER_RETURN_IF_ERROR(reports_.Write(target_id, source_id, ids));
    std::vector<Update> copy;
    AppendSplitCopy(target_id, records, {}, edges, {}, &copy);
    PROPELLER_RETURN_IF_ERROR(target->ImportHeld(copy, target->applied_lsn()));
    if (crash_after_step == 1) return Status::Aborted("crash after step 1 (test)");
    PROPELLER_RETURN_IF_ERROR(source->RecordMovedHeld(all, target_id, /*merge=*/true));
    if (crash_after_step == 2) return Status::Aborted("crash after step 2 (test)");
    PROPELLER_RETURN_IF_ERROR(options_.env->RemoveFile(MergeMarkerPath(target_id)));
    PROPELLER_RETURN_IF_ERROR(options_.env->SyncDir(AcgDir(target_id)));
    reports_.Note(target_id, source_id);
    return Status::OK();
  }();
  UnlockSwitch(source, target, s);
  if (!s.ok()) {
    Log(LogLevel::kError, "%s: %s; the engine stops (reopen to recover)", what.c_str(),
        s.ToString().c_str());
    Crash();
    return s.WithContext(what + " (engine stopped; reopen to recover)");
  }
  const int64_t t1 = options_.env->MonotonicNanos();
  CleanUpMoved(source, all);  // the source is hidden now: no search waits for this
  Log(LogLevel::kInfo, "%s: %zu files in %.3f s with searches paused, then %.3f s to clean "
      "up the source", what.c_str(), moved, static_cast<double>(t1 - t0) / 1e9,
      static_cast<double>(options_.env->MonotonicNanos() - t1) / 1e9);
  merges_.fetch_add(1, std::memory_order_relaxed);
  return Status::OK();
}

void Engine::Impl::CleanUpMoved(Acg* source, const Acg::FileIdSet& ids) {
  std::vector<FileId> sorted(ids.begin(), ids.end());
  std::sort(sorted.begin(), sorted.end());
  for (size_t at = 0;; at += kCleanupChunk) {
    const size_t end = std::min(sorted.size(), at + kCleanupChunk);
    Acg::FileIdSet chunk(sorted.begin() + static_cast<ptrdiff_t>(at),
                         sorted.begin() + static_cast<ptrdiff_t>(end));
    Status s = [&] {
      WriterLock lock(source->mutex());
      return source->RemoveHeld(chunk, /*last=*/end == sorted.size());
    }();
    if (!s.ok()) {
      Log(LogLevel::kWarning, "removing moved files from ACG %llu: %s (retried at the next "
          "open)", static_cast<unsigned long long>(source->id()), s.ToString().c_str());
      return;
    }
    if (end == sorted.size()) return;
  }
}

void Engine::Impl::LockSwitch(Acg* source, Acg* target) {
  search_gate_.Lock();
  source->mutex()->Lock();
  target->mutex()->Lock();
}

void Engine::Impl::UnlockSwitch(Acg* source, Acg* target, const Status& s) {
  if (!s.ok()) {
    source->FreezeHeld();
    target->FreezeHeld();
  }
  target->mutex()->Unlock();
  source->mutex()->Unlock();
  search_gate_.Unlock();
}

Status Engine::Impl::RecoverMerge(Acg* target) {
  std::string text;
  PROPELLER_RETURN_IF_ERROR(
      ReadFileToString(options_.env, MergeMarkerPath(target->id()), &text));
  const uint64_t source_id = std::strtoull(text.c_str(), nullptr, 10);
  Acg* source = FindAcg(source_id);
  if (source != nullptr && source->merged_into() != target->id()) {
    std::vector<FileId> ids;
    PROPELLER_RETURN_IF_ERROR(source->ListHeldIds(&ids));  // what MergeAcg copied
    {
      WriterLock lock(target->mutex());
      PROPELLER_RETURN_IF_ERROR(
          target->RemoveHeld(Acg::FileIdSet(ids.begin(), ids.end()), /*last=*/false));
    }
    PROPELLER_RETURN_IF_ERROR(reports_.Forget(target->id(), source_id));
    Log(LogLevel::kWarning, "undid the unfinished merge of ACG %llu into %llu (%zu files)",
        static_cast<unsigned long long>(source_id),
        static_cast<unsigned long long>(target->id()), ids.size());
  }
  PROPELLER_RETURN_IF_ERROR(options_.env->RemoveFile(MergeMarkerPath(target->id())));
  return options_.env->SyncDir(AcgDir(target->id()));
}

}  // namespace propeller
