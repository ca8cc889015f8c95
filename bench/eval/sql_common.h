// What the SQL baselines share (system_mariadb.cc, system_postgres.cc, system_sqlite.cc): the
// schema — the paper's two-table layout plus a keyword table — the rows of a record, and the
// statements every client prepares.
//
//   files    (ino PK, parent, type, size, mtime, ctime, atime, uid, gid, mode, nlink)
//            the inode attributes; B-tree indexes on size, mtime, uid
//   paths    (ino, path, name)  one row per link; B-tree indexes on path (prefix and scope
//            searches) and name, plus ino for the join
//   keywords (word, ino) PK     the path's keyword tokens (PathKeywords), the equivalent of
//            Propeller's keyword hash; the primary key is the B-tree on word
// Times are int64 nanoseconds, as in FileRecord. Indexes are created after the bulk load.
#ifndef PROPELLER_BENCH_EVAL_SQL_COMMON_H_
#define PROPELLER_BENCH_EVAL_SQL_COMMON_H_

#include <string>
#include <vector>

#include "bench/eval/eval_system.h"

namespace propeller::eval {

// Tab-separated rows of one record, each ending in '\n' (the text format of both MariaDB's
// LOAD DATA and PostgreSQL's COPY; dataset paths hold no tab, newline or backslash).
void AppendFileRow(const FileRecord& r, std::string* out);
void AppendPathRows(const FileRecord& r, std::string* out);
void AppendKeywordRows(const FileRecord& r, std::string* out);

// Index DDL run after the load (same for the three SQL systems).
const std::vector<std::string>& SqlIndexStatements();

// The search statement of `kind`: path and attributes of every hit.
std::string SqlSearch(QueryKind kind, int64_t now_ns, bool sqlite);

inline constexpr const char* kSqlUpdate =
    "UPDATE files SET size = ?, mtime = ?, ctime = ?, atime = ? WHERE ino = ?";

// Number of result columns of SqlSearch: ino, path, size, mtime, uid.
inline constexpr int kSqlSearchColumns = 5;

}  // namespace propeller::eval

#endif  // PROPELLER_BENCH_EVAL_SQL_COMMON_H_
