// A real cluster (propeller-master + 3 propeller-indexnode processes on loopback) against the
// single-node engine: for a seeded random stream of updates and queries, every search through
// the client library gives exactly the results of an in-process Engine fed the same updates.
//
// PROPELLER_SEED picks the stream (default fixed); the seed is printed on failure.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <set>
#include <thread>

#include "client/lib/propeller.h"
#include "common/random.h"
#include "indexnode/engine.h"
#include "indexnode/engine_test_util.h"
#include "common/rpc/rpc.h"
#include "schemas/messages.h"
#include "schemas/wire_call.h"
#include "tests/cluster_harness.h"

namespace propeller::testing {
namespace {

std::string Describe(const std::vector<Row>& rows) {
  std::string out;
  for (size_t i = 0; i < rows.size() && i < 20; ++i) {
    out += "  " + rows[i].path + " ino " + std::to_string(rows[i].record.id.ino) + " size " +
           std::to_string(rows[i].record.size) + "\n";
  }
  if (rows.size() > 20) out += "  ... " + std::to_string(rows.size()) + " rows\n";
  return out;
}

TEST(ClusterTest, RandomStreamMatchesSingleNodeEngine) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("PROPELLER_SEED=" + std::to_string(seed));
  ClusterConfig config;
  config.nodes = 3;
  config.acg_threshold = 40;  // many small partitions, spread over the three nodes
  LocalCluster cluster(config);
  ASSERT_TRUE(cluster.Start());
  auto client_or = Client::Connect(cluster.client_options(5000));
  ASSERT_TRUE(client_or.ok()) << client_or.status().ToString();
  Client& client = **client_or;
  ASSERT_TRUE(cluster.WaitNodesUp(client, 3)) << cluster.Logs();
  auto volume = client.RegisterVolume(kRoot);
  ASSERT_TRUE(volume.ok()) << volume.status().ToString();
  ASSERT_TRUE(client.CreateIndex("proj", IndexType::kHash).ok());
  ASSERT_TRUE(client.CreateIndex("prio", IndexType::kBTree).ok());

  TempDir ref_dir;
  EngineOptions eo;
  eo.data_dir = ref_dir.path() + "/engine";
  eo.background_commit = false;
  auto engine_or = Engine::Open(eo);
  ASSERT_TRUE(engine_or.ok()) << engine_or.status().ToString();
  Engine& engine = **engine_or;
  ASSERT_TRUE(engine.CreateIndex("proj", IndexType::kHash).ok());
  ASSERT_TRUE(engine.CreateIndex("prio", IndexType::kBTree).ok());

  RecordGen gen(seed);
  Random& rnd = gen.rnd();
  std::map<uint64_t, FileRecord> live;  // by inode
  uint64_t next_ino = 100;
  static const char* kApps[] = {"cc", "ld", "python3", "make", ""};
  int searches = 0, nonempty = 0;

