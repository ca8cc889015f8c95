// The btree index against a brute-force model (a list of (value, id) entries compared with
// exact numeric and bytewise string comparisons, never through the key encoding) on seeded
// random operation streams, before and after reopening the LMDB environment; plus targeted
// cases and the shared index.h helpers (names, types, LMDB error mapping).
// Seed: PROPELLER_SEED (default fixed), printed on failure.
#include "indexnode/index/btree_index.h"

#include <gtest/gtest.h>
#include <lmdb.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <string>
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

// ---- The model: exact comparisons, independent of the key encoding. ----

bool IsString(const AttrValue& v) { return std::holds_alternative<std::string>(v); }

// Exact int64 / double comparison; NaN is greater than every number and equal to itself.
int CompareIntDouble(int64_t i, double d) {
  if (std::isnan(d)) return -1;
  constexpr double kTwo63 = 9223372036854775808.0;
  if (d >= kTwo63) return -1;
  if (d < -kTwo63) return 1;
  const double t = std::trunc(d);
  const int64_t ti = static_cast<int64_t>(t);
  if (i != ti) return i < ti ? -1 : 1;
  return d > t ? -1 : (d < t ? 1 : 0);
}

int CompareNumbers(const AttrValue& a, const AttrValue& b) {
  if (a.index() == 0 && b.index() == 0) {
    const int64_t x = std::get<int64_t>(a), y = std::get<int64_t>(b);
    return (x > y) - (x < y);
  }
  if (a.index() == 1 && b.index() == 1) {
    const double x = std::get<double>(a), y = std::get<double>(b);
    if (std::isnan(x) || std::isnan(y)) return std::isnan(x) - std::isnan(y);
    return (x > y) - (x < y);
  }
  if (a.index() == 0) return CompareIntDouble(std::get<int64_t>(a), std::get<double>(b));
  return -CompareIntDouble(std::get<int64_t>(b), std::get<double>(a));
}

int CompareStrings(const std::string& a, const std::string& b) {
  const int c = a.compare(b);  // char_traits<char>: bytewise, unsigned
  return (c > 0) - (c < 0);
}

// The raw prefix of `s` an index key keeps: the longest prefix whose escaped length (0x00
// counts 2) is at most kMaxEncodedStringBytes.
std::string Kept(const std::string& s) {
  size_t width = 0, n = 0;
  for (; n < s.size(); ++n) {
    const size_t w = s[n] == '\0' ? 2 : 1;
    if (width + w > kMaxEncodedStringBytes) break;
    width += w;
  }
  return s.substr(0, n);
}
bool Truncated(const std::string& s) { return Kept(s).size() != s.size(); }

// Same key in the index: equal numbers, or equal strings, or two truncated strings with the
// same kept prefix.
bool SameKey(const AttrValue& a, const AttrValue& b) {
  if (IsString(a) != IsString(b)) return false;
  if (!IsString(a)) return CompareNumbers(a, b) == 0;
  const std::string& x = std::get<std::string>(a);
  const std::string& y = std::get<std::string>(b);
  return x == y || (Truncated(x) && Truncated(y) && Kept(x) == Kept(y));
}

struct Entry {
  AttrValue value;
  FileId id;
};

class Model {
 public:
  void Insert(const AttrValue& v, FileId id) {
    if (Find(v, id) == entries_.end()) entries_.push_back({v, id});
  }
  void Remove(const AttrValue& v, FileId id) {
    auto it = Find(v, id);
    if (it != entries_.end()) entries_.erase(it);
  }
  const std::vector<Entry>& entries() const { return entries_; }

 private:
  std::vector<Entry>::iterator Find(const AttrValue& v, FileId id) {
    return std::find_if(entries_.begin(), entries_.end(),
                        [&](const Entry& e) { return e.id == id && SameKey(e.value, v); });
  }
  std::vector<Entry> entries_;
};

bool InBound(const AttrValue& v, const IndexBound& b, bool is_lo) {
  const int c = IsString(v) ? CompareStrings(std::get<std::string>(v),
                                             std::get<std::string>(b.value))
                            : CompareNumbers(v, b.value);
  if (c == 0) return b.inclusive;
  return is_lo ? c > 0 : c < 0;
}

