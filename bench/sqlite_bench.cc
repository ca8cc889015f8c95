// The Propeller workload on SQLite, the baseline of docs/architecture.md §11's side-by-side
// comparison.
//
// Setup (what a careful user would deploy for a metadata index on one node):
//  - WAL journal; synchronous=NORMAL against Propeller's `default` level (both may lose the
//    last few milliseconds of acknowledged updates on power loss, neither on a crash of the
//    process), synchronous=FULL against `sync` (fsync before acknowledging).
//  - Table `files` with the record's columns; id = the file's inode (volume 1) is the INTEGER
//    PRIMARY KEY (the rowid). Indexes on size, mtime and path (Propeller's path B-tree).
//    Propeller additionally maintains a K-D tree and a keyword hash; SQLite gets no
//    equivalent, which favours SQLite on updates.
//  - 64 MiB page cache and memory-mapped reads (the largest mmap Debian's build allows, ~2 GiB),
//    since Propeller's LMDB reads through mmap too. Debian's defaults otherwise (including
//    SECURE_DELETE). ANALYZE after loading so the planner has index statistics.
//  - Populating: 10,000 rows per transaction with the indexes already present (the same
//    ingest Propeller does: batches of 10,000 at its default level).
//  - An acknowledged update = one transaction BEGIN; UPDATE files SET size, mtime, ctime,
//    atime WHERE id=?; COMMIT (the columns a write + close changes). Batched = 1000 UPDATEs
//    per transaction. Searches read every column of each hit into memory, as Propeller's
//    SearchAll returns whole records.
#include <sqlite3.h>

#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "bench/bench_common.h"
#include "bench/suites.h"

namespace propeller::bench {
namespace {

constexpr const char* kColumns =
    "id, path, name, parent, type, size, mtime, ctime, atime, uid, gid, mode, nlink";

struct Row {  // one materialised hit
  int64_t id = 0;
  std::string path;
  std::string name;
  int64_t parent = 0;
  int64_t type = 0;
  int64_t size = 0;
  int64_t mtime = 0;
  int64_t ctime = 0;
  int64_t atime = 0;
  int64_t uid = 0;
  int64_t gid = 0;
  int64_t mode = 0;
  int64_t nlink = 0;
};

class Statement {
 public:
  Statement() = default;
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  bool Prepare(sqlite3* db, const std::string& sql, std::string* error) {
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt_, nullptr) != SQLITE_OK) {
      *error = "prepare '" + sql + "': " + sqlite3_errmsg(db);
      return false;
    }
    return true;
  }
  sqlite3_stmt* get() { return stmt_; }

 private:
  sqlite3_stmt* stmt_ = nullptr;
};

// One populated database per file count, built on first use and kept for the process.
class SqliteWorld {
 public:
  // Returns the world for `files`, building it on the first call; null with *error set when
  // building failed (the failure is remembered, so later calls fail fast).
  static SqliteWorld* Get(uint64_t files, std::string* error) {
    static std::map<uint64_t, std::unique_ptr<SqliteWorld>>& worlds = Worlds();
    auto it = worlds.find(files);
    if (it == worlds.end()) {
      auto world = std::unique_ptr<SqliteWorld>(new SqliteWorld(files));
      world->error_ = world->Build();
      it = worlds.emplace(files, std::move(world)).first;
    }
    if (!it->second->error_.empty()) {
      *error = it->second->error_;
      return nullptr;
    }
    return it->second.get();
  }
  static void ReleaseAll() { Worlds().clear(); }

  ~SqliteWorld() {
    begin_.reset();
    commit_.reset();
    update_.reset();
    searches_.clear();
    if (db_ != nullptr) sqlite3_close(db_);
  }

