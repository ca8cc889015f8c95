// SQLite as a baseline, in the driver's process (it has no server): the schema of
// sql_common.h, WAL with synchronous=NORMAL (the same guarantee as Propeller's default level:
// nothing lost on a process crash, the last moments on power loss), 64 MiB page cache and
// memory-mapped reads as in bench/sqlite_bench.cc. Each Session is its own connection; writers
// wait for the database's single write lock (busy_timeout). Loading is one transaction of
// prepared INSERTs, indexes after, then ANALYZE. Restart closes and reopens the connections.
#include <sqlite3.h>

#include <filesystem>
#include <string>

#include "bench/eval/sql_common.h"

namespace propeller::eval {
namespace {

Status Error(const std::string& what, sqlite3* db) {
  return Status::IOError("sqlite: " + what + ": " + sqlite3_errmsg(db));
}

Status Exec(sqlite3* db, const std::string& sql) {
  char* msg = nullptr;
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &msg) != SQLITE_OK) {
    Status st = Status::IOError("sqlite: " + sql + ": " + (msg ? msg : "?"));
    sqlite3_free(msg);
    return st;
  }
  return Status::OK();
}

Result<sqlite3*> Open(const std::string& path) {
  sqlite3* db = nullptr;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) {
    Status st = Error("open " + path, db);
    sqlite3_close(db);
    return st;
  }
  for (const char* sql : {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL",
                          "PRAGMA cache_size=-65536", "PRAGMA mmap_size=2147418112",
                          "PRAGMA busy_timeout=60000"}) {
    Status st = Exec(db, sql);
    if (!st.ok()) {
      sqlite3_close(db);
      return st;
    }
  }
  return db;
}

class SqliteSession : public Session {
 public:
  SqliteSession(sqlite3* db, int64_t now_ns) : db_(db), now_ns_(now_ns) {}
  ~SqliteSession() override {
    for (sqlite3_stmt* s : search_) sqlite3_finalize(s);
    sqlite3_finalize(update_);
    sqlite3_close(db_);
  }

  Status Prepare() {
    if (sqlite3_prepare_v2(db_, kSqlUpdate, -1, &update_, nullptr) != SQLITE_OK) {
      return Error("prepare update", db_);
    }
    for (int k = 0; k < 4; ++k) {
      const std::string sql = SqlSearch(static_cast<QueryKind>(k), now_ns_, true);
      if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &search_[k], nullptr) != SQLITE_OK) {
        return Error("prepare " + sql, db_);
      }
    }
    return Status::OK();
  }

  Status Update(const FileRecord& r) override {
    sqlite3_bind_int64(update_, 1, static_cast<int64_t>(r.size));
    sqlite3_bind_int64(update_, 2, r.mtime);
    sqlite3_bind_int64(update_, 3, r.ctime);
    sqlite3_bind_int64(update_, 4, r.atime);
    sqlite3_bind_int64(update_, 5, static_cast<int64_t>(r.id.ino));
    const int rc = sqlite3_step(update_);
    sqlite3_reset(update_);
    if (rc != SQLITE_DONE) return Error("update", db_);
    if (sqlite3_changes(db_) != 1) return Status::Internal("sqlite: update matched no row");
    return Status::OK();
  }

  Result<uint64_t> Search(QueryKind kind) override {
    sqlite3_stmt* s = search_[static_cast<int>(kind)];
    uint64_t rows = 0;
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
      std::string path(reinterpret_cast<const char*>(sqlite3_column_text(s, 1)),
                       static_cast<size_t>(sqlite3_column_bytes(s, 1)));
      sink_ += path.size() + static_cast<uint64_t>(sqlite3_column_int64(s, 0) +
                                                   sqlite3_column_int64(s, 2) +
                                                   sqlite3_column_int64(s, 3) +
                                                   sqlite3_column_int64(s, 4));
      ++rows;
    }
    sqlite3_reset(s);
    if (rc != SQLITE_DONE) return Error("search", db_);
    return rows;
  }

 private:
  sqlite3* db_;
  int64_t now_ns_;
  sqlite3_stmt* update_ = nullptr;
  sqlite3_stmt* search_[4] = {nullptr, nullptr, nullptr, nullptr};
  uint64_t sink_ = 0;
};

class Sqlite : public System {
 public:
  explicit Sqlite(const SystemConfig& config)
      : config_(config), path_(config.work_dir + "/sqlite.db") {}

  std::string Name() const override { return "sqlite"; }

  Status Load(const bench::Dataset& ds, uint64_t files) override {
    std::filesystem::create_directories(config_.work_dir);
    auto db = Open(path_);
    if (!db.ok()) return db.status();
    Status st = LoadWith(*db, ds, files);
    sqlite3_close(*db);
    return st;
  }

