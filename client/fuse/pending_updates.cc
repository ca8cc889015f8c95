#include "client/fuse/pending_updates.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "common/env.h"
#include "common/logging.h"
#include "common/secure_dir.h"
#include "schemas/pending_format.h"

namespace propeller::fuse {
namespace {

Status WriteAllAt(int fd, std::string_view data, uint64_t offset, const std::string& path) {
  while (!data.empty()) {
    const ssize_t n = ::pwrite(fd, data.data(), data.size(), static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::IOError("writing " + path, errno);
    }
    data.remove_prefix(static_cast<size_t>(n));
    offset += static_cast<uint64_t>(n);
  }
  return Status::OK();
}

std::vector<FileUpdate> ToFileUpdates(std::vector<Update>&& updates,
                                      std::vector<PendingExtra>&& extras) {
  std::vector<FileUpdate> out(updates.size());
  for (size_t i = 0; i < updates.size(); ++i) {
    FileUpdate& f = out[i];
    f.op = updates[i].op;
    f.record = std::move(updates[i].record);
    f.edge_dst = updates[i].edge_dst;
    f.edge_weight = updates[i].edge_weight;
    f.edge_dst_generation = updates[i].edge_dst_generation;
    f.acg = updates[i].acg;
    f.app = std::move(extras[i].app);
    f.producers = std::move(extras[i].producers);
    f.created = extras[i].created;
    f.generation = extras[i].generation;
  }
  return out;
}

bool InScope(const FileUpdate& u, const std::string& scope) {
  for (const std::string& p : u.record.paths) {
    if (PathInScope(p, scope)) return true;
  }
  return u.record.paths.empty();  // no path known: it may be anywhere
}

}  // namespace

Result<std::unique_ptr<PendingUpdates>> PendingUpdates::Open(const std::string& dir,
                                                             uint64_t reserve,
                                                             const std::string& owner) {
  PROPELLER_RETURN_IF_ERROR(MakeDirs(dir, 0700));
  std::unique_ptr<PendingUpdates> q(new PendingUpdates(dir, reserve));
  PROPELLER_RETURN_IF_ERROR(q->Recover());
  PROPELLER_RETURN_IF_ERROR(q->CheckOwner(owner));
  return q;
}

Status PendingUpdates::CheckOwner(const std::string& owner) {
  const std::string path = JoinPath(dir_, "owner");
  std::string was;
  Status s = ReadFileToString(Env::Default(), path, &was);
  if (!s.ok() && s.code() != StatusCode::kNotFound) return s;
  if (s.ok() && was == owner) return Status::OK();
  if (!empty()) {
    return Status::InvalidArgument(
        dir_ + " holds " + std::to_string(size()) + " index updates not delivered yet, for " +
        (s.ok() ? was : std::string("an unknown index")) + "; mount that again to deliver "
        "them, or move the directory aside to drop them");
  }
  return WriteFileAtomically(Env::Default(), path, owner);
}

PendingUpdates::~PendingUpdates() {
  if (fd_ >= 0) ::close(fd_);
  if (head_fd_ >= 0) ::close(head_fd_);
}

Status PendingUpdates::Recover() {
  const std::string path = JoinPath(dir_, "queue");
  const std::string head_path = JoinPath(dir_, "head");
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd_ < 0) return Status::IOError("opening " + path, errno);
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) {
      return Status::Unavailable(dir_ + " is in use by another running mount (give each mount "
                                        "its own --data)");
    }
    return Status::IOError("locking " + path, errno);
  }
  std::string head_text;
  Status hs = ReadFileToString(Env::Default(), head_path, &head_text);
  if (hs.code() == StatusCode::kNotFound) {
    // A new queue (or one whose head was never written: nothing was ever delivered).
    head_text.assign(8, '\0');
    PROPELLER_RETURN_IF_ERROR(WriteFileAtomically(Env::Default(), head_path, head_text));
  } else if (!hs.ok()) {
    return hs;
  } else if (head_text.size() != 8) {
    return Status::Corruption(head_path + " is " + std::to_string(head_text.size()) +
                              " bytes, not 8: the queue's start is unknown (move the "
                              "directory " + dir_ + " aside to start with an empty queue)");
  }
  head_fd_ = ::open(head_path.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  if (head_fd_ < 0) return Status::IOError("opening " + head_path, errno);
  std::string data;
  PROPELLER_RETURN_IF_ERROR(ReadFileToString(Env::Default(), path, &data));
  uint64_t head = 0;
  for (int i = 7; i >= 0; --i) head = (head << 8) | static_cast<unsigned char>(head_text[i]);
  if (head > data.size() && data.empty()) {
    // Emptied after its last delivery, the head not reset yet (PopFront): reset it now.
    head = 0;
    std::lock_guard<std::mutex> lock(mu_);
    PROPELLER_RETURN_IF_ERROR(WriteHeadLocked(0));
  } else if (head > data.size()) {
    return Status::Corruption(head_path + " points past the end of " + path +
                              ": the queue's start is unknown");
  }
  std::lock_guard<std::mutex> lock(mu_);
  size_t off = head;
  while (off < data.size()) {
    std::string_view payload;
    size_t consumed = 0;
    const PendingParse r = ParsePendingRecord(std::string_view(data).substr(off), &payload,
                                              &consumed);
    if (r != PendingParse::kOk) {
      // Torn by a crash at the end (its operation was not acknowledged), or damage: damage
      // if an intact record follows anywhere.
      for (size_t pos = off + 1; pos + kPendingRecordHeader <= data.size(); ++pos) {
        std::string_view p2;
        size_t c2 = 0;
        if (ParsePendingRecord(std::string_view(data).substr(pos), &p2, &c2) ==
            PendingParse::kOk) {
          return Status::Corruption("pending queue " + path + " is damaged at offset " +
                                    std::to_string(off) + ", before intact records");
        }
      }
      Log(LogLevel::kWarning, "mount: cutting the torn end of %s at offset %zu", path.c_str(),
          off);
      if (::ftruncate(fd_, static_cast<off_t>(off)) != 0) {
        return Status::IOError("cutting " + path, errno);
      }
      data.resize(off);
      break;
    }
    std::vector<Update> updates;
    std::vector<PendingExtra> extras;
    Batch b;
    PROPELLER_RETURN_IF_ERROR(
        DecodePendingBatch(payload, &updates, &extras, &b.touched).WithContext(path));
    off += consumed;
    b.updates = ToFileUpdates(std::move(updates), std::move(extras));
    b.end = off;
    count_ += b.updates.size();
    batches_.push_back(std::move(b));
  }
  head_ = head;
  end_ = data.size();
  allocated_ = end_;
  if (batches_.empty() && end_ != 0) {
    // Everything was delivered: start the file over.
    PROPELLER_RETURN_IF_ERROR(WriteHeadLocked(0));
    if (::ftruncate(fd_, 0) != 0) return Status::IOError("cutting " + path, errno);
    head_ = end_ = allocated_ = 0;
  }
  if (!batches_.empty()) {
    Log(LogLevel::kInfo, "mount: %llu updates wait to be delivered to the index (%s)",
        static_cast<unsigned long long>(count_), path.c_str());
  }
  ReserveLocked();
  return Status::OK();
}

