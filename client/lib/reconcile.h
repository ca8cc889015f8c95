// Reconcile: makes the index of a volume equal its backing tree (docs/reconcile.md). Changes
// made to the tree while no mount watched it — files created, changed, renamed, deleted,
// replaced by another type, an operation a crash cut off — are found by comparing an lstat
// walk of the tree with every record the index holds for the volume, and only the
// differences are sent: a kPut for each file new or different (paths, parent, type, size,
// mtime, ctime, owner, mode or link count: Unchanged in client/lib/reconcile_state.h), a
// kDelete for each record whose file is gone. A mount runs it at every start; `propeller
// import` of an imported tree runs it too.
//
// Every entry is lstat'ed: a directory's mtime says whether its list of names changed, not
// whether a file in it was written, so skipping unchanged directories would miss changed
// files. Nothing else is read of a file the index holds unchanged: its user attributes are
// read (its record built) only when it is new or changed — setting or removing an attribute
// changes the ctime, which is compared. The walk runs on every core
// (WalkTreeEntriesParallel) while another thread reads the index; the whole costs about what
// `find` takes to stat every entry (measured in docs/reconcile.md "Cost").
//
// Memory: about 100 bytes per indexed file plus its paths (HeldFiles), and at most 131,072
// walked files (as many again, with their paths) waiting for the index to be read.
//
// Reconcile may run on any thread; it starts its own (one reads the index, the others walk)
// and ends them before it returns. Not for a tree that others change while it runs: a change
// made during the walk may be reported as it was before (the next reconcile, or the mount's
// own capture, corrects it).
#ifndef PROPELLER_CLIENT_LIB_RECONCILE_H_
#define PROPELLER_CLIENT_LIB_RECONCILE_H_

#include <cstdint>
#include <functional>
#include <string>

#include "client/lib/propeller.h"
#include "common/status.h"

namespace propeller {

struct ReconcileStats {
  uint64_t walked = 0;     // entries of the tree (the root included)
  uint64_t indexed = 0;    // records the index held for the volume before
  uint64_t added = 0;      // files the index did not have
  uint64_t changed = 0;    // records rewritten (some field differed)
  uint64_t removed = 0;    // records whose file is gone
  uint64_t unreadable = 0; // entries that vanished or could not be read (nothing is removed)
  double seconds = 0;
};

struct ReconcileOptions {
  // Threads walking the tree; 0 = one per core, at most 8.
  unsigned walk_threads = 0;
  // When the index is read: alongside the walk, or, for tests (every order must give the same
  // index), whole before the walk starts or only after it ended.
  enum class IndexRead { kAlongsideWalk, kBeforeWalk, kAfterWalk };
  IndexRead index_read = IndexRead::kAlongsideWalk;
};

// Reconciles volume `volume`, whose root is the host directory `root`, through `client`
// (root's credentials: it reads every record). Errors: the walk's (IOError for an unreadable
// root, InvalidArgument for a non-directory) and the index's; nothing is deleted when the
// walk fails.
Status Reconcile(Client* client, const std::string& root, uint32_t volume,
                 ReconcileStats* stats, const ReconcileOptions& options = {});

// "reconciled /srv/data: 3 added, 1 changed, 2 removed of 10,000 entries in 0.4 s"
std::string ReconcileSummary(const std::string& root, const ReconcileStats& stats);

}  // namespace propeller

#endif  // PROPELLER_CLIENT_LIB_RECONCILE_H_
