#include "indexnode/periodic_thread.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "common/logging.h"

namespace propeller {

PeriodicThread::~PeriodicThread() {
  Stop();
  if (thread_.joinable()) thread_.join();
}

void PeriodicThread::Start(Env* env, std::string name, int64_t interval_ns,
                           std::function<Status()> pass, std::string on_failure) {
  env_ = env;
  name_ = std::move(name);
  interval_ns_ = interval_ns;
  pass_ = std::move(pass);
  on_failure_ = std::move(on_failure);
  thread_ = std::thread([this] { Main(); });
}

void PeriodicThread::Wake() {
  MutexLock lock(&mu_);
  wake_ = true;
  cv_.NotifyOne();
}

void PeriodicThread::Stop() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
    cv_.NotifyAll();
  }
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

void PeriodicThread::Main() {
  int64_t backoff_ns = 0;
  int64_t next_try = 0;
  int64_t last_logged = 0;
  mu_.Lock();
  while (!stop_) {
    if (!wake_) cv_.WaitFor(&mu_, std::chrono::nanoseconds(interval_ns_));
    if (stop_) break;
    wake_ = false;
    const int64_t now = env_->MonotonicNanos();
    if (now < next_try) continue;
    mu_.Unlock();
    const Status s = pass_();
    mu_.Lock();
    if (s.ok()) {
      if (backoff_ns != 0) Log(LogLevel::kInfo, "%s: working again", name_.c_str());
      backoff_ns = 0;
      continue;
    }
    backoff_ns = std::clamp<int64_t>(backoff_ns * 2, 100'000'000, 10'000'000'000);
    next_try = now + backoff_ns;
    if (last_logged == 0 || now - last_logged > 60'000'000'000) {
      Log(LogLevel::kError, "%s: %s (retrying%s%s)", name_.c_str(), s.ToString().c_str(),
          on_failure_.empty() ? "" : "; ", on_failure_.c_str());
      last_logged = now;
    }
  }
  mu_.Unlock();
}

}  // namespace propeller
