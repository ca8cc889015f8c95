// The C ABI (client/lib/propeller_c.h) against a real one-node cluster: search results equal
// the C++ client's, attributes set through C are searchable, errors come back as a status
// number and a message. tests/c_header_check.c is compiled as C and called from here.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "client/lib/propeller.h"
#include "client/lib/propeller_c.h"
#include "common/status.h"
#include "common/tree_walk.h"
#include "tests/cluster_harness.h"

extern "C" long propeller_c_count(const char* master, const char* query, const char* scope);

namespace propeller::testing {
namespace {

TEST(CApiTest, SearchAndAttributesThroughTheCAbi) {
  ClusterConfig config;
  config.nodes = 1;
  config.ipc = true;  // a program on the cluster's host: the unix sockets, no key needed
  LocalCluster cluster(config);
  ASSERT_TRUE(cluster.Start());
  auto client = Client::Connect(cluster.client_options());
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE(cluster.WaitNodesUp(**client, 1)) << cluster.Logs();

  // A small real tree, indexed through the C++ client.
  TempDir tree;
  for (int i = 0; i < 30; ++i) {
    std::string p = tree.path() + "/file" + std::to_string(i) + (i % 3 == 0 ? ".dat" : ".txt");
    int fd = ::open(p.c_str(), O_WRONLY | O_CREAT, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, i * 1000), 0);
    ::close(fd);
  }
  char root[4096];
  ASSERT_NE(::realpath(tree.path().c_str(), root), nullptr);
  auto volume = (*client)->RegisterVolume(root);
  ASSERT_TRUE(volume.ok());
  std::vector<FileUpdate> updates;
  ASSERT_TRUE(WalkTree(root, {.volume = *volume}, [&](FileRecord&& r) {
                FileUpdate u;
                u.record = std::move(r);
                updates.push_back(std::move(u));
                return Status::OK();
              }, nullptr).ok());
  ASSERT_TRUE((*client)->Update(updates).ok());

  const std::string master = cluster.master_endpoint();
  auto cpp = (*client)->SearchAll("ext=dat & size>=3000", {});
  ASSERT_TRUE(cpp.ok());
  ASSERT_FALSE(cpp->empty());
  EXPECT_EQ(propeller_c_count(master.c_str(), "ext=dat & size>=3000", nullptr),
            static_cast<long>(cpp->size()));

  propeller_client* c = nullptr;
  char* error = nullptr;
  ASSERT_EQ(propeller_connect(master.c_str(), &c, &error), 0);
  std::vector<std::string> paths;
  auto collect = [](void* ctx, const propeller_hit* hit) -> int {
    static_cast<std::vector<std::string>*>(ctx)->push_back(hit->path);
    return hit->size >= 1000 && hit->type == 'f' ? 1 : 0;
  };
  ASSERT_EQ(propeller_search(c, "ext=txt", root, 5, "size", 0, collect, &paths, &error), 0);
  EXPECT_EQ(paths.size(), 5u);  // sorted by size: file1.txt (1000) first, then 2, 4, 5, 7

  const std::string target = std::string(root) + "/file7.txt";
  ASSERT_EQ(propeller_set_attr_string(c, target.c_str(), "team", "ann", &error), 0) << error;
  ASSERT_EQ(propeller_set_attr_int(c, target.c_str(), "level", 3, &error), 0) << error;
  EXPECT_EQ(propeller_c_count(master.c_str(), "team=ann & level=3", nullptr), 1);
  ASSERT_EQ(propeller_remove_attr(c, target.c_str(), "team", &error), 0);
  EXPECT_EQ(propeller_c_count(master.c_str(), "team=ann", nullptr), 0);

  // Errors: a status number and a one-line message the caller frees.
  EXPECT_EQ(propeller_search(c, "size>>1", nullptr, 0, nullptr, 0, collect, &paths, &error),
            static_cast<int>(StatusCode::kInvalidArgument));
  ASSERT_NE(error, nullptr);
  EXPECT_NE(std::strstr(error, "error at"), nullptr) << error;
  propeller_free(error);
  error = nullptr;
  EXPECT_EQ(propeller_set_attr_int(c, "/not/in/any/volume", "x", 1, &error),
            static_cast<int>(StatusCode::kNotFound));
  propeller_free(error);
  EXPECT_EQ(propeller_search(c, nullptr, nullptr, 0, nullptr, 0, collect, &paths, nullptr),
            static_cast<int>(StatusCode::kInvalidArgument));

  // A live query through the cluster's own unix sockets (master, then the index node): an
  // attribute set after the watch registered makes the file match, removing it unmatches.
  struct WatchState {
    std::mutex mu;
    std::condition_variable cv;
    bool ready = false;
    std::vector<std::string> lines;
  } ws;
  auto on_change = [](void* ctx, char kind, const propeller_hit* hit) -> int {
    auto* w = static_cast<WatchState*>(ctx);
    std::lock_guard<std::mutex> lock(w->mu);
    if (kind == 'r') w->ready = true;
    if (hit != nullptr) w->lines.push_back(std::string(1, kind) + hit->path);
    w->cv.notify_all();
    return w->lines.size() < 2 ? 1 : 0;  // stop after two changes
  };
  int watch_rc = -1;
  char* watch_error = nullptr;
  std::thread watcher([&] {
    watch_rc = propeller_watch(c, "team=bob", root, on_change, &ws, &watch_error);
  });
  {
    std::unique_lock<std::mutex> lock(ws.mu);
    ASSERT_TRUE(ws.cv.wait_for(lock, std::chrono::seconds(20), [&] { return ws.ready; }));
  }
  ASSERT_EQ(propeller_set_attr_string(c, target.c_str(), "team", "bob", &error), 0) << error;
  ASSERT_EQ(propeller_remove_attr(c, target.c_str(), "team", &error), 0) << error;
  watcher.join();
  EXPECT_EQ(watch_rc, 0) << (watch_error ? watch_error : "");
  EXPECT_EQ(ws.lines, (std::vector<std::string>{"+" + target, "-" + target}));
  EXPECT_EQ(propeller_watch(c, "size>>1", nullptr, on_change, &ws, &error),
            static_cast<int>(StatusCode::kInvalidArgument));
  propeller_free(error);
  propeller_close(c);
}

}  // namespace
}  // namespace propeller::testing
