// A real multi-process Propeller cluster on loopback for tests: propeller-master and
// propeller-indexnode started as child processes (fork + exec of the built binaries), each with
// its own data directory, killed with SIGKILL or stopped with SIGTERM, restarted on the same
// data and the same port. Test-only.
//
// Threading: one test thread drives a LocalCluster (and starts its processes: they end with that
// thread); Client objects may be used from any thread.
#ifndef PROPELLER_TESTS_CLUSTER_HARNESS_H_
#define PROPELLER_TESTS_CLUSTER_HARNESS_H_

#include <netinet/in.h>
#include <sys/prctl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "client/lib/propeller.h"
#include "common/rpc/rpc.h"
#include "common/temp_dir.h"
#include "indexnode/engine_test_util.h"

namespace propeller::testing {

// `n` distinct TCP ports that were free a moment ago: all are bound at once (so the kernel
// cannot hand out one twice), read, then closed. The small race with other processes taking
// them before the daemons bind is acceptable in tests.
inline std::vector<int> FreePorts(size_t n) {
  std::vector<int> fds, ports;
  for (size_t i = 0; i < n; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof(addr);
    if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      ports.push_back(ntohs(addr.sin_port));
    } else {
      ports.push_back(0);
    }
    if (fd >= 0) fds.push_back(fd);
  }
  for (int fd : fds) ::close(fd);
  return ports;
}

inline int FreePort() { return FreePorts(1)[0]; }

// A whole file's bytes ("" when unreadable), and a file made or replaced with `data`.

// The volume root the cluster tests register, and the in-volume path of a client hit
// ("/vol/src/a.c" -> "/src/a.c").
inline constexpr const char* kRoot = "/vol";
inline std::string InVolume(const std::string& host) {
  std::string p = host.substr(std::string(kRoot).size());
  return p.empty() ? "/" : p;
}

// One search answer row, comparable between the cluster and an in-process engine.
struct Row {
  std::string path;
  FileRecord record;
  bool operator<(const Row& o) const {
    return path != o.path ? path < o.path : record.id < o.record.id;
  }
  bool operator==(const Row& o) const { return path == o.path && record == o.record; }
};

// Retries `fn` until it returns OK or `limit` passes; returns the last status.
inline Status Eventually(const std::function<Status()>& fn,
                         std::chrono::seconds limit = std::chrono::seconds(20)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  Status st;
  while (!(st = fn()).ok() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return st;
}

// One child process; stdout and stderr go to `log_path`.
class ChildProcess {
 public:
  ChildProcess(std::vector<std::string> argv, std::string log_path)
      : argv_(std::move(argv)), log_path_(std::move(log_path)) {}
  ~ChildProcess() { Kill(); }

  bool Start() {
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ < 0) return false;
    if (pid_ == 0) {
      // A test or benchmark killed before its destructors ran must not leave its daemons
      // running: they get SIGTERM when the thread that started them ends (start them from
      // the thread that drives the cluster, which outlives them).
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (::getppid() != parent) ::_exit(127);  // the parent is gone already
      FILE* log = std::fopen(log_path_.c_str(), "a");
      if (log != nullptr) {
        ::dup2(fileno(log), 1);
        ::dup2(fileno(log), 2);
      }
      std::vector<char*> args;
      for (std::string& a : argv_) args.push_back(a.data());
      args.push_back(nullptr);
      ::execv(args[0], args.data());
      ::_exit(127);
    }
    return true;
  }
  // SIGKILL: the process dies wherever it is, as in a crash.
  void Kill() { Signal(SIGKILL); }
  // SIGTERM and wait: a clean stop. Returns the exit status (-1 if not running).
  int Terminate() { return Signal(SIGTERM); }
  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  // True once the process has ended by itself (reaped here; Kill is then a no-op).
  bool Exited() {
    if (pid_ <= 0) return true;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) != pid_) return false;
    pid_ = -1;
    return true;
  }

 private:
  int Signal(int sig) {
    if (pid_ <= 0) return -1;
    ::kill(pid_, sig);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  std::vector<std::string> argv_;
  std::string log_path_;
  pid_t pid_ = -1;
};

struct ClusterConfig {
  int nodes = 3;
  uint64_t acg_threshold = 50'000;
  // Unix sockets (ipc://, in the cluster's directory) instead of loopback TCP: what a
  // single-host deployment would use, and what the evaluation measures against databases that
  // are reached through their unix sockets too.
  bool ipc = false;
  std::vector<std::string> master_extra;  // extra propeller-master flags
  std::vector<std::string> node_extra;    // extra propeller-indexnode flags
};

