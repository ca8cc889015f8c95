// propeller_eval: the C++ driver of the evaluation harness (issue 6; bench/eval/README.md).
// One process loads one system with one data set and runs experiments on it, with the same
// client code for every system (eval_system.h), and writes one JSON document.
//
//   propeller_eval run --system=mariadb --files=1m --experiments=2,3,1 --out=x.json
//       --work=/var/tmp/e [--writers=1,2,4,8,16] [--updates=10000] [--runs=11]
//       [--servers-sh=bench/eval/servers.sh --mariadb-socket=... --pg-dir=... --pg-port=...]
//   propeller_eval mktree --files=487k --root=/var/tmp/e/tree --out=truth.json
//
// Experiments (numbers as in the issue; the paper's figure in brackets), run in the order
// 2, 4, 3, 1 whatever the order of --experiments (read-only ones on the pristine data first):
//   2  global search [Table III]: size>1g & mtime<1d, keyword=firefox & mtime<1w; median of
//      --runs after one warm-up; hits checked against the generator's brute-force count.
//   3  mixed [Fig. 10]: --updates updates to one group, one size>1g & mtime<1d search per 1,024
//      updates (each checked against a model of the group); average re-indexing latency =
//      wall time of the whole run / updates (searches included: Propeller commits its cached
//      updates when a search touches them, so excluding searches would hide deferred work).
//   1  indexing [Fig. 8]: for each W in --writers, W threads with their own connection each
//      issue --updates acknowledged updates within their own group: total time, µs/update.
//   4  static namespace [Table V]: size>16m and path~firefox, warm (median of --runs) and cold
//      (server restarted and page cache dropped before one run), real/user/sys of the driver.
// Exit status: 0 ok, 1 a system error, 2 usage, 3 a wrong hit count (recall/correctness).
#include <malloc.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/dataset.h"
#include "bench/eval/eval_system.h"

namespace propeller::eval {
namespace {

using Clock = std::chrono::steady_clock;

constexpr QueryKind kAllQueries[] = {QueryKind::kBigRecent, QueryKind::kFirefoxWeek,
                                     QueryKind::kOver16M, QueryKind::kPathFirefox};
constexpr uint64_t kSearchEvery = 1024;       // exp 3: one search per 1,024 updates
constexpr uint64_t kMixedVersionBase = 1u << 30;  // Touch versions: exp 3, then exp 1 per writer
constexpr uint64_t kIndexVersionBase = 1u << 31;

struct Options {
  std::string command;
  std::string system;
  uint64_t files = 100'000;
  uint64_t files_per_acg = 1000;
  uint64_t seed = 42;
  std::vector<int> experiments = {2, 3, 1};
  std::vector<int> writers = {1, 2, 4, 8, 16};
  uint64_t updates = 10'000;
  int runs = 11;
  std::string out;
  std::string work = "/var/tmp/propeller-eval/work";
  std::string root;  // mktree
  bool keep = false;   // leave the loaded data in the work directory
  bool reuse = false;  // measure what a --keep=yes run left instead of loading
  // The queries experiments 2 and 4 run (--queries; all four by default).
  std::vector<QueryKind> queries{std::begin(kAllQueries), std::end(kAllQueries)};
  bool Runs(QueryKind k) const {
    return std::find(queries.begin(), queries.end(), k) != queries.end();
  }
  SystemConfig sys;
};

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Bytes allocated on disk under `dir` (st_blocks, files of every depth): the system's data as
// stored, holes and all. For the systems that keep their data under the work directory
// (sqlite, propeller-engine, propeller-cluster); a server's data directory is elsewhere.
uint64_t DiskBytes(const std::string& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    struct stat st;
    if (::lstat(it->path().c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      total += static_cast<uint64_t>(st.st_blocks) * 512;
    }
  }
  return total;
}

// A "VmRSS:", "VmHWM:", "RssAnon:" or "RssFile:" line of /proc/self/status, in bytes; 0 when
// absent. For the in-process systems (propeller-engine, sqlite) that is the system's memory
// with the driver's.
uint64_t ProcStatusBytes(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const size_t n = std::strlen(field);
  while (std::getline(in, line)) {
    if (line.compare(0, n, field) == 0) return std::strtoull(line.c_str() + n, nullptr, 10) * 1024;
  }
  return 0;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}
double Mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

uint64_t ParseCount(const std::string& s) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  const std::string unit = end;
  if (unit == "k") v *= 1e3;
  if (unit == "m") v *= 1e6;
  return static_cast<uint64_t>(v);
}

std::vector<int> ParseList(const std::string& s) {
  std::vector<int> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(std::atoi(item.c_str()));
  }
  return out;
}

