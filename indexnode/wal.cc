#include "indexnode/wal.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "common/logging.h"
#include "schemas/wal_format.h"

namespace propeller {

namespace {

bool AllZero(std::string_view bytes) {
  return std::all_of(bytes.begin(), bytes.end(), [](char c) { return c == '\0'; });
}

// The offset of the first intact record after `from` in `data` whose LSN is above
// `last_lsn`, or npos. Most offsets fail the length or LSN test before any CRC is computed.
size_t NextIntactRecord(std::string_view data, size_t from, uint64_t last_lsn) {
  for (size_t pos = from; pos + kWalRecordHeaderSize <= data.size(); ++pos) {
    uint64_t lsn = 0;
    std::memcpy(&lsn, data.data() + pos + 8, sizeof lsn);  // little-endian, as written
    if (lsn <= last_lsn || lsn - last_lsn > (uint64_t{1} << 40)) continue;
    std::string_view payload;
    size_t consumed = 0;
    if (ParseWalRecord(data.substr(pos), &lsn, &payload, &consumed) == WalParse::kOk) return pos;
  }
  return std::string_view::npos;
}

// Whether [from, to) holds a 512-byte aligned block of zeros: a sector that was never written,
// which is what a power loss leaves where unsynced writes were lost (the segment was
// preallocated with zeros). A record damaged in place has no such hole.
bool HasUnwrittenSector(std::string_view data, size_t from, size_t to) {
  constexpr size_t kSector = 512;
  for (size_t b = (from + kSector - 1) / kSector * kSector; b + kSector <= to; b += kSector) {
    if (AllZero(data.substr(b, kSector))) return true;
  }
  return false;
}

}  // namespace

Wal::Wal(const Options& options) : options_(options) {}

Result<std::unique_ptr<Wal>> Wal::Open(const Options& options, uint64_t min_next_lsn,
                                       const ReplayFn& replay) {
  if (options.env == nullptr || options.dir.empty()) {
    return Status::InvalidArgument("Wal::Open needs an env and a directory");
  }
  std::unique_ptr<Wal> wal(new Wal(options));
  PROPELLER_RETURN_IF_ERROR(wal->Recover(min_next_lsn, replay));
  if (options.durability == Durability::kDefault) {
    wal->sync_thread_ = std::thread([w = wal.get()] { w->SyncThreadMain(); });
  }
  return wal;
}

Status Wal::Recover(uint64_t min_next_lsn, const ReplayFn& replay) {
  Env* env = options_.env;
  PROPELLER_RETURN_IF_ERROR(env->CreateDirs(options_.dir));
  PROPELLER_ASSIGN_OR_RETURN(std::vector<std::string> names, env->GetChildren(options_.dir));
  std::vector<Segment> found;
  for (const std::string& name : names) {
    uint64_t first = 0;
    if (ParseWalSegmentName(name, &first)) {
      found.push_back(Segment{first, JoinPath(options_.dir, name), 0});
    }
  }
  std::sort(found.begin(), found.end(),
            [](const Segment& a, const Segment& b) { return a.first_lsn < b.first_lsn; });

  uint64_t last_lsn = 0;
  for (size_t i = 0; i < found.size(); ++i) {
    Segment& seg = found[i];
    const bool is_last = (i + 1 == found.size());
    std::string data;
    PROPELLER_RETURN_IF_ERROR(ReadFileToString(env, seg.path, &data));
    if (is_last && (data.size() < kWalHeaderSize ||
                    AllZero(std::string_view(data).substr(0, kWalHeaderSize)))) {
      // A crash while the segment was being created: it holds no record.
      Log(LogLevel::kWarning, "log: removing incomplete segment %s (%zu bytes)", seg.path.c_str(),
          data.size());
      PROPELLER_RETURN_IF_ERROR(env->RemoveFile(seg.path));
      found.pop_back();
      break;
    }
    Status hs = CheckWalHeader(data);
    if (!hs.ok()) return hs.WithContext(seg.path);
    size_t off = kWalHeaderSize;
    while (off < data.size()) {
      uint64_t lsn = 0;
      std::string_view payload;
      size_t consumed = 0;
      WalParse r = ParseWalRecord(std::string_view(data).substr(off), &lsn, &payload, &consumed);
      if (r != WalParse::kOk) {
        if (!is_last) {
          return Status::Corruption("log segment " + seg.path + " is damaged at offset " +
                                    std::to_string(off) + " (not at the end of the log)");
        }
        // The end of the log, or damage? Zeros to the end are the segment's unused
        // preallocated space; a record torn by a crash or power loss can be followed only by
        // what was never written (zeros) or, after a power loss, by later unsynced records
        // that reached the disk across a hole of unwritten sectors. A bad record followed by
        // intact ones without such a hole was damaged in place: truncating there would drop
        // every acknowledged update after it, so the node refuses to start instead.
        const size_t next = NextIntactRecord(data, off + 1, last_lsn);
        if (next != std::string_view::npos && !HasUnwrittenSector(data, off, next)) {
          return Status::Corruption(
              "log segment " + seg.path + " is damaged at offset " + std::to_string(off) +
              ", and intact records follow from offset " + std::to_string(next) +
              ": this is not a torn tail, and the log was left as it is. Restore the data "
              "directory from a backup, or move the segment aside to start without the "
              "updates from that offset on");
        }
        if (!AllZero(std::string_view(data).substr(off))) {
          Log(LogLevel::kWarning, "log: truncating torn tail of %s at offset %zu (%zu bytes)",
              seg.path.c_str(), off, data.size() - off);
        }
        PROPELLER_RETURN_IF_ERROR(env->TruncateFile(seg.path, off));
        // Durable before a newer segment exists: were the cut lost to a power loss, the tail
        // would reappear in a segment that is no longer the last, where it reads as damage.
        PROPELLER_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> cut,
                                   env->NewAppendableFile(seg.path));
        PROPELLER_RETURN_IF_ERROR(cut->Sync());
        PROPELLER_RETURN_IF_ERROR(cut->Close());
        data.resize(off);
        break;
      }
      if (lsn <= last_lsn) {
        return Status::Corruption("log segment " + seg.path + " has LSN " + std::to_string(lsn) +
                                  " after " + std::to_string(last_lsn) + " at offset " +
                                  std::to_string(off));
      }
      last_lsn = lsn;
      Status s = replay(lsn, payload);
      if (!s.ok()) {
        return s.WithContext("replaying " + seg.path + " at offset " + std::to_string(off));
      }
      off += consumed;
    }
    seg.size = data.size();
  }

