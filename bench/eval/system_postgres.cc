// PostgreSQL as a baseline: the schema of sql_common.h, a server started by
// bench/eval/servers.sh (synchronous_commit=off, wal_writer_delay=10ms, shared_buffers set
// there), reached over its unix socket with libpq prepared statements. An update is one
// autocommitted UPDATE; loading is COPY FROM STDIN, indexes after, then VACUUM ANALYZE (the
// documentation's advice after a bulk load).
#include <libpq-fe.h>

#include <cstdlib>
#include <string>

#include "bench/eval/sql_common.h"

namespace propeller::eval {
namespace {

constexpr const char* kDb = "propeller_eval";

Status Error(const std::string& what, PGconn* c) {
  return Status::IOError("postgres: " + what + ": " + PQerrorMessage(c));
}

Result<PGconn*> Open(const SystemConfig& config, const char* db) {
  const std::string info = "host=" + config.postgres_socket_dir +
                           " port=" + std::to_string(config.postgres_port) +
                           " user=postgres dbname=" + db;
  PGconn* c = PQconnectdb(info.c_str());
  if (PQstatus(c) != CONNECTION_OK) {
    Status st = Error("connect " + info, c);
    PQfinish(c);
    return st;
  }
  return c;
}

Status Exec(PGconn* c, const std::string& sql) {
  PGresult* r = PQexec(c, sql.c_str());
  const ExecStatusType t = PQresultStatus(r);
  PQclear(r);
  if (t != PGRES_COMMAND_OK && t != PGRES_TUPLES_OK) return Error(sql, c);
  return Status::OK();
}

// Replaces "?" placeholders by $1, $2, ...
std::string Numbered(const std::string& sql) {
  std::string out;
  int n = 0;
  for (char ch : sql) {
    if (ch == '?') {
      out += "$" + std::to_string(++n);
    } else {
      out += ch;
    }
  }
  return out;
}

class PgSession : public Session {
 public:
  PgSession(PGconn* c, int64_t now_ns) : c_(c), now_ns_(now_ns) {}
  ~PgSession() override { PQfinish(c_); }

  Status Prepare() {
    PGresult* r = PQprepare(c_, "upd", Numbered(kSqlUpdate).c_str(), 5, nullptr);
    const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    if (!ok) return Error("prepare update", c_);
    for (int k = 0; k < 4; ++k) {
      const std::string name = "s" + std::to_string(k);
      r = PQprepare(c_, name.c_str(), SqlSearch(static_cast<QueryKind>(k), now_ns_, false).c_str(),
                    0, nullptr);
      const bool good = PQresultStatus(r) == PGRES_COMMAND_OK;
      PQclear(r);
      if (!good) return Error("prepare search", c_);
    }
    return Status::OK();
  }

  Status Update(const FileRecord& rec) override {
    // The data set's times fit 64 bits (FileTime is wider: times past 2262).
    const std::string v[5] = {std::to_string(rec.size),
                              std::to_string(static_cast<int64_t>(rec.mtime)),
                              std::to_string(static_cast<int64_t>(rec.ctime)),
                              std::to_string(static_cast<int64_t>(rec.atime)),
                              std::to_string(rec.id.ino)};
    const char* params[5];
    for (int i = 0; i < 5; ++i) params[i] = v[i].c_str();
    PGresult* r = PQexecPrepared(c_, "upd", 5, params, nullptr, nullptr, 0);
    const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    const std::string tuples = ok ? PQcmdTuples(r) : "";
    PQclear(r);
    if (!ok) return Error("update", c_);
    if (tuples != "1") return Status::Internal("postgres: update matched " + tuples + " rows");
    return Status::OK();
  }

  Result<uint64_t> Search(QueryKind kind) override {
    const std::string name = "s" + std::to_string(static_cast<int>(kind));
    PGresult* r = PQexecPrepared(c_, name.c_str(), 0, nullptr, nullptr, nullptr, 0);
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
      PQclear(r);
      return Error("search", c_);
    }
    // Materialise every hit as the other systems do: the path and the numbers.
    const int rows = PQntuples(r);
    uint64_t checksum = 0;
    for (int i = 0; i < rows; ++i) {
      std::string path = PQgetvalue(r, i, 1);
      checksum += path.size() + std::strtoull(PQgetvalue(r, i, 0), nullptr, 10) +
                  std::strtoull(PQgetvalue(r, i, 2), nullptr, 10) +
                  static_cast<uint64_t>(std::strtoll(PQgetvalue(r, i, 3), nullptr, 10)) +
                  std::strtoull(PQgetvalue(r, i, 4), nullptr, 10);
    }
    sink_ += checksum;
    PQclear(r);
    return static_cast<uint64_t>(rows);
  }

