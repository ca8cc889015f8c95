// The security tests' shared part (tests/security_test.cc, tests/security_planting_test.cc):
// ordinary users made for the test, commands run as them, the oracle of what they may see
// (`find` as that user), checks of modes, sockets and TCP listeners, the probe's output, and
// a fixture with a tree like an HPC home area.
#ifndef PROPELLER_TESTS_SECURITY_FIXTURE_H_
#define PROPELLER_TESTS_SECURITY_FIXTURE_H_

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "client/lib/mount_registry.h"
#include "client/lib/propeller.h"
#include "common/rpc/rpc.h"
#include "tests/cluster_harness.h"

namespace propeller::testing {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

inline std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

// An ordinary account made for the test and removed after it.
class SystemUser {
 public:
  explicit SystemUser(const std::string& base) {
    name_ = base + std::to_string(::getpid() % 100000);
    const std::string cmd = "useradd -M -N -s /usr/sbin/nologin " + name_ + " 2>&1";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    struct passwd* pw = ::getpwnam(name_.c_str());
    if (pw != nullptr) {
      uid_ = pw->pw_uid;
      gid_ = pw->pw_gid;
    }
  }
  ~SystemUser() { (void)std::system(("userdel " + name_ + " 2>/dev/null").c_str()); }
  bool ok() const { return uid_ != 0; }
  uid_t uid() const { return uid_; }
  gid_t gid() const { return gid_; }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  uid_t uid_ = 0;
  gid_t gid_ = 0;
};

struct RunResult {
  int code = -1;
  std::string out, err;
};

// Runs argv as uid/gid (no supplementary groups) with `env` added ("NAME=value"), at most
// `timeout` long.
inline RunResult RunAs(uid_t uid, gid_t gid, const std::vector<std::string>& argv,
          const std::vector<std::string>& env = {}, std::chrono::seconds timeout = 60s) {
  char out_tmpl[] = "/tmp/propeller-sec-out-XXXXXX";
  char err_tmpl[] = "/tmp/propeller-sec-err-XXXXXX";
  const int out_fd = ::mkstemp(out_tmpl);
  const int err_fd = ::mkstemp(err_tmpl);
  RunResult r;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(out_fd, 1);
    ::dup2(err_fd, 2);
    for (const std::string& e : env) ::putenv(::strdup(e.c_str()));
    if (uid != 0 &&
        (::setgroups(0, nullptr) != 0 || ::setgid(gid) != 0 || ::setuid(uid) != 0)) {
      ::_exit(126);
    }
    std::vector<char*> raw;
    for (const std::string& a : argv) raw.push_back(const_cast<char*>(a.c_str()));
    raw.push_back(nullptr);
    ::execv(raw[0], raw.data());
    ::_exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      ADD_FAILURE() << argv[0] << " did not finish in time";
      break;
    }
    std::this_thread::sleep_for(10ms);
  }
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  ::close(out_fd);
  ::close(err_fd);
  r.out = ReadAll(out_tmpl);
  r.err = ReadAll(err_tmpl);
  ::unlink(out_tmpl);
  ::unlink(err_tmpl);
  return r;
}

// Every path `find ROOT` prints as this user: exactly what they could find by walking.
inline std::set<std::string> FindAs(const SystemUser* user, const std::string& root) {
  RunResult r = RunAs(user ? user->uid() : 0, user ? user->gid() : 0, {"/usr/bin/find", root});
  std::set<std::string> out;
  for (const std::string& line : Lines(r.out)) out.insert(line);
  return out;
}

// TCP sockets process `pid` listens on (from /proc/net/tcp{,6} and its descriptors).
inline std::vector<std::string> TcpListeners(pid_t pid) {
  std::set<std::string> inodes;
  const std::string fd_dir = "/proc/" + std::to_string(pid) + "/fd";
  for (const auto& e : fs::directory_iterator(fd_dir)) {
    char buf[64];
    const ssize_t n = ::readlink(e.path().c_str(), buf, sizeof(buf) - 1);
    if (n <= 0) continue;
    std::string target(buf, static_cast<size_t>(n));
    if (target.rfind("socket:[", 0) == 0) inodes.insert(target.substr(8, target.size() - 9));
  }
  std::vector<std::string> out;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::istringstream in(ReadAll(table));
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream f(line);
      std::vector<std::string> col;
      std::string c;
      while (f >> c) col.push_back(c);
      if (col.size() > 9 && col[3] == "0A" && inodes.count(col[9])) out.push_back(col[1]);
    }
  }
  return out;
}