std::string Num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

[[noreturn]] void Die(const std::string& what, const Status& st, int code = 1) {
  std::fprintf(stderr, "propeller_eval: %s: %s\n", what.c_str(), st.ToString().c_str());
  std::exit(code);
}

template <typename T>
T Check(Result<T> r, const std::string& what) {
  if (!r.ok()) Die(what, r.status());
  return std::move(*r);
}

void CheckOk(const Status& st, const std::string& what) {
  if (!st.ok()) Die(what, st);
}

// Brute-force hit counts of every query over files [0, n): the ground truth.
std::map<QueryKind, uint64_t> Truth(const bench::Dataset& ds, uint64_t n) {
  std::map<QueryKind, uint64_t> out;
  for (QueryKind k : kAllQueries) out[k] = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const FileRecord r = ds.Record(i);
    for (QueryKind k : kAllQueries) out[k] += Matches(k, r, ds.options().now_ns) ? 1 : 0;
  }
  return out;
}

void CheckHits(const std::string& system, QueryKind k, uint64_t got, uint64_t want) {
  if (got != want) {
    std::fprintf(stderr,
                 "propeller_eval: WRONG RESULT: %s answered %" PRIu64 " hits for '%s', the "
                 "brute-force count is %" PRIu64 "\n",
                 system.c_str(), got, QueryText(k), want);
    std::exit(3);
  }
}

struct CpuTimes {
  double user = 0, sys = 0;
};
CpuTimes Cpu() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return {static_cast<double>(u.ru_utime.tv_sec) + u.ru_utime.tv_usec / 1e6,
          static_cast<double>(u.ru_stime.tv_sec) + u.ru_stime.tv_usec / 1e6};
}

// sync + drop the page cache (needs root); false when not possible.
bool DropCaches() {
  ::sync();
  const int fd = ::open("/proc/sys/vm/drop_caches", O_WRONLY);
  if (fd < 0) return false;
  const bool ok = ::write(fd, "3", 1) == 1;
  ::close(fd);
  return ok;
}

// ---- experiment 2 ---------------------------------------------------------------------------
std::string GlobalSearch(const Options& o, System& sys, Session& s,
                         const std::map<QueryKind, uint64_t>& truth) {
  std::string json = "[";
  for (QueryKind k : {QueryKind::kBigRecent, QueryKind::kFirefoxWeek}) {
    if (!o.Runs(k)) continue;
    CheckHits(sys.Name(), k, Check(s.Search(k), "search"), truth.at(k));  // warm-up
    std::vector<double> ms;
    for (int r = 0; r < o.runs; ++r) {
      const auto t0 = Clock::now();
      const uint64_t hits = Check(s.Search(k), "search");
      ms.push_back(Seconds(Clock::now() - t0) * 1e3);
      CheckHits(sys.Name(), k, hits, truth.at(k));
    }
    std::printf("| %s | %" PRIu64 " | %s | %.3f | %.3f | %" PRIu64 " |\n", sys.Name().c_str(),
                o.files, QueryText(k), Percentile(ms, 0.5), Percentile(ms, 0.9), truth.at(k));
    if (json.size() > 1) json += ",";
    json += "{\"query\":" + Quote(QueryText(k)) + ",\"median_ms\":" + Num(Percentile(ms, 0.5)) +
            ",\"p90_ms\":" + Num(Percentile(ms, 0.9)) + ",\"min_ms\":" +
            Num(*std::min_element(ms.begin(), ms.end())) + ",\"hits\":" +
            std::to_string(truth.at(k)) + ",\"expected\":" + std::to_string(truth.at(k)) +
            ",\"runs\":" + std::to_string(o.runs) + "}";
  }
  return json + "]";
}

