#include "indexnode/watch_hub.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <map>
#include <utility>

namespace propeller {

struct EngineWatch::State {
  // Constant after Add.
  std::optional<Query> query;  // set by Add
  std::map<uint32_t, Query> rooted;  // volume -> the query under its root, where it differs
  const Query& QueryFor(uint32_t volume) const {
    auto it = rooted.find(volume);
    return it == rooted.end() ? *query : it->second;
  }
  std::string scope;
  std::optional<uint32_t> volume;
  std::optional<Credentials> creds;
  std::function<bool(uint32_t)> volume_visible;
  size_t max_queued = kDefaultWatchQueue;

  Mutex mu;
  CondVar cv;
  std::deque<WatchEvent> queue PROPELLER_GUARDED_BY(mu);
  // Fell behind: the queue was freed and later changes are only counted.
  bool behind PROPELLER_GUARDED_BY(mu) = false;
  std::string behind_why PROPELLER_GUARDED_BY(mu);
  uint64_t lost PROPELLER_GUARDED_BY(mu) = 0;
  bool closed PROPELLER_GUARDED_BY(mu) = false;

  void FallBehind(std::string why, uint64_t lost_now) PROPELLER_REQUIRES(mu) {
    if (!behind) behind_why = std::move(why);
    behind = true;
    lost += queue.size() + lost_now;
    std::deque<WatchEvent>().swap(queue);  // give the memory back
    cv.NotifyAll();
  }
};

struct WatchRegistry {
  Mutex mu;
  std::vector<std::shared_ptr<EngineWatch::State>> watches PROPELLER_GUARDED_BY(mu);
  bool shut PROPELLER_GUARDED_BY(mu) = false;
  std::atomic<size_t> count{0};  // watches.size(), read without mu
};

EngineWatch::EngineWatch(std::shared_ptr<State> state, std::shared_ptr<WatchRegistry> registry)
    : state_(std::move(state)), registry_(std::move(registry)) {}

EngineWatch::~EngineWatch() {
  MutexLock lock(&registry_->mu);
  std::erase(registry_->watches, state_);
  registry_->count.store(registry_->watches.size(), std::memory_order_release);
}

Status EngineWatch::Next(std::vector<WatchEvent>* out, int64_t wait_ns) {
  State& s = *state_;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::nanoseconds(wait_ns);
  MutexLock lock(&s.mu);
  while (s.queue.empty() && !s.behind && !s.closed) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return Status::OK();
    s.cv.WaitFor(&s.mu, deadline - now);
  }
  if (s.behind) {
    return Status::ResourceExhausted("the watch fell behind: " + s.behind_why + "; " +
                                     std::to_string(s.lost) + " changes were not delivered " +
                                     "(start it again, and read faster or ask for a larger "
                                     "queue)");
  }
  if (s.closed) return Status::Aborted("the index node is stopping");
  out->reserve(out->size() + s.queue.size());
  for (WatchEvent& e : s.queue) out->push_back(std::move(e));
  s.queue.clear();
  return Status::OK();
}

WatchHub::WatchHub(
    std::function<bool(uint32_t, const std::string&, const Credentials&)> visible)
    : visible_(std::move(visible)), registry_(std::make_shared<WatchRegistry>()) {}

WatchHub::~WatchHub() { Shutdown(); }

bool WatchHub::active() const { return registry_->count.load(std::memory_order_acquire) > 0; }

