// What keeps updates off an ACG while it moves to another node (Engine::FreezeAndCopyAcg,
// AdoptAcg with `frozen`, ThawAcg, DropMovedAcg): the set of frozen ACGs, whose updates wait
// (WaitUntilThawed) until the ACG is thawed or dropped, and the gate that lets a freeze wait
// for every Apply that may have missed it (ApplyGate).
//
// Thread-safe.
#ifndef PROPELLER_INDEXNODE_MOVE_GATE_H_
#define PROPELLER_INDEXNODE_MOVE_GATE_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <set>
#include <thread>

#include "common/env.h"
#include "common/mutex.h"
#include "common/status.h"

namespace propeller {

// Lets a rare operation wait until every Apply that began before it has finished, at the
// cost of two uncontended atomic increments per Apply (a shared mutex would let a steady
// stream of Apply calls starve the waiter). Apply holds a Ticket; Drain flips the epoch and
// waits for the previous epoch's tickets to go. Drains must not overlap (callers serialise).
class ApplyGate {
 public:
  class Ticket {
   public:
    explicit Ticket(ApplyGate* gate) : gate_(gate) {
      for (;;) {
        const uint64_t e = gate_->epoch_.load();
        slot_ = static_cast<int>(e & 1);
        gate_->in_[slot_].fetch_add(1);
        if (gate_->epoch_.load() == e) return;  // counted before any Drain that missed us
        gate_->in_[slot_].fetch_sub(1);
      }
    }
    ~Ticket() { gate_->in_[slot_].fetch_sub(1); }
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;

   private:
    ApplyGate* gate_;
    int slot_ = 0;
  };

  // Returns once every Ticket taken before this call is gone. Tickets taken after it see
  // whatever the caller changed before calling.
  void Drain() {
    const uint64_t old = epoch_.fetch_add(1);
    while (in_[old & 1].load() != 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }

 private:
  std::atomic<uint64_t> epoch_{0};
  std::atomic<int64_t> in_[2] = {0, 0};
};

// The ACGs being moved. A leaf lock: nothing else is taken while it is held.
class FrozenAcgs {
 public:
  FrozenAcgs() = default;
  FrozenAcgs(const FrozenAcgs&) = delete;
  FrozenAcgs& operator=(const FrozenAcgs&) = delete;

  // Freezes `id`; false when it is frozen already.
  bool Freeze(uint64_t id) PROPELLER_EXCLUDES(mu_);
  // Thaws `id` (nothing when it is not frozen) and wakes its waiters.
  void Thaw(uint64_t id) PROPELLER_EXCLUDES(mu_);
  bool IsFrozen(uint64_t id) PROPELLER_EXCLUDES(mu_);
  // Cheap: whether any ACG is frozen (Apply's fast path checks nothing else).
  bool Any() const { return any_.load(std::memory_order_acquire); }
  // The first id of [begin, end) (each element's `acg_of(element)`) that is frozen, or 0.
  template <typename It, typename AcgOf>
  uint64_t FirstFrozen(It begin, It end, AcgOf acg_of) PROPELLER_EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    for (It it = begin; it != end; ++it) {
      if (frozen_.count(acg_of(*it)) != 0) return acg_of(*it);
    }
    return 0;
  }
  // Waits until `id` is not frozen, at most `wait_ns` by `env`'s monotonic clock: OK;
  // Unavailable when it stayed frozen; Aborted when `stop` became true (WakeAll wakes the
  // wait to see it).
  Status WaitUntilThawed(uint64_t id, Env* env, int64_t wait_ns, const std::atomic<bool>& stop)
      PROPELLER_EXCLUDES(mu_);
  // Wakes every waiter (to notice a stop).
  void WakeAll() PROPELLER_EXCLUDES(mu_);

 private:
  Mutex mu_;
  CondVar thawed_;  // with mu_: an ACG was thawed, or WakeAll
  std::set<uint64_t> frozen_ PROPELLER_GUARDED_BY(mu_);
  std::atomic<bool> any_{false};  // !frozen_.empty()
};

}  // namespace propeller

#endif  // PROPELLER_INDEXNODE_MOVE_GATE_H_
