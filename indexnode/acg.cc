#include "indexnode/acg.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "common/logging.h"
#include "schemas/keys.h"
#include "schemas/record_format.h"

namespace propeller {
namespace {

constexpr char kPathIndex[] = "path";
constexpr char kKeywordIndex[] = "keyword";
constexpr char kInodeIndex[] = "inode";
constexpr unsigned kMaxDbs = 128;

MDB_val Val(std::string_view s) {
  return MDB_val{s.size(), const_cast<char*>(s.data())};
}
std::string_view View(const MDB_val& v) {
  return std::string_view(static_cast<const char*>(v.mv_data), v.mv_size);
}

// Aborts a transaction unless it was committed.
class TxnGuard {
 public:
  explicit TxnGuard(MDB_txn* txn) : txn_(txn) {}
  ~TxnGuard() {
    if (txn_ != nullptr) mdb_txn_abort(txn_);
  }
  int Commit() {
    int rc = mdb_txn_commit(txn_);
    txn_ = nullptr;  // commit frees the transaction whatever it returns
    return rc;
  }
  MDB_txn* get() const { return txn_; }

 private:
  MDB_txn* txn_;
};

std::set<std::string> KeywordSet(const FileRecord& rec) {
  std::set<std::string> out;
  for (const std::string& p : rec.paths) {
    for (std::string& t : PathKeywords(p)) out.insert(std::move(t));
  }
  return out;
}

}  // namespace

Acg::Acg(uint64_t id, std::string dir) : id_(id), dir_(std::move(dir)) {}

Acg::~Acg() {
  indexes_.clear();
  if (env_ != nullptr) mdb_env_close(env_);
}

Result<std::unique_ptr<Acg>> Acg::Open(uint64_t id, const std::string& dir, uint64_t map_size,
                                       const std::vector<IndexSpec>& user_indexes) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::IOError("creating ACG directory " + dir + ": " + ec.message());
  std::unique_ptr<Acg> acg(new Acg(id, dir));
  PROPELLER_RETURN_IF_ERROR(acg->OpenEnv(map_size).WithContext("ACG " + std::to_string(id)));
  std::unique_lock<std::shared_mutex> lock(acg->rw_);
  PROPELLER_RETURN_IF_ERROR(
      acg->LoadIndexes(user_indexes).WithContext("ACG " + std::to_string(id)));
  return acg;
}

Status Acg::OpenEnv(uint64_t map_size) {
  int rc = mdb_env_create(&env_);
  if (rc != 0) return LmdbStatus(rc, "mdb_env_create");
  mdb_env_set_maxdbs(env_, kMaxDbs);
  // Use the existing file's size if it is larger (a map that grew before a restart).
  struct stat st;
  std::string data_file = dir_ + "/data.mdb";
  if (::stat(data_file.c_str(), &st) == 0) {
    map_size = std::max<uint64_t>(map_size, static_cast<uint64_t>(st.st_size));
  }
  map_size_ = map_size;
  rc = mdb_env_set_mapsize(env_, map_size);
  if (rc != 0) return LmdbStatus(rc, "mdb_env_set_mapsize");
  // MDB_NOTLS: read transactions are used from thread-pool threads (PITFALLS: reader slots
  // are bound to threads otherwise).
  rc = mdb_env_open(env_, dir_.c_str(), MDB_NOTLS, 0644);
  if (rc != 0) return LmdbStatus(rc, "opening LMDB environment " + dir_);
  int dead = 0;
  mdb_reader_check(env_, &dead);

  MDB_txn* raw = nullptr;
  rc = mdb_txn_begin(env_, nullptr, 0, &raw);
  if (rc != 0) return LmdbStatus(rc, "mdb_txn_begin");
  TxnGuard txn(raw);
  struct {
    const char* name;
    MDB_dbi* dbi;
  } dbs[] = {{"files", &files_dbi_}, {"dirs", &dirs_dbi_}, {"edges", &edges_dbi_},
             {"meta", &meta_dbi_}};
  for (auto& d : dbs) {
    rc = mdb_dbi_open(raw, d.name, MDB_CREATE, d.dbi);
    if (rc != 0) return LmdbStatus(rc, std::string("opening database ") + d.name);
  }
  MDB_val key = Val("version"), val;
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
  }
  key = Val("applied_lsn");
  rc = mdb_get(raw, meta_dbi_, &key, &val);
  if (rc == 0) {
    if (val.mv_size != 8) return Status::Corruption("ACG applied_lsn has a bad size");
    applied_lsn_ = DecodeOrderedU64(View(val));
  } else if (rc != MDB_NOTFOUND) {
    return LmdbStatus(rc, "reading applied_lsn");
  }
  key = Val("summary");
  rc = mdb_get(raw, meta_dbi_, &key, &val);
  if (rc == 0) {
    PROPELLER_RETURN_IF_ERROR(summary_.DecodeFrom(View(val)));
  } else if (rc != MDB_NOTFOUND) {
    return LmdbStatus(rc, "reading summary");
  }
  rc = txn.Commit();
  return rc == 0 ? Status::OK() : LmdbStatus(rc, "committing ACG open");
}

