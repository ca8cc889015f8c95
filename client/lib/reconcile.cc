#include "client/lib/reconcile.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "client/lib/reconcile_state.h"
#include "common/dir_fd.h"
#include "common/tree_walk.h"

namespace propeller {
namespace {

constexpr size_t kBatch = 1000;
// Files the walking threads keep, together, while the index is read (about 100 bytes each, and
// their paths); then they wait for the index. On two cores both are bound by the processor,
// and a reconcile of 1,000,000 files took as long when the walk waited from the start as when
// it kept every file (1.6 s), holding 150 MB instead of 300.
constexpr size_t kMaxWaiting = 1 << 17;
// Walking threads by default: one per core, at most this many. Measured on two cores only; a
// file system's own locks may not take more in parallel.
constexpr unsigned kMaxDefaultWalkThreads = 8;

std::string Thousands(uint64_t n) {
  std::string s = std::to_string(n);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<size_t>(i), ",");
  return s;
}

// Reads again the record of a file the walk met earlier, from its first path: its directory
// is no longer open. Consecutive files of one directory open it once.
class Rereader {
 public:
  Rereader(int root, uint32_t volume) : root_(root), volume_(volume) {}

  // The record of file `ino` at `paths` (joined; the walk's), its parent `parent_ino`. False
  // when the file there is gone or is another file now (the tree changed since the walk).
  bool Read(uint64_t ino, std::string_view paths, uint64_t parent_ino, FileRecord* record) {
    std::vector<std::string> all = SplitPaths(paths);
    const std::string& path = all[0];
    int dir = -1;
    std::string name;
    if (!OpenParent(path, &dir, &name)) return false;
    if (!ReadFileRecordAt(dir, name, path, volume_, parent_ino, record).ok() ||
        record->id.ino != ino) {
      return false;
    }
    record->paths = std::move(all);
    return true;
  }

