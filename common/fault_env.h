// FaultInjectionEnv: wraps another Env and simulates crashes and power loss for tests
// (after LevelDB's fault_injection_test and SQLite's crash tests).
//
// It remembers, per file written through it, how many bytes have been synced. Then:
//  - SetFailAfter(n): the next n mutating operations (Append, Flush, Sync, Close, create,
//    rename, remove, truncate) succeed, every later one fails with IOError, as if the process
//    had died right there. n = -1 (the default) never fails.
//  - DropUnsyncedData(): truncates every tracked file to its synced length, as a power loss
//    would. Files created but never synced become empty. A preallocated file keeps its
//    reserved size, the bytes past its synced length read as zeros again (the reservation is
//    taken as durable at once, like directory entries: the harder case for recovery).
//  - ResetState(): forget the fault plan and the sync bookkeeping (after a simulated reboot).
//  - SetTransientFault(err, rate, seed, syncs_too): a fault the process lives through, such as
//    a full disk (ENOSPC) or a flaky device (EIO): each mutating operation fails with
//    IOError(err) with probability `rate` (1 = every one), until ClearTransientFault(). A
//    failed flush, sync or close first passes part of its bytes to the file (a write cut
//    short). Failed() stays false and later operations succeed again. `syncs_too` = false
//    spares fsyncs (a local file system reserves blocks at write(2), so a full disk fails
//    writes, not fsyncs). Deterministic for `seed`.
// Thread-safe.
#ifndef PROPELLER_COMMON_FAULT_ENV_H_
#define PROPELLER_COMMON_FAULT_ENV_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "common/env.h"

namespace propeller {

class FaultInjectionEnv : public Env {
 public:
  // `base` must outlive this Env.
  explicit FaultInjectionEnv(Env* base);
  ~FaultInjectionEnv() override;

  void SetFailAfter(int64_t n);
  void SetTransientFault(int err, double rate = 1.0, uint64_t seed = 1, bool syncs_too = true);
  void ClearTransientFault();
  // Operations refused by transient faults so far.
  int64_t TransientFaults() const;
  // True once an operation has been refused because of SetFailAfter.
  bool Failed() const;
  Status DropUnsyncedData();
  void ResetState();
  // Counts every mutating operation seen so far (for choosing random crash points).
  int64_t MutationCount() const;

  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override;
  Result<std::unique_ptr<WritableFile>> NewAppendableFile(const std::string& path) override;
  Result<std::unique_ptr<SequentialFile>> NewSequentialFile(const std::string& path) override;
  bool FileExists(const std::string& path) override;
  Result<std::vector<std::string>> GetChildren(const std::string& dir) override;
  Result<uint64_t> GetFileSize(const std::string& path) override;
  Status RemoveFile(const std::string& path) override;
  Status RenameFile(const std::string& from, const std::string& to) override;
  Status TruncateFile(const std::string& path, uint64_t size) override;
  Status CreateDirs(const std::string& path) override;
  Status RemoveRecursively(const std::string& path) override;
  Status SyncDir(const std::string& path) override;
  int64_t NowNanos() override;
  int64_t MonotonicNanos() override;

  // Internal, used by the file wrappers: counts a mutation; returns IOError when it must fail.
  // *transient (may be null) tells a transient fault from a simulated crash.
  Status CheckMutation(const char* what, bool* transient = nullptr);
  // A writer handed bytes up to `end` of `path` to the base file.
  void RecordWritten(const std::string& path, uint64_t end);
  void RecordPreallocated(const std::string& path, uint64_t size);
  // Where the data of `path` ends, for a sync about to start: the end written through this
  // env for a preallocated file (its size says nothing), else the base file's size.
  uint64_t DataEnd(const std::string& path);
  void RecordSynced(const std::string& path, uint64_t size);

 private:
  struct Tracked {
    uint64_t synced = 0;        // length known durable
    uint64_t written = 0;       // end of the bytes written through this env
    uint64_t preallocated = 0;  // reserved size (0: never preallocated)
  };
  Env* const base_;
  mutable std::mutex mu_;
  int64_t fail_after_ = -1;          // Under mu_. Remaining allowed mutations; -1 = unlimited.
  bool failed_ = false;              // Under mu_.
  int64_t mutations_ = 0;            // Under mu_.
  int transient_err_ = 0;            // Under mu_. 0 = none.
  double transient_rate_ = 0;        // Under mu_.
  bool transient_syncs_ = true;      // Under mu_.
  uint64_t transient_rng_ = 1;       // Under mu_. xorshift state.
  int64_t transient_faults_ = 0;     // Under mu_.
  std::map<std::string, Tracked> files_;  // Under mu_. By path.
};

}  // namespace propeller

#endif  // PROPELLER_COMMON_FAULT_ENV_H_