Status Acg::LoadIndexes(const std::vector<IndexSpec>& user_indexes) {
  indexes_.clear();
  user_specs_ = user_indexes;
  MDB_txn* raw = nullptr;
  int rc = mdb_txn_begin(env_, nullptr, 0, &raw);
  if (rc != 0) return LmdbStatus(rc, "mdb_txn_begin");
  TxnGuard txn(raw);

  // Which indexes exist in this ACG already.
  std::map<std::string, IndexType> built;
  {
    MDB_cursor* cur = nullptr;
    rc = mdb_cursor_open(raw, meta_dbi_, &cur);
    if (rc != 0) return LmdbStatus(rc, "mdb_cursor_open");
    std::string prefix = "idx:";
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
                                   {kKeywordIndex, IndexType::kHash},
                                   {kInodeIndex, IndexType::kKdTree}};
  wanted.insert(wanted.end(), user_indexes.begin(), user_indexes.end());
  for (const IndexSpec& spec : wanted) {
    auto it = built.find(spec.name);
    if (it != built.end() && it->second != spec.type) {
      // Same name, new type: the catalogue wins (the index was dropped and re-created).
      PROPELLER_RETURN_IF_ERROR(DropIndexData(raw, it->second, spec.name));
      built.erase(it);
      it = built.end();
    }
    PROPELLER_ASSIGN_OR_RETURN(std::unique_ptr<Index> index, OpenIndex(raw, spec.type, spec.name));
    if (it == built.end()) {
      PROPELLER_RETURN_IF_ERROR(BuildIndex(raw, index.get()));
      std::string key = "idx:" + spec.name;
      uint8_t t = static_cast<uint8_t>(spec.type);
      MDB_val k = Val(key), v{1, &t};
      rc = mdb_put(raw, meta_dbi_, &k, &v, 0);
      if (rc != 0) return LmdbStatus(rc, "recording index " + spec.name);
    } else {
      built.erase(it);
    }
    indexes_[spec.name] = std::move(index);
  }
  // Whatever is left was dropped from the catalogue.
  for (const auto& [name, type] : built) {
    PROPELLER_RETURN_IF_ERROR(DropIndexData(raw, type, name));
    std::string key = "idx:" + name;
    MDB_val k = Val(key);
    rc = mdb_del(raw, meta_dbi_, &k, nullptr);
    if (rc != 0 && rc != MDB_NOTFOUND) return LmdbStatus(rc, "dropping index " + name);
  }
  rc = txn.Commit();
  return rc == 0 ? Status::OK() : LmdbStatus(rc, "committing index set");
}

