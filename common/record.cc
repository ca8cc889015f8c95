// Path helpers of the data model (record.h). Paths are byte strings: nothing here decodes
// UTF-8, so any byte sequence is handled without error.
#include "common/record.h"

#include <algorithm>
#include <cstdint>

namespace propeller {
namespace {

// Not PATH_MAX: a file system takes names of up to 255 bytes at any depth, and the mount
// reaches (and indexes) files whose paths no single system call takes (client/fuse/
// backing_tree.h). The bound only keeps one record within reason; a query names no longer
// path (kMaxQueryBytes).
constexpr size_t kMaxPathBytes = 64 * 1024;

char AsciiLower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

}  // namespace

std::string_view PathBaseName(std::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

std::string_view PathParent(std::string_view path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string_view::npos) return std::string_view();
  if (slash == 0) return path.substr(0, 1);
  return path.substr(0, slash);
}

std::string NameExtension(std::string_view name) {
  name = PathBaseName(name);  // tolerate a whole path
  // Leading dots mark hidden files, not extensions: ".bashrc" has none, ".tar.gz" has "gz".
  const size_t first = name.find_first_not_of('.');
  if (first == std::string_view::npos) return std::string();
  name.remove_prefix(first);
  const size_t dot = name.rfind('.');
  if (dot == std::string_view::npos) return std::string();
  std::string ext(name.substr(dot + 1));
  for (char& c : ext) c = AsciiLower(c);
  return ext;
}

bool PathInScope(std::string_view path, std::string_view scope) {
  // A trailing slash on the scope is accepted ("/a/" means "/a"); "/" then becomes "", which
  // the check below treats as containing every absolute path.
  while (!scope.empty() && scope.back() == '/') scope.remove_suffix(1);
  if (path.substr(0, scope.size()) != scope) return false;
  return path.size() == scope.size() || path[scope.size()] == '/';
}

std::vector<std::string> PathKeywords(std::string_view path) {
  std::vector<std::string> tokens;
  std::string lowered;
  ForEachPathToken(path, [&](std::string_view token) {
    lowered.assign(token);
    for (char& c : lowered) c = AsciiLower(c);
    // Paths have few tokens (typically < 10), so a linear scan beats building a hash set.
    if (std::find(tokens.begin(), tokens.end(), lowered) == tokens.end()) tokens.push_back(lowered);
  });
  return tokens;
}

bool PathHasKeyword(std::string_view path, std::string_view token) {
  if (token.empty()) return false;
  size_t i = 0;
  while (i < path.size()) {
    if (!IsPathTokenByte(path[i])) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < path.size() && IsPathTokenByte(path[end])) ++end;
    if (end - i == token.size()) {
      size_t k = 0;
      while (k < token.size() && AsciiLower(path[i + k]) == token[k]) ++k;
      if (k == token.size()) return true;
    }
    i = end;
  }
  return false;
}

std::string ValidatePath(std::string_view path) {
  if (path.empty()) return "path is empty";
  if (path.size() > kMaxPathBytes) return "path is longer than 65536 bytes";
  if (path.front() != '/') return "path is not absolute";
  if (path.find('\0') != std::string_view::npos) return "path contains a NUL byte";
  if (path.size() == 1) return std::string();  // the root
  if (path.back() == '/') return "path ends with a slash";
  size_t start = 1;
  for (;;) {
    const size_t end = path.find('/', start);
    const std::string_view component =
        path.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    if (component.empty()) return "path has an empty component";
    if (component == "." || component == "..") return "path has a '.' or '..' component";
    if (end == std::string_view::npos) return std::string();
    start = end + 1;
  }
}

bool DeleteApplies(const FileRecord& stored, const FileRecord& cond) {
  if (cond.paths.empty() || stored.ctime < cond.ctime) return true;
  for (const std::string& p : cond.paths) {
    if (std::find(stored.paths.begin(), stored.paths.end(), p) != stored.paths.end()) return true;
  }
  return false;
}

void ApplyToState(UpdateOp op, const FileRecord& rec, std::optional<FileRecord>* state) {
  switch (op) {
    case UpdateOp::kPut:
      *state = rec;
      return;
    case UpdateOp::kDelete:
      if (*state && DeleteApplies(**state, rec)) state->reset();
      return;
    case UpdateOp::kSetAttrs:
      if (*state) {
        for (const auto& [name, value] : rec.attrs) (*state)->attrs[name] = value;
      }
      return;
    case UpdateOp::kRemoveAttrs:
      if (*state) {
        for (const auto& [name, value] : rec.attrs) (*state)->attrs.erase(name);
      }
      return;
    case UpdateOp::kAddEdge:
      return;
  }
}

