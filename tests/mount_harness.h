// A real `propeller mount` for tests (tests/fuse_test.cc, fuse_backing_test.cc, ...): the
// CLI binary started as a child process on a fresh backing directory, and the searches of its
// query engine. Test-only.
#ifndef PROPELLER_TESTS_MOUNT_HARNESS_H_
#define PROPELLER_TESTS_MOUNT_HARNESS_H_

#include <dirent.h>
#include <grp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "client/lib/propeller.h"
#include "tests/cluster_harness.h"

namespace propeller::testing {

// An open descriptor, closed at scope exit: a failed assertion must not leave a file open on
// the mount, or the unmount cannot end the daemon.
struct ScopedFd {
  explicit ScopedFd(int f) : fd(f) {}
  ~ScopedFd() {
    if (fd >= 0) ::close(fd);
  }
  int Close() { return ::close(std::exchange(fd, -1)); }
  int fd;
};

// A `propeller mount` of a fresh backing directory, stopped (unmounted) at destruction.
// `extra`: options after MOUNTPOINT; `global`: options before `mount` (--master, ...);
// `backing`: the backing directory's path below root() (made, with its parents).
class Mount {
 public:
  explicit Mount(std::vector<std::string> extra = {}, std::vector<std::string> global = {},
                 const std::string& backing = "backing") {
    namespace fs = std::filesystem;
    using namespace std::chrono_literals;
    root_ = "/tmp/propeller-fuse-test-" + std::to_string(::getpid()) + "-" +
            std::to_string(counter_++);
    fs::remove_all(root_);
    backing_ = root_ + "/" + backing;
    mnt_ = root_ + "/mnt";
    fs::create_directories(backing_);
    fs::create_directories(mnt_);
    fs::create_directories(root_ + "/data");
    ::chmod(root_.c_str(), 0755);
    ::chmod(backing_.c_str(), 0755);
    std::vector<std::string> argv = {PROPELLER_CLI_BIN};
    argv.insert(argv.end(), global.begin(), global.end());
    for (std::string a : {std::string("mount"), backing_, mnt_, std::string("--data"), data(),
                          std::string("--ready-file"), root_ + "/ready"}) {
      argv.push_back(std::move(a));
    }
    argv.insert(argv.end(), extra.begin(), extra.end());
    child_ = std::make_unique<ChildProcess>(argv, log());
  }
  ~Mount() {
    namespace fs = std::filesystem;
    if (mounted_) {
      std::string cmd = "fusermount3 -u " + mnt_ + " 2>/dev/null";
      if (std::system(cmd.c_str()) != 0) {
        cmd = "umount -l " + mnt_ + " 2>/dev/null";
        (void)std::system(cmd.c_str());
      }
    }
    child_->Terminate();
    if (::getenv("PROPELLER_KEEP_TEST_DIRS") == nullptr) fs::remove_all(root_);
  }

  // Starts the mount and waits until it serves. false (with the log printed) on failure.
  bool Start() {
    namespace fs = std::filesystem;
    using namespace std::chrono_literals;
    fs::remove(root_ + "/ready");
    if (!child_->Start()) return false;
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (std::chrono::steady_clock::now() < deadline) {
      if (fs::exists(root_ + "/ready")) {
        mounted_ = true;
        return true;
      }
      std::this_thread::sleep_for(20ms);
    }
    ADD_FAILURE() << "the mount did not become ready; log:\n" << ReadAll(log());
    return false;
  }

  // Starts the daemon expecting it to refuse: true once it exited without serving (30 s at
  // most), false (a test failure) when it mounted.
  bool FailsToStart() {
    namespace fs = std::filesystem;
    using namespace std::chrono_literals;
    fs::remove(root_ + "/ready");
    if (!child_->Start()) return false;
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (std::chrono::steady_clock::now() < deadline) {
      if (fs::exists(root_ + "/ready")) {
        mounted_ = true;
        ADD_FAILURE() << "the mount started; log:\n" << ReadAll(log());
        return false;
      }
      if (child_->Exited()) return true;
      std::this_thread::sleep_for(20ms);
    }
    ADD_FAILURE() << "the daemon neither mounted nor ended; log:\n" << ReadAll(log());
    return false;
  }

