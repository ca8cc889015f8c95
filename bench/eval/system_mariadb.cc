// MariaDB as a baseline (the paper's MySQL): InnoDB, the schema of sql_common.h, a server
// started by bench/eval/servers.sh (innodb_flush_log_at_trx_commit=2 and the buffer pool are
// set there), reached over its unix socket with libmariadb's prepared statements. An update is
// one autocommitted UPDATE; loading is LOAD DATA LOCAL INFILE of TSV files, indexes after.
#include <mysql.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "bench/eval/sql_common.h"

namespace propeller::eval {
namespace {

constexpr const char* kDb = "propeller_eval";

Status Error(const std::string& what, MYSQL* m) {
  return Status::IOError("mariadb: " + what + ": " + mysql_error(m));
}
Status StmtError(const std::string& what, MYSQL_STMT* s) {
  return Status::IOError("mariadb: " + what + ": " + mysql_stmt_error(s));
}

// Opens a connection over the socket; `db` may be null.
Result<MYSQL*> Open(const std::string& socket, const char* db) {
  MYSQL* m = mysql_init(nullptr);
  if (m == nullptr) return Status::ResourceExhausted("mysql_init");
  unsigned int protocol = MYSQL_PROTOCOL_SOCKET;
  mysql_options(m, MYSQL_OPT_PROTOCOL, &protocol);
  my_bool local_infile = 1;
  mysql_options(m, MYSQL_OPT_LOCAL_INFILE, &local_infile);
  // CLIENT_FOUND_ROWS: affected rows = matched rows, so an update that matched is checked.
  if (mysql_real_connect(m, "localhost", "root", nullptr, db, 0, socket.c_str(),
                         CLIENT_FOUND_ROWS) == nullptr) {
    Status st = Error("connect " + socket, m);
    mysql_close(m);
    return st;
  }
  return m;
}

Status Exec(MYSQL* m, const std::string& sql) {
  if (mysql_real_query(m, sql.data(), sql.size()) != 0) return Error(sql, m);
  MYSQL_RES* res = mysql_store_result(m);
  if (res != nullptr) mysql_free_result(res);
  return Status::OK();
}

class MariaSession : public Session {
 public:
  MariaSession(MYSQL* m, int64_t now_ns) : m_(m), now_ns_(now_ns) {}
  ~MariaSession() override {
    for (MYSQL_STMT*& s : search_) {
      if (s != nullptr) mysql_stmt_close(s);
    }
    if (update_ != nullptr) mysql_stmt_close(update_);
    mysql_close(m_);
  }

  Status Prepare() {
    update_ = mysql_stmt_init(m_);
    if (mysql_stmt_prepare(update_, kSqlUpdate, std::strlen(kSqlUpdate)) != 0) {
      return StmtError("prepare update", update_);
    }
    for (int k = 0; k < 4; ++k) {
      const std::string sql = SqlSearch(static_cast<QueryKind>(k), now_ns_, false);
      search_[k] = mysql_stmt_init(m_);
      if (mysql_stmt_prepare(search_[k], sql.data(), sql.size()) != 0) {
        return StmtError("prepare " + sql, search_[k]);
      }
    }
    return Status::OK();
  }

  Status Update(const FileRecord& r) override {
    // The data set's times fit 64 bits (FileTime is wider: times past 2262).
    long long v[5] = {static_cast<long long>(r.size), static_cast<long long>(r.mtime),
                      static_cast<long long>(r.ctime), static_cast<long long>(r.atime),
                      static_cast<long long>(r.id.ino)};
    MYSQL_BIND b[5];
    std::memset(b, 0, sizeof(b));
    for (int i = 0; i < 5; ++i) {
      b[i].buffer_type = MYSQL_TYPE_LONGLONG;
      b[i].buffer = &v[i];
    }
    if (mysql_stmt_bind_param(update_, b) != 0) return StmtError("bind", update_);
    if (mysql_stmt_execute(update_) != 0) return StmtError("update", update_);
    if (mysql_stmt_affected_rows(update_) != 1) {
      return Status::Internal("mariadb: update matched no row");
    }
    return Status::OK();
  }

  Result<uint64_t> Search(QueryKind kind) override {
    MYSQL_STMT* s = search_[static_cast<int>(kind)];
    if (mysql_stmt_execute(s) != 0) return StmtError("search", s);
    long long ino = 0, size = 0, mtime = 0, uid = 0;
    char path[4096];
    unsigned long path_len = 0;
    MYSQL_BIND b[kSqlSearchColumns];
    std::memset(b, 0, sizeof(b));
    long long* ints[] = {&ino, nullptr, &size, &mtime, &uid};
    for (int i = 0; i < kSqlSearchColumns; ++i) {
      if (i == 1) {
        b[i].buffer_type = MYSQL_TYPE_STRING;
        b[i].buffer = path;
        b[i].buffer_length = sizeof(path);
        b[i].length = &path_len;
      } else {
        b[i].buffer_type = MYSQL_TYPE_LONGLONG;
        b[i].buffer = ints[i];
      }
    }
    if (mysql_stmt_bind_result(s, b) != 0) return StmtError("bind result", s);
    uint64_t rows = 0;
    for (;;) {
      const int rc = mysql_stmt_fetch(s);
      if (rc == MYSQL_NO_DATA) break;
      if (rc == 1) {
        Status st = StmtError("fetch", s);
        mysql_stmt_free_result(s);
        return st;
      }
      ++rows;  // rc 0 or MYSQL_DATA_TRUNCATED (never: paths are < 4 KiB)
    }
    mysql_stmt_free_result(s);
    return rows;
  }

