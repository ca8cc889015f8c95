#include "bench/eval/sql_common.h"

namespace propeller::eval {

void AppendFileRow(const FileRecord& r, std::string* out) {
  *out += std::to_string(r.id.ino);
  *out += '\t';
  *out += std::to_string(r.parent_ino);
  *out += '\t';
  *out += static_cast<char>(r.type);
  // The data set's times fit 64 bits (FileTime is wider: times past 2262).
  for (int64_t v : {static_cast<int64_t>(r.size), static_cast<int64_t>(r.mtime),
                    static_cast<int64_t>(r.ctime), static_cast<int64_t>(r.atime),
                    static_cast<int64_t>(r.uid), static_cast<int64_t>(r.gid),
                    static_cast<int64_t>(r.mode), static_cast<int64_t>(r.nlink)}) {
    *out += '\t';
    *out += std::to_string(v);
  }
  *out += '\n';
}

void AppendPathRows(const FileRecord& r, std::string* out) {
  for (const std::string& p : r.paths) {
    *out += std::to_string(r.id.ino);
    *out += '\t';
    *out += p;
    *out += '\t';
    *out += PathBaseName(p);
    *out += '\n';
  }
}

void AppendKeywordRows(const FileRecord& r, std::string* out) {
  std::vector<std::string> words;
  for (const std::string& p : r.paths) {
    for (std::string& w : PathKeywords(p)) {
      bool seen = false;
      for (const std::string& x : words) seen = seen || x == w;
      if (!seen) words.push_back(std::move(w));
    }
  }
  for (const std::string& w : words) {
    *out += w;
    *out += '\t';
    *out += std::to_string(r.id.ino);
    *out += '\n';
  }
}

const std::vector<std::string>& SqlIndexStatements() {
  static const std::vector<std::string> kStatements = {
      "CREATE INDEX files_size ON files (size)",
      "CREATE INDEX files_mtime ON files (mtime)",
      "CREATE INDEX files_uid ON files (uid)",
      "CREATE INDEX paths_ino ON paths (ino)",
      "CREATE INDEX paths_path ON paths (path)",
      "CREATE INDEX paths_name ON paths (name)",
  };
  return kStatements;
}

std::string SqlSearch(QueryKind kind, int64_t now_ns, bool sqlite) {
  std::string sql =
      "SELECT f.ino, p.path, f.size, f.mtime, f.uid FROM files f JOIN paths p ON p.ino = f.ino";
  if (SqlNeedsKeywords(kind)) sql += " JOIN keywords k ON k.ino = f.ino";
  return sql + " WHERE " + SqlCondition(kind, now_ns, sqlite);
}

}  // namespace propeller::eval
