// The hash index against a brute-force model (a std::map from an exact canonical value — long
// double for numbers, which holds every int64 and double exactly — to the set of ids) on seeded
// random operation streams that drive posting lists through all their forms (inline, array,
// table, and back), before and after reopening the LMDB environment. Also reports memory per
// entry. Seed: PROPELLER_SEED (default fixed), printed on failure.
#include "indexnode/index/hash_index.h"

#include <gtest/gtest.h>
#include <lmdb.h>
#include <malloc.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "common/random.h"
#include "indexnode/index/lmdb_test_env.h"
#include "schemas/keys.h"

// GCC 12 reports a false -Wmaybe-uninitialized inside std::vector<std::variant<..., std::string>>
// reallocation; the test builds such vectors.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace propeller {
namespace {

using index_test::TempEnv;

std::unique_ptr<Index> Open(TempEnv& env, const std::string& name) {
  MDB_txn* txn = env.Begin();
  auto index = OpenIndex(txn, IndexType::kHash, name);
  EXPECT_TRUE(index.ok()) << index.status().ToString();
  EXPECT_EQ(mdb_txn_commit(txn), 0);
  return index.ok() ? std::move(index).value() : nullptr;
}

// The exact identity of a value as the hash index sees it, computed without the key encoding:
// numbers by exact value (long double holds every int64 and double exactly; all NaNs are one
// value), strings by their bytes — or, when longer than a key holds, by the kept prefix.
struct Canon {
  int kind = 0;  // 0 number, 1 NaN, 2 complete string, 3 truncated string
  long double number = 0;
  std::string text;
  bool operator<(const Canon& o) const {
    return std::tie(kind, number, text) < std::tie(o.kind, o.number, o.text);
  }
};

Canon Canonical(const AttrValue& v) {
  Canon c;
  if (const auto* s = std::get_if<std::string>(&v)) {
    size_t width = 0, n = 0;
    for (; n < s->size(); ++n) {
      const size_t w = (*s)[n] == '\0' ? 2 : 1;
      if (width + w > kMaxEncodedStringBytes) break;
      width += w;
    }
    c.kind = n == s->size() ? 2 : 3;
    c.text = s->substr(0, n);
  } else if (const auto* i = std::get_if<int64_t>(&v)) {
    c.number = static_cast<long double>(*i);
  } else {
    const double d = std::get<double>(v);
    if (std::isnan(d)) {
      c.kind = 1;
    } else {
      c.number = d == 0 ? 0.0L : static_cast<long double>(d);
    }
  }
  return c;
}

using Model = std::map<Canon, std::set<FileId>>;

size_t ModelSize(const Model& m) {
  size_t n = 0;
  for (const auto& [k, ids] : m) n += ids.size();
  return n;
}

std::vector<AttrValue> ValuePool() {
  const std::string long_a(445, 'a');
  return {int64_t{0},
          int64_t{3},
          3.0,
          -0.0,
          0.0,
          2.5,
          std::numeric_limits<int64_t>::max(),
          9223372036854775808.0,
          int64_t{9007199254740993},
          9007199254740992.0,
          std::numeric_limits<double>::quiet_NaN(),
          -std::numeric_limits<double>::quiet_NaN(),
          std::numeric_limits<double>::infinity(),
          std::string(),
          std::string("home"),
          std::string("3"),
          std::string("a\0b", 3),
          std::string("\xff"),
          long_a + "x",
          long_a + "y",
          std::string(kMaxEncodedStringBytes, 'a')};
}

// Ids skewed so a few values collect hundreds of ids (table form) and most hold few.
FileId RandomId(std::mt19937_64& rng) {
  if (rng() % 50 == 0) return FileId{UINT32_MAX, UINT64_MAX};  // the table's free-slot marker
  return FileId{static_cast<uint32_t>(rng() % 2), rng() % 600};
}

void CheckLookup(const Index& index, const Model& model, const AttrValue& v) {
  IndexQuery q;
  q.value = v;
  std::vector<FileId> got;
  const Status s = index.Search(nullptr, q, [&](FileId id) {
    got.push_back(id);
    return true;
  });
  ASSERT_TRUE(s.ok()) << s.ToString();
  const std::set<FileId> result(got.begin(), got.end());
  ASSERT_EQ(result.size(), got.size()) << "duplicate ids";
  const auto it = model.find(Canonical(v));
  const std::set<FileId> expected = it == model.end() ? std::set<FileId>() : it->second;
  ASSERT_EQ(result, expected) << "value kind " << v.index();
}

TEST(HashIndexTest, RandomStreamsAgainstModel) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const std::vector<AttrValue> pool = ValuePool();
  TempEnv env;
  std::unique_ptr<Index> index = Open(env, "keyword");
  ASSERT_NE(index, nullptr);
  EXPECT_EQ(index->type(), IndexType::kHash);
  EXPECT_EQ(index->name(), "keyword");
  Model model;
  std::vector<std::pair<AttrValue, FileId>> inserted;  // to pick removals that hit
  size_t peak = 0;  // the longest id list seen
  for (int batch = 0; batch < 40; ++batch) {
    MDB_txn* txn = env.Begin();
    // Phases: grow, then shrink, so posting lists cross every form both ways.
    const int insert_percent = (batch / 10) % 2 == 0 ? 75 : 20;
    for (int op = 0; op < 400; ++op) {
      const int r = static_cast<int>(rng() % 100);
      if (r < insert_percent) {
        const AttrValue v = pool[rng() % pool.size()];
        const FileId id = RandomId(rng);
        ASSERT_TRUE(index->Insert(txn, v, id).ok());
        model[Canonical(v)].insert(id);
        inserted.emplace_back(v, id);
      } else if (r < 95 && !inserted.empty()) {
        const size_t k = rng() % inserted.size();
        const auto [v, id] = inserted[k];
        inserted[k] = inserted.back();
        inserted.pop_back();
        ASSERT_TRUE(index->Remove(txn, v, id).ok());
        auto it = model.find(Canonical(v));
        if (it != model.end()) {
          it->second.erase(id);
          if (it->second.empty()) model.erase(it);
        }
      } else {
        const AttrValue v = pool[rng() % pool.size()];
        const FileId id = RandomId(rng);
        ASSERT_TRUE(index->Remove(txn, v, id).ok());  // often absent: OK
        auto it = model.find(Canonical(v));
        if (it != model.end()) {
          it->second.erase(id);
          if (it->second.empty()) model.erase(it);
        }
      }
      ASSERT_EQ(index->Size(), ModelSize(model)) << "batch " << batch << " op " << op;
      if (op % 50 == 0) {
        for (const AttrValue& v : pool) ASSERT_NO_FATAL_FAILURE(CheckLookup(*index, model, v));
      }
    }
    for (const auto& [k, ids] : model) peak = std::max(peak, ids.size());
    ASSERT_EQ(mdb_txn_commit(txn), 0);
  }
  EXPECT_GT(peak, 64u);  // some list reached the table form (more than 8 ids) and grew it
  for (const AttrValue& v : pool) ASSERT_NO_FATAL_FAILURE(CheckLookup(*index, model, v));

