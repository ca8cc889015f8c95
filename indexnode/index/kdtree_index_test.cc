// The kdtree index against a brute-force model (std::map<FileId, KdPoint>) on seeded random
// operation streams, plus targeted cases: ties on box bounds, degenerate boxes, duplicate
// points, INT64 extremes, timestamps 1 ns apart (finer than a double can tell at 1.7e18),
// reopen from LMDB, the persisted byte layout, corrupt data, concurrent searches.
//
// Seeds: PROPELLER_SEED overrides the fixed default; every randomized test prints its
// seed on failure (SCOPED_TRACE).
#include "indexnode/index/kdtree_index.h"

#include <gtest/gtest.h>
#include <lmdb.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <iterator>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/random.h"
#include "indexnode/index/lmdb_test_env.h"
#include "schemas/keys.h"

namespace propeller {
namespace {

constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();
constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kNowNs = 1'700'000'000'123'456'789;  // 2023-11; doubles step by 256 here

using index_test::TempEnv;

MDB_txn* BeginWrite(MDB_env* env) {
  MDB_txn* txn = nullptr;
  if (mdb_txn_begin(env, nullptr, 0, &txn) != 0) std::abort();
  return txn;
}

void Commit(MDB_txn* txn) {
  if (mdb_txn_commit(txn) != 0) std::abort();
}

std::vector<FileId> Collect(const Index& index, MDB_txn* txn, const IndexQuery& q) {
  std::vector<FileId> ids;
  Status st = index.Search(txn, q, [&](FileId id) {
    ids.push_back(id);
    return true;
  });
  EXPECT_TRUE(st.ok()) << st.ToString();
  std::sort(ids.begin(), ids.end());  // duplicates are kept, so they show as a mismatch
  return ids;
}

// The oracle. Takes the model as a flat id-ordered vector: iterating a 50k-entry std::map for
// every query dominated the test's run time.
using FlatModel = std::vector<std::pair<FileId, KdPoint>>;

// The index keeps each coordinate rounded to the nearest float (through the nearest double)
// and answers with every point whose rounded coordinates are within the rounded bounds — a
// superset of the exact answer (kdtree_index.h).
float Rounded(int64_t v) { return static_cast<float>(static_cast<double>(v)); }

// exact = false: the index's documented answer; exact = true: the true matches.
std::vector<FileId> BruteForce(const FlatModel& model, const IndexQuery& q, bool exact = false) {
  std::vector<FileId> ids;
  for (const auto& [id, p] : model) {
    bool in = true;
    for (int a = 0; a < kNumInodeAxes && in; ++a) {
      if (q.box_lo[a] && q.box_hi[a] && *q.box_lo[a] > *q.box_hi[a]) {
        in = false;  // an empty range stays empty
      } else if (exact) {
        if (q.box_lo[a] && p[a] < *q.box_lo[a]) in = false;
        if (q.box_hi[a] && p[a] > *q.box_hi[a]) in = false;
      } else {
        if (q.box_lo[a] && Rounded(p[a]) < Rounded(*q.box_lo[a])) in = false;
        if (q.box_hi[a] && Rounded(p[a]) > Rounded(*q.box_hi[a])) in = false;
      }
    }
    if (in) ids.push_back(id);
  }
  return ids;  // the model is ordered by id
}

std::vector<FileId> BruteForce(const std::map<FileId, KdPoint>& model, const IndexQuery& q,
                               bool exact = false) {
  return BruteForce(FlatModel(model.begin(), model.end()), q, exact);
}

IndexQuery BoxQuery() {
  IndexQuery q;
  q.kind = IndexQuery::Kind::kBox;
  return q;
}

std::string DescribeQuery(const IndexQuery& q) {
  std::string s;
  for (int a = 0; a < kNumInodeAxes; ++a) {
    s += "[" + (q.box_lo[a] ? std::to_string(*q.box_lo[a]) : std::string("-")) + "," +
         (q.box_hi[a] ? std::to_string(*q.box_hi[a]) : std::string("-")) + "] ";
  }
  return s;
}

// Kinds of coordinates a stream draws from.
enum class Profile { kSmall, kRealistic, kExtreme, kMixed };

class PointGen {
 public:
  PointGen(Profile profile, std::mt19937_64* rng) : profile_(profile), rng_(rng) {}

  int64_t Uniform(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(*rng_);
  }
  bool Chance(double p) { return std::bernoulli_distribution(p)(*rng_); }

  int64_t Coord(int axis, Profile profile) {
    switch (profile) {
      case Profile::kSmall:
        return Uniform(0, 7);  // few distinct values: duplicates and ties everywhere
      case Profile::kRealistic:
        return Realistic(axis);
      case Profile::kExtreme: {
        static constexpr int64_t kValues[] = {kI64Min, kI64Min + 1, -1,      0,
                                              1,       kI64Max - 1, kI64Max, kNowNs,
                                              kNowNs + 1, kNowNs + 2, kNowNs + 255, kNowNs + 256};
        return kValues[Uniform(0, std::size(kValues) - 1)];
      }
      case Profile::kMixed:
        break;
    }
    return Coord(axis, static_cast<Profile>(Uniform(0, 2)));
  }

  KdPoint Point() {
    KdPoint p;
    const Profile per_point = profile_ == Profile::kMixed ? static_cast<Profile>(Uniform(0, 2))
                                                          : profile_;
    for (int a = 0; a < kNumInodeAxes; ++a) p[a] = Coord(a, per_point);
    return p;
  }

