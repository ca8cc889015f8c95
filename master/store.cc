#include "master/store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <filesystem>
#include <limits>

#include "common/lmdb_check.h"
#include "common/lmdb_util.h"
#include "common/logging.h"
#include "common/secure_dir.h"
#include "schemas/keys.h"

namespace propeller::master {
namespace {

constexpr unsigned kMaxDbs = 8;
constexpr uint8_t kRecordVersion = 1;
constexpr char kAppKeyTag = 0x01;  // LMDB refuses empty keys; the app "" is legal
constexpr size_t kMaxIndexNameBytes = 255;
// Doubling from 1 MiB reaches 2^50 bytes in 30 steps; more than that is a bug.
constexpr int kMaxGrowths = 30;

void AppendU32(uint32_t v, std::string* out) {
  for (int shift = 24; shift >= 0; shift -= 8) out->push_back(static_cast<char>(v >> shift));
}
uint32_t DecodeU32(std::string_view four) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = (v << 8) | static_cast<uint8_t>(four[i]);
  return v;
}
std::string U64Key(uint64_t v) {
  std::string s;
  AppendOrderedU64(v, &s);
  return s;
}
// files value: acg ‖ generation (format 2). An 8-byte value (format 1) has generation 0;
// bytes beyond 16 are ignored (values only grow at the end).
std::string EncodeFileValue(const FileMapping& m) {
  std::string s;
  AppendOrderedU64(m.acg, &s);
  AppendOrderedU64(m.generation, &s);
  return s;
}
Status DecodeFileValue(std::string_view v, FileMapping* m) {
  if (v.size() != 8 && v.size() < 16) return Status::Corruption("file map entry has a bad size");
  m->acg = DecodeOrderedU64(v.substr(0, 8));
  m->generation = v.size() >= 16 ? DecodeOrderedU64(v.substr(8, 8)) : 0;
  return Status::OK();
}
std::string U32Key(uint32_t v) {
  std::string s;
  AppendU32(v, &s);
  return s;
}
std::string AppKey(std::string_view app) {
  std::string s(1, kAppKeyTag);
  s.append(app);
  return s;
}

std::string EncodeAcg(const AcgRecord& rec) {
  std::string s;
  s.push_back(static_cast<char>(kRecordVersion));
  s.push_back(static_cast<char>(rec.state));
  AppendU32(rec.node_id, &s);
  AppendOrderedU64(rec.files, &s);
  s.append(rec.app);
  return s;
}
Status DecodeAcg(std::string_view v, AcgRecord* rec) {
  if (v.size() < 14) return Status::Corruption("ACG record is too short");
  if (static_cast<uint8_t>(v[0]) != kRecordVersion) {
    return Status::Corruption("ACG record version " + std::to_string(static_cast<uint8_t>(v[0])) +
                              " is unknown");
  }
  const uint8_t state = static_cast<uint8_t>(v[1]);
  if (state != static_cast<uint8_t>(AcgState::kActive) &&
      state != static_cast<uint8_t>(AcgState::kRetired)) {
    return Status::Corruption("ACG record has an unknown state");
  }
  rec->state = static_cast<AcgState>(state);
  rec->node_id = DecodeU32(v.substr(2, 4));
  rec->files = DecodeOrderedU64(v.substr(6, 8));
  rec->app.assign(v.substr(14));
  return Status::OK();
}

std::string EncodeNode(std::string_view endpoint) {
  std::string s(1, static_cast<char>(kRecordVersion));
  s.append(endpoint);
  return s;
}
Status DecodeNode(std::string_view v, std::string* endpoint) {
  if (v.empty() || static_cast<uint8_t>(v[0]) != kRecordVersion) {
    return Status::Corruption("node record has an unknown version");
  }
  endpoint->assign(v.substr(1));
  return Status::OK();
}

// Calls fn(key, value) for every entry of `dbi`, in key order.
Status Scan(MDB_txn* txn, MDB_dbi dbi, std::string_view what,
            const std::function<Status(std::string_view, std::string_view)>& fn) {
  MDB_cursor* cur = nullptr;
  int rc = mdb_cursor_open(txn, dbi, &cur);
  if (rc != 0) return LmdbStatus(rc, "mdb_cursor_open");
  MDB_val k, v;
  Status s;
  for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0 && s.ok();
       rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    s = fn(View(k), View(v));
  }
  mdb_cursor_close(cur);
  if (!s.ok()) return s.WithContext(what);
  if (rc != MDB_NOTFOUND) return LmdbStatus(rc, std::string("scanning ") + std::string(what));
  return Status::OK();
}

Status ReadMetaU64(MDB_txn* txn, MDB_dbi dbi, std::string_view key, uint64_t* out) {
  MDB_val k = Val(key), v;
  int rc = mdb_get(txn, dbi, &k, &v);
  if (rc == MDB_NOTFOUND) return Status::OK();  // keep the default
  if (rc != 0) return LmdbStatus(rc, "reading meta " + std::string(key));
  if (v.mv_size != 8) return Status::Corruption("meta " + std::string(key) + " has a bad size");
  *out = DecodeOrderedU64(View(v));
  return Status::OK();
}

}  // namespace

// ---- MasterStore ------------------------------------------------------------------------

