// A scratch LMDB environment for the index-structure tests (test-only; not in the library).
#ifndef PROPELLER_INDEXNODE_INDEX_LMDB_TEST_ENV_H_
#define PROPELLER_INDEXNODE_INDEX_LMDB_TEST_ENV_H_

#include <gtest/gtest.h>
#include <lmdb.h>
#include <stdlib.h>
#include <unistd.h>

#include <string>

namespace propeller::index_test {

// A scratch LMDB environment in a fresh temporary directory, removed at the end.
class TempEnv {
 public:
  TempEnv() {
    char tmpl[] = "/tmp/propeller-index-test.XXXXXX";
    const char* dir = mkdtemp(tmpl);
    if (dir == nullptr) {
      ADD_FAILURE() << "mkdtemp failed";
      return;
    }
    dir_ = dir;
    Open();
  }
  ~TempEnv() {
    Close();
    if (!dir_.empty()) {
      unlink((dir_ + "/data.mdb").c_str());
      unlink((dir_ + "/lock.mdb").c_str());
      rmdir(dir_.c_str());
    }
  }
  void Open() {
    ASSERT_EQ(mdb_env_create(&env_), 0);
    ASSERT_EQ(mdb_env_set_maxdbs(env_, 64), 0);
    ASSERT_EQ(mdb_env_set_mapsize(env_, size_t{1} << 30), 0);
    ASSERT_EQ(mdb_env_open(env_, dir_.c_str(), MDB_NOSYNC, 0644), 0);
  }
  void Close() {
    if (env_ != nullptr) mdb_env_close(env_);
    env_ = nullptr;
  }
  MDB_txn* Begin(bool read_only = false) {
    MDB_txn* txn = nullptr;
    EXPECT_EQ(mdb_txn_begin(env_, nullptr, read_only ? MDB_RDONLY : 0, &txn), 0);
    return txn;
  }
  MDB_env* env() const { return env_; }

 private:
  std::string dir_;
  MDB_env* env_ = nullptr;
};

}  // namespace propeller::index_test

#endif  // PROPELLER_INDEXNODE_INDEX_LMDB_TEST_ENV_H_
