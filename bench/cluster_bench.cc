// cluster_bench: the cluster's costs side by side in one run (issue 3's measurements).
//
//  1. The in-process Engine on the data set: search latency and acknowledged-update latency.
//  2. A real cluster (propeller-master + N propeller-indexnode processes on loopback) with the
//     same data set loaded through libpropeller, for each N in --nodes: the same searches and
//     updates through the network path.
// Phases run one after the other (each is torn down before the next), so memory holds one copy
// of the index at a time. Prints a Markdown table and writes JSON (--out).
//
//   build/bench/cluster_bench --files=10m --nodes=1,3 --out=bench/results/cluster-10m.json
//
//  3. With --move=N only: migration (issue 5), an ACG of N files moving between two nodes
//     under updates (RunMove).
//   build/bench/cluster_bench --move=50k --moves=7
//
//  4. With --writers=W,... only: W writer threads on one node, each issuing --updates
//     acknowledged single-file updates within its own group of 1,000 files (the paper's
//     Fig. 8 shape), once with a Client per writer and once with all writers sharing one
//     Client (processes writing through one mount), whose concurrent Update calls share Apply
//     requests (docs/architecture.md §4). The two modes alternate for --rounds rounds (RunWriters).
//   build/bench/cluster_bench --writers=1,4,16 --updates=10000 --rounds=3
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "bench/dataset.h"
#include "client/lib/propeller.h"
#include "indexnode/engine.h"
#include "tests/cluster_harness.h"

namespace propeller::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Config {
  uint64_t files = 1'000'000;
  std::vector<int> nodes = {1, 3};
  int search_runs = 21;
  int update_samples = 2000;
  int load_threads = 4;
  bool engine = true;  // --skip-engine: cluster phases only (the engine's own figures come
                       // from bench/run_comparison.sh)
  uint64_t move_files = 0;  // --move=N: only the migration phase (RunMove), N files
  int moves = 7;
  std::vector<int> writers;  // --writers=W,...: only the writer phase (RunWriters)
  int writer_updates = 10'000;
  int rounds = 3;
  std::string out;
};

struct Row {
  std::string system;  // "engine (in-process)", "cluster, 1 node", ...
  std::string metric;
  double value = 0;
};

double Micros(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}
double P99(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[std::min(v.size() - 1, v.size() * 99 / 100)];
}

uint64_t ParseCount(const std::string& s) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  std::string unit = end;
  if (unit == "k") v *= 1e3;
  if (unit == "m") v *= 1e6;
  return static_cast<uint64_t>(v);
}

// "1,4,16" -> {1, 4, 16}.
std::vector<int> ParseList(const char* v) {
  std::vector<int> out;
  for (const char* p = v; *p != '\0';) {
    out.push_back(std::atoi(p));
    while (*p != '\0' && *p != ',') ++p;
    if (*p == ',') ++p;
  }
  return out;
}

const char* const kQueries[] = {"size>1g & mtime<1d", "size>16m"};

// Median search latency (ms) of `search`, after two warm-up runs; also reports the hit count.
double TimeSearch(const std::function<uint64_t()>& search, int runs, uint64_t* hits) {
  *hits = search();
  search();
  std::vector<double> ms;
  for (int i = 0; i < runs; ++i) {
    const auto t0 = Clock::now();
    search();
    ms.push_back(Micros(Clock::now() - t0) / 1000);
  }
  return Median(ms);
}

// The sample of files whose updates are timed: spread over the whole data set.
std::vector<uint64_t> UpdateSample(const Config& c) {
  std::vector<uint64_t> out;
  for (int i = 0; i < c.update_samples; ++i) {
    out.push_back((static_cast<uint64_t>(i) * 2654435761u) % c.files);
  }
  return out;
}