  index.reset();
  env.Close();
  env.Open();
  index = Open(env, "keyword");
  ASSERT_NE(index, nullptr);
  EXPECT_EQ(index->Size(), ModelSize(model));
  for (const AttrValue& v : pool) ASSERT_NO_FATAL_FAILURE(CheckLookup(*index, model, v));

  // Remove everything: memory goes back to (almost) nothing.
  MDB_txn* txn = env.Begin();
  for (const auto& [v, id] : inserted) ASSERT_TRUE(index->Remove(txn, v, id).ok());
  ASSERT_EQ(mdb_txn_commit(txn), 0);
  EXPECT_EQ(index->Size(), 0u);
  EXPECT_LT(index->MemoryBytes(), 4096u);
}

// Not loaded (the ACG cache, index.h): changes reach only LMDB, searching is a caller bug,
// Load reads exactly what LMDB holds, Unload frees the memory, and Reattach after the
// environment was closed and reopened keeps the loaded contents working.
TEST(HashIndexTest, LazyLoadUnloadAndReattach) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  TempEnv env;
  const std::vector<AttrValue> pool = ValuePool();
  MDB_txn* txn = env.Begin();
  auto opened = OpenHashIndex(txn, "tag", /*load=*/false);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  std::unique_ptr<Index> index = std::move(opened).value();
  ASSERT_EQ(mdb_txn_commit(txn), 0);
  EXPECT_FALSE(index->loaded());
  Model model;
  auto mutate = [&](int ops) {
    MDB_txn* w = env.Begin();
    for (int i = 0; i < ops; ++i) {
      const AttrValue& v = pool[rng() % pool.size()];
      const FileId id = RandomId(rng);
      if (rng() % 3 != 0) {
        ASSERT_TRUE(index->Insert(w, v, id).ok());
        model[Canonical(v)].insert(id);
      } else {
        ASSERT_TRUE(index->Remove(w, v, id).ok());
        auto it = model.find(Canonical(v));
        if (it != model.end() && it->second.erase(id) > 0 && it->second.empty()) model.erase(it);
      }
    }
    ASSERT_EQ(mdb_txn_commit(w), 0);
  };
  auto check = [&] {
    ASSERT_TRUE(index->loaded());
    ASSERT_EQ(index->Size(), ModelSize(model));
    for (const AttrValue& v : pool) CheckLookup(*index, model, v);
  };
  mutate(2000);
  IndexQuery q;
  q.value = pool[1];
  EXPECT_EQ(index->Search(nullptr, q, [](FileId) { return true; }).code(), StatusCode::kInternal);
  EXPECT_LT(index->MemoryBytes(), 64u);  // an empty table: one bucket
  MDB_txn* r = env.Begin(/*read_only=*/true);
  ASSERT_TRUE(index->Load(r).ok());
  mdb_txn_abort(r);
  check();
  EXPECT_GT(index->MemoryBytes(), 0u);
  mutate(1000);  // loaded: memory and LMDB change together
  check();
  index->Unload();
  EXPECT_FALSE(index->loaded());
  EXPECT_LT(index->MemoryBytes(), 64u);  // an empty table: one bucket
  mutate(1000);
  // The environment closes and opens again; the index object survives it.
  env.Close();
  env.Open();
  txn = env.Begin();
  ASSERT_TRUE(index->Reattach(txn).ok());
  ASSERT_EQ(mdb_txn_commit(txn), 0);
  r = env.Begin(/*read_only=*/true);
  ASSERT_TRUE(index->Load(r).ok());
  mdb_txn_abort(r);
  check();
  env.Close();
  env.Open();
  txn = env.Begin();
  ASSERT_TRUE(index->Reattach(txn).ok());  // loaded this time: contents kept
  ASSERT_EQ(mdb_txn_commit(txn), 0);
  mutate(1000);
  check();
  // LMDB agrees with memory: a fresh object loads the same answers.
  index = Open(env, "tag");
  ASSERT_TRUE(index);
  check();
}

