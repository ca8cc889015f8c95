// Acg's splitting, merging and moving (acg.h, "splitting"): routes, the watch of changed
// files, export and import of held records and edges, the export of its key ranges for a move,
// and the removal of moved files.

#include <algorithm>

#include "common/lmdb_util.h"
#include "indexnode/acg.h"
#include "indexnode/acg_internal.h"
#include "schemas/keys.h"
#include "schemas/record_format.h"

namespace propeller {

using acg_internal::AcgName;
using acg_internal::IndexBatchScope;

// ---- splitting ----

uint64_t Acg::RouteOf(FileId id) const {
  if (!has_routes_.load(std::memory_order_acquire)) return 0;
  if (const uint64_t into = merged_into_.load(std::memory_order_acquire)) return into;
  MutexLock lock(&routes_mu_);
  auto it = routes_.find(id);
  return it == routes_.end() ? 0 : it->second;
}

bool Acg::RoutesTo(uint64_t target) const {
  MutexLock lock(&routes_mu_);
  for (const auto& [id, acg] : routes_) {
    if (acg == target) return true;
  }
  return false;
}

void Acg::AddRoutes(const FileIdSet& ids, uint64_t target) {
  MutexLock lock(&routes_mu_);
  for (const FileId& id : ids) routes_[id] = target;
  has_routes_.store(!routes_.empty(), std::memory_order_release);
}

void Acg::DropRoutes(uint64_t target) {
  MutexLock lock(&routes_mu_);
  std::erase_if(routes_, [&](const auto& kv) { return kv.second == target; });
  has_routes_.store(!routes_.empty() || merged_into_.load() != 0, std::memory_order_release);
}

void Acg::MergeInto(uint64_t target) {
  MutexLock lock(&routes_mu_);
  merged_into_.store(target, std::memory_order_release);
  has_routes_.store(true, std::memory_order_release);
}

void Acg::UnmergeInto() {
  MutexLock lock(&routes_mu_);
  merged_into_.store(0, std::memory_order_release);
  has_routes_.store(!routes_.empty(), std::memory_order_release);
}

void Acg::StartWatch() {
  WriterLock lock(&rw_);
  watching_ = true;
  watched_.clear();
}

void Acg::StopWatch() {
  WriterLock lock(&rw_);
  StopWatchHeld();
}

void Acg::StopWatchHeld() {
  watching_ = false;
  FileIdSet().swap(watched_);
}

Status Acg::ExportHeld(const FileIdSet& ids, bool watched_only, std::vector<FileRecord>* records,
                       std::vector<FileId>* absent, std::vector<StoredEdge>* edges) {
  FileIdSet chosen;
  if (watched_only) {
    for (const FileId& id : watched_) {
      if (ids.count(id)) chosen.insert(id);
    }
    watched_.clear();  // still watching: the next export takes what changes from here
  }
  const FileIdSet& want = watched_only ? chosen : ids;
  return ReadHeld([&](MDB_txn* raw) -> Status {
    std::vector<FileId> sorted(want.begin(), want.end());
    std::sort(sorted.begin(), sorted.end());
    for (const FileId& id : sorted) {
      FileRecord rec;
      bool found = false;
      PROPELLER_RETURN_IF_ERROR(ReadRecord(raw, id, &rec, &found));
      if (found) {
        records->push_back(std::move(rec));
      } else {
        absent->push_back(id);
      }
    }
    return ScanEdges(raw, [&](const StoredEdge& e) {
      if (want.count(e.src)) edges->push_back(e);
    });
  });
}

Status Acg::ImportHeld(std::span<const Update> updates, uint64_t applied_lsn) {
  auto batch = std::make_shared<StagedBatch>();
  for (const Update& u : updates) StageUpdate(u, batch.get());
  batch->lsn = applied_lsn;
  Taken taken;
  taken.slices.push_back(Slice{batch, 0, static_cast<uint32_t>(batch->entries.size())});
  bool reopened = false;
  Status s = EnsureOpenLocked(&reopened);
  if (s.ok()) s = WriteTaken(&taken);
  if (!s.ok()) {
    CloseLocked();
    if (inode_ != nullptr) inode_->Unload();
    return s.WithContext("importing into " + AcgName(id_));
  }
  RefreshOpenBytes();
  return Status::OK();
}

Status Acg::CopyTo(const std::string& path) {
  Pin pin(this);
  // A read transaction inside: commits may go on meanwhile, the copy is one snapshot.
  return ctx_->store->ExportAcg(id_, path).WithContext("copying " + AcgName(id_));
}

Status Acg::SetAppliedLsn(uint64_t lsn) {
  bool reopened = false;
  Status s = [&]() -> Status {
    WriterLock lock(&rw_);
    PROPELLER_RETURN_IF_ERROR(EnsureOpenLocked(&reopened));
    MDB_txn* raw = nullptr;
    int rc = mdb_txn_begin(env_, nullptr, 0, &raw);
    if (rc != 0) return LmdbStatus(rc, "mdb_txn_begin");
    TxnGuard txn(raw);
    std::string v;
    AppendOrderedU64(lsn, &v);
    const std::string key = Key("applied_lsn");
    MDB_val k = Val(key), val = Val(v);
    rc = mdb_put(raw, meta_dbi_, &k, &val, 0);
    if (rc != 0) return LmdbStatus(rc, "writing applied_lsn");
    rc = txn.Commit();
    if (rc != 0) return LmdbStatus(rc, "mdb_txn_commit");
    applied_lsn_ = lsn;
    return Status::OK();
  }();
  if (reopened && ctx_->on_open) ctx_->on_open(this);
  return s;
}

void Acg::Retire() {
  WriterLock lock(&rw_);
  CloseLocked();
  indexes_.Clear();
  inode_.reset();
  retired_.store(true, std::memory_order_release);
}

Status Acg::RecordMovedHeld(const FileIdSet& ids, uint64_t target, bool merge) {
  bool reopened = false;
  PROPELLER_RETURN_IF_ERROR(EnsureOpenLocked(&reopened));
  std::vector<FileId> sorted(ids.begin(), ids.end());
  std::sort(sorted.begin(), sorted.end());
  std::string target_bytes;
  AppendOrderedU64(target, &target_bytes);
  Status s = [&]() -> Status {
    MDB_txn* raw = nullptr;
    int rc = mdb_txn_begin(env_, nullptr, 0, &raw);
    if (rc != 0) return LmdbStatus(rc, "mdb_txn_begin");
    TxnGuard txn(raw);
    if (merge) {
      const std::string key = Key("merged_into");
      MDB_val k = Val(key), v = Val(target_bytes);
      rc = mdb_put(raw, meta_dbi_, &k, &v, 0);
      if (rc != 0) return LmdbStatus(rc, "recording the merge");
    } else {
      for (const FileId& id : sorted) {
        const std::string key = FileKey(id);
        MDB_val k = Val(key), v = Val(target_bytes);
        rc = mdb_put(raw, moved_dbi_, &k, &v, 0);
        if (rc != 0) return LmdbStatus(rc, "recording a moved file");
      }
    }
    const std::string cleanup_key = Key(kCleanupKey);
    MDB_val k = Val(cleanup_key), v = Val("1");
    rc = mdb_put(raw, meta_dbi_, &k, &v, 0);
    if (rc != 0) return LmdbStatus(rc, "recording the clean-up");
    rc = txn.Commit();
    if (rc != 0) return LmdbStatus(rc, "mdb_txn_commit");
    return Status::OK();
  }();
  if (!s.ok()) {
    CloseLocked();
    if (inode_ != nullptr) inode_->Unload();
    return s.WithContext("recording the move out of " + AcgName(id_));
  }
  if (merge) {
    MergeInto(target);
  } else {
    AddRoutes(ids, target);
  }
  cleanup_pending_.store(true, std::memory_order_release);
  return Status::OK();
}

Status Acg::RemoveHeld(const FileIdSet& ids, bool last) {
  bool reopened = false;
  PROPELLER_RETURN_IF_ERROR(EnsureOpenLocked(&reopened));
  std::vector<FileId> sorted(ids.begin(), ids.end());
  std::sort(sorted.begin(), sorted.end());
  Status s = [&]() PROPELLER_REQUIRES(rw_) -> Status {
    MDB_txn* raw = nullptr;
    int rc = mdb_txn_begin(env_, nullptr, 0, &raw);
    if (rc != 0) return LmdbStatus(rc, "mdb_txn_begin");
    TxnGuard txn(raw);
    IndexBatchScope batch(&indexes_);  // as in ApplyTaken
    MDB_cursor* files_raw = nullptr;
    rc = mdb_cursor_open(raw, files_dbi_, &files_raw);
    if (rc != 0) return LmdbStatus(rc, "mdb_cursor_open");
    CursorGuard files(files_raw);
    AcgSummary unused;
    Update& u = commit_update_;
    delta_files_ = delta_edges_ = 0;
    for (const FileId& id : sorted) {
      u = Update();
      u.op = UpdateOp::kDelete;
      u.acg = id_;
      u.record.id = id;
      PROPELLER_RETURN_IF_ERROR(ApplyOne(raw, files.get(), u, {}, &unused));
    }
    // Edges from the removed files go with them: each file's run of keys src ‖ dst, found by
    // a seek (a split removes its files in chunks; a scan per chunk would read every edge).
    MDB_cursor* cur = nullptr;
    rc = mdb_cursor_open(raw, edges_dbi_, &cur);
    if (rc != 0) return LmdbStatus(rc, "mdb_cursor_open");
    CursorGuard edges(cur);
    for (const FileId& id : sorted) {
      const std::string prefix = FileKey(id);
      MDB_val k = Val(prefix), v;
      for (rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
           rc == 0 && View(k).starts_with(prefix);) {
        rc = mdb_cursor_del(cur, 0);
        if (rc != 0) return LmdbStatus(rc, "deleting an edge");
        --delta_edges_;
        // After a delete the cursor stands on the next entry (or past the end).
        rc = mdb_cursor_get(cur, &k, &v, MDB_GET_CURRENT);
        if (rc == EINVAL) rc = MDB_NOTFOUND;
      }
      if (rc != 0 && rc != MDB_NOTFOUND) return LmdbStatus(rc, "removing edges");
    }
    if (last) {
      const std::string cleanup_key = Key(kCleanupKey);
      MDB_val key = Val(cleanup_key);
      rc = mdb_del(raw, meta_dbi_, &key, nullptr);
      if (rc != 0 && rc != MDB_NOTFOUND) return LmdbStatus(rc, "ending the clean-up");
    }
    uint64_t files_count = 0, edges_count = 0;
    PROPELLER_RETURN_IF_ERROR(SaveCounts(raw, &files_count, &edges_count));
    edges.Close();
    files.Close();
    rc = txn.Commit();
    if (rc != 0) return LmdbStatus(rc, "mdb_txn_commit");
    files_ = files_count;
    edges_ = edges_count;
    return Status::OK();
  }();
  if (!s.ok()) {
    CloseLocked();
    if (inode_ != nullptr) inode_->Unload();
    return s.WithContext("removing moved files from " + AcgName(id_));
  }
  if (last) cleanup_pending_.store(false, std::memory_order_release);
  RefreshOpenBytes();
  return Status::OK();
}

Result<Acg::FileIdSet> Acg::MovedStillHeld() {
  FileIdSet out;
  if (merged_into() != 0) {
    std::vector<FileId> ids;
    PROPELLER_RETURN_IF_ERROR(ListHeldIds(&ids));
    out.insert(ids.begin(), ids.end());
    return out;
  }
  std::vector<FileId> routed;
  {
    MutexLock lock(&routes_mu_);
    routed.reserve(routes_.size());
    for (const auto& [id, acg] : routes_) routed.push_back(id);
  }
  std::sort(routed.begin(), routed.end());
  PROPELLER_RETURN_IF_ERROR(WithReadTxn([&](MDB_txn* txn) -> Status {
    for (const FileId& id : routed) {
      const std::string key = FileKey(id);
      MDB_val k = Val(key), v;
      const int rc = mdb_get(txn, files_dbi_, &k, &v);
      if (rc == 0) out.insert(id);
      else if (rc != MDB_NOTFOUND) return LmdbStatus(rc, "reading a moved file");
    }
    // Edges left by moved files without a record.
    return ScanEdges(txn, [&](const StoredEdge& e) {
      if (std::binary_search(routed.begin(), routed.end(), e.src)) out.insert(e.src);
    });
  }));
  return out;
}

Status Acg::ReadHeld(const std::function<Status(MDB_txn*)>& fn) {
  bool reopened = false;
  PROPELLER_RETURN_IF_ERROR(EnsureOpenLocked(&reopened));
  MDB_txn* raw = nullptr;
  int rc = mdb_txn_begin(env_, nullptr, MDB_RDONLY, &raw);
  if (rc != 0) return LmdbStatus(rc, "mdb_txn_begin");
  TxnGuard txn(raw);
  return fn(raw);
}

Status Acg::ListFileIdsHeld(std::vector<FileId>* ids) {
  return ReadHeld([&](MDB_txn* raw) { return ScanHeldIds(raw, ids); });
}

Status Acg::ScanHeldIds(MDB_txn* txn, std::vector<FileId>* ids) {
  PROPELLER_RETURN_IF_ERROR(ScanFileIds(txn, ids));
  // Edges may leave files without a record here (deleted since, or never put): they count.
  std::vector<FileId> sources;
  PROPELLER_RETURN_IF_ERROR(ScanEdges(txn, [&](const StoredEdge& e) {
    if (sources.empty() || !(sources.back() == e.src)) sources.push_back(e.src);
  }));
  ids->insert(ids->end(), sources.begin(), sources.end());
  std::sort(ids->begin(), ids->end());
  ids->erase(std::unique(ids->begin(), ids->end()), ids->end());
  return Status::OK();
}

}  // namespace propeller
