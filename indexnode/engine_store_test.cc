// The physical store is bounded (indexnode/store.h): an index node holds the same few LMDB
// environments, descriptors and maps whether it has 10 ACGs or 10,000, also while a search
// touches every one of them — and such a search opens nothing: every ACG opened once.
// Oracles: the kernel (/proc/self/fd, /proc/self/maps) for what the process holds, and the
// updates the test applied for what the searches answer.
#include <gtest/gtest.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

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
  o.max_open_acgs = 64;  // fewer than the ACGs: the bound must not make searches reopen them
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
    EXPECT_EQ((*engine)->Stats().acg_opens, acgs);  // each once, at its first update
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

// Resident bytes of this process's mappings of the store's data files (the kernel's
// /proc/self/smaps): the oracle for Stats().store_resident_bytes.
uint64_t MappedDataBytes(const std::string& dir) {
  std::ifstream in("/proc/self/smaps");
  std::string line;
  bool ours = false;
  uint64_t total = 0;
  while (std::getline(in, line)) {
    // A mapping's header line: "start-end perms offset dev inode   pathname".
    const size_t dash = line.find('-');
    if (dash != std::string::npos && dash > 0 &&
        line.find_first_not_of("0123456789abcdef") == dash) {
      const size_t slash = line.find('/');
      const std::string path = slash == std::string::npos ? "" : line.substr(slash);
      ours = path.starts_with(dir + "/") && path.ends_with("/data.mdb");
    } else if (ours && line.starts_with("Rss:")) {
      total += std::strtoull(line.c_str() + 4, nullptr, 10) * 1024;
    }
  }
  return total;
}