 private:
  PGconn* c_;
  int64_t now_ns_;
  uint64_t sink_ = 0;  // keeps the materialisation from being optimised away
};

class Postgres : public System {
 public:
  explicit Postgres(const SystemConfig& config) : config_(config) {}

  std::string Name() const override { return "postgres"; }

  Status Load(const bench::Dataset& ds, uint64_t files) override {
    {
      auto admin = Open(config_, "postgres");
      if (!admin.ok()) return admin.status();
      Status st = Exec(*admin, std::string("DROP DATABASE IF EXISTS ") + kDb);
      if (st.ok()) st = Exec(*admin, std::string("CREATE DATABASE ") + kDb);
      PQfinish(*admin);
      if (!st.ok()) return st;
    }
    auto c = Open(config_, kDb);
    if (!c.ok()) return c.status();
    Status st = LoadWith(*c, ds, files);
    PQfinish(*c);
    return st;
  }

  Status Drop() override {
    auto admin = Open(config_, "postgres");
    if (!admin.ok()) return admin.status();
    Status st = Exec(*admin, std::string("DROP DATABASE IF EXISTS ") + kDb);
    PQfinish(*admin);
    return st;
  }

  Result<std::unique_ptr<Session>> Connect() override {
    auto c = Open(config_, kDb);
    if (!c.ok()) return c.status();
    auto s = std::make_unique<PgSession>(*c, config_.now_ns);
    Status st = s->Prepare();
    if (!st.ok()) return st;
    return std::unique_ptr<Session>(std::move(s));
  }

  Status Restart(const std::function<void()>& between) override {
    if (std::system((config_.servers_sh + " stop postgres").c_str()) != 0) {
      return Status::IOError("servers.sh stop postgres failed");
    }
    between();
    if (std::system((config_.servers_sh + " start postgres").c_str()) != 0) {
      return Status::IOError("servers.sh start postgres failed");
    }
    return Status::OK();
  }

 private:
  Status Copy(PGconn* c, const std::string& table, const bench::Dataset& ds, uint64_t files,
              void (*append)(const FileRecord&, std::string*)) {
    PGresult* r = PQexec(c, ("COPY " + table + " FROM STDIN").c_str());
    const bool ok = PQresultStatus(r) == PGRES_COPY_IN;
    PQclear(r);
    if (!ok) return Error("COPY " + table, c);
    std::string buf;
    for (uint64_t i = 0; i < files; ++i) {
      append(ds.Record(i), &buf);
      if (buf.size() > (1 << 20) || i + 1 == files) {
        if (PQputCopyData(c, buf.data(), static_cast<int>(buf.size())) != 1) {
          return Error("copy data", c);
        }
        buf.clear();
      }
    }
    if (PQputCopyEnd(c, nullptr) != 1) return Error("copy end", c);
    r = PQgetResult(c);
    const bool done = PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    while ((r = PQgetResult(c)) != nullptr) PQclear(r);
    if (!done) return Error("COPY " + table, c);
    return Status::OK();
  }

  Status LoadWith(PGconn* c, const bench::Dataset& ds, uint64_t files) {
    for (const char* sql : {
             "CREATE TABLE files (ino BIGINT PRIMARY KEY, parent BIGINT, type CHAR(1), size "
             "BIGINT, mtime BIGINT, ctime BIGINT, atime BIGINT, uid BIGINT, gid BIGINT, mode "
             "BIGINT, nlink BIGINT)",
             // COLLATE "C": bytewise order, so the B-tree serves prefix searches.
             "CREATE TABLE paths (ino BIGINT NOT NULL, path TEXT COLLATE \"C\" NOT NULL, name "
             "TEXT COLLATE \"C\" NOT NULL)",
             "CREATE TABLE keywords (word TEXT COLLATE \"C\" NOT NULL, ino BIGINT NOT NULL)"}) {
      Status st = Exec(c, sql);
      if (!st.ok()) return st;
    }
    Status st = Copy(c, "files", ds, files, AppendFileRow);
    if (st.ok()) st = Copy(c, "paths", ds, files, AppendPathRows);
    if (st.ok()) st = Copy(c, "keywords", ds, files, AppendKeywordRows);
    if (st.ok()) st = Exec(c, "ALTER TABLE keywords ADD PRIMARY KEY (word, ino)");
    for (const std::string& sql : SqlIndexStatements()) {
      if (st.ok()) st = Exec(c, sql);
    }
    if (st.ok()) st = Exec(c, "VACUUM ANALYZE");
    return st;
  }

  SystemConfig config_;
};

}  // namespace

std::unique_ptr<System> MakePostgres(const SystemConfig& config) {
  return std::make_unique<Postgres>(config);
}

}  // namespace propeller::eval