  for (int step = 0; step < 700; ++step) {
    const uint64_t roll = rnd.Uniform(100);
    if (roll < 85) {
      // A batch of updates, as many closes at once would send.
      std::vector<FileUpdate> batch;
      std::vector<Update> ref;
      const size_t n = 1 + rnd.Uniform(rnd.OneIn(10) ? 200 : 8);
      std::set<uint64_t> touched;  // one update per file per batch keeps the order trivial
      for (size_t k = 0; k < n; ++k) {
        FileUpdate u;
        const uint64_t kind = rnd.Uniform(100);
        if (live.empty() || kind < 50) {
          const uint64_t ino = next_ino++;
          u.op = UpdateOp::kPut;
          u.record = gen.NewRecord(FileId{*volume, ino});
          // Unique paths: ties in sorted results are then ordered the same way everywhere.
          u.record.paths = {gen.RandomDir() + "/" + std::to_string(ino) + "-" + gen.RandomName()};
          u.app = kApps[rnd.Uniform(std::size(kApps))];
          if (!live.empty() && rnd.OneIn(2)) {
            auto it = live.lower_bound(rnd.Uniform(next_ino));
            if (it == live.end()) it = live.begin();
            u.producers = {it->second.id};
          }
        } else {
          auto it = live.lower_bound(100 + rnd.Uniform(next_ino - 100));
          if (it == live.end()) it = live.begin();
          if (!touched.insert(it->first).second) continue;
          u.record = it->second;
          if (kind < 75) {
            u.op = UpdateOp::kPut;  // attributes change, sometimes a rename
            gen.RandomizeAttrs(&u.record);
            if (rnd.OneIn(3)) {
              u.record.paths = {gen.RandomDir() + "/" + std::to_string(it->first) + "-r" +
                                gen.RandomName()};
            }
          } else if (kind < 85) {
            u.op = UpdateOp::kDelete;
          } else if (kind < 95) {
            u.op = UpdateOp::kSetAttrs;
            u.record.attrs.clear();
            u.record.attrs["proj"] = std::string(rnd.OneIn(2) ? "alpha" : "gamma");
            if (rnd.OneIn(2)) u.record.attrs["prio"] = static_cast<int64_t>(rnd.Uniform(10));
          } else {
            u.op = UpdateOp::kRemoveAttrs;
            u.record.attrs.clear();
            u.record.attrs["proj"] = int64_t{0};
          }
        }
        touched.insert(u.record.id.ino);
        Update r;
        r.op = u.op;
        r.acg = 1;
        r.record = u.record;
        ref.push_back(r);
        // Keep our own view of the live records for choosing the next updates.
        if (u.op == UpdateOp::kPut) {
          live[u.record.id.ino] = u.record;
        } else if (u.op == UpdateOp::kDelete) {
          live.erase(u.record.id.ino);
        } else if (u.op == UpdateOp::kSetAttrs) {
          for (const auto& [k, v] : u.record.attrs) live[u.record.id.ino].attrs[k] = v;
        } else {
          for (const auto& [k, v] : u.record.attrs) live[u.record.id.ino].attrs.erase(k);
        }
        batch.push_back(std::move(u));
      }
      Status st = client.Update(batch);
      ASSERT_TRUE(st.ok()) << "step " << step << ": " << st.ToString() << "\n" << cluster.Logs();
      ASSERT_TRUE(engine.Apply(ref).ok());
      continue;
    }
    // A query, sometimes scoped, sorted or limited.
    const std::string text = gen.RandomQuery();
    ClientSearchOptions co;
    SearchRequest req;
    req.query = text;
    req.now_ns = co.now_ns = kNow;
    // Path predicates are about the paths results print (docs/query.md "Paths").
    req.volume_roots = {{*volume, kRoot}};
    if (rnd.OneIn(3)) {
      req.scope = gen.RandomDir();
      co.scope = std::string(kRoot) + req.scope;
    }
    const bool sorted = rnd.OneIn(3);
    if (sorted) {
      static const char* kKeys[] = {"size", "mtime", "uid", "path", "name"};
      req.sort_by = co.sort_by = kKeys[rnd.Uniform(std::size(kKeys))];
      req.descending = co.descending = rnd.OneIn(2);
      if (rnd.OneIn(2)) req.limit = co.limit = 1 + rnd.Uniform(20);
    }
    auto want_or = engine.SearchAll(req);
    auto got_or = client.SearchAll(text, co);
    ASSERT_EQ(want_or.ok(), got_or.ok())
        << "query '" << text << "': engine " << want_or.status().ToString() << ", cluster "
        << got_or.status().ToString();
    if (!want_or.ok()) continue;
    std::vector<Row> want, got;
    for (const SearchHit& h : *want_or) want.push_back({h.path, h.record});
    for (const ClientHit& h : *got_or) got.push_back({InVolume(h.path), h.record});
    if (!sorted) {
      std::sort(want.begin(), want.end());
      std::sort(got.begin(), got.end());
    }
    ++searches;
    nonempty += !want.empty();
    ASSERT_TRUE(want == got) << "step " << step << " query '" << text << "' scope '" << co.scope
                             << "' sort '" << co.sort_by << "' limit " << co.limit
                             << "\nengine:\n" << Describe(want) << "cluster:\n" << Describe(got);
  }
  // The stream must have exercised the fan-out for real.
  EXPECT_GT(searches, 60);
  EXPECT_GT(nonempty, searches / 4);
  auto status = client.GetStatus();
  ASSERT_TRUE(status.ok());
  size_t nodes_with_acgs = 0;
  for (const NodeStatus& ns : status->nodes) nodes_with_acgs += ns.info.acgs > 0;
  EXPECT_EQ(nodes_with_acgs, 3u) << "placement should spread partitions over every node";
}

// An unlink and a create elsewhere that reuses the inode number race (issue 4): the mount
// takes the delete's route before the unlink (Client::ResolveRoutes) and the delete carries
// the unlinked path and old ctime (DeleteApplies), so neither the new file's record nor its
// mapping at the master is lost, whether the new file lands in another ACG or the same one.
TEST(ClusterTest, ADeleteRacingAnInodeReuseSparesTheNewFile) {
  LocalCluster cluster(ClusterConfig{1, 50'000, {}, {}});
  ASSERT_TRUE(cluster.Start());
  auto client_or = Client::Connect(cluster.client_options(5000));
  ASSERT_TRUE(client_or.ok()) << client_or.status().ToString();
  Client& client = **client_or;
  ASSERT_TRUE(cluster.WaitNodesUp(client, 1)) << cluster.Logs();
  auto volume = client.RegisterVolume(kRoot);
  ASSERT_TRUE(volume.ok()) << volume.status().ToString();
  auto master = rpc::Channel::Connect(cluster.channel_options(cluster.master_endpoint()));
  ASSERT_TRUE(master.ok());
  auto mapping = [&](FileId id) {
    wire::FilesRequest req{{id}, {}};
    wire::LocationsReply rep;
    EXPECT_TRUE(wire::WireCall(**master, wire::MsgType::kLookupFiles, req, &rep, {}).ok());
    return rep.locations.size() == 1 ? rep.locations[0] : wire::FileLocation{};
  };
  uint64_t ino = 500;
  for (const char* reuser : {"other-app", "same-app"}) {
    SCOPED_TRACE(reuser);
    const FileId id{*volume, ++ino};
    FileUpdate old_file;
    old_file.created = true;
    old_file.app = "same-app";
    old_file.record.id = id;
    old_file.record.paths = {"/a/x" + std::to_string(ino)};
    old_file.record.ctime = kNow - 1000;
    ASSERT_TRUE(client.Update({&old_file, 1}).ok());
    const wire::FileLocation before = mapping(id);
    ASSERT_NE(before.acg, 0u);

    // The mount prepares the delete before unlinking...
    FileUpdate del;
    del.op = UpdateOp::kDelete;
    del.record.id = id;
    del.record.paths = old_file.record.paths;
    del.record.ctime = old_file.record.ctime;
    ASSERT_TRUE(client.ResolveRoutes({&del, 1}).ok());
    EXPECT_EQ(del.acg, before.acg);
    EXPECT_EQ(del.generation, before.generation);
    // ...another thread creates a file elsewhere that gets the freed number...
    FileUpdate new_file;
    new_file.created = true;
    new_file.app = reuser;
    new_file.record.id = id;
    new_file.record.paths = {"/b/y" + std::to_string(ino)};
    new_file.record.ctime = kNow;
    ASSERT_TRUE(client.Update({&new_file, 1}).ok());
    const wire::FileLocation after = mapping(id);
    ASSERT_NE(after.generation, before.generation);
    EXPECT_EQ(after.acg == before.acg, std::string(reuser) == "same-app");
    // ...and only then is the delete sent, with its queued forget.
    ASSERT_TRUE(client.Update({&del, 1}).ok());
    ASSERT_TRUE(client.FlushForgets().ok());

    Result<FileRecord> got = client.Get(id);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(got->paths, new_file.record.paths);
    const wire::FileLocation now = mapping(id);
    EXPECT_EQ(now.acg, after.acg);
    EXPECT_EQ(now.generation, after.generation);
    ClientSearchOptions so;
    so.now_ns = kNow;
    auto hits = client.SearchAll("name=y" + std::to_string(ino), so);
    ASSERT_TRUE(hits.ok());
    EXPECT_EQ(hits->size(), 1u);
    auto gone = client.SearchAll("name=x" + std::to_string(ino), so);
    ASSERT_TRUE(gone.ok());
    EXPECT_EQ(gone->size(), 0u);
  }
}

// A search starts with the nodes of the client's last search while the master confirms the
// list (Client::Impl::Search). A node that joined since, and holds files now, must be searched
// all the same; one that went down holding ACGs makes the search fail, as it did before.
TEST(ClusterTest, ASearchReachesANodeThatJoinedSinceTheLastSearch) {
  LocalCluster cluster(ClusterConfig{2, 50'000, {}, {}});
  ASSERT_TRUE(cluster.StartMaster());
  ASSERT_TRUE(cluster.StartNode(0));
  auto client_or = Client::Connect(cluster.client_options(2000));
  ASSERT_TRUE(client_or.ok()) << client_or.status().ToString();
  Client& client = **client_or;
  ASSERT_TRUE(cluster.WaitNodesUp(client, 1)) << cluster.Logs();
  auto volume = client.RegisterVolume(kRoot);
  ASSERT_TRUE(volume.ok()) << volume.status().ToString();
  auto put = [&](const std::string& app, uint64_t first, int n) {
    std::vector<FileUpdate> batch(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      batch[i].app = app;
      batch[i].created = true;
      batch[i].record.id = FileId{*volume, first + static_cast<uint64_t>(i)};
      batch[i].record.paths = {"/" + app + "/f" + std::to_string(i)};
      batch[i].record.size = 100;
    }
    return client.Update(batch);
  };
  ASSERT_TRUE(put("first", 100, 5).ok());
  ClientSearchStats stats;
  auto hits = client.SearchAll("size=100", {}, &stats);
  ASSERT_TRUE(hits.ok()) << hits.status().ToString();
  EXPECT_EQ(hits->size(), 5u);
  EXPECT_EQ(stats.nodes, 1u);

  ASSERT_TRUE(cluster.StartNode(1));
  ASSERT_TRUE(cluster.WaitNodesUp(client, 2)) << cluster.Logs();
  ASSERT_TRUE(put("second", 200, 7).ok());  // a new app: a new ACG on the empty node
  hits = client.SearchAll("size=100", {}, &stats);
  ASSERT_TRUE(hits.ok()) << hits.status().ToString();
  EXPECT_EQ(hits->size(), 12u);
  EXPECT_EQ(stats.nodes, 2u);
  std::set<uint32_t> second_nodes, first_nodes;
  for (const ClientHit& h : *hits) {
    (h.record.id.ino >= 200 ? second_nodes : first_nodes).insert(h.node_id);
  }
  ASSERT_EQ(first_nodes.size(), 1u);
  ASSERT_EQ(second_nodes.size(), 1u);
  EXPECT_NE(*first_nodes.begin(), *second_nodes.begin())
      << "the new files must be on the new node for this test to mean anything";

  // The new node dies; once the master has noticed, the search fails (its ACG is unreachable)
  // instead of answering without its files.
  cluster.node(1).Kill();
  Status st = Eventually([&] {
    auto h = client.SearchAll("size=100", {});
    if (h.ok()) return Status::Aborted("the master still lists the node as up");
    return h.status().code() == StatusCode::kUnavailable ? Status::OK() : h.status();
  });
  EXPECT_TRUE(st.ok()) << st.ToString();
  auto again = client.SearchAll("size=100", {});
  EXPECT_EQ(again.status().code(), StatusCode::kUnavailable) << again.status().ToString();
}

// docs/architecture.md §4: concurrent Update calls bound for one node share Apply requests. The
// first kMaxAppliesInFlightPerNode callers' Applies are held (test hook) until seven more callers
// queue behind them; those seven must then go in one Apply, each call returning its own
// outcome: the caller whose update the node refuses gets the error, the others' updates are
// applied (checked by Get and a search).
TEST(ClusterTest, ConcurrentUpdatesShareApplyRequests) {
  LocalCluster cluster(ClusterConfig{1, 50'000, {}, {}});
  ASSERT_TRUE(cluster.Start());
  constexpr int kHeld = kMaxAppliesInFlightPerNode;
  constexpr int kQueued = 7;
  constexpr int kCallers = kHeld + kQueued;
  constexpr int kBadCaller = kHeld + 3;
  std::atomic<bool> hold{false};
  std::atomic<int> holding{0};
  ClientOptions options = cluster.client_options(10'000);
  options.before_apply_for_test = [&] {
    if (!hold.load()) return;
    holding.fetch_add(1);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (hold.load() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  };
  auto client_or = Client::Connect(options);
  ASSERT_TRUE(client_or.ok()) << client_or.status().ToString();
  Client& client = **client_or;
  ASSERT_TRUE(cluster.WaitNodesUp(client, 1)) << cluster.Logs();
  auto volume = client.RegisterVolume(kRoot);
  ASSERT_TRUE(volume.ok()) << volume.status().ToString();

  // The files exist (and their routes are cached) before the concurrent part.
  std::vector<FileUpdate> files(kCallers);
  for (int i = 0; i < kCallers; ++i) {
    files[i].app = "writer";
    files[i].created = true;
    files[i].record.id = FileId{*volume, 1000u + i};
    files[i].record.paths = {"/w/f" + std::to_string(i)};
    files[i].record.size = 10;
  }
  ASSERT_TRUE(client.Update(files).ok());

  const ClientUpdateStats before = client.update_stats();
  std::vector<FileUpdate> next = files;
  for (int i = 0; i < kCallers; ++i) {
    next[i].created = false;
    next[i].record.size = 5'000'000 + i;
  }
  next[kBadCaller].record.paths = {"no/leading/slash"};  // the node refuses this record
  std::vector<Status> results(kCallers);
  auto call = [&](int i) { results[i] = client.Update({&next[i], 1}); };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  hold = true;
  std::vector<std::thread> threads;
  for (int i = 0; i < kHeld; ++i) threads.emplace_back(call, i);
  while (holding.load() < kHeld && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  for (int i = kHeld; i < kCallers; ++i) threads.emplace_back(call, i);
  while (client.update_stats().callers_waiting < uint64_t{kQueued} &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(holding.load(), kHeld);
  hold = false;
  for (std::thread& t : threads) t.join();
  const ClientUpdateStats after = client.update_stats();

  for (int i = 0; i < kCallers; ++i) {
    if (i == kBadCaller) {
      EXPECT_EQ(results[i].code(), StatusCode::kInvalidArgument) << results[i].ToString();
    } else {
      EXPECT_TRUE(results[i].ok()) << i << ": " << results[i].ToString();
    }
  }
  // The held Applies, the shared one (refused), then the queued callers one by one.
  EXPECT_EQ(after.apply_calls - before.apply_calls, uint64_t{kHeld} + 1 + kQueued);
  EXPECT_EQ(after.coalesced_calls - before.coalesced_calls, 1u);
  EXPECT_EQ(after.callers_coalesced - before.callers_coalesced, kQueued - 1u);
  EXPECT_EQ(after.callers_waiting, 0u);

  ClientSearchOptions so;
  so.now_ns = kNow;
  auto hits = client.SearchAll("size>1m", so);
  ASSERT_TRUE(hits.ok()) << hits.status().ToString();
  std::set<uint64_t> found;
  for (const ClientHit& h : *hits) found.insert(h.record.id.ino);
  std::set<uint64_t> expected;
  for (int i = 0; i < kCallers; ++i) {
    Result<FileRecord> got = client.Get(files[i].record.id);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    if (i == kBadCaller) {
      EXPECT_EQ(got->size, 10u);
      EXPECT_EQ(got->paths, files[i].record.paths);
    } else {
      EXPECT_EQ(got->size, 5'000'000u + i);
      expected.insert(1000u + i);
    }
  }
  EXPECT_EQ(found, expected);

  // Without the hold, many concurrent callers still get every update acknowledged and
  // applied, in fewer requests than calls.
  const ClientUpdateStats mid = client.update_stats();
  constexpr int kThreads = 8;
  constexpr int kPerThread = 200;
  std::vector<std::thread> writers;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([&, t] {
      for (int k = 1; k <= kPerThread; ++k) {
        FileUpdate u = files[t];
        u.created = false;
        u.record.size = 1'000'000u * t + k;
        if (!client.Update({&u, 1}).ok()) failures.fetch_add(1);
      }
    });
  }
  for (std::thread& t : writers) t.join();
  EXPECT_EQ(failures.load(), 0);
  const ClientUpdateStats end = client.update_stats();
  EXPECT_EQ(end.updates_sent - mid.updates_sent, uint64_t{kThreads} * kPerThread);
  EXPECT_LE(end.apply_calls - mid.apply_calls, uint64_t{kThreads} * kPerThread);
  EXPECT_EQ(end.callers_waiting, 0u);
  for (int t = 0; t < kThreads; ++t) {
    Result<FileRecord> got = client.Get(files[t].record.id);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(got->size, 1'000'000u * t + kPerThread);
  }
}

}  // namespace

// Path predicates see the paths results print (docs/query.md "Paths"): a keyword of a volume's
// root matches its files, and a volume registered by another client after this one cached the
// volume list is searched with its own root too (the cached roots are checked against the
// master's while the nodes work, and the search starts again when they differ).
TEST(ClusterTest, PathPredicatesSeeEachVolumesRootAlsoOfANewVolume) {
  LocalCluster cluster(ClusterConfig{1, 50'000, {}, {}});
  ASSERT_TRUE(cluster.Start());
  auto a = Client::Connect(cluster.client_options(5000));
  auto b = Client::Connect(cluster.client_options(5000));
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(cluster.WaitNodesUp(**a, 1)) << cluster.Logs();
  auto put = [&](Client& c, uint32_t volume, uint64_t ino, const std::string& path) {
    FileUpdate u;
    u.created = true;
    u.record.id = FileId{volume, ino};
    u.record.paths = {path};
    u.record.size = 1;
    return c.Update(std::span<const FileUpdate>(&u, 1));
  };
  auto first = (*a)->RegisterVolume("/srv/alpha");
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(put(**a, *first, 1, "/x/one.txt").ok());
  auto paths = [&](const std::string& query) {
    std::vector<std::string> out;
    auto hits = (*a)->SearchAll(query, {});
    EXPECT_TRUE(hits.ok()) << hits.status().ToString();
    if (hits.ok()) {
      for (const ClientHit& h : *hits) out.push_back(h.path);
    }
    std::sort(out.begin(), out.end());
    return out;
  };
  EXPECT_EQ(paths("keyword=alpha & type=f"), std::vector<std::string>{"/srv/alpha/x/one.txt"});
  EXPECT_EQ(paths("path~/srv/alpha/x/*"), std::vector<std::string>{"/srv/alpha/x/one.txt"});
  EXPECT_TRUE(paths("path~/x/*").empty());  // not a path results print
  // Another client registers a volume; this one's cached list does not have it yet.
  auto second = (*b)->RegisterVolume("/srv/beta");
  ASSERT_TRUE(second.ok());
  ASSERT_TRUE(put(**b, *second, 2, "/x/two.txt").ok());
  EXPECT_EQ(paths("keyword=beta"), std::vector<std::string>{"/srv/beta/x/two.txt"});
  EXPECT_EQ(paths("path~/srv/*/x/*"),
            (std::vector<std::string>{"/srv/alpha/x/one.txt", "/srv/beta/x/two.txt"}));
}

}  // namespace propeller::testing
