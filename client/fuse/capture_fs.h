// CaptureFs: the Propeller mount (docs/architecture.md §2, §4, §9). A low-level libfuse passthrough
// of a backing directory that
//   - captures, per process, which files were opened before which file was written (the ACG
//     edges of ProcessTable), kept in RAM and sent to the index nodes by a flusher thread;
//   - keeps the index exact: on create, mkdir, mknod, symlink, link, unlink, rmdir, rename
//     (a directory's whole subtree gets its new paths), setattr, user.* setxattr/removexattr
//     and on close of a file opened for writing, the file's new record reaches its index node
//     before the call returns (libpropeller's acknowledged Update), or, when the index cannot
//     take it within a bound, the mount's durable queue (IndexWriter, index_writer.h: the
//     call succeeds, searches wait for the queue); the directories whose
//     entries changed (their mtime, ctime, nlink) are re-indexed in the same request. A file
//     this mount creates (exclusive open, mkdir, mknod, symlink) is marked `created`, so the
//     master places it afresh even if a forget of its inode number's previous file is late.
//     An unlink, rmdir or rename over a file prepares the file's delete before the name goes:
//     its route (Client::ResolveRoutes) and its condition (the path and the ctime seen then;
//     DeleteApplies in common/record.h), so a create elsewhere that reuses the inode number
//     at once keeps its record and its mapping;
//   - serves query directories: any path component starting with '?' is a read-only directory
//     of symbolic links to the matches under its parent, computed at opendir with the calling
//     process's credentials (docs/architecture.md §10).
//
// Files are identified as (volume, backing inode number); the volume is the backing root
// registered with the master.
//
// The pieces (each file says more):
//   inode_table.h    the inodes the kernel knows, their names, and the virtual inodes of query
//                    directories; paths are the handles (no descriptor per inode)
//   backing_tree.h   the system calls on those paths: from a descriptor of the backing
//                    directory, at any length, never through a symbolic link
//   dir_cache.h      descriptors of the directories used most, so a call walks one name
//   open_files.h     open handles (which also serve files whose names are gone), kernel
//                    passthrough of open files, set-ID bits (KILLPRIV_V2)
//   query_dirs.h     query directories: per-caller listings, entry names, "index catching up"
//   edge_capture.h   ACG edges (ProcessTable) and their flusher thread
//   file_indexer.h   the index updates an operation makes (records, directories, deletes,
//                    renamed subtrees), handed to
//   index_writer.h   which sends them under a deadline or queues them (pending_updates.h)
//   session.h        the FUSE session: mount, worker loop, polling reader, stop
//   errno_map.h      the one Status -> errno mapping
// This file holds the operation handlers that put them together.
//
// Set-ID bits: the mount negotiates FUSE_HANDLE_KILLPRIV_V2 (kernel_io.h), which libfuse 3.14
// cannot ask for, through its own read and writev on /dev/fuse. The daemon then drops
// set-user-ID and set-group-ID on write, truncate and chown as the VFS would, and the kernel
// stops asking for security.capability before every write(2) (once per inode instead).
//
// Kernel passthrough: the mount also asks for FUSE_PASSTHROUGH the same way, and answers opens
// of regular files with the backing file registered with the kernel, so reads, writes and
// mmap skip the daemon (not with --writeback, which the kernel does not combine with it).
// Opens, closes (FLUSH: the inline index update) and every namespace operation still come
// to the daemon, so capture and indexing are unchanged.
//
// Threading: FUSE callbacks run on libfuse's worker threads; no callback waits on the network
// except for the acknowledged index update (bounded by IndexWriterOptions::timeout_ms, then
// queued) and, for a query directory, its search. ACG edges go out on the flusher thread.
#ifndef PROPELLER_CLIENT_FUSE_CAPTURE_FS_H_
#define PROPELLER_CLIENT_FUSE_CAPTURE_FS_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "client/fuse/backing_tree.h"
#include "client/fuse/index_writer.h"
#include "client/lib/propeller.h"
#include "common/status.h"