  MutexLock lock(&mu_);
  segments_ = std::move(found);
  next_lsn_ = std::max(last_lsn + 1, std::max<uint64_t>(min_next_lsn, 1));
  written_lsn_ = synced_lsn_ = next_lsn_ - 1;
  // Always start a fresh segment: the old tail may sit on a page that was only partly
  // written, and starting clean keeps "torn records appear only at the end" true.
  return StartSegmentLocked();
}

Status Wal::StartSegmentLocked() {
  Env* env = options_.env;
  if (file_) {
    // No unused space to cut: a segment is rolled once its records reach segment_bytes, the
    // size it was preallocated to, so only the last segment can end in zeros.
    PROPELLER_RETURN_IF_ERROR(file_->Sync());
    PROPELLER_RETURN_IF_ERROR(file_->Close());
    synced_lsn_ = written_lsn_;
    file_.reset();
    sync_file_.reset();
  }
  Segment seg{next_lsn_, JoinPath(options_.dir, WalSegmentName(next_lsn_)), 0};
  // The previous segment holds no record with this LSN when it has the same name: it is empty,
  // and recreated below (until then it stays listed, with its old size).
  const bool replaces = !segments_.empty() && segments_.back().first_lsn == seg.first_lsn;
  PROPELLER_ASSIGN_OR_RETURN(file_, env->NewWritableFile(seg.path));
  std::string header;
  AppendWalHeader(&header);
  PROPELLER_RETURN_IF_ERROR(file_->Append(header));
  PROPELLER_RETURN_IF_ERROR(file_->Sync());
  PROPELLER_RETURN_IF_ERROR(env->SyncDir(options_.dir));
  // Reserve the segment (after the header is durable, so a segment is never zeros from its
  // start): records then overwrite zeros instead of growing the file, and the fsync that
  // acknowledges them in kSync has no size change to commit (env.h: Preallocate). Best effort.
  if (options_.segment_bytes > header.size()) {
    Status ps = file_->Preallocate(options_.segment_bytes);
    if (!ps.ok() && !preallocate_warned_) {
      preallocate_warned_ = true;
      Log(LogLevel::kWarning, "log: cannot preallocate segments (%s); appending instead",
          ps.ToString().c_str());
    }
  }
  PROPELLER_ASSIGN_OR_RETURN(sync_file_, env->NewAppendableFile(seg.path));
  seg.size = header.size();
  if (replaces) {
    segments_.back() = seg;
  } else {
    segments_.push_back(seg);
  }
  return Status::OK();
}

