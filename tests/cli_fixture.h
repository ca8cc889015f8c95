// The CLI tests' shared part (tests/cli_test.cc, tests/cli_find_test.cc): running the
// propeller CLI and capturing what it prints, a directory tree built from a seed and its
// brute-force walk (the oracle), and a fixture serving `propeller up` on unix sockets.
#ifndef PROPELLER_TESTS_CLI_FIXTURE_H_
#define PROPELLER_TESTS_CLI_FIXTURE_H_

#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>
#include <utility>

#include "common/random.h"
#include "indexnode/engine_test_util.h"
#include "tests/cluster_harness.h"

namespace propeller::testing {

namespace fs = std::filesystem;

struct CliResult {
  int code = -1;
  std::string out;
  std::string err;
};

inline CliResult RunArgv(std::vector<std::string> argv, const std::string& cwd = "");

// Runs the propeller CLI with `args`, capturing stdout and stderr.
inline CliResult RunCli(const std::vector<std::string>& args, const std::string& master) {
  std::vector<std::string> argv = {PROPELLER_CLI_BIN, "--master", master, "--timeout-ms",
                                   "5000"};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunArgv(std::move(argv));
}

// Runs `argv` (argv[0] the program), capturing stdout and stderr.
inline CliResult RunArgv(std::vector<std::string> argv, const std::string& cwd) {
  TempDir tmp;
  const std::string out_path = tmp.path() + "/out", err_path = tmp.path() + "/err";
  pid_t pid = ::fork();
  if (pid == 0) {
    int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(out, 1);
    ::dup2(err, 2);
    if (!cwd.empty() && ::chdir(cwd.c_str()) != 0) ::_exit(126);
    std::vector<char*> raw;
    for (std::string& a : argv) raw.push_back(a.data());
    raw.push_back(nullptr);
    ::execv(raw[0], raw.data());
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  CliResult r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::ifstream o(out_path), e(err_path);
  std::stringstream so, se;
  so << o.rdbuf();
  se << e.rdbuf();
  r.out = so.str();
  r.err = se.str();
  return r;
}

inline std::vector<std::string> Lines(const std::string& text, char sep = '\n') {
  std::vector<std::string> out;
  std::string cur;
  for (char c : text) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

inline std::vector<std::string> Sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

// One entry of the oracle: what lstat and the xattrs say.
struct Entry {
  std::string path;
  struct stat st;
  std::string project;  // user.project, "" when absent
};

// A tree with directories, sizes from 0 to 64 MiB (sparse), ages from minutes to years,
// extensions, user.project xattrs and a hard link.
inline void BuildTree(const std::string& root, uint64_t seed, int files) {
  Random rnd(seed);
  const char* kDirs[] = {"src", "src/lib", "data", "data/run42", "docs", "logs", "a b"};
  for (const char* d : kDirs) fs::create_directories(root + "/" + d);
  const char* kExts[] = {".c", ".h", ".txt", ".log", ".parquet", ".png", ""};
  const auto now = std::chrono::system_clock::now();
  std::string first;
  for (int i = 0; i < files; ++i) {
    std::string path = root + "/" + kDirs[rnd.Uniform(std::size(kDirs))] + "/f" +
                       std::to_string(i) + kExts[rnd.Uniform(std::size(kExts))];
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ASSERT_GE(fd, 0) << path;
    if (first.empty()) first = path;
    static const off_t kSizes[] = {0, 10, 4096, 100'000, 2 << 20, 20 << 20, 64 << 20};
    ASSERT_EQ(::ftruncate(fd, kSizes[rnd.Uniform(std::size(kSizes))] + rnd.Uniform(100)), 0);
    const auto age = std::chrono::seconds(rnd.Uniform(4) == 0 ? rnd.Uniform(3600)
                                                              : rnd.Uniform(400 * 86400));
    const int64_t t = std::chrono::duration_cast<std::chrono::seconds>(
                          (now - age).time_since_epoch()).count();
    struct timespec times[2] = {{t, 0}, {t, 0}};
    ASSERT_EQ(::futimens(fd, times), 0);
    if (rnd.OneIn(3)) {
      const char* v = rnd.OneIn(2) ? "alpha" : "beta";
      ASSERT_EQ(::fsetxattr(fd, "user.project", v, std::strlen(v), 0), 0);
    }
    ::close(fd);
  }
  // A second name that sorts after the first, so the record's first path is the original.
  fs::create_directories(root + "/zlinks");
  ASSERT_EQ(::link(first.c_str(), (root + "/zlinks/hardlink").c_str()), 0);
  ASSERT_EQ(::symlink("../src", (root + "/docs/to-src").c_str()), 0);
}

inline std::vector<Entry> WalkOracle(const std::string& root) {
  std::vector<Entry> out;
  auto add = [&](const std::string& p) {
    Entry e;
    e.path = p;
    ::lstat(p.c_str(), &e.st);
    char buf[64];
    ssize_t n = ::lgetxattr(p.c_str(), "user.project", buf, sizeof(buf));
    if (n > 0) e.project.assign(buf, static_cast<size_t>(n));
    out.push_back(e);
  };
  add(root);
  for (const auto& de : fs::recursive_directory_iterator(root)) add(de.path().string());
  return out;
}

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Unix sockets, as `propeller up` serves by default (no network port).
    master_ = "ipc://" + dir_.path() + "/master.sock";
    node_ = "ipc://" + dir_.path() + "/node.sock";
    up_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{PROPELLER_CLI_BIN, "up", "--data", dir_.path() + "/data",
                                 "--listen", master_, "--node-listen", node_, "--ready-file",
                                 dir_.path() + "/ready", "--log-level", "warning"},
        dir_.path() + "/up.log");
    ASSERT_TRUE(up_->Start());
    for (int i = 0; i < 300 && !fs::exists(dir_.path() + "/ready"); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ASSERT_TRUE(fs::exists(dir_.path() + "/ready")) << "propeller up did not start";
    tree_ = dir_.path() + "/tree";
    // An import's checkpoint of its own: the tests' imports stay out of the user's state
    // directory (the default checkpoint is named by service and volume: cmd_import.cc).
    ::setenv("XDG_STATE_HOME", (dir_.path() + "/state").c_str(), 1);
  }
  void TearDown() override {
    ::unsetenv("XDG_STATE_HOME");
    EXPECT_EQ(up_->Terminate(), 0) << "propeller up did not stop cleanly";
  }

  CliResult Cli(const std::vector<std::string>& args) { return RunCli(args, master_); }

  // The paths of `propeller search QUERY [extra]`, asserting success.
  std::vector<std::string> Search(const std::string& query, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"search", query};
    args.insert(args.end(), extra.begin(), extra.end());
    CliResult r = Cli(args);
    EXPECT_EQ(r.code, 0) << query << ": " << r.err;
    return Lines(r.out);
  }

  TempDir dir_;
  std::string master_, node_, tree_;
  std::unique_ptr<ChildProcess> up_;
};

}  // namespace propeller::testing

#endif  // PROPELLER_TESTS_CLI_FIXTURE_H_