// Exact answer and allowed superset for q: exact ⊆ result ⊆ allowed must hold.
void Expected(const Model& model, const IndexQuery& q, std::set<FileId>* exact,
              std::set<FileId>* allowed) {
  for (const Entry& e : model.entries()) {
    bool match = false, extra = false;
    switch (q.kind) {
      case IndexQuery::Kind::kEqual:
        match = IsString(e.value) == IsString(q.value) &&
                (IsString(e.value) ? std::get<std::string>(e.value) ==
                                         std::get<std::string>(q.value)
                                   : CompareNumbers(e.value, q.value) == 0);
        extra = SameKey(e.value, q.value);
        break;
      case IndexQuery::Kind::kRange: {
        if (!q.lo && !q.hi) {
          match = true;
          break;
        }
        const bool want_string = q.lo ? IsString(q.lo->value) : IsString(q.hi->value);
        if (q.lo && q.hi && IsString(q.lo->value) != IsString(q.hi->value)) break;
        if (IsString(e.value) != want_string) break;
        match = (!q.lo || InBound(e.value, *q.lo, true)) &&
                (!q.hi || InBound(e.value, *q.hi, false));
        // A truncated bound admits every string with its key.
        auto widened = [&](const IndexBound& b) {
          return IsString(b.value) && Truncated(std::get<std::string>(b.value)) &&
                 SameKey(e.value, b.value);
        };
        const bool lo_ok = !q.lo || InBound(e.value, *q.lo, true) || widened(*q.lo);
        const bool hi_ok = !q.hi || InBound(e.value, *q.hi, false) || widened(*q.hi);
        extra = lo_ok && hi_ok;
        break;
      }
      case IndexQuery::Kind::kPrefix:
        if (!IsString(e.value)) break;
        match = std::get<std::string>(e.value).starts_with(q.prefix);
        extra = std::get<std::string>(e.value).starts_with(Kept(q.prefix));
        break;
      default:
        break;
    }
    if (match) exact->insert(e.id);
    if (match || extra) allowed->insert(e.id);
  }
}

// ---- Random streams. ----

std::vector<AttrValue> ValuePool() {
  const std::string long_a(445, 'a');
  std::string long_z(438, 'a');
  long_z += std::string("\0\0", 2);  // escapes right at the limit
  const double kTwo63 = 9223372036854775808.0;
  return {int64_t{-3},
          int64_t{0},
          int64_t{1},
          int64_t{2},
          int64_t{3},
          int64_t{7},
          std::numeric_limits<int64_t>::min(),
          std::numeric_limits<int64_t>::max(),
          int64_t{9007199254740993},
          -0.0,
          0.0,
          2.5,
          3.0,
          2.9999,
          7.0000001,
          -3.5,
          kTwo63,
          9007199254740992.0,
          std::numeric_limits<double>::infinity(),
          -std::numeric_limits<double>::infinity(),
          std::numeric_limits<double>::quiet_NaN(),
          std::string(),
          std::string("a"),
          std::string("ab"),
          std::string("abc"),
          std::string("b"),
          std::string("\0", 1),
          std::string("a\0", 2),
          std::string("a\0b", 3),
          std::string("\xff"),
          std::string("a\xff"),
          std::string(kMaxEncodedStringBytes, 'a'),
          long_a + "x",
          long_a + "y",
          long_a,
          long_z + "q",
          long_z};
}

AttrValue RandomValue(std::mt19937_64& rng, const std::vector<AttrValue>& pool) {
  return pool[rng() % pool.size()];
}

FileId RandomId(std::mt19937_64& rng, uint64_t inos = 40) {
  return FileId{static_cast<uint32_t>(rng() % 3), rng() % inos};
}

IndexQuery RandomQuery(std::mt19937_64& rng, const std::vector<AttrValue>& pool) {
  IndexQuery q;
  switch (rng() % 3) {
    case 0:
      q.kind = IndexQuery::Kind::kEqual;
      q.value = RandomValue(rng, pool);
      break;
    case 1: {
      q.kind = IndexQuery::Kind::kRange;
      const bool string_range = rng() % 2;
      auto bound = [&]() {
        AttrValue v;
        do v = RandomValue(rng, pool);
        while (IsString(v) != string_range && rng() % 10 != 0);  // sometimes mixed types
        return IndexBound{v, rng() % 2 == 0};
      };
      if (rng() % 5 != 0) q.lo = bound();
      if (rng() % 5 != 0) q.hi = bound();
      break;
    }
    default: {
      q.kind = IndexQuery::Kind::kPrefix;
      const AttrValue v = RandomValue(rng, pool);
      if (IsString(v)) {
        const std::string& s = std::get<std::string>(v);
        q.prefix = s.substr(0, rng() % (s.size() + 1));
      }
      break;
    }
  }
  return q;
}