void PendingUpdates::ReserveLocked() {
  if (reserve_ == 0 || allocated_ >= end_ + reserve_) return;
  // Allocated past the end, the size unchanged: later appends need no new blocks.
  const uint64_t want = end_ + reserve_;
  if (::fallocate(fd_, FALLOC_FL_KEEP_SIZE, 0, static_cast<off_t>(want)) != 0) {
    Log(LogLevel::kWarning, "mount: cannot reserve %llu bytes for pending updates in %s: %s",
        static_cast<unsigned long long>(reserve_), dir_.c_str(), std::strerror(errno));
    return;
  }
  allocated_ = want;
}

Status PendingUpdates::WriteHeadLocked(uint64_t head) {
  // 8 bytes at offset 0 of an existing file: one sector, no allocation.
  char bytes[8];
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((head >> (8 * i)) & 0xff);
  const std::string path = JoinPath(dir_, "head");
  PROPELLER_RETURN_IF_ERROR(WriteAllAt(head_fd_, std::string_view(bytes, 8), 0, path));
  if (::fdatasync(head_fd_) != 0) return Status::IOError("syncing " + path, errno);
  return Status::OK();
}

Status PendingUpdates::Append(std::span<const FileUpdate> batch,
                              std::span<const std::string> touched) {
  std::vector<Update> updates(batch.size());
  std::vector<PendingExtra> extras(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    const FileUpdate& f = batch[i];
    updates[i] = Update{f.op, f.acg, f.record, f.edge_dst, f.edge_weight, f.edge_dst_generation};
    extras[i] = PendingExtra{f.app, f.producers, f.created, f.generation};
  }
  std::string record;
  AppendPendingRecord(updates, extras, touched, &record);
  std::lock_guard<std::mutex> lock(mu_);
  const std::string path = JoinPath(dir_, "queue");
  Status s = WriteAllAt(fd_, record, end_, path);
  if (s.ok() && ::fdatasync(fd_) != 0) s = Status::IOError("syncing " + path, errno);
  if (!s.ok()) {
    // Nothing may follow a partly written record: cut it (shrinking needs no space).
    (void)!::ftruncate(fd_, static_cast<off_t>(end_));
    return s.WithContext("queueing index updates");
  }
  end_ += record.size();
  if (end_ > allocated_) allocated_ = end_;
  if (allocated_ - end_ < reserve_ / 2) ReserveLocked();
  Batch b;
  b.updates.assign(batch.begin(), batch.end());
  b.touched.assign(touched.begin(), touched.end());
  b.end = end_;
  count_ += b.updates.size();
  batches_.push_back(std::move(b));
  return Status::OK();
}

