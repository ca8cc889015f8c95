#include "common/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <utility>

namespace propeller {

ThreadPool::ThreadPool(int threads) {
  const int n = std::max(threads, 1);
  workers_.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::Submit(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(task));
  }
  work_cv_.notify_one();
}

void ThreadPool::WorkerLoop() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      // Drain before exiting: the destructor promises that every submitted task runs.
      if (queue_.empty()) return;
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

namespace {

// Shared by the caller and the helper tasks of one ParallelFor. Helpers hold it by shared_ptr
// because a helper may be dequeued only after ParallelFor has returned; such a helper finds no
// index left to claim and never touches `fn`, which by then may be gone.
struct ParallelForState {
  ParallelForState(size_t n, size_t threads, const std::function<void(size_t)>* fn)
      : n(n), chunk(std::clamp<size_t>(n / (threads * 64), 1, 16)), fn(fn) {}

  // Claims and runs indices, `chunk` at a time, until none are left. In chunks because both
  // counters are shared by every thread: a search runs one index per ACG (100,000 at 100 M
  // files), and two contended atomic operations per index cost more than a small index.
  // Small chunks (at most 1/64 of a thread's share) keep the threads' loads even.
  void RunClaimed() {
    for (;;) {
      const size_t begin = next.fetch_add(chunk, std::memory_order_relaxed);
      if (begin >= n) return;
      const size_t end = std::min(n, begin + chunk);
      for (size_t i = begin; i < end; ++i) (*fn)(i);
      if (done.fetch_add(end - begin, std::memory_order_acq_rel) + (end - begin) == n) {
        std::lock_guard<std::mutex> lock(mu);
        cv.notify_all();
      }
    }
  }

  const size_t n;
  const size_t chunk;
  const std::function<void(size_t)>* const fn;
  std::atomic<size_t> next{0};
  std::atomic<size_t> done{0};
  std::mutex mu;
  std::condition_variable cv;  // Signalled when done reaches n.
};

}  // namespace

void ThreadPool::ParallelFor(size_t n, const std::function<void(size_t)>& fn) {
  if (n == 0) return;
  if (n == 1) {
    fn(0);
    return;
  }
  // One helper per worker at most, and none for the index the caller will surely take.
  const size_t helpers = std::min(n - 1, workers_.size());
  auto state = std::make_shared<ParallelForState>(n, helpers + 1, &fn);
  for (size_t h = 0; h < helpers; ++h) {
    Submit([state] { state->RunClaimed(); });
  }
  state->RunClaimed();
  // Indices claimed by helpers may still be running; wait for them (they never wait on us).
  std::unique_lock<std::mutex> lock(state->mu);
  state->cv.wait(lock, [&] { return state->done.load(std::memory_order_acquire) == n; });
}

}  // namespace propeller