Result<std::unique_ptr<EngineWatch>> WatchHub::Add(const WatchSpec& spec) {
  auto state = std::make_shared<EngineWatch::State>();
  ParseOptions po;
  po.now_ns = spec.now_ns;
  if (po.now_ns == 0) {
    po.now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
  }
  PROPELLER_ASSIGN_OR_RETURN(state->query, Query::Parse(spec.query, po));
  const std::string why = ValidatePath(spec.scope);
  if (!why.empty()) return Status::InvalidArgument("bad scope '" + spec.scope + "': " + why);
  if (spec.max_queued > kMaxWatchQueue) {
    return Status::InvalidArgument("a watch queues at most " + std::to_string(kMaxWatchQueue) +
                                   " changes");
  }
  for (const auto& [volume, root] : spec.volume_roots) {
    bool changed = false;
    Query w = state->query->WithRoot(root, &changed);
    if (changed) state->rooted.emplace(volume, std::move(w));
  }
  state->scope = spec.scope;
  state->volume = spec.volume;
  state->creds = spec.creds;
  state->volume_visible = spec.volume_visible;
  state->max_queued = spec.max_queued == 0 ? kDefaultWatchQueue : spec.max_queued;
  MutexLock lock(&registry_->mu);
  if (registry_->shut) return Status::Aborted("the index node is stopping");
  registry_->watches.push_back(state);
  registry_->count.store(registry_->watches.size(), std::memory_order_release);
  return std::unique_ptr<EngineWatch>(new EngineWatch(std::move(state), registry_));
}

void WatchHub::Publish(uint64_t acg, const std::optional<FileRecord>& before,
                       const std::optional<FileRecord>& after) {
  if (!before && !after) return;
  MutexLock lock(&registry_->mu);
  for (const std::shared_ptr<EngineWatch::State>& ws : registry_->watches) {
    EngineWatch::State& w = *ws;
    // The paths of `rec` this watch sees match, in the record's (sorted) order.
    auto matching = [&](const std::optional<FileRecord>& rec) {
      std::vector<std::string> paths;
      if (!rec || (w.volume && rec->id.volume != *w.volume)) return paths;
      if (w.creds && w.volume_visible && !w.volume_visible(rec->id.volume)) return paths;
      const Query& query = w.QueryFor(rec->id.volume);
      for (const std::string& p : rec->paths) {
        if (!PathInScope(p, w.scope)) continue;
        if (w.creds && w.creds->uid != 0 && !visible_(rec->id.volume, p, *w.creds)) continue;
        if (query.MatchesLink(*rec, p)) paths.push_back(p);
      }
      return paths;
    };
    const std::vector<std::string> was = matching(before);
    const std::vector<std::string> now = matching(after);
    if (was.empty() && now.empty()) continue;
    // What a user's event carries: the record with only the paths they may see (as searches).
    auto shown = [&](const FileRecord& rec) {
      FileRecord r = rec;
      if (w.creds && w.creds->uid != 0) {
        std::erase_if(r.paths, [&](const std::string& p) {
          return !visible_(r.id.volume, p, *w.creds);
        });
      }
      return r;
    };
    std::vector<WatchEvent> events;
    for (const std::string& p : was) {
      if (!std::binary_search(now.begin(), now.end(), p)) {
        events.push_back(WatchEvent{'-', p, shown(*before), acg});
      }
    }
    for (const std::string& p : now) {
      const bool matched = std::binary_search(was.begin(), was.end(), p);
      if (!matched) {
        events.push_back(WatchEvent{'+', p, shown(*after), acg});
      } else if (!(*before == *after)) {
        events.push_back(WatchEvent{'~', p, shown(*after), acg});
      }
    }
    if (events.empty()) continue;
    MutexLock wl(&w.mu);
    if (w.closed) continue;
    if (w.behind) {
      w.lost += events.size();
      continue;
    }
    if (w.queue.size() + events.size() > w.max_queued) {
      w.FallBehind("more than " + std::to_string(w.max_queued) +
                       " changes waited for its reader",
                   events.size());
      continue;
    }
    for (WatchEvent& e : events) w.queue.push_back(std::move(e));
    w.cv.NotifyAll();
  }
}

void WatchHub::LoseAll(const std::string& why) {
  MutexLock lock(&registry_->mu);
  for (const std::shared_ptr<EngineWatch::State>& ws : registry_->watches) {
    MutexLock wl(&ws->mu);
    ws->FallBehind(why, 1);
  }
}

void WatchHub::Shutdown() {
  MutexLock lock(&registry_->mu);
  registry_->shut = true;
  for (const std::shared_ptr<EngineWatch::State>& ws : registry_->watches) {
    MutexLock wl(&ws->mu);
    ws->closed = true;
    ws->cv.NotifyAll();
  }
}

}  // namespace propeller