  bool Exec(const char* sql, std::string* error) {
    char* message = nullptr;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, &message) != SQLITE_OK) {
      *error = std::string(sql) + ": " + (message ? message : "?");
      sqlite3_free(message);
      return false;
    }
    return true;
  }

  bool SetLevel(Level level, std::string* error) {
    return Exec(level == Level::kSync ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL",
                error);
  }

  // Runs a statement that returns no rows to completion and resets it.
  bool StepDone(sqlite3_stmt* stmt, std::string* error) {
    int rc = sqlite3_step(stmt);
    sqlite3_reset(stmt);
    if (rc != SQLITE_DONE) {
      *error = std::string("step: ") + sqlite3_errmsg(db_);
      return false;
    }
    return true;
  }

  bool Update(const FileRecord& r, std::string* error) {
    sqlite3_stmt* s = update_->get();
    sqlite3_bind_int64(s, 1, static_cast<int64_t>(r.size));
    sqlite3_bind_int64(s, 2, r.mtime);
    sqlite3_bind_int64(s, 3, r.ctime);
    sqlite3_bind_int64(s, 4, r.atime);
    sqlite3_bind_int64(s, 5, static_cast<int64_t>(r.id.ino));
    if (!StepDone(s, error)) return false;
    if (sqlite3_changes(db_) != 1) {
      *error = "update matched no row";
      return false;
    }
    return true;
  }
  bool Begin(std::string* error) { return StepDone(begin_->get(), error); }
  bool Commit(std::string* error) { return StepDone(commit_->get(), error); }

  // Runs the search and materialises every hit into *rows.
  bool Search(SearchKind kind, std::vector<Row>* rows, std::string* error) {
    const SearchSpec& spec = GetSearchSpec(kind);
    sqlite3_stmt* s = searches_[static_cast<int>(kind)]->get();
    sqlite3_bind_int64(s, 1, static_cast<int64_t>(spec.min_size));
    if (spec.recent) sqlite3_bind_int64(s, 2, dataset_.options().now_ns - kNanosPerDay);
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
      Row& row = rows->emplace_back();
      row.id = sqlite3_column_int64(s, 0);
      row.path.assign(reinterpret_cast<const char*>(sqlite3_column_text(s, 1)),
                      static_cast<size_t>(sqlite3_column_bytes(s, 1)));
      row.name.assign(reinterpret_cast<const char*>(sqlite3_column_text(s, 2)),
                      static_cast<size_t>(sqlite3_column_bytes(s, 2)));
      row.parent = sqlite3_column_int64(s, 3);
      row.type = sqlite3_column_int64(s, 4);
      row.size = sqlite3_column_int64(s, 5);
      row.mtime = sqlite3_column_int64(s, 6);
      row.ctime = sqlite3_column_int64(s, 7);
      row.atime = sqlite3_column_int64(s, 8);
      row.uid = sqlite3_column_int64(s, 9);
      row.gid = sqlite3_column_int64(s, 10);
      row.mode = sqlite3_column_int64(s, 11);
      row.nlink = sqlite3_column_int64(s, 12);
    }
    sqlite3_reset(s);
    if (rc != SQLITE_DONE) {
      *error = std::string("search: ") + sqlite3_errmsg(db_);
      return false;
    }
    return true;
  }

  const Dataset& dataset() const { return dataset_; }
  uint64_t files() const { return files_; }
  double populate_seconds() const { return populate_seconds_; }
  uint64_t disk_bytes() const { return DiskUsage(dir_); }
  // False once an update benchmark changed the data: hit counts then differ from the oracle.
  bool pristine() const { return pristine_; }
  void set_dirty() { pristine_ = false; }

 private:
  explicit SqliteWorld(uint64_t files)
      : files_(files),
        dataset_(MakeDatasetOptions()),
        dir_(Config().run_dir + "/sqlite-" + std::to_string(files)) {}

  static std::map<uint64_t, std::unique_ptr<SqliteWorld>>& Worlds() {
    static auto* worlds = new std::map<uint64_t, std::unique_ptr<SqliteWorld>>();
    return *worlds;
  }

  std::string Build() {
    std::string error;
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
    std::filesystem::create_directories(dir_, ec);
    if (ec) return "create " + dir_ + ": " + ec.message();
    std::string path = dir_ + "/files.db";
    if (sqlite3_open(path.c_str(), &db_) != SQLITE_OK) {
      return "open " + path + ": " + (db_ ? sqlite3_errmsg(db_) : "out of memory");
    }
    if (!Exec("PRAGMA journal_mode=WAL", &error) ||
        !Exec("PRAGMA synchronous=NORMAL", &error) ||
        !Exec("PRAGMA cache_size=-65536", &error) ||
        !Exec("PRAGMA mmap_size=2147418112", &error) ||
        !Exec("PRAGMA temp_store=MEMORY", &error) ||
        !Exec("CREATE TABLE files (id INTEGER PRIMARY KEY, path TEXT NOT NULL, "
              "name TEXT NOT NULL, parent INTEGER, type INTEGER, size INTEGER, mtime INTEGER, "
              "ctime INTEGER, atime INTEGER, uid INTEGER, gid INTEGER, mode INTEGER, "
              "nlink INTEGER)",
              &error) ||
        !Exec("CREATE INDEX files_size ON files(size)", &error) ||
        !Exec("CREATE INDEX files_mtime ON files(mtime)", &error) ||
        !Exec("CREATE INDEX files_path ON files(path)", &error)) {
      return error;
    }
    begin_ = std::make_unique<Statement>();
    commit_ = std::make_unique<Statement>();
    update_ = std::make_unique<Statement>();
    Statement insert;
    if (!begin_->Prepare(db_, "BEGIN", &error) || !commit_->Prepare(db_, "COMMIT", &error) ||
        !update_->Prepare(db_,
                          "UPDATE files SET size=?1, mtime=?2, ctime=?3, atime=?4 WHERE id=?5",
                          &error) ||
        !insert.Prepare(db_,
                        std::string("INSERT INTO files (") + kColumns +
                            ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
                        &error)) {
      return error;
    }
    for (SearchKind kind : {SearchKind::kBigRecent, SearchKind::kOver16M}) {
      std::string sql = std::string("SELECT ") + kColumns + " FROM files WHERE size > ?1";
      if (GetSearchSpec(kind).recent) sql += " AND mtime > ?2";
      searches_.push_back(std::make_unique<Statement>());
      if (!searches_.back()->Prepare(db_, sql, &error)) return error;
    }

    std::fprintf(stderr, "sqlite: populating %" PRIu64 " files in %s ...\n", files_,
                 dir_.c_str());
    int64_t timed_ns = 0;
    std::vector<FileRecord> chunk;
    for (uint64_t begin = 0; begin < files_; begin += kPopulateBatch) {
      uint64_t end = std::min(files_, begin + kPopulateBatch);
      chunk.clear();
      for (uint64_t i = begin; i < end; ++i) chunk.push_back(dataset_.Record(i));
      int64_t t0 = NowNanos();
      if (!Begin(&error)) return error;
      sqlite3_stmt* s = insert.get();
      for (const FileRecord& r : chunk) {
        const std::string& p = r.paths[0];
        size_t slash = p.rfind('/');
        sqlite3_bind_int64(s, 1, static_cast<int64_t>(r.id.ino));
        sqlite3_bind_text(s, 2, p.data(), static_cast<int>(p.size()), SQLITE_STATIC);
        sqlite3_bind_text(s, 3, p.data() + slash + 1, static_cast<int>(p.size() - slash - 1),
                          SQLITE_STATIC);
        sqlite3_bind_int64(s, 4, static_cast<int64_t>(r.parent_ino));
        sqlite3_bind_int64(s, 5, static_cast<int64_t>(r.type));
        sqlite3_bind_int64(s, 6, static_cast<int64_t>(r.size));
        sqlite3_bind_int64(s, 7, r.mtime);
        sqlite3_bind_int64(s, 8, r.ctime);
        sqlite3_bind_int64(s, 9, r.atime);
        sqlite3_bind_int64(s, 10, r.uid);
        sqlite3_bind_int64(s, 11, r.gid);
        sqlite3_bind_int64(s, 12, r.mode);
        sqlite3_bind_int64(s, 13, r.nlink);
        if (!StepDone(s, &error)) return error;
      }
      if (!Commit(&error)) return error;
      timed_ns += NowNanos() - t0;
    }
    int64_t t0 = NowNanos();
    if (!Exec("ANALYZE", &error)) return error;
    timed_ns += NowNanos() - t0;
    populate_seconds_ = static_cast<double>(timed_ns) / 1e9;
    std::fprintf(stderr, "sqlite: populated %" PRIu64 " files in %.1f s (%.0f files/s), %.1f MB\n",
                 files_, populate_seconds_, static_cast<double>(files_) / populate_seconds_,
                 static_cast<double>(disk_bytes()) / 1e6);
    return "";
  }

  const uint64_t files_;
  const Dataset dataset_;
  const std::string dir_;
  sqlite3* db_ = nullptr;
  std::unique_ptr<Statement> begin_, commit_, update_;
  std::vector<std::unique_ptr<Statement>> searches_;  // by SearchKind
  double populate_seconds_ = 0;
  bool pristine_ = true;
  std::string error_;
};