std::string Describe(const IndexQuery& q) {
  auto val = [](const AttrValue& v) {
    if (IsString(v)) return "str(" + std::to_string(std::get<std::string>(v).size()) + "B)";
    if (v.index() == 0) return "int " + std::to_string(std::get<int64_t>(v));
    return "dbl " + std::to_string(std::get<double>(v));
  };
  switch (q.kind) {
    case IndexQuery::Kind::kEqual:
      return "equal " + val(q.value);
    case IndexQuery::Kind::kRange:
      return std::string("range ") +
             (q.lo ? (q.lo->inclusive ? "[" : "(") + val(q.lo->value) : "-") + ", " +
             (q.hi ? val(q.hi->value) + (q.hi->inclusive ? "]" : ")") : "-");
    case IndexQuery::Kind::kPrefix:
      return "prefix " + std::to_string(q.prefix.size()) + "B";
    default:
      return "other";
  }
}

// Runs q and checks exact ⊆ result ⊆ allowed with no id twice.
void CheckQuery(const Index& index, MDB_txn* txn, const Model& model, const IndexQuery& q) {
  std::vector<FileId> got;
  const Status s = index.Search(txn, q, [&](FileId id) {
    got.push_back(id);
    return true;
  });
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::set<FileId> exact, allowed;
  Expected(model, q, &exact, &allowed);
  const std::set<FileId> result(got.begin(), got.end());
  ASSERT_EQ(result.size(), got.size()) << "duplicate ids for " << Describe(q);
  for (const FileId& id : exact) {
    ASSERT_TRUE(result.count(id)) << "missing " << id.volume << ":" << id.ino << " for "
                                  << Describe(q);
  }
  for (const FileId& id : result) {
    ASSERT_TRUE(allowed.count(id)) << "unexpected " << id.volume << ":" << id.ino << " for "
                                   << Describe(q);
  }
}

std::unique_ptr<Index> Open(TempEnv& env, IndexType type, const std::string& name) {
  MDB_txn* txn = env.Begin();
  auto index = OpenIndex(txn, type, name);
  EXPECT_TRUE(index.ok()) << index.status().ToString();
  EXPECT_EQ(mdb_txn_commit(txn), 0);
  return index.ok() ? std::move(index).value() : nullptr;
}

// As Open, for a btree index in either format (btree_index.h: posting chunks or not).
std::unique_ptr<Index> OpenBTree(TempEnv& env, const std::string& name, bool postings) {
  MDB_txn* txn = env.Begin();
  auto index = OpenBTreeIndex(txn, name, {}, postings);
  EXPECT_TRUE(index.ok()) << index.status().ToString();
  EXPECT_EQ(mdb_txn_commit(txn), 0);
  return index.ok() ? std::move(index).value() : nullptr;
}

// Parameter: posting chunks (true) or one key per entry.
class BTreeIndexStreamTest : public ::testing::TestWithParam<bool> {};

