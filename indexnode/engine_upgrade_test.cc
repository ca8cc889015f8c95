// Upgrade in place (schemas/LAYOUT.md): data directories written by the programs of older data
// layouts open with this program, are converted and answer exactly what the old program
// answered. Layout 3 (one LMDB environment per ACG) converts into the store; layout 4 (the
// store, with the keyword index one key per entry) rebuilds each ACG's keyword index in
// posting chunks. The fixtures (testdata/layout3.tar.gz and layout4.tar.gz, made by
// testdata/make_layout_fixture.cc built against the last program of each layout) hold the
// directory and the old program's answers (layout_fixture.h: Dump): the oracle.
#include <gtest/gtest.h>
#include <lmdb.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "common/fault_env.h"
#include "indexnode/engine.h"
#include "indexnode/engine_test_util.h"
#include "indexnode/testdata/layout_fixture.h"

namespace propeller {
namespace {

namespace fs = std::filesystem;
using testing::ReadAll;
using testing::TempDir;

// Unpacks a fixture (layout3.tar.gz by default); returns the old program's answers.
std::string Unpack(const std::string& into, const std::string& archive = "layout3.tar.gz") {
  const std::string cmd = "tar -xzf '" + std::string(PROPELLER_TESTDATA_DIR) + "/" + archive +
                          "' -C '" + into + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  return ReadAll(into + "/expected.txt");
}

EngineOptions Options(const std::string& data, Env* env = nullptr) {
  EngineOptions o;
  o.data_dir = data;
  o.background_commit = false;
  o.store_shards = 2;
  o.env = env;
  return o;
}

std::vector<std::string> LayoutThreeFiles(const std::string& data) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(data + "/acg")) {
    for (const char* f : {"data.mdb", "lock.mdb"}) {
      if (fs::exists(e.path() / f)) out.push_back((e.path() / f).string());
    }
  }
  return out;
}

TEST(EngineUpgradeTest, LayoutThreeOpensConvertsAndAnswersExactly) {
  TempDir dir;
  const std::string expected = Unpack(dir.path());
  ASSERT_FALSE(expected.empty());
  const std::string data = dir.path() + "/data";
  ASSERT_FALSE(LayoutThreeFiles(data).empty()) << "the fixture is not of layout 3";
  {
    auto engine = Engine::Open(Options(data));
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    EXPECT_TRUE(LayoutThreeFiles(data).empty()) << "the old environments stay";
    EXPECT_EQ(ReadAll(data + "/LAYOUT"), "5\n");
    EXPECT_EQ((*engine)->Stats().store_environments, 2u);
    auto dump = layout_fixture::Dump(engine->get());
    ASSERT_TRUE(dump.ok()) << dump.status().ToString();
    EXPECT_EQ(*dump, expected);
    // The split's routes came along: an update of a moved file goes to its new ACG.
    Update u;
    u.acg = 1;
    u.record = layout_fixture::RecordOf(1, 2);
    u.record.size = 123'456'789;
    ASSERT_TRUE((*engine)->Apply({&u, 1}).ok());
    SearchRequest req;
    req.query = "size=123456789";
    req.now_ns = testing::kNow;
    auto hits = (*engine)->SearchAll(req);
    ASSERT_TRUE(hits.ok()) << hits.status().ToString();
    ASSERT_EQ(hits->size(), 1u);
    EXPECT_EQ((*hits)[0].acg, layout_fixture::kSplitTarget);
    ASSERT_TRUE((*engine)->Close().ok());
  }
  // Opened again: converted once, the same answers plus that update.
  auto engine = Engine::Open(Options(data));
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  auto dump = layout_fixture::Dump(engine->get());
  ASSERT_TRUE(dump.ok()) << dump.status().ToString();
  EXPECT_NE(*dump, expected);  // the size changed
  auto got = (*engine)->Get(layout_fixture::kSplitTarget, layout_fixture::RecordOf(1, 2).id);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->size, 123'456'789u);
}