void BM_SqliteSearch(benchmark::State& state, uint64_t files, SearchKind kind) {
  std::string error;
  SqliteWorld* world = SqliteWorld::Get(files, &error);
  if (world == nullptr) {
    Fail(state, error);
    return;
  }
  state.SetLabel(GetSearchSpec(kind).query);
  uint64_t hits = 0;
  {  // warm: the first run pulls the index pages into the page cache
    std::vector<Row> rows;
    if (!world->Search(kind, &rows, &error)) {
      Fail(state, error);
      return;
    }
  }
  for (auto _ : state) {
    std::vector<Row> rows;
    if (!world->Search(kind, &rows, &error)) {
      Fail(state, error);
      return;
    }
    hits = rows.size();
    benchmark::DoNotOptimize(rows.data());
  }
  state.counters["hits"] = static_cast<double>(hits);
  if (world->pristine()) {
    uint64_t expected = ExpectedHits(world->dataset(), files, kind);
    state.counters["expected_hits"] = static_cast<double>(expected);
    if (hits != expected) {
      error = "wrong hit count " + std::to_string(hits) + ", expected " + std::to_string(expected);
      Fail(state, error);
    }
  }
  state.counters["disk_bytes_per_file"] =
      static_cast<double>(world->disk_bytes()) / static_cast<double>(files);
  state.counters["populate_files_per_s"] =
      static_cast<double>(files) / world->populate_seconds();
}

