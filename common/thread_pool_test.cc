// Tests for thread_pool.h: every task runs, every ParallelFor index runs exactly once, and
// ParallelFor cannot deadlock (one worker, busy workers, nested calls from pool threads).
#include "common/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace propeller {
namespace {

TEST(ThreadPoolTest, DestructorRunsEverySubmittedTask) {
  std::atomic<int> count{0};
  {
    ThreadPool pool(3);
    EXPECT_EQ(pool.num_threads(), 3);
    for (int i = 0; i < 1000; ++i) pool.Submit([&] { count.fetch_add(1); });
  }
  EXPECT_EQ(count.load(), 1000);
}

TEST(ThreadPoolTest, TasksSubmittedByTasksWhileDrainingRun) {
  std::atomic<int> count{0};
  {
    ThreadPool pool(2);
    for (int i = 0; i < 10; ++i) {
      pool.Submit([&] {
        count.fetch_add(1);
        pool.Submit([&] { count.fetch_add(1); });
      });
    }
  }
  EXPECT_EQ(count.load(), 20);
}

TEST(ThreadPoolTest, NonPositiveSizeMeansOneThread) {
  ThreadPool pool(0);
  EXPECT_EQ(pool.num_threads(), 1);
  std::promise<void> done;
  pool.Submit([&] { done.set_value(); });
  done.get_future().wait();
}

TEST(ThreadPoolTest, ParallelForRunsEachIndexExactlyOnce) {
  for (int threads : {1, 2, 4}) {
    ThreadPool pool(threads);
    for (size_t n : {size_t{0}, size_t{1}, size_t{2}, size_t{3}, size_t{17}, size_t{1000},
                     size_t{100'003}}) {  // the last: claimed in chunks, with a remainder
      std::vector<std::atomic<int>> hits(n);
      pool.ParallelFor(n, [&](size_t i) { hits[i].fetch_add(1); });
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(hits[i].load(), 1) << "threads=" << threads << " n=" << n << " i=" << i;
      }
    }
  }
}

TEST(ThreadPoolTest, ParallelForReturnsOnlyAfterAllCallsFinish) {
  ThreadPool pool(4);
  std::atomic<int> finished{0};
  pool.ParallelFor(8, [&](size_t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    finished.fetch_add(1);
  });
  EXPECT_EQ(finished.load(), 8);
}

TEST(ThreadPoolTest, ParallelForUsesWorkersAndCaller) {
  ThreadPool pool(2);
  std::mutex mu;
  std::set<std::thread::id> ids;
  // Each call waits until three distinct threads have joined in (or a generous deadline), so
  // the test fails if the workers do not take part.
  std::atomic<int> arrived{0};
  pool.ParallelFor(3, [&](size_t) {
    {
      std::lock_guard<std::mutex> lock(mu);
      ids.insert(std::this_thread::get_id());
    }
    arrived.fetch_add(1);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (arrived.load() < 3 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
  });
  EXPECT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids.count(std::this_thread::get_id()), 1u);
}

TEST(ThreadPoolTest, ParallelForCompletesWhileTheOnlyWorkerIsBlocked) {
  ThreadPool pool(1);
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  pool.Submit([released] { released.wait(); });  // occupies the only worker
  std::atomic<int> sum{0};
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<bool> all_on_caller{true};
  pool.ParallelFor(100, [&](size_t i) {
    sum.fetch_add(static_cast<int>(i));
    if (std::this_thread::get_id() != caller) all_on_caller = false;
  });
  EXPECT_EQ(sum.load(), 4950);
  EXPECT_TRUE(all_on_caller.load());
  release.set_value();
}

TEST(ThreadPoolTest, NestedParallelForFromAPoolTaskWithOneThread) {
  ThreadPool pool(1);
  std::promise<int> result;
  pool.Submit([&] {
    std::atomic<int> sum{0};
    pool.ParallelFor(10, [&](size_t i) {
      pool.ParallelFor(10, [&](size_t j) { sum.fetch_add(static_cast<int>(i * 10 + j)); });
    });
    result.set_value(sum.load());
  });
  auto future = result.get_future();
  ASSERT_EQ(future.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(future.get(), 4950);
}

TEST(ThreadPoolTest, NestedParallelForWithManyThreads) {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> hits(20 * 20);
  pool.ParallelFor(20, [&](size_t i) {
    pool.ParallelFor(20, [&](size_t j) { hits[i * 20 + j].fetch_add(1); });
  });
  for (size_t k = 0; k < hits.size(); ++k) ASSERT_EQ(hits[k].load(), 1) << k;
}

TEST(ThreadPoolTest, ConcurrentParallelForsFromSeveralThreads) {
  ThreadPool pool(2);
  std::vector<std::thread> callers;
  std::atomic<long> total{0};
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&] {
      for (int round = 0; round < 50; ++round) {
        pool.ParallelFor(10, [&](size_t i) { total.fetch_add(static_cast<long>(i)); });
      }
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(total.load(), 4L * 50 * 45);
}

}  // namespace
}  // namespace propeller