// master + N index nodes, each on a fixed loopback port chosen at construction (or a unix
// socket in the cluster's directory: ClusterConfig::ipc).
class LocalCluster {
 public:
  explicit LocalCluster(ClusterConfig config) : config_(std::move(config)) {
    // tcp:// links are CURVE-authenticated with a cluster key, made here as an administrator
    // would copy the master's to each host (docs/security.md).
    bool created = false;
    Result<rpc::CurveKeys> key = rpc::LoadClusterKey(cluster_key_file(), /*create=*/true, &created);
    // The daemons refuse to start without it, and the caller sees that.
    if (!key.ok()) std::fprintf(stderr, "cluster key: %s\n", key.status().ToString().c_str());
    node_ports_ = FreePorts(static_cast<size_t>(config_.nodes) + 1);
    master_port_ = node_ports_.back();
    node_ports_.pop_back();
    nodes_.resize(static_cast<size_t>(config_.nodes));
  }
  ~LocalCluster() {
    for (auto& n : nodes_) {
      if (n) n->Terminate();
    }
    if (master_) master_->Terminate();
  }

  std::string master_endpoint() const {
    if (config_.ipc) return "ipc://" + dir() + "/master.sock";
    return "tcp://127.0.0.1:" + std::to_string(master_port_);
  }
  std::string node_endpoint(int i) const {
    if (config_.ipc) return "ipc://" + node_dir(i) + ".sock";
    return "tcp://127.0.0.1:" + std::to_string(node_ports_[static_cast<size_t>(i)]);
  }
  const std::string& dir() const { return dir_.path(); }
  std::string cluster_key_file() const { return dir() + "/cluster.key"; }
  std::string node_dir(int i) const { return dir() + "/node" + std::to_string(i); }

  // `extra`: flags for this start only, after config.master_extra.
  bool StartMaster(const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv = {PROPELLER_MASTER_BIN, "--data", dir() + "/master",
                                     "--listen", master_endpoint(), "--acg-threshold",
                                     std::to_string(config_.acg_threshold),
                                     "--node-timeout-ms", "3000",
                                     "--cluster-key", cluster_key_file()};
    argv.insert(argv.end(), config_.master_extra.begin(), config_.master_extra.end());
    argv.insert(argv.end(), extra.begin(), extra.end());
    master_ = std::make_unique<ChildProcess>(argv, dir() + "/master.log");
    return master_->Start();
  }
  // `extra`: flags for this start only, after config.node_extra.
  bool StartNode(int i, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv = {PROPELLER_INDEXNODE_BIN, "--data", node_dir(i), "--listen",
                                     node_endpoint(i), "--master", master_endpoint(),
                                     "--cluster-key", cluster_key_file()};
    argv.insert(argv.end(), config_.node_extra.begin(), config_.node_extra.end());
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto& slot = nodes_[static_cast<size_t>(i)];
    slot = std::make_unique<ChildProcess>(argv, dir() + "/node" + std::to_string(i) + ".log");
    return slot->Start();
  }
  bool Start() {
    if (!StartMaster()) return false;
    for (int i = 0; i < config_.nodes; ++i) {
      if (!StartNode(i)) return false;
    }
    return true;
  }
  ChildProcess& master() { return *master_; }
  ChildProcess& node(int i) { return *nodes_[static_cast<size_t>(i)]; }

  ClientOptions client_options(int64_t timeout_ms = 2000) const {
    ClientOptions o;
    o.master_endpoint = master_endpoint();
    o.cluster_key_file = cluster_key_file();
    o.timeout_ms = timeout_ms;
    return o;
  }

  // A raw channel to one of the daemons, with the cluster key on tcp://.
  rpc::ChannelOptions channel_options(const std::string& endpoint) const {
    rpc::ChannelOptions o;
    o.endpoint = endpoint;
    if (rpc::IsTcpEndpoint(endpoint)) {
      Result<rpc::CurveKeys> key = rpc::ReadKeyFile(cluster_key_file());
      if (key.ok()) {
        o.curve = *key;
        o.server_public_key = key->public_key;
      }
    }
    return o;
  }

  // Waits until the master reports `n` up nodes. False after `seconds`.
  bool WaitNodesUp(Client& client, size_t n, int seconds = 30) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (std::chrono::steady_clock::now() < deadline) {
      auto status = client.GetStatus();
      if (status.ok()) {
        size_t up = 0;
        for (const NodeStatus& ns : status->nodes) up += ns.info.up && ns.node.has_value();
        if (up >= n) return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  // The logs of every process, for failure messages.
  std::string Logs() const {
    std::string out;
    std::vector<std::string> names = {"master.log"};
    for (int i = 0; i < config_.nodes; ++i) names.push_back("node" + std::to_string(i) + ".log");
    for (const std::string& n : names) {
      FILE* f = std::fopen((dir() + "/" + n).c_str(), "r");
      if (f == nullptr) continue;
      out += "---- " + n + "\n";
      char buf[4096];
      size_t got;
      while ((got = std::fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, got);
      std::fclose(f);
    }
    return out;
  }

 private:
  ClusterConfig config_;
  TempDir dir_;
  int master_port_ = 0;
  std::vector<int> node_ports_;
  std::unique_ptr<ChildProcess> master_;
  std::vector<std::unique_ptr<ChildProcess>> nodes_;
};

}  // namespace propeller::testing

#endif  // PROPELLER_TESTS_CLUSTER_HARNESS_H_
