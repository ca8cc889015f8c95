// Mutexes that clang's thread-safety analysis understands (-Wthread-safety; scripts/
// thread_safety.sh runs it in CI), after Abseil's and LevelDB's port::Mutex: a member names the
// mutex that guards it (PROPELLER_GUARDED_BY(mu_)), a function the mutexes it needs
// (PROPELLER_REQUIRES(mu_)) or must not hold (PROPELLER_EXCLUDES(mu_)), and the compiler checks
// every access. libstdc++'s std::mutex carries no annotations, hence these thin wrappers; with
// another compiler the macros are empty and the wrappers cost nothing.
//
// Thread-safe, like the std types they wrap.
#ifndef PROPELLER_COMMON_MUTEX_H_
#define PROPELLER_COMMON_MUTEX_H_

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <shared_mutex>

#if defined(__clang__)
#define PROPELLER_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define PROPELLER_THREAD_ANNOTATION(x)
#endif

#define PROPELLER_CAPABILITY(x) PROPELLER_THREAD_ANNOTATION(capability(x))
#define PROPELLER_SCOPED_CAPABILITY PROPELLER_THREAD_ANNOTATION(scoped_lockable)
#define PROPELLER_GUARDED_BY(x) PROPELLER_THREAD_ANNOTATION(guarded_by(x))
#define PROPELLER_PT_GUARDED_BY(x) PROPELLER_THREAD_ANNOTATION(pt_guarded_by(x))
#define PROPELLER_ACQUIRED_BEFORE(...) PROPELLER_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define PROPELLER_ACQUIRED_AFTER(...) PROPELLER_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
#define PROPELLER_REQUIRES(...) PROPELLER_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define PROPELLER_REQUIRES_SHARED(...) \
  PROPELLER_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
#define PROPELLER_ACQUIRE(...) PROPELLER_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define PROPELLER_ACQUIRE_SHARED(...) \
  PROPELLER_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
#define PROPELLER_RELEASE(...) PROPELLER_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define PROPELLER_RELEASE_SHARED(...) \
  PROPELLER_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
#define PROPELLER_RELEASE_GENERIC(...) \
  PROPELLER_THREAD_ANNOTATION(release_generic_capability(__VA_ARGS__))
#define PROPELLER_TRY_ACQUIRE(...) \
  PROPELLER_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define PROPELLER_TRY_ACQUIRE_SHARED(...) \
  PROPELLER_THREAD_ANNOTATION(try_acquire_shared_capability(__VA_ARGS__))
#define PROPELLER_EXCLUDES(...) PROPELLER_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define PROPELLER_LOCK_RETURNED(x) PROPELLER_THREAD_ANNOTATION(lock_returned(x))
#define PROPELLER_NO_THREAD_SAFETY_ANALYSIS PROPELLER_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace propeller {

class PROPELLER_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;
  void Lock() PROPELLER_ACQUIRE() { mu_.lock(); }
  // Locks it if it is free; true when it did. Never blocks.
  bool TryLock() PROPELLER_TRY_ACQUIRE(true) { return mu_.try_lock(); }
  void Unlock() PROPELLER_RELEASE() { mu_.unlock(); }
  // Tells the analysis the caller holds it (where the holding is proven another way).
  void AssertHeld() const PROPELLER_THREAD_ANNOTATION(assert_capability(this)) {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Readers share it, a writer holds it alone.
class PROPELLER_CAPABILITY("shared mutex") SharedMutex {
 public:
  SharedMutex() = default;
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;
  void Lock() PROPELLER_ACQUIRE() { mu_.lock(); }
  // Locks it exclusively if it is free; true when it did. Never blocks.
  bool TryLock() PROPELLER_TRY_ACQUIRE(true) { return mu_.try_lock(); }
  void Unlock() PROPELLER_RELEASE() { mu_.unlock(); }
  void LockShared() PROPELLER_ACQUIRE_SHARED() { mu_.lock_shared(); }
  // Locks it shared if no writer holds it; true when it did. Never blocks.
  bool TryLockShared() PROPELLER_TRY_ACQUIRE_SHARED(true) { return mu_.try_lock_shared(); }
  void UnlockShared() PROPELLER_RELEASE_SHARED() { mu_.unlock_shared(); }
  // Tells the analysis the caller holds it exclusively (where the holding is proven another
  // way).
  void AssertHeld() const PROPELLER_THREAD_ANNOTATION(assert_capability(this)) {}

 private:
  std::shared_mutex mu_;
};

// Holds a Mutex for its scope.
class PROPELLER_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) PROPELLER_ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() PROPELLER_RELEASE() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

// Holds a SharedMutex exclusively for its scope.
class PROPELLER_SCOPED_CAPABILITY WriterLock {
 public:
  explicit WriterLock(SharedMutex* mu) PROPELLER_ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~WriterLock() PROPELLER_RELEASE() { mu_->Unlock(); }
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;

 private:
  SharedMutex* const mu_;
};

// Holds a SharedMutex shared for its scope.
class PROPELLER_SCOPED_CAPABILITY ReaderLock {
 public:
  explicit ReaderLock(SharedMutex* mu) PROPELLER_ACQUIRE_SHARED(mu) : mu_(mu) {
    mu_->LockShared();
  }
  ~ReaderLock() PROPELLER_RELEASE() { mu_->UnlockShared(); }
  ReaderLock(const ReaderLock&) = delete;
  ReaderLock& operator=(const ReaderLock&) = delete;

 private:
  SharedMutex* const mu_;
};

// A condition variable used with a Mutex the caller holds.
class CondVar {
 public:
  // Releases `mu` while it waits, holds it again when it returns (spurious wake-ups
  // included: callers loop on their condition).
  void Wait(Mutex* mu) PROPELLER_REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();
  }
  // Wait, at most `timeout`. False when it timed out.
  template <typename Rep, typename Period>
  bool WaitFor(Mutex* mu, std::chrono::duration<Rep, Period> timeout) PROPELLER_REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    const bool woken = cv_.wait_for(lock, timeout) == std::cv_status::no_timeout;
    lock.release();
    return woken;
  }
  void NotifyOne() { cv_.notify_one(); }
  void NotifyAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace propeller

#endif  // PROPELLER_COMMON_MUTEX_H_