 private:
  MYSQL* m_;
  int64_t now_ns_;
  MYSQL_STMT* update_ = nullptr;
  MYSQL_STMT* search_[4] = {nullptr, nullptr, nullptr, nullptr};
};

class MariaDb : public System {
 public:
  explicit MariaDb(const SystemConfig& config) : config_(config) {}

  std::string Name() const override { return "mariadb"; }

  Status Load(const bench::Dataset& ds, uint64_t files) override {
    auto m = Open(config_.mariadb_socket, nullptr);
    if (!m.ok()) return m.status();
    MYSQL* c = *m;
    Status st = LoadWith(c, ds, files);
    mysql_close(c);
    return st;
  }

  Status Drop() override {
    auto m = Open(config_.mariadb_socket, nullptr);
    if (!m.ok()) return m.status();
    Status st = Exec(*m, std::string("DROP DATABASE IF EXISTS ") + kDb);
    mysql_close(*m);
    return st;
  }

  Result<std::unique_ptr<Session>> Connect() override {
    auto m = Open(config_.mariadb_socket, kDb);
    if (!m.ok()) return m.status();
    auto s = std::make_unique<MariaSession>(*m, config_.now_ns);
    Status st = s->Prepare();
    if (!st.ok()) return st;
    return std::unique_ptr<Session>(std::move(s));
  }

  Status Restart(const std::function<void()>& between) override {
    if (std::system((config_.servers_sh + " stop mariadb").c_str()) != 0) {
      return Status::IOError("servers.sh stop mariadb failed");
    }
    between();
    if (std::system((config_.servers_sh + " start mariadb").c_str()) != 0) {
      return Status::IOError("servers.sh start mariadb failed");
    }
    return Status::OK();
  }

 private:
  Status LoadWith(MYSQL* c, const bench::Dataset& ds, uint64_t files) {
    const std::string db = kDb;
    for (const std::string& sql : {
             "DROP DATABASE IF EXISTS " + db, "CREATE DATABASE " + db, "USE " + db,
             std::string("CREATE TABLE files (ino BIGINT UNSIGNED PRIMARY KEY, parent BIGINT "
                         "UNSIGNED, type CHAR(1), size BIGINT UNSIGNED, mtime BIGINT, ctime "
                         "BIGINT, atime BIGINT, uid INT UNSIGNED, gid INT UNSIGNED, mode INT "
                         "UNSIGNED, nlink INT UNSIGNED) ENGINE=InnoDB"),
             // VARBINARY: bytewise comparison, like Propeller's paths (and LIKE case-sensitive).
             std::string("CREATE TABLE paths (ino BIGINT UNSIGNED NOT NULL, path VARBINARY(1024) "
                         "NOT NULL, name VARBINARY(255) NOT NULL) ENGINE=InnoDB"),
             std::string("CREATE TABLE keywords (word VARBINARY(255) NOT NULL, ino BIGINT "
                         "UNSIGNED NOT NULL, PRIMARY KEY (word, ino)) ENGINE=InnoDB"),
             std::string("SET unique_checks = 0")}) {
      Status st = Exec(c, sql);
      if (!st.ok()) return st;
    }
    // TSV files in the work directory, written in chunks, then one LOAD DATA per table.
    const std::string dir = config_.work_dir + "/mariadb-load";
    std::filesystem::create_directories(dir);
    const char* tables[] = {"files", "paths", "keywords"};
    FILE* out[3];
    for (int t = 0; t < 3; ++t) {
      out[t] = std::fopen((dir + "/" + tables[t] + ".tsv").c_str(), "w");
      if (out[t] == nullptr) return Status::IOError("cannot write " + dir);
    }
    std::string buf[3];
    for (uint64_t i = 0; i < files; ++i) {
      const FileRecord r = ds.Record(i);
      AppendFileRow(r, &buf[0]);
      AppendPathRows(r, &buf[1]);
      AppendKeywordRows(r, &buf[2]);
      if (i % 10'000 == 9'999 || i + 1 == files) {
        for (int t = 0; t < 3; ++t) {
          std::fwrite(buf[t].data(), 1, buf[t].size(), out[t]);
          buf[t].clear();
        }
      }
    }
    for (FILE* f : out) std::fclose(f);
    for (const char* t : tables) {
      Status st = Exec(c, std::string("LOAD DATA LOCAL INFILE '") + dir + "/" + t + ".tsv' INTO TABLE " +
                              t + " FIELDS TERMINATED BY '\\t' ESCAPED BY '' LINES TERMINATED BY '\\n'");
      if (!st.ok()) return st;
    }
    std::filesystem::remove_all(dir);
    for (const std::string& sql : SqlIndexStatements()) {
      Status st = Exec(c, sql);
      if (!st.ok()) return st;
    }
    return Exec(c, "ANALYZE TABLE files, paths, keywords");
  }

  SystemConfig config_;
};

}  // namespace

std::unique_ptr<System> MakeMariaDb(const SystemConfig& config) {
  return std::make_unique<MariaDb>(config);
}

}  // namespace propeller::eval