MasterStore::MasterStore(const MasterStoreOptions& options) : options_(options) {}

MasterStore::~MasterStore() {
  if (syncer_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(syncer_mu_);
      syncer_stop_ = true;
    }
    syncer_cv_.notify_all();
    syncer_.join();
  }
  if (env_ != nullptr) {
    const bool synced = options_.sync || mdb_env_sync(env_, 1) == 0;  // a clean stop loses nothing
    mdb_env_close(env_);
    // Known good as it is now: the next open may skip reading it all (OpenEnv).
    if (synced) {
      (void)WriteLmdbFileMark(options_.dir + "/data.mdb", options_.dir + "/CLEAN");
    }
  }
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the flock
}

Result<std::unique_ptr<MasterStore>> MasterStore::Open(const MasterStoreOptions& options) {
  if (options.dir.empty()) return Status::InvalidArgument("master data directory is empty");
  PROPELLER_RETURN_IF_ERROR(MakeDirs(options.dir, 0700).WithContext("master data directory"));
  std::unique_ptr<MasterStore> store(new MasterStore(options));
  // flock conflicts between open file descriptions, so this also refuses a second
  // MasterStore on the same directory in this process (docs/pitfalls.md LMDB-3: open an LMDB
  // environment once per process), and O_CLOEXEC keeps exec'd children from inheriting it.
  const std::string lock_path = options.dir + "/LOCK";
  store->lock_fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (store->lock_fd_ < 0) return Status::IOError("opening " + lock_path, errno);
  if (::flock(store->lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) {
      return Status::IOError("master data directory " + options.dir +
                             " is in use by another master");
    }
    return Status::IOError("locking " + lock_path, errno);
  }
  PROPELLER_RETURN_IF_ERROR(store->OpenEnv().WithContext(options.dir));
  PROPELLER_RETURN_IF_ERROR(store->LoadMirror().WithContext(options.dir));
  if (!options.sync && options.sync_interval_ms > 0) {
    MasterStore* raw = store.get();
    raw->syncer_ = std::thread([raw] {
      std::unique_lock<std::mutex> lock(raw->syncer_mu_);
      uint64_t synced = 0;
      while (!raw->syncer_stop_) {
        raw->syncer_cv_.wait_for(lock, std::chrono::milliseconds(raw->options_.sync_interval_ms));
        if (raw->syncer_stop_) break;
        const uint64_t commits = raw->mirror_version();  // one step per commit
        if (commits == synced) continue;  // nothing new: no fsync (it stalls writers)
        synced = commits;
        lock.unlock();
        int rc = mdb_env_sync(raw->env_, 1);
        if (rc != 0) Log(LogLevel::kError, "master: syncing the store: %s", mdb_strerror(rc));
        lock.lock();
      }
    });
  }
  return store;
}

Status MasterStore::OpenEnv() {
  int rc = mdb_env_create(&env_);
  if (rc != 0) return LmdbStatus(rc, "mdb_env_create");
  rc = mdb_env_set_maxdbs(env_, kMaxDbs);
  if (rc != 0) return LmdbStatus(rc, "mdb_env_set_maxdbs");
  // A map that grew before a restart is at least as large as the data file.
  uint64_t map_bytes = std::max<uint64_t>(options_.initial_map_bytes, 1u << 20);
  struct stat st;
  const std::string data_file = options_.dir + "/data.mdb";
  if (::stat(data_file.c_str(), &st) == 0) {
    map_bytes = std::max<uint64_t>(map_bytes, static_cast<uint64_t>(st.st_size));
  }
  rc = mdb_env_set_mapsize(env_, map_bytes);
  if (rc != 0) return LmdbStatus(rc, "mdb_env_set_mapsize");
  map_bytes_ = map_bytes;
  // LMDB trusts its file: a truncated or damaged one would crash the master at the first
  // read (the mirror reads everything below). Read it first (common/lmdb_check.h), all of it
  // unless it is as the last clean stop left it.
  if (::stat(data_file.c_str(), &st) == 0) {
    const bool clean = LmdbFileMatchesMark(data_file, options_.dir + "/CLEAN");
    Status check = CheckLmdbFile(data_file, /*deep=*/!clean);
    if (!check.ok()) {
      return check.WithContext("the master's map of files to partitions cannot be used (move "
                               "the directory aside and restore it from a backup; docs/"
                               "faults.md)");
    }
  }
  // MDB_NOTLS: read transactions run on rpc worker threads and are not tied to them.
  unsigned flags = MDB_NOTLS;
  if (!options_.sync) flags |= MDB_NOSYNC;
  rc = mdb_env_open(env_, options_.dir.c_str(), flags, 0600);
  if (rc != 0) return LmdbStatus(rc, "opening LMDB environment");
  int dead = 0;
  mdb_reader_check(env_, &dead);  // slots of crashed processes (docs/pitfalls.md LMDB-5)

  MDB_txn* raw = nullptr;
  rc = mdb_txn_begin(env_, nullptr, 0, &raw);
  if (rc != 0) return LmdbStatus(rc, "mdb_txn_begin");
  TxnGuard guard(raw);
  struct {
    const char* name;
    MDB_dbi* dbi;
  } dbs[] = {{"files", &files_dbi_},     {"acgs", &acgs_dbi_},       {"apps", &apps_dbi_},
             {"nodes", &nodes_dbi_},     {"indexes", &indexes_dbi_}, {"volumes", &volumes_dbi_},
             {"meta", &meta_dbi_}};
  for (auto& d : dbs) {
    rc = mdb_dbi_open(raw, d.name, MDB_CREATE, d.dbi);
    if (rc != 0) return LmdbStatus(rc, std::string("opening database ") + d.name);
  }
  uint64_t version = 0;
  PROPELLER_RETURN_IF_ERROR(ReadMetaU64(raw, meta_dbi_, "format_version", &version));
  if (version < kMasterFormatVersion) {
    // New store, or a format-1 store: its 8-byte file values read as generation 0.
    std::string v = U64Key(kMasterFormatVersion);
    MDB_val k = Val("format_version"), val = Val(v);
    rc = mdb_put(raw, meta_dbi_, &k, &val, 0);
    if (rc != 0) return LmdbStatus(rc, "writing the format version");
  } else if (version > kMasterFormatVersion) {
    return Status::Corruption("master format version " + std::to_string(version) +
                              " is newer than this program's (" +
                              std::to_string(kMasterFormatVersion) + ")");
  }
  rc = guard.Commit();
  return rc == 0 ? Status::OK() : LmdbStatus(rc, "committing the store's creation");
}