TEST_P(BTreeIndexStreamTest, RandomStreamsAgainstModel) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const std::vector<AttrValue> pool = ValuePool();
  const bool postings = GetParam();
  // Posting chunks hold up to 128 bytes of ids: more ids per value make them split.
  const uint64_t inos = postings ? 400 : 40;
  TempEnv env;
  std::unique_ptr<Index> index = OpenBTree(env, "attr", postings);
  ASSERT_NE(index, nullptr);
  EXPECT_EQ(index->type(), IndexType::kBTree);
  EXPECT_EQ(index->name(), "attr");
  Model model;
  for (int batch = 0; batch < 30; ++batch) {
    MDB_txn* txn = env.Begin();
    for (int op = 0; op < 150; ++op) {
      const uint64_t r = rng() % 100;
      if (r < 45) {
        const AttrValue v = RandomValue(rng, pool);
        const FileId id = RandomId(rng, inos);
        ASSERT_TRUE(index->Insert(txn, v, id).ok());
        model.Insert(v, id);
      } else if (r < 70 && !model.entries().empty()) {
        const Entry e = model.entries()[rng() % model.entries().size()];
        ASSERT_TRUE(index->Remove(txn, e.value, e.id).ok());
        model.Remove(e.value, e.id);
      } else if (r < 80) {
        const AttrValue v = RandomValue(rng, pool);
        const FileId id = RandomId(rng, inos);
        ASSERT_TRUE(index->Remove(txn, v, id).ok());  // often absent: OK
        model.Remove(v, id);
      } else {
        ASSERT_NO_FATAL_FAILURE(CheckQuery(*index, txn, model, RandomQuery(rng, pool)))
            << "batch " << batch << " op " << op;
      }
      ASSERT_EQ(index->Size(), model.entries().size());
    }
    ASSERT_EQ(mdb_txn_commit(txn), 0);
  }
  EXPECT_GT(model.entries().size(), 100u);

  // Every query kind on every pool value, in a read transaction, then after reopening.
  auto check_all = [&](Index& idx) {
    MDB_txn* txn = env.Begin(/*read_only=*/true);
    for (const AttrValue& v : pool) {
      IndexQuery q;
      q.value = v;
      ASSERT_NO_FATAL_FAILURE(CheckQuery(idx, txn, model, q));
      if (IsString(v)) {
        q.kind = IndexQuery::Kind::kPrefix;
        q.prefix = std::get<std::string>(v);
        ASSERT_NO_FATAL_FAILURE(CheckQuery(idx, txn, model, q));
      }
      for (const AttrValue& w : pool) {
        for (int incl = 0; incl < 4; ++incl) {
          IndexQuery r;
          r.kind = IndexQuery::Kind::kRange;
          r.lo = IndexBound{v, (incl & 1) != 0};
          r.hi = IndexBound{w, (incl & 2) != 0};
          ASSERT_NO_FATAL_FAILURE(CheckQuery(idx, txn, model, r));
        }
      }
      IndexQuery lo_only;
      lo_only.kind = IndexQuery::Kind::kRange;
      lo_only.lo = IndexBound{v, false};
      ASSERT_NO_FATAL_FAILURE(CheckQuery(idx, txn, model, lo_only));
      IndexQuery hi_only;
      hi_only.kind = IndexQuery::Kind::kRange;
      hi_only.hi = IndexBound{v, true};
      ASSERT_NO_FATAL_FAILURE(CheckQuery(idx, txn, model, hi_only));
    }
    IndexQuery all;
    all.kind = IndexQuery::Kind::kRange;
    ASSERT_NO_FATAL_FAILURE(CheckQuery(idx, txn, model, all));
    mdb_txn_abort(txn);
  };
  ASSERT_NO_FATAL_FAILURE(check_all(*index));
  index.reset();
  env.Close();
  env.Open();
  index = OpenBTree(env, "attr", postings);
  ASSERT_NE(index, nullptr);
  EXPECT_EQ(index->Size(), model.entries().size());
  ASSERT_NO_FATAL_FAILURE(check_all(*index));
}

INSTANTIATE_TEST_SUITE_P(Formats, BTreeIndexStreamTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "postings" : "entries");
                         });