// ---- experiment 3 ---------------------------------------------------------------------------
std::string Mixed(const Options& o, const bench::Dataset& ds, System& sys, Session& s,
                  const std::map<QueryKind, uint64_t>& truth) {
  const uint64_t groups = std::max<uint64_t>(1, o.files / o.files_per_acg);
  const uint64_t group = groups / 2;
  const uint64_t begin = group * o.files_per_acg;
  const uint64_t end = std::min(o.files, begin + o.files_per_acg);
  const int64_t now = ds.options().now_ns;
  std::vector<FileRecord> model;
  uint64_t base_in_group = 0;
  for (uint64_t i = begin; i < end; ++i) {
    model.push_back(ds.Record(i));
    base_in_group += Matches(QueryKind::kBigRecent, model.back(), now) ? 1 : 0;
  }
  const uint64_t outside = truth.at(QueryKind::kBigRecent) - base_in_group;
  auto expected = [&] {
    uint64_t n = outside;
    for (const FileRecord& r : model) n += Matches(QueryKind::kBigRecent, r, now) ? 1 : 0;
    return n;
  };
  uint64_t version = kMixedVersionBase;
  // Warm-up pass (untimed): every file of the group once, so routing caches and connections
  // are warm for every system alike.
  for (FileRecord& r : model) {
    ds.Touch(version++, &r);
    CheckOk(s.Update(r), "update");
  }
  CheckHits(sys.Name(), QueryKind::kBigRecent, Check(s.Search(QueryKind::kBigRecent), "search"),
            expected());
  std::vector<double> update_us, search_ms;
  const auto t0 = Clock::now();
  for (uint64_t u = 0; u < o.updates; ++u) {
    FileRecord& r = model[u % model.size()];
    ds.Touch(version++, &r);
    const auto a = Clock::now();
    CheckOk(s.Update(r), "update");
    update_us.push_back(Seconds(Clock::now() - a) * 1e6);
    if ((u + 1) % kSearchEvery == 0) {
      const auto b = Clock::now();
      const uint64_t hits = Check(s.Search(QueryKind::kBigRecent), "search");
      search_ms.push_back(Seconds(Clock::now() - b) * 1e3);
      CheckHits(sys.Name(), QueryKind::kBigRecent, hits, expected());
    }
  }
  const double total = Seconds(Clock::now() - t0);
  const double reindex_us = total * 1e6 / static_cast<double>(o.updates);
  std::printf("| %s | %" PRIu64 " | %" PRIu64 " | %zu | %.2f | %.2f | %.3f | %.2f |\n",
              sys.Name().c_str(), o.files, o.updates, search_ms.size(), Mean(update_us),
              Percentile(update_us, 0.99), Mean(search_ms), reindex_us);
  return "{\"group\":" + std::to_string(group) + ",\"updates\":" + std::to_string(o.updates) +
         ",\"searches\":" + std::to_string(search_ms.size()) + ",\"search_query\":" +
         Quote(QueryText(QueryKind::kBigRecent)) + ",\"total_s\":" + Num(total) +
         ",\"update_mean_us\":" + Num(Mean(update_us)) + ",\"update_p50_us\":" +
         Num(Percentile(update_us, 0.5)) + ",\"update_p99_us\":" +
         Num(Percentile(update_us, 0.99)) + ",\"search_mean_ms\":" + Num(Mean(search_ms)) +
         ",\"reindex_latency_us\":" + Num(reindex_us) + "}";
}

