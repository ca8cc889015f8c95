#include "indexnode/store.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <algorithm>
#include <optional>
#include <thread>

#include "common/lmdb_check.h"
#include "common/lmdb_util.h"
#include "common/logging.h"
#include "common/secure_dir.h"
#include "schemas/keys.h"

namespace propeller {
namespace {

constexpr unsigned kMaxDbs = 128;
constexpr char kShardsFile[] = "SHARDS";
constexpr char kCleanMark[] = "CLEAN";
// The databases every shard has from its creation; index databases come and go with the
// catalogue.
constexpr const char* kFixedDbs[] = {"files", "dirs", "edges", "meta", "moved"};

std::string ShardDir(const std::string& root, unsigned k) {
  return JoinPath(root, "shard-" + std::to_string(k));
}

// An environment closed on every path out.
struct EnvCloser {
  MDB_env* env = nullptr;
  ~EnvCloser() {
    if (env != nullptr) mdb_env_close(env);
  }
};

// Opens `names` in the shard through a short write transaction (mdb_dbi_open may not run in
// two transactions at once, and writers are serialised), so that read transactions can use
// the handles afterwards.
Status OpenHandles(MDB_env* env, const std::vector<std::string>& names,
                   std::vector<MDB_dbi>* dbis) {
  MDB_txn* raw = nullptr;
  int rc = mdb_txn_begin(env, nullptr, 0, &raw);
  if (rc != 0) return LmdbStatus(rc, "mdb_txn_begin");
  TxnGuard txn(raw);
  dbis->clear();
  for (const std::string& name : names) {
    MDB_dbi dbi = 0;
    rc = mdb_dbi_open(raw, name.c_str(), 0, &dbi);
    if (rc != 0) return LmdbStatus(rc, "opening database " + name);
    dbis->push_back(dbi);
  }
  rc = txn.Commit();
  return rc == 0 ? Status::OK() : LmdbStatus(rc, "mdb_txn_commit");
}

// fdatasync of the file at `path` (LMDB's copy does not sync what it wrote).
Status SyncFileAt(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::IOError("opening " + path, errno);
  const int r = ::fdatasync(fd);
  const int err = errno;
  ::close(fd);
  if (r != 0) return Status::IOError("syncing " + path, err);
  return Status::OK();
}

}  // namespace

Status ListDatabases(MDB_txn* txn, std::vector<std::string>* names) {
  names->clear();
  MDB_dbi main = 0;
  int rc = mdb_dbi_open(txn, nullptr, 0, &main);
  if (rc != 0) return LmdbStatus(rc, "opening the main database");
  MDB_cursor* raw = nullptr;
  rc = mdb_cursor_open(txn, main, &raw);
  if (rc != 0) return LmdbStatus(rc, "mdb_cursor_open");
  CursorGuard cur(raw);
  MDB_val k, v;
  for (rc = mdb_cursor_get(raw, &k, &v, MDB_FIRST); rc == 0;
       rc = mdb_cursor_get(raw, &k, &v, MDB_NEXT)) {
    names->emplace_back(View(k));
  }
  if (rc != MDB_NOTFOUND) return LmdbStatus(rc, "listing databases");
  return Status::OK();
}

Result<std::unique_ptr<Store>> Store::Open(
    const StoreOptions& options, const std::string& quarantine_dir,
    std::vector<std::pair<unsigned, std::string>>* damaged) {
  std::unique_ptr<Store> store(new Store(options));
  if (store->options_.env == nullptr) store->options_.env = Env::Default();
  Env* env = store->options_.env;
  const std::string& dir = store->options_.dir;
  PROPELLER_RETURN_IF_ERROR(MakeDirs(dir, 0700).WithContext("creating the store"));
  // The shard count is fixed at creation: ACGs are placed by it.
  unsigned count = 0;
  std::string text;
  const std::string shards_file = JoinPath(dir, kShardsFile);
  if (env->FileExists(shards_file)) {
    PROPELLER_RETURN_IF_ERROR(ReadFileToString(env, shards_file, &text));
    char* end = nullptr;
    const unsigned long n = std::strtoul(text.c_str(), &end, 10);
    if (end == text.c_str() || (*end != '\n' && *end != '\0') || n == 0 ||
        n > kMaxStoreShards) {
      return Status::Corruption(shards_file + " does not hold a shard count (1-" +
                                std::to_string(kMaxStoreShards) + ")");
    }
    count = static_cast<unsigned>(n);
  } else {
    count = options.shards != 0 ? options.shards : std::thread::hardware_concurrency();
    count = std::clamp(count, 1u, kMaxStoreShards);
    PROPELLER_RETURN_IF_ERROR(
        WriteFileAtomically(env, shards_file, std::to_string(count) + "\n"));
    PROPELLER_RETURN_IF_ERROR(env->SyncDir(dir));
  }
  for (unsigned k = 0; k < count; ++k) {
    PROPELLER_RETURN_IF_ERROR(store->OpenShard(k, quarantine_dir, damaged));
  }
  return store;
}

Status Store::OpenShard(unsigned k, const std::string& quarantine_dir,
                        std::vector<std::pair<unsigned, std::string>>* damaged) {
  Env* env = options_.env;
  auto shard = std::make_unique<Shard>();
  shard->index = k;
  shard->dir = ShardDir(options_.dir, k);
  PROPELLER_RETURN_IF_ERROR(MakeDirs(shard->dir, 0700));
  const std::string data = JoinPath(shard->dir, "data.mdb");
  // A compaction cut short leaves its copy; the shard's own file was not touched (Compact).
  const std::string leftover = JoinPath(shard->dir, "compact.tmp");
  if (env->FileExists(leftover)) PROPELLER_RETURN_IF_ERROR(env->RemoveRecursively(leftover));
  if (env->FileExists(data)) {
    // A clean close recorded the file; anything else is read whole before LMDB maps it.
    const bool clean = LmdbFileMatchesMark(data, JoinPath(shard->dir, kCleanMark));
    Status check = CheckLmdbFile(data, /*deep=*/!clean);
    if (check.code() == StatusCode::kCorruption && !quarantine_dir.empty()) {
      PROPELLER_RETURN_IF_ERROR(MakeDirs(quarantine_dir, 0700));
      std::string to = JoinPath(quarantine_dir, "shard-" + std::to_string(k) + "-" +
                                                    std::to_string(env->NowNanos() / 1'000'000'000));
      for (int n = 2; env->FileExists(to); ++n) to += "-" + std::to_string(n);
      PROPELLER_RETURN_IF_ERROR(env->RenameFile(shard->dir, to).WithContext("moving damaged " +
                                                                             shard->dir));
      Log(LogLevel::kError, "store shard %u is damaged (%s); moved to %s", k,
          check.message().c_str(), to.c_str());
      damaged->emplace_back(k, check.message() + "; shard moved to " + to);
      PROPELLER_RETURN_IF_ERROR(MakeDirs(shard->dir, 0700));
    } else if (!check.ok()) {
      return check.WithContext("store shard " + std::to_string(k));
    }
  }
  PROPELLER_RETURN_IF_ERROR(OpenEnv(shard.get()).WithContext("store shard " + std::to_string(k)));
  shards_.push_back(std::move(shard));
  return Status::OK();
}

Status Store::OpenEnv(Shard* shard) {
  int rc = mdb_env_create(&shard->env);
  if (rc != 0) {
    shard->env = nullptr;
    return LmdbStatus(rc, "mdb_env_create");
  }
  mdb_env_set_maxdbs(shard->env, kMaxDbs);
  uint64_t map_size = options_.map_size;
  struct stat st;
  if (::stat(JoinPath(shard->dir, "data.mdb").c_str(), &st) == 0) {
    map_size = std::max<uint64_t>(map_size, static_cast<uint64_t>(st.st_size));
  }
  rc = mdb_env_set_mapsize(shard->env, map_size);
  if (rc != 0) return LmdbStatus(rc, "mdb_env_set_mapsize");
  // MDB_NOTLS: read transactions are used from thread-pool threads (reader slots are bound to
  // threads otherwise). MDB_NORDAHEAD: searches read scattered records.
  rc = mdb_env_open(shard->env, shard->dir.c_str(), MDB_NOTLS | MDB_NORDAHEAD, 0600);
  if (rc != 0) return LmdbStatus(rc, "opening LMDB environment " + shard->dir);
  int dead = 0;
  mdb_reader_check(shard->env, &dead);
  MDB_txn* raw = nullptr;
  rc = mdb_txn_begin(shard->env, nullptr, 0, &raw);
  if (rc != 0) return LmdbStatus(rc, "mdb_txn_begin");
  TxnGuard txn(raw);
  MDB_dbi* handles[] = {&shard->files, &shard->dirs, &shard->edges, &shard->meta,
                        &shard->moved};
  for (size_t i = 0; i < std::size(kFixedDbs); ++i) {
    rc = mdb_dbi_open(raw, kFixedDbs[i], MDB_CREATE, handles[i]);
    if (rc != 0) return LmdbStatus(rc, std::string("opening database ") + kFixedDbs[i]);
  }
  rc = txn.Commit();
  if (rc != 0) return LmdbStatus(rc, "committing the shard's databases");
  shard->map = LocateMap(*shard);
  return Status::OK();
}

// LMDB 0.9 publishes the map's address (mdb_env_info's me_mapaddr) only for MDB_FIXEDMAP
// environments; it is null otherwise. We find it from a value LMDB hands back: values point
// into the map, the map starts on a page boundary, and every page (leaf or overflow) starts
// with its own page number (MDB_page.mp_pgno, a size_t at offset 0: LMDB's file format). So
// map = page - pgno * page size. Two values (the first and last of the main database, which
// names the shard's databases) must give the same address, within the data file's extent;
// null otherwise, and then the map is never trimmed.
const char* Store::LocateMap(const Shard& shard) {
  MDB_envinfo info{};
  MDB_stat st{};
  if (mdb_env_info(shard.env, &info) != 0 || mdb_env_stat(shard.env, &st) != 0) return nullptr;
  if (info.me_mapaddr != nullptr) return static_cast<const char*>(info.me_mapaddr);
  // Pages are OS pages (LMDB's default) so that the map is aligned to them.
  const size_t psize = st.ms_psize;
  if (psize == 0 || psize != static_cast<size_t>(sysconf(_SC_PAGESIZE))) return nullptr;
  MDB_txn* raw = nullptr;
  if (mdb_txn_begin(shard.env, nullptr, MDB_RDONLY, &raw) != 0) return nullptr;
  TxnGuard txn(raw);
  MDB_dbi main = 0;
  MDB_cursor* cur_raw = nullptr;
  if (mdb_dbi_open(raw, nullptr, 0, &main) != 0 || mdb_cursor_open(raw, main, &cur_raw) != 0) {
    return nullptr;
  }
  CursorGuard cur(cur_raw);
  auto base_of = [&](MDB_cursor_op op) -> uintptr_t {  // 0 when it does not fit
    MDB_val k, v;
    if (mdb_cursor_get(cur_raw, &k, &v, op) != 0 || v.mv_data == nullptr) return 0;
    const uintptr_t page = reinterpret_cast<uintptr_t>(v.mv_data) & ~(uintptr_t{psize} - 1);
    size_t pgno = 0;
    std::memcpy(&pgno, reinterpret_cast<const void*>(page), sizeof(pgno));
    if (pgno == 0 || pgno > info.me_last_pgno || page < pgno * psize) return 0;
    return page - pgno * psize;
  };
  const uintptr_t first = base_of(MDB_FIRST);
  const uintptr_t last = base_of(MDB_LAST);
  return first != 0 && first == last ? reinterpret_cast<const char*>(first) : nullptr;
}

size_t Store::UsedMapBytes(const Shard& shard) {
  MDB_envinfo info{};
  MDB_stat st{};
  if (shard.map == nullptr || shard.env == nullptr || mdb_env_info(shard.env, &info) != 0 ||
      mdb_env_stat(shard.env, &st) != 0) {
    return 0;
  }
  return std::min<size_t>((info.me_last_pgno + 1) * st.ms_psize, info.me_mapsize);
}

uint64_t Store::ResidentBytes() const {
  // The kernel's count of the pages each map has in this process's page tables (mincore
  // would report the page cache's, which a trim does not change).
  std::vector<uintptr_t> starts;
  for (const auto& shard : shards_) {
    if (shard->map != nullptr) starts.push_back(reinterpret_cast<uintptr_t>(shard->map));
  }
  if (starts.empty()) return 0;
  std::FILE* f = std::fopen("/proc/self/smaps", "re");
  if (f == nullptr) return 0;
  uint64_t total = 0;
  bool ours = false;
  char line[512];
  while (std::fgets(line, sizeof line, f) != nullptr) {
    unsigned long long lo = 0, hi = 0;
    char dash = 0;
    if (std::sscanf(line, "%llx%c%llx", &lo, &dash, &hi) == 3 && dash == '-' &&
        std::strchr(line, ':') != nullptr && line[0] != 'R') {
      ours = std::find(starts.begin(), starts.end(), static_cast<uintptr_t>(lo)) != starts.end();
    } else if (ours && std::strncmp(line, "Rss:", 4) == 0) {
      total += std::strtoull(line + 4, nullptr, 10) * 1024;
      ours = false;
    }
  }
  std::fclose(f);
  return total;
}

void Store::TrimMaps() {
  for (const auto& shard : shards_) {
    const size_t bytes = UsedMapBytes(*shard);
    if (bytes != 0) (void)madvise(const_cast<char*>(shard->map), bytes, MADV_DONTNEED);
  }
}

Store::~Store() {
  for (auto& shard : shards_) {
    if (shard->env != nullptr) mdb_env_close(shard->env);
  }
}

// Copies every database of `from` — only the keys starting with `prefix` — into the empty
// environment `to`, in key order with MDB_APPEND: LMDB then fills each page whole before it
// starts the next, where ordinary inserts split pages in the middle (a shard loaded by
// commits of many ACGs has its leaves ~3/4 full). Commits every kCopyBatch entries, so the
// dirty pages of one transaction stay bounded. `to` is synced by the caller.
Status CopyDatabases(MDB_env* from, MDB_env* to, const std::string& prefix,
                     const std::string& what) {
  constexpr uint64_t kCopyBatch = 1'000'000;
  std::vector<std::string> names;
  {
    MDB_txn* raw = nullptr;
    int rc = mdb_txn_begin(from, nullptr, MDB_RDONLY, &raw);
    if (rc != 0) return LmdbStatus(rc, "mdb_txn_begin");
    TxnGuard txn(raw);
    PROPELLER_RETURN_IF_ERROR(ListDatabases(raw, &names).WithContext(what));
  }
  std::vector<MDB_dbi> dbis;
  PROPELLER_RETURN_IF_ERROR(OpenHandles(from, names, &dbis).WithContext(what));
  MDB_txn* read_raw = nullptr;
  int rc = mdb_txn_begin(from, nullptr, MDB_RDONLY, &read_raw);
  if (rc != 0) return LmdbStatus(rc, "mdb_txn_begin");
  TxnGuard read(read_raw);
  MDB_txn* write_raw = nullptr;
  rc = mdb_txn_begin(to, nullptr, 0, &write_raw);
  if (rc != 0) return LmdbStatus(rc, "mdb_txn_begin");
  std::optional<TxnGuard> write(std::in_place, write_raw);
  uint64_t in_txn = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    MDB_dbi out = 0;
    rc = mdb_dbi_open(write_raw, names[i].c_str(), MDB_CREATE, &out);
    if (rc != 0) return LmdbStatus(rc, what + ": creating database " + names[i]);
    MDB_cursor* cur_raw = nullptr;
    rc = mdb_cursor_open(read_raw, dbis[i], &cur_raw);
    if (rc != 0) return LmdbStatus(rc, "mdb_cursor_open");
    CursorGuard cur(cur_raw);
    MDB_val k = Val(prefix), v;
    for (rc = mdb_cursor_get(cur_raw, &k, &v, prefix.empty() ? MDB_FIRST : MDB_SET_RANGE);
         rc == 0 && View(k).starts_with(prefix); rc = mdb_cursor_get(cur_raw, &k, &v, MDB_NEXT)) {
      const int put = mdb_put(write_raw, out, &k, &v, MDB_APPEND);
      if (put != 0) return LmdbStatus(put, what + ": writing " + names[i]);
      if (++in_txn < kCopyBatch) continue;
      in_txn = 0;
      const int commit = write->Commit();
      write.reset();
      if (commit != 0) return LmdbStatus(commit, what + ": committing");
      const int begin = mdb_txn_begin(to, nullptr, 0, &write_raw);
      if (begin != 0) return LmdbStatus(begin, "mdb_txn_begin");
      write.emplace(write_raw);
    }
    if (rc != 0 && rc != MDB_NOTFOUND) return LmdbStatus(rc, what + ": reading " + names[i]);
  }
  rc = write->Commit();
  if (rc != 0) return LmdbStatus(rc, what + ": committing");
  return Status::OK();
}

Status Store::ExportAcg(uint64_t acg, const std::string& path) {
  Shard* shard = ShardOf(acg);
  const std::string what = "exporting ACG " + std::to_string(acg);
  (void)::unlink(path.c_str());
  EnvCloser out;
  int rc = mdb_env_create(&out.env);
  if (rc != 0) return LmdbStatus(rc, "mdb_env_create");
  mdb_env_set_maxdbs(out.env, kMaxDbs);
  mdb_env_set_mapsize(out.env, options_.map_size);
  // MDB_NOSUBDIR: the copy is one file (plus "<path>-lock", removed below); synced once at
  // the end instead of at its commit.
  rc = mdb_env_open(out.env, path.c_str(), MDB_NOSUBDIR | MDB_NOSYNC, 0600);
  if (rc != 0) return LmdbStatus(rc, what + ": creating " + path);
  PROPELLER_RETURN_IF_ERROR(CopyDatabases(shard->env, out.env, AcgKeyPrefix(acg), what));
  rc = mdb_env_sync(out.env, 1);
  if (rc != 0) return LmdbStatus(rc, what + ": syncing " + path);
  mdb_env_close(out.env);
  out.env = nullptr;
  (void)::unlink((path + "-lock").c_str());
  return Status::OK();
}

Status Store::IngestAcg(uint64_t acg, const std::string& path) {
  const std::string what = "ingesting " + path + " as ACG " + std::to_string(acg);
  EnvCloser in;
  int rc = mdb_env_create(&in.env);
  if (rc != 0) return LmdbStatus(rc, "mdb_env_create");
  mdb_env_set_maxdbs(in.env, kMaxDbs);
  rc = mdb_env_open(in.env, path.c_str(), MDB_NOSUBDIR | MDB_RDONLY | MDB_NOLOCK, 0600);
  if (rc != 0) return LmdbStatus(rc, what);
  return Ingest(acg, in.env, kAcgKeyPrefixSize, what);
}

Status Store::IngestLegacyAcg(uint64_t acg, const std::string& dir) {
  const std::string what = "converting " + dir + " into the store";
  EnvCloser in;
  int rc = mdb_env_create(&in.env);
  if (rc != 0) return LmdbStatus(rc, "mdb_env_create");
  mdb_env_set_maxdbs(in.env, kMaxDbs);
  struct stat st;
  if (::stat(JoinPath(dir, "data.mdb").c_str(), &st) == 0) {
    mdb_env_set_mapsize(in.env, static_cast<size_t>(st.st_size));
  }
  // Read only, without the lock file: nothing else may have it open (the node's own lock).
  rc = mdb_env_open(in.env, dir.c_str(), MDB_RDONLY | MDB_NOLOCK, 0600);
  if (rc != 0) return LmdbStatus(rc, what);
  return Ingest(acg, in.env, 0, what);
}

Status Store::Ingest(uint64_t acg, MDB_env* source, size_t source_prefix_bytes,
                     const std::string& what) {
  Shard* shard = ShardOf(acg);
  const std::string prefix = AcgKeyPrefix(acg);
  MDB_txn* read_raw = nullptr;
  int rc = mdb_txn_begin(source, nullptr, MDB_RDONLY, &read_raw);
  if (rc != 0) return LmdbStatus(rc, "mdb_txn_begin");
  TxnGuard read(read_raw);
  std::vector<std::string> names;
  PROPELLER_RETURN_IF_ERROR(ListDatabases(read_raw, &names).WithContext(what));

  MDB_txn* write_raw = nullptr;
  rc = mdb_txn_begin(shard->env, nullptr, 0, &write_raw);
  if (rc != 0) return LmdbStatus(rc, "mdb_txn_begin");
  TxnGuard write(write_raw);
  // What the ACG had here goes first (an earlier, interrupted ingest).
  std::vector<std::string> existing;
  PROPELLER_RETURN_IF_ERROR(ListDatabases(write_raw, &existing).WithContext(what));
  for (const std::string& name : existing) {
    MDB_dbi dbi = 0;
    rc = mdb_dbi_open(write_raw, name.c_str(), 0, &dbi);
    if (rc != 0) return LmdbStatus(rc, what + ": opening " + name);
    PROPELLER_RETURN_IF_ERROR(DeleteKeyRange(write_raw, dbi, prefix).WithContext(what));
  }
  std::string source_prefix;  // an export's ACG's, from its first key
  std::string key;
  uint64_t files = 0, edges = 0;
  for (const std::string& name : names) {
    // Layout 3's copy of the `inode` K-D tree: the tree now reads the records.
    if (source_prefix_bytes == 0 && name == "kd.inode") continue;
    MDB_dbi from = 0, to = 0;
    rc = mdb_dbi_open(read_raw, name.c_str(), 0, &from);
    if (rc != 0) return LmdbStatus(rc, what + ": opening " + name);
    rc = mdb_dbi_open(write_raw, name.c_str(), MDB_CREATE, &to);
    if (rc != 0) return LmdbStatus(rc, what + ": creating " + name);
    MDB_cursor* cur_raw = nullptr;
    rc = mdb_cursor_open(read_raw, from, &cur_raw);
    if (rc != 0) return LmdbStatus(rc, "mdb_cursor_open");
    CursorGuard cur(cur_raw);
    MDB_val k, v;
    uint64_t entries = 0;
    for (rc = mdb_cursor_get(cur_raw, &k, &v, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(cur_raw, &k, &v, MDB_NEXT)) {
      const std::string_view stored = View(k);
      if (source_prefix_bytes != 0) {
        if (source_prefix.empty() && stored.size() >= source_prefix_bytes) {
          source_prefix = stored.substr(0, source_prefix_bytes);
        }
        if (stored.size() <= source_prefix_bytes || !stored.starts_with(source_prefix)) {
          return Status::Corruption(what + ": database " + name +
                                    " holds a key outside the exported ACG's range");
        }
      }
      key.assign(prefix);
      key.append(stored.substr(source_prefix_bytes));
      MDB_val nk = Val(key);
      const int put = mdb_put(write_raw, to, &nk, &v, 0);
      if (put != 0) return LmdbStatus(put, what);
      ++entries;
    }
    if (rc != MDB_NOTFOUND) return LmdbStatus(rc, what + ": reading " + name);
    if (name == "files") files = entries;
    if (name == "edges") edges = entries;
  }
  if (source_prefix_bytes == 0) {
    // Layout 3 counted with the databases' sizes; the store keeps the counts in meta.
    std::string counts;
    AppendOrderedU64(files, &counts);
    AppendOrderedU64(edges, &counts);
    key = prefix + "counts";
    MDB_val k = Val(key), v = Val(counts);
    rc = mdb_put(write_raw, shard->meta, &k, &v, 0);
    if (rc != 0) return LmdbStatus(rc, what + ": writing the counts");
  }
  rc = write.Commit();
  return rc == 0 ? Status::OK() : LmdbStatus(rc, what + ": committing");
}

Status Store::DropAcg(uint64_t acg) {
  Shard* shard = ShardOf(acg);
  const std::string prefix = AcgKeyPrefix(acg);
  MDB_txn* raw = nullptr;
  int rc = mdb_txn_begin(shard->env, nullptr, 0, &raw);
  if (rc != 0) return LmdbStatus(rc, "mdb_txn_begin");
  TxnGuard txn(raw);
  std::vector<std::string> names;
  PROPELLER_RETURN_IF_ERROR(ListDatabases(raw, &names));
  for (const std::string& name : names) {
    MDB_dbi dbi = 0;
    rc = mdb_dbi_open(raw, name.c_str(), 0, &dbi);
    if (rc != 0) return LmdbStatus(rc, "opening " + name);
    PROPELLER_RETURN_IF_ERROR(
        DeleteKeyRange(raw, dbi, prefix).WithContext("dropping ACG " + std::to_string(acg)));
  }
  rc = txn.Commit();
  return rc == 0 ? Status::OK() : LmdbStatus(rc, "committing the drop of an ACG");
}

Status Store::ForEachAcg(const std::function<void(uint64_t)>& fn) {
  for (auto& shard : shards_) {
    MDB_txn* raw = nullptr;
    int rc = mdb_txn_begin(shard->env, nullptr, MDB_RDONLY, &raw);
    if (rc != 0) return LmdbStatus(rc, "mdb_txn_begin");
    TxnGuard txn(raw);
    MDB_cursor* cur_raw = nullptr;
    rc = mdb_cursor_open(raw, shard->meta, &cur_raw);
    if (rc != 0) return LmdbStatus(rc, "mdb_cursor_open");
    CursorGuard cur(cur_raw);
    MDB_val k, v;
    std::string next;
    for (rc = mdb_cursor_get(cur_raw, &k, &v, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(cur_raw, &k, &v, MDB_SET_RANGE)) {
      const std::string_view key = View(k);
      if (key.size() < kAcgKeyPrefixSize) {
        return Status::Corruption("store shard " + std::to_string(shard->index) +
                                  ": a meta key without an ACG prefix");
      }
      uint64_t id = 0;
      for (size_t i = 0; i < kAcgKeyPrefixSize; ++i) {
        id = (id << 8) | static_cast<uint8_t>(key[i]);
      }
      fn(id);
      if (id == kMaxStoredAcgId) break;
      next = AcgKeyPrefix(id + 1);  // skip the rest of this ACG's keys
      k = Val(next);
    }
    if (rc != 0 && rc != MDB_NOTFOUND) return LmdbStatus(rc, "listing ACGs");
  }
  return Status::OK();
}

uint64_t Store::disk_bytes() const {
  uint64_t total = 0;
  for (const auto& shard : shards_) {
    for (const char* f : {"data.mdb", "lock.mdb"}) {
      struct stat st;
      // Blocks actually allocated: the map file is sparse.
      if (::stat(JoinPath(shard->dir, f).c_str(), &st) == 0) {
        total += static_cast<uint64_t>(st.st_blocks) * 512;
      }
    }
  }
  return total;
}

Status Store::Compact(uint64_t* before_bytes, uint64_t* after_bytes) {
  Env* env = options_.env;
  *before_bytes = *after_bytes = 0;
  for (auto& shard : shards_) {
    const std::string data = JoinPath(shard->dir, "data.mdb");
    const std::string tmp = JoinPath(shard->dir, "compact.tmp");
    const std::string what = "compacting store shard " + std::to_string(shard->index);
    struct stat st{};
    if (::stat(data.c_str(), &st) == 0) *before_bytes += static_cast<uint64_t>(st.st_blocks) * 512;
    // A copy cut short by a crash is only a leftover: the shard's own file is untouched until
    // the rename below replaces it whole.
    if (env->FileExists(tmp)) PROPELLER_RETURN_IF_ERROR(env->RemoveRecursively(tmp));
    PROPELLER_RETURN_IF_ERROR(MakeDirs(tmp, 0700).WithContext(what));
    // Every key rewritten in order into a fresh environment (CopyDatabases): the pages come
    // out full. (LMDB's own compacting copy, MDB_CP_COMPACT, drops free pages but copies each
    // page as it is: after a plain load it gained nothing.)
    {
      EnvCloser out;
      int rc = mdb_env_create(&out.env);
      if (rc != 0) return LmdbStatus(rc, "mdb_env_create");
      mdb_env_set_maxdbs(out.env, kMaxDbs);
      mdb_env_set_mapsize(out.env, std::max<uint64_t>(options_.map_size,
                                                      static_cast<uint64_t>(st.st_size)));
      rc = mdb_env_open(out.env, tmp.c_str(), MDB_NOSYNC, 0600);
      if (rc != 0) return LmdbStatus(rc, what + ": creating " + tmp);
      PROPELLER_RETURN_IF_ERROR(CopyDatabases(shard->env, out.env, "", what));
      rc = mdb_env_sync(out.env, 1);
      if (rc != 0) return LmdbStatus(rc, what + ": syncing " + tmp);
    }
    const std::string copy = JoinPath(tmp, "data.mdb");
    PROPELLER_RETURN_IF_ERROR(SyncFileAt(copy).WithContext(what));
    mdb_env_close(shard->env);
    shard->env = nullptr;
    PROPELLER_RETURN_IF_ERROR(env->RenameFile(copy, data).WithContext(what));
    PROPELLER_RETURN_IF_ERROR(env->SyncDir(shard->dir).WithContext(what));
    PROPELLER_RETURN_IF_ERROR(env->RemoveRecursively(tmp));
    const std::string mark = JoinPath(shard->dir, kCleanMark);
    if (env->FileExists(mark)) PROPELLER_RETURN_IF_ERROR(env->RemoveFile(mark));
    PROPELLER_RETURN_IF_ERROR(OpenEnv(shard.get()).WithContext(what));
    if (::stat(data.c_str(), &st) == 0) *after_bytes += static_cast<uint64_t>(st.st_blocks) * 512;
  }
  return Status::OK();
}

void Store::CloseClean() {
  for (auto& shard : shards_) {
    if (shard->env == nullptr) continue;
    mdb_env_close(shard->env);
    shard->env = nullptr;
    Status s = WriteLmdbFileMark(JoinPath(shard->dir, "data.mdb"),
                                 JoinPath(shard->dir, kCleanMark));
    if (!s.ok()) Log(LogLevel::kWarning, "store shard %u: %s", shard->index, s.ToString().c_str());
  }
}

}  // namespace propeller