// Posting chunks split as they fill and go when empty, whatever the order ids come and go in
// (ascending as new files, descending, at random; the first id of a chunk names its key):
// every equality answers exactly the model's ids, and removing every id leaves no chunk.
TEST(BTreePostingsTest, ChunksSplitAndVanishInAnyOrder) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  TempEnv env;
  std::unique_ptr<Index> index = OpenBTree(env, "kw", /*postings=*/true);
  ASSERT_NE(index, nullptr);
  const std::vector<AttrValue> values = {std::string("a"), std::string("ab"), std::string(""),
                                         int64_t{7}};
  std::map<size_t, std::set<FileId>> model;  // value index -> ids
  auto check = [&](MDB_txn* txn) {
    for (size_t v = 0; v < values.size(); ++v) {
      IndexQuery q;
      q.value = values[v];
      std::vector<FileId> got;
      ASSERT_TRUE(index->Search(txn, q, [&](FileId id) {
                           got.push_back(id);
                           return true;
                         }).ok());
      ASSERT_TRUE(std::is_sorted(got.begin(), got.end()));
      ASSERT_EQ(std::set<FileId>(got.begin(), got.end()), model[v]) << "value " << v;
      ASSERT_EQ(got.size(), model[v].size()) << "an id twice for value " << v;
    }
  };
  auto chunks = [&](MDB_txn* txn) {
    MDB_dbi dbi;
    EXPECT_EQ(mdb_dbi_open(txn, "bp.kw", 0, &dbi), 0);
    MDB_stat st;
    EXPECT_EQ(mdb_stat(txn, dbi, &st), 0);
    return st.ms_entries;
  };
  for (int round = 0; round < 12; ++round) {
    MDB_txn* txn = env.Begin();
    const size_t v = rng() % values.size();
    std::vector<FileId> ids;
    const uint64_t start = rng() % 100'000;
    // Ascending inos with small and large gaps, a volume change now and then.
    for (uint64_t i = 0, ino = start; i < 600; ++i, ino += 1 + (rng() % 8 == 0 ? rng() : rng() % 5)) {
      ids.push_back(FileId{static_cast<uint32_t>(rng() % 16 == 0 ? 2 : 1), ino});
    }
    if (round % 3 == 1) std::reverse(ids.begin(), ids.end());
    if (round % 3 == 2) std::shuffle(ids.begin(), ids.end(), rng);
    for (const FileId& id : ids) {
      ASSERT_TRUE(index->Insert(txn, values[v], id).ok());
      model[v].insert(id);
    }
    // Take out a random third, firsts of chunks among them.
    for (size_t i = 0; i < ids.size(); i += 1 + rng() % 5) {
      ASSERT_TRUE(index->Remove(txn, values[v], ids[i]).ok());
      model[v].erase(ids[i]);
    }
    ASSERT_NO_FATAL_FAILURE(check(txn));
    ASSERT_EQ(index->Size(), [&] {
      size_t n = 0;
      for (auto& [k, s] : model) n += s.size();
      return n;
    }());
    ASSERT_EQ(mdb_txn_commit(txn), 0);
  }
  MDB_txn* txn = env.Begin();
  EXPECT_GT(chunks(txn), values.size());  // chunks split
  for (auto& [v, ids] : model) {
    for (const FileId& id : std::vector<FileId>(ids.begin(), ids.end())) {
      ASSERT_TRUE(index->Remove(txn, values[v], id).ok());
      ids.erase(id);
    }
  }
  ASSERT_NO_FATAL_FAILURE(check(txn));
  EXPECT_EQ(chunks(txn), 0u);
  EXPECT_EQ(index->Size(), 0u);
  ASSERT_EQ(mdb_txn_commit(txn), 0);
}

// A damaged chunk is reported as corruption, not read past.
TEST(BTreePostingsTest, DamagedChunkIsCorruption) {
  TempEnv env;
  std::unique_ptr<Index> index = OpenBTree(env, "kw", /*postings=*/true);
  MDB_txn* txn = env.Begin();
  ASSERT_TRUE(index->Insert(txn, std::string("x"), FileId{1, 5}).ok());
  ASSERT_TRUE(index->Insert(txn, std::string("x"), FileId{1, 9}).ok());
  MDB_dbi dbi;
  ASSERT_EQ(mdb_dbi_open(txn, "bp.kw", 0, &dbi), 0);
  MDB_cursor* cur;
  ASSERT_EQ(mdb_cursor_open(txn, dbi, &cur), 0);
  MDB_val k, v;
  ASSERT_EQ(mdb_cursor_get(cur, &k, &v, MDB_FIRST), 0);
  const std::string key(static_cast<const char*>(k.mv_data), k.mv_size);
  mdb_cursor_close(cur);
  for (const std::string& bad : {std::string("\x80"), std::string(1, '\0'),  // truncated; delta 0
                                 std::string("\x03")}) {                     // bad escape
    MDB_val bk{key.size(), const_cast<char*>(key.data())};
    MDB_val bv{bad.size(), const_cast<char*>(bad.data())};
    ASSERT_EQ(mdb_put(txn, dbi, &bk, &bv, 0), 0);
    IndexQuery q;
    q.value = std::string("x");
    const Status s = index->Search(txn, q, [](FileId) { return true; });
    EXPECT_EQ(s.code(), StatusCode::kCorruption) << s.ToString();
  }
  mdb_txn_abort(txn);
}