// ---- experiment 1 ---------------------------------------------------------------------------
std::string Indexing(const Options& o, const bench::Dataset& ds, System& sys) {
  const uint64_t groups = std::max<uint64_t>(1, o.files / o.files_per_acg);
  std::string json = "[";
  uint64_t version_base = kIndexVersionBase;
  for (int w : o.writers) {
    std::vector<std::unique_ptr<Session>> sessions;
    for (int i = 0; i < w; ++i) sessions.push_back(Check(sys.Connect(), "connect"));
    std::vector<std::vector<double>> lat(static_cast<size_t>(w));
    std::atomic<bool> failed{false};
    // Start line: every writer finished its warm-up pass before the clock starts.
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    for (int i = 0; i < w; ++i) {
      threads.emplace_back([&, i] {
        // Writer i's own group, spread over the data set (never the mixed experiment's).
        const uint64_t group = (static_cast<uint64_t>(i) * 2 + 1) * groups / 33 % groups;
        const uint64_t begin = group * o.files_per_acg;
        const uint64_t n = std::min(o.files, begin + o.files_per_acg) - begin;
        uint64_t version = version_base + static_cast<uint64_t>(i) * (1u << 24);
        auto one = [&](uint64_t k) {
          FileRecord r = ds.Record(begin + k % n);
          ds.Touch(version++, &r);
          return r;
        };
        for (uint64_t k = 0; k < n && !failed; ++k) {  // warm-up pass, untimed
          if (!sessions[static_cast<size_t>(i)]->Update(one(k)).ok()) failed = true;
        }
        ready.fetch_add(1);
        while (!go.load()) std::this_thread::sleep_for(std::chrono::microseconds(50));
        std::vector<double>& mine = lat[static_cast<size_t>(i)];
        mine.reserve(o.updates);
        for (uint64_t k = 0; k < o.updates && !failed; ++k) {
          FileRecord r = one(k);
          const auto a = Clock::now();
          Status st = sessions[static_cast<size_t>(i)]->Update(r);
          mine.push_back(Seconds(Clock::now() - a) * 1e6);
          if (!st.ok()) {
            std::fprintf(stderr, "update: %s\n", st.ToString().c_str());
            failed = true;
          }
        }
      });
    }
    while (ready.load() < w) std::this_thread::sleep_for(std::chrono::microseconds(100));
    const auto t0 = Clock::now();
    go = true;
    for (std::thread& t : threads) t.join();  // the clock stops when the last writer is done
    const double total = Seconds(Clock::now() - t0);
    if (failed) Die("indexing", Status::IOError("an update failed"));
    std::vector<double> all;
    for (auto& v : lat) all.insert(all.end(), v.begin(), v.end());
    const double n = static_cast<double>(o.updates) * w;
    std::printf("| %s | %" PRIu64 " | %d | %" PRIu64 " | %.3f | %.2f | %.2f | %.2f |\n",
                sys.Name().c_str(), o.files, w, o.updates, total, total * 1e6 / n, Mean(all),
                Percentile(all, 0.99));
    if (json.size() > 1) json += ",";
    json += "{\"writers\":" + std::to_string(w) + ",\"updates_per_writer\":" +
            std::to_string(o.updates) + ",\"total_s\":" + Num(total) +
            ",\"us_per_update\":" + Num(total * 1e6 / n) + ",\"updates_per_s\":" +
            Num(n / total) + ",\"latency_mean_us\":" + Num(Mean(all)) + ",\"latency_p50_us\":" +
            Num(Percentile(all, 0.5)) + ",\"latency_p99_us\":" + Num(Percentile(all, 0.99)) +
            "}";
    version_base += 1ull << 28;
  }
  return json + "]";
}