Status MasterStore::ReadAll(MDB_txn* txn, Mirror* m, std::map<FileId, uint64_t>* files) const {
  PROPELLER_RETURN_IF_ERROR(ReadMetaU64(txn, meta_dbi_, "next_acg", &m->next_acg));
  PROPELLER_RETURN_IF_ERROR(ReadMetaU64(txn, meta_dbi_, "next_node", &m->next_node));
  PROPELLER_RETURN_IF_ERROR(ReadMetaU64(txn, meta_dbi_, "next_volume", &m->next_volume));
  uint64_t acg_files = 0;
  PROPELLER_RETURN_IF_ERROR(Scan(txn, acgs_dbi_, "acgs", [&](std::string_view k,
                                                             std::string_view v) {
    if (k.size() != 8) return Status::Corruption("bad key size");
    AcgRecord rec;
    PROPELLER_RETURN_IF_ERROR(DecodeAcg(v, &rec));
    const uint64_t id = DecodeOrderedU64(k);
    if (id == 0 || id >= m->next_acg) return Status::Corruption("ACG id beyond next_acg");
    acg_files += rec.files;
    m->acgs.emplace(id, std::move(rec));
    return Status::OK();
  }));
  PROPELLER_RETURN_IF_ERROR(Scan(txn, apps_dbi_, "apps", [&](std::string_view k,
                                                             std::string_view v) {
    if (k.empty() || k[0] != kAppKeyTag || v.size() != 8) return Status::Corruption("bad entry");
    const uint64_t acg = DecodeOrderedU64(v);
    if (m->acgs.count(acg) == 0) return Status::Corruption("app names an unknown ACG");
    m->apps.emplace(std::string(k.substr(1)), acg);
    return Status::OK();
  }));
  PROPELLER_RETURN_IF_ERROR(Scan(txn, nodes_dbi_, "nodes", [&](std::string_view k,
                                                               std::string_view v) {
    if (k.size() != 4) return Status::Corruption("bad key size");
    std::string endpoint;
    PROPELLER_RETURN_IF_ERROR(DecodeNode(v, &endpoint));
    const uint32_t id = DecodeU32(k);
    if (id == 0 || id >= m->next_node) return Status::Corruption("node id beyond next_node");
    m->nodes.emplace(id, std::move(endpoint));
    return Status::OK();
  }));
  PROPELLER_RETURN_IF_ERROR(Scan(txn, indexes_dbi_, "indexes", [&](std::string_view k,
                                                                   std::string_view v) {
    if (v.size() != 1) return Status::Corruption("bad value size");
    const uint8_t t = static_cast<uint8_t>(v[0]);
    if (t < static_cast<uint8_t>(IndexType::kBTree) ||
        t > static_cast<uint8_t>(IndexType::kKdTree)) {
      return Status::Corruption("unknown index type");
    }
    m->indexes.emplace(std::string(k), static_cast<IndexType>(t));
    return Status::OK();
  }));
  PROPELLER_RETURN_IF_ERROR(Scan(txn, volumes_dbi_, "volumes", [&](std::string_view k,
                                                                   std::string_view v) {
    if (k.size() != 4) return Status::Corruption("bad key size");
    const uint32_t id = DecodeU32(k);
    if (id == 0 || id >= m->next_volume) return Status::Corruption("volume id beyond next_volume");
    if (!m->volume_by_root.emplace(std::string(v), id).second) {
      return Status::Corruption("two volumes share a root");
    }
    m->volumes.emplace(id, std::string(v));
    return Status::OK();
  }));
  for (const auto& [node, unused] : m->nodes) {
    (void)unused;
    if (node == 0) return Status::Corruption("node id 0");
  }
  if (files != nullptr) {
    std::map<uint64_t, uint64_t> counted;
    PROPELLER_RETURN_IF_ERROR(Scan(txn, files_dbi_, "files", [&](std::string_view k,
                                                                 std::string_view v) {
      FileId id;
      PROPELLER_RETURN_IF_ERROR(DecodeFileIdKey(k, &id));
      FileMapping fm;
      PROPELLER_RETURN_IF_ERROR(DecodeFileValue(v, &fm));
      const uint64_t acg = fm.acg;
      if (m->acgs.count(acg) == 0) return Status::Corruption("file mapped to an unknown ACG");
      ++counted[acg];
      files->emplace_hint(files->end(), id, acg);
      return Status::OK();
    }));
    for (const auto& [acg, rec] : m->acgs) {
      auto it = counted.find(acg);
      if ((it == counted.end() ? 0 : it->second) != rec.files) {
        return Status::Corruption("ACG " + std::to_string(acg) + " file count is wrong");
      }
    }
  }
  MDB_stat stat;
  int rc = mdb_stat(txn, files_dbi_, &stat);
  if (rc != 0) return LmdbStatus(rc, "mdb_stat");
  m->files = stat.ms_entries;
  // Cheap cross-check of the per-ACG counts every placement decision relies on.
  if (m->files != acg_files) {
    return Status::Corruption("the ACG file counts do not add up to the mapped files");
  }
  return Status::OK();
}