// Fixture for targeted cases: one btree index "t" in a fresh environment.
class BTreeIndexCaseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    index_ = Open(env_, IndexType::kBTree, "t");
    ASSERT_NE(index_, nullptr);
    txn_ = env_.Begin();
  }
  void TearDown() override {
    if (txn_ != nullptr) mdb_txn_abort(txn_);
  }
  void Put(const AttrValue& v, uint64_t ino) {
    ASSERT_TRUE(index_->Insert(txn_, v, FileId{1, ino}).ok());
  }
  std::vector<uint64_t> Run(const IndexQuery& q) {
    std::vector<uint64_t> inos;
    const Status s = index_->Search(txn_, q, [&](FileId id) {
      inos.push_back(id.ino);
      return true;
    });
    EXPECT_TRUE(s.ok()) << s.ToString();
    std::sort(inos.begin(), inos.end());
    return inos;
  }
  static IndexQuery Range(std::optional<IndexBound> lo, std::optional<IndexBound> hi) {
    IndexQuery q;
    q.kind = IndexQuery::Kind::kRange;
    q.lo = std::move(lo);
    q.hi = std::move(hi);
    return q;
  }

  TempEnv env_;
  std::unique_ptr<Index> index_;
  MDB_txn* txn_ = nullptr;
};

using Inos = std::vector<uint64_t>;

