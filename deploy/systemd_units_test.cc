// The systemd units of deploy/systemd, run as systemd would run them where systemd is not PID 1
// (CI containers, this test's usual home: the units cannot be started with systemctl there).
// For each unit the test takes its ExecStart line, points it at the build tree's binaries and at
// configuration files in a temporary directory (%i = "a"), and runs it with NOTIFY_SOCKET naming
// a datagram socket the test owns, as Type=notify does. It checks READY=1 arrives once the
// service answers, that SIGHUP (ExecReload) gives RELOADING=1 and READY=1 and applies the new
// log level, and that SIGTERM gives STOPPING=1 and a clean exit 0; the mount really mounts
// (root, /dev/fuse) and must be unmounted after the stop. Where systemd-analyze exists, the
// units also pass `systemd-analyze verify`.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/temp_dir.h"

namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteFile(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

void Replace(std::string* s, const std::string& from, const std::string& to) {
  for (size_t at = s->find(from); at != std::string::npos; at = s->find(from, at + to.size())) {
    s->replace(at, from.size(), to);
  }
}

// The value of the first `key=` line of a unit file.
std::string UnitValue(const std::string& unit, const std::string& key) {
  std::istringstream in(unit);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key + "=", 0) == 0) return line.substr(key.size() + 1);
  }
  return "";
}

// A unit's text with the installed binaries replaced by the build tree's.
std::string BuildTreeUnit(const std::string& name) {
  std::string unit = ReadFile(std::string(PROPELLER_UNIT_DIR) + "/" + name);
  const std::string bin = PROPELLER_INSTALLED_BINDIR;
  Replace(&unit, bin + "/propeller-master ", std::string(PROPELLER_MASTER_BIN) + " ");
  Replace(&unit, bin + "/propeller-indexnode ", std::string(PROPELLER_INDEXNODE_BIN) + " ");
  Replace(&unit, bin + "/propeller ", std::string(PROPELLER_CLI_BIN) + " ");
  return unit;
}

// The notification socket systemd would give a Type=notify service.
class NotifySocket {
 public:
  explicit NotifySocket(const std::string& path) : path_(path) {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) fd_ = -1;
  }
  ~NotifySocket() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool ok() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }

  // Waits up to `seconds` for a message containing `line` (e.g. "READY=1"); returns every
  // message seen meanwhile, joined, or "" on timeout.
  std::string WaitFor(const std::string& line, int seconds) {
    std::string seen;
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (std::chrono::steady_clock::now() < end) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 100) != 1) continue;
      char buf[4096];
      const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) continue;
      const std::string message(buf, static_cast<size_t>(n));
      seen += message + "\n--\n";
      if (("\n" + message + "\n").find("\n" + line + "\n") != std::string::npos) return seen;
    }
    ADD_FAILURE() << "no " << line << " within " << seconds << " s; got: " << seen;
    return "";
  }

 private:
  std::string path_;
  int fd_ = -1;
};

