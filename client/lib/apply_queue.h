// ApplyQueue: how concurrent Client::Update calls share Apply requests to one index node
// (client.cc; docs/architecture.md §4 "Index updates").
#ifndef PROPELLER_CLIENT_LIB_APPLY_QUEUE_H_
#define PROPELLER_CLIENT_LIB_APPLY_QUEUE_H_

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <iterator>
#include <mutex>
#include <span>
#include <vector>

#include "client/lib/propeller.h"
#include "common/record.h"
#include "common/status.h"
#include "schemas/messages.h"

namespace propeller {

// At most this many updates go in one coalesced Apply; a caller's own batch is never split.
inline constexpr size_t kMaxCoalescedUpdates = 4096;

// Concurrent Update calls bound for one index node share its Apply requests
// (docs/architecture.md §4 Index updates: many closes at once cost few round trips). Up to
// kMaxAppliesInFlightPerNode requests go out at once, each caller sending its own. Callers
// that find them all in flight queue; when one returns, the first queued caller sends every
// queued batch in one Apply and hands each caller the outcome (a group commit, like LevelDB's
// writer queue). Nobody waits for a timer, and with few concurrent callers nothing changes.
//
// What a shared Apply changes for a caller, given that an index node applies a batch all or
// nothing (Engine::Apply): a redirect, an Unavailable or an error reaches every caller of the
// batch, each of which reroutes and resends its own updates as it would have alone; a
// rejected batch (InvalidArgument: a bad update) is resent caller by caller, so only the
// caller that sent the bad update sees the error.
//
// Thread-safe.
class ApplyQueue {
 public:
  struct Outcome {
    Status status;
    std::vector<wire::AcgLocation> redirects;
  };
  // Sends *batch in one Apply; *batch holds the same updates again on return.
  using SendFn = std::function<Outcome(std::vector<Update>* batch)>;

  // Sends *updates, maybe together with other callers' updates. On return *updates holds
  // the caller's updates again, for a resend after a redirect.
  Outcome Send(std::vector<Update>* updates, const SendFn& send) {
    Caller self{updates};
    std::unique_lock<std::mutex> lock(mu_);
    callers_.push_back(&self);
    auto may_lead = [&] {
      return &self == callers_.front() && in_flight_ < kMaxAppliesInFlightPerNode;
    };
    while (!self.done && !may_lead()) self.cv.wait(lock);
    if (self.done) return std::move(self.outcome);

    // This caller leads: it sends for the callers at the front of the queue.
    std::vector<Caller*> group;
    size_t total = 0;
    while (!callers_.empty()) {
      Caller* c = callers_.front();
      if (!group.empty() && total + c->updates->size() > kMaxCoalescedUpdates) break;
      group.push_back(c);
      total += c->updates->size();
      callers_.pop_front();
    }
    ++in_flight_;
    if (group.size() > 1) {
      ++coalesced_calls_;
      callers_coalesced_ += group.size() - 1;
    }
    // Callers left over (beyond the size bound) may take another free slot.
    if (!callers_.empty() && in_flight_ < kMaxAppliesInFlightPerNode) {
      callers_.front()->cv.notify_one();
    }
    lock.unlock();
    SendGroup(group, total, send);
    lock.lock();
    --in_flight_;
    for (Caller* c : group) {
      c->done = true;
      if (c != &self) c->cv.notify_one();
    }
    if (!callers_.empty()) callers_.front()->cv.notify_one();
    return std::move(self.outcome);
  }

  // Adds this queue's counters to *stats.
  void AddStats(ClientUpdateStats* stats) {
    std::lock_guard<std::mutex> lock(mu_);
    stats->coalesced_calls += coalesced_calls_;
    stats->callers_coalesced += callers_coalesced_;
    stats->callers_waiting += callers_.size();
  }

 private:
  struct Caller {
    std::vector<Update>* updates;
    bool done = false;  // Under mu_.
    Outcome outcome;    // Set by the leader before done.
    std::condition_variable cv;
  };

  static void SendGroup(const std::vector<Caller*>& group, size_t total, const SendFn& send) {
    if (group.size() == 1) {
      group[0]->outcome = send(group[0]->updates);
      return;
    }
    std::vector<Update> batch;
    batch.reserve(total);
    for (Caller* c : group) {
      std::move(c->updates->begin(), c->updates->end(), std::back_inserter(batch));
    }
    Outcome shared = send(&batch);
    auto next = batch.begin();
    for (Caller* c : group) {
      const auto n = static_cast<std::ptrdiff_t>(c->updates->size());
      std::move(next, next + n, c->updates->begin());
      next += n;
    }
    if (shared.status.code() == StatusCode::kInvalidArgument) {
      // Nothing of the batch was applied; find whose update the node refuses.
      for (Caller* c : group) c->outcome = send(c->updates);
      return;
    }
    for (Caller* c : group) c->outcome = shared;
  }

  std::mutex mu_;
  std::deque<Caller*> callers_;  // Under mu_: waiting for a free slot; the front one leads next.
  int in_flight_ = 0;             // Under mu_: Apply requests being sent.
  uint64_t coalesced_calls_ = 0;    // Under mu_.
  uint64_t callers_coalesced_ = 0;  // Under mu_.
};

}  // namespace propeller

#endif  // PROPELLER_CLIENT_LIB_APPLY_QUEUE_H_
