// Test helpers for the master's tests: a temporary directory and a fake clock. Test-only.
#ifndef PROPELLER_MASTER_MASTER_TEST_UTIL_H_
#define PROPELLER_MASTER_MASTER_TEST_UTIL_H_

#include <stdlib.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "common/temp_dir.h"
#include "master/membership.h"

namespace propeller::master::testing {

// A fresh directory under $TMPDIR (or /tmp), removed on destruction.
class TempDir : public propeller::testing::TempDir {
 public:
  TempDir() : propeller::testing::TempDir("propeller-master-test") {}
};

// A clock the test moves by hand; one value serves as both monotonic and wall time.
class FakeClock {
 public:
  int64_t now() const { return now_->load(); }
  void Advance(int64_t ms) { now_->fetch_add(ms * 1000000); }
  MasterClock clock() const {
    auto n = now_;
    return MasterClock{[n] { return n->load(); }, [n] { return n->load(); }};
  }

 private:
  std::shared_ptr<std::atomic<int64_t>> now_ =
      std::make_shared<std::atomic<int64_t>>(int64_t{1'700'000'000} * 1'000'000'000);
};

}  // namespace propeller::master::testing

#endif  // PROPELLER_MASTER_MASTER_TEST_UTIL_H_