Result<uint64_t> Wal::Append(std::string_view payload,
                             const std::function<void(uint64_t lsn)>& on_logged) {
  if (payload.size() > kWalMaxPayload) {
    return Status::ResourceExhausted("update batch of " + std::to_string(payload.size()) +
                                     " bytes exceeds the log record limit");
  }
  MutexLock lock(&mu_);
  if (!sticky_error_.ok()) return sticky_error_;
  if (stopping_) return Status::Aborted("log is closing");
  if (broken_) {
    // The last write failed (a full disk, say): cut the segment back and start a new one
    // before anything else is written. Fails again while the cause lasts.
    Status s = RepairLocked();
    if (!s.ok()) return s.WithContext("the log cannot take updates");
  }
  if (segments_.back().size >= options_.segment_bytes) {
    while (sync_in_progress_) cv_.Wait(&mu_);
    Status s = StartSegmentLocked();
    if (!s.ok()) {
      broken_ = true;
      return s.WithContext("starting a log segment");
    }
  }
  const uint64_t lsn = next_lsn_;
  scratch_.clear();
  AppendWalRecord(lsn, payload, &scratch_);
  Status s = file_->Append(scratch_);
  if (s.ok()) s = file_->Flush();
  if (!s.ok()) {
    // Part of the record may be in the file. Nothing may be written behind it: the next
    // Append repairs the log first (RepairLocked). The record was not acknowledged.
    broken_ = true;
    return s.WithContext("appending to the log");
  }
  next_lsn_ = lsn + 1;
  written_lsn_ = lsn;
  segments_.back().size += scratch_.size();
  if (on_logged) on_logged(lsn);
  if (options_.durability == Durability::kSync) {
    while (synced_lsn_ < lsn) {
      if (!sticky_error_.ok()) return sticky_error_;
      if (sync_in_progress_) {
        cv_.Wait(&mu_);
      } else {
        Status ss = SyncLocked();
        if (!ss.ok()) return ss;
      }
    }
  }
  return lsn;
}

Status Wal::RepairLocked() {
  while (sync_in_progress_) cv_.Wait(&mu_);
  // The writing handle goes first: what it still buffers (nothing, after a failed flush) must
  // not land behind the cut. The syncing one stays until the cut is durable, so the log can
  // still be synced (Sync, the sync thread) while the repair keeps failing.
  file_.reset();
  Env* env = options_.env;
  if (!segments_.empty() && segments_.back().first_lsn < next_lsn_) {
    // Back to the last complete record: shrinking a file needs no free space. Then the
    // complete records before the cut are made durable before a newer segment exists (see
    // Recover: damage in a segment that is not the last is corruption). A segment without
    // records is simply made again by StartSegmentLocked.
    const Segment& seg = segments_.back();
    PROPELLER_RETURN_IF_ERROR(env->TruncateFile(seg.path, seg.size));
    if (!sync_file_) {
      PROPELLER_ASSIGN_OR_RETURN(sync_file_, env->NewAppendableFile(seg.path));
    }
    PROPELLER_RETURN_IF_ERROR(sync_file_->Sync());
  }
  sync_file_.reset();
  synced_lsn_ = written_lsn_;
  PROPELLER_RETURN_IF_ERROR(StartSegmentLocked());
  broken_ = false;
  Log(LogLevel::kInfo, "log: writing again (new segment %s)", segments_.back().path.c_str());
  return Status::OK();
}