// Modes of `dir` and everything below it that are not `dir_mode` (directories) or
// `file_mode` (the rest), or not owned by root: "path mode" per line.
inline std::vector<std::string> WrongModes(const std::string& dir, mode_t dir_mode,
                                           mode_t file_mode) {
  std::vector<std::string> out;
  auto check = [&](const fs::path& path) {
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0) return;
    const mode_t want = S_ISDIR(st.st_mode) ? dir_mode : file_mode;
    if ((st.st_mode & 07777) != want || st.st_uid != 0 || S_ISLNK(st.st_mode)) {
      char buf[16];
      std::snprintf(buf, sizeof(buf), " %04o", st.st_mode & 07777);
      out.push_back(path.string() + buf);
    }
  };
  check(dir);
  for (const auto& e : fs::recursive_directory_iterator(dir)) check(e.path());
  return out;
}

// Everything in the runtime directory `run` (and `run` itself) that is not as docs/security.md
// ("Embedded modes", "What is stored where") says the service leaves it, all root's:
// directories 0755; sockets 0666, since every local user must connect (connect(2) needs write
// permission on the socket) and each request is authorized by the caller's kernel credentials;
// mount records, regular files with one link in `run`/mounts, 0644. "path mode" per line.
inline std::vector<std::string> WrongRuntimeModes(const std::string& run) {
  std::vector<std::string> out;
  auto check = [&](const fs::path& path) {
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0) return;
    const mode_t mode = st.st_mode & 07777;
    bool ok = false;
    if (S_ISDIR(st.st_mode)) {
      ok = mode == 0755;
    } else if (S_ISSOCK(st.st_mode)) {
      ok = mode == 0666;
    } else if (S_ISREG(st.st_mode)) {
      ok = mode == 0644 && st.st_nlink == 1 && path.parent_path() == fs::path(run) / "mounts";
    }
    if (!ok || st.st_uid != 0) {
      char buf[32];
      std::snprintf(buf, sizeof(buf), " %06o uid %u", st.st_mode, st.st_uid);
      out.push_back(path.string() + buf);
    }
  };
  check(run);
  for (const auto& e : fs::recursive_directory_iterator(run)) check(e.path());
  return out;
}

// Runs `op` in a child process as `uid`/`gid` (no supplementary groups); `op` returns 0, or
// -1 with errno set, as a system call does. Returns 0 or that errno value; -1 when the child
// could not become the user or died.
inline int ErrnoAs(uid_t uid, gid_t gid, const std::function<int()>& op) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::setgroups(0, nullptr) != 0 || ::setgid(gid) != 0 || ::setuid(uid) != 0) ::_exit(255);
    ::_exit(op() == 0 ? 0 : errno & 0xff);
  }
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status) == 255 ? -1 : WEXITSTATUS(status);
}

// A unix stream socket bound to `path` and listening: 0, or -1 with errno set. The
// descriptor stays open until the process ends.
inline int ListenAt(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    errno = ENAMETOOLONG;
    return -1;
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  return ::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0 &&
                 ::listen(fd, 16) == 0
             ? 0
             : -1;
}

// Whether `uid`/`gid` (no supplementary groups) can connect to the unix socket at `path`.
inline bool ConnectsAs(uid_t uid, gid_t gid, const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) return false;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  return ErrnoAs(uid, gid, [&] {
           const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
           return fd < 0 ? -1 : ::connect(fd, reinterpret_cast<const sockaddr*>(&addr),
                                          sizeof(addr));
         }) == 0;
}

// A process of `uid`/`gid` serving a unix socket at `path` (listening, accepting nothing)
// until Kill(), which leaves the socket file behind, as a crash does.
class SocketServerAs {
 public:
  SocketServerAs(uid_t uid, gid_t gid, const std::string& path) {
    int ready[2];
    if (::pipe(ready) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(ready[0]);
      if (::setgroups(0, nullptr) != 0 || ::setgid(gid) != 0 || ::setuid(uid) != 0) ::_exit(1);
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // after setuid, which clears it
      const char ok = 1;
      if (ListenAt(path) != 0 || ::write(ready[1], &ok, 1) != 1) ::_exit(1);
      for (;;) ::pause();
    }
    ::close(ready[1]);
    char ok = 0;
    serving_ = pid_ > 0 && ::read(ready[0], &ok, 1) == 1;
    ::close(ready[0]);
  }
  ~SocketServerAs() { Kill(); }
  bool serving() const { return serving_; }
  void Kill() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
  bool serving_ = false;
};

