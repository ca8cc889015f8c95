// ProcessTable: who opened what, per process, for the access-causality graph (docs/capture.md).
//
// A FUSE request names the calling *thread* (docs/pitfalls.md FUSE-1: fuse_req_ctx()->pid is a
// tid). The table maps it to its process — thread-group id plus the process's start time, so a
// reused pid is a different process — reading /proc once per thread and caching the answer.
//
// Per process it keeps the files opened so far for reading, in order. Opening g for writing
// adds the edge f -> g for every f opened before (f != g), and so does closing g after
// writing it: a linker
// opens its output before it reads its inputs, and a strict "opened before the write-open"
// rule would never link objects to the binary. Each edge counts once per process (weight +1
// per process), however often the process reopens the file. Edges stay in RAM and are taken by
// Sweep(): those of exited processes at once, those of live ones every flush interval. They are
// weakly consistent (docs/capture.md): losing some never makes a search wrong.
//
// Inheritance between processes (docs/capture.md "The rule"): build tools run their
// work in trees of processes — make runs a shell, the shell a script, the script sed; a
// compiler driver runs cc1 and then as, which pass their data through a temporary outside the
// tree — so a process's reads also count for every ancestor (up to kMaxAncestors levels): a
// shell's redirect into command-list.h has the reads of the script's sed. A write takes as
// producers the writer's own reads and its descendants', never its ancestors' own reads (make's
// Makefile produced none of its targets) nor a sibling's, with one exception: when the parent
// read nothing itself — a driver such as gcc, whose stages are its children — the reads of its
// other children count too (cc1 read foo.c, `as` writes foo.o).
//
// What counts as a producer: a file opened for reading (O_RDONLY, or O_RDWR of an existing file
// without O_TRUNC). Files opened for writing are not producers: a file the process itself
// created or overwrote carries nothing into the next file it writes, and counting it turns a
// process that writes many files (PostMark, an unpacker, a logger) into an edge storm of
// written x written pairs. A file it reads back after writing is a producer again.
//
// Bounds: a process remembers its last kMaxOpened distinct producers (a long-running process
// that reads millions of files would otherwise make every write an edge storm), holds at most
// kMaxPendingEdges edges between flushes (more are dropped and counted), and at most
// kMaxProcesses processes are tracked (the least recently seen are dropped).
//
// Thread-safe: FUSE worker threads call Identify/OnOpen concurrently; Sweep runs on the
// flusher thread.
#ifndef PROPELLER_CLIENT_FUSE_PROCESS_TABLE_H_
#define PROPELLER_CLIENT_FUSE_PROCESS_TABLE_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/record.h"

namespace propeller::fuse {

struct ProcessKey {
  uint32_t pid = 0;     // thread-group id
  uint64_t start = 0;   // start time in clock ticks since boot (/proc/PID/stat field 22)
  bool operator==(const ProcessKey&) const = default;
  bool operator<(const ProcessKey& o) const {
    return pid != o.pid ? pid < o.pid : start < o.start;
  }
};

struct ProcessInfo {
  ProcessKey key;
  ProcessKey parent;   // {0, 0} when unknown (parent gone, or pid 1's parent)
  std::string app;     // the executable's name (comm), e.g. "cc1"
};

struct CapturedEdge {
  FileId src;
  FileId dst;
  uint32_t weight = 0;
  uint32_t src_generation = 0;  // the files' inode generations when opened (0 = unknown)
  uint32_t dst_generation = 0;
};

class ProcessTable {
 public:
  static constexpr size_t kMaxOpened = 256;
  static constexpr size_t kMaxPendingEdges = 1 << 16;
  static constexpr size_t kMaxProcesses = 4096;
  // How far up the process tree a read is collected.
  static constexpr size_t kMaxAncestors = 16;
  // At most this many producers are reported for placement.
  static constexpr size_t kMaxProducers = 16;

