// Indexes of several ACGs in one database, each in its own key range (index.h: OpenIndex's
// `key_prefix`): every structure must see only its range — in searches, loads and drops —
// however the neighbouring ranges' keys sort. Oracle: a per-range model of the entries.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "indexnode/index/btree_index.h"
#include "indexnode/index/index.h"
#include "indexnode/index/kdtree_index.h"
#include "indexnode/index/lmdb_test_env.h"

namespace propeller {
namespace {

using index_test::TempEnv;

// Three neighbouring ACG prefixes (4-byte big-endian ids 1, 2, 3) and one that is a byte-wise
// neighbour of all-0xff keys of range 1.
const std::vector<std::string> kPrefixes = {std::string("\0\0\0\x01", 4),
                                            std::string("\0\0\0\x02", 4),
                                            std::string("\0\0\x01\x00", 4)};

using Model = std::map<std::string, std::set<uint64_t>>;  // value -> inos

std::set<uint64_t> Found(Index* index, MDB_txn* txn, const IndexQuery& q) {
  std::set<uint64_t> out;
  Status s = index->Search(txn, q, [&](FileId id) {
    out.insert(id.ino);
    return true;
  });
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out;
}

IndexQuery Equal(const std::string& v) {
  IndexQuery q;
  q.kind = IndexQuery::Kind::kEqual;
  q.value = v;
  return q;
}

// Values that sort at the extremes of the key space, so that a scan not bounded by its range
// would run into the next one.
std::string ValueOf(std::mt19937_64& rng) {
  static const std::vector<std::string> kValues = {"", "a", "b", "zz", std::string(3, '\xff'),
                                                   std::string(500, '\xff'), "\x01"};
  return kValues[rng() % kValues.size()];
}

// A structure under test: a type, and for B-trees the posting-chunk format or not.
struct Structure {
  IndexType type;
  bool postings = false;
};

Result<std::unique_ptr<Index>> OpenShared(MDB_txn* txn, const Structure& s,
                                          const std::string& prefix) {
  if (s.postings) return OpenBTreeIndex(txn, "shared", prefix, /*postings=*/true);
  return OpenIndex(txn, s.type, "shared", /*load=*/true, prefix);
}

void CheckRanges(TempEnv& env, const Structure& structure, const std::vector<Model>& models) {
  const IndexType type = structure.type;
  MDB_txn* txn = env.Begin();
  for (size_t r = 0; r < kPrefixes.size(); ++r) {
    auto opened = OpenShared(txn, structure, kPrefixes[r]);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    std::set<uint64_t> all;
    for (const auto& [value, inos] : models[r]) {
      EXPECT_EQ(Found(opened->get(), txn, Equal(value)), inos) << "range " << r;
      all.insert(inos.begin(), inos.end());
    }
    EXPECT_EQ(Found(opened->get(), txn, Equal("absent")), std::set<uint64_t>{});
    if (type == IndexType::kBTree) {
      IndexQuery everything;
      everything.kind = IndexQuery::Kind::kRange;
      EXPECT_EQ(Found(opened->get(), txn, everything), all) << "range " << r;
      IndexQuery prefix;
      prefix.kind = IndexQuery::Kind::kPrefix;
      EXPECT_EQ(Found(opened->get(), txn, prefix), all) << "range " << r;
      IndexQuery high;  // from the largest value up: the end of the range
      high.kind = IndexQuery::Kind::kRange;
      high.lo = IndexBound{std::string(3, '\xff'), true};
      std::set<uint64_t> want;
      for (const auto& [value, inos] : models[r]) {
        if (value >= std::string(3, '\xff')) want.insert(inos.begin(), inos.end());
      }
      EXPECT_EQ(Found(opened->get(), txn, high), want) << "range " << r;
    } else {
      EXPECT_EQ((*opened)->Size(), [&] {
        uint64_t n = 0;
        for (const auto& [value, inos] : models[r]) n += inos.size();
        return n;
      }()) << "range " << r;
    }
  }
  mdb_txn_abort(txn);
}

class KeyPrefixTest : public testing::TestWithParam<Structure> {};

TEST_P(KeyPrefixTest, EachRangeSeesOnlyItsEntriesAndDropsOnlyThem) {
  const Structure structure = GetParam();
  const IndexType type = structure.type;
  TempEnv env;
  std::mt19937_64 rng(7);
  std::vector<Model> models(kPrefixes.size());
  for (int round = 0; round < 5; ++round) {
    MDB_txn* txn = env.Begin();
    for (size_t r = 0; r < kPrefixes.size(); ++r) {
      auto opened = OpenShared(txn, structure, kPrefixes[r]);
      ASSERT_TRUE(opened.ok()) << opened.status().ToString();
      for (int op = 0; op < 200; ++op) {
        const std::string value = ValueOf(rng);
        const uint64_t ino = 1 + rng() % 50;
        if (rng() % 3 == 0) {
          ASSERT_TRUE((*opened)->Remove(txn, value, FileId{1, ino}).ok());
          models[r][value].erase(ino);
        } else {
          ASSERT_TRUE((*opened)->Insert(txn, value, FileId{1, ino}).ok());
          models[r][value].insert(ino);
        }
      }
    }
    ASSERT_EQ(mdb_txn_commit(txn), 0);
    CheckRanges(env, structure, models);
  }
  MDB_txn* txn = env.Begin();
  ASSERT_TRUE(DropIndexData(txn, type, "shared", kPrefixes[1]).ok());
  ASSERT_EQ(mdb_txn_commit(txn), 0);
  models[1].clear();
  CheckRanges(env, structure, models);
}

INSTANTIATE_TEST_SUITE_P(Structures, KeyPrefixTest,
                         testing::Values(Structure{IndexType::kBTree},
                                         Structure{IndexType::kBTree, /*postings=*/true},
                                         Structure{IndexType::kHash}),
                         [](const testing::TestParamInfo<Structure>& info) {
                           return std::string(IndexTypeName(info.param.type)) +
                                  (info.param.postings ? "_postings" : "");
                         });

TEST(KeyPrefixKdTreeTest, PointsOfEachRangeLoadAndDropApart) {
  TempEnv env;
  std::vector<std::map<uint64_t, KdPoint>> models(kPrefixes.size());
  std::mt19937_64 rng(11);
  MDB_txn* txn = env.Begin();
  for (size_t r = 0; r < kPrefixes.size(); ++r) {
    auto opened = OpenIndex(txn, IndexType::kKdTree, "pts", /*load=*/true, kPrefixes[r]);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    for (int i = 0; i < 300; ++i) {
      const uint64_t ino = 1 + rng() % 200;
      KdPoint p;
      for (int64_t& v : p) v = static_cast<int64_t>(rng() % 1000) - 500;
      if (rng() % 4 == 0) {
        ASSERT_TRUE((*opened)->RemovePoint(txn, FileId{1, ino}).ok());
        models[r].erase(ino);
      } else {
        ASSERT_TRUE((*opened)->InsertPoint(txn, p, FileId{1, ino}).ok());
        models[r][ino] = p;
      }
    }
  }
  ASSERT_EQ(mdb_txn_commit(txn), 0);
  auto check = [&] {
    MDB_txn* read = env.Begin();
    for (size_t r = 0; r < kPrefixes.size(); ++r) {
      auto opened = OpenIndex(read, IndexType::kKdTree, "pts", /*load=*/true, kPrefixes[r]);
      ASSERT_TRUE(opened.ok()) << opened.status().ToString();
      IndexQuery box;
      box.kind = IndexQuery::Kind::kBox;
      box.box_lo[0] = 0;  // size >= 0
      std::set<uint64_t> want;
      for (const auto& [ino, p] : models[r]) {
        if (p[0] >= 0) want.insert(ino);
      }
      EXPECT_EQ(Found(opened->get(), read, box), want) << "range " << r;
      EXPECT_EQ((*opened)->Size(), models[r].size()) << "range " << r;
    }
    mdb_txn_abort(read);
  };
  check();
  txn = env.Begin();
  ASSERT_TRUE(DropIndexData(txn, IndexType::kKdTree, "pts", kPrefixes[0]).ok());
  ASSERT_EQ(mdb_txn_commit(txn), 0);
  models[0].clear();
  check();
}

}  // namespace
}  // namespace propeller
