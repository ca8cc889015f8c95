// EdgeCapture: the access-causality edges of the mount (capture_fs.h): which files each
// process opened before it wrote others (ProcessTable), kept in RAM and sent to the index
// nodes by a flusher thread — live processes' edges every `flush_interval_ms`, an ended
// process's at once. Weakly consistent: an edge whose send fails (a file deleted meanwhile,
// a node down) is dropped and counted, never retried; it can cost placement quality, never a
// search result.
//
// Thread-safe.
#ifndef PROPELLER_CLIENT_FUSE_EDGE_CAPTURE_H_
#define PROPELLER_CLIENT_FUSE_EDGE_CAPTURE_H_

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "client/fuse/process_table.h"
#include "client/lib/propeller.h"

namespace propeller::fuse {

struct EdgeCaptureOptions {
  Client* client = nullptr;  // REQUIRED; not owned
  uint32_t volume = 0;       // REQUIRED
  int64_t flush_interval_ms = 3000;
  // false: no edges are captured (processes are still identified: placement hints).
  bool capture_edges = true;
};

class EdgeCapture {
 public:
  explicit EdgeCapture(const EdgeCaptureOptions& options);
  // Stops the flusher (without a last flush: Flush first for that).
  ~EdgeCapture();
  EdgeCapture(const EdgeCapture&) = delete;
  EdgeCapture& operator=(const EdgeCapture&) = delete;

  void StartFlusher();
  void StopFlusher();

  // The process `pid` (false when it cannot be identified).
  bool Identify(pid_t pid, ProcessInfo* info);
  // An open of file `ino` of inode generation `generation` (0 = unknown) by `owner` (read: it
  // may read it; write: open for writing; created: by create, so it reads nothing); the mark
  // to give OnWriteClose. `producers`, when not null, receives the files that process read
  // before (placement hints).
  uint64_t OnOpen(const ProcessInfo& owner, uint64_t ino, uint32_t generation, bool reads,
                  bool write, std::vector<FileId>* producers);
  // `owner` closed file `ino` (of `generation`) that it wrote, opened with `mark`.
  void OnWriteClose(const ProcessInfo& owner, uint64_t ino, uint32_t generation, uint64_t mark);
  // File `ino` lost its last name: it leaves every process's reads and pending edges (a new
  // file may get its number).
  void Forget(uint64_t ino) { processes_.Forget(FileId{options_.volume, ino}); }
  // Sends every captured edge now (also done periodically and at unmount).
  void Flush();

  bool capture_edges() const { return options_.capture_edges; }
  uint64_t edges_sent() const { return edges_sent_.load(); }
  uint64_t edge_errors() const { return edge_errors_.load(); }
  uint64_t processes() const { return processes_.processes(); }

 private:
  void Send(const std::vector<CapturedEdge>& edges);
  void FlusherMain();

  const EdgeCaptureOptions options_;
  ProcessTable processes_;
  std::atomic<uint64_t> edges_sent_{0}, edge_errors_{0};

  std::thread flusher_;
  std::mutex flusher_mu_;
  std::condition_variable flusher_cv_;
  bool flusher_stop_ = false;  // Under flusher_mu_.
};

}  // namespace propeller::fuse

#endif  // PROPELLER_CLIENT_FUSE_EDGE_CAPTURE_H_
