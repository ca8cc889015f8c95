// Engine::Impl (engine_impl.h): the commit scheduler — which ACG caches a pass commits, in
// groups per store shard on the commit lanes — the log's truncation behind the commits, and
// the health the commits report (EngineStats).
#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <span>
#include <vector>

#include "common/logging.h"
#include "common/mutex.h"
#include "common/thread_pool.h"
#include "indexnode/acg.h"
#include "indexnode/engine_impl.h"
#include "indexnode/store.h"
#include "indexnode/wal.h"

namespace propeller {

void Engine::Impl::TrimMapsIfOver() {
  const uint64_t bound = options_.max_open_acg_bytes;
  if (bound == 0 || store_ == nullptr || store_->ResidentBytes() <= bound) return;
  store_->TrimMaps();
  map_trims_.fetch_add(1, std::memory_order_relaxed);
}

Status Engine::Impl::CommitDue(bool force_all) {
  MutexLock commit_lock(&commit_mu_);
  const int64_t now = options_.env->MonotonicNanos();
  if (now - last_map_check_ns_ >= options_.store_trim_interval_ns) {
    last_map_check_ns_ = now;
    TrimMapsIfOver();
  }
  // No ACG busy (AcgContext::busy_acgs), none has updates to commit: no walk of every ACG.
  // An update cached after this load is the next pass's, as it would be after the walk.
  std::vector<Acg*> acgs;
  if (force_all || busy_acgs_.load() > 0) acgs = AllAcgs();
  // One log sync for the whole pass (not one per partition: with 1,000 partitions under a
  // steady write load that would be 1,000 fsyncs per pass).
  if (Status synced = wal_->Sync(); !synced.ok()) {
    NoteCommit(synced);
    return synced;
  }
  const uint64_t durable = wal_->synced_lsn();
  std::vector<Acg*> todo;
  struct Candidate {
    size_t updates;
    uint64_t bytes;
    Acg* acg;
  };
  std::vector<Candidate> others;
  for (Acg* acg : acgs) {
    size_t n = acg->cached();
    if (n == 0) continue;
    bool due = force_all || n > options_.cache_bound_updates ||
               now - acg->oldest_cached_time_ns() >= options_.commit_timeout_ns;
    if (due) {
      todo.push_back(acg);
    } else {
      others.push_back(Candidate{n, acg->cache_bytes(), acg});
    }
  }
  // Node-wide bounds: the largest caches until under half of them (counted before the pass;
  // updates arriving meanwhile are the next pass's).
  std::sort(others.begin(), others.end(),
            [](const Candidate& a, const Candidate& b) { return a.updates > b.updates; });
  uint64_t remaining = 0;
  for (const Candidate& c : others) remaining += c.updates;
  uint64_t bytes = total_cache_bytes_.load();
  for (Acg* acg : todo) bytes -= std::min(bytes, acg->cache_bytes());
  for (const Candidate& c : others) {
    const bool bytes_over = options_.max_cache_bytes != 0 && bytes > options_.max_cache_bytes / 2;
    if (remaining <= options_.total_cache_bound_updates / 2 && !bytes_over) break;
    todo.push_back(c.acg);
    remaining -= c.updates;
    bytes -= std::min(bytes, c.bytes);
  }
  // The ACGs of one store shard commit in groups, one LMDB transaction per group (one sync
  // for all: Acg::CommitGroup), of at most kGroupCommitUpdates updates (a group holds the
  // shard's writer lock and its ACGs' locks while it runs, and LMDB keeps the buffers of the
  // pages it dirtied). Groups of different shards share nothing but the counters, so they run
  // on commit_lanes_ threads at once (commit_pool_'s workers and this thread), overlapping
  // one sync with another's CPU work.
  std::stable_sort(todo.begin(), todo.end(), [this](Acg* a, Acg* b) {
    return store_->ShardOf(a->id())->index < store_->ShardOf(b->id())->index;
  });
  std::vector<std::span<Acg* const>> groups;
  for (size_t begin = 0; begin < todo.size();) {
    const unsigned shard = store_->ShardOf(todo[begin]->id())->index;
    size_t end = begin, updates = 0;
    while (end < todo.size() && store_->ShardOf(todo[end]->id())->index == shard &&
           (end == begin || updates + todo[end]->cached() <= kGroupCommitUpdates)) {
      updates += todo[end++]->cached();
    }
    groups.emplace_back(todo.data() + begin, end - begin);
    begin = end;
  }
  // Round robin over the shards, so that lanes taking groups in order work on different
  // shards (two groups of one shard take turns at its writer lock).
  std::vector<size_t> rank(groups.size());
  for (size_t i = 0, run = 0; i < groups.size(); ++i) {
    run = i > 0 && store_->ShardOf(groups[i][0]->id()) == store_->ShardOf(groups[i - 1][0]->id())
              ? run + 1
              : 0;
    rank[i] = run;
  }
  std::vector<size_t> order(groups.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return rank[a] < rank[b]; });
  Status first_error;
  Mutex error_mu;
  std::atomic<uint64_t> committed{0};
  std::atomic<size_t> next{0};
  auto note = [&](const Status& s) {
    if (s.ok()) return;
    MutexLock lock(&error_mu);
    if (first_error.ok()) first_error = s;
  };
  auto lane = [&](size_t) {
    for (size_t i; (i = next.fetch_add(1)) < groups.size();) {
      uint64_t n = 0;
      note(CommitGroup(groups[order[i]], durable, &n));
      committed.fetch_add(n);
    }
  };
  const size_t lanes = std::min(groups.size(), commit_lanes_);
  if (lanes <= 1) {
    lane(0);
  } else {
    commit_pool_->ParallelFor(lanes, lane);
  }
  Status truncated = TruncateLog();
  EnforceOpenBounds();
  if (options_.tune_malloc && committed.load() >= kTrimAfterUpdates) malloc_trim(0);
  if (first_error.ok()) first_error = truncated;
  NoteCommit(first_error);
  // Passes with nothing to commit (most committer ticks of an idle node) are not timed.
  if (!todo.empty()) {
    commit_seconds_.Observe(static_cast<double>(options_.env->MonotonicNanos() - now) / 1e9);
  }
  return first_error;
}

