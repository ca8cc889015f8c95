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
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

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

// Modes of everything below `dir` that are not `dir_mode` (directories) or `file_mode` (the
// rest), or not owned by root: "path mode" per line.
std::vector<std::string> WrongModes(const std::string& dir, mode_t dir_mode, mode_t file_mode) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    struct stat st;
    if (::lstat(e.path().c_str(), &st) != 0) continue;
    const mode_t want = S_ISDIR(st.st_mode) ? dir_mode : file_mode;
    if ((st.st_mode & 07777) != want || st.st_uid != 0 || S_ISLNK(st.st_mode)) {
      char buf[16];
      std::snprintf(buf, sizeof(buf), " %04o", st.st_mode & 07777);
      out.push_back(e.path().string() + buf);
    }
  }
  return out;
}

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
    "register-volume", "assign-files", "forget-files", "register-node", "heartbeat",
    "new-acg",      "split-done",    "move-acg",    "migrate-acg",  "adopt-acg",
    "release-acg"};

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
  // every path a read returned is one `visible` (in-volume paths) holds. `reachable`: whether
  // the endpoint answers this user at all (a CURVE endpoint does not).
  void ProbeAs(const SystemUser* user, const std::string& endpoint,
               const std::set<std::string>& visible, uint64_t acg, FileId secret,
               bool reachable, std::vector<std::string> extra = {}) {
    SCOPED_TRACE(user->name() + " -> " + endpoint);
    std::vector<std::string> argv = {SECURITY_PROBE_BIN, endpoint, "--acg", std::to_string(acg),
                                     "--file",
                                     std::to_string(secret.volume) + ":" +
                                         std::to_string(secret.ino),
                                     "--other-uid", std::to_string(bob_->uid())};
    argv.insert(argv.end(), extra.begin(), extra.end());
    RunResult r = RunAs(user->uid(), user->gid(), argv, env_, 120s);
    ASSERT_EQ(r.code, 0) << r.err;
    auto got = ParseProbe(r.out);
    for (const char* w : kWrites) {
      ASSERT_TRUE(got.count(w)) << w << "\n" << r.out;
      EXPECT_NE(got[w].first, 0) << w << " went through";
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
    ProbeAs(alice_, up.Endpoint(which), InVolume(alice_sees, tree), acg, *secret_id, true);
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
  // runtime directory only root may write.
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
  for (const auto& e : fs::recursive_directory_iterator(run_)) {
    struct stat st;
    ASSERT_EQ(::lstat(e.path().c_str(), &st), 0);
    const mode_t want = S_ISDIR(st.st_mode) ? 0755 : S_ISSOCK(st.st_mode) ? 0666 : 0644;
    EXPECT_EQ(st.st_mode & 07777, want) << e.path();
    EXPECT_EQ(st.st_uid, 0u) << e.path();
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
    ProbeAs(alice_, ep, alice_sees, acg, *secret_id, true);
  }

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
// user without it, or with a key of their own, gets nothing from any daemon.
TEST_F(SecurityTest, ClusterLinksNeedTheClusterKey) {
  const std::string key = dir_.path() + "/keys/cluster.key";
  const std::vector<int> ports = FreePorts(3);
  const std::string master_ep = "tcp://127.0.0.1:" + std::to_string(ports[0]);
  const std::string node_ep = "tcp://127.0.0.1:" + std::to_string(ports[1]);
  ChildProcess master({PROPELLER_MASTER_BIN, "--data", dir_.path() + "/master", "--listen",
                       master_ep, "--cluster-key", key},
                      dir_.path() + "/master.log");
  ASSERT_TRUE(master.Start());
  for (int i = 0; i < 500 && !fs::exists(key); ++i) std::this_thread::sleep_for(10ms);
  ASSERT_TRUE(fs::exists(key)) << ReadAll(dir_.path() + "/master.log");
  struct stat st;
  ASSERT_EQ(::stat(key.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  ChildProcess node({PROPELLER_INDEXNODE_BIN, "--data", dir_.path() + "/node", "--listen",
                     node_ep, "--master", master_ep, "--cluster-key", key},
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
  auto volume = (*client)->RegisterVolume("/vol");
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
    ProbeAs(alice_, ep, {}, 1, u.record.id, false, {"--timeout-ms", "200"});
    ProbeAs(alice_, ep, {}, 1, u.record.id, false,
            {"--timeout-ms", "200", "--curve", own, "--server-key", server_pub});
  }
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
  node.Terminate();
  master.Terminate();
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
  for (const std::string& ep : {cluster.master_endpoint(), cluster.node_endpoint(0)}) {
    ProbeAs(alice_, ep, alice_sees, (*hits)[0].acg, (*hits)[0].record.id, true);
  }
  RunResult s = RunAs(alice_->uid(), alice_->gid(),
                      {PROPELLER_CLI_BIN, "--master", cluster.master_endpoint(), "search",
                       "size>=0"}, env_);
  ASSERT_EQ(s.code, 0) << s.err;
  const auto lines = Lines(s.out);
  EXPECT_EQ(std::set<std::string>(lines.begin(), lines.end()), FindAs(alice_, tree));
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

}  // namespace
}  // namespace propeller::testing