TEST_F(BTreeIndexCaseTest, NumbersAndStringsStayApart) {
  Put(int64_t{3}, 1);
  Put(3.0, 2);
  Put(2.9999, 3);
  Put(std::string("3"), 4);
  Put(std::string(""), 5);
  Put(int64_t{4}, 6);
  IndexQuery eq;
  eq.value = 3.0;
  EXPECT_EQ(Run(eq), (Inos{1, 2}));
  eq.value = std::string("3");
  EXPECT_EQ(Run(eq), (Inos{4}));
  EXPECT_EQ(Run(Range(IndexBound{int64_t{3}, false}, std::nullopt)), (Inos{6}));
  EXPECT_EQ(Run(Range(IndexBound{2.5, true}, IndexBound{int64_t{3}, true})), (Inos{1, 2, 3}));
  EXPECT_EQ(Run(Range(IndexBound{2.5, true}, IndexBound{int64_t{3}, false})), (Inos{3}));
  EXPECT_EQ(Run(Range(std::nullopt, IndexBound{std::string("9"), true})), (Inos{4, 5}));
  EXPECT_EQ(Run(Range(IndexBound{int64_t{0}, true}, IndexBound{std::string("9"), true})),
            (Inos{}));  // mixed bound types match nothing
  EXPECT_EQ(Run(Range(std::nullopt, std::nullopt)), (Inos{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(Run(Range(IndexBound{int64_t{5}, true}, IndexBound{int64_t{1}, true})), (Inos{}));
  EXPECT_EQ(Run(Range(IndexBound{int64_t{3}, false}, IndexBound{int64_t{3}, true})), (Inos{}));
  IndexQuery prefix;
  prefix.kind = IndexQuery::Kind::kPrefix;
  EXPECT_EQ(Run(prefix), (Inos{4, 5}));  // "" = every string
  // 3 and 3.0 under one id are one entry.
  Put(3.0, 1);
  EXPECT_EQ(index_->Size(), 6u);
  ASSERT_TRUE(index_->Remove(txn_, 3.0, FileId{1, 1}).ok());
  eq.value = int64_t{3};
  EXPECT_EQ(Run(eq), (Inos{2}));
}

TEST_F(BTreeIndexCaseTest, EachIdOnceAndEarlyStop) {
  // One id under several values (not what the ACG does, but robust).
  for (int i = 0; i < 5; ++i) Put(std::string("v") + std::to_string(i), 7);
  Put(std::string("v9"), 8);
  IndexQuery prefix;
  prefix.kind = IndexQuery::Kind::kPrefix;
  prefix.prefix = "v";
  EXPECT_EQ(Run(prefix), (Inos{7, 8}));
  EXPECT_EQ(Run(Range(IndexBound{std::string("v"), true}, std::nullopt)), (Inos{7, 8}));
  int calls = 0;
  ASSERT_TRUE(index_->Search(txn_, prefix, [&](FileId) { return ++calls < 1; }).ok());
  EXPECT_EQ(calls, 1);
}

TEST_F(BTreeIndexCaseTest, NotSupportedKinds) {
  IndexQuery box;
  box.kind = IndexQuery::Kind::kBox;
  EXPECT_EQ(index_->Search(txn_, box, [](FileId) { return true; }).code(),
            StatusCode::kNotSupported);
  EXPECT_EQ(index_->InsertPoint(txn_, KdPoint{}, FileId{}).code(), StatusCode::kNotSupported);
  EXPECT_EQ(index_->RemovePoint(txn_, FileId{}).code(), StatusCode::kNotSupported);
  EXPECT_EQ(index_->MemoryBytes(), 0u);
}

TEST(BTreeIndexTest, DropRemovesData) {
  TempEnv env;
  std::unique_ptr<Index> index = Open(env, IndexType::kBTree, "gone");
  MDB_txn* txn = env.Begin();
  ASSERT_TRUE(index->Insert(txn, int64_t{1}, FileId{1, 1}).ok());
  ASSERT_EQ(mdb_txn_commit(txn), 0);
  index.reset();
  txn = env.Begin();
  ASSERT_TRUE(DropIndexData(txn, IndexType::kBTree, "gone").ok());
  ASSERT_TRUE(DropIndexData(txn, IndexType::kBTree, "never").ok());  // absent: OK
  ASSERT_EQ(mdb_txn_commit(txn), 0);
  index = Open(env, IndexType::kBTree, "gone");
  ASSERT_NE(index, nullptr);
  EXPECT_EQ(index->Size(), 0u);
}

TEST(IndexCommonTest, TypeNames) {
  for (IndexType t : {IndexType::kBTree, IndexType::kHash, IndexType::kKdTree}) {
    auto parsed = ParseIndexType(IndexTypeName(t));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, t);
  }
  EXPECT_STREQ(IndexTypeName(IndexType::kBTree), "btree");
  EXPECT_STREQ(IndexTypeName(IndexType::kHash), "hash");
  EXPECT_STREQ(IndexTypeName(IndexType::kKdTree), "kdtree");
  EXPECT_EQ(ParseIndexType("BTree").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseIndexType("").status().code(), StatusCode::kInvalidArgument);
}

TEST(IndexCommonTest, ValidateIndexName) {
  for (const char* ok : {"inode", "path", "keyword", "project", "user.project", "a", "x-1_y.z",
                         "a234567890123456789012345678901234567890123456789012345678901234"}) {
    EXPECT_EQ(ValidateIndexName(ok), "") << ok;
  }
  for (const char* bad : {"", "1abc", "_a", "Abc", "a b", "a/b",
                          "a2345678901234567890123456789012345678901234567890123456789012345"}) {
    EXPECT_NE(ValidateIndexName(bad), "") << bad;
    EXPECT_NE(CheckNewIndexName(bad), "") << bad;
  }
  // A built-in attribute name (or alias) names no new index, but one in an old catalogue
  // still opens.
  for (const char* builtin : {"size", "mtime", "uid", "name", "ext", "type", "nlink", "mode",
                              "perm", "user", "owner", "group", "iname", "ipath"}) {
    EXPECT_EQ(CheckNewIndexName(builtin),
              "'" + std::string(builtin) + "' is a built-in attribute and cannot name an index")
        << builtin;
    EXPECT_EQ(ValidateIndexName(builtin), "") << builtin;
  }
  EXPECT_EQ(CheckNewIndexName("path"), "");  // refused by the caller as a built-in index
  EXPECT_EQ(CheckNewIndexName("project"), "");
  TempEnv env;
  MDB_txn* txn = env.Begin();
  EXPECT_EQ(OpenIndex(txn, IndexType::kBTree, "Bad Name").status().code(),
            StatusCode::kInvalidArgument);
  mdb_txn_abort(txn);
}

TEST(IndexCommonTest, LmdbStatusMapping) {
  EXPECT_TRUE(LmdbStatus(0, "x").ok());
  const Status nf = LmdbStatus(MDB_NOTFOUND, "get k");
  EXPECT_TRUE(nf.IsNotFound());
  EXPECT_EQ(nf.message().rfind("get k: ", 0), 0u) << nf.message();
  EXPECT_NE(nf.message().find(mdb_strerror(MDB_NOTFOUND)), std::string::npos);
  EXPECT_EQ(LmdbStatus(MDB_MAP_FULL, "x").code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(LmdbStatus(MDB_CORRUPTED, "x").code(), StatusCode::kCorruption);
  EXPECT_EQ(LmdbStatus(MDB_PAGE_NOTFOUND, "x").code(), StatusCode::kCorruption);
  EXPECT_EQ(LmdbStatus(MDB_KEYEXIST, "x").code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(LmdbStatus(EIO, "x").code(), StatusCode::kIOError);
  EXPECT_EQ(LmdbStatus(EINVAL, "x").code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace propeller