 private:
  int64_t Realistic(int axis) {
    switch (axis) {
      case 0:  // size: many empty files, log-uniform up to 1 TiB
        return Chance(0.2) ? 0 : int64_t{1} << Uniform(0, 40) | Uniform(0, 1023);
      case 1:
      case 2:
      case 3:  // times: a dense cluster of ns-apart stamps, plus older files
        return Chance(0.5) ? kNowNs + Uniform(0, 2000)
                           : kNowNs - Uniform(0, int64_t{10} * 365 * 86400 * 1'000'000'000);
      default: {  // uid, gid
        static constexpr int64_t kIds[] = {0, 0, 1000, 1000, 1001, 1002, 65534};
        return kIds[Uniform(0, std::size(kIds) - 1)];
      }
    }
  }

  Profile profile_;
  std::mt19937_64* rng_;
};

// A model plus the index under test, in one LMDB environment.
class Harness {
 public:
  // scan: the index keeps no database and loads the model (KdTreeOptions::scan_points), as an
  // ACG's records are the source of its `inode` tree.
  explicit Harness(uint64_t seed, Profile profile = Profile::kMixed,
                   KdTreeOptions options = KdTreeOptions{}, bool scan = false)
      : rng_(seed), gen_(profile, &rng_), options_(options) {
    if (scan) {
      options_.scan_points = [this](MDB_txn*, const KdReserve& reserve, const KdAddPoint& add) {
        ++scans_;
        reserve(model_.size());
        for (const auto& [id, point] : model_) PROPELLER_RETURN_IF_ERROR(add(id, point, TagsOf(id)));
        return Status::OK();
      };
    }
    Reopen();
  }
  ~Harness() {
    if (txn_ != nullptr) mdb_txn_abort(txn_);
  }

  // Commits, closes the index and the environment, opens both again.
  void Reopen() {
    if (txn_ != nullptr) Commit(txn_);
    txn_ = nullptr;
    index_.reset();
    // Tags live in memory only: reloaded from the index's own database, a point has every bit.
    if (!options_.scan_points) tags_.clear();
    env_.Close();
    env_.Open();
    txn_ = BeginWrite(env_.env());
    auto opened = OpenKdTreeIndex(txn_, "inode", options_);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    index_ = std::move(opened).value();
    CommitAndBegin();  // the database handle survives only once committed
  }

  void CommitAndBegin() {
    Commit(txn_);
    txn_ = BeginWrite(env_.env());
  }

  // Ids come from volumes 1 .. n (2 unless set).
  void set_volumes(int n) { volumes_ = n; }
  FileId RandomId(uint64_t pool) {
    return FileId{static_cast<uint32_t>(gen_.Uniform(1, volumes_)),
                  static_cast<uint64_t>(gen_.Uniform(1, static_cast<int64_t>(pool)))};
  }

  void Insert(FileId id, const KdPoint& p) {
    Status st = index_->InsertPoint(txn_, p, id);
    ASSERT_TRUE(st.ok()) << st.ToString();
    model_[id] = p;
    tags_.erase(id);
    flat_dirty_ = true;
  }
  // As Insert, with tags (Index::InsertPoint); from now on queries carry random box_tags.
  void InsertTagged(FileId id, const KdPoint& p, uint64_t tags) {
    Status st = index_->InsertPoint(txn_, p, id, tags);
    ASSERT_TRUE(st.ok()) << st.ToString();
    model_[id] = p;
    tags_[id] = tags;
    tagged_ = true;
    flat_dirty_ = true;
  }
  void Remove(FileId id) {
    Status st = index_->RemovePoint(txn_, id);
    ASSERT_TRUE(st.ok()) << st.ToString();
    tags_.erase(id);
    flat_dirty_ = model_.erase(id) > 0 || flat_dirty_;
  }
  // What the index was told of id's tags (every bit when it was inserted without).
  uint64_t TagsOf(FileId id) const {
    auto it = tags_.find(id);
    return it == tags_.end() ? Index::kAllTags : it->second;
  }
  // Tags drawn from 6 bits, so that a query's one or two bits keep some points and not others.
  uint64_t RandomTags() { return static_cast<uint64_t>(gen_.Uniform(0, 63)) << 10; }

  // A random box: each axis unbounded, one-sided or two-sided; bounds are often existing
  // coordinates (ties), sometimes ±1 off them, sometimes fresh values; lo == hi sometimes.
  IndexQuery RandomBox() {
    IndexQuery q = BoxQuery();
    for (int a = 0; a < kNumInodeAxes; ++a) {
      const int mode = static_cast<int>(gen_.Uniform(0, 9));
      if (mode <= 3) continue;  // unbounded
      auto bound = [&] {
        if (!model_.empty() && gen_.Chance(0.6)) {
          auto it = model_.begin();
          std::advance(it, gen_.Uniform(0, std::min<int64_t>(model_.size() - 1, 64)));
          int64_t v = it->second[a];
          const int64_t delta = gen_.Uniform(-1, 1);
          if ((delta < 0 && v > kI64Min) || (delta > 0 && v < kI64Max)) v += delta;
          return v;
        }
        return gen_.Coord(a, Profile::kMixed);
      };
      if (mode <= 5) {
        q.box_lo[a] = bound();
      } else if (mode <= 7) {
        q.box_hi[a] = bound();
      } else if (mode == 8) {
        q.box_lo[a] = bound();
        q.box_hi[a] = q.box_lo[a];  // degenerate: lo == hi
      } else {
        int64_t x = bound();
        int64_t y = bound();
        if (x > y && gen_.Chance(0.9)) std::swap(x, y);  // keep a few empty boxes
        q.box_lo[a] = x;
        q.box_hi[a] = y;
      }
    }
    if (tagged_ && gen_.Chance(0.7)) {
      q.box_tags = uint64_t{1} << (10 + gen_.Uniform(0, 5));
      if (gen_.Chance(0.3)) q.box_tags |= uint64_t{1} << (10 + gen_.Uniform(0, 5));
    }
    return q;
  }

