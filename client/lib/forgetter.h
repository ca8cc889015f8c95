// Forgetter: the master forgets of deleted files, sent off the delete path (client.cc).
//
// Add queues one; a background thread (started by the first Add) sends them in batches as
// conditional forgets (the generation the client saw), so a forget that arrives after the
// inode number was reused by a fresh placement changes nothing at the master. Settle keeps
// this client's own requests in order: before it asks the master about a file again, a queued
// forget of it is dropped and one in flight is waited for. A forget that fails
// kForgetAttempts times, or is lost in a crash, only leaves a stale mapping, which a later
// create of that inode number replaces (AssignItem::fresh).
//
// Thread-safe.
#ifndef PROPELLER_CLIENT_LIB_FORGETTER_H_
#define PROPELLER_CLIENT_LIB_FORGETTER_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "common/record.h"
#include "common/status.h"
#include "schemas/messages.h"

namespace propeller {

// How long the forget thread lets forgets gather before sending a batch, and the batch size
// that sends at once. A forget only steers placement and ACG sizes, so a few milliseconds of
// delay cost nothing; one master transaction per batch instead of per delete is the point.
inline constexpr auto kForgetGather = std::chrono::milliseconds(5);
inline constexpr size_t kForgetBatch = 1024;
inline constexpr int kForgetAttempts = 3;

class Forgetter {
 public:
  using SendFn = std::function<Status(const wire::FilesRequest&)>;
  explicit Forgetter(SendFn send) : send_(std::move(send)) {}
  // Sends what is still queued (one attempt each), then stops the thread.
  ~Forgetter();
  Forgetter(const Forgetter&) = delete;
  Forgetter& operator=(const Forgetter&) = delete;

  void Add(FileId file, uint64_t generation);
  // Call before asking the master about `file`: drops its queued forget; with `wait`, also
  // waits until a batch in flight that holds it has been answered.
  void Settle(FileId file, bool wait);
  // Sends everything queued now on the calling thread, then waits for any batch the thread
  // has in flight. The first error, or OK.
  Status Flush(int attempts = kForgetAttempts);

 private:
  void Run();
  // Moves up to `max` queued forgets into the in-flight set. REQUIRES: mu_ held.
  std::vector<std::pair<FileId, uint64_t>> TakeLocked(size_t max);
  // Sends `batch` (in flight), retrying failures; then marks it done.
  Status Send(const std::vector<std::pair<FileId, uint64_t>>& batch, int attempts);

  const SendFn send_;
  std::mutex mu_;
  std::condition_variable work_cv_;  // queued_ grew, or stop_
  std::condition_variable done_cv_;  // a batch left in_flight_
  std::unordered_map<FileId, uint64_t, FileIdHash> queued_;  // file -> generation; under mu_
  std::unordered_set<FileId, FileIdHash> in_flight_;         // Under mu_.
  bool stop_ = false;                                        // Under mu_.
  std::thread thread_;                                       // Started under mu_.
};

}  // namespace propeller

#endif  // PROPELLER_CLIENT_LIB_FORGETTER_H_
