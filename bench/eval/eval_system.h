// The systems the evaluation harness (issue 6) compares, behind one interface, so every
// experiment drives Propeller and its baselines with the same client-side code.
//
// A System owns one loaded copy of a data set (bench::Dataset). Sessions are its client
// connections: each writer thread of an experiment opens its own (a database connection with
// its prepared statements, or a Propeller Client), exactly as separate application processes
// would. Restart() stops and starts the server processes on the same data (the cold runs of
// experiment 4), after the caller dropped the page cache.
//
// Implementations: Propeller through a real cluster (propeller-master + one
// propeller-indexnode, client library over ZeroMQ), Propeller's in-process Engine, MariaDB and
// PostgreSQL (servers started by bench/eval/servers.sh, reached over their unix sockets) and
// SQLite (in the driver's process).
//
// Threading: a System is driven by one thread; each Session by one thread at a time.
#ifndef PROPELLER_BENCH_EVAL_EVAL_SYSTEM_H_
#define PROPELLER_BENCH_EVAL_EVAL_SYSTEM_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "bench/dataset.h"
#include "common/record.h"
#include "common/status.h"

namespace propeller::eval {

// The searches of the experiments. Each has the Propeller query text and an SQL condition over
// `f` (files: ino, size, mtime, ...), `p` (paths: ino, path, name) and, for keywords, `k`
// (keywords: word, ino). Ages are resolved against the data set's fixed now.
enum class QueryKind {
  kBigRecent,    // size>1g & mtime<1d                (paper Table III)
  kFirefoxWeek,  // keyword=firefox & mtime<1w        (paper Table III)
  kOver16M,      // size>16m                          (paper Table V)
  kPathFirefox,  // path~firefox: substring of the path (what plocate and find -path answer)
};
const char* QueryText(QueryKind kind);  // Propeller's query language

// The brute-force answer: does `record` match `kind` at instant `now_ns`? Written from the
// query's meaning, not with Propeller's evaluator, so it is an independent oracle.
bool Matches(QueryKind kind, const FileRecord& record, int64_t now_ns);

// One client connection. Every call is synchronous: Update returns once the system
// acknowledged the change at the durability level of the comparison.
class Session {
 public:
  virtual ~Session() = default;
  // Writes the new state of an existing file (the attributes a write + close() changes: size,
  // mtime, ctime, atime) as one acknowledged change.
  virtual Status Update(const FileRecord& record) = 0;
  // Runs the search and materialises every hit (path and attributes); returns the hit count.
  virtual Result<uint64_t> Search(QueryKind kind) = 0;
};

class System {
 public:
  virtual ~System() = default;
  // Short stable name used in tables and JSON ("mariadb", "propeller-cluster", ...).
  virtual std::string Name() const = 0;
  // Bulk-loads files [0, files) of `dataset` (not measured by the experiments except where
  // they say). Called once, on an empty system.
  virtual Status Load(const bench::Dataset& dataset, uint64_t files) = 0;
  // Instead of Load: opens what an earlier run with --keep=yes left in the work directory
  // (the same data set and file count), for repeated measurements without reloading.
  virtual Status Attach(const bench::Dataset& /*dataset*/) {
    return Status::NotSupported(Name() + " keeps its data outside the work directory");
  }
  // A new client connection.
  virtual Result<std::unique_ptr<Session>> Connect() = 0;
  // Removes what Load stored outside the work directory (a server's database), at the end of
  // a run without --keep=yes; the driver removes the work directory itself. Sessions must all
  // be closed first.
  virtual Status Drop() { return Status::OK(); }
  // Stops the server process(es) and starts them again on the same data (the caller drops
  // caches in between through `between`). Sessions must all be closed first.
  virtual Status Restart(const std::function<void()>& between) = 0;
};

struct SystemConfig {
  std::string work_dir;      // where this system keeps its data (a fresh directory)
  std::string servers_sh;    // bench/eval/servers.sh (MariaDB, PostgreSQL restarts)
  std::string mariadb_socket;
  std::string postgres_socket_dir;
  int postgres_port = 0;
  int64_t now_ns = 0;        // the data set's now, for ages
  bool cluster_ipc = true;   // propeller-cluster: unix sockets (false: loopback TCP)
  // propeller-engine: compact the store once loaded (`propeller-engine compact`); the load
  // time includes it. (After a plain load it frees almost nothing: LMDB copies pages as is.)
  bool compact_after_load = false;
};

// Creates the system named `name`: propeller-cluster, propeller-engine, mariadb, postgres,
// sqlite. InvalidArgument for an unknown name.
Result<std::unique_ptr<System>> MakeSystem(const std::string& name, const SystemConfig& config);

// Factories, one per implementation file.
std::unique_ptr<System> MakePropellerCluster(const SystemConfig& config);
std::unique_ptr<System> MakePropellerEngine(const SystemConfig& config);
std::unique_ptr<System> MakeMariaDb(const SystemConfig& config);
std::unique_ptr<System> MakePostgres(const SystemConfig& config);
std::unique_ptr<System> MakeSqlite(const SystemConfig& config);

// The SQL text shared by the SQL baselines: the WHERE condition of `kind` with the ages
// resolved against now_ns, and whether it needs the keywords table.
// `sqlite` picks SQLite's spelling of a case-sensitive substring test (its LIKE ignores ASCII
// case).
std::string SqlCondition(QueryKind kind, int64_t now_ns, bool sqlite);
bool SqlNeedsKeywords(QueryKind kind);

}  // namespace propeller::eval

#endif  // PROPELLER_BENCH_EVAL_EVAL_SYSTEM_H_
