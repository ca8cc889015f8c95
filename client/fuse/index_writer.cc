#include "client/fuse/index_writer.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <utility>

#include "common/logging.h"
#include "common/record.h"

namespace propeller::fuse {
namespace {

int64_t WallNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The index refused the updates themselves: sending them again cannot help.
bool Refused(const Status& s) { return s.code() == StatusCode::kInvalidArgument; }

// Set by a Get that failed on this thread: the record being built for the operation lacks
// what the index would have added (other links), so its Send queues it (Refresh completes it).
thread_local bool t_incomplete = false;

std::string ParentOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
}

}  // namespace

IndexWriter::IndexWriter(const IndexWriterOptions& options)
    : options_(options) {
  if (!options_.queue->empty()) {
    degraded_ = true;
    degraded_since_ns_ = WallNanos();
    last_error_ = "updates left queued by an earlier run";
  }
}

IndexWriter::~IndexWriter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (deliverer_.joinable()) deliverer_.join();
}

void IndexWriter::Start() {
  deliverer_ = std::thread([this] { DeliverMain(); });
}

bool IndexWriter::degraded() const {
  std::lock_guard<std::mutex> lock(mu_);
  return degraded_;
}

int IndexWriter::Admit() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!degraded_) return 0;
  }
  if (options_.queue->room() >= options_.admit_margin_bytes) return 0;
  ++admit_refusals_;
  const int64_t now = WallNanos();
  int64_t last = last_refusal_log_ns_.load();
  if (now - last > 10'000'000'000 && last_refusal_log_ns_.compare_exchange_strong(last, now)) {
    Log(LogLevel::kWarning, "mount: refusing changes (ENOSPC) before they happen: the index is "
                            "behind and the queue of pending updates has no room left");
  }
  return ENOSPC;
}

void IndexWriter::NoteFailure(const Status& s) {
  // REQUIRES: mu_.
  if (!degraded_) {
    degraded_ = true;
    degraded_since_ns_ = WallNanos();
    Log(LogLevel::kWarning, "mount: the index cannot take updates (%s); they are queued and "
                            "delivered when it can, searches here wait for them",
        s.ToString().c_str());
  }
  last_error_ = s.ToString();
}

int IndexWriter::Send(std::vector<FileUpdate>& ups, const std::string& what,
                      const std::vector<std::string>& touched) {
  const bool incomplete = std::exchange(t_incomplete, false);
  if (ups.empty()) return 0;
  // A kPut without paths is a name's removal from a file with several links whose other names
  // only the index knew: only the deliverer can complete it.
  const bool must_queue = incomplete || std::any_of(ups.begin(), ups.end(), [](const FileUpdate& u) {
    return u.op == UpdateOp::kPut && u.record.paths.empty();
  });
  bool queue = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!degraded_ && must_queue) {
      NoteFailure(Status::Unavailable("a lookup in the index failed"));
    }
    queue = degraded_;
    ++(queue ? appending_ : in_flight_);
  }
  if (queue) return Queue(ups, what, touched);
  Status s;
  {
    Client::Deadline deadline(options_.timeout_ms);
    s = options_.client->Update(ups);
  }
  std::unique_lock<std::mutex> lock(mu_);
  --in_flight_;
  if (s.ok() || Refused(s)) {
    lock.unlock();
    cv_.notify_all();
    if (!s.ok()) {
      ++refused_;
      Log(LogLevel::kError, "mount: the index refused the update of %s: %s", what.c_str(),
          s.ToString().c_str());
    } else {
      sent_ += ups.size();
    }
    return 0;
  }
  NoteFailure(s);
  ++appending_;
  lock.unlock();
  return Queue(ups, what, touched);
}

int IndexWriter::Queue(std::vector<FileUpdate>& ups, const std::string& what,
                       const std::vector<std::string>& touched) {
  // REQUIRES: appending_ counted. A queued update may be delivered twice (a direct send that
  // timed out may have been applied): never as `created`, which places a file afresh.
  for (FileUpdate& u : ups) u.created = false;
  Status s = options_.queue->Append(ups, touched);
  {
    std::lock_guard<std::mutex> lock(mu_);
    --appending_;
  }
  cv_.notify_all();
  if (!s.ok()) {
    ++errors_;
    Log(LogLevel::kError, "mount: the update of %s could be neither sent nor queued: %s",
        what.c_str(), s.ToString().c_str());
    return EIO;
  }
  queued_ += ups.size();
  return 0;
}

Result<FileRecord> IndexWriter::Get(FileId id) {
  if (degraded()) {
    t_incomplete = true;
    return Status::Unavailable("the index is catching up");
  }
  Client::Deadline deadline(options_.timeout_ms);
  Result<FileRecord> r = options_.client->Get(id);
  if (!r.ok() && r.status().code() != StatusCode::kNotFound) t_incomplete = true;
  return r;
}

void IndexWriter::ResolveRoutes(std::vector<FileUpdate>* ups) {
  if (degraded()) return;
  Client::Deadline deadline(options_.timeout_ms);
  Status s = options_.client->ResolveRoutes(*ups);
  if (!s.ok()) {
    Log(LogLevel::kWarning, "mount: routing a delete ahead of the unlink: %s",
        s.ToString().c_str());
  }
}