bool RunEngine(const Config& c, const Dataset& ds, std::vector<Row>* rows) {
  testing::TempDir dir;
  EngineOptions eo;
  eo.data_dir = dir.path() + "/engine";
  auto engine = Engine::Open(eo);
  if (!engine.ok()) {
    std::fprintf(stderr, "engine: %s\n", engine.status().ToString().c_str());
    return false;
  }
  const auto t0 = Clock::now();
  std::vector<Update> chunk;
  for (uint64_t b = 0; b < c.files; b += 10'000) {
    chunk.clear();
    ds.AppendPuts(b, std::min(c.files, b + 10'000), &chunk);
    if (!(*engine)->Apply(chunk).ok()) return false;
  }
  if (!(*engine)->CommitAll().ok()) return false;
  const double load_s = Micros(Clock::now() - t0) / 1e6;
  const std::string sys = "engine (in-process)";
  rows->push_back({sys, "load files/s", c.files / load_s});
  for (const char* q : kQueries) {
    SearchRequest req;
    req.query = q;
    req.now_ns = ds.options().now_ns;
    uint64_t hits = 0;
    double ms = TimeSearch([&] {
      auto r = (*engine)->SearchAll(req);
      return r.ok() ? r->size() : 0;
    }, c.search_runs, &hits);
    rows->push_back({sys, std::string("search ms: ") + q, ms});
    rows->push_back({sys, std::string("hits: ") + q, static_cast<double>(hits)});
  }
  std::vector<double> us;
  uint64_t version = 1;
  for (uint64_t i : UpdateSample(c)) {
    Update u = ds.Put(i);
    ds.Touch(version++, &u.record);
    const auto t = Clock::now();
    if (!(*engine)->Apply(std::span<const Update>(&u, 1)).ok()) return false;
    us.push_back(Micros(Clock::now() - t));
  }
  rows->push_back({sys, "update median us", Median(us)});
  rows->push_back({sys, "update p99 us", P99(us)});
  return true;
}

// Loads files [0, files) of `ds` through `client` with `threads` client threads, each sending
// batches of 1000 files (app = the file's group).
bool Load(Client& client, const Dataset& ds, uint64_t files, int threads) {
  std::atomic<uint64_t> next{0};
  std::atomic<bool> failed{false};
  std::vector<std::thread> loaders;
  for (int t = 0; t < threads; ++t) {
    loaders.emplace_back([&] {
      std::vector<FileUpdate> batch;
      for (;;) {
        const uint64_t b = next.fetch_add(1000);
        if (b >= files || failed.load()) return;
        batch.clear();
        for (uint64_t i = b; i < std::min(files, b + 1000); ++i) {
          FileUpdate u;
          u.record = ds.Record(i);
          u.app = "group-" + std::to_string(ds.AcgOf(i));
          batch.push_back(std::move(u));
        }
        Status st = client.Update(batch);
        if (!st.ok()) {
          std::fprintf(stderr, "load: %s\n", st.ToString().c_str());
          failed = true;
        }
      }
    });
  }
  for (std::thread& t : loaders) t.join();
  return !failed.load();
}

// Migration (issue 5): one ACG of c.move_files files moves between the two nodes of a cluster,
// back and forth c.moves times (Client::MoveAcg: freeze, compacted copy, transfer in 8 MiB
// parts, adoption, flip, drop), while one client keeps updating files of that ACG. Reports
// the move's time as the source measures it (freeze to drop), the copy's size, and what the
// updates saw meanwhile; after each move a search must find every file exactly once.
bool RunMove(const Config& c, std::vector<Row>* rows) {
  DatasetOptions dso;
  dso.files_per_acg = c.move_files;  // every file in ACG 1
  Dataset ds(dso);
  testing::ClusterConfig cc;
  cc.nodes = 2;
  cc.acg_threshold = c.move_files + 1;
  cc.node_extra = {"--split-threshold", "0"};
  testing::LocalCluster cluster(cc);
  if (!cluster.Start()) return false;
  auto client_or = Client::Connect(cluster.client_options(60'000));
  if (!client_or.ok()) return false;
  Client& client = **client_or;
  if (!cluster.WaitNodesUp(client, 2) || !client.RegisterVolume("/").ok()) {
    std::fprintf(stderr, "%s", cluster.Logs().c_str());
    return false;
  }
  if (!Load(client, ds, c.move_files, c.load_threads)) return false;
  uint32_t from = 0, to = 0;
  auto status = client.GetStatus();
  if (!status.ok()) return false;
  for (const NodeStatus& ns : status->nodes) {
    const bool holds = ns.node && !ns.node->acg_list.empty();
    (holds ? from : to) = ns.info.node_id;
  }
  if (from == 0 || to == 0) {
    std::fprintf(stderr, "move: the ACG is not on exactly one of the two nodes\n");
    return false;
  }
  auto updater_or = Client::Connect(cluster.client_options(60'000));
  if (!updater_or.ok()) return false;
  std::atomic<bool> stop{false}, failed{false};
  std::vector<double> update_us;
  std::thread updater([&] {
    for (uint64_t n = 0; !stop.load(); ++n) {
      FileUpdate u;
      u.record = ds.Record((n * 2654435761u) % c.move_files);
      u.record.size += n;
      u.app = "group-1";
      const auto t0 = Clock::now();
      Status st = (*updater_or)->Update(std::span<const FileUpdate>(&u, 1));
      if (!st.ok()) {
        std::fprintf(stderr, "update during moves: %s\n", st.ToString().c_str());
        failed = true;
        return;
      }
      update_us.push_back(Micros(Clock::now() - t0));
    }
  });
  std::vector<double> move_ms;
  uint64_t bytes = 0;
  bool ok = true;
  for (int k = 0; k < c.moves && ok && !failed.load(); ++k) {
    const uint32_t dest = k % 2 == 0 ? to : from;
    auto moved = client.MoveAcg(1, dest);
    if (!moved.ok() || moved->files != c.move_files) {
      std::fprintf(stderr, "move %d: %s\n", k,
                   moved.ok() ? "wrong file count" : moved.status().ToString().c_str());
      ok = false;
      break;
    }
    move_ms.push_back(static_cast<double>(moved->micros) / 1e3);
    bytes = moved->bytes;
    ClientSearchOptions o;
    o.now_ns = ds.options().now_ns;
    auto all = client.SearchAll("size>=0", o);
    if (!all.ok() || all->size() != c.move_files) {
      std::fprintf(stderr, "search after move %d: %s\n", k,
                   all.ok() ? (std::to_string(all->size()) + " hits").c_str()
                            : all.status().ToString().c_str());
      ok = false;
    }
    std::fprintf(stderr, "move %d: %.1f ms, %.1f MB to node %u\n", k, move_ms.back(),
                 static_cast<double>(bytes) / 1e6, static_cast<unsigned>(dest));
  }
  stop = true;
  updater.join();
  if (!ok || failed.load()) return false;
  const std::string sys = "cluster, 2 nodes, one ACG of " + std::to_string(c.move_files) + " files";
  rows->push_back({sys, "moves", static_cast<double>(move_ms.size())});
  rows->push_back({sys, "move ms (freeze to drop), median", Median(move_ms)});
  rows->push_back({sys, "move ms, min", *std::min_element(move_ms.begin(), move_ms.end())});
  rows->push_back({sys, "move ms, max", *std::max_element(move_ms.begin(), move_ms.end())});
  rows->push_back({sys, "compacted copy MB", static_cast<double>(bytes) / 1e6});
  rows->push_back({sys, "copy MB/s at the median", static_cast<double>(bytes) / 1e3 /
                                                        Median(move_ms)});
  rows->push_back({sys, "updates to the ACG during the moves",
                   static_cast<double>(update_us.size())});
  rows->push_back({sys, "update us during the moves, median", Median(update_us)});
  rows->push_back({sys, "update us during the moves, p99", P99(update_us)});
  rows->push_back({sys, "update ms during the moves, max",
                   *std::max_element(update_us.begin(), update_us.end()) / 1e3});
  return true;
}

// One timed run of the writer phase: `writers` threads, each `updates` single-file updates to
// the files of its own group (file k % 1000 of group t), through clients[t % clients.size()].
// Returns false on any failed update or when a record read back differs from the last write.
struct WriterRun {
  double seconds = 0;
  std::vector<double> us;  // every update's latency
};
bool TimeWriters(const std::vector<Client*>& clients, const Dataset& ds, int writers,
                 int updates, uint64_t* version, WriterRun* run) {
  std::vector<std::vector<double>> us(static_cast<size_t>(writers));
  std::atomic<bool> failed{false};
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  const uint64_t base = *version;
  *version += static_cast<uint64_t>(updates);
  auto file_of = [&](int t, int k) { return static_cast<uint64_t>(t) * 1000 + k % 1000; };
  std::vector<std::thread> threads;
  for (int t = 0; t < writers; ++t) {
    threads.emplace_back([&, t] {
      Client& client = *clients[static_cast<size_t>(t) % clients.size()];
      us[t].reserve(static_cast<size_t>(updates));
      ready.fetch_add(1);
      while (!go.load()) std::this_thread::yield();
      for (int k = 0; k < updates && !failed.load(); ++k) {
        FileUpdate u;
        u.record = ds.Record(file_of(t, k));
        u.record.size = base + static_cast<uint64_t>(k);
        const auto t0 = Clock::now();
        Status st = client.Update(std::span<const FileUpdate>(&u, 1));
        us[t].push_back(Micros(Clock::now() - t0));
        if (!st.ok()) {
          std::fprintf(stderr, "writer %d: %s\n", t, st.ToString().c_str());
          failed = true;
        }
      }
    });
  }
  while (ready.load() < writers) std::this_thread::yield();
  const auto t0 = Clock::now();
  go = true;
  for (std::thread& t : threads) t.join();
  run->seconds = Micros(Clock::now() - t0) / 1e6;
  if (failed.load()) return false;
  run->us.clear();
  for (auto& v : us) run->us.insert(run->us.end(), v.begin(), v.end());
  // The last update of each writer is what its file holds now.
  for (int t = 0; t < writers; ++t) {
    const int k = updates - 1;
    auto got = clients[0]->Get(ds.Record(file_of(t, k)).id);
    if (!got.ok() || got->size != base + static_cast<uint64_t>(k)) {
      std::fprintf(stderr, "writer %d: read back %s\n", t,
                   got.ok() ? std::to_string(got->size).c_str() : got.status().ToString().c_str());
      return false;
    }
  }
  return true;
}

bool RunWriters(const Config& c, const Dataset& ds, std::vector<Row>* rows) {
  const int max_writers = *std::max_element(c.writers.begin(), c.writers.end());
  const uint64_t files = static_cast<uint64_t>(max_writers) * 1000;
  testing::ClusterConfig cc;
  cc.nodes = 1;
  cc.acg_threshold = 50'000;
  testing::LocalCluster cluster(cc);
  if (!cluster.Start()) return false;
  auto client_or = Client::Connect(cluster.client_options(60'000));
  if (!client_or.ok()) return false;
  if (!cluster.WaitNodesUp(**client_or, 1) || !(*client_or)->RegisterVolume("/").ok()) {
    std::fprintf(stderr, "%s", cluster.Logs().c_str());
    return false;
  }
  if (!Load(**client_or, ds, files, c.load_threads)) return false;
  // Writes group t's files as they are: the client then knows their routes.
  auto learn_group = [&](Client& client, int t) {
    std::vector<FileUpdate> group;
    for (uint64_t i = static_cast<uint64_t>(t) * 1000; i < static_cast<uint64_t>(t + 1) * 1000;
         ++i) {
      FileUpdate u;
      u.record = ds.Record(i);
      group.push_back(std::move(u));
    }
    return client.Update(group).ok();
  };
  // One client per writer, each with the routes of its group cached (a client that has just
  // written its files knows their routes); the shared mode uses the first, which learns every
  // group's routes.
  std::vector<std::unique_ptr<Client>> own;
  for (int t = 0; t < max_writers; ++t) {
    auto cl = Client::Connect(cluster.client_options(60'000));
    if (!cl.ok() || !learn_group(**cl, t)) return false;
    own.push_back(std::move(*cl));
  }
  for (int t = 1; t < max_writers; ++t) {
    if (!learn_group(*own[0], t)) return false;
  }
  std::vector<Client*> own_clients;
  for (auto& cl : own) own_clients.push_back(cl.get());
  const std::vector<Client*> one_client = {own[0].get()};
  uint64_t version = 1;
  for (int w : c.writers) {
    std::vector<double> own_s, shared_s, own_us, shared_us;
    double calls_per_update = 0;
    for (int r = 0; r < c.rounds; ++r) {
      for (int mode = 0; mode < 2; ++mode) {
        const bool is_shared = (mode + r) % 2 == 1;  // alternate which mode goes first
        const std::vector<Client*>& clients = is_shared ? one_client : own_clients;
        const ClientUpdateStats before = clients[0]->update_stats();
        WriterRun run;
        const bool ok = TimeWriters(clients, ds, w, c.writer_updates, &version, &run);
        const ClientUpdateStats after = clients[0]->update_stats();
        if (!ok) return false;
        (is_shared ? shared_s : own_s).push_back(run.seconds);
        auto& pool = is_shared ? shared_us : own_us;
        pool.insert(pool.end(), run.us.begin(), run.us.end());
        if (is_shared) {
          calls_per_update += static_cast<double>(after.apply_calls - before.apply_calls) /
                              (static_cast<double>(w) * c.writer_updates) / c.rounds;
        }
        std::fprintf(stderr, "writers %d, %s client%s: %.3f s\n", w, is_shared ? "one" : "own",
                     is_shared ? "" : "s", run.seconds);
      }
    }
    const double n = static_cast<double>(w) * c.writer_updates;
    const std::string own_sys = "cluster, 1 node, " + std::to_string(w) + " writer(s), own clients";
    const std::string sh_sys = "cluster, 1 node, " + std::to_string(w) + " writer(s), one client";
    rows->push_back({own_sys, "total s, median of rounds", Median(own_s)});
    rows->push_back({own_sys, "updates/s at the median", n / Median(own_s)});
    rows->push_back({own_sys, "update us, median", Median(own_us)});
    rows->push_back({own_sys, "update us, p99", P99(own_us)});
    rows->push_back({sh_sys, "total s, median of rounds", Median(shared_s)});
    rows->push_back({sh_sys, "updates/s at the median", n / Median(shared_s)});
    rows->push_back({sh_sys, "update us, median", Median(shared_us)});
    rows->push_back({sh_sys, "update us, p99", P99(shared_us)});
    rows->push_back({sh_sys, "Apply requests per update", calls_per_update});
    rows->push_back({sh_sys, "speed-up over own clients (median total s)",
                     Median(own_s) / Median(shared_s)});
  }
  return true;
}

bool RunCluster(const Config& c, const Dataset& ds, int nodes, std::vector<Row>* rows) {
  testing::ClusterConfig cc;
  cc.nodes = nodes;
  cc.acg_threshold = ds.options().files_per_acg;
  testing::LocalCluster cluster(cc);
  if (!cluster.Start()) return false;
  auto client_or = Client::Connect(cluster.client_options(60'000));
  if (!client_or.ok()) return false;
  Client& client = **client_or;
  if (!cluster.WaitNodesUp(client, static_cast<size_t>(nodes))) {
    std::fprintf(stderr, "%s", cluster.Logs().c_str());
    return false;
  }
  auto volume = client.RegisterVolume("/");
  if (!volume.ok() || *volume != ds.options().volume) {
    std::fprintf(stderr, "volume: %s\n", volume.status().ToString().c_str());
    return false;
  }
  const auto t0 = Clock::now();
  if (!Load(client, ds, c.files, c.load_threads)) return false;
  const double load_s = Micros(Clock::now() - t0) / 1e6;
  const std::string sys = "cluster, " + std::to_string(nodes) + " node" + (nodes > 1 ? "s" : "");
  rows->push_back({sys, "load files/s", c.files / load_s});
  for (const char* q : kQueries) {
    ClientSearchOptions o;
    o.now_ns = ds.options().now_ns;
    uint64_t hits = 0;
    double ms = TimeSearch([&] {
      auto r = client.SearchAll(q, o);
      if (!r.ok()) std::fprintf(stderr, "search: %s\n", r.status().ToString().c_str());
      return r.ok() ? r->size() : 0;
    }, c.search_runs, &hits);
    rows->push_back({sys, std::string("search ms: ") + q, ms});
    rows->push_back({sys, std::string("hits: ") + q, static_cast<double>(hits)});
  }
  // Warm the routing cache for the sample (a client that has just written a file knows its
  // route), then time single-file updates: client -> index node -> WAL -> ack.
  const std::vector<uint64_t> sample = UpdateSample(c);
  uint64_t version = 1;
  for (uint64_t i : sample) {
    FileUpdate u;
    u.record = ds.Record(i);
    if (!client.Update(std::span<const FileUpdate>(&u, 1)).ok()) return false;
  }
  std::vector<double> us;
  for (uint64_t i : sample) {
    FileUpdate u;
    u.record = ds.Record(i);
    ds.Touch(version++, &u.record);
    const auto t = Clock::now();
    if (!client.Update(std::span<const FileUpdate>(&u, 1)).ok()) return false;
    us.push_back(Micros(Clock::now() - t));
  }
  rows->push_back({sys, "update median us", Median(us)});
  rows->push_back({sys, "update p99 us", P99(us)});
  return true;
}

}  // namespace
}  // namespace propeller::bench

int main(int argc, char** argv) {
  using namespace propeller::bench;
  Config c;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* flag) -> const char* {
      const size_t n = std::strlen(flag);
      return a.compare(0, n, flag) == 0 ? a.c_str() + n : nullptr;
    };
    if (const char* v = value("--files=")) {
      c.files = ParseCount(v);
    } else if (const char* v = value("--nodes=")) {
      c.nodes = ParseList(v);
    } else if (const char* v = value("--runs=")) {
      c.search_runs = std::atoi(v);
    } else if (const char* v = value("--out=")) {
      c.out = v;
    } else if (a == "--skip-engine") {
      c.engine = false;
    } else if (const char* v = value("--move=")) {
      c.move_files = ParseCount(v);
    } else if (const char* v = value("--moves=")) {
      c.moves = std::atoi(v);
    } else if (const char* v = value("--writers=")) {
      c.writers = ParseList(v);
    } else if (const char* v = value("--updates=")) {
      c.writer_updates = std::atoi(v);
    } else if (const char* v = value("--rounds=")) {
      c.rounds = std::atoi(v);
    } else {
      std::fprintf(stderr,
                   "usage: cluster_bench [--files=N[k|m]] [--nodes=1,3] [--runs=21] "
                   "[--skip-engine] [--out=FILE.json]\n"
                   "       cluster_bench --move=N[k|m] [--moves=7] [--out=FILE.json]\n"
                   "         (only the migration phase: one ACG of N files moves back and\n"
                   "         forth between two nodes under updates)\n"
                   "       cluster_bench --writers=1,4,16 [--updates=10000] [--rounds=3] "
                   "[--out=FILE.json]\n"
                   "         (only the writer phase: W writers x U updates, a client each\n"
                   "         against one shared client, on one node)\n");
      return 2;
    }
  }
  if (c.move_files > 0 && c.moves < 1) {
    std::fprintf(stderr, "cluster_bench: --moves must be at least 1\n");
    return 2;
  }
  for (int w : c.writers) {
    if (w < 1 || w > 256) {
      std::fprintf(stderr, "cluster_bench: --writers takes counts from 1 to 256\n");
      return 2;
    }
  }
  if (!c.writers.empty() && (c.writer_updates < 1 || c.rounds < 1)) {
    std::fprintf(stderr, "cluster_bench: --updates and --rounds must be at least 1\n");
    return 2;
  }
  // Many LMDB environments and sockets per process.
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  DatasetOptions dso;
  Dataset ds(dso);
  std::vector<Row> rows;
  if (!c.writers.empty()) {
    std::fprintf(stderr, "cluster_bench: writer phase\n");
    if (!RunWriters(c, ds, &rows)) return 1;
    c.files = static_cast<uint64_t>(*std::max_element(c.writers.begin(), c.writers.end())) * 1000;
  } else if (c.move_files > 0) {
    std::fprintf(stderr, "cluster_bench: migration phase, one ACG of %" PRIu64 " files\n",
                 c.move_files);
    if (!RunMove(c, &rows)) return 1;
    c.files = c.move_files;
  } else {
    std::fprintf(stderr, "cluster_bench: %" PRIu64 " files; engine phase\n", c.files);
    if (c.engine && !RunEngine(c, ds, &rows)) return 1;
    for (int n : c.nodes) {
      std::fprintf(stderr, "cluster_bench: cluster phase, %d node(s)\n", n);
      if (!RunCluster(c, ds, n, &rows)) return 1;
    }
  }
  std::printf("| system | metric | value |\n|---|---|---|\n");
  for (const Row& r : rows) {
    std::printf("| %s | %s | %.3f |\n", r.system.c_str(), r.metric.c_str(), r.value);
  }
  if (!c.out.empty()) {
    FILE* f = std::fopen(c.out.c_str(), "w");
    if (f == nullptr) return 1;
    std::fprintf(f, "{\"files\": %" PRIu64 ", \"rows\": [\n", c.files);
    for (size_t i = 0; i < rows.size(); ++i) {
      std::fprintf(f, "  {\"system\": \"%s\", \"metric\": \"%s\", \"value\": %.6g}%s\n",
                   rows[i].system.c_str(), rows[i].metric.c_str(), rows[i].value,
                   i + 1 < rows.size() ? "," : "");
    }
    std::fprintf(f, "]}\n");
    std::fclose(f);
  }
  return 0;
}
