// WatchHub: the live queries of one engine (Engine::Watch; docs/cli.md `propeller watch`).
//
// A watch is a parsed query with a scope, a volume and, for a user, credentials. The engine
// calls Publish for every file an acknowledged update changed, in the order it applied them,
// with the file's record before and after (nullopt = not indexed); the hub turns each into the
// watch's events: '-' for every path that matched before and not after, '+' for every path
// that matches after and not before, '~' for a path that matches both times when the record
// changed. A rename is a '-' of the old path and a '+' of the new one; a hard link is a path of
// its own, as in search results.
//
// Memory is bounded per watch: at most `max_queued` events wait for its reader. A watch whose
// reader falls further behind is not dropped from silently: its queue is freed and Next
// reports ResourceExhausted ("fell behind") from then on. Publish never waits for a reader.
//
// What a watch does not see: a file that stops (or starts) matching only because time passed
// (ages are measured from the watch's start: "mtime<1d" means "changed within a day before
// the watch began"), and paths that become visible or invisible to a user because a directory
// above them changed its permissions (their own records did not change).
//
// Thread-safe. Publish must be called by one thread at a time (the engine serializes it with
// its apply path) so events keep their order.
#ifndef PROPELLER_INDEXNODE_WATCH_HUB_H_
#define PROPELLER_INDEXNODE_WATCH_HUB_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/credentials.h"
#include "common/mutex.h"
#include "common/query/query.h"
#include "common/record.h"
#include "common/status.h"

namespace propeller {

// Events a watch holds for its reader unless told otherwise (~300 bytes each with a short
// path: a few MB).
inline constexpr size_t kDefaultWatchQueue = 10'000;
inline constexpr size_t kMaxWatchQueue = 1'000'000;

struct WatchSpec {
  std::string query;               // query text (docs/query.md)
  std::string scope = "/";         // in-volume, as SearchRequest::scope
  std::optional<uint32_t> volume;  // unset = every volume
  // Unset: every path (members of the service). Set: only paths the caller could find by
  // walking the tree, as searches filter (SearchRequest::creds).
  std::optional<Credentials> creds;
  std::function<bool(uint32_t volume)> volume_visible;  // with creds; null = every volume
  size_t max_queued = 0;           // 0 = kDefaultWatchQueue; at most kMaxWatchQueue
  int64_t now_ns = 0;              // instant for ages; 0 = now
  // As SearchRequest::volume_roots: path predicates see the paths shown under these roots.
  std::map<uint32_t, std::string> volume_roots;
  // User attributes the query names that no file here has and no index declares: unset, the
  // watch is refused as a search is (a typo: `sise>1m`); set, they are put here and the watch
  // runs (a cluster's client refuses it when no node knows them, as for searches).
  std::vector<std::string>* report_unknown_attrs = nullptr;
};

struct WatchEvent {
  char kind = '+';    // '+' started matching, '-' stopped, '~' changed and still matches
  std::string path;   // in-volume
  FileRecord record;  // after the change ('-': before it)
  uint64_t acg = 0;
};

class WatchHub;
struct WatchRegistry;

// One registered watch. Destroying it unregisters it.
class EngineWatch {
 public:
  ~EngineWatch();
  EngineWatch(const EngineWatch&) = delete;
  EngineWatch& operator=(const EngineWatch&) = delete;

  // Moves the waiting events into *out (appended, in order), waiting at most `wait_ns` for
  // the first. OK with nothing after the wait. ResourceExhausted once the watch fell behind;
  // Aborted once the engine closed.
  Status Next(std::vector<WatchEvent>* out, int64_t wait_ns);

  struct State;

 private:
  friend class WatchHub;
  EngineWatch(std::shared_ptr<State> state, std::shared_ptr<WatchRegistry> registry);
  std::shared_ptr<State> state_;
  std::shared_ptr<WatchRegistry> registry_;  // outlives the hub when the watch does
};

class WatchHub {
 public:
  // `visible`: whether `creds` may see `path` of `volume` (the engine's directory table).
  explicit WatchHub(
      std::function<bool(uint32_t volume, const std::string& path, const Credentials&)> visible);
  ~WatchHub();

  // True while some watch is registered (cheap: the apply path asks it for every batch).
  bool active() const;

  // Registers a watch. InvalidArgument for a bad query, scope or queue size (the parser's
  // positioned message).
  Result<std::unique_ptr<EngineWatch>> Add(const WatchSpec& spec);

  // File `before` (nullopt = absent) became `after` in ACG `acg`.
  void Publish(uint64_t acg, const std::optional<FileRecord>& before,
               const std::optional<FileRecord>& after);
  // Every watch lost changes it cannot be told (the engine could not read a file's record
  // before an update): each reports ResourceExhausted with `why`.
  void LoseAll(const std::string& why);
  // The engine is closing: every watch's Next returns Aborted from now on.
  void Shutdown();

 private:
  std::function<bool(uint32_t, const std::string&, const Credentials&)> visible_;
  std::shared_ptr<WatchRegistry> registry_;
};

}  // namespace propeller

#endif  // PROPELLER_INDEXNODE_WATCH_HUB_H_
