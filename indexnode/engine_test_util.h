// Test helpers shared by the engine tests: a temp directory, a brute-force model of the
// index (the oracle), random records and random queries. Test-only; not in the library.
#ifndef PROPELLER_INDEXNODE_ENGINE_TEST_UTIL_H_
#define PROPELLER_INDEXNODE_ENGINE_TEST_UTIL_H_

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/query/query.h"
#include "common/random.h"
#include "common/temp_dir.h"
#include "common/record.h"
#include "indexnode/engine.h"

namespace propeller::testing {


inline constexpr int64_t kDay = 86'400'000'000'000;
// A fixed "now" for every query so ages are reproducible.
inline constexpr int64_t kNow = 1'767'225'600'000'000'000;  // 2026-01-01T00:00:00Z

// The oracle: the set of live records, and a brute-force search over it.
struct Model {
  std::map<FileId, FileRecord> files;
  std::map<FileId, uint64_t> acg_of;

  // Paths (sorted) matching `q` in `scope`: every link of a record that is in scope and
  // satisfies the query with its own name and path, as find lists them.
  std::vector<std::string> Search(const Query& q, const std::string& scope) const {
    std::vector<std::string> out;
    for (const auto& [id, rec] : files) {
      for (const std::string& p : rec.paths) {
        if (PathInScope(p, scope) && q.MatchesLink(rec, p)) out.push_back(p);
      }
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  // Like Search, ordered by `key` (ties by path, ascending) and cut to `limit` (0 = all).
  std::vector<std::string> SearchSorted(const Query& q, const std::string& scope,
                                        const std::string& key, bool desc, size_t limit) const {
    std::vector<std::pair<const FileRecord*, std::string>> hits;
    for (const auto& [id, rec] : files) {
      for (const std::string& p : rec.paths) {
        if (PathInScope(p, scope) && q.MatchesLink(rec, p)) hits.emplace_back(&rec, p);
      }
    }
    auto num = [&](const FileRecord& r) -> int64_t {
      if (key == "size") return static_cast<int64_t>(r.size);
      if (key == "mtime") return r.mtime;
      if (key == "ctime") return r.ctime;
      if (key == "atime") return r.atime;
      if (key == "uid") return r.uid;
      return r.gid;
    };
    std::stable_sort(hits.begin(), hits.end(), [&](const auto& a, const auto& b) {
      if (key == "path" || key == "name") {
        std::string ka = key == "path" ? a.second : std::string(PathBaseName(a.second));
        std::string kb = key == "path" ? b.second : std::string(PathBaseName(b.second));
        if (ka != kb) return desc ? ka > kb : ka < kb;
      } else if (num(*a.first) != num(*b.first)) {
        return desc ? num(*a.first) > num(*b.first) : num(*a.first) < num(*b.first);
      }
      return a.second < b.second;
    });
    std::vector<std::string> out;
    for (const auto& h : hits) {
      if (limit != 0 && out.size() == limit) break;
      out.push_back(h.second);
    }
    return out;
  }

  // Returns true when `u` is a delete that ends the file — unconditional, or conditional and
  // removing the record — after which its ACG has none of the file's edges.
  bool Apply(const Update& u) {
    switch (u.op) {
      case UpdateOp::kPut:
        files[u.record.id] = u.record;
        acg_of[u.record.id] = u.acg;
        break;
      case UpdateOp::kDelete: {
        auto it = files.find(u.record.id);
        if (it == files.end() || !DeleteApplies(it->second, u.record)) {
          return u.record.paths.empty();
        }
        files.erase(it);
        acg_of.erase(u.record.id);
        return true;
      }
      case UpdateOp::kSetAttrs: {
        auto it = files.find(u.record.id);
        if (it != files.end()) {
          for (const auto& [k, v] : u.record.attrs) it->second.attrs[k] = v;
        }
        break;
      }
      case UpdateOp::kRemoveAttrs: {
        auto it = files.find(u.record.id);
        if (it != files.end()) {
          for (const auto& [k, v] : u.record.attrs) it->second.attrs.erase(k);
        }
        break;
      }
      case UpdateOp::kAddEdge: break;
    }
    return false;
  }
};

// Drops the edges of which `id` is an end from `edges` (keyed (src, dst)), as an ACG does when
// it deletes the file.
template <typename EdgeMap>
void DropEdgesOf(const FileId& id, EdgeMap* edges) {
  std::erase_if(*edges, [&](const auto& kv) { return kv.first.first == id || kv.first.second == id; });
}

inline std::vector<std::string> HitPaths(const std::vector<SearchHit>& hits) {
  std::vector<std::string> out;
  for (const SearchHit& h : hits) out.push_back(h.path);
  std::sort(out.begin(), out.end());
  return out;
}

// Random namespaces with small value domains, so equal values, boundaries and ties are common.
class RecordGen {
 public:
  explicit RecordGen(uint64_t seed) : rnd_(seed) {}

  Random& rnd() { return rnd_; }

  std::string RandomDir() {
    static const char* kDirs[] = {"/src", "/src/lib", "/data", "/data/run42", "/home/ann",
                                  "/home/bob", "/tmp/Firefox-cache", "/a b", "/Ünïcode"};
    return kDirs[rnd_.Uniform(std::size(kDirs))];
  }
  std::string RandomName() {
    static const char* kStems[] = {"main", "parser", "foo", "Report", "firefox", "x", "data"};
    static const char* kExts[] = {".c", ".h", ".o", ".parquet", ".TXT", ".tar.gz", "", ".c++"};
    return std::string(kStems[rnd_.Uniform(std::size(kStems))]) + std::to_string(rnd_.Uniform(5)) +
           kExts[rnd_.Uniform(std::size(kExts))];
  }
  std::string RandomPath() { return RandomDir() + "/" + RandomName(); }

  void RandomizeAttrs(FileRecord* r) {
    static const uint64_t kSizes[] = {0, 1, 1023, 1024, 4096, 1 << 20, 16ull << 20,
                                      (16ull << 20) + 1, 1ull << 30, (1ull << 30) + 7};
    r->size = rnd_.OneIn(3) ? rnd_.Uniform(1ull << 31) : kSizes[rnd_.Uniform(std::size(kSizes))];
    // Whole days before kNow (boundaries of ages like 3d) or arbitrary nanoseconds.
    auto t = [&]() {
      return rnd_.OneIn(2) ? kNow - static_cast<int64_t>(rnd_.Uniform(10)) * kDay
                           : kNow - static_cast<int64_t>(rnd_.Uniform(10 * kDay));
    };
    r->mtime = t();
    r->ctime = t();
    r->atime = t();
    r->uid = static_cast<uint32_t>(1000 + rnd_.Uniform(4));
    r->gid = static_cast<uint32_t>(100 + rnd_.Uniform(3));
    r->mode = 0100000 | static_cast<uint32_t>(rnd_.Uniform(01000));
    r->nlink = static_cast<uint32_t>(r->paths.size());
    r->type = rnd_.OneIn(10) ? FileType::kSymlink : FileType::kRegular;
    if (rnd_.OneIn(2)) r->attrs["proj"] = std::string(rnd_.OneIn(2) ? "alpha" : "beta");
    if (rnd_.OneIn(2)) {
      if (rnd_.OneIn(3)) {
        r->attrs["prio"] = static_cast<double>(rnd_.Uniform(10)) + 0.5;
      } else {
        r->attrs["prio"] = static_cast<int64_t>(rnd_.Uniform(10));
      }
    }
    if (rnd_.OneIn(3)) r->attrs["note"] = static_cast<int64_t>(rnd_.Uniform(3));
  }

  FileRecord NewRecord(FileId id) {
    FileRecord r;
    r.id = id;
    r.paths = {RandomPath()};
    r.parent_ino = 1;
    RandomizeAttrs(&r);
    return r;
  }

  // A random query over every attribute and operator, with values drawn near the data.
  std::string RandomQuery(int depth = 0) {
    if (depth < 2 && rnd_.OneIn(3)) {
      std::string a = RandomQuery(depth + 1), b = RandomQuery(depth + 1);
      switch (rnd_.Uniform(4)) {
        case 0: return "(" + a + ") & (" + b + ")";
        case 1: return "(" + a + ") | (" + b + ")";
        case 2: return "!(" + a + ")";
        default: return a + ", " + b;
      }
    }
    static const char* kOps[] = {"=", "!=", "<", "<=", ">", ">="};
    std::string op = kOps[rnd_.Uniform(std::size(kOps))];
    switch (rnd_.Uniform(15)) {
      case 0: {
        static const char* kV[] = {"0", "1", "1023", "1k", "4k", "1m", "16m", "1g", "1073741831"};
        return "size" + op + kV[rnd_.Uniform(std::size(kV))];
      }
      case 1: case 2: {
        static const char* kA[] = {"mtime", "ctime", "atime"};
        static const char* kAge[] = {"1d", "3d", "2h", "1w", "36h"};
        static const char* kRel[] = {"<", "<=", ">", ">="};
        if (rnd_.OneIn(4)) {
          return std::string(kA[rnd_.Uniform(3)]) + kRel[rnd_.Uniform(4)] + "2025-12-28";
        }
        return std::string(kA[rnd_.Uniform(3)]) + kRel[rnd_.Uniform(4)] + kAge[rnd_.Uniform(5)];
      }
      case 3: return "uid" + op + std::to_string(999 + rnd_.Uniform(6));
      case 4: return "gid" + op + std::to_string(99 + rnd_.Uniform(5));
      case 5: {
        static const char* kK[] = {"firefox", "src", "c", "parquet", "main1", "nothing", "run42",
                                   "ünïcode", "tmp"};
        return std::string("keyword") + (rnd_.OneIn(4) ? "!=" : "=") + kK[rnd_.Uniform(9)];
      }
      case 6: {
        static const char* kE[] = {"c", "h", "parquet", "txt", "gz", "o", "TXT", ".c"};
        return std::string("ext") + (rnd_.OneIn(4) ? "!=" : "=") + kE[rnd_.Uniform(8)];
      }
      case 7: {
        if (rnd_.OneIn(2)) return "name=" + RandomName();
        static const char* kG[] = {"*.c", "main*", "*fire*", "foo", "x?.o", "[mp]*"};
        return std::string("name~\"") + kG[rnd_.Uniform(6)] + "\"";
      }
      case 8: {
        static const char* kP[] = {"/src/*", "/data/run42/*", "/home/*/*.c", "/tmp/*"};
        if (rnd_.OneIn(3)) return "path=\"" + RandomPath() + "\"";
        if (rnd_.OneIn(3)) return "path" + op + "\"/data\"";
        return std::string("path~\"") + kP[rnd_.Uniform(4)] + "\"";
      }
      case 9: return std::string("type") + (rnd_.OneIn(3) ? "!=" : "=") + (rnd_.OneIn(2) ? "f" : "l");
      case 10: return std::string("proj") + (rnd_.OneIn(3) ? "!=" : "=") +
                      (rnd_.OneIn(2) ? "alpha" : "beta");
      case 11: return "prio" + op + std::to_string(rnd_.Uniform(10)) + (rnd_.OneIn(3) ? ".5" : "");
      case 12: return "note" + op + std::to_string(rnd_.Uniform(3));
      case 13: return "mode" + op + "0" + std::to_string(rnd_.Uniform(8)) + "44";
      default: return "size>" + std::to_string(rnd_.Uniform(1ull << 31));
    }
  }

 private:
  Random rnd_;
};

}  // namespace propeller::testing

#endif  // PROPELLER_INDEXNODE_ENGINE_TEST_UTIL_H_