  void CheckQuery(const IndexQuery& q) {
    if (flat_dirty_) {
      flat_.assign(model_.begin(), model_.end());
      flat_dirty_ = false;
    }
    const std::vector<FileId> got = Collect(*index_, txn_, q);
    // The oracle's geometry, then the tags: a point is kept when its tags have all box_tags.
    auto by_tags = [&](std::vector<FileId> ids) {
      std::erase_if(ids, [&](FileId id) { return (TagsOf(id) & q.box_tags) != q.box_tags; });
      return ids;
    };
    EXPECT_EQ(got, by_tags(BruteForce(flat_, q))) << DescribeQuery(q) << " tags " << q.box_tags;
    const std::vector<FileId> exact = by_tags(BruteForce(flat_, q, /*exact=*/true));
    EXPECT_TRUE(std::includes(got.begin(), got.end(), exact.begin(), exact.end()))
        << "missed a match: " << DescribeQuery(q);
    // FilterBox keeps of any candidate set exactly what Search answers: a sample of the
    // indexed ids (inside and outside the box) and some ids that are not indexed.
    std::vector<FileId> sample;
    for (const auto& [id, point] : model_) {
      if (gen_.Chance(0.3)) sample.push_back(id);
    }
    for (int i = 0; i < 5; ++i) sample.push_back(FileId{99, static_cast<uint64_t>(i)});
    std::sort(sample.begin(), sample.end());
    std::vector<FileId> want;
    std::set_intersection(sample.begin(), sample.end(), got.begin(), got.end(),
                          std::back_inserter(want));
    ASSERT_TRUE(index_->FilterBox(q, &sample).ok());
    EXPECT_EQ(sample, want) << "FilterBox, " << DescribeQuery(q);
  }

  void CheckAll(int num_queries) {
    ASSERT_EQ(index_->Size(), model_.size());
    CheckQuery(BoxQuery());  // fully unbounded: every id
    for (int i = 0; i < num_queries && !::testing::Test::HasFailure(); ++i) CheckQuery(RandomBox());
  }

  // A stream of random operations with queries interleaved (which triggers lazy rebuilds).
  void RunStream(int ops, uint64_t id_pool, int query_every) {
    for (int i = 0; i < ops && !::testing::Test::HasFailure(); ++i) {
      const int64_t r = gen_.Uniform(0, 99);
      // With tags: the same point with new tags changes them in place.
      auto put = [&](FileId id, const KdPoint& p) {
        if (tagged_) {
          InsertTagged(id, p, RandomTags());
        } else {
          Insert(id, p);
        }
      };
      if (r < 45) {
        put(RandomId(id_pool), gen_.Point());
      } else if (r < 55 && !model_.empty()) {  // re-insert an existing id, new or same point
        auto it = model_.begin();
        std::advance(it, gen_.Uniform(0, std::min<int64_t>(model_.size() - 1, 200)));
        const KdPoint p = gen_.Chance(0.5) ? it->second : gen_.Point();
        put(it->first, p);
      } else if (r < 80) {
        Remove(RandomId(id_pool));  // often absent
      } else if (r < 82) {
        CommitAndBegin();
      } else {
        ASSERT_EQ(index_->Size(), model_.size());
      }
      if (query_every > 0 && i % query_every == 0) CheckQuery(RandomBox());
    }
  }

  Index& index() { return *index_; }
  MDB_txn* txn() { return txn_; }
  MDB_env* env() { return env_.env(); }
  const std::map<FileId, KdPoint>& model() const { return model_; }
  PointGen& gen() { return gen_; }
  int scans() const { return scans_; }

