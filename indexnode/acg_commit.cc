// Acg: the commit path — the write cache into the indexes (acg.h "Commit",
// docs/architecture.md §6 Write path) — and the per-update writes it makes (ApplyOne and its
// helpers).
#include <algorithm>
#include <cstring>
#include <memory>
#include <set>

#include "common/lmdb_util.h"
#include "common/logging.h"
#include "indexnode/acg.h"
#include "indexnode/acg_internal.h"
#include "indexnode/index/kdtree_index.h"
#include "schemas/keys.h"
#include "schemas/record_format.h"

namespace propeller {
namespace {

using acg_internal::AcgName;
using acg_internal::FedByAttribute;
using acg_internal::IndexBatchScope;
using acg_internal::KeywordSet;
using acg_internal::kInodeIndex;
using acg_internal::kKeywordIndex;
using acg_internal::kPathIndex;

// A commit at least this large rebuilds a drifted K-D tree at once (bulk loads), so the next
// search does not pay for it; smaller ones leave it to the search (index.h: Rebalance).
constexpr size_t kRebalanceAfter = 4096;

}  // namespace

Status Acg::Commit(uint64_t up_to_lsn, size_t* updates) {
  Pin pin(this);
  if (updates != nullptr) *updates = 0;
  if (!HasDue(up_to_lsn)) return Status::OK();
  // Open first (it takes rw_ itself and reports to the engine without it); the batch leaves
  // the cache only under rw_ held exclusively, so a search (rw_ shared) finds every update
  // either in the cache or in the indexes, never in between.
  PROPELLER_RETURN_IF_ERROR(EnsureOpen());
  bool reopened = false;
  Status s;
  {
    WriterLock lock(&rw_);
    s = CommitLocked(up_to_lsn, updates, &reopened);
  }
  if (reopened && ctx_->on_open) ctx_->on_open(this);  // account for it (even if closed again)
  return s;
}

Status Acg::CommitHeld(uint64_t up_to_lsn) {
  bool reopened = false;
  return CommitLocked(up_to_lsn, nullptr, &reopened);
}

bool Acg::HasDue(uint64_t up_to_lsn) const {
  MutexLock cl(&cache_mu_);
  return !cache_.empty() && cache_.front().batch->lsn <= up_to_lsn;
}

Status Acg::CommitLocked(uint64_t up_to_lsn, size_t* updates, bool* reopened) {
  if (updates != nullptr) *updates = 0;
  Taken taken;
  PROPELLER_RETURN_IF_ERROR(TakeDueLocked(up_to_lsn, &taken));
  if (taken.count == 0) return Status::OK();
  Status s = EnsureOpenLocked(reopened);  // closed meanwhile (by another commit, or a failure)
  if (s.ok()) s = WriteTaken(&taken);
  FinishTakenLocked(&taken, s);
  if (!s.ok()) return s.WithContext("committing " + AcgName(id_));
  if (updates != nullptr) *updates = taken.count;
  return Status::OK();
}

Status Acg::CommitGroup(std::span<Acg* const> acgs, uint64_t up_to_lsn,
                        std::vector<size_t>* updates, std::vector<Acg*>* busy) {
  updates->assign(acgs.size(), 0);
  busy->clear();
  struct Member {
    explicit Member(Acg* a) : acg(a), pin(a) {}
    Acg* acg;
    Pin pin;
    bool locked = false;  // holds acg->rw_ exclusively (LockForGroup, UnlockForGroup)
    Taken taken;
    bool reopened = false;
    size_t index = 0;
  };
  std::vector<std::unique_ptr<Member>> members;
  members.reserve(acgs.size());
  MDB_env* env = nullptr;
  for (size_t i = 0; i < acgs.size(); ++i) {
    Acg* acg = acgs[i];
    if (env == nullptr) env = acg->env_;
    if (acg->env_ != env) return Status::Internal("a commit group spans two store shards");
    members.push_back(std::make_unique<Member>(acg));
    members.back()->index = i;
  }
  // Open before any lock is held (EnsureOpen waits for the ACG's lock, which a split may hold
  // while it waits for another ACG's: waiting here holding some would risk a cycle).
  for (auto& m : members) {
    if (m->acg->HasDue(up_to_lsn)) PROPELLER_RETURN_IF_ERROR(m->acg->EnsureOpen());
  }
  // Lock the members, then take each one's due updates out of its cache. Only the first lock
  // is waited for: a split or merge holds one ACG's lock while it waits for another's, in an
  // order of its own, so waiting for a second one while holding the first could close a
  // cycle. A member whose lock is taken is left to the caller (*busy).
  // The analysis follows a lock only within the scope that takes it, so each use of a
  // member's lock below first asserts it, from m->locked (LockForGroup).
  Status s;
  for (auto& m : members) {
    m->locked = m->acg->LockForGroup(/*wait=*/&m == &members.front());
    if (!m->locked) {
      busy->push_back(m->acg);
      continue;
    }
    m->acg->rw_.AssertHeld();
    s = m->acg->EnsureOpenLocked(&m->reopened);
    if (s.ok()) s = m->acg->TakeDueLocked(up_to_lsn, &m->taken);
    if (!s.ok()) {
      s = s.WithContext("committing " + AcgName(m->acg->id_));
      break;
    }
  }
  bool any = false;
  for (auto& m : members) any = any || m->taken.count > 0;
  if (s.ok() && any) {
    MDB_txn* raw = nullptr;
    int rc = mdb_txn_begin(env, nullptr, 0, &raw);
    if (rc != 0) {
      s = LmdbStatus(rc, "mdb_txn_begin");
    } else {
      TxnGuard txn(raw);
      for (auto& m : members) {
        if (m->taken.count == 0) continue;  // (taken only by a locked member)
        m->acg->rw_.AssertHeld();
        s = m->acg->ApplyTaken(raw, &m->taken).WithContext("committing " + AcgName(m->acg->id_));
        if (!s.ok()) break;
      }
      if (s.ok() && (rc = txn.Commit()) != 0) s = LmdbStatus(rc, "mdb_txn_commit");
      if (s.ok()) {
        for (auto& m : members) {
          if (m->taken.count == 0) continue;
          m->acg->rw_.AssertHeld();
          m->acg->CommittedLocked(m->taken);
        }
      }
    }
  }
  // All or nothing: on failure every member keeps its cache (and drops its in-memory
  // structures, which the failed transaction left ahead of LMDB).
  for (auto& m : members) {
    if (m->taken.count > 0) {
      m->acg->rw_.AssertHeld();
      m->acg->FinishTakenLocked(&m->taken, s);
    }
    if (s.ok()) (*updates)[m->index] = m->taken.count;
    // Not locked: busy, or not reached after a member before it failed.
    if (m->locked) m->acg->UnlockForGroup();
    m->locked = false;
    if (m->reopened && m->acg->ctx_->on_open) m->acg->ctx_->on_open(m->acg);
  }
  return s;
}

// CommitGroup holds the locks of a run-time number of ACGs across loops over them, which the
// analysis cannot follow (it tracks a lock through the scope that takes it, not through a
// container, and a fixed nesting of scopes cannot take a variable number). So the locking and
// unlocking of a member happen here, outside the analysis, and CommitGroup asserts the lock
// where it uses it. Invariant: a member holds its ACG's rw_ exclusively iff its `locked` is
// true, from a successful LockForGroup to its UnlockForGroup, which CommitGroup's last loop
// calls for every locked member on every path (it has no early return once a lock is held).
bool Acg::LockForGroup(bool wait) {
  if (!wait) return rw_.TryLock();
  rw_.Lock();
  return true;
}

void Acg::UnlockForGroup() { rw_.Unlock(); }

Status Acg::WriteTaken(Taken* t) {
  MDB_txn* raw = nullptr;
  int rc = mdb_txn_begin(env_, nullptr, 0, &raw);
  if (rc != 0) return LmdbStatus(rc, "mdb_txn_begin");
  TxnGuard txn(raw);
  PROPELLER_RETURN_IF_ERROR(ApplyTaken(raw, t));
  rc = txn.Commit();
  if (rc != 0) return LmdbStatus(rc, "mdb_txn_commit");
  CommittedLocked(*t);
  return Status::OK();
}

void Acg::CommittedLocked(const Taken& t) {
  applied_lsn_ = t.lsn;
  files_ = t.files;
  edges_ = t.edges;
}

Status Acg::TakeDueLocked(uint64_t up_to_lsn, Taken* t) {
  if (frozen_) return Status::Aborted(AcgName(id_) + " is frozen by a failed split");
  MutexLock cl(&cache_mu_);
  size_t n = 0;
  while (n < cache_.size() && cache_[n].batch->lsn <= up_to_lsn) ++n;
  if (n == 0) return Status::OK();
  if (n == cache_.size()) {
    t->slices.swap(cache_);
  } else {
    t->slices.assign(std::make_move_iterator(cache_.begin()),
                     std::make_move_iterator(cache_.begin() + static_cast<ptrdiff_t>(n)));
    cache_.erase(cache_.begin(), cache_.begin() + static_cast<ptrdiff_t>(n));
  }
  for (const Slice& sl : t->slices) {
    t->count += sl.end - sl.begin;
    t->bytes += SliceBytes(sl);
    if (track_ids_) CountCachedIds(sl, -1);
  }
  cached_ -= t->count;
  cache_bytes_.store(cache_bytes_.load(std::memory_order_relaxed) - t->bytes,
                     std::memory_order_relaxed);
  ++summary_pending_;
  SetBusyLocked(true);
  committing_lsn_ = t->slices.front().batch->lsn;
  return Status::OK();
}

void Acg::FinishTakenLocked(Taken* t, const Status& s) {
  if (!s.ok()) {
    // Bring memory back in line with LMDB: drop everything; the next use reopens and the
    // next search reloads.
    CloseLocked();
    if (inode_ != nullptr) inode_->Unload();
  } else {
    if (t->count >= kRebalanceAfter) {
      Status rs = inode_->Rebalance();
      if (!rs.ok()) Log(LogLevel::kWarning, "ACG %llu: %s",
                        static_cast<unsigned long long>(id_), rs.ToString().c_str());
    }
    RefreshOpenBytes();
  }
  // Still under rw_: a failed batch is back in the cache before any search looks.
  MutexLock cl(&cache_mu_);
  --summary_pending_;
  committing_lsn_ = 0;
  if (!s.ok()) {
    // Keep every update: put the slices back in front of what arrived meanwhile.
    if (track_ids_) {
      for (const Slice& sl : t->slices) CountCachedIds(sl, +1);
    }
    t->slices.insert(t->slices.end(), std::make_move_iterator(cache_.begin()),
                     std::make_move_iterator(cache_.end()));
    cache_.swap(t->slices);
    cached_ += t->count;
    cache_bytes_.store(cache_bytes_.load(std::memory_order_relaxed) + t->bytes,
                       std::memory_order_relaxed);
  }
  SetBusyLocked(!cache_.empty() || summary_pending_ > 0);
}

Status Acg::EnsureOpenLocked(bool* reopened) {
  if (open_.load()) return Status::OK();
  Status s = OpenLocked(/*first=*/false);
  if (s.ok()) *reopened = true;
  return s;
}

Status Acg::ApplyTaken(MDB_txn* raw, Taken* t) {
  if (ctx_->commit_hook) PROPELLER_RETURN_IF_ERROR(ctx_->commit_hook(id_));
  const std::vector<Slice>& slices = t->slices;
  int rc = 0;
  // The summary must cover the batch in the same transaction that commits it.
  AcgSummary widened;
  Update& u = commit_update_;
  // One restructuring of the in-memory indexes for the whole commit, not one per mutation
  // threshold crossed (a 5,000-update commit of a 10,000-file ACG compacted its K-D tree twice
  // and then rebalanced it). Whatever happens below, EndBatch runs: on failure the caller
  // closes the ACG and drops its in-memory state anyway.
  IndexBatchScope batch(&indexes_);
  // Apply in key order, not arrival order: a commit's puts then walk each B-tree's leaves
  // in order (each page is copied into the transaction once and stays in cache) instead of
  // hopping across the whole file. The sort is stable, so one file's updates keep their order,
  // and the order across files is irrelevant (an update touches only its own file's entries).
  // In the same pass, an update to a file that a later kPut or kDelete in this commit replaces
  // entirely is dropped: only the last state of a file reaches the indexes (kAddEdge entries
  // are additive and always applied).
  // One cursor on the records for the whole commit: an update reads the old record and writes
  // the new one at the same position (no second descent; LMDB overwrites a same-size value in
  // place), and, keys coming in order, consecutive updates on one leaf skip the descent too.
  MDB_cursor* files_raw = nullptr;
  rc = mdb_cursor_open(raw, files_dbi_, &files_raw);
  if (rc != 0) return LmdbStatus(rc, "mdb_cursor_open");
  CursorGuard files(files_raw);  // closed on return, before the caller commits
  // The commit's own (not the ACG's: kept per ACG, their capacity held 24 bytes per update of
  // its largest commit for as long as the process ran, 24 B per file after a bulk load). The
  // edges and the deletes that removed a record, in log order (slice, index): a file's edges
  // go with it (DropEdgesOf), those added after its delete stay.
  std::vector<CommitRef> order, edges, deletes;
  order.reserve(t->count);
  delta_files_ = delta_edges_ = 0;
  GoneFiles().swap(commit_renewed_);
  for (uint32_t s = 0; s < slices.size(); ++s) {
    const StagedBatch& b = *slices[s].batch;
    for (uint32_t i = slices[s].begin; i < slices[s].end; ++i) {
      order.push_back(CommitRef{b.entries[i].id, s, i});
    }
  }
  std::stable_sort(order.begin(), order.end(), [](const CommitRef& a, const CommitRef& b) {
    return a.id.volume != b.id.volume ? a.id.volume < b.id.volume : a.id.ino < b.id.ino;
  });
  auto entry = [&](const CommitRef& r) -> const CachedUpdate& {
    return slices[r.slice].batch->entries[r.index];
  };
  for (size_t run = 0; run < order.size();) {
    size_t run_end = run + 1;
    while (run_end < order.size() && order[run_end].id == order[run].id) ++run_end;
    // The last kPut or unconditional kDelete of the run, or the run's start (a conditional
    // delete may leave what came before it).
    size_t first_live = run;
    for (size_t k = run_end; k-- > run;) {
      const CachedUpdate& e = entry(order[k]);
      if (e.op == UpdateOp::kPut || (e.op == UpdateOp::kDelete && e.size == 0)) {
        first_live = k;
        break;
      }
    }
    if (watching_) watched_.insert(order[run].id);
    // The inode generation the file's kPuts gave it so far in this commit, for a later kPut
    // that read the file without one (a chmod after the create); a delete ends it.
    uint32_t carried = 0;
    for (size_t k = run; k < run_end; ++k) {
      const CachedUpdate& e = entry(order[k]);
      if (e.op == UpdateOp::kAddEdge) {  // after the records, in log order (below)
        edges.push_back(order[k]);
        continue;
      }
      const uint32_t carried_before = carried;
      if (e.op == UpdateOp::kPut && e.generation != 0) {
        // Two generations in one commit: the second is a new file (as against the stored
        // record in ApplyOne).
        if (carried != 0 && carried != e.generation) commit_renewed_[e.id] = e.generation;
        carried = e.generation;
      }
      if (e.op == UpdateOp::kDelete) carried = 0;
      // Replaced later on; a delete still runs: it takes the file's edges with it.
      if (k < first_live && e.op != UpdateOp::kDelete) continue;
      const StagedBatch& b = *slices[order[k].slice].batch;
      u.op = e.op;
      u.acg = id_;
      u.edge_dst = e.edge_dst;
      u.edge_weight = e.edge_weight;
      if (e.size > 0) {
        if (e.offset + e.size > b.data.size()) return Status::Internal("cache entry out of range");
        PROPELLER_RETURN_IF_ERROR(
            DecodeRecord(std::string_view(b.data).substr(e.offset, e.size), &u.record)
                .WithContext("decoding a cached record"));
      } else {
        u.record.id = e.id;
        u.record.paths.clear();  // u is reused: an unconditional delete has no paths
      }
      const std::string_view encoded =
          e.size > 0 ? std::string_view(b.data).substr(e.offset, e.size) : std::string_view();
      commit_deleted_ = false;
      PROPELLER_RETURN_IF_ERROR(ApplyOne(raw, files.get(), u, encoded, &widened, carried_before));
      // An unconditional delete ends the file even when no record was stored (created and
      // deleted within this commit); a conditional one only when it removed the record.
      if (commit_deleted_ || (e.op == UpdateOp::kDelete && e.size == 0)) {
        deletes.push_back(order[k]);
      }
    }
    run = run_end;
  }
  // Edges, in log order with the deletes: a deleted file's edges go (one pass over the edges
  // for a run of deletes), those added after its delete stay.
  auto log_order = [](const CommitRef& a, const CommitRef& b) {
    return a.slice != b.slice ? a.slice < b.slice : a.index < b.index;
  };
  std::sort(edges.begin(), edges.end(), log_order);
  std::sort(deletes.begin(), deletes.end(), log_order);
  GoneFiles gone;
  size_t next_delete = 0;
  for (const CommitRef& r : edges) {
    while (next_delete < deletes.size() && log_order(deletes[next_delete], r)) {
      gone[deletes[next_delete++].id] = 0;
    }
    const CachedUpdate& e = entry(r);
    if (!gone.empty() && (gone.contains(e.id) || gone.contains(e.edge_dst))) {
      PROPELLER_RETURN_IF_ERROR(DropEdgesOf(raw, gone));
      gone.clear();
    }
    u.op = e.op;
    u.acg = id_;
    u.record.id = e.id;
    u.record.paths.clear();
    u.edge_dst = e.edge_dst;
    u.edge_weight = e.edge_weight;
    u.record.inode_generation = e.generation;
    u.edge_dst_generation = e.edge_dst_generation;
    PROPELLER_RETURN_IF_ERROR(ApplyOne(raw, files.get(), u, std::string_view(), &widened));
  }
  while (next_delete < deletes.size()) gone[deletes[next_delete++].id] = 0;
  // A file a kPut made new keeps only the edges that name its new generation, wherever they
  // came in the log (an edge names the generation it was captured with).
  for (const auto& [id, generation] : commit_renewed_) gone.try_emplace(id, generation);
  GoneFiles().swap(commit_renewed_);
  PROPELLER_RETURN_IF_ERROR(DropEdgesOf(raw, gone));
  const uint64_t lsn = slices.back().batch->lsn;
  std::string v;
  AppendOrderedU64(lsn, &v);
  std::string key = Key("applied_lsn");
  MDB_val k = Val(key), val = Val(v);
  rc = mdb_put(raw, meta_dbi_, &k, &val, 0);
  if (rc != 0) return LmdbStatus(rc, "writing applied_lsn");
  std::string summary;
  {
    MutexLock sl(&summary_mu_);
    summary_.Merge(widened);
    summary_.EncodeTo(&summary);
    common_dir_bits_.store(summary_.common_dir_bits(), std::memory_order_relaxed);
  }
  key = Key("summary");
  k = Val(key);
  val = Val(summary);
  rc = mdb_put(raw, meta_dbi_, &k, &val, 0);
  if (rc != 0) return LmdbStatus(rc, "writing summary");
  PROPELLER_RETURN_IF_ERROR(SaveCounts(raw, &t->files, &t->edges));
  t->lsn = lsn;
  return Status::OK();
}

Status Acg::DropEdgesOf(MDB_txn* txn, const GoneFiles& gone) {
  if (gone.empty()) return Status::OK();
  if (static_cast<int64_t>(edges_.load()) + delta_edges_ <= 0) return Status::OK();
  // One pass over the ACG's edges per commit that deleted files (an edge is keyed by its
  // source, so incoming edges have no index of their own; ACGs are small by design).
  MDB_cursor* raw = nullptr;
  int rc = mdb_cursor_open(txn, edges_dbi_, &raw);
  if (rc != 0) return LmdbStatus(rc, "mdb_cursor_open");
  CursorGuard cur(raw);
  MDB_val k, v;
  for (rc = First(raw, &k, &v); rc == 0;) {
    FileId src, dst;
    if (Status st = DecodeEdgeKey(Unprefixed(k), &src, &dst); !st.ok()) {
      return st.WithContext(AcgName(id_));
    }
    const auto gone_src = gone.find(src), gone_dst = gone.find(dst);
    bool drop = false;
    if (gone_src != gone.end() || gone_dst != gone.end()) {
      EdgeValue value;
      if (Status st = DecodeEdgeValue(View(v), &value); !st.ok()) {
        return st.WithContext(AcgName(id_));
      }
      // An end goes unless the edge names it with the generation that stays.
      drop = (gone_src != gone.end() &&
              (gone_src->second == 0 || value.src_generation != gone_src->second)) ||
             (gone_dst != gone.end() &&
              (gone_dst->second == 0 || value.dst_generation != gone_dst->second));
    }
    if (drop) {
      rc = mdb_cursor_del(raw, 0);
      if (rc != 0) return LmdbStatus(rc, "deleting an edge");
      --delta_edges_;
    }
    // After a delete MDB_NEXT yields the entry that took the deleted one's place.
    rc = Next(raw, &k, &v);
  }
  if (rc != MDB_NOTFOUND) return LmdbStatus(rc, "scanning edges");
  return Status::OK();
}

Status Acg::SaveCounts(MDB_txn* txn, uint64_t* files, uint64_t* edges) {
  const int64_t f = static_cast<int64_t>(files_.load()) + delta_files_;
  const int64_t e = static_cast<int64_t>(edges_.load()) + delta_edges_;
  if (f < 0 || e < 0) return Status::Internal(AcgName(id_) + ": counts below zero");
  *files = static_cast<uint64_t>(f);
  *edges = static_cast<uint64_t>(e);
  std::string bytes;
  AppendOrderedU64(*files, &bytes);
  AppendOrderedU64(*edges, &bytes);
  const std::string key = Key("counts");
  MDB_val k = Val(key), v = Val(bytes);
  const int rc = mdb_put(txn, meta_dbi_, &k, &v, 0);
  if (rc != 0) return LmdbStatus(rc, "writing the counts");
  delta_files_ = delta_edges_ = 0;
  return Status::OK();
}

Status Acg::ScanEdges(MDB_txn* txn, const std::function<void(const StoredEdge&)>& fn) {
  MDB_cursor* cur = nullptr;
  int rc = mdb_cursor_open(txn, edges_dbi_, &cur);
  if (rc != 0) return LmdbStatus(rc, "mdb_cursor_open");
  MDB_val k, v;
  Status s;
  for (rc = First(cur, &k, &v); rc == 0; rc = Next(cur, &k, &v)) {
    StoredEdge edge;
    EdgeValue value;
    s = DecodeEdgeKey(Unprefixed(k), &edge.src, &edge.dst);
    if (s.ok()) s = DecodeEdgeValue(View(v), &value);
    if (!s.ok()) break;
    edge.weight = value.weight;
    edge.src_generation = value.src_generation;
    edge.dst_generation = value.dst_generation;
    fn(edge);
  }
  mdb_cursor_close(cur);
  if (Status st = s; !st.ok()) {
    return st.WithContext(AcgName(id_));
  }
  if (rc != MDB_NOTFOUND) return LmdbStatus(rc, "scanning edges");
  return Status::OK();
}

Status Acg::UnwrapStored(std::string_view stored, std::string_view* record) const {
  Status s = UnwrapStoredRecord(stored, record);
  if (s.ok()) return s;
  s = s.WithContext(AcgName(id_) + " (" + shard_->dir + "/data.mdb)");
  MutexLock lock(&damage_mu_);
  if (damage_.empty()) {
    damage_ = s.message() + " (the next start quarantines it for a rebuild)";
    damaged_.store(true, std::memory_order_release);
    Log(LogLevel::kError, "%s; searches of this partition fail until the next start "
                          "quarantines and rebuilds it (docs/faults.md)", s.ToString().c_str());
    // Best effort: the next start quarantines it (the log line above says why).
    (void)WriteFileAtomically(Env::Default(), JoinPath(dir_, kDamagedMark), damage_ + "\n");
  }
  return s;
}

Status Acg::DecodeStored(std::string_view stored, FileRecord* record) const {
  std::string_view bytes;
  PROPELLER_RETURN_IF_ERROR(UnwrapStored(stored, &bytes));
  return DecodeRecord(bytes, record);
}

std::string Acg::damage() const {
  if (!damaged_.load(std::memory_order_acquire)) return std::string();  // no lock per search
  MutexLock lock(&damage_mu_);
  return damage_;
}

Status Acg::ReadRecord(MDB_txn* txn, FileId id, FileRecord* rec, bool* found) {
  const std::string key = FileKey(id);
  MDB_val k = Val(key), v;
  int rc = mdb_get(txn, files_dbi_, &k, &v);
  if (rc == MDB_NOTFOUND) {
    *found = false;
    return Status::OK();
  }
  if (rc != 0) return LmdbStatus(rc, "reading a record");
  *found = true;
  return DecodeStored(View(v), rec);
}

Status Acg::UpdateIndexes(MDB_txn* txn, const FileRecord* old_rec, const FileRecord* new_rec) {
  const FileId id = new_rec ? new_rec->id : old_rec->id;
  const bool paths_changed = !old_rec || !new_rec || old_rec->paths != new_rec->paths;
  // path: one entry per path.
  if (paths_changed) {
    Index* path = indexes_.At(kPathIndex);
    Index* keyword = indexes_.At(kKeywordIndex);
    std::set<std::string> old_paths, new_paths;
    if (old_rec) old_paths.insert(old_rec->paths.begin(), old_rec->paths.end());
    if (new_rec) new_paths.insert(new_rec->paths.begin(), new_rec->paths.end());
    for (const std::string& p : old_paths) {
      if (!new_paths.count(p)) PROPELLER_RETURN_IF_ERROR(path->Remove(txn, AttrValue(p), id));
    }
    for (const std::string& p : new_paths) {
      if (!old_paths.count(p)) PROPELLER_RETURN_IF_ERROR(path->Insert(txn, AttrValue(p), id));
    }
    std::set<std::string> old_kw, new_kw;
    if (old_rec) old_kw = KeywordSet(*old_rec);
    if (new_rec) new_kw = KeywordSet(*new_rec);
    for (const std::string& t : old_kw) {
      if (!new_kw.count(t)) PROPELLER_RETURN_IF_ERROR(keyword->Remove(txn, AttrValue(t), id));
    }
    for (const std::string& t : new_kw) {
      if (!old_kw.count(t)) PROPELLER_RETURN_IF_ERROR(keyword->Insert(txn, AttrValue(t), id));
    }
  }
  // inode: the K-D point, tagged with the keywords of the paths (kdtree_index.h).
  Index* inode = indexes_.At(kInodeIndex);
  if (!new_rec) {
    PROPELLER_RETURN_IF_ERROR(inode->RemovePoint(txn, id));
  } else {
    KdPoint np = AcgSummary::PointOf(*new_rec);
    if (paths_changed || AcgSummary::PointOf(*old_rec) != np) {
      PROPELLER_RETURN_IF_ERROR(
          inode->InsertPoint(txn, np, id, AcgSummary::RecordKeywordBits(*new_rec)));
    }
  }
  // User indexes: the attribute of the same name.
  for (const IndexSpec& spec : user_specs_) {
    if (!FedByAttribute(spec)) continue;
    Index* index = indexes_.At(spec.name);
    const AttrValue* ov = nullptr;
    const AttrValue* nv = nullptr;
    if (old_rec) {
      auto it = old_rec->attrs.find(spec.name);
      if (it != old_rec->attrs.end()) ov = &it->second;
    }
    if (new_rec) {
      auto it = new_rec->attrs.find(spec.name);
      if (it != new_rec->attrs.end()) nv = &it->second;
    }
    if (ov && nv && *ov == *nv) continue;
    if (ov) PROPELLER_RETURN_IF_ERROR(index->Remove(txn, *ov, id));
    if (nv) PROPELLER_RETURN_IF_ERROR(index->Insert(txn, *nv, id));
  }
  // dirs: directory records for permission checks.
  const std::string key = FileKey(id);
  MDB_val k = Val(key);
  if (new_rec && new_rec->type == FileType::kDirectory) {
    std::string record, bytes;
    EncodeRecord(*new_rec, &record);
    EncodeStoredRecord(record, &bytes);
    MDB_val v = Val(bytes);
    int rc = mdb_put(txn, dirs_dbi_, &k, &v, 0);
    if (rc != 0) return LmdbStatus(rc, "writing a directory record");
  } else if (old_rec && old_rec->type == FileType::kDirectory) {
    int rc = mdb_del(txn, dirs_dbi_, &k, nullptr);
    if (rc != 0 && rc != MDB_NOTFOUND) return LmdbStatus(rc, "deleting a directory record");
  }
  return Status::OK();
}

Status Acg::ApplyOne(MDB_txn* txn, MDB_cursor* files, const Update& u,
                     std::string_view encoded, AcgSummary* widened, uint32_t carried) {
  const FileId id = u.record.id;
  if (u.op == UpdateOp::kAddEdge) {
    std::string key = prefix_;
    AppendEdgeKey(id, u.edge_dst, &key);
    MDB_val k = Val(key), v;
    EdgeValue value;
    int rc = mdb_get(txn, edges_dbi_, &k, &v);
    if (rc == 0) {
      if (Status st = DecodeEdgeValue(View(v), &value); !st.ok()) {
        return st.WithContext(AcgName(id_));
      }
    } else if (rc != MDB_NOTFOUND) {
      return LmdbStatus(rc, "reading an edge");
    }
    // The stored edge names another file that had one of these numbers before (another
    // generation of an end): it is replaced, not added to.
    auto other = [](uint32_t stored, uint32_t now) {
      return stored != 0 && now != 0 && stored != now;
    };
    if (other(value.src_generation, u.record.inode_generation) ||
        other(value.dst_generation, u.edge_dst_generation)) {
      value = EdgeValue{};
    }
    value.weight += u.edge_weight;
    if (u.record.inode_generation != 0) value.src_generation = u.record.inode_generation;
    if (u.edge_dst_generation != 0) value.dst_generation = u.edge_dst_generation;
    std::string bytes;
    AppendEdgeValue(value, &bytes);
    v = Val(bytes);
    const bool added = rc == MDB_NOTFOUND;
    rc = mdb_put(txn, edges_dbi_, &k, &v, 0);
    if (rc != 0) return LmdbStatus(rc, "writing an edge");
    if (added) ++delta_edges_;
    return Status::OK();
  }

  FileRecord& old_rec = commit_old_;
  std::string& key = commit_key_;
  key.assign(prefix_);
  AppendFileIdKey(id, &key);
  MDB_val k = Val(key), old_v;
  // Positions `files` on the record (kept there: UpdateIndexes below writes other databases).
  int rc = mdb_cursor_get(files, &k, &old_v, MDB_SET_KEY);
  if (rc != 0 && rc != MDB_NOTFOUND) return LmdbStatus(rc, "reading a record");
  const bool found = rc == 0;
  if (found) PROPELLER_RETURN_IF_ERROR(DecodeStored(View(old_v), &old_rec));
  k = Val(key);

  const FileRecord* new_rec = nullptr;
  FileRecord& merged = commit_merged_;
  switch (u.op) {
    case UpdateOp::kPut:
      new_rec = &u.record;
      if (u.record.inode_generation == 0 && u.record.type == FileType::kRegular) {
        // A regular file read without its generation (by name, not from an open descriptor):
        // the file this commit or the stored record last saw, if that was a regular file too
        // (only regular files carry one: a type change is another file).
        const uint32_t known =
            carried != 0 ? carried
            : found && old_rec.type == FileType::kRegular ? old_rec.inode_generation
                                                          : 0;
        if (known != 0) {
          merged = u.record;
          merged.inode_generation = known;
          new_rec = &merged;
        }
      } else if (found && old_rec.inode_generation != 0 &&
                 old_rec.inode_generation != u.record.inode_generation) {
        // Another file under the same number (its deletion was not seen: a reconcile found
        // it): the old one's edges go.
        commit_renewed_[id] = u.record.inode_generation;
      }
      // The summary covers every committed record's paths already: tokenizing them again is
      // ~10% of a commit of attribute changes.
      if (found && old_rec.paths == u.record.paths) {
        widened->AddAttributes(u.record);
        if (AcgSummary::WeekOf(ClampToInt64(old_rec.mtime)) !=
            AcgSummary::WeekOf(ClampToInt64(u.record.mtime))) {
          widened->AddKeywordWeeks(u.record);
        }
      } else {
        widened->Add(u.record);
      }
      break;
    case UpdateOp::kDelete:
      if (!found || !DeleteApplies(old_rec, u.record)) return Status::OK();
      break;
    case UpdateOp::kSetAttrs:
      if (!found) return Status::OK();  // the file was deleted after the attribute was set
      merged = old_rec;
      for (const auto& [name, value] : u.record.attrs) merged.attrs[name] = value;
      new_rec = &merged;
      break;
    case UpdateOp::kRemoveAttrs:
      if (!found) return Status::OK();
      merged = old_rec;
      for (const auto& [name, value] : u.record.attrs) merged.attrs.erase(name);
      new_rec = &merged;
      break;
    case UpdateOp::kAddEdge:
      break;
  }
  PROPELLER_RETURN_IF_ERROR(UpdateIndexes(txn, found ? &old_rec : nullptr, new_rec));
  if (new_rec) {
    // A kPut writes the bytes it was cached with (EncodeRecord of this very record).
    std::string_view bytes = encoded;
    if (new_rec != &u.record || bytes.empty()) {
      commit_bytes_.clear();
      EncodeRecord(*new_rec, &commit_bytes_);
      bytes = commit_bytes_;
    }
    commit_stored_.clear();
    EncodeStoredRecord(bytes, &commit_stored_);
    MDB_val v = Val(commit_stored_);
    rc = mdb_cursor_put(files, &k, &v, found ? MDB_CURRENT : 0);
    if (rc != 0) return LmdbStatus(rc, "writing a record");
    if (!found) ++delta_files_;
  } else if (found) {
    rc = mdb_cursor_del(files, 0);
    if (rc != 0) return LmdbStatus(rc, "deleting a record");
    --delta_files_;
    commit_deleted_ = true;
  }
  return Status::OK();
}

}  // namespace propeller