Status MasterStore::LoadMirror() {
  std::shared_lock<std::shared_mutex> env_lock(env_mu_);
  MDB_txn* raw = nullptr;
  int rc = mdb_txn_begin(env_, nullptr, MDB_RDONLY, &raw);
  if (rc != 0) return LmdbStatus(rc, "mdb_txn_begin");
  TxnGuard guard(raw);
  Mirror m;
  PROPELLER_RETURN_IF_ERROR(ReadAll(raw, &m, nullptr));
  std::unique_lock<std::shared_mutex> lock(mirror_mu_);
  mirror_ = std::move(m);
  return Status::OK();
}

Status MasterStore::GrowMap() {
  std::unique_lock<std::shared_mutex> env_lock(env_mu_);  // no transaction is live now
  const uint64_t bigger = map_bytes_ * 2;
  int rc = mdb_env_set_mapsize(env_, bigger);
  if (rc != 0) return LmdbStatus(rc, "growing the map");
  Log(LogLevel::kInfo, "master store: map grown to %llu bytes",
      static_cast<unsigned long long>(bigger));
  map_bytes_ = bigger;
  return Status::OK();
}

Status MasterStore::Update(const std::function<Status(Txn& txn)>& fn) {
  std::lock_guard<std::mutex> write_lock(write_mu_);
  for (int attempt = 0;; ++attempt) {
    bool map_full = false;
    {
      std::shared_lock<std::shared_mutex> env_lock(env_mu_);
      MDB_txn* raw = nullptr;
      int rc = mdb_txn_begin(env_, nullptr, 0, &raw);
      if (rc != 0) return LmdbStatus(rc, "mdb_txn_begin");
      TxnGuard guard(raw);
      Txn txn(this, raw);
      Status s = fn(txn);
      if (s.ok()) s = txn.Flush();
      if (s.ok()) {
        rc = guard.Commit();
        if (rc == 0) {
          std::unique_lock<std::shared_mutex> lock(mirror_mu_);
          txn.Publish(&mirror_);
          ++mirror_version_;
          return Status::OK();
        }
        // MDB_MAP_FULL can come from the commit too (docs/pitfalls.md LMDB-4).
        if (rc == MDB_MAP_FULL) txn.map_full_ = true;
        s = LmdbStatus(rc, "mdb_txn_commit");
      }
      map_full = txn.map_full_;
      if (!map_full || attempt >= kMaxGrowths) return s;
    }  // the transaction is aborted here, before the map may grow
    PROPELLER_RETURN_IF_ERROR(GrowMap());
  }
}

Status MasterStore::LookupFiles(const std::vector<FileId>& files, std::vector<uint64_t>* acgs,
                                std::vector<uint64_t>* generations) const {
  acgs->assign(files.size(), 0);
  if (generations != nullptr) generations->assign(files.size(), 0);
  if (files.empty()) return Status::OK();
  std::shared_lock<std::shared_mutex> env_lock(env_mu_);
  MDB_txn* raw = nullptr;
  int rc = mdb_txn_begin(env_, nullptr, MDB_RDONLY, &raw);
  if (rc != 0) return LmdbStatus(rc, "mdb_txn_begin");
  TxnGuard guard(raw);
  std::string key;
  for (size_t i = 0; i < files.size(); ++i) {
    key.clear();
    AppendFileIdKey(files[i], &key);
    MDB_val k = Val(key), v;
    rc = mdb_get(raw, files_dbi_, &k, &v);
    if (rc == MDB_NOTFOUND) continue;
    if (rc != 0) return LmdbStatus(rc, "looking up a file");
    FileMapping m;
    PROPELLER_RETURN_IF_ERROR(DecodeFileValue(View(v), &m));
    (*acgs)[i] = m.acg;
    if (generations != nullptr) (*generations)[i] = m.generation;
  }
  return Status::OK();
}