// ---- experiment 4 ---------------------------------------------------------------------------
std::string StaticNamespace(const Options& o, System& sys, std::unique_ptr<Session>& s,
                            const std::map<QueryKind, uint64_t>& truth) {
  std::string json = "[";
  for (QueryKind k : {QueryKind::kOver16M, QueryKind::kPathFirefox}) {
    if (!o.Runs(k)) continue;
    // Warm.
    CheckHits(sys.Name(), k, Check(s->Search(k), "search"), truth.at(k));
    std::vector<double> real, user, system;
    for (int r = 0; r < o.runs; ++r) {
      const CpuTimes c0 = Cpu();
      const auto t0 = Clock::now();
      const uint64_t hits = Check(s->Search(k), "search");
      real.push_back(Seconds(Clock::now() - t0));
      const CpuTimes c1 = Cpu();
      user.push_back(c1.user - c0.user);
      system.push_back(c1.sys - c0.sys);
      CheckHits(sys.Name(), k, hits, truth.at(k));
    }
    // Cold: close the connection, stop the server, drop caches, start it, connect, one run.
    s.reset();
    bool dropped = false;
    Clock::time_point started;  // the caches dropped: the system starts from here
    CheckOk(sys.Restart([&] {
              dropped = DropCaches();
              started = Clock::now();
            }),
            "restart");
    s = Check(sys.Connect(), "connect");
    const double start_s = Seconds(Clock::now() - started);  // start to ready for a query
    const CpuTimes c0 = Cpu();
    const auto t0 = Clock::now();
    const uint64_t hits = Check(s->Search(k), "search");
    const double cold_real = Seconds(Clock::now() - t0);
    const CpuTimes c1 = Cpu();
    CheckHits(sys.Name(), k, hits, truth.at(k));
    std::printf("| %s | %" PRIu64 " | %s | %.4f | %.4f | %.4f | %.4f | %.4f | %.4f | %" PRIu64
                " | 100%% |\n",
                sys.Name().c_str(), o.files, QueryText(k), cold_real, c1.user - c0.user,
                c1.sys - c0.sys, Percentile(real, 0.5), Percentile(user, 0.5),
                Percentile(system, 0.5), hits);
    if (json.size() > 1) json += ",";
    json += "{\"query\":" + Quote(QueryText(k)) + ",\"hits\":" + std::to_string(hits) +
            ",\"expected\":" + std::to_string(truth.at(k)) + ",\"recall\":1" +
            ",\"cold\":{\"start_s\":" + Num(start_s) + ",\"real_s\":" + Num(cold_real) +
            ",\"user_s\":" + Num(c1.user - c0.user) +
            ",\"sys_s\":" + Num(c1.sys - c0.sys) + ",\"caches_dropped\":" +
            (dropped ? "true" : "false") + "},\"warm\":{\"real_s\":" +
            Num(Percentile(real, 0.5)) + ",\"user_s\":" + Num(Percentile(user, 0.5)) +
            ",\"sys_s\":" + Num(Percentile(system, 0.5)) + ",\"runs\":" +
            std::to_string(o.runs) + "}}";
  }
  return json + "]";
}

int Run(const Options& o) {
  bench::DatasetOptions dso;
  dso.seed = o.seed;
  dso.files_per_acg = o.files_per_acg;
  const bench::Dataset ds(dso);
  SystemConfig config = o.sys;
  config.now_ns = ds.options().now_ns;
  config.work_dir = o.work + "/" + o.system;
  if (!o.reuse) {
    std::filesystem::remove_all(config.work_dir);
    std::filesystem::create_directories(config.work_dir);
  }
  auto sys = Check(MakeSystem(o.system, config), "system");
  const auto truth = Truth(ds, o.files);
  const auto t0 = Clock::now();
  if (o.reuse) {
    CheckOk(sys->Attach(ds), "attach to the kept run");
  } else {
    std::fprintf(stderr, "[%s] loading %" PRIu64 " files\n", o.system.c_str(), o.files);
    CheckOk(sys->Load(ds, o.files), "load");
  }
  const double load_s = o.reuse ? 0 : Seconds(Clock::now() - t0);
  std::fprintf(stderr, "[%s] %s in %.1f s\n", o.system.c_str(), o.reuse ? "attached" : "loaded",
               Seconds(Clock::now() - t0));
  std::unique_ptr<Session> session = Check(sys->Connect(), "connect");
  const uint64_t disk = DiskBytes(config.work_dir);
  std::fprintf(stderr, "[%s] %" PRIu64 " bytes on disk under %s (%.1f per file)\n",
               o.system.c_str(), disk, config.work_dir.c_str(),
               static_cast<double>(disk) / static_cast<double>(std::max<uint64_t>(o.files, 1)));
  std::string json = "{\"system\":" + Quote(sys->Name()) + ",\"files\":" +
                     std::to_string(o.files) + ",\"files_per_acg\":" +
                     std::to_string(o.files_per_acg) + ",\"seed\":" + std::to_string(o.seed) +
                     ",\"load_s\":" + Num(load_s) + ",\"compacted\":" +
                     (config.compact_after_load ? "true" : "false") +
                     ",\"disk_bytes\":" + std::to_string(disk) +
                     ",\"truth\":{";
  bool first = true;
  for (QueryKind k : kAllQueries) {
    json += std::string(first ? "" : ",") + Quote(QueryText(k)) + ":" +
            std::to_string(truth.at(k));
    first = false;
  }
  json += "}";
  // Read-only experiments first, then the ones that change files: experiment 3 checks every
  // search against a model in which only its own group changed, and nothing after experiment 1
  // could check its hits against the pristine data set.
  std::vector<int> order = o.experiments;
  auto rank = [](int e) { return e == 2 ? 0 : e == 4 ? 1 : e == 3 ? 2 : 3; };
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return rank(a) < rank(b); });
  for (int e : order) {
    std::fprintf(stderr, "[%s] experiment %d\n", o.system.c_str(), e);
    if (e == 2) json += ",\"exp2\":" + GlobalSearch(o, *sys, *session, truth);
    if (e == 3) json += ",\"exp3\":" + Mixed(o, ds, *sys, *session, truth);
    if (e == 1) json += ",\"exp1\":" + Indexing(o, ds, *sys);
    if (e == 4) json += ",\"exp4\":" + StaticNamespace(o, *sys, session, truth);
    std::fflush(stdout);
  }
  // After the experiments: what the process holds with the index warm — in all, then the
  // heap and in-memory indexes (RssAnon) apart from the data files' pages mapped in (RssFile:
  // page cache the kernel can take back), and the heap once freed memory went back to the
  // kernel (malloc_trim, as a long-running daemon's would).
  json += ",\"rss_bytes\":" + std::to_string(ProcStatusBytes("VmRSS:")) +
          ",\"peak_rss_bytes\":" + std::to_string(ProcStatusBytes("VmHWM:")) +
          ",\"rss_anon_bytes\":" + std::to_string(ProcStatusBytes("RssAnon:")) +
          ",\"rss_file_bytes\":" + std::to_string(ProcStatusBytes("RssFile:"));
  malloc_trim(0);
  json += ",\"rss_anon_trimmed_bytes\":" + std::to_string(ProcStatusBytes("RssAnon:"));
  json += "}\n";
  session.reset();
  if (!o.keep) {
    // A server's tables would otherwise stay in its data directory (10 M files: ~14 GB in
    // PostgreSQL's, ~9 GB in MariaDB's).
    if (Status st = sys->Drop(); !st.ok()) {
      std::fprintf(stderr, "[%s] dropping its data: %s\n", sys->Name().c_str(),
                   st.ToString().c_str());
    }
  }
  sys.reset();
  if (!o.keep) std::filesystem::remove_all(config.work_dir);
  if (!o.out.empty()) {
    std::ofstream(o.out) << json;
  } else {
    std::fputs(json.c_str(), stdout);
  }
  return 0;
}