TEST(HashIndexTest, OnlyEqualityAndNoPoints) {
  TempEnv env;
  std::unique_ptr<Index> index = Open(env, "h");
  ASSERT_NE(index, nullptr);
  MDB_txn* txn = env.Begin();
  for (IndexQuery::Kind kind :
       {IndexQuery::Kind::kRange, IndexQuery::Kind::kPrefix, IndexQuery::Kind::kBox}) {
    IndexQuery q;
    q.kind = kind;
    EXPECT_EQ(index->Search(txn, q, [](FileId) { return true; }).code(),
              StatusCode::kNotSupported);
  }
  EXPECT_EQ(index->InsertPoint(txn, KdPoint{}, FileId{}).code(), StatusCode::kNotSupported);
  EXPECT_EQ(index->RemovePoint(txn, FileId{}).code(), StatusCode::kNotSupported);
  // Early stop, in the table form.
  for (uint64_t i = 0; i < 100; ++i) {
    ASSERT_TRUE(index->Insert(txn, std::string("x"), FileId{1, i}).ok());
  }
  IndexQuery q;
  q.value = std::string("x");
  int calls = 0;
  ASSERT_TRUE(index->Search(txn, q, [&](FileId) { return ++calls < 3; }).ok());
  EXPECT_EQ(calls, 3);
  mdb_txn_abort(txn);
}

