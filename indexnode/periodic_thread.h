// A background thread that runs a pass periodically (the engine's committer and splitter): every
// `interval_ns`, and at once when woken. A pass that fails is retried with backoff — 0.1 s
// doubling to 10 s — and its error is logged once, then at most every minute, until a pass
// succeeds ("<name>: working again"): a full disk or a flaky device does not spin the thread,
// and it resumes by itself.
//
// Thread-safe.
#ifndef PROPELLER_INDEXNODE_PERIODIC_THREAD_H_
#define PROPELLER_INDEXNODE_PERIODIC_THREAD_H_

#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include "common/env.h"
#include "common/mutex.h"
#include "common/status.h"

namespace propeller {

class PeriodicThread {
 public:
  PeriodicThread() = default;
  // Stops the thread and joins it.
  ~PeriodicThread();
  PeriodicThread(const PeriodicThread&) = delete;
  PeriodicThread& operator=(const PeriodicThread&) = delete;

  // Starts the thread (once): `pass` every `interval_ns` by `env`'s monotonic clock (which
  // must outlive this object). `name` prefixes log lines; `on_failure` ends the one logged
  // when a pass fails ("... (retrying; <on_failure>)").
  void Start(Env* env, std::string name, int64_t interval_ns, std::function<Status()> pass,
             std::string on_failure = "") PROPELLER_EXCLUDES(mu_);
  // Runs a pass soon (no sooner than a backoff allows).
  void Wake() PROPELLER_EXCLUDES(mu_);
  // Stops the thread and joins it; called on the thread itself (a pass that stops its
  // owner), it only asks it to stop: the destructor joins it.
  void Stop() PROPELLER_EXCLUDES(mu_);

 private:
  void Main() PROPELLER_EXCLUDES(mu_);

  Env* env_ = nullptr;
  std::string name_, on_failure_;
  int64_t interval_ns_ = 0;
  std::function<Status()> pass_;
  std::thread thread_;
  Mutex mu_;
  CondVar cv_;  // with mu_: woken or stopped
  bool stop_ PROPELLER_GUARDED_BY(mu_) = false;
  bool wake_ PROPELLER_GUARDED_BY(mu_) = false;
};

}  // namespace propeller

#endif  // PROPELLER_INDEXNODE_PERIODIC_THREAD_H_