// Creates the data set as a real directory tree under `root`: every file sparse (ftruncate to
// its size: no data blocks), with its mtime and atime. Writes the ground truth as JSON.
int MakeTree(const Options& o) {
  bench::DatasetOptions dso;
  dso.seed = o.seed;
  dso.files_per_acg = o.files_per_acg;
  const bench::Dataset ds(dso);
  std::string last_dir;
  for (uint64_t i = 0; i < o.files; ++i) {
    const FileRecord r = ds.Record(i);
    const std::string path = o.root + r.paths[0];
    const std::string dir(PathParent(path));
    if (dir != last_dir) {
      std::error_code ec;
      std::filesystem::create_directories(dir, ec);
      if (ec) Die("mkdir " + dir, Status::IOError(ec.message()));
      last_dir = dir;
    }
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || ::ftruncate(fd, static_cast<off_t>(r.size)) != 0) {
      Die("create " + path, Status::IOError(std::strerror(errno)));
    }
    timespec times[2];
    times[0].tv_sec = r.atime / 1'000'000'000;
    times[0].tv_nsec = r.atime % 1'000'000'000;
    times[1].tv_sec = r.mtime / 1'000'000'000;
    times[1].tv_nsec = r.mtime % 1'000'000'000;
    ::futimens(fd, times);
    ::close(fd);
  }
  const auto truth = Truth(ds, o.files);
  std::string json = "{\"files\":" + std::to_string(o.files) + ",\"truth\":{";
  bool first = true;
  for (QueryKind k : kAllQueries) {
    json += std::string(first ? "" : ",") + Quote(QueryText(k)) + ":" +
            std::to_string(truth.at(k));
    first = false;
  }
  json += "}}\n";
  if (!o.out.empty()) {
    std::ofstream(o.out) << json;
  } else {
    std::fputs(json.c_str(), stdout);
  }
  return 0;
}

