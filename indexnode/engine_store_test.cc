// The physical store is bounded (indexnode/store.h): an index node holds the same few LMDB
// environments, descriptors and maps whether it has 10 ACGs or 10,000, also while a search
// touches every one of them, and while the cache of open ACGs closes and reopens them.
// Oracles: the kernel (/proc/self/fd, /proc/self/maps) for what the process holds, and the
// updates the test applied for what the searches answer.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "indexnode/engine.h"
#include "indexnode/engine_test_util.h"

namespace propeller {
namespace {

namespace fs = std::filesystem;
using testing::kNow;
using testing::TempDir;

constexpr unsigned kShards = 2;

// Descriptors of this process open on files below `dir`.
size_t DescriptorsBelow(const std::string& dir) {
  size_t n = 0;
  for (const auto& e : fs::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const fs::path target = fs::read_symlink(e.path(), ec);
    if (!ec && target.string().starts_with(dir + "/")) ++n;
  }
  return n;
}

// Mappings of this process of LMDB files below `dir` (*.mdb).
size_t MapsBelow(const std::string& dir) {
  std::ifstream in("/proc/self/maps");
  std::string line;
  size_t n = 0;
  while (std::getline(in, line)) {
    const size_t slash = line.find('/');
    if (slash == std::string::npos) continue;
    const std::string path = line.substr(slash);
    if (path.starts_with(dir + "/") && path.ends_with(".mdb")) ++n;
  }
  return n;
}

struct Held {
  size_t environments, descriptors, maps;
};

class EngineStoreTest : public ::testing::TestWithParam<uint64_t> {};

TEST_P(EngineStoreTest, TheStoreHoldsTheSameWhateverTheNumberOfAcgs) {
  const uint64_t acgs = GetParam();
  TempDir dir;
  EngineOptions o;
  o.data_dir = dir.path();
  o.background_commit = false;
  o.store_shards = kShards;
  o.max_open_acgs = 64;  // a search over every ACG closes and reopens most of them
  std::vector<Held> seen;
  auto held = [&](Engine* e) {
    seen.push_back(Held{e->Stats().store_environments, DescriptorsBelow(dir.path() + "/store"),
                        MapsBelow(dir.path() + "/store")});
  };
  std::set<std::string> want, want_keyword;
  {
    auto engine = Engine::Open(o);
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    std::vector<Update> batch;
    for (uint64_t acg = 1; acg <= acgs; ++acg) {
      for (uint64_t i = 0; i < 2; ++i) {
        Update u;
        u.acg = acg;
        u.record.id = FileId{1, acg * 10 + i};
        u.record.paths = {"/a" + std::to_string(acg) + "/f" + std::to_string(i) +
                          (acg % 97 == 0 && i == 1 ? "/firefox" : "")};
        u.record.size = acg * 10 + i;
        u.record.mode = 0100644;
        want.insert(u.record.paths[0]);
        if (acg % 97 == 0 && i == 1) want_keyword.insert(u.record.paths[0]);
        batch.push_back(std::move(u));
      }
    }
    ASSERT_TRUE((*engine)->Apply(batch).ok());
    ASSERT_TRUE((*engine)->CommitAll().ok());
    held(engine->get());
    for (const char* q : {"size>=0", "keyword=firefox"}) {
      SearchRequest req;
      req.query = q;
      req.now_ns = kNow;
      auto hits = (*engine)->SearchAll(req);
      ASSERT_TRUE(hits.ok()) << hits.status().ToString();
      std::set<std::string> got;
      for (const SearchHit& h : *hits) got.insert(h.path);
      EXPECT_EQ(got, std::string(q) == "size>=0" ? want : want_keyword) << q;
      held(engine->get());
    }
    EXPECT_GT((*engine)->Stats().acg_opens, acgs > 64 ? acgs : 0);  // closed and reopened
    ASSERT_TRUE((*engine)->Close().ok());
  }
  auto engine = Engine::Open(o);  // every ACG opens at start
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  EXPECT_EQ((*engine)->Stats().acgs, acgs);
  held(engine->get());
  for (const Held& h : seen) {
    EXPECT_EQ(h.environments, kShards);
    // LMDB holds a data, a lock and a meta-write descriptor per environment, and maps the
    // data and the lock file.
    EXPECT_LE(h.descriptors, 3 * kShards);
    EXPECT_LE(h.maps, 2 * kShards);
    EXPECT_GE(h.maps, kShards);
  }
}

INSTANTIATE_TEST_SUITE_P(Acgs, EngineStoreTest, ::testing::Values(10, 10'000),
                         [](const auto& info) { return std::to_string(info.param); });

}  // namespace
}  // namespace propeller