Status MasterStore::FilesOf(uint64_t acg, std::vector<FileId>* files) const {
  files->clear();
  std::shared_lock<std::shared_mutex> env_lock(env_mu_);
  MDB_txn* raw = nullptr;
  int rc = mdb_txn_begin(env_, nullptr, MDB_RDONLY, &raw);
  if (rc != 0) return LmdbStatus(rc, "mdb_txn_begin");
  TxnGuard guard(raw);
  MDB_cursor* cursor = nullptr;
  rc = mdb_cursor_open(raw, files_dbi_, &cursor);
  if (rc != 0) return LmdbStatus(rc, "mdb_cursor_open");
  Status st;
  MDB_val k, v;
  for (rc = mdb_cursor_get(cursor, &k, &v, MDB_FIRST); rc == 0;
       rc = mdb_cursor_get(cursor, &k, &v, MDB_NEXT)) {
    FileMapping m;
    st = DecodeFileValue(View(v), &m);
    if (!st.ok()) break;
    if (m.acg != acg) continue;
    FileId id;
    st = DecodeFileIdKey(View(k), &id);
    if (!st.ok()) break;
    files->push_back(id);
  }
  mdb_cursor_close(cursor);
  if (!st.ok()) return st;
  if (rc != MDB_NOTFOUND) return LmdbStatus(rc, "scanning files");
  return Status::OK();
}

std::optional<AcgRecord> MasterStore::GetAcg(uint64_t acg) const {
  std::shared_lock<std::shared_mutex> lock(mirror_mu_);
  auto it = mirror_.acgs.find(acg);
  if (it == mirror_.acgs.end()) return std::nullopt;
  return it->second;
}

std::map<uint64_t, AcgRecord> MasterStore::Acgs() const {
  std::shared_lock<std::shared_mutex> lock(mirror_mu_);
  return mirror_.acgs;
}

uint64_t MasterStore::ForEachAcg(
    const std::function<void(uint64_t acg, const AcgRecord& rec)>& fn) const {
  std::shared_lock<std::shared_mutex> lock(mirror_mu_);
  for (const auto& [acg, rec] : mirror_.acgs) fn(acg, rec);
  return mirror_version_;
}

uint64_t MasterStore::mirror_version() const {
  std::shared_lock<std::shared_mutex> lock(mirror_mu_);
  return mirror_version_;
}

uint64_t MasterStore::AppAcg(std::string_view app) const {
  std::shared_lock<std::shared_mutex> lock(mirror_mu_);
  auto it = mirror_.apps.find(app);
  return it == mirror_.apps.end() ? 0 : it->second;
}

std::map<uint32_t, std::string> MasterStore::Nodes() const {
  std::shared_lock<std::shared_mutex> lock(mirror_mu_);
  return mirror_.nodes;
}

std::map<std::string, IndexType> MasterStore::Indexes() const {
  std::shared_lock<std::shared_mutex> lock(mirror_mu_);
  return std::map<std::string, IndexType>(mirror_.indexes.begin(), mirror_.indexes.end());
}

std::map<uint32_t, std::string> MasterStore::Volumes() const {
  std::shared_lock<std::shared_mutex> lock(mirror_mu_);
  return mirror_.volumes;
}

uint64_t MasterStore::FileCount() const {
  std::shared_lock<std::shared_mutex> lock(mirror_mu_);
  return mirror_.files;
}

uint64_t MasterStore::map_bytes() const {
  std::shared_lock<std::shared_mutex> lock(env_mu_);
  return map_bytes_;
}

Result<StoreDump> MasterStore::Dump() const {
  std::shared_lock<std::shared_mutex> env_lock(env_mu_);
  MDB_txn* raw = nullptr;
  int rc = mdb_txn_begin(env_, nullptr, MDB_RDONLY, &raw);
  if (rc != 0) return LmdbStatus(rc, "mdb_txn_begin");
  TxnGuard guard(raw);
  Mirror m;
  StoreDump d;
  PROPELLER_RETURN_IF_ERROR(ReadAll(raw, &m, &d.files));
  d.acgs = std::move(m.acgs);
  d.apps.insert(m.apps.begin(), m.apps.end());
  d.nodes = std::move(m.nodes);
  d.indexes.insert(m.indexes.begin(), m.indexes.end());
  d.volumes = std::move(m.volumes);
  d.next_acg = m.next_acg;
  d.next_node = m.next_node;
  d.next_volume = m.next_volume;
  return d;
}

// ---- MasterStore::Txn -------------------------------------------------------------------

Status MasterStore::Txn::Check(int rc, std::string_view what) {
  if (rc == 0) return Status::OK();
  if (rc == MDB_MAP_FULL) map_full_ = true;
  return LmdbStatus(rc, what);
}

Result<uint64_t> MasterStore::Txn::FileAcg(FileId file) {
  PROPELLER_ASSIGN_OR_RETURN(const FileMapping m, Mapping(file));
  return m.acg;
}

Result<FileMapping> MasterStore::Txn::Mapping(FileId file) {
  std::string key;
  AppendFileIdKey(file, &key);
  MDB_val k = Val(key), v;
  int rc = mdb_get(txn_, store_->files_dbi_, &k, &v);
  if (rc == MDB_NOTFOUND) return FileMapping{};
  PROPELLER_RETURN_IF_ERROR(Check(rc, "looking up a file"));
  FileMapping m;
  PROPELLER_RETURN_IF_ERROR(DecodeFileValue(View(v), &m));
  return m;
}

