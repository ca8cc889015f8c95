// Wal: the index node's write-ahead log — one log for all ACGs, sequential appends, group
// commit (docs/architecture.md §6, §10). Format: schemas/wal_format.h.
//
// Append() writes a record and hands it to the OS before returning (it survives kill -9).
// Each segment is preallocated (segment_bytes) so that appends overwrite reserved zeros and a
// sync commits no size change. A segment is rolled once its records fill that size, and a
// clean close cuts the last one to its records, so only the last segment can end in zeros
// (after a crash), which recovery reads as the end of the log.
// kDefault: a background thread fsyncs at least every group_commit_interval_ns.
// kSync:    Append() returns only after an fsync covering its record; concurrent appenders
//           share one fsync (the first waiter syncs for everyone queued behind it).
// An fsync failure is sticky: every later Append fails (after a failed fsync the kernel may
// have dropped the dirty pages, so retrying would lie; see PostgreSQL's "fsyncgate"). A failed
// write is not: its record is not acknowledged, and the next Append first cuts the segment
// back to its last complete record and starts a new one (RepairLocked), so a log on a full disk
// takes updates again once space returns, and a torn record never sits in front of others.
//
// Thread-safety: all methods are thread-safe. Lock order: Wal::mu_ is a leaf lock, except that
// the `on_logged` callback of Append runs under it (it must only take locks below it: the
// ACG cache locks).
#ifndef PROPELLER_INDEXNODE_WAL_H_
#define PROPELLER_INDEXNODE_WAL_H_

#include <cstdint>
#include <functional>
#include <memory>

#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/env.h"
#include "common/mutex.h"
#include "common/status.h"
#include "indexnode/engine.h"

namespace propeller {

class Wal {
 public:
  struct Options {
    Env* env = nullptr;  // REQUIRED
    std::string dir;     // REQUIRED; created if missing
    Durability durability = Durability::kDefault;
    int64_t group_commit_interval_ns = 10'000'000;
    uint64_t segment_bytes = 64ull << 20;
  };
  using ReplayFn = std::function<Status(uint64_t lsn, std::string_view payload)>;

  // Opens the log in options.dir, calling `replay` for every intact record in LSN order (a
  // torn tail of the last segment is truncated away). New records get LSNs greater than every
  // replayed one and >= min_next_lsn. Errors: IOError, Corruption (file and offset named), or
  // whatever `replay` returns.
  static Result<std::unique_ptr<Wal>> Open(const Options& options, uint64_t min_next_lsn,
                                           const ReplayFn& replay);
  // Syncs and closes (unless Crash() was called); the first error, if any (a final sync
  // that failed: acknowledged records may not be durable). Later calls return OK and Append
  // fails. The destructor closes when this was not called (and logs an error).
  Status Close();
  ~Wal();

  // Appends one record. `on_logged(lsn)` runs after the record is written and before any
  // later record is, under the log lock: callers use it to apply updates to caches in exactly
  // log order. Returns the record's LSN once it is acknowledged per the durability level.
  Result<uint64_t> Append(std::string_view payload,
                          const std::function<void(uint64_t lsn)>& on_logged);

  // Runs `fn(next_lsn)` under the log lock: no record is appended meanwhile, and every record
  // appended before has had its on_logged run (a split switches routes here).
  void RunLocked(const std::function<void(uint64_t next_lsn)>& fn);

  // fsyncs everything written so far.
  Status Sync();

  // Deletes whole segments all of whose records have LSN < lowest_needed_lsn.
  Status DeleteObsolete(uint64_t lowest_needed_lsn);

  uint64_t next_lsn() const;
  uint64_t synced_lsn() const;  // every record with LSN <= this is durable
  uint64_t bytes() const;  // total size of the live segments

  // Test hook: stops the sync thread and closes the file without syncing.
  void Crash();

 private:
  struct Segment {
    uint64_t first_lsn;
    std::string path;
    uint64_t size;
  };

  explicit Wal(const Options& options);
  Status Recover(uint64_t min_next_lsn, const ReplayFn& replay);
  Status StartSegmentLocked() PROPELLER_REQUIRES(mu_);
  // After a failed write: cut the segment to its complete records, sync, start a new one.
  Status RepairLocked() PROPELLER_REQUIRES(mu_);
  // Syncs what was written; releases mu_ during the fsync (sync_in_progress_ meanwhile).
  Status SyncLocked() PROPELLER_REQUIRES(mu_);
  void SyncThreadMain();

  const Options options_;

  mutable Mutex mu_;
  CondVar cv_;  // with mu_: signalled when synced_lsn_ advances or a sync ends
  // Oldest first; back() is current.
  std::vector<Segment> segments_ PROPELLER_GUARDED_BY(mu_);
  // The current segment (appends).
  std::unique_ptr<WritableFile> file_ PROPELLER_GUARDED_BY(mu_);
  // A second handle on the current segment used only for fsync, by the one thread that set
  // sync_in_progress_, outside mu_: fsync on any descriptor of a file makes all of the file's
  // written data durable, so appends never wait behind an fsync in kDefault mode.
  std::unique_ptr<WritableFile> sync_file_;  // Replaced under mu_ only when !sync_in_progress_.
  uint64_t next_lsn_ PROPELLER_GUARDED_BY(mu_) = 1;
  uint64_t written_lsn_ PROPELLER_GUARDED_BY(mu_) = 0;  // last LSN handed to the OS
  uint64_t synced_lsn_ PROPELLER_GUARDED_BY(mu_) = 0;   // last LSN known durable
  bool sync_in_progress_ PROPELLER_GUARDED_BY(mu_) = false;
  Status sticky_error_ PROPELLER_GUARDED_BY(mu_);
  bool broken_ PROPELLER_GUARDED_BY(mu_) = false;  // a write failed; RepairLocked first
  bool stopping_ PROPELLER_GUARDED_BY(mu_) = false;
  bool crashed_ PROPELLER_GUARDED_BY(mu_) = false;
  bool closed_ PROPELLER_GUARDED_BY(mu_) = false;
  bool preallocate_warned_ PROPELLER_GUARDED_BY(mu_) = false;
  std::string scratch_ PROPELLER_GUARDED_BY(mu_);  // record encoding buffer
  std::thread sync_thread_;                  // kDefault only
};

}  // namespace propeller

#endif  // PROPELLER_INDEXNODE_WAL_H_