// The pages of the shards' maps that reads bring into the process (file pages in its RSS) are
// unmapped by the background committer once they exceed max_open_acg_bytes.
TEST(EngineStoreMapsTest, MappedPagesAreTrimmedToTheBound) {
  TempDir dir;
  EngineOptions o;
  o.data_dir = dir.path();
  o.store_shards = kShards;
  o.max_open_acg_bytes = 1 << 20;
  o.commit_timeout_ns = 1'000'000;
  o.store_trim_interval_ns = 1'000'000'000;
  auto engine = Engine::Open(o);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  std::vector<Update> batch;
  for (uint64_t i = 0; i < 30'000; ++i) {
    Update u;
    u.acg = 1 + i % 20;
    u.record.id = FileId{1, i + 1};
    u.record.paths = {"/d" + std::to_string(i % 20) + "/some-longer-file-name-" +
                      std::to_string(i) + ".data"};
    u.record.size = i;
    u.record.mode = 0100644;
    batch.push_back(std::move(u));
  }
  ASSERT_TRUE((*engine)->Apply(batch).ok());
  SearchRequest req;
  req.query = "size>=0";  // reads every record: maps every page of the records
  req.now_ns = kNow;
  const std::string store = dir.path() + "/store";
  uint64_t trims_before = 0, mapped = 0;
  for (int attempt = 0; attempt < 20; ++attempt) {  // again if a trim came in between
    const uint64_t trims_then = (*engine)->Stats().map_trims;
    auto hits = (*engine)->SearchAll(req);
    ASSERT_TRUE(hits.ok()) << hits.status().ToString();
    ASSERT_EQ(hits->size(), batch.size());
    mapped = MappedDataBytes(store);
    trims_before = (*engine)->Stats().map_trims;
    if (trims_before == trims_then) break;
  }
  ASSERT_GT(mapped, uint64_t{2} << 20) << "the search mapped too little";
  // The committer looks every second here; give it a few rounds.
  EngineStats st;
  for (int i = 0; i < 300; ++i) {
    st = (*engine)->Stats();
    if (st.map_trims > trims_before) break;
    ::usleep(100'000);
  }
  EXPECT_GT(st.map_trims, trims_before);
  EXPECT_LE(MappedDataBytes(store), uint64_t{1} << 20);
  EXPECT_LE((*engine)->Stats().store_resident_bytes, uint64_t{1} << 20);
  // Stats reads the same figure from the kernel.
  EXPECT_EQ(MappedDataBytes(store), (*engine)->Stats().store_resident_bytes);
}

// The bytes of the store's shard files under data directory `dir`.
uint64_t StoreBytes(const std::string& dir) {
  uint64_t n = 0;
  for (unsigned k = 0; k < kShards; ++k) {
    n += fs::file_size(dir + "/store/shard-" + std::to_string(k) + "/data.mdb");
  }
  return n;
}

// Compaction (EngineOptions::compact_store, Store::Compact) rewrites the store smaller and
// changes no answer; the compacted store takes updates and opens again (its check passes);
// the copy a compaction cut short leaves behind is removed at the next open.
TEST(EngineStoreCompactTest, SmallerSameAnswersAndALeftoverCopyGoes) {
  TempDir dir;
  EngineOptions o;
  o.data_dir = dir.path();
  o.store_shards = kShards;
  o.background_commit = false;
  auto answers = [&](Engine* e) {
    std::vector<std::string> out;
    for (const char* q : {"size>=0", "keyword=k7", "size>1000 & keyword=k3", "path~*/f1*"}) {
      SearchRequest req;
      req.query = q;
      req.now_ns = kNow;
      auto hits = e->SearchAll(req);
      EXPECT_TRUE(hits.ok()) << hits.status().ToString();
      if (!hits.ok()) continue;
      for (const SearchHit& h : *hits) out.push_back(std::string(q) + " " + h.path);
    }
    std::sort(out.begin(), out.end());
    return out;
  };
  std::vector<std::string> before;
  uint64_t ino = 0;
  {
    auto engine = Engine::Open(o);
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    // Files in random key order in small commits, then a third deleted: half-full pages.
    std::vector<uint64_t> order(40'000);
    for (uint64_t i = 0; i < order.size(); ++i) order[i] = i + 1;
    std::mt19937_64 rng(5);
    std::shuffle(order.begin(), order.end(), rng);
    for (size_t b = 0; b < order.size(); b += 500) {
      std::vector<Update> batch;
      for (size_t i = b; i < b + 500; ++i) {
        Update u;
        u.acg = 1 + order[i] % 8;
        u.record.id = FileId{1, order[i]};
        u.record.paths = {"/d" + std::to_string(order[i] % 8) + "/f" + std::to_string(order[i]) +
                          "-k" + std::to_string(order[i] % 10)};
        u.record.size = order[i] * 7 % 5000;
        u.record.mode = 0100644;
        batch.push_back(std::move(u));
      }
      ASSERT_TRUE((*engine)->Apply(batch).ok());
      ASSERT_TRUE((*engine)->CommitAll().ok());
    }
    std::vector<Update> deletes;
    for (uint64_t i = 1; i <= order.size(); i += 3) {
      Update u;
      u.op = UpdateOp::kDelete;
      u.acg = 1 + i % 8;
      u.record.id = FileId{1, i};
      deletes.push_back(std::move(u));
    }
    ASSERT_TRUE((*engine)->Apply(deletes).ok());
    ASSERT_TRUE((*engine)->CommitAll().ok());
    before = answers(engine->get());
    ASSERT_GT(before.size(), 20'000u);
    ASSERT_TRUE((*engine)->Close().ok());
    ino = order.size();
  }
  const uint64_t loose = StoreBytes(dir.path());
  // A compaction cut short: its copy is left in a shard's directory.
  const std::string leftover = dir.path() + "/store/shard-1/compact.tmp";
  fs::create_directories(leftover);
  testing::WriteFile(leftover + "/data.mdb", std::string(1 << 16, 'x'));
  o.compact_store = true;
  {
    auto engine = Engine::Open(o);
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    EXPECT_FALSE(fs::exists(leftover));
    const uint64_t compacted = StoreBytes(dir.path());
    EXPECT_LT(compacted, loose * 3 / 4) << "compaction left " << compacted << " of " << loose
                                        << " bytes";
    EXPECT_EQ(answers(engine->get()), before);
    Update u;  // and it takes updates
    u.acg = 3;
    u.record.id = FileId{1, ++ino};
    u.record.paths = {"/d3/new-k7"};
    u.record.mode = 0100644;
    ASSERT_TRUE((*engine)->Apply({&u, 1}).ok());
    ASSERT_TRUE((*engine)->Close().ok());
  }
  o.compact_store = false;
  auto engine = Engine::Open(o);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  before.push_back("keyword=k7 /d3/new-k7");
  before.push_back("size>=0 /d3/new-k7");
  std::sort(before.begin(), before.end());
  EXPECT_EQ(answers(engine->get()), before);
}

// After a plain load — files in order, committed in batches across ACGs, nothing deleted —
// the shards' leaves are partly empty (a page splits in the middle unless LMDB appends), and
// compaction writes them full. (LMDB's compacting copy, used before, kept every page as it
// was: after such a load it gained nothing.)
TEST(EngineStoreCompactTest, APlainLoadComesOutWithFullPages) {
  TempDir dir;
  EngineOptions o;
  o.data_dir = dir.path();
  o.store_shards = kShards;
  o.background_commit = false;
  auto count = [](Engine* e, const char* q) {
    SearchRequest req;
    req.query = q;
    req.now_ns = kNow;
    auto hits = e->SearchAll(req);
    EXPECT_TRUE(hits.ok()) << hits.status().ToString();
    return hits.ok() ? hits->size() : 0;
  };
  constexpr uint64_t kFiles = 40'000;
  {
    auto engine = Engine::Open(o);
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    for (uint64_t b = 1; b <= kFiles; b += 1000) {
      std::vector<Update> batch;
      for (uint64_t i = b; i < b + 1000; ++i) {
        Update u;
        u.acg = 1 + i % 16;
        u.record.id = FileId{1, i};
        u.record.paths = {"/proj" + std::to_string(i % 16) + "/src/file" + std::to_string(i) +
                          "-k" + std::to_string(i % 10) + ".c"};
        u.record.size = i * 7 % 5000;
        u.record.mode = 0100644;
        batch.push_back(std::move(u));
      }
      ASSERT_TRUE((*engine)->Apply(batch).ok());
      ASSERT_TRUE((*engine)->CommitAll().ok());
    }
    ASSERT_EQ(count(engine->get(), "size>=0"), kFiles);
    ASSERT_TRUE((*engine)->Close().ok());
  }
  const uint64_t loaded = StoreBytes(dir.path());
  o.compact_store = true;
  auto engine = Engine::Open(o);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  const uint64_t compacted = StoreBytes(dir.path());
  EXPECT_LT(compacted, loaded * 4 / 5) << "compaction left " << compacted << " of " << loaded
                                       << " bytes";
  EXPECT_EQ(count(engine->get(), "size>=0"), kFiles);
  EXPECT_EQ(count(engine->get(), "keyword=k3"), kFiles / 10);
}

// What a commit needs in proportion to its size (the order it applies its updates in, its
// edges and deletes) is freed when it ends: memory the node holds grows with its files and
// ACGs, not with the largest commit each ACG ever had. (Kept per ACG, that scratch held 24
// bytes per update of each ACG's largest commit — after a bulk load, 24 B per file — until the
// process ended.) Oracle: glibc's count of the bytes allocated and not freed.
TEST(EngineStoreMemoryTest, CommitsKeepNoScratchSizedByTheirUpdates) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "ASan's allocator keeps its own statistics; glibc's mallinfo2 sees none of it";
#endif
  TempDir dir;
  EngineOptions o;
  o.data_dir = dir.path();
  o.store_shards = kShards;
  o.background_commit = false;
  o.cache_bound_updates = 1'000'000;  // each ACG's updates commit together, in CommitAll
  o.total_cache_bound_updates = 10'000'000;
  o.max_cache_bytes = 0;
  auto engine = Engine::Open(o);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  // 160 ACGs of 8 files, each updated 10,000 times: 1.6 M cached updates, committed as 160
  // commits of 10,000 updates, of which all but the last of each file are superseded.
  constexpr uint64_t kAcgs = 160, kFilesPerAcg = 8, kUpdatesPerAcg = 10'000;
  auto in_use = [] {  // in the arenas, and in chunks of their own (mmap)
    const struct mallinfo2 m = mallinfo2();
    return static_cast<int64_t>(m.uordblks + m.hblkhd);
  };
  std::vector<Update> batch;
  auto flush = [&] {
    ASSERT_TRUE((*engine)->Apply(batch).ok());
    batch.clear();
  };
  // A first round, committed, so that what stays allocated per ACG (its objects, summary,
  // K-D tree) and per process (buffers) is in place before the measured one.
  auto round = [&](uint64_t updates_per_acg, int64_t salt) {
    for (uint64_t k = 0; k < updates_per_acg; ++k) {
      for (uint64_t acg = 1; acg <= kAcgs; ++acg) {
        Update u;
        u.acg = acg;
        u.record.id = FileId{1, acg * 100 + k % kFilesPerAcg};
        u.record.paths = {"/p" + std::to_string(acg) + "/f" + std::to_string(k % kFilesPerAcg)};
        u.record.size = k;
        u.record.mtime = kNow - salt - static_cast<int64_t>(k);
        u.record.mode = 0100644;
        batch.push_back(std::move(u));
      }
      if (batch.size() >= 10'000) flush();
      if (::testing::Test::HasFatalFailure()) return;
    }
    flush();
    ASSERT_TRUE((*engine)->CommitAll().ok());
  };
  ASSERT_NO_FATAL_FAILURE(round(kFilesPerAcg * 4, 0));
  const int64_t before = in_use();
  ASSERT_NO_FATAL_FAILURE(round(kUpdatesPerAcg, 1'000'000));
  const int64_t grown = in_use() - before;
  // Kept per ACG, the order alone held 160 x 16,384 (its capacity) x 24 bytes = 63 MB.
  EXPECT_LT(grown, 8 << 20) << "the commits left " << grown << " bytes allocated";
  SearchRequest req;
  req.query = "size>=0";
  req.now_ns = kNow;
  auto hits = (*engine)->SearchAll(req);
  ASSERT_TRUE(hits.ok()) << hits.status().ToString();
  EXPECT_EQ(hits->size(), kAcgs * kFilesPerAcg);
  for (const SearchHit& h : *hits) EXPECT_GE(h.record.size, kUpdatesPerAcg - kFilesPerAcg);
}

INSTANTIATE_TEST_SUITE_P(Acgs, EngineStoreTest, ::testing::Values(10, 10'000),
                         [](const auto& info) { return std::to_string(info.param); });

}  // namespace
}  // namespace propeller
