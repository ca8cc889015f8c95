// IndexWriter: how the mount's file operations reach the index (docs/faults.md, "The mount").
//
// A file operation that succeeded on the backing tree must neither fail nor stall because the
// index cannot take its update (its node down or slow, its disk full). So every update is
// sent under a deadline (`timeout_ms`, Client::Deadline); when it fails for such a reason it
// goes to the mount's durable queue (PendingUpdates) and the operation succeeds. From then on
// the mount is *degraded*: every further update goes straight to the queue, behind the
// earlier ones, with no network wait, and lookups that need the index (Get, ResolveRoutes)
// are skipped — the deliverer does that work when it delivers. The deliverer thread sends the
// queue in order, with backoff, once no direct send is in flight (a late direct send must not
// overwrite what the queue delivered); the mount leaves the degraded state when the queue is
// empty.
//
// Delivery re-reads each queued kPut from the backing tree: the file's record as it is then,
// at the paths (queued, or the index's for a file with several links) that still name it; a
// kPut whose file no name holds any more is dropped (a later update in the queue, or one
// already sent, says what became of it). Deliveries are thus idempotent and never older than
// the tree, whatever order concurrent operations reached the queue in.
//
// Admission: while degraded, an operation that would add to the queue is refused with ENOSPC
// before it touches the backing tree when the queue's reserve is nearly used up (Admit), so
// no call reports a failure after changing the tree.
//
// Searches of the mount (query directories, the query engine, the embedded index node) ask
// WaitForScope first: while updates are pending under their scope they wait up to a bound,
// then fail with "index catching up (N updates pending)" instead of answering stale.
//
// Thread-safe.
#ifndef PROPELLER_CLIENT_FUSE_INDEX_WRITER_H_
#define PROPELLER_CLIENT_FUSE_INDEX_WRITER_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "client/fuse/backing_tree.h"
#include "client/fuse/pending_updates.h"
#include "client/lib/propeller.h"
#include "common/status.h"

namespace propeller::fuse {

struct IndexWriterOptions {
  Client* client = nullptr;  // REQUIRED; not owned
  // REQUIRED; not owned; outlives the writer: the volume's root, where deliveries re-read
  // the files.
  const BackingTree* tree = nullptr;
  uint32_t volume = 0;       // REQUIRED
  // REQUIRED: the durable queue (opened by the caller: its recovery decides whether the
  // mount may start). Not owned; outlives the writer.
  PendingUpdates* queue = nullptr;
  // Bound on the index calls of one file operation (Send, Get, ResolveRoutes), in total.
  int64_t timeout_ms = 2000;
  // While degraded, operations are refused (Admit: ENOSPC) once less than this much of the
  // queue's reserve is left.
  uint64_t admit_margin_bytes = 1 << 20;
  // Delivery retries: the first after this long, doubling up to max.
  int64_t retry_min_ms = 100;
  int64_t retry_max_ms = 5000;
};

struct IndexWriterStats {
  uint64_t sent = 0;            // updates acknowledged by the index at once
  uint64_t queued = 0;          // updates that went to the queue
  uint64_t delivered = 0;       // queued updates delivered later
  uint64_t refused = 0;         // updates the index refused as invalid (logged, dropped)
  uint64_t errors = 0;          // operations failed with EIO (could be neither sent nor queued)
  uint64_t admit_refusals = 0;  // operations refused with ENOSPC before they began (Admit)
  uint64_t pending = 0;         // updates in the queue now
  int64_t degraded_since_ns = 0;  // wall clock; 0 = not degraded
  std::string last_error;       // why the index could not take updates, last time
};

class IndexWriter {
 public:
  explicit IndexWriter(const IndexWriterOptions& options);
  // Stops the deliverer (what is still queued stays in the queue for the next run).
  ~IndexWriter();
  IndexWriter(const IndexWriter&) = delete;
  IndexWriter& operator=(const IndexWriter&) = delete;

  // Starts delivering what an earlier run left in the queue (and whatever comes).
  void Start();

  // Before an operation that will send updates changes the backing tree: 0, or ENOSPC when
  // the mount is degraded and its queue has no room left.
  int Admit();
  // Sends `ups` (whose file changes already happened) or queues them. `touched`: in-volume
  // paths whose index entries the updates change besides their records' paths (a rename's
  // old name), for WaitForScope. 0, or EIO when the updates could be neither acknowledged
  // nor queued (logged, naming `what`).
  int Send(std::vector<FileUpdate>& ups, const std::string& what,
           const std::vector<std::string>& touched = {});

  // True while updates wait in the queue: the index is behind the tree.
  bool degraded() const;
  // IndexWriterOptions::timeout_ms. A file operation holds a Client::Deadline of this long
  // over all its index calls, so none waits for the index longer in total.
  int64_t timeout_ms() const { return options_.timeout_ms; }
  // The index's record of `id`, under the deadline; Unavailable at once when degraded. When
  // it fails (not NotFound), the record the caller builds lacks what the index would have
  // added, so this thread's next Send queues its updates (delivery completes them).
  Result<FileRecord> Get(FileId id);
  // Client::ResolveRoutes under the deadline; nothing when degraded (the deletes are routed
  // when delivered, their conditions keep a new file with the same inode number safe).
  void ResolveRoutes(std::vector<FileUpdate>* ups);

  // 0 when no update is pending under in-volume `scope` (waiting up to `wait_ms` for the
  // queue to drain there), else how many still are.
  uint64_t WaitForScope(const std::string& scope, int64_t wait_ms) const;

  IndexWriterStats stats() const;

 private:
  void DeliverMain();
  // The batch to deliver for queued `batch`: kPuts re-read from the backing tree (see above).
  // Unavailable when the index cannot be asked about a file with several links.
  Status Refresh(const std::vector<FileUpdate>& batch, std::vector<FileUpdate>* out);
  int Queue(std::vector<FileUpdate>& ups, const std::string& what,
            const std::vector<std::string>& touched);
  void NoteFailure(const Status& s);

  const IndexWriterOptions options_;

  mutable std::mutex mu_;
  std::condition_variable cv_;  // state changes the deliverer waits for
  bool degraded_ = false;       // Under mu_.
  int in_flight_ = 0;           // Under mu_. Direct sends under way.
  int appending_ = 0;           // Under mu_. Queue appends under way.
  bool stop_ = false;           // Under mu_.
  int64_t degraded_since_ns_ = 0;  // Under mu_.
  std::string last_error_;         // Under mu_.
  std::thread deliverer_;

  std::atomic<uint64_t> sent_{0}, queued_{0}, delivered_{0}, refused_{0}, errors_{0};
  std::atomic<uint64_t> admit_refusals_{0};
  std::atomic<int64_t> last_refusal_log_ns_{0};
};

}  // namespace propeller::fuse

#endif  // PROPELLER_CLIENT_FUSE_INDEX_WRITER_H_