  // `proc_root` is normally "/proc" (tests may point it elsewhere).
  explicit ProcessTable(std::string proc_root = "/proc", int64_t flush_interval_ns = 3'000'000'000);

  // The process of thread `tid`; false when /proc has no such thread any more (the caller then
  // captures nothing for this request). Cached per thread; the cache entry is checked against
  // /proc again after a second, so a recycled tid is noticed.
  bool Identify(uint32_t tid, int64_t now_ns, ProcessInfo* out);

  // Process `p` opened `file`: `reads` = its content is read (a producer from now on),
  // `writes` = it is written. For a write-open, `producers` (may be null) receives the files
  // read before, most recent first, at most kMaxProducers: the placement hint of
  // docs/architecture.md §5. Returns a mark of this moment for OnWriteClose (increasing; never 0).
  // `generation`: the file's inode generation (0 = unknown), carried into its edges.
  uint64_t OnOpen(const ProcessInfo& p, const FileId& file, bool reads, bool writes,
                  int64_t now_ns, std::vector<FileId>* producers, uint32_t generation = 0);
  // Process `p` closed `file` after opening it for writing: edges from everything it opened
  // until now. `since` = the mark OnOpen returned for that write-open: the edges from files
  // opened before it were added then, so only files first opened after it are visited (a
  // process appending to many files after reading many would otherwise walk its whole window
  // twice per file). 0 = visit everything.
  void OnWriteClose(const ProcessInfo& p, const FileId& file, int64_t now_ns,
                    uint64_t since = 0, uint32_t generation = 0);

  // `file` is gone (its last name was removed): it leaves every process's reads and pending
  // edges, so a file that reuses its inode number inherits nothing.
  void Forget(const FileId& file);

  // Appends the edges due: every edge of processes that exited (or all processes when `all`),
  // and of live processes whose last flush is older than the interval. Exited processes are
  // forgotten.
  void Sweep(int64_t now_ns, bool all, std::vector<CapturedEdge>* out);

  size_t processes() const;
  // Edges dropped because a process exceeded kMaxPendingEdges.
  uint64_t dropped_edges() const;

 private:
  struct Proc {
    ProcessInfo info;
    std::vector<FileId> opened;                       // in first-open order
    std::vector<uint64_t> opened_mark;                // the table's mark when each was added
    // The files of `opened`, each with its inode generation when last opened.
    std::unordered_map<FileId, uint32_t, FileIdHash> opened_set;
    struct PairHash {
      size_t operator()(const std::pair<FileId, FileId>& p) const {
        return FileIdHash()(p.first) * 31 + FileIdHash()(p.second);
      }
    };
    // (src, dst), once each, with the ends' generations.
    std::unordered_map<std::pair<FileId, FileId>, std::pair<uint32_t, uint32_t>, PairHash> edges;
    bool reads_itself = false;  // it opened a file for reading itself (not a descendant)
    int64_t last_flush_ns = 0;
    int64_t last_seen_ns = 0;
  };
  struct Cached {
    ProcessInfo info;
    int64_t checked_ns = 0;
  };

  bool ReadProcess(uint32_t tid, ProcessInfo* out);
  bool StartTime(uint32_t pid, uint64_t* start, uint32_t* ppid);
  bool Alive(const ProcessKey& key);
  // Adds `file` (of inode generation `generation`) to the opened list of `proc`.
  // REQUIRES: mu_.
  void Remember(Proc* proc, const FileId& file, uint32_t generation);
  static void TakeEdges(Proc* proc, std::vector<CapturedEdge>* out);
  Proc* GetProc(const ProcessInfo& info, int64_t now_ns);  // REQUIRES: mu_
  Proc* ParentOf(const ProcessInfo& p, int64_t now_ns);    // REQUIRES: mu_; null if none
  // The process and its parent's entry (created if missing; null without a parent); adds the
  // edges "everything opened after mark `since` -> file" and fills `producers`.
  // REQUIRES: mu_.
  void AddEdgesTo(const ProcessInfo& p, const FileId& file, uint32_t generation,
                  int64_t now_ns, uint64_t since, Proc** proc, Proc** parent,
                  std::vector<FileId>* producers);

  const std::string proc_root_;
  const int64_t flush_interval_ns_;

  mutable std::mutex mu_;
  std::unordered_map<uint32_t, Cached> threads_;       // Under mu_. tid -> process
  std::map<ProcessKey, std::unique_ptr<Proc>> procs_;  // Under mu_.
  uint64_t dropped_edges_ = 0;                         // Under mu_.
  uint64_t mark_ = 1;  // Under mu_. Increases with every remembered open (OnOpen's marks).
};

}  // namespace propeller::fuse

#endif  // PROPELLER_CLIENT_FUSE_PROCESS_TABLE_H_
