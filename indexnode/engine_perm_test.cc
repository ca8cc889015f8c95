// Credential filtering (docs/architecture.md §10): a search returns a path only if every ancestor
// directory grants the caller r and x. Checked against an independent oracle that walks the model's
// directories, over random trees, modes, owners and callers; also across chmod and reopen.
#include <gtest/gtest.h>

#include "indexnode/engine.h"
#include "indexnode/engine_test_util.h"

namespace propeller {
namespace {

using testing::kNow;
using testing::TempDir;

// Independent of DirTable: straight from POSIX's class selection.
bool OracleMayEnter(const FileRecord& d, const Credentials& c) {
  if (c.uid == 0) return true;
  unsigned shift = 0;
  if (c.uid == d.uid) {
    shift = 6;
  } else if (c.gid == d.gid ||
             std::count(c.groups.begin(), c.groups.end(), d.gid) > 0) {
    shift = 3;
  }
  unsigned bits = (d.mode >> shift) & 7u;
  return (bits & 4u) && (bits & 1u);
}

TEST(EnginePermissionTest, SearchShowsOnlyWhatTheCallerCouldWalkTo) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("PROPELLER_SEED=" + std::to_string(seed));
  Random rnd(seed);
  TempDir dir;
  EngineOptions o;
  o.data_dir = dir.path();
  auto engine = std::move(Engine::Open(o)).value();

  std::map<std::string, FileRecord> dirs;  // path -> record
  std::vector<FileRecord> files;
  uint64_t ino = 1;
  auto make_dir = [&](const std::string& path) {
    FileRecord d;
    d.id = FileId{1, ino++};
    d.paths = {path};
    d.type = FileType::kDirectory;
    d.uid = 1000 + static_cast<uint32_t>(rnd.Uniform(3));
    d.gid = 100 + static_cast<uint32_t>(rnd.Uniform(2));
    static const uint32_t kModes[] = {0755, 0700, 0750, 0711, 0705, 0555, 0644, 0777};
    d.mode = 040000 | kModes[rnd.Uniform(std::size(kModes))];
    dirs[path] = d;
    return d;
  };
  std::vector<Update> batch;
  auto put = [&](const FileRecord& r) {
    Update u;
    u.acg = 1 + r.id.ino % 3;
    u.record = r;
    batch.push_back(u);
  };
  FileRecord root = make_dir("/");
  root.mode = 040755;
  dirs["/"] = root;
  put(root);
  std::vector<std::string> dir_paths = {"/"};
  for (int i = 0; i < 30; ++i) {
    std::string parent = dir_paths[rnd.Uniform(dir_paths.size())];
    std::string path = (parent == "/" ? "" : parent) + "/d" + std::to_string(i);
    put(make_dir(path));
    dir_paths.push_back(path);
  }
  // One directory is deliberately missing from the index: nothing below it may show.
  dir_paths.push_back("/unindexed");
  for (int i = 0; i < 300; ++i) {
    std::string parent = dir_paths[rnd.Uniform(dir_paths.size())];
    FileRecord f;
    f.id = FileId{1, ino++};
    f.paths = {(parent == "/" ? "" : parent) + "/f" + std::to_string(i)};
    f.size = rnd.Uniform(1000);
    f.mode = 0100600;  // the file's own mode never matters, as with find
    files.push_back(f);
    put(f);
  }
  ASSERT_TRUE(engine->Apply(batch).ok());

  auto oracle = [&](const Credentials& c) {
    std::vector<std::string> out;
    auto visible = [&](const std::string& path) {
      if (c.uid == 0) return true;  // root may walk anywhere, indexed or not
      std::string_view p = path;
      while (p != "/") {
        p = PathParent(p);
        auto it = dirs.find(std::string(p));
        if (it == dirs.end() || !OracleMayEnter(it->second, c)) return false;
      }
      return true;
    };
    for (const auto& [path, d] : dirs) {
      if (visible(path)) out.push_back(path);
    }
    for (const FileRecord& f : files) {
      if (visible(f.paths[0])) out.push_back(f.paths[0]);
    }
    std::sort(out.begin(), out.end());
    return out;
  };
  auto check = [&](Engine* e) {
    for (int i = 0; i < 40; ++i) {
      Credentials c;
      c.uid = i == 0 ? 0 : 1000 + static_cast<uint32_t>(rnd.Uniform(4));
      c.gid = 100 + static_cast<uint32_t>(rnd.Uniform(3));
      if (rnd.OneIn(2)) c.groups = {100 + static_cast<uint32_t>(rnd.Uniform(3))};
      SearchRequest req;
      req.query = "size>=0";
      req.creds = c;
      req.now_ns = kNow;
      auto hits = e->SearchAll(req);
      ASSERT_TRUE(hits.ok());
      ASSERT_EQ(testing::HitPaths(*hits), oracle(c)) << "uid " << c.uid << " gid " << c.gid;
    }
  };
  check(engine.get());

  // chmod of directories is visible to the very next search, and after a reopen.
  batch.clear();
  for (int i = 0; i < 10; ++i) {
    auto it = dirs.begin();
    std::advance(it, static_cast<long>(rnd.Uniform(dirs.size())));
    it->second.mode = 040000 | (rnd.OneIn(2) ? 0700u : 0755u);
    put(it->second);
  }
  ASSERT_TRUE(engine->Apply(batch).ok());
  check(engine.get());
  engine.reset();
  engine = std::move(Engine::Open(o)).value();
  check(engine.get());
}

}  // namespace
}  // namespace propeller
