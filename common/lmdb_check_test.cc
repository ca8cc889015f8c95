// CheckLmdbFile against real LMDB files: an intact file passes, a truncated one and damaged
// meta, branch and leaf pages are caught with the page named, and — the point of it — no file
// the deep check passes makes LMDB crash when every record is read (random byte flips, each
// tried in a child process so that a crash is a failure, not the end of the test).
#include "common/lmdb_check.h"

#include <lmdb.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "common/random.h"
#include "common/temp_dir.h"

namespace propeller {
namespace {

using testing::TempDir;
using testing::ReadAll;
using testing::WriteFile;


// An environment in `dir` with two named databases: 20,000 small records (several levels of
// branch pages) and 50 records of 10 KB (overflow pages).
void MakeEnv(const std::string& dir) {
  MDB_env* env = nullptr;
  ASSERT_EQ(mdb_env_create(&env), 0);
  mdb_env_set_maxdbs(env, 4);
  mdb_env_set_mapsize(env, 256u << 20);
  ASSERT_EQ(mdb_env_open(env, dir.c_str(), 0, 0600), 0);
  MDB_txn* txn = nullptr;
  ASSERT_EQ(mdb_txn_begin(env, nullptr, 0, &txn), 0);
  MDB_dbi small = 0, big = 0;
  ASSERT_EQ(mdb_dbi_open(txn, "small", MDB_CREATE, &small), 0);
  ASSERT_EQ(mdb_dbi_open(txn, "big", MDB_CREATE, &big), 0);
  for (int i = 0; i < 20000; ++i) {
    std::string k = "key-" + std::to_string(i * 7919 % 20000);
    std::string v = "value " + std::to_string(i) + std::string(i % 50, 'v');
    MDB_val key{k.size(), k.data()}, val{v.size(), v.data()};
    ASSERT_EQ(mdb_put(txn, small, &key, &val, 0), 0);
  }
  for (int i = 0; i < 50; ++i) {
    std::string k = "big-" + std::to_string(i);
    std::string v(10000, static_cast<char>('a' + i % 26));
    MDB_val key{k.size(), k.data()}, val{v.size(), v.data()};
    ASSERT_EQ(mdb_put(txn, big, &key, &val, 0), 0);
  }
  ASSERT_EQ(mdb_txn_commit(txn), 0);
  // A second transaction deletes some: the free list gets entries.
  ASSERT_EQ(mdb_txn_begin(env, nullptr, 0, &txn), 0);
  for (int i = 0; i < 20000; i += 3) {
    std::string k = "key-" + std::to_string(i);
    MDB_val key{k.size(), k.data()};
    ASSERT_EQ(mdb_del(txn, small, &key, nullptr), 0);
  }
  ASSERT_EQ(mdb_txn_commit(txn), 0);
  mdb_env_close(env);
}

// Opens the environment and reads every record of both databases; exits 0 when done.
[[noreturn]] void ReadEverythingAndExit(const std::string& dir) {
  MDB_env* env = nullptr;
  if (mdb_env_create(&env) != 0) _exit(2);
  mdb_env_set_maxdbs(env, 4);
  mdb_env_set_mapsize(env, 256u << 20);
  if (mdb_env_open(env, dir.c_str(), MDB_RDONLY, 0600) != 0) _exit(0);  // refused: fine
  MDB_txn* txn = nullptr;
  if (mdb_txn_begin(env, nullptr, MDB_RDONLY, &txn) != 0) _exit(0);
  for (const char* name : {"small", "big"}) {
    MDB_dbi dbi = 0;
    if (mdb_dbi_open(txn, name, 0, &dbi) != 0) continue;
    MDB_cursor* cur = nullptr;
    if (mdb_cursor_open(txn, dbi, &cur) != 0) continue;
    MDB_val k, v;
    size_t sum = 0;
    for (int rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
      for (size_t i = 0; i < v.mv_size; i += 512) sum += static_cast<const char*>(v.mv_data)[i];
    }
    if (sum == 1) _exit(0);  // keeps the reads
    mdb_cursor_close(cur);
  }
  _exit(0);
}

// Page numbers of every page with header flags `flags`.
std::vector<size_t> PagesWithFlags(const std::string& bytes, uint16_t flags) {
  std::vector<size_t> out;
  for (size_t pg = 2; (pg + 1) * 4096 <= bytes.size(); ++pg) {
    uint16_t f;
    std::memcpy(&f, bytes.data() + pg * 4096 + 10, 2);
    if (f == flags) out.push_back(pg);
  }
  return out;
}

class LmdbCheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(MakeEnv(tmp_.path()));
    good_ = ReadAll(data());
  }
  std::string data() const { return tmp_.path() + "/data.mdb"; }
  Status CheckWith(const std::string& bytes, bool deep = true) {
    WriteFile(data(), bytes);
    return CheckLmdbFile(data(), deep);
  }

  TempDir tmp_;
  std::string good_;
};