uint64_t MasterStore::Txn::generation() const { return mdb_txn_id(txn_); }

AcgRecord* MasterStore::Txn::MutableAcg(uint64_t acg) {
  auto it = acgs_.find(acg);
  if (it != acgs_.end()) return &it->second;
  auto b = base().acgs.find(acg);
  if (b == base().acgs.end()) return nullptr;
  return &acgs_.emplace(acg, b->second).first->second;
}

Status MasterStore::Txn::MapFile(FileId file, uint64_t acg, bool renew, uint64_t* generation) {
  if (FindAcg(acg) == nullptr) {
    return Status::InvalidArgument("ACG " + std::to_string(acg) + " does not exist");
  }
  std::string key;
  AppendFileIdKey(file, &key);
  const uint64_t gen = this->generation();
  const std::string value = EncodeFileValue(FileMapping{acg, gen});
  MDB_val k = Val(key), v = Val(value);
  // New files are the common case: one B-tree descent, and MDB_KEYEXIST hands back the
  // current value when the file is mapped already.
  int rc = mdb_put(txn_, store_->files_dbi_, &k, &v, MDB_NOOVERWRITE);
  uint64_t old = 0;
  if (rc == MDB_KEYEXIST) {
    FileMapping current;
    PROPELLER_RETURN_IF_ERROR(DecodeFileValue(View(v), &current));
    old = current.acg;
    if (old == acg && !renew) {
      if (generation != nullptr) *generation = current.generation;
      return Status::OK();
    }
    v = Val(value);
    rc = mdb_put(txn_, store_->files_dbi_, &k, &v, 0);
  }
  PROPELLER_RETURN_IF_ERROR(Check(rc, "mapping a file"));
  if (generation != nullptr) *generation = gen;
  if (old != 0) {
    AcgRecord* from = MutableAcg(old);
    if (from == nullptr || from->files == 0) {
      return Status::Corruption("file mapped to ACG " + std::to_string(old) +
                                " which does not count it");
    }
    --from->files;
  } else {
    ++files_delta_;
  }
  ++MutableAcg(acg)->files;
  return Status::OK();
}

Status MasterStore::Txn::MoveFile(FileId file, uint64_t from, uint64_t to, bool* moved) {
  if (moved != nullptr) *moved = false;
  if (FindAcg(to) == nullptr) {
    return Status::InvalidArgument("ACG " + std::to_string(to) + " does not exist");
  }
  PROPELLER_ASSIGN_OR_RETURN(const FileMapping current, Mapping(file));
  if (current.acg != from || from == to) return Status::OK();
  std::string key;
  AppendFileIdKey(file, &key);
  const std::string value = EncodeFileValue(FileMapping{to, current.generation});
  MDB_val k = Val(key), v = Val(value);
  PROPELLER_RETURN_IF_ERROR(Check(mdb_put(txn_, store_->files_dbi_, &k, &v, 0), "moving a file"));
  AcgRecord* old = MutableAcg(from);
  if (old == nullptr || old->files == 0) {
    return Status::Corruption("file mapped to ACG " + std::to_string(from) +
                              " which does not count it");
  }
  --old->files;
  ++MutableAcg(to)->files;
  if (moved != nullptr) *moved = true;
  return Status::OK();
}

Status MasterStore::Txn::UnmapFile(FileId file, bool* was_mapped,
                                   std::optional<uint64_t> only_generation) {
  if (was_mapped != nullptr) *was_mapped = false;
  PROPELLER_ASSIGN_OR_RETURN(const FileMapping current, Mapping(file));
  const uint64_t old = current.acg;
  if (old == 0) return Status::OK();
  if (only_generation.has_value() && *only_generation != current.generation) return Status::OK();
  std::string key;
  AppendFileIdKey(file, &key);
  MDB_val k = Val(key);
  PROPELLER_RETURN_IF_ERROR(Check(mdb_del(txn_, store_->files_dbi_, &k, nullptr),
                                  "unmapping a file"));
  AcgRecord* from = MutableAcg(old);
  if (from == nullptr || from->files == 0) {
    return Status::Corruption("file mapped to ACG " + std::to_string(old) +
                              " which does not count it");
  }
  --from->files;
  --files_delta_;
  if (was_mapped != nullptr) *was_mapped = true;
  return Status::OK();
}

const AcgRecord* MasterStore::Txn::FindAcg(uint64_t acg) const {
  auto it = acgs_.find(acg);
  if (it != acgs_.end()) return &it->second;
  auto b = base().acgs.find(acg);
  return b == base().acgs.end() ? nullptr : &b->second;
}

Result<uint64_t> MasterStore::Txn::CreateAcg(uint32_t node_id, std::string_view app) {
  if (app.size() > kMaxAppBytes) {
    return Status::InvalidArgument("app tag longer than " + std::to_string(kMaxAppBytes) +
                                   " bytes");
  }
  const uint64_t id = next_acg_.value_or(base().next_acg);
  next_acg_ = id + 1;
  AcgRecord rec;
  rec.node_id = node_id;
  rec.app.assign(app);
  acgs_.emplace(id, std::move(rec));
  return id;
}

