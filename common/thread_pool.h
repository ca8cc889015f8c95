// ThreadPool: a fixed set of worker threads running submitted tasks in FIFO order, plus
// ParallelFor for fan-out (e.g. a search over many ACG partitions, docs/architecture.md §6).
//
// ParallelFor lets the calling thread take part in the work, so it always makes progress: with
// one worker, with every worker busy, and when called from inside a pool task (nested fan-out)
// it never deadlocks — at worst the caller does all the work itself.
//
// Threading: Submit and ParallelFor may be called from any thread, including pool threads. The
// destructor must not run concurrently with other calls, nor from a pool thread.
// Tasks must not throw (an exception escaping a task terminates the process, as for
// std::thread); Propeller reports errors as Status values instead.
#ifndef PROPELLER_COMMON_THREAD_POOL_H_
#define PROPELLER_COMMON_THREAD_POOL_H_

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace propeller {

class ThreadPool {
 public:
  // Starts `threads` workers; values below 1 start one.
  explicit ThreadPool(int threads);
  // Runs every task already submitted (and any they submit in turn), then joins the workers.
  ~ThreadPool();

  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Queues `task` to run on a worker. Returns at once. REQUIRES: the destructor has not
  // finished (tasks may submit more tasks while the pool drains).
  void Submit(std::function<void()> task);

  // Runs fn(0), ..., fn(n - 1), each exactly once, spread over the workers and the calling
  // thread, and returns after all have returned. Calls may run concurrently and in any order;
  // `fn` must be safe for that. Returns immediately when n == 0.
  void ParallelFor(size_t n, const std::function<void(size_t)>& fn);

  // The number of worker threads.
  int num_threads() const { return static_cast<int>(workers_.size()); }

 private:
  void WorkerLoop();

  std::vector<std::thread> workers_;  // Constant after construction.

  std::mutex mu_;
  std::condition_variable work_cv_;          // Signalled when a task is queued or on shutdown.
  std::deque<std::function<void()>> queue_;  // Under mu_.
  bool stopping_ = false;                    // Under mu_.
};

}  // namespace propeller

#endif  // PROPELLER_COMMON_THREAD_POOL_H_