  Status Attach(const bench::Dataset& /*ds*/) override {
    if (!std::filesystem::exists(path_)) return Status::NotFound(path_ + " (no kept run)");
    return Status::OK();
  }

  Result<std::unique_ptr<Session>> Connect() override {
    auto db = Open(path_);
    if (!db.ok()) return db.status();
    auto s = std::make_unique<SqliteSession>(*db, config_.now_ns);
    Status st = s->Prepare();
    if (!st.ok()) return st;
    return std::unique_ptr<Session>(std::move(s));
  }

  Status Restart(const std::function<void()>& between) override {
    between();  // no server: the sessions (connections) were closed by the caller
    return Status::OK();
  }

 private:
  Status Insert(sqlite3* db, const std::string& sql, const std::string& rows, int columns) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr) != SQLITE_OK) {
      return Error("prepare " + sql, db);
    }
    // rows: TSV lines (sql_common.h); every field is bound as text except all-digit ones.
    size_t pos = 0;
    Status st;
    while (st.ok() && pos < rows.size()) {
      const size_t eol = rows.find('\n', pos);
      size_t field_start = pos;
      for (int col = 1; col <= columns; ++col) {
        size_t end = rows.find(col == columns ? '\n' : '\t', field_start);
        const std::string field = rows.substr(field_start, end - field_start);
        const bool numeric = !field.empty() &&
                             field.find_first_not_of("-0123456789") == std::string::npos;
        if (numeric) {
          sqlite3_bind_int64(s, col, std::stoll(field));
        } else {
          sqlite3_bind_text(s, col, field.data(), static_cast<int>(field.size()),
                            SQLITE_TRANSIENT);
        }
        field_start = end + 1;
      }
      if (sqlite3_step(s) != SQLITE_DONE) st = Error("insert", db);
      sqlite3_reset(s);
      pos = eol + 1;
    }
    sqlite3_finalize(s);
    return st;
  }

  Status LoadWith(sqlite3* db, const bench::Dataset& ds, uint64_t files) {
    for (const char* sql : {
             "DROP TABLE IF EXISTS files", "DROP TABLE IF EXISTS paths",
             "DROP TABLE IF EXISTS keywords",
             "CREATE TABLE files (ino INTEGER PRIMARY KEY, parent INTEGER, type TEXT, size "
             "INTEGER, mtime INTEGER, ctime INTEGER, atime INTEGER, uid INTEGER, gid INTEGER, "
             "mode INTEGER, nlink INTEGER)",
             "CREATE TABLE paths (ino INTEGER NOT NULL, path TEXT NOT NULL, name TEXT NOT NULL)",
             "CREATE TABLE keywords (word TEXT NOT NULL, ino INTEGER NOT NULL, PRIMARY KEY "
             "(word, ino)) WITHOUT ROWID",
             "BEGIN"}) {
      Status st = Exec(db, sql);
      if (!st.ok()) return st;
    }
    std::string f, p, k;
    for (uint64_t i = 0; i < files; ++i) {
      const FileRecord r = ds.Record(i);
      AppendFileRow(r, &f);
      AppendPathRows(r, &p);
      AppendKeywordRows(r, &k);
      if (i % 10'000 == 9'999 || i + 1 == files) {
        Status st = Insert(db, "INSERT INTO files VALUES (?,?,?,?,?,?,?,?,?,?,?)", f, 11);
        if (st.ok()) st = Insert(db, "INSERT INTO paths VALUES (?,?,?)", p, 3);
        if (st.ok()) st = Insert(db, "INSERT INTO keywords VALUES (?,?)", k, 2);
        // A transaction per million files: in WAL mode one transaction's pages all stay in
        // the log until it commits (and a page written again after the cache spilled it takes
        // another frame), so loading 100 M files in one filled 23 GB of log in 22 minutes,
        // on its way past the disk. Committing lets the log checkpoint and start over.
        if (st.ok() && i % 1'000'000 == 999'999 && i + 1 < files) st = Exec(db, "COMMIT");
        if (st.ok() && i % 1'000'000 == 999'999 && i + 1 < files) st = Exec(db, "BEGIN");
        if (!st.ok()) return st;
        f.clear();
        p.clear();
        k.clear();
      }
    }
    Status st = Exec(db, "COMMIT");
    // The indexes after the rows, each in its own transaction (each a sort, then an append).
    for (const std::string& sql : SqlIndexStatements()) {
      if (st.ok()) st = Exec(db, sql);
    }
    if (st.ok()) st = Exec(db, "ANALYZE");
    return st;
  }

  SystemConfig config_;
  std::string path_;
};

}  // namespace

std::unique_ptr<System> MakeSqlite(const SystemConfig& config) {
  return std::make_unique<Sqlite>(config);
}

}  // namespace propeller::eval