Status MasterStore::Txn::RetireAcg(uint64_t acg) {
  AcgRecord* rec = MutableAcg(acg);
  if (rec == nullptr) {
    return Status::InvalidArgument("ACG " + std::to_string(acg) + " does not exist");
  }
  rec->state = AcgState::kRetired;
  return Status::OK();
}

Status MasterStore::Txn::SetAcgNode(uint64_t acg, uint32_t node_id) {
  AcgRecord* rec = MutableAcg(acg);
  if (rec == nullptr) {
    return Status::InvalidArgument("ACG " + std::to_string(acg) + " does not exist");
  }
  rec->node_id = node_id;
  return Status::OK();
}

void MasterStore::Txn::ForEachAcg(
    const std::function<void(uint64_t acg, const AcgRecord& rec)>& fn) const {
  for (const auto& [id, rec] : base().acgs) {
    auto it = acgs_.find(id);
    fn(id, it == acgs_.end() ? rec : it->second);
  }
  for (const auto& [id, rec] : acgs_) {
    if (base().acgs.count(id) == 0) fn(id, rec);
  }
}

uint64_t MasterStore::Txn::AppAcg(std::string_view app) const {
  auto it = apps_.find(app);
  if (it != apps_.end()) return it->second;
  auto b = base().apps.find(app);
  return b == base().apps.end() ? 0 : b->second;
}

Status MasterStore::Txn::SetAppAcg(std::string_view app, uint64_t acg) {
  if (app.size() > kMaxAppBytes) {
    return Status::InvalidArgument("app tag longer than " + std::to_string(kMaxAppBytes) +
                                   " bytes");
  }
  if (FindAcg(acg) == nullptr) {
    return Status::InvalidArgument("ACG " + std::to_string(acg) + " does not exist");
  }
  apps_.insert_or_assign(std::string(app), acg);
  return Status::OK();
}

const std::string* MasterStore::Txn::FindNode(uint32_t node_id) const {
  auto it = nodes_.find(node_id);
  if (it != nodes_.end()) return &it->second;
  auto b = base().nodes.find(node_id);
  return b == base().nodes.end() ? nullptr : &b->second;
}

Result<uint32_t> MasterStore::Txn::NewNodeId() {
  const uint64_t id = next_node_.value_or(base().next_node);
  if (id > std::numeric_limits<uint32_t>::max()) {
    return Status::ResourceExhausted("node ids are exhausted");
  }
  next_node_ = id + 1;
  return static_cast<uint32_t>(id);
}

Status MasterStore::Txn::PutNode(uint32_t node_id, std::string_view endpoint) {
  if (node_id == 0) return Status::InvalidArgument("node id 0 is reserved");
  nodes_.insert_or_assign(node_id, std::string(endpoint));
  const uint64_t next = next_node_.value_or(base().next_node);
  if (uint64_t{node_id} >= next) next_node_ = uint64_t{node_id} + 1;
  return Status::OK();
}

std::optional<IndexType> MasterStore::Txn::FindIndex(std::string_view name) const {
  auto it = indexes_.find(name);
  if (it != indexes_.end()) return it->second;
  auto b = base().indexes.find(name);
  if (b == base().indexes.end()) return std::nullopt;
  return b->second;
}

Status MasterStore::Txn::PutIndex(std::string_view name, IndexType type) {
  if (name.empty() || name.size() > kMaxIndexNameBytes) {
    return Status::InvalidArgument("index name must be 1-255 bytes");
  }
  indexes_.insert_or_assign(std::string(name), type);
  return Status::OK();
}

Status MasterStore::Txn::DeleteIndex(std::string_view name) {
  if (name.empty() || name.size() > kMaxIndexNameBytes) return Status::OK();
  indexes_.insert_or_assign(std::string(name), std::nullopt);
  return Status::OK();
}

uint32_t MasterStore::Txn::FindVolume(std::string_view root) const {
  for (const auto& [id, r] : volumes_) {
    if (r == root) return id;
  }
  auto b = base().volume_by_root.find(root);
  if (b == base().volume_by_root.end() || removed_volumes_.count(b->second) != 0) return 0;
  return b->second;
}

Status MasterStore::Txn::RemoveVolume(uint32_t volume, uint64_t* unmapped) {
  *unmapped = 0;
  if (!HasVolume(volume)) {
    return Status::NotFound("volume " + std::to_string(volume) + " is not registered");
  }
  // Its files: the keys FileIdKey(volume, *) are contiguous (big-endian volume first).
  std::vector<FileId> files;
  {
    MDB_cursor* raw = nullptr;
    PROPELLER_RETURN_IF_ERROR(Check(mdb_cursor_open(txn_, store_->files_dbi_, &raw),
                                    "mdb_cursor_open"));
    std::string start;
    AppendFileIdKey(FileId{volume, 0}, &start);
    MDB_val k = Val(start), v;
    int rc = mdb_cursor_get(raw, &k, &v, MDB_SET_RANGE);
    Status s;
    for (; rc == 0; rc = mdb_cursor_get(raw, &k, &v, MDB_NEXT)) {
      FileId id;
      s = DecodeFileIdKey(View(k), &id);
      if (!s.ok() || id.volume != volume) break;
      files.push_back(id);
    }
    mdb_cursor_close(raw);
    PROPELLER_RETURN_IF_ERROR(s);
    if (rc != 0 && rc != MDB_NOTFOUND) PROPELLER_RETURN_IF_ERROR(Check(rc, "scanning files"));
  }
  for (const FileId& id : files) {
    bool was = false;
    PROPELLER_RETURN_IF_ERROR(UnmapFile(id, &was));
    *unmapped += was ? 1 : 0;
  }
  volumes_.erase(volume);
  removed_volumes_.insert(volume);
  return Status::OK();
}