Status Wal::SyncLocked() {
  while (sync_in_progress_) cv_.Wait(&mu_);
  if (!sticky_error_.ok()) return sticky_error_;
  if (synced_lsn_ >= written_lsn_ || crashed_) return Status::OK();
  if (!sync_file_) return Status::IOError("the log's segment is not open (a failed write)");
  const uint64_t target = written_lsn_;
  WritableFile* f = sync_file_.get();
  sync_in_progress_ = true;
  mu_.Unlock();
  Status s = f->Sync();
  mu_.Lock();
  sync_in_progress_ = false;
  if (s.ok()) {
    synced_lsn_ = std::max(synced_lsn_, target);
  } else {
    sticky_error_ = s.WithContext("syncing the log");
  }
  cv_.NotifyAll();
  return s.ok() ? Status::OK() : sticky_error_;
}

Status Wal::Sync() {
  MutexLock lock(&mu_);
  if (crashed_) return Status::Aborted("log crashed");
  return SyncLocked();
}

void Wal::SyncThreadMain() {
  const auto interval = std::chrono::nanoseconds(options_.group_commit_interval_ns);
  MutexLock lock(&mu_);
  while (!stopping_) {
    cv_.WaitFor(&mu_, interval);
    if (stopping_) break;
    if (synced_lsn_ < written_lsn_ && sticky_error_.ok()) {
      Status s = SyncLocked();
      if (!s.ok()) Log(LogLevel::kError, "log: %s", s.ToString().c_str());
    }
  }
}

Status Wal::DeleteObsolete(uint64_t lowest_needed_lsn) {
  std::vector<std::string> doomed;
  {
    MutexLock lock(&mu_);
    // Segment i holds LSNs [first_i, first_{i+1}); never delete the current one.
    size_t n = 0;
    while (n + 1 < segments_.size() && segments_[n + 1].first_lsn <= lowest_needed_lsn) ++n;
    for (size_t i = 0; i < n; ++i) doomed.push_back(segments_[i].path);
    segments_.erase(segments_.begin(), segments_.begin() + static_cast<std::ptrdiff_t>(n));
  }
  for (const std::string& path : doomed) {
    PROPELLER_RETURN_IF_ERROR(options_.env->RemoveFile(path));
  }
  if (!doomed.empty()) PROPELLER_RETURN_IF_ERROR(options_.env->SyncDir(options_.dir));
  return Status::OK();
}

void Wal::RunLocked(const std::function<void(uint64_t next_lsn)>& fn) {
  MutexLock lock(&mu_);
  fn(next_lsn_);
}

uint64_t Wal::next_lsn() const {
  MutexLock lock(&mu_);
  return next_lsn_;
}

uint64_t Wal::synced_lsn() const {
  MutexLock lock(&mu_);
  return synced_lsn_;
}

uint64_t Wal::bytes() const {
  MutexLock lock(&mu_);
  uint64_t total = 0;
  for (const Segment& s : segments_) total += s.size;
  return total;
}

void Wal::Crash() {
  std::thread t;
  {
    MutexLock lock(&mu_);
    while (sync_in_progress_) cv_.Wait(&mu_);
    stopping_ = true;
    crashed_ = true;
    cv_.NotifyAll();
    t = std::move(sync_thread_);
  }
  if (t.joinable()) t.join();
  MutexLock lock(&mu_);
  // Dropping the handles closes the descriptors. Close() would flush; nothing is buffered
  // because every Append flushes, so what is in the OS stays exactly as the crash left it.
  file_.reset();
  sync_file_.reset();
}

Wal::~Wal() {
  Status s = Close();
  if (!s.ok()) Log(LogLevel::kError, "log: %s", s.ToString().c_str());
}

Status Wal::Close() {
  std::thread t;
  Status result;
  {
    MutexLock lock(&mu_);
    if (crashed_ || closed_) return Status::OK();
    closed_ = true;
    result = SyncLocked().WithContext("final sync");
    stopping_ = true;
    cv_.NotifyAll();
    t = std::move(sync_thread_);
  }
  if (t.joinable()) t.join();
  MutexLock lock(&mu_);
  if (file_) {
    // A clean close leaves no unused space behind (the next open starts a new segment).
    Status s = file_->Close();
    if (s.ok() && sticky_error_.ok() && !broken_) {
      s = options_.env->TruncateFile(segments_.back().path, segments_.back().size);
    }
    if (result.ok()) result = s.WithContext("close");
  }
  sync_file_.reset();
  return result;
}

}  // namespace propeller
