// PendingUpdates: a mount's durable queue of index updates the index could not take
// (docs/faults.md). A file operation that succeeded on the backing tree must not fail or stall
// because the index is unreachable (its node down, its disk full): its update is appended
// here — written and synced before the operation returns — and delivered in order by the
// mount once the index takes updates again. While updates are pending for a scope, searches
// there wait for them (bounded) or fail with "index catching up", never answer stale.
//
// On disk (schemas/pending_format.h): <dir>/queue, records back to back, and <dir>/head, the
// offset of the first undelivered record (8 bytes, overwritten in place: no new block is
// needed on a full disk). The queue file has `reserve` bytes allocated ahead (fallocate, size
// unchanged), so appends keep working when the disk fills up: the reserve is what lets the
// mount keep its promise on a full disk. Not through Env, like LMDB: it needs that
// allocation, which Env does not offer; the integration tests fill a real tmpfs instead.
//
// Thread-safe. The batches are also kept in memory (they are what is delivered).
#ifndef PROPELLER_CLIENT_FUSE_PENDING_UPDATES_H_
#define PROPELLER_CLIENT_FUSE_PENDING_UPDATES_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "client/lib/propeller.h"
#include "common/status.h"

namespace propeller::fuse {

class PendingUpdates {
 public:
  // Opens the queue in `dir` (made 0700 if missing) and reads what an earlier run left (a
  // torn last record is cut off). `owner` names where the updates go (cluster, volume,
  // backing tree): a queue holding updates of another owner is refused (InvalidArgument, its
  // updates would go to the wrong index), an empty one is taken over. One process at a time
  // (Unavailable while another holds it). Corruption naming the file for damage before intact
  // records.
  static Result<std::unique_ptr<PendingUpdates>> Open(const std::string& dir, uint64_t reserve,
                                                      const std::string& owner);
  ~PendingUpdates();
  PendingUpdates(const PendingUpdates&) = delete;
  PendingUpdates& operator=(const PendingUpdates&) = delete;

  // Appends one batch, durably (synced) before returning. Kept in order behind what is there.
  // `touched`: in-volume paths it changes besides its records' paths (CountInScope).
  // ResourceExhausted when even the reserve is used up, IOError otherwise.
  Status Append(std::span<const FileUpdate> batch, std::span<const std::string> touched = {});
  // A copy of the oldest batch, or nullopt when nothing is pending.
  std::optional<std::vector<FileUpdate>> Front() const;
  // The oldest batch was delivered: forget it (durably). REQUIRES: !empty().
  Status PopFront();

  bool empty() const;
  uint64_t size() const;  // updates pending
  // Bytes the queue can still take without allocating (what is left of its reserve).
  uint64_t room() const;
  // Updates pending whose paths lie in in-volume `scope` (every one for "/").
  uint64_t CountInScope(const std::string& scope) const;
  // Waits until no update is pending in `scope` or `timeout_ms` passed; the count left.
  uint64_t WaitForScope(const std::string& scope, int64_t timeout_ms) const;

 private:
  struct Batch {
    std::vector<FileUpdate> updates;
    std::vector<std::string> touched;
    uint64_t end = 0;  // file offset after its record
  };
  PendingUpdates(std::string dir, uint64_t reserve) : dir_(std::move(dir)), reserve_(reserve) {}
  Status Recover();
  Status CheckOwner(const std::string& owner);
  Status WriteHeadLocked(uint64_t head);
  void ReserveLocked();  // best effort: allocate reserve_ bytes past the end

  const std::string dir_;
  const uint64_t reserve_;
  int fd_ = -1;       // the queue file, open for the object's life
  int head_fd_ = -1;  // the head file, likewise

  mutable std::mutex mu_;
  mutable std::condition_variable drained_;  // a batch was delivered
  std::deque<Batch> batches_;                // Under mu_.
  uint64_t head_ = 0;                        // Under mu_. Offset of batches_.front().
  uint64_t end_ = 0;                         // Under mu_. Where the next record goes.
  uint64_t count_ = 0;                       // Under mu_. Updates in batches_.
  uint64_t allocated_ = 0;                   // Under mu_. Bytes of the file allocated.
};

}  // namespace propeller::fuse

#endif  // PROPELLER_CLIENT_FUSE_PENDING_UPDATES_H_