void BM_SqliteUpdateLatency(benchmark::State& state, uint64_t files, Level level) {
  std::string error;
  SqliteWorld* world = SqliteWorld::Get(files, &error);
  if (world == nullptr || !world->SetLevel(level, &error)) {
    Fail(state, error);
    return;
  }
  world->set_dirty();
  state.SetLabel(level == Level::kSync ? "synchronous=FULL" : "synchronous=NORMAL");
  UpdatePool pool(world->dataset(), files, kPoolSize, /*seed=*/state.max_iterations);
  LatencyRecorder latencies(state.max_iterations);
  for (auto _ : state) {
    const FileRecord& r = pool.Next().record;
    int64_t t0 = NowNanos();
    bool ok = world->Begin(&error) && world->Update(r, &error) && world->Commit(&error);
    int64_t ns = NowNanos() - t0;
    if (!ok) {
      Fail(state, error);
      break;
    }
    state.SetIterationTime(static_cast<double>(ns) / 1e9);
    latencies.Add(ns);
  }
  latencies.Report(state);
}

void BM_SqliteBatchUpdate(benchmark::State& state, uint64_t files, Level level) {
  std::string error;
  SqliteWorld* world = SqliteWorld::Get(files, &error);
  if (world == nullptr || !world->SetLevel(level, &error)) {
    Fail(state, error);
    return;
  }
  world->set_dirty();
  state.SetLabel(level == Level::kSync ? "synchronous=FULL" : "synchronous=NORMAL");
  UpdatePool pool(world->dataset(), files, std::min<uint64_t>(files, kBatchPoolSize),
                  /*seed=*/state.max_iterations + 1);
  for (auto _ : state) {
    const std::vector<Update>& batch = pool.NextBatch(kBatchSize);
    int64_t t0 = NowNanos();
    bool ok = world->Begin(&error);
    for (size_t i = 0; ok && i < batch.size(); ++i) ok = world->Update(batch[i].record, &error);
    ok = ok && world->Commit(&error);
    int64_t ns = NowNanos() - t0;
    if (!ok) {
      Fail(state, error);
      break;
    }
    state.SetIterationTime(static_cast<double>(ns) / 1e9);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(kBatchSize));
  // Each transaction is committed inside the timed region: nothing is left to commit.
  if (state.iterations() > 0) {
    state.counters["sustained_per_s"] =
        benchmark::Counter(static_cast<double>(state.iterations()) * kBatchSize,
                           benchmark::Counter::kIsRate);
  }
}

std::string Name(const char* bench, const char* level, uint64_t files) {
  std::string name = std::string(bench) + "/SQLite/";
  if (level != nullptr) name += std::string(level) + "/";
  return name + "files:" + std::to_string(files);
}

}  // namespace

void RegisterSqliteSearch(uint64_t files, SearchKind kind) {
  benchmark::RegisterBenchmark(Name(GetSearchSpec(kind).name, nullptr, files).c_str(),
                               BM_SqliteSearch, files, kind)
      ->Unit(benchmark::kMillisecond);
}

void RegisterSqliteUpdateLatency(uint64_t files, Level level) {
  benchmark::RegisterBenchmark(Name("UpdateLatency", LevelName(level), files).c_str(),
                               BM_SqliteUpdateLatency, files, level)
      ->UseManualTime()
      ->Unit(benchmark::kMicrosecond);
}

void RegisterSqliteBatchUpdate(uint64_t files, Level level) {
  benchmark::RegisterBenchmark(Name("BatchUpdate", LevelName(level), files).c_str(),
                               BM_SqliteBatchUpdate, files, level)
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond);
}

void ReleaseSqlite() { SqliteWorld::ReleaseAll(); }

}  // namespace propeller::bench
