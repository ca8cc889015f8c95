#include "indexnode/acg.h"

#include <sys/mman.h>
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
#include "indexnode/index/btree_index.h"
#include "indexnode/index/kdtree_index.h"
#include "schemas/keys.h"
#include "schemas/record_format.h"

namespace propeller {
namespace {

using acg_internal::AcgName;
using acg_internal::FedByAttribute;
using acg_internal::KeywordSet;
using acg_internal::kInodeIndex;
using acg_internal::kKeywordIndex;
using acg_internal::kPathIndex;

// In the byte of meta "idx:<name>" (ReconcileIndexes): the B-tree holds posting chunks.
constexpr uint8_t kPostingsFormat = 0x80;

bool HasRecord(UpdateOp op) {
  return op == UpdateOp::kPut || op == UpdateOp::kSetAttrs || op == UpdateOp::kRemoveAttrs;
}


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
  if (busy_.load() && ctx_->busy_acgs != nullptr) ctx_->busy_acgs->fetch_sub(1);
  indexes_.Clear();
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
  {
    WriterLock lock(&acg->rw_);
    PROPELLER_RETURN_IF_ERROR(acg->OpenLocked(/*first=*/true).WithContext(AcgName(id)));
  }
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
      MutexLock rl(&routes_mu_);
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
      cleanup_pending_.store(rc == 0, std::memory_order_release);
    }
    moved.Close();
    key_bytes = Key("summary");
    key = Val(key_bytes);
    rc = mdb_get(raw, meta_dbi_, &key, &val);
    if (rc == 0) {
      MutexLock sl(&summary_mu_);
      PROPELLER_RETURN_IF_ERROR(summary_.DecodeFrom(View(val)));
      common_dir_bits_.store(summary_.common_dir_bits(), std::memory_order_relaxed);
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
  indexes_.Clear();
  owned_.clear();
  if (inode_ != nullptr) indexes_.Set(kInodeIndex, inode_.get());
  open_.store(false, std::memory_order_release);
}

bool Acg::TryUnload() {
  if (!rw_.TryLock()) return false;
  bool unloaded = false;
  if (pins_.load() == 0 && open_.load()) {
    for (auto& [name, index] : owned_) {
      if (index->type() == IndexType::kHash && index->loaded()) {
        index->Unload();
        unloaded = true;
      }
    }
    RefreshOpenBytes();
  }
  rw_.Unlock();
  return unloaded;
}

void Acg::CloseClean() {
  WriterLock lock(&rw_);
  if (cached() > 0 || retired_.load()) return;
  if (open_.load()) CloseLocked();
}

Status Acg::EnsureOpen() {
  if (open_.load(std::memory_order_acquire)) return Status::OK();
  {
    WriterLock lock(&rw_);
    if (open_.load(std::memory_order_relaxed)) return Status::OK();
    if (Status st = OpenLocked(/*first=*/false); !st.ok()) {
      return st.WithContext(AcgName(id_));
    }
  }
  if (ctx_->on_open) ctx_->on_open(this);
  return Status::OK();
}

Status Acg::EnsureLoaded(const std::vector<std::string>& names) {
  {
    ReaderLock lock(&rw_);
    bool need = false;
    for (const std::string& n : names) {
      Index* index = indexes_.Find(n);
      if (index != nullptr && !index->loaded()) need = true;
    }
    if (!need) return Status::OK();
  }
  bool tables = false;
  {
    WriterLock lock(&rw_);
    if (!open_.load()) return Status::OK();  // closed meanwhile: the caller reopens, retries
    MDB_txn* raw = nullptr;
    int rc = mdb_txn_begin(env_, nullptr, MDB_RDONLY, &raw);
    if (rc != 0) return LmdbStatus(rc, "mdb_txn_begin");
    TxnGuard txn(raw);
    for (const std::string& n : names) {
      Index* index = indexes_.Find(n);
      if (index == nullptr || index->loaded()) continue;
      if (Status st = index->Load(raw); !st.ok()) {
        return st.WithContext(AcgName(id_));
      }
      tables |= index->type() == IndexType::kHash;
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
  indexes_.Clear();
  owned_.clear();
  // Which indexes exist in this ACG already: meta "idx:<name>" holds a byte, the IndexType
  // ‖ kPostingsFormat for a B-tree of posting chunks (index/btree_index.h).
  std::map<std::string, uint8_t> built;
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
            *static_cast<const uint8_t*>(v.mv_data);
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
    // The keyword index is a B-tree of posting chunks: its values are shared by many files.
    const bool postings = spec.name == kKeywordIndex;
    const uint8_t format = static_cast<uint8_t>(spec.type) | (postings ? kPostingsFormat : 0);
    auto it = built.find(spec.name);
    if (it != built.end() && it->second != format) {
      // Same name, new type (the index was dropped and re-created: the catalogue wins), or
      // an older format of a built-in index (the keyword B-tree before layout 5): rebuilt.
      PROPELLER_RETURN_IF_ERROR(DropIndexData(
          raw, static_cast<IndexType>(it->second & ~kPostingsFormat), spec.name, prefix_));
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
      PROPELLER_ASSIGN_OR_RETURN(
          std::unique_ptr<Index> opened,
          postings ? OpenBTreeIndex(raw, spec.name, prefix_, /*postings=*/true)
                   : OpenIndex(raw, spec.type, spec.name, /*load=*/false, prefix_));
      index = opened.get();
      owned_[spec.name] = std::move(opened);
    }
    if (fresh) {
      PROPELLER_RETURN_IF_ERROR(BuildIndex(raw, index));
      std::string key = Key("idx:" + spec.name);
      uint8_t t = format;
      MDB_val k = Val(key), v{1, &t};
      int rc = mdb_put(raw, meta_dbi_, &k, &v, 0);
      if (rc != 0) return LmdbStatus(rc, "recording index " + spec.name);
    } else {
      built.erase(it);
    }
    indexes_.Set(spec.name, index);
  }
  // Whatever is left was dropped from the catalogue.
  for (const auto& [name, format] : built) {
    PROPELLER_RETURN_IF_ERROR(DropIndexData(
        raw, static_cast<IndexType>(format & ~kPostingsFormat), name, prefix_));
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
    if (name == kPathIndex) {
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

// Asks the kernel to read the pages of the ACG's records at once. The shards are mapped with
// MDB_NORDAHEAD (searches read scattered records), so a scan of an ACG's records after a
// restart read them one 4 KiB page per fault; after a bulk load or a compaction the pages of
// one ACG's key range are mostly adjacent in the file, and one request for the span between
// its first and last record reads them in large requests. Only a hint: nothing happens when
// the span is much larger than the records could fill (pages scattered by updates).
void Acg::WillNeedRecords(MDB_cursor* cur) const {
  MDB_val k, v;
  if (First(cur, &k, &v) != 0) return;
  const char* lo = static_cast<const char*>(v.mv_data);
  const char* hi = lo;
  int rc;
  if (id_ < kMaxStoredAcgId) {
    const std::string next = AcgKeyPrefix(id_ + 1);
    k = Val(next);
    rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
    rc = rc == 0 ? mdb_cursor_get(cur, &k, &v, MDB_PREV)
                 : mdb_cursor_get(cur, &k, &v, MDB_LAST);
  } else {
    rc = mdb_cursor_get(cur, &k, &v, MDB_LAST);
  }
  if (rc != 0 || !View(k).starts_with(prefix_)) return;
  lo = std::min(lo, static_cast<const char*>(v.mv_data));
  hi = std::max(hi, static_cast<const char*>(v.mv_data) + v.mv_size);
  const uint64_t span = static_cast<uint64_t>(hi - lo);
  const uint64_t files = files_.load() + 1;
  // A record takes ~300 bytes: a span above ~1 KiB per file is not one run of pages.
  if (span > std::max<uint64_t>(files * 1024, uint64_t{256} << 10)) return;
  static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t start = reinterpret_cast<uintptr_t>(lo) & ~(page - 1);
  ::madvise(reinterpret_cast<void*>(start), reinterpret_cast<uintptr_t>(hi) - start,
            MADV_WILLNEED);
}

Status Acg::ScanPoints(MDB_txn* txn, const KdReserve& reserve, const KdAddPoint& add) {
  reserve(files_.load() + std::max<int64_t>(delta_files_, 0));
  MDB_cursor* cur = nullptr;
  int rc = mdb_cursor_open(txn, files_dbi_, &cur);
  if (rc != 0) return LmdbStatus(rc, "mdb_cursor_open");
  WillNeedRecords(cur);
  MDB_val k, v;
  Status s;
  FileRecord rec;
  // Each point's tags: the keywords of the record's paths, read where they lie. With them,
  // the summary's keyword-week filter of every record (AcgSummary::CompleteKeywordWeeks), which
  // a summary written before that filter existed lacks: this reads every path anyway.
  uint64_t tags = 0;
  std::vector<uint64_t> token_hashes;
  const PathVisitor on_path = [&](std::string_view p) {
    ForEachPathToken(p, [&](std::string_view t) {
      const uint64_t h = AcgSummary::TokenHash(t);
      tags |= AcgSummary::TokenBits(h);
      token_hashes.push_back(h);
    });
  };
  AcgSummary::WeekBloom weeks{};
  for (rc = First(cur, &k, &v); rc == 0; rc = Next(cur, &k, &v)) {
    std::string_view bytes;
    s = UnwrapStored(View(v), &bytes);
    tags = 0;
    token_hashes.clear();
    if (s.ok()) s = DecodeRecordHead(bytes, &rec, on_path);
    if (s.ok()) s = add(rec.id, AcgSummary::PointOf(rec), tags);
    if (!s.ok()) break;
    const int64_t week = AcgSummary::WeekOf(ClampToInt64(rec.mtime));
    for (uint64_t h : token_hashes) AcgSummary::WeekBloomAdd(AcgSummary::WeekKey(h, week), &weeks);
  }
  mdb_cursor_close(cur);
  if (!s.ok()) return s.WithContext(AcgName(id_) + ": loading the inode K-D tree");
  if (rc != MDB_NOTFOUND) return LmdbStatus(rc, "scanning records");
  // Every record this transaction sees is in `weeks`; one committed since is in the summary
  // already (each commit merges its records' keys, complete or not).
  MutexLock sl(&summary_mu_);
  summary_.CompleteKeywordWeeks(weeks);
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
  MutexLock lock(&cache_mu_);
  if (cache_.empty()) oldest_cached_time_ns_ = now_mono_ns;
  if (track_ids_) CountCachedIds(slice, +1);
  cache_.push_back(std::move(slice));
  SetBusyLocked(true);
  cached_ += end - begin;
  cache_bytes_.store(cache_bytes_.load(std::memory_order_relaxed) + bytes,
                     std::memory_order_relaxed);
  return cached_;
}

void Acg::SetBusyLocked(bool busy) {
  if (busy_.load(std::memory_order_relaxed) == busy) return;
  busy_.store(busy, std::memory_order_release);
  if (ctx_->busy_acgs != nullptr) ctx_->busy_acgs->fetch_add(busy ? 1 : -1);
}

size_t Acg::cached() const {
  MutexLock lock(&cache_mu_);
  return cached_;
}

uint64_t Acg::oldest_cached_lsn() const {
  MutexLock lock(&cache_mu_);
  // Updates a commit has taken out of the cache still count until it succeeded: were the log
  // cut past them meanwhile and the commit failed, they would exist in memory only.
  if (committing_lsn_ != 0) return committing_lsn_;
  return cache_.empty() ? 0 : cache_.front().batch->lsn;
}

int64_t Acg::oldest_cached_time_ns() const {
  MutexLock lock(&cache_mu_);
  return cache_.empty() ? 0 : oldest_cached_time_ns_;
}

bool Acg::EveryPathHasKeyword(std::string_view token) const {
  // Most ACGs lack it: answered by the filter alone, without the lock (a search asks this of
  // every ACG it plans a keyword for).
  const uint64_t need = AcgSummary::KeywordBits(token);
  if ((common_dir_bits_.load(std::memory_order_relaxed) & need) != need) return false;
  MutexLock lock(&summary_mu_);
  return summary_.EveryPathHasKeyword(token);
}

bool Acg::MayMatch(const QueryNode& node) const {
  // Updates cached or being committed: the summary may not cover them yet. (An atomic, not
  // cache_mu_: a search asks every ACG, 100,000 of them at 100 M files.)
  if (busy_.load(std::memory_order_acquire)) return true;
  MutexLock lock(&summary_mu_);
  return summary_.MayMatch(node);
}

// ---- reads ----

Status Acg::WithReadTxn(const std::function<Status(MDB_txn*)>& fn) {
  Pin pin(this);
  for (int attempt = 0;; ++attempt) {
    PROPELLER_RETURN_IF_ERROR(EnsureOpen());
    ReaderLock lock(&rw_);
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

void Acg::CountCachedIds(const Slice& slice, int delta) {
  const StagedBatch& b = *slice.batch;
  for (uint32_t k = slice.begin; k < slice.end; ++k) {
    const CachedUpdate& e = b.entries[k];
    if (e.op == UpdateOp::kAddEdge) continue;
    if (delta > 0) {
      ++cached_ids_[e.id];
    } else if (auto it = cached_ids_.find(e.id); it != cached_ids_.end() && --it->second == 0) {
      cached_ids_.erase(it);
    }
  }
}

void Acg::TrackCachedIds(bool on) {
  MutexLock cl(&cache_mu_);
  if (on == track_ids_) return;
  track_ids_ = on;
  std::unordered_map<FileId, uint32_t, FileIdHash>().swap(cached_ids_);
  if (on) {
    for (const Slice& slice : cache_) CountCachedIds(slice, +1);
  }
}

Result<std::optional<FileRecord>> Acg::GetCurrent(FileId id) {
  std::optional<FileRecord> current;
  PROPELLER_RETURN_IF_ERROR(WithReadTxn([&](MDB_txn* txn) -> Status {
    FileRecord rec;
    bool found = false;
    PROPELLER_RETURN_IF_ERROR(ReadRecord(txn, id, &rec, &found));
    if (found) current = std::move(rec);
    MutexLock cl(&cache_mu_);
    // The file's cached entries, newest first: with the counts, the scan stops at its oldest
    // one (a file changed lately is near the end); without them it reads the whole cache.
    uint32_t want = UINT32_MAX;
    if (track_ids_) {
      auto it = cached_ids_.find(id);
      if (it == cached_ids_.end()) return Status::OK();
      want = it->second;
    }
    std::vector<const CachedUpdate*> mine;
    std::vector<const StagedBatch*> batch_of;
    for (auto s = cache_.rbegin(); s != cache_.rend() && mine.size() < want; ++s) {
      const StagedBatch& b = *s->batch;
      for (uint32_t k = s->end; k > s->begin && mine.size() < want; --k) {
        const CachedUpdate& e = b.entries[k - 1];
        if (e.id != id || e.op == UpdateOp::kAddEdge) continue;
        mine.push_back(&e);
        batch_of.push_back(&b);
      }
    }
    for (size_t i = mine.size(); i-- > 0;) {
      const CachedUpdate& e = *mine[i];
      FileRecord u;
      if (e.size > 0) {
        PROPELLER_RETURN_IF_ERROR(DecodeRecord(
            std::string_view(batch_of[i]->data).substr(e.offset, e.size), &u));
      }
      u.id = e.id;
      ApplyToState(e.op, u, &current);
    }
    return Status::OK();
  }));
  return current;
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
    if (Status st = DecodeFileIdKey(Unprefixed(k), &id); !st.ok()) {
      return st.WithContext(AcgName(id_));
    }
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
  WriterLock lock(&rw_);
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
  ReaderLock lock(&rw_);
  uint64_t total = inode_ != nullptr ? inode_->MemoryBytes() : 0;
  for (const auto& [name, index] : owned_) total += index->MemoryBytes();
  return total;
}

}  // namespace propeller
