#include "indexnode/acg.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <set>

#include "common/env.h"
#include "common/lmdb_util.h"
#include "common/logging.h"
#include "common/secure_dir.h"
#include "indexnode/acg_internal.h"
#include "indexnode/index/kdtree_index.h"
#include "schemas/keys.h"
#include "schemas/record_format.h"

namespace propeller {
namespace {

using acg_internal::AcgName;
using acg_internal::IndexBatchScope;

constexpr char kPathIndex[] = "path";
constexpr char kKeywordIndex[] = "keyword";
constexpr char kInodeIndex[] = "inode";
// A commit at least this large rebuilds a drifted K-D tree at once (bulk loads), so the next
// search does not pay for it; smaller ones leave it to the search (index.h: Rebalance).
constexpr size_t kRebalanceAfter = 4096;

std::set<std::string> KeywordSet(const FileRecord& rec) {
  std::set<std::string> out;
  for (const std::string& p : rec.paths) {
    for (std::string& t : PathKeywords(p)) out.insert(std::move(t));
  }
  return out;
}

bool HasRecord(UpdateOp op) {
  return op == UpdateOp::kPut || op == UpdateOp::kSetAttrs || op == UpdateOp::kRemoveAttrs;
}

// User indexes of type kdtree are accepted by the catalogue but not fed: the K-D structure
// indexes the six inode axes (InsertPoint), not a single attribute value. Queries on such an
// attribute verify every record.
bool FedByAttribute(const IndexSpec& spec) { return spec.type != IndexType::kKdTree; }


}  // namespace

StagedBatch::~StagedBatch() {
  if (live_bytes != nullptr) {
    const uint64_t n = bytes();
    uint64_t cur = live_bytes->load();
    while (!live_bytes->compare_exchange_weak(cur, cur - std::min(cur, n))) {
    }
  }
}

void StageUpdate(const Update& u, StagedBatch* batch) {
  CachedUpdate& e = batch->entries.emplace_back();
  e.op = u.op;
  e.id = u.record.id;
  e.edge_dst = u.edge_dst;
  e.edge_weight = u.edge_weight;
  e.generation = u.record.inode_generation;
  e.edge_dst_generation = u.edge_dst_generation;
  e.offset = batch->data.size();
  // A conditional delete (paths given) keeps its record for the check at commit.
  if (HasRecord(u.op) || (u.op == UpdateOp::kDelete && !u.record.paths.empty())) {
    EncodeRecord(u.record, &batch->data);
    e.size = static_cast<uint32_t>(batch->data.size() - e.offset);
  }
}

Acg::Pin::Pin(Acg* acg) : acg_(acg) {
  acg_->pins_.fetch_add(1);
  if (acg_->ctx_->use_clock != nullptr) {
    acg_->last_used_.store(acg_->ctx_->use_clock->fetch_add(1) + 1, std::memory_order_relaxed);
  }
}

Acg::Pin::~Pin() { acg_->pins_.fetch_sub(1); }

Acg::Acg(uint64_t id, std::string dir, const AcgContext* ctx)
    : id_(id),
      dir_(std::move(dir)),
      ctx_(ctx),
      shard_(ctx->store->ShardOf(id)),
      prefix_(AcgKeyPrefix(id)),
      env_(shard_->env),
      files_dbi_(shard_->files),
      dirs_dbi_(shard_->dirs),
      edges_dbi_(shard_->edges),
      meta_dbi_(shard_->meta),
      moved_dbi_(shard_->moved) {}

Acg::~Acg() {
  indexes_.clear();
  owned_.clear();
  inode_.reset();
}

std::string Acg::FileKey(FileId id) const {
  std::string key = prefix_;
  AppendFileIdKey(id, &key);
  return key;
}

int Acg::First(MDB_cursor* cur, MDB_val* k, MDB_val* v) const {
  *k = Val(prefix_);
  const int rc = mdb_cursor_get(cur, k, v, MDB_SET_RANGE);
  if (rc == 0 && !View(*k).starts_with(prefix_)) return MDB_NOTFOUND;
  return rc;
}

int Acg::Next(MDB_cursor* cur, MDB_val* k, MDB_val* v) const {
  const int rc = mdb_cursor_get(cur, k, v, MDB_NEXT);
  if (rc == 0 && !View(*k).starts_with(prefix_)) return MDB_NOTFOUND;
  return rc;
}

Result<std::unique_ptr<Acg>> Acg::Open(uint64_t id, const std::string& dir,
                                       const AcgContext* ctx) {
  if (id == 0 || id > kMaxStoredAcgId) {
    return Status::InvalidArgument(AcgName(id) + ": ACG ids of the store are 1 to " +
                                   std::to_string(kMaxStoredAcgId));
  }
  if (ctx->store == nullptr) return Status::Internal("no store for the ACGs");
  PROPELLER_RETURN_IF_ERROR(MakeDirs(dir, 0700).WithContext("creating ACG directory"));
  std::unique_ptr<Acg> acg(new Acg(id, dir, ctx));
  std::unique_lock<std::shared_mutex> lock(acg->rw_);
  PROPELLER_RETURN_IF_ERROR(acg->OpenLocked(/*first=*/true).WithContext(AcgName(id)));
  lock.unlock();
  return acg;
}

Status Acg::OpenEnv(bool first) {
  int rc = 0;
  MDB_txn* raw = nullptr;
  rc = mdb_txn_begin(env_, nullptr, 0, &raw);
  if (rc != 0) return LmdbStatus(rc, "mdb_txn_begin");
  TxnGuard txn(raw);
  if (first) {
    std::string key_bytes = Key("version");
    MDB_val key = Val(key_bytes), val;
    rc = mdb_get(raw, meta_dbi_, &key, &val);
    if (rc == MDB_NOTFOUND) {
      std::string v;
      AppendOrderedU64(kAcgFormatVersion, &v);
      val = Val(v);
      rc = mdb_put(raw, meta_dbi_, &key, &val, 0);
      if (rc != 0) return LmdbStatus(rc, "writing ACG version");
    } else if (rc != 0) {
      return LmdbStatus(rc, "reading ACG version");
    } else {
      if (val.mv_size != 8) return Status::Corruption("ACG version has a bad size");
      uint64_t version = DecodeOrderedU64(View(val));
      if (version > kAcgFormatVersion) {
        return Status::Corruption("ACG format version " + std::to_string(version) +
                                  " is newer than this program's");
      }
      if (version < kAcgFormatVersion) {
        // Records without a checksum stay readable; new ones get one (keys.h).
        std::string v;
        AppendOrderedU64(kAcgFormatVersion, &v);
        MDB_val nv = Val(v);
        rc = mdb_put(raw, meta_dbi_, &key, &nv, 0);
        if (rc != 0) return LmdbStatus(rc, "writing ACG version");
      }
    }
    // applied_lsn and the summary live in memory from here on; later opens find in LMDB what
    // this object last wrote.
    key_bytes = Key("applied_lsn");
    key = Val(key_bytes);
    rc = mdb_get(raw, meta_dbi_, &key, &val);
    if (rc == 0) {
      if (val.mv_size != 8) return Status::Corruption("ACG applied_lsn has a bad size");
      applied_lsn_ = DecodeOrderedU64(View(val));
    } else if (rc != MDB_NOTFOUND) {
      return LmdbStatus(rc, "reading applied_lsn");
    }
    // Files split off to other ACGs (RemoveMovedHeld): id -> ACG, kept in memory from here.
    MDB_cursor* cur = nullptr;
    rc = mdb_cursor_open(raw, moved_dbi_, &cur);
    if (rc != 0) return LmdbStatus(rc, "mdb_cursor_open");
    CursorGuard moved(cur);
    {
      std::lock_guard<std::mutex> rl(routes_mu_);
      for (rc = First(cur, &key, &val); rc == 0; rc = Next(cur, &key, &val)) {
        FileId id;
        if (!DecodeFileIdKey(Unprefixed(key), &id).ok() || val.mv_size != 8) {
          return Status::Corruption("malformed entry in the moved database");
        }
        routes_[id] = DecodeOrderedU64(View(val));
      }
      if (rc != MDB_NOTFOUND) return LmdbStatus(rc, "reading the moved database");
      key_bytes = Key("merged_into");
      key = Val(key_bytes);
      rc = mdb_get(raw, meta_dbi_, &key, &val);
      if (rc == 0) {
        if (val.mv_size != 8) return Status::Corruption("ACG merged_into has a bad size");
        merged_into_.store(DecodeOrderedU64(View(val)), std::memory_order_release);
      } else if (rc != MDB_NOTFOUND) {
        return LmdbStatus(rc, "reading merged_into");
      }
      has_routes_.store(!routes_.empty() || merged_into_.load() != 0,
                        std::memory_order_release);
      key_bytes = Key(kCleanupKey);
      key = Val(key_bytes);
      rc = mdb_get(raw, meta_dbi_, &key, &val);
      if (rc != 0 && rc != MDB_NOTFOUND) return LmdbStatus(rc, "reading the clean-up mark");
      cleanup_pending_ = rc == 0;
    }
    moved.Close();
    key_bytes = Key("summary");
    key = Val(key_bytes);
    rc = mdb_get(raw, meta_dbi_, &key, &val);
    if (rc == 0) {
      std::lock_guard<std::mutex> sl(summary_mu_);
      PROPELLER_RETURN_IF_ERROR(summary_.DecodeFrom(View(val)));
    } else if (rc != MDB_NOTFOUND) {
      return LmdbStatus(rc, "reading summary");
    }
    // The counts: kept in meta (the databases are shared, so their sizes say nothing).
    key_bytes = Key("counts");
    key = Val(key_bytes);
    rc = mdb_get(raw, meta_dbi_, &key, &val);
    if (rc == 0) {
      if (val.mv_size != 16) return Status::Corruption("ACG counts have a bad size");
      files_ = DecodeOrderedU64(View(val).substr(0, 8));
      edges_ = DecodeOrderedU64(View(val).substr(8));
    } else if (rc != MDB_NOTFOUND) {
      return LmdbStatus(rc, "reading the counts");
    }
  }
  rc = txn.Commit();
  return rc == 0 ? Status::OK() : LmdbStatus(rc, "committing ACG open");
}

Status Acg::OpenLocked(bool first) {
  if (retired_.load(std::memory_order_relaxed)) {
    return Status::NotFound(AcgName(id_) + " moved to another node");
  }
  Status s = OpenEnv(first);
  if (s.ok()) {
    MDB_txn* raw = nullptr;
    int rc = mdb_txn_begin(env_, nullptr, 0, &raw);
    if (rc != 0) {
      s = LmdbStatus(rc, "mdb_txn_begin");
    } else {
      TxnGuard txn(raw);
      std::vector<IndexSpec> catalogue;
      if (ctx_->catalogue) catalogue = ctx_->catalogue();
      s = ReconcileIndexes(raw, catalogue);
      // A new (or emptied) ACG loads its empty K-D tree now: commits then keep it current and
      // no search ever has to load it.
      if (s.ok() && files_.load() == 0 && !inode_->loaded()) s = inode_->Load(raw);
      if (s.ok()) {
        rc = txn.Commit();
        if (rc != 0) s = LmdbStatus(rc, "committing the index set");
      }
    }
  }
  if (!s.ok()) {
    CloseLocked();
    // An aborted transaction may have left a K-D tree ahead of LMDB.
    if (inode_ != nullptr) inode_->Unload();
    return s;
  }
  open_.store(true, std::memory_order_release);
  RefreshOpenBytes();
  return Status::OK();
}

void Acg::CloseLocked() {
  indexes_.clear();
  owned_.clear();
  if (inode_ != nullptr) indexes_[kInodeIndex] = inode_.get();
  open_.store(false, std::memory_order_release);
}

bool Acg::TryUnload() {
  std::unique_lock<std::shared_mutex> lock(rw_, std::try_to_lock);
  if (!lock.owns_lock() || pins_.load() > 0 || !open_.load()) return false;
  bool unloaded = false;
  for (auto& [name, index] : owned_) {
    if (index->type() == IndexType::kHash && index->loaded()) {
      index->Unload();
      unloaded = true;
    }
  }
  RefreshOpenBytes();
  return unloaded;
}

void Acg::CloseClean() {
  std::unique_lock<std::shared_mutex> lock(rw_);
  if (cached() > 0 || retired_.load()) return;
  if (open_.load()) CloseLocked();
}

Status Acg::EnsureOpen() {
  if (open_.load(std::memory_order_acquire)) return Status::OK();
  {
    std::unique_lock<std::shared_mutex> lock(rw_);
    if (open_.load(std::memory_order_relaxed)) return Status::OK();
    PROPELLER_RETURN_IF_ERROR(OpenLocked(/*first=*/false).WithContext(AcgName(id_)));
  }
  if (ctx_->on_open) ctx_->on_open(this);
  return Status::OK();
}

Status Acg::EnsureLoaded(const std::vector<std::string>& names) {
  {
    std::shared_lock<std::shared_mutex> lock(rw_);
    bool need = false;
    for (const std::string& n : names) {
      auto it = indexes_.find(n);
      if (it != indexes_.end() && !it->second->loaded()) need = true;
    }
    if (!need) return Status::OK();
  }
  bool tables = false;
  {
    std::unique_lock<std::shared_mutex> lock(rw_);
    if (!open_.load()) return Status::OK();  // closed meanwhile: the caller reopens, retries
    MDB_txn* raw = nullptr;
    int rc = mdb_txn_begin(env_, nullptr, MDB_RDONLY, &raw);
    if (rc != 0) return LmdbStatus(rc, "mdb_txn_begin");
    TxnGuard txn(raw);
    for (const std::string& n : names) {
      auto it = indexes_.find(n);
      if (it == indexes_.end() || it->second->loaded()) continue;
      PROPELLER_RETURN_IF_ERROR(it->second->Load(raw).WithContext(AcgName(id_)));
      tables |= it->second->type() == IndexType::kHash;
    }
    RefreshOpenBytes();
  }
  if (tables && ctx_->on_load) ctx_->on_load(this);  // the caller pinned it
  return Status::OK();
}

void Acg::RefreshOpenBytes() {
  uint64_t hash = 0;
  for (const auto& [name, index] : owned_) {
    if (index->loaded()) hash += index->MemoryBytes();  // (B-trees: 0)
  }
  hash_bytes_.store(hash, std::memory_order_relaxed);
}

Status Acg::ReconcileIndexes(MDB_txn* raw, const std::vector<IndexSpec>& user_indexes) {
  indexes_.clear();
  owned_.clear();
  // Which indexes exist in this ACG already.
  std::map<std::string, IndexType> built;
  {
    MDB_cursor* cur = nullptr;
    int rc = mdb_cursor_open(raw, meta_dbi_, &cur);
    if (rc != 0) return LmdbStatus(rc, "mdb_cursor_open");
    std::string prefix = Key("idx:");
    MDB_val k = Val(prefix), v;
    rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
    while (rc == 0 && View(k).substr(0, prefix.size()) == prefix) {
      if (v.mv_size == 1) {
        built[std::string(View(k).substr(prefix.size()))] =
            static_cast<IndexType>(*static_cast<const uint8_t*>(v.mv_data));
      }
      rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
    }
    mdb_cursor_close(cur);
    if (rc != 0 && rc != MDB_NOTFOUND) return LmdbStatus(rc, "listing indexes");
  }

  std::vector<IndexSpec> wanted = {{kPathIndex, IndexType::kBTree},
                                   {kKeywordIndex, IndexType::kBTree},
                                   {kInodeIndex, IndexType::kKdTree}};
  wanted.insert(wanted.end(), user_indexes.begin(), user_indexes.end());
  for (const IndexSpec& spec : wanted) {
    auto it = built.find(spec.name);
    if (it != built.end() && it->second != spec.type) {
      // Same name, new type: the catalogue wins (the index was dropped and re-created).
      PROPELLER_RETURN_IF_ERROR(DropIndexData(raw, it->second, spec.name, prefix_));
      built.erase(it);
      it = built.end();
    }
    const bool fresh = it == built.end();
    Index* index = nullptr;
    if (spec.name == kInodeIndex) {
      if (inode_ != nullptr && fresh) inode_.reset();  // its data is gone
      if (inode_ != nullptr) {
        PROPELLER_RETURN_IF_ERROR(inode_->Reattach(raw));
      } else {
        KdTreeOptions options;
        options.scan_points = std::bind_front(&Acg::ScanPoints, this);
        options.key_prefix = prefix_;
        PROPELLER_ASSIGN_OR_RETURN(
            inode_, OpenKdTreeIndex(raw, spec.name, options, /*load=*/false));
      }
      index = inode_.get();
    } else {
      PROPELLER_ASSIGN_OR_RETURN(std::unique_ptr<Index> opened,
                                 OpenIndex(raw, spec.type, spec.name, /*load=*/false, prefix_));
      index = opened.get();
      owned_[spec.name] = std::move(opened);
    }
    if (fresh) {
      PROPELLER_RETURN_IF_ERROR(BuildIndex(raw, index));
      std::string key = Key("idx:" + spec.name);
      uint8_t t = static_cast<uint8_t>(spec.type);
      MDB_val k = Val(key), v{1, &t};
      int rc = mdb_put(raw, meta_dbi_, &k, &v, 0);
      if (rc != 0) return LmdbStatus(rc, "recording index " + spec.name);
    } else {
      built.erase(it);
    }
    indexes_[spec.name] = index;
  }
  // Whatever is left was dropped from the catalogue.
  for (const auto& [name, type] : built) {
    PROPELLER_RETURN_IF_ERROR(DropIndexData(raw, type, name, prefix_));
    std::string key = Key("idx:" + name);
    MDB_val k = Val(key);
    int rc = mdb_del(raw, meta_dbi_, &k, nullptr);
    if (rc != 0 && rc != MDB_NOTFOUND) return LmdbStatus(rc, "dropping index " + name);
  }
  user_specs_ = user_indexes;
  return Status::OK();
}

Status Acg::BuildIndex(MDB_txn* txn, Index* index) {
  const std::string& name = index->name();
  // `inode` reads the records when it loads (ScanPoints); other kdtree indexes are not fed.
  if (index->type() == IndexType::kKdTree) return Status::OK();
  MDB_cursor* cur = nullptr;
  int rc = mdb_cursor_open(txn, files_dbi_, &cur);
  if (rc != 0) return LmdbStatus(rc, "mdb_cursor_open");
  MDB_val k, v;
  Status s;
  FileRecord rec;
  for (rc = First(cur, &k, &v); rc == 0 && s.ok(); rc = Next(cur, &k, &v)) {
    s = DecodeStored(View(v), &rec);
    if (!s.ok()) break;
    if (name == kInodeIndex) {
      s = index->InsertPoint(txn, AcgSummary::PointOf(rec), rec.id);
    } else if (name == kPathIndex) {
      for (const std::string& p : rec.paths) {
        s = index->Insert(txn, AttrValue(p), rec.id);
        if (!s.ok()) break;
      }
    } else if (name == kKeywordIndex) {
      for (const std::string& t : KeywordSet(rec)) {
        s = index->Insert(txn, AttrValue(t), rec.id);
        if (!s.ok()) break;
      }
    } else {
      auto it = rec.attrs.find(name);
      if (it != rec.attrs.end()) s = index->Insert(txn, it->second, rec.id);
    }
  }
  mdb_cursor_close(cur);
  if (!s.ok()) return s.WithContext("building index " + name);
  if (rc != MDB_NOTFOUND) return LmdbStatus(rc, "scanning records");
  return Status::OK();
}

Status Acg::ScanPoints(MDB_txn* txn, const KdReserve& reserve, const KdAddPoint& add) {
  reserve(files_.load() + std::max<int64_t>(delta_files_, 0));
  MDB_cursor* cur = nullptr;
  int rc = mdb_cursor_open(txn, files_dbi_, &cur);
  if (rc != 0) return LmdbStatus(rc, "mdb_cursor_open");
  MDB_val k, v;
  Status s;
  FileRecord rec;
  for (rc = First(cur, &k, &v); rc == 0; rc = Next(cur, &k, &v)) {
    std::string_view bytes;
    s = UnwrapStored(View(v), &bytes);
    if (s.ok()) s = DecodeRecordHead(bytes, &rec);
    if (s.ok()) s = add(rec.id, AcgSummary::PointOf(rec));
    if (!s.ok()) break;
  }
  mdb_cursor_close(cur);
  if (!s.ok()) return s.WithContext(AcgName(id_) + ": loading the inode K-D tree");
  if (rc != MDB_NOTFOUND) return LmdbStatus(rc, "scanning records");
  return Status::OK();
}

// ---- the write cache ----

uint64_t Acg::SliceBytes(const Slice& s) {
  const std::vector<CachedUpdate>& e = s.batch->entries;
  uint64_t bytes = (s.end - s.begin) * sizeof(CachedUpdate);
  if (s.end > s.begin) {
    const uint64_t last = e[s.end - 1].offset + e[s.end - 1].size;
    bytes += last - e[s.begin].offset;
  }
  return bytes;
}

size_t Acg::AppendToCache(std::shared_ptr<const StagedBatch> batch, uint32_t begin, uint32_t end,
                          int64_t now_mono_ns) {
  Slice slice{std::move(batch), begin, end};
  const uint64_t bytes = SliceBytes(slice);
  std::lock_guard<std::mutex> lock(cache_mu_);
  if (cache_.empty()) oldest_cached_time_ns_ = now_mono_ns;
  cache_.push_back(std::move(slice));
  cached_ += end - begin;
  cache_bytes_.store(cache_bytes_.load(std::memory_order_relaxed) + bytes,
                     std::memory_order_relaxed);
  return cached_;
}

size_t Acg::cached() const {
  std::lock_guard<std::mutex> lock(cache_mu_);
  return cached_;
}

uint64_t Acg::oldest_cached_lsn() const {
  std::lock_guard<std::mutex> lock(cache_mu_);
  // Updates a commit has taken out of the cache still count until it succeeded: were the log
  // cut past them meanwhile and the commit failed, they would exist in memory only.
  if (committing_lsn_ != 0) return committing_lsn_;
  return cache_.empty() ? 0 : cache_.front().batch->lsn;
}

int64_t Acg::oldest_cached_time_ns() const {
  std::lock_guard<std::mutex> lock(cache_mu_);
  return cache_.empty() ? 0 : oldest_cached_time_ns_;
}

bool Acg::MayMatch(const QueryNode& node) const {
  {
    std::lock_guard<std::mutex> lock(cache_mu_);
    if (!cache_.empty() || summary_pending_ > 0) return true;
  }
  std::lock_guard<std::mutex> lock(summary_mu_);
  return summary_.MayMatch(node);
}

// ---- commit ----

Status Acg::Commit(uint64_t up_to_lsn, size_t* updates) {
  Pin pin(this);
  if (updates != nullptr) *updates = 0;
  {
    std::lock_guard<std::mutex> cl(cache_mu_);
    if (cache_.empty() || cache_.front().batch->lsn > up_to_lsn) return Status::OK();
  }
  // Open first (it takes rw_ itself and reports to the engine without it); the batch leaves
  // the cache only under rw_ held exclusively, so a search (rw_ shared) finds every update
  // either in the cache — and commits it — or in the indexes, never in between.
  PROPELLER_RETURN_IF_ERROR(EnsureOpen());
  std::unique_lock<std::shared_mutex> lock(rw_);
  bool reopened = false;
  Status s = CommitLocked(up_to_lsn, updates, &reopened);
  lock.unlock();
  if (reopened && ctx_->on_open) ctx_->on_open(this);  // account for it (even if closed again)
  return s;
}

Status Acg::CommitHeld(uint64_t up_to_lsn) {
  bool reopened = false;
  return CommitLocked(up_to_lsn, nullptr, &reopened);
}

Status Acg::CommitLocked(uint64_t up_to_lsn, size_t* updates, bool* reopened) {
  if (updates != nullptr) *updates = 0;
  if (frozen_) return Status::Aborted(AcgName(id_) + " is frozen by a failed split");
  std::vector<Slice> slices;
  size_t count = 0;
  uint64_t bytes = 0;
  {
    std::lock_guard<std::mutex> cl(cache_mu_);
    size_t n = 0;
    while (n < cache_.size() && cache_[n].batch->lsn <= up_to_lsn) ++n;
    if (n == 0) return Status::OK();
    if (n == cache_.size()) {
      slices.swap(cache_);
    } else {
      slices.assign(std::make_move_iterator(cache_.begin()),
                    std::make_move_iterator(cache_.begin() + static_cast<ptrdiff_t>(n)));
      cache_.erase(cache_.begin(), cache_.begin() + static_cast<ptrdiff_t>(n));
    }
    for (const Slice& sl : slices) {
      count += sl.end - sl.begin;
      bytes += SliceBytes(sl);
    }
    cached_ -= count;
    cache_bytes_.store(cache_bytes_.load(std::memory_order_relaxed) - bytes,
                       std::memory_order_relaxed);
    ++summary_pending_;
    committing_lsn_ = slices.front().batch->lsn;
  }
  Status s = EnsureOpenLocked(reopened);  // closed meanwhile (by another commit, or a failure)
  if (s.ok() && ctx_->commit_hook) s = ctx_->commit_hook(id_);
  if (s.ok()) s = CommitOnce(slices);
  if (!s.ok()) {
    // Bring memory back in line with LMDB: drop everything; the next use reopens and the
    // next search reloads.
    CloseLocked();
    if (inode_ != nullptr) inode_->Unload();
  } else {
    if (count >= kRebalanceAfter) {
      Status rs = inode_->Rebalance();
      if (!rs.ok()) Log(LogLevel::kWarning, "ACG %llu: %s",
                        static_cast<unsigned long long>(id_), rs.ToString().c_str());
    }
    RefreshOpenBytes();
  }
  {
    // Still under rw_: a failed batch is back in the cache before any search looks.
    std::lock_guard<std::mutex> cl(cache_mu_);
    --summary_pending_;
    committing_lsn_ = 0;
    if (!s.ok()) {
      // Keep every update: put the slices back in front of what arrived meanwhile.
      slices.insert(slices.end(), std::make_move_iterator(cache_.begin()),
                    std::make_move_iterator(cache_.end()));
      cache_.swap(slices);
      cached_ += count;
      cache_bytes_.store(cache_bytes_.load(std::memory_order_relaxed) + bytes,
                         std::memory_order_relaxed);
    }
  }
  if (!s.ok()) return s.WithContext("committing " + AcgName(id_));
  if (updates != nullptr) *updates = count;
  return Status::OK();
}

Status Acg::EnsureOpenLocked(bool* reopened) {
  if (open_.load()) return Status::OK();
  Status s = OpenLocked(/*first=*/false);
  if (s.ok()) *reopened = true;
  return s;
}

Status Acg::CommitOnce(const std::vector<Slice>& slices) {
  MDB_txn* raw = nullptr;
  int rc = mdb_txn_begin(env_, nullptr, 0, &raw);
  if (rc != 0) return LmdbStatus(rc, "mdb_txn_begin");
  TxnGuard txn(raw);
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
  CursorGuard files(files_raw);  // declared after txn: closed before the transaction ends
  std::vector<CommitRef>& order = commit_order_;
  order.clear();
  delta_files_ = delta_edges_ = 0;
  commit_edges_.clear();
  commit_deletes_.clear();
  commit_renewed_.clear();
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
        commit_edges_.push_back(order[k]);
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
        commit_deletes_.push_back(order[k]);
      }
    }
    run = run_end;
  }
  // Edges, in log order with the deletes: a deleted file's edges go (one pass over the edges
  // for a run of deletes), those added after its delete stay.
  auto log_order = [](const CommitRef& a, const CommitRef& b) {
    return a.slice != b.slice ? a.slice < b.slice : a.index < b.index;
  };
  std::sort(commit_edges_.begin(), commit_edges_.end(), log_order);
  std::sort(commit_deletes_.begin(), commit_deletes_.end(), log_order);
  GoneFiles gone;
  size_t next_delete = 0;
  for (const CommitRef& r : commit_edges_) {
    while (next_delete < commit_deletes_.size() && log_order(commit_deletes_[next_delete], r)) {
      gone[commit_deletes_[next_delete++].id] = 0;
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
  while (next_delete < commit_deletes_.size()) gone[commit_deletes_[next_delete++].id] = 0;
  // A file a kPut made new keeps only the edges that name its new generation, wherever they
  // came in the log (an edge names the generation it was captured with).
  for (const auto& [id, generation] : commit_renewed_) gone.try_emplace(id, generation);
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
    std::lock_guard<std::mutex> sl(summary_mu_);
    summary_.Merge(widened);
    summary_.EncodeTo(&summary);
  }
  key = Key("summary");
  k = Val(key);
  val = Val(summary);
  rc = mdb_put(raw, meta_dbi_, &k, &val, 0);
  if (rc != 0) return LmdbStatus(rc, "writing summary");
  uint64_t files_count = 0, edges_count = 0;
  PROPELLER_RETURN_IF_ERROR(SaveCounts(raw, &files_count, &edges_count));
  files.Close();
  rc = txn.Commit();
  if (rc != 0) return LmdbStatus(rc, "mdb_txn_commit");
  applied_lsn_ = lsn;
  files_ = files_count;
  edges_ = edges_count;
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
    PROPELLER_RETURN_IF_ERROR(
        DecodeEdgeKey(Unprefixed(k), &src, &dst).WithContext(AcgName(id_)));
    const auto gone_src = gone.find(src), gone_dst = gone.find(dst);
    bool drop = false;
    if (gone_src != gone.end() || gone_dst != gone.end()) {
      EdgeValue value;
      PROPELLER_RETURN_IF_ERROR(DecodeEdgeValue(View(v), &value).WithContext(AcgName(id_)));
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
  PROPELLER_RETURN_IF_ERROR(s.WithContext(AcgName(id_)));
  if (rc != MDB_NOTFOUND) return LmdbStatus(rc, "scanning edges");
  return Status::OK();
}

Status Acg::UnwrapStored(std::string_view stored, std::string_view* record) const {
  Status s = UnwrapStoredRecord(stored, record);
  if (s.ok()) return s;
  s = s.WithContext(AcgName(id_) + " (" + shard_->dir + "/data.mdb)");
  std::lock_guard<std::mutex> lock(damage_mu_);
  if (damage_.empty()) {
    damage_ = s.message() + " (the next start quarantines it for a rebuild)";
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
  std::lock_guard<std::mutex> lock(damage_mu_);
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
  // path: one entry per path.
  if (!old_rec || !new_rec || old_rec->paths != new_rec->paths) {
    Index* path = indexes_.at(kPathIndex);
    Index* keyword = indexes_.at(kKeywordIndex);
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
  // inode: the K-D point.
  Index* inode = indexes_.at(kInodeIndex);
  if (!new_rec) {
    PROPELLER_RETURN_IF_ERROR(inode->RemovePoint(txn, id));
  } else {
    KdPoint np = AcgSummary::PointOf(*new_rec);
    if (!old_rec || AcgSummary::PointOf(*old_rec) != np) {
      PROPELLER_RETURN_IF_ERROR(inode->InsertPoint(txn, np, id));
    }
  }
  // User indexes: the attribute of the same name.
  for (const IndexSpec& spec : user_specs_) {
    if (!FedByAttribute(spec)) continue;
    Index* index = indexes_.at(spec.name);
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
      PROPELLER_RETURN_IF_ERROR(DecodeEdgeValue(View(v), &value).WithContext(AcgName(id_)));
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

// ---- reads ----

Status Acg::WithReadTxn(const std::function<Status(MDB_txn*)>& fn) {
  Pin pin(this);
  for (int attempt = 0;; ++attempt) {
    PROPELLER_RETURN_IF_ERROR(EnsureOpen());
    std::shared_lock<std::shared_mutex> lock(rw_);
    if (!open_.load()) {  // closed meanwhile (by a large commit, or a failure)
      if (attempt < kMaxOpenAttempts) continue;
      return Status::Unavailable(AcgName(id_) + " keeps closing");
    }
    MDB_txn* raw = nullptr;
    int rc = mdb_txn_begin(env_, nullptr, MDB_RDONLY, &raw);
    if (rc != 0) return LmdbStatus(rc, "mdb_txn_begin");
    TxnGuard txn(raw);
    return fn(raw);
  }
}

Result<FileRecord> Acg::Get(FileId id) {
  FileRecord rec;
  bool found = false;
  PROPELLER_RETURN_IF_ERROR(
      WithReadTxn([&](MDB_txn* txn) { return ReadRecord(txn, id, &rec, &found); }));
  if (!found) return Status::NotFound("no such file in " + AcgName(id_));
  return rec;
}

Status Acg::ListDirectories(std::vector<FileRecord>* dirs) {
  return WithReadTxn([&](MDB_txn* txn) {
    MDB_cursor* cur = nullptr;
    int rc = mdb_cursor_open(txn, dirs_dbi_, &cur);
    if (rc != 0) return LmdbStatus(rc, "mdb_cursor_open");
    MDB_val k, v;
    Status s;
    for (rc = First(cur, &k, &v); rc == 0; rc = Next(cur, &k, &v)) {
      FileRecord rec;
      s = DecodeStored(View(v), &rec);
      if (!s.ok()) break;
      dirs->push_back(std::move(rec));
    }
    mdb_cursor_close(cur);
    if (s.ok() && rc != MDB_NOTFOUND) s = LmdbStatus(rc, "scanning directories");
    return s;
  });
}

Status Acg::ScanFileIds(MDB_txn* txn, std::vector<FileId>* ids) {
  MDB_cursor* cur = nullptr;
  int rc = mdb_cursor_open(txn, files_dbi_, &cur);
  if (rc != 0) return LmdbStatus(rc, "mdb_cursor_open");
  CursorGuard files(cur);
  MDB_val k, v;
  for (rc = First(cur, &k, &v); rc == 0; rc = Next(cur, &k, &v)) {
    FileId id;
    PROPELLER_RETURN_IF_ERROR(DecodeFileIdKey(Unprefixed(k), &id).WithContext(AcgName(id_)));
    ids->push_back(id);
  }
  if (rc != MDB_NOTFOUND) return LmdbStatus(rc, "scanning records");
  return Status::OK();
}

Status Acg::ListFileIds(std::vector<FileId>* ids) {
  return WithReadTxn([&](MDB_txn* txn) { return ScanFileIds(txn, ids); });
}

Status Acg::ListHeldIds(std::vector<FileId>* ids) {
  return WithReadTxn([&](MDB_txn* txn) { return ScanHeldIds(txn, ids); });
}

Status Acg::ListEdges(std::vector<StoredEdge>* edges) {
  return WithReadTxn([&](MDB_txn* txn) {
    return ScanEdges(txn, [&](const StoredEdge& e) { edges->push_back(e); });
  });
}

Status Acg::SyncIndexes() {
  Pin pin(this);
  std::unique_lock<std::shared_mutex> lock(rw_);
  if (!open_.load()) return Status::OK();  // reconciled when it next opens
  std::vector<IndexSpec> catalogue;
  if (ctx_->catalogue) catalogue = ctx_->catalogue();
  if (catalogue == user_specs_) return Status::OK();
  MDB_txn* raw = nullptr;
  int rc = mdb_txn_begin(env_, nullptr, 0, &raw);
  if (rc != 0) return LmdbStatus(rc, "mdb_txn_begin");
  Status s;
  {
    TxnGuard txn(raw);
    s = ReconcileIndexes(raw, catalogue);
    if (s.ok()) {
      rc = txn.Commit();
      if (rc != 0) s = LmdbStatus(rc, "committing the index set");
    }
  }
  if (!s.ok()) {
    // The index objects no longer match LMDB: close; the next use reconciles again.
    CloseLocked();
    return s.WithContext(AcgName(id_));
  }
  RefreshOpenBytes();
  return Status::OK();
}

uint64_t Acg::disk_bytes() const {
  // The ACG shares its shard's file: its part is estimated from what it holds (a record with
  // its path, keyword and directory entries; an edge). Store::disk_bytes() is the exact total.
  constexpr uint64_t kBytesPerFile = 256, kBytesPerEdge = 48;
  return files() * kBytesPerFile + edges() * kBytesPerEdge;
}

uint64_t Acg::index_memory_bytes() {
  std::shared_lock<std::shared_mutex> lock(rw_);
  uint64_t total = inode_ != nullptr ? inode_->MemoryBytes() : 0;
  for (const auto& [name, index] : owned_) total += index->MemoryBytes();
  return total;
}

}  // namespace propeller