// "size1g,keyword,size16m,path" (any of them, any order) into *out; false on a bad name.
bool ParseQueries(const std::string& list, std::vector<QueryKind>* out) {
  static const std::pair<const char*, QueryKind> kNames[] = {
      {"size1g", QueryKind::kBigRecent}, {"keyword", QueryKind::kFirefoxWeek},
      {"size16m", QueryKind::kOver16M}, {"path", QueryKind::kPathFirefox}};
  out->clear();
  std::stringstream in(list);
  for (std::string name; std::getline(in, name, ',');) {
    auto it = std::find_if(std::begin(kNames), std::end(kNames),
                           [&](const auto& n) { return name == n.first; });
    if (it == std::end(kNames)) return false;
    out->push_back(it->second);
  }
  return !out->empty();
}

int Usage() {
  std::fprintf(stderr,
               "usage: propeller_eval run --system=S --files=N [--experiments=2,3,1] "
               "[--writers=1,2,4,8,16] [--updates=10000] [--runs=11] [--out=F] [--work=DIR]\n"
               "                      [--servers-sh=F --mariadb-socket=F --pg-dir=D "
               "--pg-port=P] [--seed=42] [--files-per-acg=1000]\n"
               "                      [--cluster-transport=ipc|tcp] [--compact=yes|no]\n"
               "                      [--keep=yes] (leave the data in --work)\n"
               "                      [--queries=size1g,keyword,size16m,path] (the queries of "
               "experiments 2 and 4; path~firefox scans every record: ~150 s a run at 100 M)\n"
               "                      [--reuse=yes] (measure what --keep=yes left, same "
               "--files/--seed; experiments 2 and 4 only)\n"
               "       propeller_eval mktree --files=N --root=DIR [--out=F]\n"
               "systems: propeller-cluster propeller-engine mariadb postgres sqlite\n");
  return 2;
}

}  // namespace
}  // namespace propeller::eval

int main(int argc, char** argv) {
  using namespace propeller::eval;
  if (argc < 2) return Usage();
  Options o;
  o.command = argv[1];
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    const size_t eq = a.find('=');
    if (a.rfind("--", 0) != 0 || eq == std::string::npos) return Usage();
    const std::string k = a.substr(2, eq - 2), v = a.substr(eq + 1);
    if (k == "system") o.system = v;
    else if (k == "files") o.files = ParseCount(v);
    else if (k == "files-per-acg") o.files_per_acg = ParseCount(v);
    else if (k == "seed") o.seed = ParseCount(v);
    else if (k == "experiments") o.experiments = ParseList(v);
    else if (k == "writers") o.writers = ParseList(v);
    else if (k == "updates") o.updates = ParseCount(v);
    else if (k == "runs") o.runs = std::atoi(v.c_str());
    else if (k == "out") o.out = v;
    else if (k == "work") o.work = v;
    else if (k == "root") o.root = v;
    else if (k == "servers-sh") o.sys.servers_sh = v;
    else if (k == "mariadb-socket") o.sys.mariadb_socket = v;
    else if (k == "pg-dir") o.sys.postgres_socket_dir = v;
    else if (k == "pg-port") o.sys.postgres_port = std::atoi(v.c_str());
    else if (k == "cluster-transport" && (v == "tcp" || v == "ipc"))
      o.sys.cluster_ipc = v == "ipc";
    else if (k == "keep" && (v == "yes" || v == "no")) o.keep = v == "yes";
    else if (k == "reuse" && (v == "yes" || v == "no")) o.reuse = v == "yes";
    else if (k == "queries" && ParseQueries(v, &o.queries)) {}
    else if (k == "compact" && (v == "yes" || v == "no"))
      o.sys.compact_after_load = v == "yes";
    else return Usage();
  }
  if (o.files == 0 || o.files_per_acg == 0 || o.runs < 1) return Usage();
  if (o.reuse && std::any_of(o.experiments.begin(), o.experiments.end(),
                             [](int e) { return e != 2 && e != 4; })) {
    // Experiments 1 and 3 change the files: a kept run would no longer be the data set.
    std::fprintf(stderr, "--reuse=yes runs only the read-only experiments 2 and 4\n");
    return 2;
  }
  if (o.command == "run" && !o.system.empty()) return Run(o);
  if (o.command == "mktree" && !o.root.empty()) return MakeTree(o);
  return Usage();
}