const char* IndexTypeName(IndexType type) {
  switch (type) {
    case IndexType::kBTree:
      return "btree";
    case IndexType::kHash:
      return "hash";
    case IndexType::kKdTree:
      return "kdtree";
  }
  return "unknown";
}

Result<IndexType> ParseIndexType(std::string_view name) {
  for (IndexType t : {IndexType::kBTree, IndexType::kHash, IndexType::kKdTree}) {
    if (name == IndexTypeName(t)) return t;
  }
  return Status::InvalidArgument("unknown index type '" + std::string(name) +
                                 "' (expected btree, hash or kdtree)");
}

Status CheckSortKey(std::string_view key) {
  static constexpr std::string_view kKeys[] = {"", "size", "mtime", "ctime", "atime",
                                               "uid", "gid", "path", "name"};
  for (std::string_view k : kKeys) {
    if (k == key) return Status::OK();
  }
  return Status::InvalidArgument("cannot sort by '" + std::string(key) +
                                 "' (use size, mtime, ctime, atime, uid, gid, path or name)");
}

std::string FileTimeToString(FileTime t) {
  if (t == 0) return "0";
  const bool negative = t < 0;
  std::string digits;
  while (t != 0) {
    const int d = static_cast<int>(t % 10);
    digits.push_back(static_cast<char>('0' + (d < 0 ? -d : d)));
    t /= 10;
  }
  if (negative) digits.push_back('-');
  return std::string(digits.rbegin(), digits.rend());
}

namespace {

FileTime SortNumber(std::string_view key, const FileRecord& r) {
  if (key == "size") return static_cast<FileTime>(r.size);
  if (key == "mtime") return r.mtime;
  if (key == "ctime") return r.ctime;
  if (key == "atime") return r.atime;
  if (key == "uid") return r.uid;
  if (key == "gid") return r.gid;
  return 0;
}

}  // namespace

bool SortsBefore(std::string_view key, bool descending, std::string_view path_a,
                 const FileRecord& a, std::string_view path_b, const FileRecord& b) {
  if (key == "path" || key == "name") {
    std::string_view ka = key == "path" ? path_a : PathBaseName(path_a);
    std::string_view kb = key == "path" ? path_b : PathBaseName(path_b);
    if (ka != kb) return descending ? ka > kb : ka < kb;
  } else if (!key.empty()) {
    const FileTime na = SortNumber(key, a), nb = SortNumber(key, b);
    if (na != nb) return descending ? na > nb : na < nb;
  }
  return path_a < path_b;
}

bool IsBuiltinAttrName(std::string_view name) {
  // The attribute names and aliases of the query language (common/query/resolve.cc; its
  // parser test checks that the two lists agree).
  static constexpr std::string_view kNames[] = {
      "size", "mtime", "ctime", "atime", "uid",  "gid",   "mode",  "nlink", "type",  "name",
      "ext",  "path",  "keyword", "user", "owner", "group", "perm", "iname", "ipath",
  };
  return std::find(std::begin(kNames), std::end(kNames), name) != std::end(kNames);
}

std::string CheckUserAttrName(std::string_view name) {
  constexpr size_t kMaxLength = 64;
  if (name.empty() || name.size() > kMaxLength) return "a name must be 1-64 characters long";
  if (name[0] < 'a' || name[0] > 'z') return "a name must start with a letter a-z";
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
                    c == '-';
    if (!ok) return "a name may contain only a-z, 0-9, '_', '.' and '-'";
  }
  if (IsBuiltinAttrName(name)) {
    return "'" + std::string(name) + "' is a built-in attribute of the query language";
  }
  return "";
}

std::string CheckNewIndexName(std::string_view name) {
  if (name == "path" || name == "keyword") return "";
  const std::string why = CheckUserAttrName(name);
  if (why.empty()) return "";
  if (IsBuiltinAttrName(name)) {
    return "'" + std::string(name) + "' is a built-in attribute and cannot name an index";
  }
  return "index " + why.substr(2);  // "a name must ..." -> "index name must ..."
}

}  // namespace propeller