// Runs a unit's ExecStart line, words split at spaces (the units quote nothing), with
// NOTIFY_SOCKET set and stderr to `log`.
pid_t StartExec(const std::string& exec, const std::string& notify, const std::string& log) {
  std::vector<std::string> words;
  std::istringstream in(exec);
  for (std::string w; in >> w;) words.push_back(w);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setenv("NOTIFY_SOCKET", notify.c_str(), 1);
    FILE* f = std::fopen(log.c_str(), "w");
    if (f != nullptr) ::dup2(fileno(f), 2);
    std::vector<char*> argv;
    for (std::string& w : words) argv.push_back(w.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

// The exit status of `pid` within `seconds`, or -1 (then killed).
int WaitExit(pid_t pid, int seconds) {
  for (int i = 0; i < seconds * 100; ++i) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    ::usleep(10'000);
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  return -1;
}

// `propeller ARGS` (stdout and stderr) and its exit status.
std::pair<int, std::string> Cli(const std::string& args) {
  FILE* p = ::popen((std::string(PROPELLER_CLI_BIN) + " " + args + " 2>&1").c_str(), "r");
  std::string out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof(buf), p)) > 0;) out.append(buf, n);
  const int status = ::pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

bool Mounted(const std::string& mountpoint) {
  return ReadFile("/proc/self/mountinfo").find(" " + mountpoint + " ") != std::string::npos;
}

class SystemdUnitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    etc_ = dir_.path() + "/etc";
    ASSERT_EQ(::mkdir(etc_.c_str(), 0700), 0);
  }
  // The ExecStart line of `unit` for instance "a", its /etc/propeller files in etc_.
  std::string Exec(const std::string& unit) {
    std::string exec = UnitValue(BuildTreeUnit(unit), "ExecStart");
    Replace(&exec, "%i", "a");
    Replace(&exec, "/etc/propeller/", etc_ + "/");
    return exec;
  }
  // Every unit of a daemon: notify type, reload by SIGHUP.
  void CheckUnitBasics(const std::string& unit) {
    const std::string text = BuildTreeUnit(unit);
    EXPECT_EQ(UnitValue(text, "Type"), "notify") << unit;
    EXPECT_EQ(UnitValue(text, "ExecReload"), "/bin/kill -HUP $MAINPID") << unit;
    EXPECT_NE(UnitValue(text, "ExecStart").find(" --config /etc/propeller/"), std::string::npos);
  }
  // SIGHUP after `edit` made the file ask for the debug log level: reload notifications, and
  // a debug line in the log shows it applied.
  void Reload(pid_t pid, NotifySocket* notify) {
    ASSERT_EQ(::kill(pid, SIGHUP), 0);
    const std::string seen = notify->WaitFor("READY=1", 10);
    EXPECT_NE(seen.find("RELOADING=1"), std::string::npos) << seen;
    EXPECT_NE(seen.find("MONOTONIC_USEC="), std::string::npos) << seen;
  }
  void Stop(pid_t pid, NotifySocket* notify, const std::string& log) {
    ASSERT_EQ(::kill(pid, SIGTERM), 0);
    notify->WaitFor("STOPPING=1", 10);
    EXPECT_EQ(WaitExit(pid, 60), 0) << ReadFile(log);
  }

  propeller::testing::TempDir dir_;
  std::string etc_;
};