Status Engine::Impl::CommitAcg(Acg* acg, uint64_t durable_lsn, uint64_t* committed) {
  if (acg->cached() == 0) return Status::OK();
  if (durable_lsn == 0) {
    PROPELLER_RETURN_IF_ERROR(wal_->Sync());
    durable_lsn = wal_->synced_lsn();
  }
  size_t n = 0;
  Status s = acg->Commit(durable_lsn, &n);
  if (n > 0) store_commits_.fetch_add(1, std::memory_order_relaxed);
  NoteCommitted(n, committed);
  return s;
}

void Engine::Impl::NoteCommitted(size_t n, uint64_t* committed) {
  if (n == 0) return;
  acg_commits_.fetch_add(1, std::memory_order_relaxed);
  committed_updates_.fetch_add(n, std::memory_order_relaxed);
  Subtract(&total_cached_, n);
  if (committed != nullptr) *committed += n;
}

Status Engine::Impl::CommitGroup(std::span<Acg* const> acgs, uint64_t durable_lsn,
                                 uint64_t* committed) {
  if (acgs.size() > 1) {
    std::vector<size_t> counts;
    std::vector<Acg*> busy;
    Status s = Acg::CommitGroup(acgs, durable_lsn, &counts, &busy);
    if (std::any_of(counts.begin(), counts.end(), [](size_t n) { return n > 0; })) {
      store_commits_.fetch_add(1, std::memory_order_relaxed);
    }
    for (size_t n : counts) NoteCommitted(n, committed);
    if (s.ok()) {
      for (Acg* acg : busy) {  // their locks were taken: now waited for, one at a time
        Status one = CommitAcg(acg, durable_lsn, committed);
        if (s.ok()) s = one;
      }
      return s;
    }
    // One by one, so that an ACG that cannot commit holds back only itself.
  }
  Status first_error;
  for (Acg* acg : acgs) {
    Status s = CommitAcg(acg, durable_lsn, committed);
    if (first_error.ok()) first_error = s;
  }
  return first_error;
}

void Engine::Impl::Subtract(std::atomic<uint64_t>* counter, uint64_t n) {
  uint64_t cur = counter->load();
  while (!counter->compare_exchange_weak(cur, cur - std::min(cur, n))) {
  }
}

Status Engine::Impl::TruncateLog() {
  uint64_t needed = wal_->next_lsn();
  // A split in progress keeps what was logged since its switch: until its commit point,
  // those updates belong to the source again after a crash, whatever the target committed.
  const uint64_t hold = split_hold_lsn_.load();
  if (hold != 0) needed = std::min(needed, hold);
  // Read after next_lsn(), as the walk below would be: an ACG that is not busy holds no
  // cached update and no commit in progress (oldest_cached_lsn() is 0).
  if (busy_acgs_.load() > 0) {
    for (Acg* acg : AllAcgs()) {
      uint64_t oldest = acg->oldest_cached_lsn();
      if (oldest != 0) needed = std::min(needed, oldest);
    }
  }
  return wal_->DeleteObsolete(needed);
}

Status Engine::Impl::CommitAll() {
  if (crashed_) return Status::Aborted("engine crashed");
  return CommitDue(/*force_all=*/true);
}

void Engine::Impl::NoteCommit(const Status& s) {
  MutexLock lock(&health_mu_);
  if (s.ok()) {
    commit_error_ = Status::OK();
    failing_since_ns_ = 0;
    return;
  }
  ++commit_failures_;
  commit_error_ = s;
  if (failing_since_ns_ == 0) failing_since_ns_ = options_.env->NowNanos();
}

void Engine::Impl::StopCommitter() {
  committer_.Stop();
  splitter_.Stop();
}

}  // namespace propeller