Status Acg::BuildIndex(MDB_txn* txn, Index* index) {
  MDB_cursor* cur = nullptr;
  int rc = mdb_cursor_open(txn, files_dbi_, &cur);
  if (rc != 0) return LmdbStatus(rc, "mdb_cursor_open");
  MDB_val k, v;
  Status s;
  FileRecord rec;
  const std::string& name = index->name();
  for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0 && s.ok();
       rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    s = DecodeRecord(View(v), &rec);
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

void Acg::AddToCache(uint64_t lsn, const Update& update, int64_t now_mono_ns) {
  std::lock_guard<std::mutex> lock(cache_mu_);
  if (cache_.empty()) oldest_cached_time_ns_ = now_mono_ns;
  cache_.push_back(CachedUpdate{lsn, update});
}

size_t Acg::cached() const {
  std::lock_guard<std::mutex> lock(cache_mu_);
  return cache_.size();
}

uint64_t Acg::oldest_cached_lsn() const {
  std::lock_guard<std::mutex> lock(cache_mu_);
  return cache_.empty() ? 0 : cache_.front().lsn;
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

Status Acg::Commit(uint64_t up_to_lsn) {
  std::unique_lock<std::shared_mutex> lock(rw_);
  std::vector<CachedUpdate> batch;
  {
    std::lock_guard<std::mutex> cl(cache_mu_);
    size_t n = 0;
    while (n < cache_.size() && cache_[n].lsn <= up_to_lsn) ++n;
    if (n == cache_.size()) {
      batch.swap(cache_);
    } else {
      std::vector<CachedUpdate> rest;
      rest.reserve(cache_.size() - n);
      for (size_t i = 0; i < cache_.size(); ++i) {
        (i < n ? batch : rest).push_back(std::move(cache_[i]));
      }
      cache_.swap(rest);
    }
    if (!batch.empty()) ++summary_pending_;
  }
  if (batch.empty()) return Status::OK();
  {
    std::lock_guard<std::mutex> sl(summary_mu_);
    for (const CachedUpdate& cu : batch) {
      if (cu.update.op == UpdateOp::kPut) summary_.Add(cu.update.record);
    }
  }
  {
    std::lock_guard<std::mutex> cl(cache_mu_);
    --summary_pending_;
  }
  Status s = CommitOnce(batch);
  for (int attempt = 0; s.code() == StatusCode::kResourceExhausted && attempt < 8; ++attempt) {
    // MDB_MAP_FULL (PITFALLS: may come from commit too): grow the map with no live
    // transactions — we hold rw_ exclusively, so no search has one open — and retry.
    Status rs = ReloadLocked();
    if (!rs.ok()) {
      s = rs;
      break;
    }
    uint64_t bigger = map_size_ * 2;
    int rc = mdb_env_set_mapsize(env_, bigger);
    if (rc != 0) {
      s = LmdbStatus(rc, "growing the map");
      break;
    }
    Log(LogLevel::kInfo, "ACG %llu: map grown to %llu bytes", static_cast<unsigned long long>(id_),
        static_cast<unsigned long long>(bigger));
    map_size_ = bigger;
    s = CommitOnce(batch);
  }
  if (!s.ok()) {
    // Keep every update: put the batch back in front of what arrived meanwhile, and bring the
    // in-memory structures back in line with LMDB.
    {
      std::lock_guard<std::mutex> cl(cache_mu_);
      batch.insert(batch.end(), std::make_move_iterator(cache_.begin()),
                   std::make_move_iterator(cache_.end()));
      cache_.swap(batch);
    }
    Status rs = ReloadLocked();
    if (!rs.ok()) Log(LogLevel::kError, "ACG %llu: reload failed: %s",
                      static_cast<unsigned long long>(id_), rs.ToString().c_str());
    return s.WithContext("committing ACG " + std::to_string(id_));
  }
  return Status::OK();
}

Status Acg::ReloadLocked() { return LoadIndexes(user_specs_); }

Status Acg::CommitOnce(const std::vector<CachedUpdate>& batch) {
  MDB_txn* raw = nullptr;
  int rc = mdb_txn_begin(env_, nullptr, 0, &raw);
  if (rc != 0) return LmdbStatus(rc, "mdb_txn_begin");
  TxnGuard txn(raw);
  for (const CachedUpdate& cu : batch) {
    PROPELLER_RETURN_IF_ERROR(ApplyOne(raw, cu.update));
  }
  const uint64_t lsn = batch.back().lsn;
  std::string v;
  AppendOrderedU64(lsn, &v);
  MDB_val k = Val("applied_lsn"), val = Val(v);
  rc = mdb_put(raw, meta_dbi_, &k, &val, 0);
  if (rc != 0) return LmdbStatus(rc, "writing applied_lsn");
  std::string summary;
  {
    std::lock_guard<std::mutex> sl(summary_mu_);
    summary_.EncodeTo(&summary);
  }
  k = Val("summary");
  val = Val(summary);
  rc = mdb_put(raw, meta_dbi_, &k, &val, 0);
  if (rc != 0) return LmdbStatus(rc, "writing summary");
  rc = txn.Commit();
  if (rc != 0) return LmdbStatus(rc, "mdb_txn_commit");
  applied_lsn_ = lsn;
  return Status::OK();
}

Status Acg::ReadRecord(MDB_txn* txn, FileId id, FileRecord* rec, bool* found) {
  std::string key;
  AppendFileIdKey(id, &key);
  MDB_val k = Val(key), v;
  int rc = mdb_get(txn, files_dbi_, &k, &v);
  if (rc == MDB_NOTFOUND) {
    *found = false;
    return Status::OK();
  }
  if (rc != 0) return LmdbStatus(rc, "reading a record");
  *found = true;
  return DecodeRecord(View(v), rec);
}

Status Acg::UpdateIndexes(MDB_txn* txn, const FileRecord* old_rec, const FileRecord* new_rec) {
  const FileId id = new_rec ? new_rec->id : old_rec->id;
  // path: one entry per path.
  if (!old_rec || !new_rec || old_rec->paths != new_rec->paths) {
    Index* path = indexes_.at(kPathIndex).get();
    Index* keyword = indexes_.at(kKeywordIndex).get();
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
  Index* inode = indexes_.at(kInodeIndex).get();
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
    Index* index = indexes_.at(spec.name).get();
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
  std::string key;
  AppendFileIdKey(id, &key);
  MDB_val k = Val(key);
  if (new_rec && new_rec->type == FileType::kDirectory) {
    std::string bytes;
    EncodeRecord(*new_rec, &bytes);
    MDB_val v = Val(bytes);
    int rc = mdb_put(txn, dirs_dbi_, &k, &v, 0);
    if (rc != 0) return LmdbStatus(rc, "writing a directory record");
  } else if (old_rec && old_rec->type == FileType::kDirectory) {
    int rc = mdb_del(txn, dirs_dbi_, &k, nullptr);
    if (rc != 0 && rc != MDB_NOTFOUND) return LmdbStatus(rc, "deleting a directory record");
  }
  return Status::OK();
}

Status Acg::ApplyOne(MDB_txn* txn, const Update& u) {
  const FileId id = u.record.id;
  if (u.op == UpdateOp::kAddEdge) {
    std::string key;
    AppendEdgeKey(id, u.edge_dst, &key);
    MDB_val k = Val(key), v;
    uint64_t weight = 0;
    int rc = mdb_get(txn, edges_dbi_, &k, &v);
    if (rc == 0 && v.mv_size == 8) {
      weight = DecodeOrderedU64(View(v));
    } else if (rc != 0 && rc != MDB_NOTFOUND) {
      return LmdbStatus(rc, "reading an edge");
    }
    std::string bytes;
    AppendOrderedU64(weight + u.edge_weight, &bytes);
    v = Val(bytes);
    rc = mdb_put(txn, edges_dbi_, &k, &v, 0);
    return rc == 0 ? Status::OK() : LmdbStatus(rc, "writing an edge");
  }

  FileRecord old_rec;
  bool found = false;
  PROPELLER_RETURN_IF_ERROR(ReadRecord(txn, id, &old_rec, &found));
  std::string key;
  AppendFileIdKey(id, &key);
  MDB_val k = Val(key);

  const FileRecord* new_rec = nullptr;
  FileRecord merged;
  switch (u.op) {
    case UpdateOp::kPut:
      new_rec = &u.record;
      break;
    case UpdateOp::kDelete:
      if (!found) return Status::OK();
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
    std::string bytes;
    EncodeRecord(*new_rec, &bytes);
    MDB_val v = Val(bytes);
    int rc = mdb_put(txn, files_dbi_, &k, &v, 0);
    if (rc != 0) return LmdbStatus(rc, "writing a record");
  } else {
    int rc = mdb_del(txn, files_dbi_, &k, nullptr);
    if (rc != 0 && rc != MDB_NOTFOUND) return LmdbStatus(rc, "deleting a record");
  }
  return Status::OK();
}

Result<FileRecord> Acg::Get(FileId id) {
  std::shared_lock<std::shared_mutex> lock(rw_);
  MDB_txn* raw = nullptr;
  int rc = mdb_txn_begin(env_, nullptr, MDB_RDONLY, &raw);
  if (rc != 0) return LmdbStatus(rc, "mdb_txn_begin");
  TxnGuard txn(raw);
  FileRecord rec;
  bool found = false;
  PROPELLER_RETURN_IF_ERROR(ReadRecord(raw, id, &rec, &found));
  if (!found) return Status::NotFound("no such file in ACG " + std::to_string(id_));
  return rec;
}

Status Acg::ListDirectories(std::vector<FileRecord>* dirs) {
  std::shared_lock<std::shared_mutex> lock(rw_);
  std::map<FileId, FileRecord> by_id;
  MDB_txn* raw = nullptr;
  int rc = mdb_txn_begin(env_, nullptr, MDB_RDONLY, &raw);
  if (rc != 0) return LmdbStatus(rc, "mdb_txn_begin");
  {
    TxnGuard txn(raw);
    MDB_cursor* cur = nullptr;
    rc = mdb_cursor_open(raw, dirs_dbi_, &cur);
    if (rc != 0) return LmdbStatus(rc, "mdb_cursor_open");
    MDB_val k, v;
    Status s;
    for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
      FileRecord rec;
      s = DecodeRecord(View(v), &rec);
      if (!s.ok()) break;
      FileId id = rec.id;
      by_id[id] = std::move(rec);
    }
    mdb_cursor_close(cur);
    PROPELLER_RETURN_IF_ERROR(s);
  }
  {
    std::lock_guard<std::mutex> cl(cache_mu_);
    for (const CachedUpdate& cu : cache_) {
      const Update& u = cu.update;
      if (u.op == UpdateOp::kPut) {
        if (u.record.type == FileType::kDirectory) {
          by_id[u.record.id] = u.record;
        } else {
          by_id.erase(u.record.id);
        }
      } else if (u.op == UpdateOp::kDelete) {
        by_id.erase(u.record.id);
      }
    }
  }
  for (auto& [id, rec] : by_id) dirs->push_back(std::move(rec));
  return Status::OK();
}

Status Acg::ListEdges(std::vector<std::tuple<FileId, FileId, uint64_t>>* edges) {
  std::shared_lock<std::shared_mutex> lock(rw_);
  MDB_txn* raw = nullptr;
  int rc = mdb_txn_begin(env_, nullptr, MDB_RDONLY, &raw);
  if (rc != 0) return LmdbStatus(rc, "mdb_txn_begin");
  TxnGuard txn(raw);
  MDB_cursor* cur = nullptr;
  rc = mdb_cursor_open(raw, edges_dbi_, &cur);
  if (rc != 0) return LmdbStatus(rc, "mdb_cursor_open");
  MDB_val k, v;
  Status s;
  for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
       rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    FileId src, dst;
    s = DecodeEdgeKey(View(k), &src, &dst);
    if (!s.ok() || v.mv_size != 8) break;
    edges->emplace_back(src, dst, DecodeOrderedU64(View(v)));
  }
  mdb_cursor_close(cur);
  PROPELLER_RETURN_IF_ERROR(s);
  if (rc != 0 && rc != MDB_NOTFOUND) return Status::Corruption("malformed edge entry");
  return Status::OK();
}

Status Acg::CreateIndex(const IndexSpec& spec) {
  std::unique_lock<std::shared_mutex> lock(rw_);
  std::vector<IndexSpec> specs = user_specs_;
  specs.push_back(spec);
  Status s = LoadIndexes(specs);
  if (!s.ok()) {
    Status rs = LoadIndexes(user_specs_);
    (void)rs;
  }
  return s;
}

Status Acg::DropIndex(const std::string& name) {
  std::unique_lock<std::shared_mutex> lock(rw_);
  std::vector<IndexSpec> specs;
  for (const IndexSpec& s : user_specs_) {
    if (s.name != name) specs.push_back(s);
  }
  return LoadIndexes(specs);
}

uint64_t Acg::files() {
  MDB_txn* raw = nullptr;
  if (mdb_txn_begin(env_, nullptr, MDB_RDONLY, &raw) != 0) return 0;
  MDB_stat st{};
  mdb_stat(raw, files_dbi_, &st);
  mdb_txn_abort(raw);
  return st.ms_entries;
}

uint64_t Acg::edges() {
  MDB_txn* raw = nullptr;
  if (mdb_txn_begin(env_, nullptr, MDB_RDONLY, &raw) != 0) return 0;
  MDB_stat st{};
  mdb_stat(raw, edges_dbi_, &st);
  mdb_txn_abort(raw);
  return st.ms_entries;
}

uint64_t Acg::disk_bytes() {
  uint64_t total = 0;
  for (const char* f : {"/data.mdb", "/lock.mdb"}) {
    struct stat st;
    // Blocks actually allocated: the map file is sparse.
    if (::stat((dir_ + f).c_str(), &st) == 0) total += static_cast<uint64_t>(st.st_blocks) * 512;
  }
  return total;
}

uint64_t Acg::index_memory_bytes() {
  std::shared_lock<std::shared_mutex> lock(rw_);
  uint64_t total = 0;
  for (const auto& [name, index] : indexes_) total += index->MemoryBytes();
  return total;
}

}  // namespace propeller