TEST(HashIndexTest, CorruptStoredKeyIsReported) {
  TempEnv env;
  MDB_txn* txn = env.Begin();
  MDB_dbi dbi;
  ASSERT_EQ(mdb_dbi_open(txn, "hs.bad", MDB_CREATE, &dbi), 0);
  std::string key;
  AppendFileIdKey(FileId{1, 2}, &key);
  key += "\x07garbage";
  MDB_val k{key.size(), key.data()};
  MDB_val v{0, nullptr};
  ASSERT_EQ(mdb_put(txn, dbi, &k, &v, 0), 0);
  ASSERT_EQ(mdb_txn_commit(txn), 0);
  txn = env.Begin();
  EXPECT_EQ(OpenIndex(txn, IndexType::kHash, "bad").status().code(), StatusCode::kCorruption);
  mdb_txn_abort(txn);
}

TEST(HashIndexTest, DropRemovesData) {
  TempEnv env;
  std::unique_ptr<Index> index = Open(env, "gone");
  MDB_txn* txn = env.Begin();
  ASSERT_TRUE(index->Insert(txn, std::string("w"), FileId{1, 1}).ok());
  ASSERT_EQ(mdb_txn_commit(txn), 0);
  index.reset();
  txn = env.Begin();
  ASSERT_TRUE(DropIndexData(txn, IndexType::kHash, "gone").ok());
  ASSERT_TRUE(DropIndexData(txn, IndexType::kHash, "never").ok());
  ASSERT_EQ(mdb_txn_commit(txn), 0);
  index = Open(env, "gone");
  ASSERT_NE(index, nullptr);
  EXPECT_EQ(index->Size(), 0u);
}

// Reports the memory cost per entry for three shapes (MemoryBytes() and, where the allocator
// can tell, the measured heap growth of loading the index) and bounds the estimate.
TEST(HashIndexTest, MemoryPerEntry) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  struct Shape {
    const char* name;
    int files;
    int values_per_file;
    int distinct;  // 0: every value unique
    double max_bytes_per_entry;
  };
  const Shape shapes[] = {
      {"unique values", 20000, 1, 0, 140},
      {"shared by ~1000", 20000, 1, 20, 50},
      {"keyword-like (6 tokens, 1 unique + 5 from 2000)", 10000, 6, 2000, 90},
  };
  for (const Shape& shape : shapes) {
    TempEnv env;
    std::unique_ptr<Index> index = Open(env, "m");
    ASSERT_NE(index, nullptr);
    MDB_txn* txn = env.Begin();
    for (int f = 0; f < shape.files; ++f) {
      for (int t = 0; t < shape.values_per_file; ++t) {
        std::string word;
        if (shape.distinct == 0 || (shape.values_per_file > 1 && t == 0)) {
          word = "name" + std::to_string(f);
        } else {
          // Skewed: squaring a uniform draw favours low token numbers.
          const double u = std::uniform_real_distribution<double>(0, 1)(rng);
          word = "tok" + std::to_string(static_cast<int>(u * u * shape.distinct));
        }
        ASSERT_TRUE(index->Insert(txn, word, FileId{1, static_cast<uint64_t>(f)}).ok());
      }
    }
    ASSERT_EQ(mdb_txn_commit(txn), 0);
    index.reset();
    // Heap growth of loading (0 under sanitizers, whose allocator glibc cannot see).
    const auto before = static_cast<int64_t>(mallinfo2().uordblks);
    index = Open(env, "m");
    const auto after = static_cast<int64_t>(mallinfo2().uordblks);
    ASSERT_NE(index, nullptr);
    const double entries = static_cast<double>(index->Size());
    const double estimate = static_cast<double>(index->MemoryBytes()) / entries;
    const double measured = static_cast<double>(after - before) / entries;
    std::printf("hash index, %s: %.0f entries, %.1f bytes/entry estimated, %.1f measured\n",
                shape.name, entries, estimate, measured);
    EXPECT_LT(estimate, shape.max_bytes_per_entry) << shape.name;
  }
}

}  // namespace
}  // namespace propeller
