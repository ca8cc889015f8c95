// The trust model of docs/security.md, tried the way an attacker on a shared host would: real
// `propeller up`, `propeller mount` and cluster daemons run by root, two ordinary users made
// for the test (useradd) who connect to every endpoint directly with forged requests
// (tests/security_probe.cc), plant links in data and runtime directories, and read query
// directories after root listed them. The oracle of what a user may see is `find` run as that
// user over the same tree.
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
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::vector<std::string> Lines(const std::string& text) {
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
RunResult RunAs(uid_t uid, gid_t gid, const std::vector<std::string>& argv,
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
std::set<std::string> FindAs(const SystemUser* user, const std::string& root) {
  RunResult r = RunAs(user ? user->uid() : 0, user ? user->gid() : 0, {"/usr/bin/find", root});
  std::set<std::string> out;
  for (const std::string& line : Lines(r.out)) out.insert(line);
  return out;
}

// TCP sockets process `pid` listens on (from /proc/net/tcp{,6} and its descriptors).
std::vector<std::string> TcpListeners(pid_t pid) {
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
std::vector<std::string> WrongModes(const std::string& dir, mode_t dir_mode, mode_t file_mode) {
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
std::vector<std::string> WrongRuntimeModes(const std::string& run) {
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
int ErrnoAs(uid_t uid, gid_t gid, const std::function<int()>& op) {
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
int ListenAt(const std::string& path) {
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
bool ConnectsAs(uid_t uid, gid_t gid, const std::string& path) {
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
std::map<std::string, std::pair<int, std::string>> ParseProbe(const std::string& out) {
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

  static SystemUser* alice_;
  static SystemUser* bob_;
  TempDir dir_;
  std::string run_;
  std::vector<std::string> env_;
};
SystemUser* SecurityTest::alice_ = nullptr;
SystemUser* SecurityTest::bob_ = nullptr;

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

TEST_F(SecurityTest, UpServesLocalUsersTheirOwnViewAndNoTcp) {
  const std::string tree = dir_.path() + "/tree";
  BuildTree(tree);
  Up up(dir_.path() + "/data", dir_.path() + "/up.log");
  ASSERT_TRUE(up.Start()) << ReadAll(dir_.path() + "/up.log");
  EXPECT_EQ(TcpListeners(up.pid()), std::vector<std::string>{}) << "up opened a TCP port";
  EXPECT_EQ(up.Endpoint("master"), "ipc://" + run_ + "/master.sock");

  RunResult imp = RunAs(0, 0, {PROPELLER_CLI_BIN, "import", tree}, env_);
  ASSERT_EQ(imp.code, 0) << imp.err;
  ClientOptions co;  // found by itself, as the CLI does
  auto client = Client::Connect(co);
  ASSERT_TRUE(client.ok());
  const std::string secret_path = tree + "/home/" + bob_->name() + "/secret.txt";
  auto secret_id = (*client)->FileIdOf(secret_path);
  ASSERT_TRUE(secret_id.ok()) << secret_id.status().ToString();
  auto hits = (*client)->SearchAll("size>=0", {});
  ASSERT_TRUE(hits.ok()) << hits.status().ToString();
  uint64_t acg = 0;
  std::set<std::string> root_view;
  for (const ClientHit& h : *hits) {
    root_view.insert(h.path);
    if (h.path == secret_path) acg = h.acg;
  }
  ASSERT_EQ(root_view, FindAs(nullptr, tree));
  ASSERT_NE(acg, 0u);

  // Straight to both sockets, with forged credentials and every write there is.
  const std::set<std::string> alice_sees = FindAs(alice_, tree);
  ASSERT_FALSE(alice_sees.count(secret_path));
  ASSERT_FALSE(alice_sees.count(tree + "/pub/drop/hidden.txt"));
  for (const char* which : {"master", "node"}) {
    ProbeAs(alice_, up.Endpoint(which), InVolume(alice_sees, tree), acg, *secret_id, tree,
            true);
  }
  // Nothing changed: the same records, no index, no volume, no attribute.
  hits = (*client)->SearchAll("size>=0", {});
  ASSERT_TRUE(hits.ok());
  std::set<std::string> after;
  for (const ClientHit& h : *hits) {
    after.insert(h.path);
    EXPECT_TRUE(h.record.attrs.empty()) << h.path;
    EXPECT_LT(h.record.size, 123u << 20) << h.path;
  }
  EXPECT_EQ(after, root_view);
  auto indexes = (*client)->ListIndexes();
  ASSERT_TRUE(indexes.ok());
  EXPECT_TRUE(indexes->empty());
  auto volumes = (*client)->ListVolumes();
  ASSERT_TRUE(volumes.ok());
  ASSERT_EQ(volumes->size(), 1u);
  EXPECT_EQ((*volumes)[0], (wire::VolumeInfo{secret_id->volume, tree}));

  // The CLI as each user: exactly what `find` shows them.
  for (const SystemUser* u : {alice_, bob_}) {
    RunResult s = RunAs(u->uid(), u->gid(), {PROPELLER_CLI_BIN, "search", "size>=0"}, env_);
    ASSERT_EQ(s.code, 0) << s.err;
    const auto lines = Lines(s.out);
    EXPECT_EQ(std::set<std::string>(lines.begin(), lines.end()), FindAs(u, tree)) << u->name();
  }
  // A user sets attributes on her own files only; everything else that changes the index is
  // refused with a clear message.
  const std::string notes = tree + "/home/" + alice_->name() + "/notes.txt";
  RunResult own = RunAs(alice_->uid(), alice_->gid(),
                  {PROPELLER_CLI_BIN, "attr", "set", notes, "tag", "mine"}, env_);
  EXPECT_EQ(own.code, 0) << own.err;
  RunResult theirs = RunAs(alice_->uid(), alice_->gid(),
                     {PROPELLER_CLI_BIN, "attr", "set", tree + "/pub/readme.txt", "tag", "x"},
                     env_);
  EXPECT_EQ(theirs.code, 1);
  EXPECT_NE(theirs.err.find("may not"), std::string::npos) << theirs.err;
  for (const std::vector<std::string>& cmd :
       {std::vector<std::string>{"index", "create", "tag"},
        std::vector<std::string>{"import", tree + "/pub"}}) {
    std::vector<std::string> argv = {PROPELLER_CLI_BIN};
    argv.insert(argv.end(), cmd.begin(), cmd.end());
    RunResult r = RunAs(alice_->uid(), alice_->gid(), argv, env_);
    EXPECT_EQ(r.code, 1) << cmd[0];
    EXPECT_NE(r.err.find("only root or the service's user"), std::string::npos) << r.err;
  }
  auto tagged = (*client)->SearchAll("tag=mine", {});
  ASSERT_TRUE(tagged.ok());
  ASSERT_EQ(tagged->size(), 1u);
  EXPECT_EQ((*tagged)[0].path, notes);

  // What the service stored: root's, 0700 directories and 0600 files; sockets 0666 in a
  // runtime directory only root may write, which every user connects to.
  EXPECT_EQ(WrongRuntimeModes(run_), std::vector<std::string>{});
  for (const char* name : {"/master.sock", "/node.sock"}) {
    struct stat sock;
    ASSERT_EQ(::lstat((run_ + name).c_str(), &sock), 0) << name;
    EXPECT_TRUE(S_ISSOCK(sock.st_mode)) << name;
    for (const SystemUser* u : {alice_, bob_}) {
      EXPECT_TRUE(ConnectsAs(u->uid(), u->gid(), run_ + name)) << u->name() << name;
    }
  }
  client->reset();
  ASSERT_EQ(up.Stop(), 0);
  EXPECT_EQ(WrongModes(dir_.path() + "/data", 0700, 0600), std::vector<std::string>{});
  struct stat st;
  ASSERT_EQ(::stat(run_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);
}

// `propeller mount`: its query engine, master and node sockets get the same probes, and a
// query directory another user listed tells nothing about its entries.
TEST_F(SecurityTest, MountEndpointsAndQueryDirectoriesArePerCaller) {
  const std::string backing = dir_.path() + "/backing";
  const std::string mnt = dir_.path() + "/mnt";
  BuildTree(backing);
  fs::create_directories(mnt);
  ::chmod(mnt.c_str(), 0755);
  const std::string ready = dir_.path() + "/mount.ready";
  ChildProcess mount({PROPELLER_CLI_BIN, "mount", backing, mnt, "--data", dir_.path() + "/data",
                      "--ready-file", ready, "--log-level", "warning"},
                     dir_.path() + "/mount.log");
  ASSERT_TRUE(mount.Start());
  for (int i = 0; i < 500 && !fs::exists(ready); ++i) std::this_thread::sleep_for(20ms);
  ASSERT_TRUE(fs::exists(ready)) << ReadAll(dir_.path() + "/mount.log");
  struct Unmount {
    std::string mnt;
    ~Unmount() { (void)std::system(("fusermount3 -u " + mnt + " 2>/dev/null").c_str()); }
  } unmount{mnt};
  EXPECT_EQ(TcpListeners(mount.pid()), std::vector<std::string>{}) << "mount opened a TCP port";
  // The runtime directory: root's, 0755; sockets every user may connect to, records public.
  EXPECT_EQ(WrongRuntimeModes(run_), std::vector<std::string>{});
  for (const auto& e : fs::directory_iterator(run_)) {
    if (e.is_socket()) {
      EXPECT_TRUE(ConnectsAs(alice_->uid(), alice_->gid(), e.path().string())) << e.path();
    }
  }
  std::map<std::string, std::string> endpoints;
  for (const std::string& line : Lines(ReadAll(ready))) {
    endpoints[line.substr(0, line.find(' '))] = line.substr(line.find(' ') + 1);
  }

  ClientOptions co;
  co.master_endpoint = endpoints["master"];
  auto client = Client::Connect(co);
  ASSERT_TRUE(client.ok());
  auto status = (*client)->GetStatus();
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  ASSERT_EQ(status->nodes.size(), 1u);
  const std::string secret = backing + "/home/" + bob_->name() + "/secret.txt";
  auto secret_id = (*client)->FileIdOf(secret);
  ASSERT_TRUE(secret_id.ok());
  uint64_t acg = 0;
  auto hits = (*client)->SearchAll("name=secret.txt", {});
  ASSERT_TRUE(hits.ok() && hits->size() == 1u);
  acg = (*hits)[0].acg;

  const std::set<std::string> alice_sees = InVolume(FindAs(alice_, backing), backing);
  for (const std::string& ep :
       {endpoints["engine"], endpoints["master"], status->nodes[0].info.endpoint}) {
    ProbeAs(alice_, ep, alice_sees, acg, *secret_id, backing, true);
  }
  auto volumes = (*client)->ListVolumes();
  ASSERT_TRUE(volumes.ok());
  EXPECT_EQ(*volumes, (std::vector<wire::VolumeInfo>{{secret_id->volume, backing}}));
  hits = (*client)->SearchAll("name=secret.txt", {});
  ASSERT_TRUE(hits.ok());
  EXPECT_EQ(hits->size(), 1u) << "the volume's records are gone";

  // Root lists a query directory; then the other users look at bob's entry by name.
  const std::string qdir = mnt + "/?size>=0";
  const std::string entry = qdir + "/home%2F" + bob_->name() + "%2Fsecret.txt";
  {
    DIR* d = ::opendir(qdir.c_str());
    ASSERT_NE(d, nullptr) << std::strerror(errno);
    std::set<std::string> names;
    while (struct dirent* e = ::readdir(d)) names.insert(e->d_name);
    ::closedir(d);
    ASSERT_TRUE(names.count("home%2F" + bob_->name() + "%2Fsecret.txt"));
  }
  struct stat st;
  ASSERT_EQ(::lstat(entry.c_str(), &st), 0);  // root may
  const std::string script =
      "stat -c %U '" + entry + "' ; readlink '" + entry + "' ; getfattr -n user.x '" + entry +
      "' ; ls -1 '" + qdir + "'; test -L '" + entry + "' && echo EXISTS; true";
  RunResult a = RunAs(alice_->uid(), alice_->gid(), {"/bin/sh", "-c", script});
  EXPECT_EQ(a.out.find("secret.txt"), std::string::npos) << a.out << a.err;
  for (const std::string& line : Lines(a.out)) EXPECT_NE(line, bob_->name()) << "stat showed";
  EXPECT_EQ(a.out.find("EXISTS"), std::string::npos) << a.out;
  EXPECT_NE(a.out.find("home%2F" + alice_->name() + "%2Fnotes.txt"), std::string::npos) << a.out;
  // The same from C, errno by errno.
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::setgroups(0, nullptr) != 0 || ::setgid(alice_->gid()) != 0 ||
        ::setuid(alice_->uid()) != 0) {
      ::_exit(100);
    }
    struct stat s;
    char buf[256];
    if (::lstat(entry.c_str(), &s) == 0 || errno != ENOENT) ::_exit(1);
    if (::readlink(entry.c_str(), buf, sizeof(buf)) >= 0 || errno != ENOENT) ::_exit(2);
    if (::lgetxattr(entry.c_str(), "user.x", buf, sizeof(buf)) >= 0 || errno != ENOENT) {
      ::_exit(3);
    }
    if (::llistxattr(entry.c_str(), buf, sizeof(buf)) >= 0 || errno != ENOENT) ::_exit(4);
    if (::open(entry.c_str(), O_RDONLY) >= 0) ::_exit(5);
    ::_exit(0);
  }
  int wst = 0;
  ASSERT_EQ(::waitpid(pid, &wst, 0), pid);
  EXPECT_TRUE(WIFEXITED(wst) && WEXITSTATUS(wst) == 0) << "step " << WEXITSTATUS(wst);
  // Bob, whose file it is, sees it.
  RunResult b = RunAs(bob_->uid(), bob_->gid(), {"/bin/sh", "-c", "readlink '" + entry + "'"});
  EXPECT_NE(b.out.find("secret.txt"), std::string::npos) << b.err;

  client->reset();
  ASSERT_EQ(::kill(mount.pid(), SIGTERM), 0);
  for (int i = 0; i < 1500 && !mount.Exited(); ++i) std::this_thread::sleep_for(20ms);
  EXPECT_EQ(WrongModes(dir_.path() + "/data", 0700, 0600), std::vector<std::string>{});
  EXPECT_TRUE(fs::is_empty(run_ + "/mounts")) << "the mount record outlived the mount";
}

// A cluster over TCP: CURVE with the cluster key the master made at its first start; a local
// user without it, or with a key of their own, gets nothing from any daemon. The daemons run
// with umask 0, as the mount's FUSE server does: their files get the service's modes anyway.
TEST_F(SecurityTest, ClusterLinksNeedTheClusterKey) {
  const std::string key = dir_.path() + "/keys/cluster.key";
  const std::vector<int> ports = FreePorts(3);
  const std::string master_ep = "tcp://127.0.0.1:" + std::to_string(ports[0]);
  const std::string node_ep = "tcp://127.0.0.1:" + std::to_string(ports[1]);
  ChildProcess master({"/bin/sh", "-c",
                       std::string("umask 0; exec ") + PROPELLER_MASTER_BIN + " --data " +
                           dir_.path() + "/master --listen " + master_ep + " --cluster-key " + key},
                      dir_.path() + "/master.log");
  ASSERT_TRUE(master.Start());
  for (int i = 0; i < 500 && !fs::exists(key); ++i) std::this_thread::sleep_for(10ms);
  ASSERT_TRUE(fs::exists(key)) << ReadAll(dir_.path() + "/master.log");
  struct stat st;
  ASSERT_EQ(::stat(key.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  ASSERT_EQ(::stat((dir_.path() + "/keys").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u) << "the directory the master made for the key";
  ChildProcess node({"/bin/sh", "-c",
                     std::string("umask 0; exec ") + PROPELLER_INDEXNODE_BIN + " --data " +
                         dir_.path() + "/node --listen " + node_ep + " --master " + master_ep +
                         " --cluster-key " + key},
                    dir_.path() + "/node.log");
  ASSERT_TRUE(node.Start());
  ClientOptions co;
  co.master_endpoint = master_ep;
  co.cluster_key_file = key;
  auto client = Client::Connect(co);
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE(Eventually([&] {
                auto s = (*client)->GetStatus();
                return s.ok() && s->nodes.size() == 1 && s->nodes[0].node ? Status::OK()
                                                                          : Status::Unavailable("");
              }).ok())
      << ReadAll(dir_.path() + "/node.log");
  auto volume = (*client)->RegisterVolume(kRoot);
  ASSERT_TRUE(volume.ok());
  FileUpdate u;
  u.record.id = FileId{*volume, 7};
  u.record.paths = {"/secret"};
  ASSERT_TRUE((*client)->Update({&u, 1}).ok());

  // Alice cannot read the key; without it, and with a key of her own, nothing answers.
  RunResult cat = RunAs(alice_->uid(), alice_->gid(), {"/bin/cat", key});
  EXPECT_NE(cat.code, 0);
  const std::string own = dir_.path() + "/alice.key";
  auto alice_keys = rpc::GenerateCurveKeys();
  ASSERT_TRUE(alice_keys.ok());
  ASSERT_TRUE(rpc::WriteKeyFile(own, *alice_keys).ok());
  ASSERT_EQ(::chown(own.c_str(), alice_->uid(), alice_->gid()), 0);
  const std::string server_pub = dir_.path() + "/server.pub";
  auto cluster_keys = rpc::ReadKeyFile(key);
  ASSERT_TRUE(cluster_keys.ok());
  ASSERT_TRUE(rpc::WriteKeyFile(server_pub, {cluster_keys->public_key, ""}).ok());
  ASSERT_EQ(::chmod(server_pub.c_str(), 0644), 0);
  for (const std::string& ep : {master_ep, node_ep}) {
    ProbeAs(alice_, ep, {}, 1, u.record.id, kRoot, false, {"--timeout-ms", "200"});
    ProbeAs(alice_, ep, {}, 1, u.record.id, kRoot, false,
            {"--timeout-ms", "200", "--curve", own, "--server-key", server_pub});
  }
  auto volumes = (*client)->ListVolumes();
  ASSERT_TRUE(volumes.ok());
  EXPECT_EQ(*volumes, (std::vector<wire::VolumeInfo>{{*volume, kRoot}}));
  RunResult cli = RunAs(alice_->uid(), alice_->gid(),
                  {PROPELLER_CLI_BIN, "--master", master_ep, "search", "size>=0"}, env_);
  EXPECT_EQ(cli.code, 1);
  EXPECT_NE(cli.err.find("cluster key"), std::string::npos) << cli.err << cli.out;

  // A daemon asked for a network port without keys refuses to start; --insecure is explicit.
  const std::string no_key = "PROPELLER_CLUSTER_KEY=" + dir_.path() + "/none.key";
  RunResult refused = RunAs(0, 0,
                      {PROPELLER_INDEXNODE_BIN, "--data", dir_.path() + "/node2", "--listen",
                       "tcp://0.0.0.0:" + std::to_string(ports[2]), "--master", master_ep},
                      {no_key}, 20s);
  EXPECT_EQ(refused.code, 1);
  EXPECT_NE(refused.err.find("--insecure"), std::string::npos) << refused.err;
  EXPECT_FALSE(fs::exists(dir_.path() + "/node2/node_id"));
  client->reset();
  EXPECT_EQ(node.Terminate(), 0);
  EXPECT_EQ(master.Terminate(), 0);
  // What the standalone daemons stored: root's, 0700 directories and 0600 files.
  for (const char* data : {"/master", "/node"}) {
    ASSERT_TRUE(fs::exists(dir_.path() + data)) << data;
    EXPECT_EQ(WrongModes(dir_.path() + data, 0700, 0600), std::vector<std::string>{});
  }
  EXPECT_TRUE(fs::exists(dir_.path() + "/node/node_id"));
}

// A cluster on one host without keys: its daemons on unix sockets, where the kernel names
// every caller. A user gets what the same probes get from `up`.
TEST_F(SecurityTest, ClusterOnUnixSocketsNeedsNoKeys) {
  const std::string tree = dir_.path() + "/tree";
  BuildTree(tree);
  ClusterConfig config;
  config.nodes = 1;
  config.ipc = true;
  LocalCluster cluster(config);
  ASSERT_TRUE(cluster.Start());
  // The cluster's directory (its sockets) must be reachable by the users.
  ASSERT_EQ(::chmod(cluster.dir().c_str(), 0755), 0);
  ClientOptions co;
  co.master_endpoint = cluster.master_endpoint();
  auto client = Client::Connect(co);
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE(cluster.WaitNodesUp(**client, 1)) << cluster.Logs();
  RunResult imp = RunAs(0, 0, {PROPELLER_CLI_BIN, "--master", cluster.master_endpoint(), "import",
                               tree}, env_);
  ASSERT_EQ(imp.code, 0) << imp.err;
  const std::string secret = tree + "/home/" + bob_->name() + "/secret.txt";
  auto hits = (*client)->SearchAll("name=secret.txt", {});
  ASSERT_TRUE(hits.ok() && hits->size() == 1u);
  const std::set<std::string> alice_sees = InVolume(FindAs(alice_, tree), tree);
  const FileId secret_id = (*hits)[0].record.id;
  for (const std::string& ep : {cluster.master_endpoint(), cluster.node_endpoint(0)}) {
    ProbeAs(alice_, ep, alice_sees, (*hits)[0].acg, secret_id, tree, true);
    EXPECT_TRUE(ConnectsAs(alice_->uid(), alice_->gid(), ep.substr(6))) << ep;
    struct stat sock;
    ASSERT_EQ(::lstat(ep.substr(6).c_str(), &sock), 0);
    EXPECT_EQ(sock.st_mode, S_IFSOCK | 0666) << ep;
  }
  RunResult s = RunAs(alice_->uid(), alice_->gid(),
                      {PROPELLER_CLI_BIN, "--master", cluster.master_endpoint(), "search",
                       "size>=0"}, env_);
  ASSERT_EQ(s.code, 0) << s.err;
  const auto lines = Lines(s.out);
  EXPECT_EQ(std::set<std::string>(lines.begin(), lines.end()), FindAs(alice_, tree));

  // The volume alice tried to remove is there; the same request from root removes it, so
  // hers named it right and was refused for who sent it.
  const wire::VolumeInfo vol{secret_id.volume, tree};
  auto volumes = (*client)->ListVolumes();
  ASSERT_TRUE(volumes.ok());
  EXPECT_EQ(*volumes, std::vector<wire::VolumeInfo>{vol});
  RunResult remove = RunAs(0, 0, {SECURITY_PROBE_BIN, cluster.master_endpoint(), "--file",
                                  std::to_string(vol.volume) + ":" + std::to_string(secret_id.ino),
                                  "--root", tree, "--only", "remove-volume"});
  EXPECT_EQ(remove.out, "remove-volume 0\n") << remove.err;
  volumes = (*client)->ListVolumes();
  ASSERT_TRUE(volumes.ok());
  EXPECT_TRUE(volumes->empty());

  // What the standalone daemons stored: root's, 0700 directories and 0600 files.
  client->reset();
  EXPECT_EQ(cluster.node(0).Terminate(), 0);
  EXPECT_EQ(cluster.master().Terminate(), 0);
  EXPECT_EQ(WrongModes(cluster.dir() + "/master", 0700, 0600), std::vector<std::string>{});
  EXPECT_EQ(WrongModes(cluster.node_dir(0), 0700, 0600), std::vector<std::string>{});
}

// Data and runtime directories: anything another user could have planted stops the daemon
// before it opens a file there; what the service left wider in older versions is narrowed.
TEST_F(SecurityTest, PlantedLinksAndWritableDirectoriesAreRefused) {
  const std::string data = dir_.path() + "/data";
  const std::string tree = dir_.path() + "/tree";
  BuildTree(tree);
  {
    Up up(data, dir_.path() + "/up.log");
    ASSERT_TRUE(up.Start()) << ReadAll(dir_.path() + "/up.log");
    ASSERT_EQ(RunAs(0, 0, {PROPELLER_CLI_BIN, "import", tree}, env_).code, 0);
    ASSERT_EQ(up.Stop(), 0);
  }
  // A shard of the node's store: where LMDB opens its files.
  const std::string acg_dir = data + "/node/store/shard-0";
  ASSERT_TRUE(fs::exists(acg_dir + "/lock.mdb"));
  // A precious file of root's that a planted link points to.
  const std::string precious = dir_.path() + "/precious";
  WriteFile(precious, "root's own\n");
  ::chmod(precious.c_str(), 0600);
  auto start_fails_with = [&](const std::string& want) {
    Up up(data, dir_.path() + "/up.log");
    const bool started = up.Start();
    if (started) up.Stop();
    EXPECT_FALSE(started) << "started despite: " << want;
    const std::string log = ReadAll(dir_.path() + "/up.log");
    EXPECT_NE(log.find(want), std::string::npos) << log;
    EXPECT_EQ(ReadAll(precious), "root's own\n");
  };
  auto start_works = [&] {
    Up up(data, dir_.path() + "/up.log");
    EXPECT_TRUE(up.Start()) << ReadAll(dir_.path() + "/up.log");
    EXPECT_EQ(up.Stop(), 0);
  };

  // 1. lock.mdb replaced by a symbolic link to root's file.
  const std::string lock = acg_dir + "/lock.mdb";
  ASSERT_EQ(::unlink(lock.c_str()), 0);
  ASSERT_EQ(::symlink(precious.c_str(), lock.c_str()), 0);
  start_fails_with(lock + " is a symbolic link");
  ASSERT_EQ(::unlink(lock.c_str()), 0);
  // 2. A hard link to root's file.
  const std::string hard = acg_dir + "/extra";
  ASSERT_EQ(::link(precious.c_str(), hard.c_str()), 0);
  start_fails_with(hard + " has 2 hard links");
  ASSERT_EQ(::unlink(hard.c_str()), 0);
  // 3. A file of another user's.
  WriteFile(hard, "");
  ASSERT_EQ(::chown(hard.c_str(), alice_->uid(), alice_->gid()), 0);
  start_fails_with(hard + " is owned by uid " + std::to_string(alice_->uid()));
  ASSERT_EQ(::unlink(hard.c_str()), 0);
  // 4. A data directory others may write.
  ASSERT_EQ(::chmod(data.c_str(), 0770), 0);
  start_fails_with("other users may write it");
  // 5. Modes an older version left (0755/0644, and 0777 from a umask-0 mount) are narrowed.
  ASSERT_EQ(::chmod(data.c_str(), 0755), 0);
  for (const auto& e : fs::recursive_directory_iterator(data)) {
    ::chmod(e.path().c_str(), e.is_directory() ? 0755 : 0644);
  }
  ::chmod(acg_dir.c_str(), 0777);
  start_works();
  EXPECT_EQ(WrongModes(data, 0700, 0600), std::vector<std::string>{});
  // 6. Runtime directories: writable by others, or a link of another user's.
  ASSERT_EQ(::chmod(run_.c_str(), 0777), 0);
  start_fails_with("other users may write it");
  ASSERT_EQ(::chmod(run_.c_str(), 0755), 0);
  const std::string sock = run_ + "/master.sock";
  ::unlink(sock.c_str());
  ASSERT_EQ(::symlink(precious.c_str(), sock.c_str()), 0);
  start_fails_with("is not a socket");
  ASSERT_EQ(::unlink(sock.c_str()), 0);
  const std::string alice_dir = dir_.path() + "/alices";
  fs::create_directories(alice_dir);
  ASSERT_EQ(::chown(alice_dir.c_str(), alice_->uid(), alice_->gid()), 0);
  const std::string link_run = dir_.path() + "/run-link";
  ASSERT_EQ(::symlink(alice_dir.c_str(), link_run.c_str()), 0);
  ASSERT_EQ(::lchown(link_run.c_str(), alice_->uid(), alice_->gid()), 0);
  ::setenv("PROPELLER_RUNTIME_DIR", link_run.c_str(), 1);
  start_fails_with("symbolic link owned by uid " + std::to_string(alice_->uid()));
  ::setenv("PROPELLER_RUNTIME_DIR", run_.c_str(), 1);
  // 7. Whatever the umask, the modes are the service's.
  {
    const std::string data2 = dir_.path() + "/data2";
    ChildProcess up({"/bin/sh", "-c",
                     std::string("umask 0; exec ") + PROPELLER_CLI_BIN + " up --data " + data2 +
                         " --ready-file " + dir_.path() + "/ready2"},
                    dir_.path() + "/up2.log");
    ASSERT_TRUE(up.Start());
    for (int i = 0; i < 500 && !fs::exists(dir_.path() + "/ready2"); ++i) {
      std::this_thread::sleep_for(20ms);
    }
    ASSERT_TRUE(fs::exists(dir_.path() + "/ready2")) << ReadAll(dir_.path() + "/up2.log");
    ASSERT_EQ(RunAs(0, 0, {PROPELLER_CLI_BIN, "import", tree}, env_).code, 0);
    EXPECT_EQ(up.Terminate(), 0);
    EXPECT_EQ(WrongModes(data2, 0700, 0600), std::vector<std::string>{});
  }
}


// Runtime directories (sockets and mount records) are root's and 0755: an ordinary user adds
// no name there and removes none. What she planted while one was open to her (modes an older
// version or an administrator left, since narrowed: a daemon refuses a directory others may
// write) is never followed: a link or a file at a socket's path, and a socket she serves, stop
// the daemon and are left as they were; her stale socket is replaced by the service's own; a
// link at a mount record's path or at its temporary name is replaced, never written through.
TEST_F(SecurityTest, LinksPlantedInTheRuntimeDirectoryAreNeverFollowed) {
  const std::string tree = dir_.path() + "/tree";
  const std::string data = dir_.path() + "/data";
  const std::string mounts = MountRegistryDir();
  ASSERT_EQ(mounts, run_ + "/mounts");
  BuildTree(tree);
  // Root's precious file, and alice's own files outside the runtime directory.
  const std::string precious = dir_.path() + "/precious";
  WriteFile(precious, "root's own\n");
  ASSERT_EQ(::chmod(precious.c_str(), 0600), 0);
  const std::string alices = dir_.path() + "/alices";
  fs::create_directories(alices);
  WriteFile(alices + "/own", "alice's own\n");
  WriteFile(alices + "/move", "");
  for (const std::string& p : {alices, alices + "/own", alices + "/move"}) {
    ASSERT_EQ(::chown(p.c_str(), alice_->uid(), alice_->gid()), 0);
  }
  auto as_alice = [&](const std::function<int()>& op) {
    return ErrnoAs(alice_->uid(), alice_->gid(), op);
  };
  auto untouched = [&] {
    EXPECT_EQ(ReadAll(precious), "root's own\n");
    EXPECT_EQ(ReadAll(alices + "/own"), "alice's own\n");
  };
  auto links_of = [](const std::string& path) -> nlink_t {
    struct stat st;
    return ::lstat(path.c_str(), &st) == 0 ? st.st_nlink : 0;
  };
  auto owner_of = [](const std::string& path) -> int64_t {
    struct stat st;
    return ::lstat(path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_uid) : -1;
  };
  const int64_t alice_uid = alice_->uid();

  // 1. The directories as the service leaves them: alice adds and removes no name.
  const std::string sock = run_ + "/master.sock";
  {
    Up up(data, dir_.path() + "/up.log");
    ASSERT_TRUE(up.Start()) << ReadAll(dir_.path() + "/up.log");
    ASSERT_EQ(RunAs(0, 0, {PROPELLER_CLI_BIN, "import", tree}, env_).code, 0);
    ASSERT_TRUE(MakeRegistryDirs().ok());  // what a mount makes for its record
    EXPECT_EQ(WrongRuntimeModes(run_), std::vector<std::string>{});
    for (const std::string& d : {run_, mounts}) {
      SCOPED_TRACE(d);
      const std::string n = d + "/planted";
      EXPECT_EQ(as_alice([&] {
                  const int fd = ::open(n.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
                  return fd < 0 ? -1 : 0;
                }),
                EACCES);
      EXPECT_EQ(as_alice([&] { return ::symlink(precious.c_str(), n.c_str()); }), EACCES);
      EXPECT_EQ(as_alice([&] { return ::link((alices + "/own").c_str(), n.c_str()); }), EACCES);
      EXPECT_EQ(as_alice([&] { return ::rename((alices + "/move").c_str(), n.c_str()); }),
                EACCES);
      EXPECT_EQ(as_alice([&] { return ::mkdir(n.c_str(), 0755); }), EACCES);
      EXPECT_EQ(as_alice([&] { return ListenAt(n); }), EACCES);
      EXPECT_EQ(owner_of(n), -1) << "alice added " << n;
    }
    EXPECT_EQ(as_alice([&] { return ::unlink(sock.c_str()); }), EACCES);
    EXPECT_EQ(as_alice([&] { return ::rename((alices + "/own").c_str(), sock.c_str()); }),
              EACCES);
    ASSERT_EQ(up.Stop(), 0);
  }
  untouched();

  // 2. Socket paths. Alice plants while the runtime directory is open to her; root narrows it
  // and starts the service, which must refuse, leave the planted name alone and write nothing.
  int attempt = 0;
  auto start_refused = [&](const std::string& want) {
    const std::string log = dir_.path() + "/up-" + std::to_string(++attempt) + ".log";
    Up up(data, log);
    const bool started = up.Start();
    if (started) up.Stop();
    EXPECT_FALSE(started) << "started despite: " << want;
    EXPECT_NE(ReadAll(log).find(want), std::string::npos) << ReadAll(log);
    untouched();
  };
  auto plant = [&](const std::function<int()>& op) {
    ::unlink(sock.c_str());  // the stale socket of the last run
    ASSERT_EQ(::chmod(run_.c_str(), 0777), 0);
    EXPECT_EQ(as_alice(op), 0);
    ASSERT_EQ(::chmod(run_.c_str(), 0755), 0);
  };
  const std::string not_socket = sock + " exists and is not a socket";
  // Her symbolic link to root's file.
  plant([&] { return ::symlink(precious.c_str(), sock.c_str()); });
  start_refused(not_socket);
  EXPECT_TRUE(fs::is_symlink(sock));
  EXPECT_EQ(owner_of(sock), alice_uid);
  ASSERT_EQ(::unlink(sock.c_str()), 0);
  // Her hard link to her own file.
  plant([&] { return ::link((alices + "/own").c_str(), sock.c_str()); });
  start_refused(not_socket);
  EXPECT_EQ(links_of(alices + "/own"), 2u);
  ASSERT_EQ(::unlink(sock.c_str()), 0);
  // A hard link to root's own file (fs.protected_hardlinks keeps alice from making it; a
  // host without it, or an administrator's slip, does not).
  ASSERT_EQ(::link(precious.c_str(), sock.c_str()), 0);
  start_refused(not_socket);
  EXPECT_EQ(links_of(precious), 2u);
  ASSERT_EQ(::unlink(sock.c_str()), 0);
  // A socket she serves: the service does not take it over.
  ASSERT_EQ(owner_of(sock), -1);
  ASSERT_EQ(::chmod(run_.c_str(), 0777), 0);
  SocketServerAs hers(alice_->uid(), alice_->gid(), sock);
  ASSERT_TRUE(hers.serving());
  ASSERT_EQ(::chmod(run_.c_str(), 0755), 0);
  start_refused("another process serves there");
  EXPECT_EQ(owner_of(sock), alice_uid);
  EXPECT_TRUE(ConnectsAs(alice_->uid(), alice_->gid(), sock)) << "her socket was taken";
  // Once her server is gone, its stale socket is replaced by the service's own, which every
  // user reaches.
  hers.Kill();
  ASSERT_EQ(owner_of(sock), alice_uid);
  {
    Up up(data, dir_.path() + "/up-stale.log");
    ASSERT_TRUE(up.Start()) << ReadAll(dir_.path() + "/up-stale.log");
    struct stat st;
    ASSERT_EQ(::lstat(sock.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode, static_cast<mode_t>(S_IFSOCK | 0666));
    EXPECT_EQ(st.st_uid, 0u);
    EXPECT_EQ(WrongRuntimeModes(run_), std::vector<std::string>{});
    RunResult s = RunAs(alice_->uid(), alice_->gid(),
                        {PROPELLER_CLI_BIN, "search", "name=notes.txt"}, env_);
    EXPECT_EQ(s.code, 0) << s.err;
    EXPECT_EQ(s.out, tree + "/home/" + alice_->name() + "/notes.txt\n");
    EXPECT_EQ(up.Stop(), 0);
  }
  untouched();

  // 3. A mount's record. Alice's symbolic link to root's file at the record's path, and a
  // hard link to root's file at the temporary name the mount writes it under first (named
  // after the mount's pid, known before it runs: the shell it starts as waits for `go`, then
  // becomes the mount).
  const std::string backing = dir_.path() + "/backing";
  const std::string mnt = dir_.path() + "/mnt";
  fs::create_directories(backing);
  fs::create_directories(mnt);
  WriteFile(backing + "/file.txt", "x\n");
  ASSERT_EQ(::chmod(mnt.c_str(), 0755), 0);
  const std::string go = dir_.path() + "/go";
  const std::string ready = dir_.path() + "/mount.ready";
  ChildProcess mount({"/bin/sh", "-c",
                      "while [ ! -e " + go + " ]; do sleep 0.02; done; exec " +
                          PROPELLER_CLI_BIN + " mount " + backing + " " + mnt + " --data " +
                          dir_.path() + "/mount-data --ready-file " + ready +
                          " --log-level warning"},
                     dir_.path() + "/mount.log");
  ASSERT_TRUE(mount.Start());
  struct Unmount {
    std::string mnt;
    ~Unmount() { (void)std::system(("fusermount3 -u " + mnt + " 2>/dev/null").c_str()); }
  } unmount{mnt};
  const std::string mountpoint = fs::canonical(mnt).string();
  const std::string record = mounts + "/" + PathAsFileName(mountpoint);
  const std::string tmp = record + ".tmp-" + std::to_string(mount.pid());
  ASSERT_EQ(::chmod(mounts.c_str(), 0777), 0);
  EXPECT_EQ(as_alice([&] { return ::symlink(precious.c_str(), record.c_str()); }), 0);
  ASSERT_EQ(::link(precious.c_str(), tmp.c_str()), 0);
  ASSERT_EQ(::chmod(mounts.c_str(), 0755), 0);
  WriteFile(go, "");
  for (int i = 0; i < 500 && !fs::exists(ready); ++i) std::this_thread::sleep_for(20ms);
  ASSERT_TRUE(fs::exists(ready)) << ReadAll(dir_.path() + "/mount.log");
  untouched();
  EXPECT_EQ(links_of(precious), 1u) << "the hard link at " << tmp << " is still there";
  EXPECT_EQ(owner_of(tmp), -1);
  struct stat st;
  ASSERT_EQ(::lstat(record.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode, static_cast<mode_t>(S_IFREG | 0644));
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(st.st_nlink, 1u);
  MountRecord written;
  ASSERT_TRUE(DecodeMountRecord(ReadAll(record), &written).ok()) << ReadAll(record);
  EXPECT_EQ(written.mountpoint, mountpoint);
  EXPECT_EQ(written.pid, static_cast<uint32_t>(mount.pid()));
  EXPECT_EQ(WrongRuntimeModes(run_), std::vector<std::string>{});
  EXPECT_EQ(mount.Terminate(), 0);
  EXPECT_EQ(owner_of(record), -1) << "the record outlived the mount";
  untouched();
  EXPECT_EQ(links_of(precious), 1u);
}

}  // namespace
}  // namespace propeller::testing