TEST_F(SystemdUnitsTest, MasterAndIndexNodeUnits) {
  CheckUnitBasics("propeller-master.service");
  CheckUnitBasics("propeller-indexnode@.service");
  const std::string d = dir_.path();
  const std::string master = "ipc://" + d + "/master.sock";
  WriteFile(etc_ + "/master.toml", "data = \"" + d + "/master\"\nlisten = \"" + master + "\"\n");
  const std::string node_config = "data = \"" + d + "/node-a\"\nmaster = \"" + master +
                                  "\"\nlisten = \"ipc://" + d + "/node-a.sock\"\n";
  WriteFile(etc_ + "/indexnode-a.toml", node_config);

  NotifySocket master_notify(d + "/master.notify");
  NotifySocket node_notify(d + "/node.notify");
  ASSERT_TRUE(master_notify.ok() && node_notify.ok());
  const std::string master_log = d + "/master.log", node_log = d + "/node.log";
  const pid_t m = StartExec(Exec("propeller-master.service"), master_notify.path(), master_log);
  std::string seen = master_notify.WaitFor("READY=1", 30);
  EXPECT_NE(seen.find("STATUS=serving " + master), std::string::npos) << seen;
  const pid_t n = StartExec(Exec("propeller-indexnode@.service"), node_notify.path(), node_log);
  seen = node_notify.WaitFor("READY=1", 30);
  EXPECT_NE(seen.find("STATUS=listening on ipc://"), std::string::npos) << seen;

  // Both answer: the master lists the node once it registered.
  std::pair<int, std::string> status;
  for (int i = 0; i < 100; ++i) {
    status = Cli("--master " + master + " status");
    if (status.first == 0 && status.second.find("node 1") != std::string::npos) break;
    ::usleep(100'000);
  }
  EXPECT_EQ(status.first, 0) << status.second;
  EXPECT_NE(status.second.find("node 1"), std::string::npos) << status.second;

  // Reload: the new log level applies (debug lines appear); a changed thread count is only
  // announced for the next restart.
  WriteFile(etc_ + "/indexnode-a.toml", node_config + "log-level = \"debug\"\nthreads = 2\n");
  Reload(n, &node_notify);
  EXPECT_NE(ReadFile(node_log).find("threads changed; that takes effect at the next restart"),
            std::string::npos)
      << ReadFile(node_log);
  WriteFile(etc_ + "/master.toml", ReadFile(etc_ + "/master.toml") + "log-level = \"debug\"\n");
  Reload(m, &master_notify);
  // A broken file on reload keeps the daemon running as it was.
  WriteFile(etc_ + "/master.toml", "dta = 1\n");
  Reload(m, &master_notify);
  EXPECT_NE(ReadFile(master_log).find("reload refused, running on unchanged"), std::string::npos);
  EXPECT_EQ(Cli("--master " + master + " status").first, 0);

  Stop(n, &node_notify, node_log);
  Stop(m, &master_notify, master_log);
}

TEST_F(SystemdUnitsTest, MountUnitMountsAndUnmounts) {
  CheckUnitBasics("propeller-mount@.service");
  if (::access("/dev/fuse", R_OK | W_OK) != 0 || ::geteuid() != 0) {
    GTEST_SKIP() << "needs root and /dev/fuse";
  }
  const std::string d = dir_.path();
  const std::string backing = d + "/backing", mnt = d + "/mnt";
  ASSERT_EQ(::mkdir(backing.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(mnt.c_str(), 0755), 0);
  WriteFile(backing + "/before.txt", "x");
  const std::string config = "backing = \"" + backing + "\"\nmountpoint = \"" + mnt +
                             "\"\ndata = \"" + d + "/mount-data\"\n";
  WriteFile(etc_ + "/mount-a.toml", config);
  // The mount's sockets and records in a runtime directory of the test's own, not /run.
  ::setenv("PROPELLER_RUNTIME_DIR", (d + "/run").c_str(), 1);

  NotifySocket notify(d + "/mount.notify");
  ASSERT_TRUE(notify.ok());
  const std::string log = d + "/mount.log";
  const pid_t pid = StartExec(Exec("propeller-mount@.service"), notify.path(), log);
  const std::string seen = notify.WaitFor("READY=1", 60);
  EXPECT_NE(seen.find("STATUS=" + backing + " mounted at " + mnt), std::string::npos) << seen;
  EXPECT_TRUE(Mounted(mnt)) << ReadFile(log);

  // It serves and indexes: a file made through the mount is found at once.
  WriteFile(mnt + "/through.txt", "y");
  auto found = Cli("search 'name~*.txt' --scope " + mnt);
  EXPECT_EQ(found.first, 0) << found.second;
  EXPECT_NE(found.second.find(mnt + "/through.txt"), std::string::npos) << found.second;
  EXPECT_NE(found.second.find(mnt + "/before.txt"), std::string::npos) << found.second;

  WriteFile(etc_ + "/mount-a.toml", config + "log-level = \"debug\"\n");
  Reload(pid, &notify);
  EXPECT_TRUE(Mounted(mnt));  // SIGHUP reloads; it no longer stops the mount

  Stop(pid, &notify, log);
  EXPECT_FALSE(Mounted(mnt));
  ::unsetenv("PROPELLER_RUNTIME_DIR");
}

// `systemd-analyze verify` where it is installed (not a dependency of the tests).
TEST_F(SystemdUnitsTest, SystemdAnalyzeVerify) {
  const char* analyze = "/usr/bin/systemd-analyze";
  if (::access(analyze, X_OK) != 0) GTEST_SKIP() << "systemd-analyze is not installed";
  std::string units;
  for (const char* name : {"propeller-master.service", "propeller-indexnode@.service",
                           "propeller-mount@.service"}) {
    WriteFile(dir_.path() + "/" + name, BuildTreeUnit(name));
    std::string instance = name;
    Replace(&instance, "@.", "@a.");
    if (instance != name) ::symlink(name, (dir_.path() + "/" + instance).c_str());
    units += " " + dir_.path() + "/" + instance;
  }
  FILE* p = ::popen((std::string(analyze) + " verify --man=no" + units + " 2>&1").c_str(), "r");
  std::string out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof(buf), p)) > 0;) out.append(buf, n);
  const int status = ::pclose(p);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
  // Warnings about the units themselves (unknown settings, bad values) also fail the test.
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    EXPECT_EQ(line.find("propeller-"), std::string::npos) << out;
  }
}

}  // namespace