TEST_F(LmdbCheckTest, AnIntactFilePasses) {
  LmdbCheckStats stats;
  ASSERT_TRUE(CheckLmdbFile(data(), true, &stats).ok());
  EXPECT_GT(stats.pages, 100u);
  EXPECT_GT(stats.last_page, stats.pages);  // overflow runs count once; free pages not at all
  EXPECT_FALSE(PagesWithFlags(good_, 0x01).empty()) << "the test needs branch pages";
  EXPECT_FALSE(PagesWithFlags(good_, 0x04).empty()) << "the test needs overflow pages";
  EXPECT_TRUE(CheckLmdbFile(data(), false).ok());
}

TEST_F(LmdbCheckTest, ATruncatedFileIsCaughtByTheQuickCheck) {
  for (size_t keep : {good_.size() / 2, good_.size() - 4096, size_t{4096 * 2 + 100}}) {
    Status s = CheckWith(good_.substr(0, keep), /*deep=*/false);
    ASSERT_EQ(s.code(), StatusCode::kCorruption) << keep;
    EXPECT_NE(s.ToString().find(data()), std::string::npos) << s.ToString();
    EXPECT_NE(s.ToString().find("truncated"), std::string::npos) << s.ToString();
  }
  EXPECT_EQ(CheckWith(good_.substr(0, 100), false).code(), StatusCode::kCorruption);
}

TEST_F(LmdbCheckTest, DamagedMetaBranchAndLeafPagesAreNamed) {
  struct Case {
    const char* what;
    size_t offset;
  };
  LmdbCheckStats stats;
  ASSERT_TRUE(CheckLmdbFile(data(), true, &stats).ok());
  ASSERT_FALSE(stats.branch_pages.empty());
  const size_t branch = stats.branch_pages.back() * 4096;
  const size_t leaf = stats.leaf_pages.back() * 4096;
  // The newest meta page (the larger transaction id) is the one LMDB uses.
  uint64_t txn0, txn1;
  std::memcpy(&txn0, good_.data() + 16 + 128, 8);
  std::memcpy(&txn1, good_.data() + 4096 + 16 + 128, 8);
  const size_t meta = txn1 > txn0 ? 4096 : 0;
  const std::vector<Case> cases = {
      {"meta magic", meta + 16},
      {"meta page size", meta + 16 + 24},
      {"meta last page", meta + 16 + 120 + 2},
      {"meta main database root", meta + 16 + 72 + 40 + 3},
      {"branch page number", branch + 1},
      {"branch flags", branch + 10},
      {"branch lower bound", branch + 12},
      {"branch first pointer", branch + 16 + 1},
      {"branch child pointer (second node's header)", branch + 18},
      {"leaf flags", leaf + 10},
      {"leaf upper bound", leaf + 15},
      {"leaf node pointer", leaf + 17},
  };
  for (const Case& c : cases) {
    std::string bad = good_;
    bad[c.offset] = static_cast<char>(bad[c.offset] ^ 0x5a);
    Status s = CheckWith(bad);
    EXPECT_EQ(s.code(), StatusCode::kCorruption) << c.what << ": " << s.ToString();
  }
}

TEST_F(LmdbCheckTest, NothingTheDeepCheckPassesCrashesLmdb) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("PROPELLER_SEED=" + std::to_string(seed));
  Random rnd(seed);
  int caught = 0, passed = 0;
  for (int round = 0; round < 150; ++round) {
    std::string bad = good_;
    const int flips = 1 + static_cast<int>(rnd.Uniform(8));
    // Half the rounds hit page headers and node tables, where damage is structural.
    for (int f = 0; f < flips; ++f) {
      size_t at = rnd.Uniform(bad.size());
      if (round % 2 == 0) at = (at / 4096) * 4096 + rnd.Uniform(64);
      bad[at] = static_cast<char>(bad[at] ^ (1 << rnd.Uniform(8)));
    }
    Status s = CheckWith(bad);
    if (!s.ok()) {
      ASSERT_EQ(s.code(), StatusCode::kCorruption) << s.ToString();
      ++caught;
      continue;
    }
    ++passed;
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) ReadEverythingAndExit(tmp_.path());
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "round " << round << ": the check passed the file, and reading it "
        << (WIFSIGNALED(status) ? "died of signal " + std::to_string(WTERMSIG(status))
                                : "exited " + std::to_string(WEXITSTATUS(status)));
  }
  EXPECT_GT(caught, 20);
  EXPECT_GT(passed, 20);
}

TEST_F(LmdbCheckTest, AMarkSaysWhetherTheFileChangedSince) {
  const std::string mark = tmp_.path() + "/CLEAN";
  EXPECT_FALSE(LmdbFileMatchesMark(data(), mark));
  ASSERT_TRUE(WriteLmdbFileMark(data(), mark).ok());
  EXPECT_TRUE(LmdbFileMatchesMark(data(), mark));
  std::string bad = good_;
  bad[good_.size() / 2] ^= 1;
  WriteFile(data(), bad);  // same size, new modification time
  EXPECT_FALSE(LmdbFileMatchesMark(data(), mark));
}

}  // namespace
}  // namespace propeller