namespace propeller::fuse {

struct CaptureFsOptions {
  std::string backing;     // REQUIRED: an absolute, existing directory
  // REQUIRED; not owned; outlives the CaptureFs: `backing`, open (BackingTree::Open).
  const BackingTree* tree = nullptr;
  std::string mountpoint;  // REQUIRED: an absolute, existing directory (not inside backing)
  uint32_t volume = 0;     // REQUIRED: the volume id of `backing` (Client::RegisterVolume)
  Client* client = nullptr;  // REQUIRED; not owned; outlives the CaptureFs
  // REQUIRED; not owned; outlives the CaptureFs: where index updates go (sent or queued).
  IndexWriter* index = nullptr;
  // A query directory's listing waits this long for updates still queued under its scope,
  // then fails with EAGAIN ("index catching up", logged).
  int64_t search_wait_ms = 2000;
  // Kernel caching (docs/pitfalls.md FUSE-7: writeback cache makes the kernel own size and mtime).
  bool writeback = false;
  // Kernel passthrough of open files' reads, writes and mmap to the backing files
  // (kernel_io.h; Linux 6.9+, root). The kernel refuses it with the writeback cache; without
  // it, or where it is refused, the daemon serves the I/O itself.
  bool passthrough = true;
  // Backing directories kept open for the directory inodes used most (dir_cache.h).
  size_t dir_cache = 256;
  double entry_timeout_s = 1.0;
  double attr_timeout_s = 1.0;
  // allow_other + default_permissions (docs/architecture.md §10); needs root (or user_allow_other).
  bool allow_other = true;
  int max_threads = 10;               // libfuse worker threads
  // After each request it served, one more thread (the poller) keeps reading /dev/fuse this
  // many microseconds without sleeping, so back-to-back calls skip a thread wake-up each
  // (capture_fs.cc, "the polling reader"). 0 = no poller. Costs CPU only while calls keep
  // coming: at most one spinning thread, for this long after the last request.
  int64_t poll_us = 50;
  int64_t edge_flush_interval_ms = 3000;  // live processes' edges go out this often
  // false: no ACG edges are captured (indexing stays exact; new files are still placed by
  // their process's application).
  bool capture_edges = true;
  bool debug = false;                 // libfuse's request log on stderr
};

struct CaptureFsStats {
  uint64_t read_errors = 0;     // calls failed because the changed file could not be read
  uint64_t edges_sent = 0;
  uint64_t edge_errors = 0;     // edges dropped (weakly consistent)
  uint64_t query_dirs = 0;      // query-directory listings computed
  uint64_t processes = 0;       // processes tracked now
  uint64_t passthrough_opens = 0;  // opens answered in kernel passthrough mode
  uint64_t polled_requests = 0;    // requests served by the polling reader
};

class CaptureFs {
 public:
  // Mounts options.backing at options.mountpoint. Errors: InvalidArgument (options),
  // IOError (backing unreadable, mount failed: the message says why, e.g. not root).
  static Result<std::unique_ptr<CaptureFs>> Mount(const CaptureFsOptions& options);
  // Unmounts (if still mounted) and flushes the captured edges.
  ~CaptureFs();
  CaptureFs(const CaptureFs&) = delete;
  CaptureFs& operator=(const CaptureFs&) = delete;

  // Serves requests until the file system is unmounted (fusermount3 -u) or Stop() is called.
  // Multi-threaded. Returns an error only if the session loop failed.
  Status Run();
  // Makes Run() return soon; safe from any thread (not from a signal handler).
  void Stop();
  // Sends every captured edge now (also done periodically and at unmount).
  void FlushEdges();

  CaptureFsStats stats() const;

  class Impl;

 private:
  explicit CaptureFs(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace propeller::fuse

#endif  // PROPELLER_CLIENT_FUSE_CAPTURE_FS_H_