// One line per probe attempt: name -> (status code, the rest of the line).
inline std::map<std::string, std::pair<int, std::string>> ParseProbe(const std::string& out) {
  std::map<std::string, std::pair<int, std::string>> r;
  for (const std::string& line : Lines(out)) {
    const size_t sp = line.find(' ');
    const std::string name = line.substr(0, sp);
    const std::string rest = sp == std::string::npos ? "" : line.substr(sp + 1);
    if (name.find("-hits") != std::string::npos || name.find("-paths") != std::string::npos ||
        name.find("-roots") != std::string::npos || name.find("-count") != std::string::npos) {
      r[name] = {0, rest};
    } else {
      r[name] = {std::atoi(rest.c_str()), rest};
    }
  }
  return r;
}

constexpr const char* kWrites[] = {
    "apply-put",    "apply-delete",  "apply-edge",  "create-index", "drop-index",
    "register-volume", "remove-volume", "assign-files", "forget-files", "register-node",
    "heartbeat",    "new-acg",       "split-done",  "move-acg",     "migrate-acg",
    "adopt-acg",    "release-acg"};

// The test's users and tree. The tree (what an HPC home area looks like):
//   ROOT/home/<alice> 0700 <alice>: notes.txt        ROOT/pub 0755: readme.txt (root 0644)
//   ROOT/home/<bob>   0700 <bob>:   secret.txt       ROOT/pub/drop 0711: hidden.txt
class SecurityTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    alice_ = new SystemUser("ptalice");
    bob_ = new SystemUser("ptbob");
  }
  static void TearDownTestSuite() {
    delete alice_;
    delete bob_;
  }

  void SetUp() override {
    ASSERT_TRUE(alice_->ok() && bob_->ok()) << "useradd failed";
    ASSERT_EQ(::chmod(dir_.path().c_str(), 0755), 0);  // the users must reach the tree
    run_ = dir_.path() + "/run";
    ::setenv("PROPELLER_RUNTIME_DIR", run_.c_str(), 1);
    // A home for whatever the commands keep per user (import state), shared like /tmp.
    const std::string home = dir_.path() + "/home-of-runners";
    fs::create_directories(home);
    ASSERT_EQ(::chmod(home.c_str(), 01777), 0);
    env_ = {"PROPELLER_RUNTIME_DIR=" + run_, "HOME=" + home};
  }
  void TearDown() override { ::unsetenv("PROPELLER_RUNTIME_DIR"); }

  // Builds the tree at `root`.
  void BuildTree(const std::string& root) {
    fs::create_directories(root + "/home");
    fs::create_directories(root + "/pub/drop");
    for (const SystemUser* u : {alice_, bob_}) {
      const std::string home = root + "/home/" + u->name();
      fs::create_directories(home);
      WriteFile(home + (u == alice_ ? "/notes.txt" : "/secret.txt"), "private\n");
      ASSERT_EQ(::chown(home.c_str(), u->uid(), u->gid()), 0);
      ASSERT_EQ(::chown((home + (u == alice_ ? "/notes.txt" : "/secret.txt")).c_str(), u->uid(),
                        u->gid()),
                0);
      ASSERT_EQ(::chmod(home.c_str(), 0700), 0);
    }
    WriteFile(root + "/pub/readme.txt", "hello\n");
    WriteFile(root + "/pub/drop/hidden.txt", "x\n");
    for (const std::string& d : {root, root + "/home", root + "/pub"}) ::chmod(d.c_str(), 0755);
    ::chmod((root + "/pub/drop").c_str(), 0711);
  }

  // Runs the probe as `user` against `endpoint`; checks that no write went through and that
  // every path a read returned is one `visible` (in-volume paths) holds. `root`: the root of
  // `secret`'s volume (remove-volume names both). `reachable`: whether the endpoint answers
  // this user at all (a CURVE endpoint does not).
  void ProbeAs(const SystemUser* user, const std::string& endpoint,
               const std::set<std::string>& visible, uint64_t acg, FileId secret,
               const std::string& root, bool reachable, std::vector<std::string> extra = {}) {
    SCOPED_TRACE(user->name() + " -> " + endpoint);
    std::vector<std::string> argv = {SECURITY_PROBE_BIN, endpoint, "--acg", std::to_string(acg),
                                     "--file",
                                     std::to_string(secret.volume) + ":" +
                                         std::to_string(secret.ino),
                                     "--root", root, "--other-uid", std::to_string(bob_->uid())};
    argv.insert(argv.end(), extra.begin(), extra.end());
    RunResult r = RunAs(user->uid(), user->gid(), argv, env_, 120s);
    ASSERT_EQ(r.code, 0) << r.err;
    auto got = ParseProbe(r.out);
    for (const char* w : kWrites) {
      ASSERT_TRUE(got.count(w)) << w << "\n" << r.out;
      EXPECT_NE(got[w].first, 0) << w << " went through";
    }
    // Refused for who sent it, not because the body missed the volume (NotFound). A mount's
    // query engine serves searches only (NotSupported).
    if (reachable) {
      const int code = got["remove-volume"].first;
      EXPECT_TRUE(code == static_cast<int>(StatusCode::kPermissionDenied) ||
                  code == static_cast<int>(StatusCode::kNotSupported))
          << "remove-volume: " << got["remove-volume"].second;
    }
    for (const char* w : {"apply-setattr", "apply-rmattr"}) {
      ASSERT_TRUE(got.count(w)) << w;
      EXPECT_NE(got[w].first, 0) << w << " on another user's file went through";
    }
    for (const auto& [name, result] : got) {
      if (name.find("-hits") == std::string::npos && name != "get-record-paths") continue;
      std::istringstream words(result.second);
      std::string word;
      while (words >> word) {
        std::istringstream parts(word);
        std::string p;
        while (std::getline(parts, p, '|')) {
          if (!p.empty()) {
            EXPECT_TRUE(visible.count(p)) << name << " showed " << p;
          }
        }
      }
    }
    if (!reachable) {
      for (const char* read : {"search-no-creds", "search-as-root", "search-as-other",
                               "get-record", "list-edges", "list-volumes", "cluster-status"}) {
        ASSERT_TRUE(got.count(read)) << read;
        EXPECT_NE(got[read].first, 0) << read << " answered a peer without an admitted key";
      }
    }
  }

  // In-volume form of a host path set under `root`.
  static std::set<std::string> InVolume(const std::set<std::string>& paths,
                                        const std::string& root) {
    std::set<std::string> out;
    for (const std::string& p : paths) {
      std::string rel = p.substr(root.size());
      out.insert(rel.empty() ? "/" : rel);
    }
    return out;
  }

  inline static SystemUser* alice_ = nullptr;
  inline static SystemUser* bob_ = nullptr;
  TempDir dir_;
  std::string run_;
  std::vector<std::string> env_;
};