Result<uint32_t> MasterStore::Txn::AddVolume(std::string_view root) {
  const uint64_t id = next_volume_.value_or(base().next_volume);
  if (id > std::numeric_limits<uint32_t>::max()) {
    return Status::ResourceExhausted("volume ids are exhausted");
  }
  next_volume_ = id + 1;
  volumes_.emplace(static_cast<uint32_t>(id), std::string(root));
  return static_cast<uint32_t>(id);
}

bool MasterStore::Txn::HasVolume(uint32_t volume) const {
  if (volumes_.count(volume) != 0) return true;
  return removed_volumes_.count(volume) == 0 && base().volumes.count(volume) != 0;
}

Status MasterStore::Txn::Flush() {
  const MasterStore& s = *store_;
  auto put = [&](MDB_dbi dbi, std::string_view key, std::string_view value, const char* what) {
    MDB_val k = Val(key), v = Val(value);
    return Check(mdb_put(txn_, dbi, &k, &v, 0), what);
  };
  for (const auto& [id, rec] : acgs_) {
    PROPELLER_RETURN_IF_ERROR(put(s.acgs_dbi_, U64Key(id), EncodeAcg(rec), "writing an ACG"));
  }
  for (const auto& [app, acg] : apps_) {
    PROPELLER_RETURN_IF_ERROR(put(s.apps_dbi_, AppKey(app), U64Key(acg), "writing an app"));
  }
  for (const auto& [id, endpoint] : nodes_) {
    PROPELLER_RETURN_IF_ERROR(put(s.nodes_dbi_, U32Key(id), EncodeNode(endpoint),
                                  "writing a node"));
  }
  for (const auto& [name, type] : indexes_) {
    if (type.has_value()) {
      const char t = static_cast<char>(*type);
      PROPELLER_RETURN_IF_ERROR(put(s.indexes_dbi_, name, std::string_view(&t, 1),
                                    "writing an index"));
    } else {
      MDB_val k = Val(name);
      int rc = mdb_del(txn_, s.indexes_dbi_, &k, nullptr);
      if (rc != MDB_NOTFOUND) PROPELLER_RETURN_IF_ERROR(Check(rc, "deleting an index"));
    }
  }
  for (const auto& [id, root] : volumes_) {
    PROPELLER_RETURN_IF_ERROR(put(s.volumes_dbi_, U32Key(id), root, "writing a volume"));
  }
  for (uint32_t id : removed_volumes_) {
    const std::string key = U32Key(id);
    MDB_val k = Val(key);
    int rc = mdb_del(txn_, s.volumes_dbi_, &k, nullptr);
    if (rc != MDB_NOTFOUND) PROPELLER_RETURN_IF_ERROR(Check(rc, "deleting a volume"));
  }
  const std::pair<const char*, const std::optional<uint64_t>*> counters[] = {
      {"next_acg", &next_acg_}, {"next_node", &next_node_}, {"next_volume", &next_volume_}};
  for (const auto& [name, value] : counters) {
    if (value->has_value()) {
      PROPELLER_RETURN_IF_ERROR(put(s.meta_dbi_, name, U64Key(**value), "writing a counter"));
    }
  }
  return Status::OK();
}

void MasterStore::Txn::Publish(Mirror* m) {
  for (auto& [id, rec] : acgs_) m->acgs.insert_or_assign(id, std::move(rec));
  for (auto& [app, acg] : apps_) m->apps.insert_or_assign(app, acg);
  for (auto& [id, endpoint] : nodes_) m->nodes.insert_or_assign(id, std::move(endpoint));
  for (auto& [name, type] : indexes_) {
    if (type.has_value()) {
      m->indexes.insert_or_assign(name, *type);
    } else {
      auto it = m->indexes.find(name);
      if (it != m->indexes.end()) m->indexes.erase(it);
    }
  }
  for (uint32_t id : removed_volumes_) {
    auto it = m->volumes.find(id);
    if (it == m->volumes.end()) continue;
    m->volume_by_root.erase(it->second);
    m->volumes.erase(it);
  }
  for (auto& [id, root] : volumes_) {
    m->volume_by_root.insert_or_assign(root, id);
    m->volumes.insert_or_assign(id, std::move(root));
  }
  if (next_acg_) m->next_acg = *next_acg_;
  if (next_node_) m->next_node = *next_node_;
  if (next_volume_) m->next_volume = *next_volume_;
  m->files = static_cast<uint64_t>(static_cast<int64_t>(m->files) + files_delta_);
}

}  // namespace propeller::master