uint64_t IndexWriter::WaitForScope(const std::string& scope, int64_t wait_ms) const {
  if (!degraded()) return 0;
  return options_.queue->WaitForScope(scope, wait_ms);
}

IndexWriterStats IndexWriter::stats() const {
  IndexWriterStats s;
  s.sent = sent_.load();
  s.queued = queued_.load();
  s.delivered = delivered_.load();
  s.refused = refused_.load();
  s.errors = errors_.load();
  s.admit_refusals = admit_refusals_.load();
  s.pending = options_.queue->size();
  std::lock_guard<std::mutex> lock(mu_);
  s.degraded_since_ns = degraded_ ? degraded_since_ns_ : 0;
  s.last_error = last_error_;
  return s;
}

Status IndexWriter::Refresh(const std::vector<FileUpdate>& batch, std::vector<FileUpdate>* out) {
  out->clear();
  for (const FileUpdate& u : batch) {
    if (u.op != UpdateOp::kPut) {
      out->push_back(u);
      continue;
    }
    const uint64_t ino = u.record.id.ino;
    std::vector<std::string> names;
    struct stat st;
    bool several_links = false;
    auto names_file = [&](const std::string& p) {
      struct stat s2;
      if (options_.tree->Lstat(p, &s2) != 0 || s2.st_ino != ino) return false;
      st = s2;
      several_links = !S_ISDIR(s2.st_mode) && s2.st_nlink > 1;
      return true;
    };
    for (const std::string& p : u.record.paths) {
      if (names_file(p)) names.push_back(p);
    }
    // The index knows the other names of a file with several links (and the names of one
    // whose queued update removed a name: it carries none).
    if (several_links || u.record.paths.empty()) {
      Result<FileRecord> old = [&] {
        Client::Deadline deadline(options_.timeout_ms);
        return options_.client->Get(u.record.id);
      }();
      if (!old.ok() && old.status().code() != StatusCode::kNotFound) return old.status();
      if (old.ok()) {
        for (const std::string& p : old->paths) {
          if (std::find(names.begin(), names.end(), p) == names.end() && names_file(p)) {
            names.push_back(p);
          }
        }
      }
    }
    if (names.empty()) continue;  // no name holds it any more: dropped (see the header)
    std::sort(names.begin(), names.end());
    FileUpdate f = u;
    struct stat parent;
    const std::string dir = ParentOf(names[0]);
    const uint64_t parent_ino =
        names[0] == "/" || options_.tree->Lstat(dir, &parent) != 0
            ? 0
            : static_cast<uint64_t>(parent.st_ino);
    Status r = options_.tree->ReadRecord(names[0], options_.volume, parent_ino, &f.record);
    if (r.code() == StatusCode::kNotFound) continue;
    PROPELLER_RETURN_IF_ERROR(r);
    if (f.record.id.ino != ino) continue;  // replaced meanwhile: a later update says so
    f.record.paths = std::move(names);
    out->push_back(std::move(f));
  }
  return Status::OK();
}

void IndexWriter::DeliverMain() {
  int64_t backoff_ms = options_.retry_min_ms;
  uint64_t delivered_run = 0;  // since the mount became degraded
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    // Direct sends still under way finish first: one of them must not land after (and
    // overwrite) what the queue delivers.
    cv_.wait(lock, [&] { return stop_ || (degraded_ && in_flight_ == 0); });
    if (stop_) break;
    if (options_.queue->empty()) {
      if (appending_ == 0) {
        degraded_ = false;
        degraded_since_ns_ = 0;
        Log(LogLevel::kInfo, "mount: %llu queued updates delivered; the index is current again",
            static_cast<unsigned long long>(delivered_run));
        delivered_run = 0;
      } else {
        cv_.wait_for(lock, std::chrono::milliseconds(10));
      }
      continue;
    }
    lock.unlock();
    std::optional<std::vector<FileUpdate>> front = options_.queue->Front();
    Status s;
    size_t n = 0;
    if (front) {
      n = front->size();
      std::vector<FileUpdate> out;
      s = Refresh(*front, &out);
      if (s.ok() && !out.empty()) {
        Client::Deadline deadline(options_.timeout_ms);
        s = options_.client->Update(out);
      }
      if (Refused(s)) {
        ++refused_;
        Log(LogLevel::kError, "mount: the index refused %zu queued updates (dropped): %s", n,
            s.ToString().c_str());
        s = Status::OK();
      }
      if (s.ok()) s = options_.queue->PopFront();
    }
    lock.lock();
    if (s.ok()) {
      delivered_ += n;
      delivered_run += n;
      backoff_ms = options_.retry_min_ms;
      continue;
    }
    last_error_ = s.ToString();
    Log(LogLevel::kDebug, "mount: delivering queued updates: %s (next try in %lld ms)",
        s.ToString().c_str(), static_cast<long long>(backoff_ms));
    cv_.wait_for(lock, std::chrono::milliseconds(backoff_ms), [&] { return stop_; });
    backoff_ms = std::min(backoff_ms * 2, options_.retry_max_ms);
  }
}

}  // namespace propeller::fuse