  // Unmounts and waits for the daemon to end by itself (what an unmount must do). false
  // (with the log printed) when it did not end within 30 s.
  bool Stop() {
    using namespace std::chrono_literals;
    std::string cmd = "fusermount3 -u " + mnt_;
    if (std::system(cmd.c_str()) != 0) {
      ADD_FAILURE() << "fusermount3 -u failed";
      return false;
    }
    mounted_ = false;
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (std::chrono::steady_clock::now() < deadline) {
      if (child_->Exited()) return true;
      std::this_thread::sleep_for(20ms);
    }
    ADD_FAILURE() << "the daemon did not end after the unmount; log:\n" << ReadAll(log());
    return false;
  }

  // Sends `sig` to the daemon and waits up to 30 s for it to end. false when it did not.
  bool SignalAndWait(int sig) {
    using namespace std::chrono_literals;
    if (::kill(child_->pid(), sig) != 0) return false;
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (std::chrono::steady_clock::now() < deadline) {
      if (child_->Exited()) {
        mounted_ = false;
        return true;
      }
      std::this_thread::sleep_for(20ms);
    }
    return false;
  }

  std::string log() const { return root_ + "/mount.log"; }
  std::string data() const { return root_ + "/data"; }
  const std::string& backing() const { return backing_; }
  const std::string& mnt() const { return mnt_; }
  const std::string& root() const { return root_; }

 private:
  static inline int counter_ = 0;
  std::string root_, backing_, mnt_;
  std::unique_ptr<ChildProcess> child_;
  bool mounted_ = false;
};

// The names in a directory (no . and ..); empty with *err set on failure.
inline std::vector<std::string> List(const std::string& dir, int* err = nullptr) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (err != nullptr) *err = d == nullptr ? errno : 0;
  if (d == nullptr) return out;
  while (struct dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") out.push_back(n);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

// In a child just forked: becomes uid/gid with no supplementary groups.
inline bool BecomeUser(uid_t uid, gid_t gid) {
  return ::setgroups(0, nullptr) == 0 && ::setresgid(gid, gid, gid) == 0 &&
         ::setresuid(uid, uid, uid) == 0;
}

// Runs fn in a child with uid/gid (no supplementary groups); its return value (an errno, 0 for
// success) is the result, 126 when the ids could not be set.
inline int InChildAs(uid_t uid, gid_t gid, const std::function<int()>& fn) {
  pid_t pid = ::fork();
  if (pid == 0) {
    if (!BecomeUser(uid, gid)) ::_exit(126);
    ::_exit(fn());
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

inline std::unique_ptr<Client> LocalClient() {
  // Searches scoped inside the mount go to its query engine: no master endpoint is needed.
  ClientOptions o;
  o.master_endpoint = "ipc:///nonexistent/propeller-master.sock";  // never dialed
  auto c = Client::Connect(o);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? std::move(*c) : nullptr;
}

// The matches of `query` under `scope` (a directory through a mount), as the mount's query
// engine answers them.
inline void SearchMount(const std::string& query, const std::string& scope,
                 std::vector<ClientHit>* hits) {
  auto client = LocalClient();
  ASSERT_NE(client, nullptr);
  ClientSearchOptions so;
  so.scope = scope;
  auto found = client->SearchAll(query, so);
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  *hits = std::move(*found);
}

// Path -> size of every regular file the mount's index finds under `scope`.
inline void IndexedFileSizes(const std::string& scope, std::map<std::string, uint64_t>* sizes) {
  std::vector<ClientHit> hits;
  ASSERT_NO_FATAL_FAILURE(SearchMount("type=f", scope, &hits));
  for (const ClientHit& h : hits) (*sizes)[h.path] = h.record.size;
}

}  // namespace propeller::testing

#endif  // PROPELLER_TESTS_MOUNT_HARNESS_H_