  // The inode generation (InodeGeneration) of regular file `ino` at in-volume `path`; 0 when
  // it cannot be opened, has none, or is another file now.
  uint32_t Generation(uint64_t ino, const std::string& path) {
    int dir = -1;
    std::string name;
    if (!OpenParent(path, &dir, &name)) return 0;
    UniqueFd fd(::openat(dir, name.c_str(),
                         O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
    struct stat st;
    if (!fd.valid() || ::fstat(fd.get(), &st) != 0 || static_cast<uint64_t>(st.st_ino) != ino ||
        !S_ISREG(st.st_mode)) {
      return 0;
    }
    return InodeGeneration(fd.get());
  }

 private:
  // The directory holding in-volume `path` (open; kept for the next call) and the name in it.
  bool OpenParent(const std::string& path, int* dir, std::string* name) {
    if (path == "/") {
      *dir = root_;
      *name = ".";
      return true;
    }
    const std::string_view parent = PathParent(path);
    if (!dir_.valid() || parent != dir_path_) {
      dir_path_ = parent;
      if (OpenDirBeneath(root_, std::string_view(dir_path_).substr(1), &dir_) != 0) {
        dir_.Reset();
        return false;
      }
    }
    *dir = dir_.get();
    *name = PathBaseName(path);
    return true;
  }

  const int root_;
  const uint32_t volume_;
  std::string dir_path_;  // of dir_
  UniqueFd dir_;
};

// A walked file met before the index was read whole: compared once it is.
struct WalkedFile {
  uint64_t ino = 0;
  FileState state;
  PathArena::Ref paths;  // joined
};

// What one walking thread keeps (TreeEntry::worker): nothing in it is shared.
struct Worker {
  Worker(int root, uint32_t volume) : rereader(root, volume) {}
  HeldFiles::Finger finger;
  bool compared = false;            // the index is read whole and `waiting` was compared
  std::vector<WalkedFile> waiting;  // met before the index was read whole
  PathArena waiting_paths;
  Rereader rereader;
  std::vector<FileUpdate> batch;  // puts not sent yet
  std::string joined;             // scratch
  uint64_t added = 0, changed = 0;
  uint64_t vanished = 0;  // files that waited and were gone (or replaced) when read again
};

// How it runs (docs/reconcile.md "Cost"): a thread reads the index (a search of every record
// of the volume, streamed into HeldFiles) while the tree is walked, on every core, with an
// lstat per entry (WalkTreeEntriesParallel). Until the index is read whole, walked files wait
// as WalkedFile; then each walking thread compares those it holds, and every later entry as
// it meets it. Only a new or changed file costs its record (the user attributes are read and
// the update is built); one that waited has its record read again from its path.
class Reconciler {
 public:
  Reconciler(Client* client, const std::string& root, uint32_t volume,
             const ReconcileOptions& options, ReconcileStats* stats)
      : client_(client), root_(root), volume_(volume), options_(options), stats_(stats) {}

  ~Reconciler() {
    cancel_ = true;  // an error ended the walk: the search stops at its next hit
    if (searcher_.joinable()) searcher_.join();
  }

  Status Run() {
    PROPELLER_RETURN_IF_ERROR(OpenRoot().WithContext("reconciling " + root_));
    const unsigned threads =
        options_.walk_threads != 0
            ? options_.walk_threads
            : std::clamp(std::thread::hardware_concurrency(), 1u, kMaxDefaultWalkThreads);
    max_waiting_ = std::max<size_t>(1, kMaxWaiting / threads);
    for (unsigned i = 0; i < threads; ++i) {
      workers_.push_back(std::make_unique<Worker>(root_fd_.get(), volume_));
    }

    using IndexRead = ReconcileOptions::IndexRead;
    if (options_.index_read != IndexRead::kAfterWalk) StartSearch();
    if (options_.index_read == IndexRead::kBeforeWalk) searcher_.join();
    TreeWalkOptions wo;
    wo.volume = volume_;
    TreeWalkStats ws;
    Status walked = WalkTreeEntriesParallel(
        root_fd_.get(), wo, threads, [this](TreeEntry& e) { return OnEntry(e); }, &ws);
    stats_->walked = ws.files + ws.dirs;
    if (walked.ok() && options_.index_read == IndexRead::kAfterWalk) StartSearch();
    for (auto& w : workers_) {
      if (walked.ok() && !w->compared) walked = CompareWaiting(w.get());
      if (walked.ok()) walked = Flush(w.get());
    }
    PROPELLER_RETURN_IF_ERROR(walked.WithContext("reconciling " + root_));
    stats_->indexed = held_.count();
    stats_->unreadable = ws.skipped;
    for (auto& w : workers_) {
      stats_->added += w->added;
      stats_->changed += w->changed;
      stats_->unreadable += w->vanished;
    }
    // When an entry could not be read, nothing is removed (it may still exist).
    if (stats_->unreadable == 0) PROPELLER_RETURN_IF_ERROR(DeleteUnseen());
    return Status::OK();
  }

 private:
  Status OpenRoot() {
    struct stat st;
    if (::lstat(root_.c_str(), &st) != 0) return Status::IOError("stat " + root_, errno);
    if (!S_ISDIR(st.st_mode)) return Status::InvalidArgument(root_ + " is not a directory");
    root_fd_.Reset(::open(root_.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!root_fd_.valid()) return Status::IOError("open " + root_, errno);
    return Status::OK();
  }

  // Reads the index into held_ on a thread of its own. held_ is the searcher's until
  // held_ready_, then the walk's.
  void StartSearch() {
    search_started_ = true;
    searcher_ = std::thread([this] {
      ClientSearchOptions so;
      so.volume = volume_;
      so.scope = "/";  // the caller's credentials: root (the mount, import) reads every record
      search_status_ = client_->Search("size>=0", so, [this](const ClientHit& h) {
        held_.Add(h.record);
        return !cancel_.load(std::memory_order_relaxed);
      });
      held_.Seal();
      held_ready_.store(true, std::memory_order_release);
      held_ready_.notify_all();
    });
  }

  // Compares a walked entry, or keeps it to compare once the index is read.
  Status OnEntry(TreeEntry& e) {
    Worker* w = workers_[e.worker()].get();
    if (!w->compared && (held_ready_.load(std::memory_order_acquire) ||
                         (w->waiting.size() >= max_waiting_ && search_started_))) {
      held_ready_.wait(false, std::memory_order_acquire);
      PROPELLER_RETURN_IF_ERROR(CompareWaiting(w));
    }
    std::string_view paths = e.path(0);
    if (e.path_count() > 1) {
      w->joined.clear();
      for (size_t i = 0; i < e.path_count(); ++i) {
        if (i != 0) w->joined.push_back('\0');
        w->joined.append(e.path(i));
      }
      paths = w->joined;
    }
    const uint64_t ino = static_cast<uint64_t>(e.stat().st_ino);
    const FileState now = StateOf(e.stat(), e.parent_ino());
    if (!w->compared) {
      w->waiting.push_back(WalkedFile{ino, now, w->waiting_paths.Add(paths)});
      return Status::OK();
    }
    if (!Differs(w, ino, now, paths)) return Status::OK();
    return Put(w, e.TakeRecord());
  }

  // Compares the files `w` kept while the index was read. REQUIRES: held_ready_, or (the
  // calling thread only, the walk over) the searcher started: this waits for it.
  Status CompareWaiting(Worker* w) {
    w->compared = true;
    if (!held_ready_.load(std::memory_order_acquire)) searcher_.join();
    PROPELLER_RETURN_IF_ERROR(search_status_);
    for (const WalkedFile& f : w->waiting) {
      const std::string_view paths = w->waiting_paths.Get(f.paths);
      if (!Differs(w, f.ino, f.state, paths)) continue;
      FileRecord rec;
      if (!w->rereader.Read(f.ino, paths, f.state.parent_ino, &rec)) {
        ++w->vanished;
        continue;
      }
      PROPELLER_RETURN_IF_ERROR(Put(w, std::move(rec)));
    }
    w->waiting = {};
    w->waiting_paths = PathArena{};
    return Status::OK();
  }

  // Whether the walked file `ino` is new or differs from the index (counted in `w`); marks
  // its record seen.
  bool Differs(Worker* w, uint64_t ino, const FileState& now, std::string_view now_paths) {
    HeldFile* h = held_.Find(ino, &w->finger);
    if (h == nullptr) {
      ++w->added;
      return true;
    }
    HeldFiles::MarkSeen(h);
    if (Unchanged(h->state, held_.Paths(*h), now, now_paths)) return false;
    ++w->changed;
    return true;
  }

  Status Put(Worker* w, FileRecord&& rec) {
    // A new or changed regular file carries its inode generation: where the index knows
    // another one, this is a new file that took a deleted file's number while nothing was
    // mounted, and the old file's ACG edges go (docs/capture.md "Identity").
    if (rec.type == FileType::kRegular && !rec.paths.empty()) {
      rec.inode_generation = w->rereader.Generation(rec.id.ino, rec.paths[0]);
    }
    FileUpdate u;
    u.op = UpdateOp::kPut;
    u.record = std::move(rec);
    u.app = "reconcile";
    w->batch.push_back(std::move(u));
    return w->batch.size() >= kBatch ? Flush(w) : Status::OK();
  }

  Status Flush(Worker* w) {
    if (w->batch.empty()) return Status::OK();
    PROPELLER_RETURN_IF_ERROR(client_->Update(w->batch));
    w->batch.clear();
    return Status::OK();
  }

  // Deletes the records whose file the walk did not meet. The delete is conditional
  // (DeleteApplies: the stored paths and ctime), so a file that took the number meanwhile
  // keeps its record.
  Status DeleteUnseen() {
    std::vector<FileUpdate> batch;
    for (const HeldFile& h : held_.files()) {
      if (h.seen || h.duplicate) continue;
      FileUpdate u;
      u.op = UpdateOp::kDelete;
      u.record.id = FileId{volume_, h.ino};
      u.record.paths = SplitPaths(held_.Paths(h));
      u.record.ctime = CtimeOf(h.state);
      batch.push_back(std::move(u));
      ++stats_->removed;
      if (batch.size() >= kBatch) {
        PROPELLER_RETURN_IF_ERROR(client_->Update(batch));
        batch.clear();
      }
    }
    return batch.empty() ? Status::OK() : client_->Update(batch);
  }

  Client* const client_;
  const std::string root_;
  const uint32_t volume_;
  const ReconcileOptions options_;
  ReconcileStats* const stats_;
  UniqueFd root_fd_;
  std::vector<std::unique_ptr<Worker>> workers_;
  size_t max_waiting_ = 0;  // per walking thread

  std::thread searcher_;
  std::atomic<bool> cancel_{false};
  std::atomic<bool> held_ready_{false};
  bool search_started_ = false;  // set before the walk starts, or after it ended
  HeldFiles held_;         // the searcher's until held_ready_, then the walk's
  Status search_status_;  // as held_
};

}  // namespace

Status Reconcile(Client* client, const std::string& root, uint32_t volume,
                 ReconcileStats* stats, const ReconcileOptions& options) {
  *stats = ReconcileStats{};
  const auto start = std::chrono::steady_clock::now();
  PROPELLER_RETURN_IF_ERROR(Reconciler(client, root, volume, options, stats).Run());
  stats->seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return Status::OK();
}

std::string ReconcileSummary(const std::string& root, const ReconcileStats& s) {
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "reconciled %s: %s added, %s changed, %s removed of %s entries in %.1f s%s",
                root.c_str(), Thousands(s.added).c_str(), Thousands(s.changed).c_str(),
                Thousands(s.removed).c_str(), Thousands(s.walked).c_str(), s.seconds,
                s.unreadable != 0 ? (", " + Thousands(s.unreadable) +
                                     " unreadable entries (nothing removed)").c_str()
                                  : "");
  return buf;
}

}  // namespace propeller