 private:
  TempEnv env_;
  std::mt19937_64 rng_;
  PointGen gen_;
  KdTreeOptions options_;
  MDB_txn* txn_ = nullptr;
  std::unique_ptr<Index> index_;
  std::map<FileId, KdPoint> model_;
  std::map<FileId, uint64_t> tags_;  // ids inserted with tags (InsertTagged)
  bool tagged_ = false;
  FlatModel flat_;  // model_ flattened for the oracle, refreshed when flat_dirty_
  bool flat_dirty_ = true;
  int scans_ = 0;  // calls of scan_points
  int volumes_ = 2;
};

TEST(KdTreeIndexTest, InterfaceBasics) {
  Harness h(TestSeed());
  EXPECT_EQ(h.index().type(), IndexType::kKdTree);
  EXPECT_EQ(h.index().name(), "inode");
  EXPECT_EQ(h.index().Size(), 0u);
  FileId id{1, 7};
  EXPECT_EQ(h.index().Insert(h.txn(), AttrValue{int64_t{3}}, id).code(), StatusCode::kNotSupported);
  EXPECT_EQ(h.index().Remove(h.txn(), AttrValue{int64_t{3}}, id).code(), StatusCode::kNotSupported);
  IndexQuery q;
  q.kind = IndexQuery::Kind::kEqual;
  q.value = int64_t{3};
  EXPECT_EQ(h.index().Search(h.txn(), q, [](FileId) { return true; }).code(),
            StatusCode::kNotSupported);
  q.kind = IndexQuery::Kind::kRange;
  EXPECT_EQ(h.index().Search(h.txn(), q, [](FileId) { return true; }).code(),
            StatusCode::kNotSupported);
  // Empty index: every box is empty; removing an absent id is OK.
  EXPECT_TRUE(Collect(h.index(), h.txn(), BoxQuery()).empty());
  EXPECT_TRUE(h.index().RemovePoint(h.txn(), id).ok());
  EXPECT_EQ(h.index().Size(), 0u);
}

// Sizes 0, 1, 2, 1000 and 50k, each profile; answers compared before and after a reopen.
struct StreamCase {
  int initial;
  int ops;
  int query_every;  // in the stream; each such query re-flattens the model for the oracle
  int queries;      // before the stream, after it, and after reopening
  Profile profile;
  bool scan = false;  // points from scan_points instead of the index's own database
  int volumes = 2;    // ids from volumes 1 .. volumes
};

class KdTreeStreamTest : public ::testing::TestWithParam<StreamCase> {};

TEST_P(KdTreeStreamTest, MatchesBruteForceAndSurvivesReopen) {
  const StreamCase& c = GetParam();
  const uint64_t seed = TestSeed() + c.initial * 7 + static_cast<uint64_t>(c.profile);
  SCOPED_TRACE("seed=" + std::to_string(seed));
  Harness h(seed, c.profile, KdTreeOptions{}, c.scan);
  h.set_volumes(c.volumes);
  const uint64_t id_pool = static_cast<uint64_t>(c.initial) * 5 / 4 + 4;
  while (h.model().size() < static_cast<size_t>(c.initial)) {
    h.Insert(h.RandomId(id_pool), h.gen().Point());
    if (::testing::Test::HasFatalFailure()) return;
  }
  ASSERT_EQ(h.index().Size(), static_cast<uint64_t>(c.initial));
  h.CheckAll(c.queries);
  h.RunStream(c.ops, id_pool, c.query_every);
  h.CheckAll(c.queries);
  h.Reopen();
  h.CheckAll(c.queries);
  if (c.scan) {
    EXPECT_EQ(h.scans(), 2);  // one load per open
    MDB_txn* txn = nullptr;
    ASSERT_EQ(mdb_txn_begin(h.env(), nullptr, MDB_RDONLY, &txn), 0);
    MDB_dbi dbi;
    EXPECT_EQ(mdb_dbi_open(txn, "kd.inode", 0, &dbi), MDB_NOTFOUND);  // nothing written
    mdb_txn_abort(txn);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Sizes, KdTreeStreamTest,
    ::testing::Values(StreamCase{0, 0, 1, 20, Profile::kMixed},
                      StreamCase{1, 20, 1, 50, Profile::kMixed},
                      StreamCase{2, 40, 1, 50, Profile::kSmall},
                      StreamCase{2, 40, 1, 50, Profile::kExtreme},
                      StreamCase{1000, 3000, 10, 300, Profile::kSmall},
                      StreamCase{1000, 3000, 10, 300, Profile::kRealistic},
                      StreamCase{1000, 3000, 10, 300, Profile::kExtreme},
                      StreamCase{1000, 3000, 10, 300, Profile::kMixed},
                      StreamCase{50000, 5000, 250, 150, Profile::kRealistic},
                      StreamCase{50000, 5000, 250, 150, Profile::kMixed},
                      StreamCase{0, 0, 1, 20, Profile::kMixed, true},
                      StreamCase{1000, 3000, 10, 300, Profile::kExtreme, true},
                      StreamCase{50000, 5000, 250, 150, Profile::kMixed, true},
                      StreamCase{1000, 3000, 10, 300, Profile::kRealistic, false, 1},
                      StreamCase{50000, 5000, 250, 150, Profile::kMixed, true, 1}));

// Tags (Index::InsertPoint): a box query's box_tags keeps exactly the points inside whose tags
// have those bits, in Search and FilterBox, through updates that change only the tags (in
// place), points and removals, rebuilds and a reload through scan_points; a tree with its own
// database reloads every point with every bit set (the harness's model says so on Reopen).
TEST(KdTreeIndexTest, TagsFilterBoxesThroughUpdatesAndReloads) {
  for (bool scan : {true, false}) {
    const uint64_t seed = TestSeed() + (scan ? 1 : 0);
    SCOPED_TRACE("seed=" + std::to_string(seed) + (scan ? " scan" : " own database"));
    Harness h(seed, Profile::kRealistic, KdTreeOptions{}, scan);
    for (uint64_t ino = 1; ino <= 3000; ++ino) {
      h.InsertTagged(FileId{1, ino}, h.gen().Point(), h.RandomTags());
    }
    h.CheckAll(200);
    h.RunStream(/*ops=*/4000, /*id_pool=*/3500, /*query_every=*/20);
    h.CheckAll(200);
    h.Reopen();
    h.CheckAll(200);
    h.RunStream(/*ops=*/1000, /*id_pool=*/3500, /*query_every=*/20);
    h.CheckAll(200);
    if (::testing::Test::HasFailure()) return;
  }
}

// Files of one volume keep no per-slot volume; the first file of another volume (here with
// the same inode numbers) brings them in, inside a commit's batch and outside it, and after a
// reopen the answers are the same.
TEST(KdTreeIndexTest, ASecondVolumeArrives) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  Harness h(seed, Profile::kRealistic);
  h.set_volumes(1);
  const uint64_t before_bytes = h.index().MemoryBytes();
  for (uint64_t ino = 1; ino <= 2000; ++ino) h.Insert(FileId{1, ino}, h.gen().Point());
  h.CheckAll(100);
  const uint64_t one_volume = h.index().MemoryBytes() - before_bytes;
  h.Insert(FileId{2, 7}, h.gen().Point());  // the delta, then the table's lookups
  h.CheckAll(100);
  h.index().BeginBatch();
  for (uint64_t ino = 1; ino <= 500; ++ino) h.Insert(FileId{2, ino * 3}, h.gen().Point());
  h.index().EndBatch();
  EXPECT_GE(h.index().MemoryBytes() - before_bytes, one_volume + 2000 * sizeof(uint32_t));
  h.set_volumes(2);
  h.RunStream(/*ops=*/2000, /*id_pool=*/2500, /*query_every=*/50);
  h.CheckAll(100);
  h.Reopen();
  h.CheckAll(100);
  for (uint64_t ino = 1; ino <= 2500; ++ino) h.Remove(FileId{2, ino});
  h.CheckAll(100);
  h.Reopen();
  h.CheckAll(100);
}

// Not loaded (the ACG cache, index.h): changes reach only LMDB, searching is a caller bug,
// Load reads exactly what LMDB holds, Unload frees the memory, Reattach after the environment
// was closed and reopened keeps the loaded tree working, and Rebalance rebuilds a drifted
// tree without changing any answer.
TEST(KdTreeIndexTest, LazyLoadUnloadReattachAndRebalance) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  PointGen gen(Profile::kMixed, &rng);
  TempEnv env;
  MDB_txn* txn = BeginWrite(env.env());
  auto opened = OpenKdTreeIndex(txn, "inode", KdTreeOptions{}, /*load=*/false);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  std::unique_ptr<Index> index = std::move(opened).value();
  Commit(txn);
  EXPECT_FALSE(index->loaded());
  std::map<FileId, KdPoint> model;
  auto mutate = [&](int ops) {
    MDB_txn* w = BeginWrite(env.env());
    for (int i = 0; i < ops; ++i) {
      const FileId id{1, static_cast<uint64_t>(gen.Uniform(1, 3000))};
      if (gen.Chance(0.7)) {
        const KdPoint p = gen.Point();
        ASSERT_TRUE(index->InsertPoint(w, p, id).ok());
        model[id] = p;
      } else {
        ASSERT_TRUE(index->RemovePoint(w, id).ok());
        model.erase(id);
      }
    }
    Commit(w);
  };
  auto check = [&] {
    ASSERT_TRUE(index->loaded());
    ASSERT_EQ(index->Size(), model.size());
    EXPECT_EQ(Collect(*index, nullptr, BoxQuery()), BruteForce(model, BoxQuery()));
    for (int i = 0; i < 100; ++i) {
      IndexQuery q = BoxQuery();
      for (int a = 0; a < kNumInodeAxes; ++a) {
        if (gen.Chance(0.5)) q.box_lo[a] = gen.Coord(a, Profile::kMixed);
        if (gen.Chance(0.5)) q.box_hi[a] = gen.Coord(a, Profile::kMixed);
      }
      EXPECT_EQ(Collect(*index, nullptr, q), BruteForce(model, q)) << DescribeQuery(q);
    }
  };
  mutate(3000);
  EXPECT_EQ(index->Search(nullptr, BoxQuery(), [](FileId) { return true; }).code(),
            StatusCode::kInternal);
  const uint64_t unloaded_bytes = index->MemoryBytes();
  MDB_txn* r = env.Begin(/*read_only=*/true);
  ASSERT_TRUE(index->Load(r).ok());
  mdb_txn_abort(r);
  check();
  EXPECT_GT(index->MemoryBytes(), unloaded_bytes + model.size() * 48);
  mutate(2000);  // loaded: memory and LMDB change together
  ASSERT_TRUE(index->Rebalance().ok());
  check();
  index->Unload();
  EXPECT_FALSE(index->loaded());
  EXPECT_EQ(index->MemoryBytes(), unloaded_bytes);
  mutate(1000);
  env.Close();
  env.Open();
  txn = BeginWrite(env.env());
  ASSERT_TRUE(index->Reattach(txn).ok());
  Commit(txn);
  r = env.Begin(/*read_only=*/true);
  ASSERT_TRUE(index->Load(r).ok());
  mdb_txn_abort(r);
  check();
  env.Close();
  env.Open();
  txn = BeginWrite(env.env());
  ASSERT_TRUE(index->Reattach(txn).ok());  // loaded this time: the tree is kept
  Commit(txn);
  mutate(1500);
  check();
  // LMDB agrees with memory: a fresh object loads the same answers.
  txn = BeginWrite(env.env());
  opened = OpenKdTreeIndex(txn, "inode");
  ASSERT_TRUE(opened.ok());
  index = std::move(opened).value();
  Commit(txn);
  check();
}

// Tiny leaves and no slack: a rebuild after nearly every change and deep trees over
// duplicates, with queries between the changes.
TEST(KdTreeIndexTest, FrequentRebuildsTinyLeaves) {
  for (size_t leaf : {size_t{1}, size_t{2}, size_t{5}}) {
    const uint64_t seed = TestSeed() + leaf;
    SCOPED_TRACE("seed=" + std::to_string(seed) + " leaf=" + std::to_string(leaf));
    KdTreeOptions options;
    options.leaf_size = leaf;
    options.rebuild_slack = 0;
    Harness h(seed, Profile::kMixed, options);
    h.RunStream(/*ops=*/3000, /*id_pool=*/400, /*query_every=*/3);
    h.CheckAll(100);
    h.Reopen();
    h.CheckAll(100);
  }
}

// Many updates and removals with no search between them: the eager compaction path.
TEST(KdTreeIndexTest, UpdatesWithoutSearchesCompact) {
  const uint64_t seed = TestSeed() + 99;
  SCOPED_TRACE("seed=" + std::to_string(seed));
  KdTreeOptions options;
  options.rebuild_slack = 8;
  Harness h(seed, Profile::kRealistic, options);
  for (int i = 0; i < 20000; ++i) {
    h.Insert(h.RandomId(50), h.gen().Point());
    if (i % 3 == 0) h.Remove(h.RandomId(50));
  }
  // Tombstones are bounded by live/4 + slack, so memory stays near the live size.
  EXPECT_LT(h.index().MemoryBytes(), 64u * 1024) << "tombstones were not compacted";
  h.CheckAll(300);
}

// A commit that removes many points compacts once at EndBatch, building no tree: the searches
// after it read the last build's leaves without the removed slots (their boxes shrunk, some
// leaves gone) and a delta of new points after them. Answers as the brute force's, in Search
// and FilterBox with tags, then after more removals one at a time (each compaction as it
// comes), and after a reopen.
TEST(KdTreeIndexTest, CompactionKeepsTheLeavesAndLosesNoPoint) {
  const uint64_t seed = TestSeed() + 123;
  SCOPED_TRACE("seed=" + std::to_string(seed));
  KdTreeOptions options;
  options.leaf_size = 4;  // many leaves, many of them emptied
  options.rebuild_slack = 8;
  Harness h(seed, Profile::kMixed, options);
  for (int i = 0; i < 4000; ++i) h.InsertTagged(h.RandomId(6000), h.gen().Point(), h.RandomTags());
  h.CheckAll(20);  // builds the tree
  const uint64_t built_bytes = h.index().MemoryBytes();
  auto remove_some = [&](double p) {
    std::vector<FileId> ids;
    for (const auto& [id, point] : h.model()) {
      if (h.gen().Chance(p)) ids.push_back(id);
    }
    for (FileId id : ids) h.Remove(id);
  };
  h.index().BeginBatch();
  remove_some(0.45);
  h.index().EndBatch();
  EXPECT_LT(h.index().MemoryBytes(), built_bytes) << "the removed slots were not compacted";
  // New points, fewer than the lazy rebuild tolerates outside the leaves.
  const size_t fresh = h.model().size() / 10;
  for (size_t i = 0; i < fresh; ++i) {
    h.InsertTagged(FileId{3, 100000 + i}, h.gen().Point(), h.RandomTags());
  }
  h.CheckAll(300);
  remove_some(0.3);
  h.CheckAll(300);
  h.Reopen();
  h.CheckAll(100);
}

// Timestamps 1 ns apart at 1.7e18 round to the same float: the answer is the documented
// superset (every point whose rounded time equals the bound's), and never misses the match.
TEST(KdTreeIndexTest, NanosecondTimestampsGiveASuperset) {
  Harness h(TestSeed());
  constexpr int kN = 1000;
  for (int i = 0; i < kN; ++i) {
    h.Insert(FileId{1, static_cast<uint64_t>(i + 1)},
             KdPoint{4096, kNowNs + i, kNowNs, kNowNs - i, 1000, 1000});
  }
  for (int k : {0, 1, 2, 255, 256, 257, 500, kN - 1}) {
    IndexQuery q = BoxQuery();
    q.box_lo[1] = kNowNs + k;
    q.box_hi[1] = kNowNs + k;
    const std::vector<FileId> got = Collect(h.index(), h.txn(), q);
    EXPECT_TRUE(std::binary_search(got.begin(), got.end(), FileId{1, uint64_t(k) + 1}));
    EXPECT_EQ(got.size(), static_cast<size_t>(kN));  // all within one float step (~137 s)
    IndexQuery gt = BoxQuery();
    gt.box_lo[3] = kNowNs - k;  // atime >= now - k: ids 1..k+1, and their float neighbours
    EXPECT_GE(Collect(h.index(), h.txn(), gt).size(), static_cast<size_t>(k + 1));
    h.CheckQuery(q);
    h.CheckQuery(gt);
  }
  // A bound a float step away separates them.
  IndexQuery none = BoxQuery();
  none.box_lo[1] = kNowNs + (int64_t{1} << 38);
  EXPECT_TRUE(Collect(h.index(), h.txn(), none).empty());
  h.CheckQuery(none);
}

// 3000 identical points (the tree cannot split them by value) plus a few neighbours.
TEST(KdTreeIndexTest, DuplicatePointsAndBoundsOnThePoint) {
  Harness h(TestSeed());
  const KdPoint p{100, kNowNs, kNowNs, kNowNs, 0, 0};
  for (uint64_t i = 1; i <= 3000; ++i) h.Insert(FileId{1, i}, p);
  KdPoint above = p;
  above[0] = 101;
  h.Insert(FileId{2, 1}, above);
  KdPoint below = p;
  below[1] = kNowNs - 1;
  h.Insert(FileId{2, 2}, below);
  IndexQuery exact = BoxQuery();
  for (int a = 0; a < kNumInodeAxes; ++a) exact.box_lo[a] = exact.box_hi[a] = p[a];
  // The 3000, and `below`, whose mtime rounds onto the bound's (size 101 is exact and out).
  EXPECT_EQ(Collect(h.index(), h.txn(), exact).size(), 3001u);
  h.CheckQuery(exact);
  IndexQuery size_101 = BoxQuery();
  size_101.box_lo[0] = 101;
  h.CheckQuery(size_101);
  IndexQuery mtime_below = BoxQuery();
  mtime_below.box_hi[1] = kNowNs - 1;  // rounds onto kNowNs: everything is a candidate
  h.CheckQuery(mtime_below);
  IndexQuery size_below = BoxQuery();
  size_below.box_hi[0] = 99;  // small sizes are exact
  EXPECT_TRUE(Collect(h.index(), h.txn(), size_below).empty());
  for (int i = 0; i < 200; ++i) h.CheckQuery(h.RandomBox());
}

TEST(KdTreeIndexTest, Int64Extremes) {
  Harness h(TestSeed());
  const int64_t values[] = {kI64Min, kI64Min + 1, -1, 0, 1, kI64Max - 1, kI64Max};
  uint64_t ino = 1;
  for (int64_t v : values) {
    for (int64_t w : values) h.Insert(FileId{3, ino++}, KdPoint{v, w, v, w, v, w});
  }
  for (int64_t lo : values) {
    for (int64_t hi : values) {
      for (int axis = 0; axis < kNumInodeAxes; ++axis) {
        IndexQuery q = BoxQuery();
        q.box_lo[axis] = lo;
        q.box_hi[axis] = hi;
        h.CheckQuery(q);
        IndexQuery one_sided = BoxQuery();
        one_sided.box_hi[axis] = hi;
        h.CheckQuery(one_sided);
      }
    }
  }
  h.Reopen();
  for (int i = 0; i < 300; ++i) h.CheckQuery(h.RandomBox());
}

TEST(KdTreeIndexTest, CallbackStopsEarly) {
  Harness h(TestSeed());
  for (uint64_t i = 1; i <= 500; ++i) h.Insert(FileId{1, i}, KdPoint{int64_t(i), 0, 0, 0, 0, 0});
  for (int stop_after : {1, 7, 100}) {
    int calls = 0;
    Status st = h.index().Search(h.txn(), BoxQuery(), [&](FileId) { return ++calls < stop_after; });
    EXPECT_TRUE(st.ok());
    EXPECT_EQ(calls, stop_after);
  }
}

// The persisted layout of schemas/keys.h, written out by hand: key = volume u32 BE ‖ ino u64 BE,
// value = 6 × (int64 big-endian with the sign bit flipped).
TEST(KdTreeIndexTest, PersistedLayout) {
  Harness h(TestSeed());
  const FileId id{0x01020304, 0x05060708090A0B0Cull};
  h.Insert(id, KdPoint{1, -1, 0, kI64Min, kI64Max, 0x0123456789ABCDEF});
  h.CommitAndBegin();
  MDB_dbi dbi;
  ASSERT_EQ(mdb_dbi_open(h.txn(), "kd.inode", 0, &dbi), 0);
  const std::string key("\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0A\x0B\x0C", 12);
  MDB_val k{key.size(), const_cast<char*>(key.data())};
  MDB_val v;
  ASSERT_EQ(mdb_get(h.txn(), dbi, &k, &v), 0);
  const std::string expected(
      "\x80\x00\x00\x00\x00\x00\x00\x01"
      "\x7F\xFF\xFF\xFF\xFF\xFF\xFF\xFF"
      "\x80\x00\x00\x00\x00\x00\x00\x00"
      "\x00\x00\x00\x00\x00\x00\x00\x00"
      "\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF"
      "\x81\x23\x45\x67\x89\xAB\xCD\xEF",
      48);
  EXPECT_EQ(std::string(static_cast<const char*>(v.mv_data), v.mv_size), expected);
  // RemovePoint deletes the key.
  ASSERT_TRUE(h.index().RemovePoint(h.txn(), id).ok());
  EXPECT_EQ(mdb_get(h.txn(), dbi, &k, &v), MDB_NOTFOUND);
}

void PutRaw(MDB_env* env, const std::string& key, const std::string& value) {
  MDB_txn* txn = BeginWrite(env);
  MDB_dbi dbi;
  ASSERT_EQ(mdb_dbi_open(txn, "kd.bad", MDB_CREATE, &dbi), 0);
  MDB_val k{key.size(), const_cast<char*>(key.data())};
  MDB_val v{value.size(), const_cast<char*>(value.data())};
  ASSERT_EQ(mdb_put(txn, dbi, &k, &v, 0), 0);
  Commit(txn);
}

StatusCode OpenCode(MDB_env* env, const std::string& name) {
  MDB_txn* txn = BeginWrite(env);
  auto opened = OpenKdTreeIndex(txn, name);
  mdb_txn_abort(txn);
  return opened.status().code();
}

TEST(KdTreeIndexTest, CorruptDataIsReported) {
  {
    TempEnv env;
    PutRaw(env.env(), std::string(12, '\x01'), std::string(47, '\x00'));  // short value
    EXPECT_EQ(OpenCode(env.env(), "bad"), StatusCode::kCorruption);
  }
  {
    TempEnv env;
    PutRaw(env.env(), std::string(11, '\x01'), std::string(48, '\x00'));  // short key
    EXPECT_EQ(OpenCode(env.env(), "bad"), StatusCode::kCorruption);
  }
  {
    TempEnv env;
    PutRaw(env.env(), std::string(12, '\x01'), std::string(49, '\x00'));  // long value
    EXPECT_EQ(OpenCode(env.env(), "bad"), StatusCode::kCorruption);
  }
  {
    TempEnv env;
    PutRaw(env.env(), std::string(12, '\x01'), std::string(48, '\x00'));  // well formed
    EXPECT_EQ(OpenCode(env.env(), "bad"), StatusCode::kOk);
  }
}

TEST(KdTreeIndexTest, DropDeletesData) {
  Harness h(TestSeed());
  for (uint64_t i = 1; i <= 10; ++i) h.Insert(FileId{1, i}, KdPoint{int64_t(i), 0, 0, 0, 0, 0});
  h.CommitAndBegin();
  MDB_txn* txn = h.txn();
  ASSERT_TRUE(DropKdTreeIndexData(txn, "inode").ok());
  ASSERT_TRUE(DropKdTreeIndexData(txn, "inode").ok());  // already gone
  ASSERT_TRUE(DropKdTreeIndexData(txn, "never-created").ok());
  auto reopened = OpenKdTreeIndex(txn, "inode");
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  EXPECT_EQ((*reopened)->Size(), 0u);
  EXPECT_TRUE(Collect(**reopened, txn, BoxQuery()).empty());
}

// With scan_points: opening drops a "kd.<name>" database an older version wrote (the points
// come from the source now), a source's error fails Load and leaves the index unloaded, and a
// later Load succeeds.
TEST(KdTreeIndexTest, ScanPointsDropsTheOldDatabaseAndReportsErrors) {
  TempEnv env;
  {
    MDB_txn* txn = BeginWrite(env.env());
    auto own = OpenKdTreeIndex(txn, "inode");
    ASSERT_TRUE(own.ok()) << own.status().ToString();
    ASSERT_TRUE((*own)->InsertPoint(txn, KdPoint{5, 0, 0, 0, 0, 0}, FileId{1, 1}).ok());
    Commit(txn);
  }
  std::map<FileId, KdPoint> points = {{FileId{1, 2}, KdPoint{7, 1, 1, 1, 1, 1}},
                                      {FileId{1, 3}, KdPoint{9, 2, 2, 2, 2, 2}}};
  bool fail = true;
  KdTreeOptions options;
  options.scan_points = [&](MDB_txn*, const KdReserve& reserve, const KdAddPoint& add) {
    reserve(points.size());
    for (const auto& [id, point] : points) PROPELLER_RETURN_IF_ERROR(add(id, point, Index::kAllTags));
    return fail ? Status::Corruption("bad record") : Status::OK();
  };
  MDB_txn* txn = BeginWrite(env.env());
  auto opened = OpenKdTreeIndex(txn, "inode", options, /*load=*/false);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  Index& index = **opened;
  MDB_dbi dbi;
  EXPECT_EQ(mdb_dbi_open(txn, "kd.inode", 0, &dbi), MDB_NOTFOUND);
  EXPECT_EQ(index.Load(txn).code(), StatusCode::kCorruption);
  EXPECT_FALSE(index.loaded());
  EXPECT_EQ(index.Size(), 0u);
  // Not loaded: a change touches nothing (the source holds it).
  ASSERT_TRUE(index.InsertPoint(txn, KdPoint{1, 1, 1, 1, 1, 1}, FileId{1, 9}).ok());
  ASSERT_TRUE(index.RemovePoint(txn, FileId{1, 2}).ok());
  EXPECT_EQ(mdb_dbi_open(txn, "kd.inode", 0, &dbi), MDB_NOTFOUND);
  fail = false;
  ASSERT_TRUE(index.Load(txn).ok());
  EXPECT_EQ(Collect(index, txn, BoxQuery()), (std::vector<FileId>{FileId{1, 2}, FileId{1, 3}}));
  IndexQuery q = BoxQuery();
  q.box_lo[0] = 8;
  EXPECT_EQ(Collect(index, txn, q), (std::vector<FileId>{FileId{1, 3}}));
  Commit(txn);
}

// Searches from several threads right after changes: the first one rebuilds lazily while the
// others wait; all must see the same exact answers.
TEST(KdTreeIndexTest, ConcurrentSearchesAfterChanges) {
  const uint64_t seed = TestSeed() + 5;
  SCOPED_TRACE("seed=" + std::to_string(seed));
  KdTreeOptions options;
  options.rebuild_slack = 0;
  Harness h(seed, Profile::kRealistic, options);
  std::vector<IndexQuery> queries;
  for (int i = 0; i < 30; ++i) queries.push_back(h.RandomBox());
  for (int round = 0; round < 5; ++round) {
    for (int i = 0; i < 2000; ++i) h.Insert(h.RandomId(5000), h.gen().Point());
    for (int i = 0; i < 300; ++i) h.Remove(h.RandomId(5000));
    std::vector<std::vector<FileId>> expected;
    for (const IndexQuery& q : queries) expected.push_back(BruteForce(h.model(), q));
    std::vector<std::thread> threads;
    std::vector<int> mismatches(4, 0);
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        MDB_txn* read = nullptr;  // each thread its own LMDB read transaction
        if (mdb_txn_begin(h.env(), nullptr, MDB_RDONLY, &read) != 0) std::abort();
        for (size_t i = 0; i < queries.size(); ++i) {
          std::vector<FileId> got;
          Status st = h.index().Search(read, queries[i], [&](FileId id) {
            got.push_back(id);
            return true;
          });
          std::sort(got.begin(), got.end());
          if (!st.ok() || got != expected[i]) ++mismatches[t];
          (void)h.index().MemoryBytes();  // races a lazy rebuild unless locked
        }
        mdb_txn_abort(read);
      });
    }
    for (auto& th : threads) th.join();
    for (int t = 0; t < 4; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
  }
}

// docs/architecture.md §11 budget: ≤ 200 B per file for the whole node; this structure stays
// resident for every ACG (open or closed), so it gets at most ~60.
TEST(KdTreeIndexTest, MemoryPerPoint) {
  Harness h(TestSeed(), Profile::kRealistic);
  constexpr uint64_t kN = 50000;
  for (uint64_t i = 1; i <= kN; ++i) h.Insert(FileId{1, i}, h.gen().Point());
  (void)Collect(h.index(), h.txn(), BoxQuery());  // builds the tree
  const double per_point = static_cast<double>(h.index().MemoryBytes()) / kN;
  EXPECT_GT(per_point, 36.0);  // at least the 36 B of codes + id
  EXPECT_LT(per_point, 64.0);
  h.Reopen();
  const double reopened = static_cast<double>(h.index().MemoryBytes()) / kN;
  EXPECT_LT(reopened, 64.0);
  std::printf("kdtree MemoryBytes per point at 50k: %.1f after inserts, %.1f after reopen\n",
              per_point, reopened);
}

}  // namespace
}  // namespace propeller
