// --metrics-listen against real processes (docs/metrics.md): propeller-master and
// propeller-indexnode (LocalCluster) and `propeller mount` with its embedded service, each
// listening on 127.0.0.1:0 and found through its "metrics: serving http://..." log line. The
// test scrapes /metrics over HTTP, does known work, scrapes again and checks that the counters
// moved with it, that the text is valid exposition format (Parse below), that only GET
// /metrics is served and oversized requests are refused, and that without the option the
// daemon opens no extra port.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "tests/cluster_harness.h"
#include "tests/mount_harness.h"

namespace propeller::testing {
namespace {

// Sends `request` to 127.0.0.1:port and returns the whole response ("" if unreachable).
std::string Http(int port, const std::string& request) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string out;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    size_t sent = 0;
    while (sent < request.size()) {
      const ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
    }
    char buf[65536];
    ssize_t n;
    while ((n = ::recv(fd, buf, sizeof(buf), 0)) > 0) out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

int StatusOf(const std::string& response) {
  return response.size() > 12 ? std::atoi(response.c_str() + 9) : 0;
}

std::string Get(int port, const std::string& path = "/metrics") {
  return Http(port, "GET " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
}

// Metric name (with labels, as written) -> value, after checking the exposition format: every
// sample belongs to a family declared by # TYPE, names are valid, histogram buckets are
// cumulative and end with le="+Inf" equal to _count.
std::map<std::string, double> Parse(const std::string& response) {
  std::map<std::string, double> out;
  const size_t body = response.find("\r\n\r\n");
  EXPECT_NE(body, std::string::npos);
  EXPECT_EQ(StatusOf(response), 200) << response.substr(0, 200);
  EXPECT_NE(response.find("text/plain; version=0.0.4"), std::string::npos);
  std::istringstream in(response.substr(body + 4));
  std::map<std::string, std::string> types;  // family -> type
  const std::regex sample(R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$)");
  const std::regex type_line(R"(^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram)$)");
  std::string line, last_bucket_series;
  double last_bucket = -1;
  for (int n = 1; std::getline(in, line); ++n) {
    std::smatch m;
    if (line.rfind("# HELP ", 0) == 0) continue;
    if (std::regex_match(line, m, type_line)) {
      EXPECT_EQ(types.count(m[1]), 0u) << "family declared twice: " << line;
      types[m[1]] = m[2];
      continue;
    }
    EXPECT_TRUE(std::regex_match(line, m, sample)) << "line " << n << ": " << line;
    if (m.empty()) continue;
    std::string name = m[1];
    const std::string labels = m[2];
    const double value = m[3] == "+Inf" ? HUGE_VAL : std::stod(m[3]);
    std::string family = name;
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      const std::string s = suffix;
      if (types.count(family) == 0 && name.size() > s.size() &&
          name.compare(name.size() - s.size(), s.size(), s) == 0 &&
          types.count(name.substr(0, name.size() - s.size())) != 0) {
        family = name.substr(0, name.size() - s.size());
      }
    }
    EXPECT_EQ(types.count(family), 1u) << "sample of no declared family: " << line;
    if (types[family] == "counter") {
      EXPECT_TRUE(name.size() > 6 && name.compare(name.size() - 6, 6, "_total") == 0) << line;
    }
    if (types[family] == "histogram" && name == family + "_bucket") {
      const std::string series = name + std::regex_replace(labels, std::regex(R"(,?le="[^"]*")"), "");
      if (series != last_bucket_series) last_bucket = -1;
      EXPECT_GE(value, last_bucket) << "buckets not cumulative: " << line;
      last_bucket = value;
      last_bucket_series = series;
      if (labels.find("le=\"+Inf\"") != std::string::npos) {
        std::string rest = std::regex_replace(labels, std::regex(R"(,?le="\+Inf")"), "");
        if (rest == "{}") rest.clear();
        out[family + "_inf" + rest] = value;
      }
    }
    out[name + labels] = value;
  }
  for (const auto& [key, v] : out) {
    const size_t inf = key.find("_inf");
    if (inf == std::string::npos) continue;
    const std::string count = key.substr(0, inf) + "_count" + key.substr(inf + 4);
    EXPECT_EQ(out[count], v) << key;
  }
  return out;
}

// The port of the "metrics: serving http://127.0.0.1:PORT/metrics" line of `log`; 0 if none.
int MetricsPort(const std::string& log_path, int seconds = 20) {
  const std::regex re(R"(metrics: serving http://127\.0\.0\.1:([0-9]+)/metrics)");
  for (int i = 0; i < seconds * 10; ++i) {
    std::ifstream f(log_path);
    std::stringstream ss;
    ss << f.rdbuf();
    const std::string text = ss.str();
    std::smatch m;
    if (std::regex_search(text, m, re)) return std::stoi(m[1]);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return 0;
}

// TCP sockets in LISTEN state held by `pid` (from /proc/net/tcp and the process's fds).
size_t ListeningSockets(pid_t pid) {
  std::set<std::string> inodes;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream f(table);
    std::string line;
    std::getline(f, line);
    while (std::getline(f, line)) {
      std::istringstream ls(line);
      std::string sl, local, remote, state, queues, timer, retr, uid, timeout, inode;
      ls >> sl >> local >> remote >> state >> queues >> timer >> retr >> uid >> timeout >> inode;
      if (state == "0A") inodes.insert(inode);
    }
  }
  size_t n = 0;
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::error_code ec;
    const std::string target = std::filesystem::read_symlink(e.path(), ec).string();
    if (target.rfind("socket:[", 0) == 0 &&
        inodes.count(target.substr(8, target.size() - 9)) != 0) {
      ++n;
    }
  }
  return n;
}

TEST(MetricsTest, ClusterCountersMoveWithTheWork) {
  ClusterConfig config;
  config.nodes = 1;
  config.master_extra = {"--metrics-listen", "127.0.0.1:0"};
  config.node_extra = {"--metrics-listen", "127.0.0.1:0"};
  LocalCluster cluster(config);
  ASSERT_TRUE(cluster.Start());
  auto client_or = Client::Connect(cluster.client_options(5000));
  ASSERT_TRUE(client_or.ok()) << client_or.status().ToString();
  Client& client = **client_or;
  ASSERT_TRUE(cluster.WaitNodesUp(client, 1)) << cluster.Logs();
  const int master_port = MetricsPort(cluster.dir() + "/master.log");
  const int node_port = MetricsPort(cluster.dir() + "/node0.log");
  ASSERT_NE(master_port, 0) << cluster.Logs();
  ASSERT_NE(node_port, 0) << cluster.Logs();
  auto volume = client.RegisterVolume(kRoot);
  ASSERT_TRUE(volume.ok()) << volume.status().ToString();

  auto node0 = Parse(Get(node_port));
  auto master0 = Parse(Get(master_port));
  constexpr int kBatches = 5, kPerBatch = 20, kSearches = 7;
  RecordGen gen(1);
  for (int b = 0; b < kBatches; ++b) {
    std::vector<FileUpdate> batch;
    for (int i = 0; i < kPerBatch; ++i) {
      FileUpdate u;
      const uint64_t ino = 100 + static_cast<uint64_t>(b * kPerBatch + i);
      u.record = gen.NewRecord(FileId{*volume, ino});
      u.record.paths = {std::string(kRoot) + "/d/f" + std::to_string(ino)};
      batch.push_back(u);
    }
    ASSERT_TRUE(client.Update(batch).ok());
  }
  for (int s = 0; s < kSearches; ++s) {
    auto hits = client.SearchAll("size>=0", {});
    ASSERT_TRUE(hits.ok()) << hits.status().ToString();
  }
  auto node1 = Parse(Get(node_port));
  auto master1 = Parse(Get(master_port));

  // Exactly: only this test's client writes and searches.
  EXPECT_EQ(node1["propeller_node_updates_total"] - node0["propeller_node_updates_total"],
            kBatches * kPerBatch);
  const double applies = node1["propeller_node_requests_total{type=\"apply\"}"] -
                         node0["propeller_node_requests_total{type=\"apply\"}"];
  // The client may coalesce or split batches, but sends at least one request per batch here
  // (each Update call waits for its acknowledgement).
  EXPECT_GE(applies, kBatches);
  EXPECT_EQ(node1["propeller_node_apply_seconds_count"] - node0["propeller_node_apply_seconds_count"],
            applies);
  EXPECT_EQ(node1["propeller_node_update_batches_total"] -
                node0["propeller_node_update_batches_total"], applies);
  EXPECT_EQ(node1["propeller_node_searches_total"] - node0["propeller_node_searches_total"],
            kSearches);
  EXPECT_EQ(node1["propeller_node_search_seconds_count"] -
                node0["propeller_node_search_seconds_count"], kSearches);
  EXPECT_GE(node1["propeller_node_acgs"], 1);
  EXPECT_EQ(node1["propeller_node_files"], kBatches * kPerBatch);
  EXPECT_EQ(node1["propeller_node_acg_files_count"], node1["propeller_node_acgs"]);
  EXPECT_GE(node1["propeller_node_registered"], 1);
  // At least: heartbeats and the node's own lookups also reach the master.
  EXPECT_GE(master1["propeller_master_requests_total{type=\"assign-files\"}"] -
                master0["propeller_master_requests_total{type=\"assign-files\"}"], 1);
  EXPECT_GE(master1["propeller_master_requests_total{type=\"heartbeat\"}"], 1);
  EXPECT_EQ(master1["propeller_master_nodes_up"], 1);
  EXPECT_EQ(master1["propeller_master_files"], kBatches * kPerBatch);

  // Only GET /metrics.
  EXPECT_EQ(StatusOf(Get(node_port, "/")), 404);
  EXPECT_EQ(StatusOf(Get(node_port, "/metrics/x")), 404);
  EXPECT_EQ(StatusOf(Http(node_port, "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 2"
                                     "\r\nConnection: close\r\n\r\nab")), 404);
  EXPECT_EQ(StatusOf(Http(node_port, "DELETE /metrics HTTP/1.1\r\nHost: x\r\n"
                                     "Connection: close\r\n\r\n")), 404);
  // Oversized: a body over 1 KiB (refused before it is read: 404 for any POST, the body left
  // unread), and a request line over cpp-httplib's 8 KiB.
  const std::string big(4096, 'x');
  const int big_body = StatusOf(Http(node_port, "POST /metrics HTTP/1.1\r\nHost: x\r\n"
                                     "Content-Length: " + std::to_string(big.size()) +
                                     "\r\nConnection: close\r\n\r\n" + big));
  EXPECT_TRUE(big_body == 404 || big_body == 413) << big_body;
  EXPECT_EQ(StatusOf(Get(node_port, "/metrics?" + std::string(20000, 'a'))), 414);
  // Still serving after all that.
  EXPECT_EQ(StatusOf(Get(node_port)), 200);

  // The rpc endpoint and the metrics listener (compare NodeWithoutOptionOpensNoPort).
  EXPECT_EQ(ListeningSockets(cluster.node(0).pid()), 2u);
}

TEST(MetricsTest, NodeWithoutOptionOpensNoPort) {
  ClusterConfig config;
  config.nodes = 1;
  LocalCluster cluster(config);
  ASSERT_TRUE(cluster.Start());
  auto client_or = Client::Connect(cluster.client_options(5000));
  ASSERT_TRUE(client_or.ok());
  ASSERT_TRUE(cluster.WaitNodesUp(**client_or, 1)) << cluster.Logs();
  EXPECT_EQ(ListeningSockets(cluster.node(0).pid()), 1u);  // the rpc endpoint only
  EXPECT_EQ(ListeningSockets(cluster.master().pid()), 1u);
  EXPECT_EQ(MetricsPort(cluster.dir() + "/node0.log", 1), 0);
}

// A mount with its embedded master and node: one endpoint serves the mount's, the master's and
// the node's families, and they move with the files created through the mount.
TEST(MetricsTest, MountCountersMoveWithFilesCreatedThroughIt) {
  Mount m({"--metrics-listen", "127.0.0.1:0"});
  ASSERT_TRUE(m.Start());
  const int port = MetricsPort(m.log());
  ASSERT_NE(port, 0) << ReadAll(m.log());
  auto before = Parse(Get(port));
  ASSERT_TRUE(before.count("propeller_mount_updates_sent_total")) << "the mount's own family";
  ASSERT_TRUE(before.count("propeller_node_updates_total")) << "the embedded node's family";
  constexpr int kFiles = 12;
  for (int i = 0; i < kFiles; ++i) {
    std::ofstream(m.mnt() + "/f" + std::to_string(i)) << "x";  // closed: acknowledged
  }
  auto after = Parse(Get(port));
  EXPECT_EQ(after["propeller_master_files"] - before["propeller_master_files"], kFiles);
  EXPECT_GE(after["propeller_mount_updates_sent_total"] -
                before["propeller_mount_updates_sent_total"], kFiles);
  EXPECT_GE(after["propeller_node_updates_total"] - before["propeller_node_updates_total"],
            kFiles);
  EXPECT_EQ(after["propeller_mount_pending_updates"], 0) << "the node took every update";
  EXPECT_EQ(after["propeller_mount_update_errors_total"], 0);
  EXPECT_TRUE(m.Stop());
}

}  // namespace
}  // namespace propeller::testing