std::optional<std::vector<FileUpdate>> PendingUpdates::Front() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (batches_.empty()) return std::nullopt;
  return batches_.front().updates;
}

Status PendingUpdates::PopFront() {
  std::unique_lock<std::mutex> lock(mu_);
  if (batches_.empty()) return Status::OK();
  const uint64_t next = batches_.front().end;
  PROPELLER_RETURN_IF_ERROR(WriteHeadLocked(next));
  head_ = next;
  count_ -= batches_.front().updates.size();
  batches_.pop_front();
  if (batches_.empty()) {
    // All delivered: start the file over at 0. A crash between the two steps leaves a head
    // past the end of an empty file, which recovery reads as this.
    const std::string path = JoinPath(dir_, "queue");
    if (::ftruncate(fd_, 0) == 0) {
      if (WriteHeadLocked(0).ok()) {
        head_ = end_ = allocated_ = 0;
        ReserveLocked();
      }
    } else {
      Log(LogLevel::kWarning, "mount: cannot empty %s: %s", path.c_str(), std::strerror(errno));
    }
  }
  lock.unlock();
  drained_.notify_all();
  return Status::OK();
}

bool PendingUpdates::empty() const {
  std::lock_guard<std::mutex> lock(mu_);
  return batches_.empty();
}

uint64_t PendingUpdates::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return count_;
}

uint64_t PendingUpdates::room() const {
  std::lock_guard<std::mutex> lock(mu_);
  return allocated_ > end_ ? allocated_ - end_ : 0;
}

uint64_t PendingUpdates::CountInScope(const std::string& scope) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (scope == "/") return count_;
  uint64_t n = 0;
  for (const Batch& b : batches_) {
    const bool touches = std::any_of(b.touched.begin(), b.touched.end(), [&](const std::string& p) {
      return PathInScope(p, scope) || PathInScope(scope, p);
    });
    for (const FileUpdate& u : b.updates) n += touches || InScope(u, scope) ? 1 : 0;
  }
  return n;
}

uint64_t PendingUpdates::WaitForScope(const std::string& scope, int64_t timeout_ms) const {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    const uint64_t n = CountInScope(scope);
    if (n == 0) return 0;
    std::unique_lock<std::mutex> lock(mu_);
    if (drained_.wait_until(lock, deadline) == std::cv_status::timeout) {
      lock.unlock();
      return CountInScope(scope);
    }
  }
}

}  // namespace propeller::fuse