// Fails the removal of one converted ACG's old data file: the conversion stops there.
class FailOneRemoval : public FaultInjectionEnv {
 public:
  explicit FailOneRemoval(std::string path)
      : FaultInjectionEnv(Env::Default()), path_(std::move(path)) {}
  Status RemoveFile(const std::string& path) override {
    if (path == path_ && armed_) return Status::IOError("injected: removing " + path, EIO);
    return FaultInjectionEnv::RemoveFile(path);
  }
  bool armed_ = true;

 private:
  std::string path_;
};

TEST(EngineUpgradeTest, AnInterruptedConversionResumesAtTheNextOpen) {
  TempDir dir;
  const std::string expected = Unpack(dir.path());
  const std::string data = dir.path() + "/data";
  FailOneRemoval env(data + "/acg/3/data.mdb");
  auto failed = Engine::Open(Options(data, &env));
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().ToString().find("acg/3/data.mdb"), std::string::npos)
      << failed.status().ToString();
  // ACG 3 is in the store already and its old file is still there: both at once.
  EXPECT_TRUE(fs::exists(data + "/acg/3/data.mdb"));
  env.armed_ = false;
  auto engine = Engine::Open(Options(data, &env));
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  EXPECT_TRUE(LayoutThreeFiles(data).empty());
  auto dump = layout_fixture::Dump(engine->get());
  ASSERT_TRUE(dump.ok()) << dump.status().ToString();
  EXPECT_EQ(*dump, expected) << "a resumed conversion must not copy an ACG twice";
}

// Entries of database `db` in every shard of the store under `data`.
uint64_t StoreEntries(const std::string& data, const std::string& db) {
  uint64_t total = 0;
  for (const auto& e : fs::directory_iterator(data + "/store")) {
    if (!e.is_directory()) continue;
    MDB_env* env = nullptr;
    EXPECT_EQ(mdb_env_create(&env), 0);
    mdb_env_set_maxdbs(env, 64);
    EXPECT_EQ(mdb_env_open(env, e.path().c_str(), MDB_RDONLY, 0600), 0) << e.path();
    MDB_txn* txn = nullptr;
    EXPECT_EQ(mdb_txn_begin(env, nullptr, MDB_RDONLY, &txn), 0);
    MDB_dbi dbi;
    if (mdb_dbi_open(txn, db.c_str(), 0, &dbi) == 0) {
      MDB_stat st;
      EXPECT_EQ(mdb_stat(txn, dbi, &st), 0);
      total += st.ms_entries;
    }
    mdb_txn_abort(txn);
    mdb_env_close(env);
  }
  return total;
}

TEST(EngineUpgradeTest, LayoutFourRebuildsTheKeywordIndexAndAnswersExactly) {
  TempDir dir;
  const std::string expected = Unpack(dir.path(), "layout4.tar.gz");
  ASSERT_FALSE(expected.empty());
  const std::string data = dir.path() + "/data";
  ASSERT_EQ(ReadAll(data + "/LAYOUT"), "4\n") << "the fixture is not of layout 4";
  ASSERT_GT(StoreEntries(data, "bt.keyword"), 0u);
  for (int round = 0; round < 2; ++round) {  // converted, then opened as is
    auto engine = Engine::Open(Options(data));
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    EXPECT_EQ(ReadAll(data + "/LAYOUT"), "5\n");
    auto dump = layout_fixture::Dump(engine->get());
    ASSERT_TRUE(dump.ok()) << dump.status().ToString();
    EXPECT_EQ(*dump, expected) << "round " << round;
    ASSERT_TRUE((*engine)->Close().ok());
    EXPECT_EQ(StoreEntries(data, "bt.keyword"), 0u) << "the old keyword entries stay";
    EXPECT_GT(StoreEntries(data, "bp.keyword"), 0u);
  }
}

TEST(EngineUpgradeTest, ANewerLayoutIsRefusedSayingWhy) {
  TempDir dir;
  testing::WriteFile(dir.path() + "/LAYOUT", "6\n");
  auto engine = Engine::Open(Options(dir.path()));
  ASSERT_FALSE(engine.ok());
  EXPECT_EQ(engine.status().code(), StatusCode::kCorruption);
  EXPECT_NE(engine.status().message().find("layout 6, newer than this program's (5)"),
            std::string::npos)
      << engine.status().ToString();
}

}  // namespace
}  // namespace propeller