// `propeller up`: a process serving until stopped, with its ready file read.
class Up {
 public:
  Up(const std::string& data, const std::string& log, std::vector<std::string> extra = {})
      : ready_(log + ".ready") {
    std::vector<std::string> argv = {PROPELLER_CLI_BIN, "up", "--data", data, "--ready-file",
                                     ready_, "--log-level", "warning"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    ::unlink(ready_.c_str());
    child_ = std::make_unique<ChildProcess>(argv, log);
  }
  bool Start() {
    if (!child_->Start()) return false;
    for (int i = 0; i < 500; ++i) {
      if (fs::exists(ready_)) return true;
      if (child_->Exited()) return false;
      std::this_thread::sleep_for(20ms);
    }
    return false;
  }
  int Stop() { return child_->Terminate(); }
  pid_t pid() const { return child_->pid(); }
  std::string Endpoint(const std::string& which) const {
    for (const std::string& line : Lines(ReadAll(ready_))) {
      if (line.rfind(which + " ", 0) == 0) return line.substr(which.size() + 1);
    }
    return "";
  }

 private:
  std::string ready_;
  std::unique_ptr<ChildProcess> child_;
};
}  // namespace propeller::testing

#endif  // PROPELLER_TESTS_SECURITY_FIXTURE_H_
