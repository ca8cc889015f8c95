#include "indexnode/move_gate.h"

#include <string>

namespace propeller {

bool FrozenAcgs::Freeze(uint64_t id) {
  MutexLock lock(&mu_);
  if (!frozen_.insert(id).second) return false;
  any_.store(true, std::memory_order_release);
  return true;
}

void FrozenAcgs::Thaw(uint64_t id) {
  MutexLock lock(&mu_);
  frozen_.erase(id);
  any_.store(!frozen_.empty(), std::memory_order_release);
  thawed_.NotifyAll();
}

bool FrozenAcgs::IsFrozen(uint64_t id) {
  if (!Any()) return false;
  MutexLock lock(&mu_);
  return frozen_.count(id) != 0;
}

Status FrozenAcgs::WaitUntilThawed(uint64_t id, Env* env, int64_t wait_ns,
                                   const std::atomic<bool>& stop) {
  MutexLock lock(&mu_);
  const int64_t deadline = env->MonotonicNanos() + wait_ns;
  bool thawed = frozen_.count(id) == 0 || stop.load();
  for (int64_t now = env->MonotonicNanos(); !thawed && now < deadline;
       now = env->MonotonicNanos()) {
    thawed_.WaitFor(&mu_, std::chrono::nanoseconds(deadline - now));
    thawed = frozen_.count(id) == 0 || stop.load();
  }
  if (stop.load()) return Status::Aborted("engine crashed");
  if (!thawed) {
    return Status::Unavailable("ACG " + std::to_string(id) +
                               " is being moved to another node; retry");
  }
  return Status::OK();
}

void FrozenAcgs::WakeAll() {
  MutexLock lock(&mu_);
  thawed_.NotifyAll();
}

}  // namespace propeller
