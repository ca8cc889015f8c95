// FaultInjectionEnv (fault_env.h).
//
// What counts as a mutation (each is counted, and refused once the SetFailAfter budget is
// spent): WritableFile Append, Flush, Sync, Close and Preallocate; NewWritableFile and
// NewAppendableFile; RemoveFile, RenameFile, TruncateFile, CreateDirs, RemoveRecursively and
// SyncDir. Reads (NewSequentialFile, FileExists, GetChildren, GetFileSize) and the clock are
// never refused.
//
// Crash model. The wrapper file keeps appended bytes in its own buffer and hands them to the
// base file only at Flush, Sync or Close (or when the buffer reaches kPassThroughBytes), each
// time followed by a base Flush. So the base file never holds unflushed bytes between calls,
// and once the env has "crashed" nothing more reaches it: bytes appended but not flushed
// before the crash are lost, exactly as a killed process loses its user-space buffer.
// DropUnsyncedData then models the power loss on top: every tracked file is cut back to its
// synced length. A file opened with NewAppendableFile that this env has not written since the
// last ResetState counts as synced up to its size at open (it predates the simulated reboot).
//
// Failed() stays true until ResetState, which also zeroes MutationCount() so a test can
// measure one run, pick a crash point in [0, count) and replay with SetFailAfter.
//
// Bookkeeping limits: a file renamed while a writer is still open keeps being tracked under
// its old name by that writer's later Syncs; create, sync and close a file before renaming it
// (as WriteFileAtomically does). Directory entries are assumed durable at once (SyncDir is
// counted but not modelled). DropUnsyncedData expects every writer to be closed, destroyed or
// crashed (refused); a live writer that flushes afterwards would write past the cut.
#include "common/fault_env.h"

#include <algorithm>
#include <iterator>
#include <string_view>
#include <utility>
#include <vector>

namespace propeller {
namespace {

// Appends are passed through in pieces of about this size so a writer that never flushes
// does not grow the wrapper's buffer without bound.
constexpr size_t kPassThroughBytes = 64 * 1024;

bool IsSameOrBelow(const std::string& path, const std::string& dir) {
  if (dir.empty()) return false;
  if (path.size() < dir.size() || path.compare(0, dir.size(), dir) != 0) return false;
  return path.size() == dir.size() || path[dir.size()] == '/' || dir == "/";
}

class FaultWritableFile final : public WritableFile {
 public:
  FaultWritableFile(FaultInjectionEnv* env, std::string path, std::unique_ptr<WritableFile> base)
      : env_(env), path_(std::move(path)), base_(std::move(base)) {}

  // Closing an abandoned file is the program's last act on it; if the env has crashed, the
  // close is refused and the buffered bytes vanish with the "process".
  ~FaultWritableFile() override { (void)Close(); }

  Status Append(std::string_view data) override {
    if (closed_) return Status::IOError("append to closed file " + path_);
    PROPELLER_RETURN_IF_ERROR(env_->CheckMutation("append"));
    buffer_.append(data);
    if (buffer_.size() >= kPassThroughBytes) return PassThrough();
    return Status::OK();
  }

  Status Flush() override {
    if (closed_) return Status::IOError("flush of closed file " + path_);
    PROPELLER_RETURN_IF_ERROR(Check("flush"));
    return PassThrough();
  }

  Status Sync() override {
    if (closed_) return Status::IOError("sync of closed file " + path_);
    PROPELLER_RETURN_IF_ERROR(Check("sync"));
    PROPELLER_RETURN_IF_ERROR(PassThrough());
    // fsync on any descriptor makes everything the OS holds for the file durable, including
    // bytes written through other handles (the WAL syncs through a second handle). So the
    // synced length is where the file's data ends, read before the sync (conservative).
    const uint64_t end = env_->DataEnd(path_);
    PROPELLER_RETURN_IF_ERROR(base_->Sync());
    env_->RecordSynced(path_, end);
    return Status::OK();
  }

  Status Preallocate(uint64_t size) override {
    if (closed_) return Status::IOError("preallocate on closed file " + path_);
    PROPELLER_RETURN_IF_ERROR(env_->CheckMutation("preallocate"));
    PROPELLER_RETURN_IF_ERROR(base_->Preallocate(size));
    env_->RecordPreallocated(path_, size);
    return Status::OK();
  }

  Status Close() override {
    if (closed_) return Status::OK();
    closed_ = true;
    Status s = Check("close");
    if (!s.ok()) {
      buffer_.clear();
      return s;
    }
    s = PassThrough();
    Status c = base_->Close();
    return s.ok() ? c : s;
  }

  uint64_t Size() const override { return base_->Size() + buffer_.size(); }

 private:
  // A mutation that writes the buffer. A transient fault cuts the write short: the first half
  // of the buffered bytes reach the file, the rest is dropped (as a real write(2) that ran out
  // of space returns after part of its bytes).
  Status Check(const char* what) {
    bool transient = false;
    Status s = env_->CheckMutation(what, &transient);
    if (!s.ok() && transient && !buffer_.empty()) {
      buffer_.resize(buffer_.size() / 2);
      (void)PassThrough();
    }
    return s;
  }

  // Moves the buffered bytes into the base file and flushes it. Not a mutation of its own:
  // the caller has already been counted.
  Status PassThrough() {
    if (buffer_.empty()) return Status::OK();
    Status s = base_->Append(buffer_);
    buffer_.clear();
    if (!s.ok()) return s;
    s = base_->Flush();
    if (s.ok()) env_->RecordWritten(path_, base_->Size());
    return s;
  }

  FaultInjectionEnv* const env_;
  const std::string path_;
  const std::unique_ptr<WritableFile> base_;
  std::string buffer_;  // appended, not yet handed to base_
  bool closed_ = false;
};

}  // namespace

FaultInjectionEnv::FaultInjectionEnv(Env* base) : base_(base) {}

FaultInjectionEnv::~FaultInjectionEnv() = default;

void FaultInjectionEnv::SetFailAfter(int64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  fail_after_ = n < 0 ? -1 : n;
}

bool FaultInjectionEnv::Failed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failed_;
}

int64_t FaultInjectionEnv::MutationCount() const {
  std::lock_guard<std::mutex> lock(mu_);
  return mutations_;
}

// Not a mutation: this is the simulated power loss itself, run by the test after the crash.
Status FaultInjectionEnv::DropUnsyncedData() {
  std::map<std::string, Tracked> files;
  {
    std::lock_guard<std::mutex> lock(mu_);
    files = files_;
  }
  for (const auto& [path, f] : files) {
    if (!base_->FileExists(path)) continue;
    Result<uint64_t> size = base_->GetFileSize(path);
    if (!size.ok()) return size.status();
    if (*size > f.synced) PROPELLER_RETURN_IF_ERROR(base_->TruncateFile(path, f.synced));
    // The reservation survives; what was written into it after the sync is zeros again.
    if (f.preallocated > f.synced && *size > f.synced) {
      PROPELLER_RETURN_IF_ERROR(base_->TruncateFile(path, std::max(*size, f.preallocated)));
    }
  }
  return Status::OK();
}

void FaultInjectionEnv::ResetState() {
  std::lock_guard<std::mutex> lock(mu_);
  fail_after_ = -1;
  failed_ = false;
  mutations_ = 0;
  files_.clear();
}

Status FaultInjectionEnv::CheckMutation(const char* what, bool* transient) {
  std::lock_guard<std::mutex> lock(mu_);
  ++mutations_;
  if (transient != nullptr) *transient = false;
  if (fail_after_ == 0) {
    failed_ = true;
    return Status::IOError(std::string("simulated crash: ") + what + " refused");
  }
  if (fail_after_ > 0) --fail_after_;
  const bool is_sync = std::string_view(what) == "sync" || std::string_view(what) == "sync directory";
  if (transient_err_ != 0 && (transient_syncs_ || !is_sync)) {
    transient_rng_ ^= transient_rng_ << 13;
    transient_rng_ ^= transient_rng_ >> 7;
    transient_rng_ ^= transient_rng_ << 17;
    const double draw = static_cast<double>(transient_rng_ >> 11) / 9007199254740992.0;
    if (draw < transient_rate_) {
      ++transient_faults_;
      if (transient != nullptr) *transient = true;
      return Status::IOError(std::string("simulated fault: ") + what, transient_err_);
    }
  }
  return Status::OK();
}

void FaultInjectionEnv::SetTransientFault(int err, double rate, uint64_t seed, bool syncs_too) {
  std::lock_guard<std::mutex> lock(mu_);
  transient_err_ = err;
  transient_rate_ = rate;
  transient_syncs_ = syncs_too;
  transient_rng_ = seed == 0 ? 1 : seed;
}

void FaultInjectionEnv::ClearTransientFault() {
  std::lock_guard<std::mutex> lock(mu_);
  transient_err_ = 0;
}

int64_t FaultInjectionEnv::TransientFaults() const {
  std::lock_guard<std::mutex> lock(mu_);
  return transient_faults_;
}

void FaultInjectionEnv::RecordSynced(const std::string& path, uint64_t size) {
  std::lock_guard<std::mutex> lock(mu_);
  files_[path].synced = size;
}

void FaultInjectionEnv::RecordWritten(const std::string& path, uint64_t end) {
  std::lock_guard<std::mutex> lock(mu_);
  Tracked& f = files_[path];
  f.written = std::max(f.written, end);
}

void FaultInjectionEnv::RecordPreallocated(const std::string& path, uint64_t size) {
  std::lock_guard<std::mutex> lock(mu_);
  Tracked& f = files_[path];
  f.preallocated = std::max(f.preallocated, size);
}

uint64_t FaultInjectionEnv::DataEnd(const std::string& path) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = files_.find(path);
    if (it != files_.end() && it->second.preallocated != 0) return it->second.written;
  }
  Result<uint64_t> size = base_->GetFileSize(path);
  return size.ok() ? *size : 0;
}

Result<std::unique_ptr<WritableFile>> FaultInjectionEnv::NewWritableFile(const std::string& path) {
  PROPELLER_RETURN_IF_ERROR(CheckMutation("create"));
  PROPELLER_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, base_->NewWritableFile(path));
  {
    std::lock_guard<std::mutex> lock(mu_);
    files_[path] = Tracked{};  // truncated; nothing of the new contents is durable yet
  }
  return std::unique_ptr<WritableFile>(new FaultWritableFile(this, path, std::move(file)));
}

Result<std::unique_ptr<WritableFile>> FaultInjectionEnv::NewAppendableFile(
    const std::string& path) {
  PROPELLER_RETURN_IF_ERROR(CheckMutation("open for append"));
  PROPELLER_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, base_->NewAppendableFile(path));
  {
    std::lock_guard<std::mutex> lock(mu_);
    // A file this env has not written since the last ResetState is taken as durable (it came
    // from before the simulated reboot). One it did write keeps its recorded synced length:
    // reopening a file does not sync it.
    files_.try_emplace(path, Tracked{file->Size(), file->Size(), 0});
  }
  return std::unique_ptr<WritableFile>(new FaultWritableFile(this, path, std::move(file)));
}

Result<std::unique_ptr<SequentialFile>> FaultInjectionEnv::NewSequentialFile(
    const std::string& path) {
  return base_->NewSequentialFile(path);
}

bool FaultInjectionEnv::FileExists(const std::string& path) { return base_->FileExists(path); }

Result<std::vector<std::string>> FaultInjectionEnv::GetChildren(const std::string& dir) {
  return base_->GetChildren(dir);
}

Result<uint64_t> FaultInjectionEnv::GetFileSize(const std::string& path) {
  return base_->GetFileSize(path);
}

Status FaultInjectionEnv::RemoveFile(const std::string& path) {
  PROPELLER_RETURN_IF_ERROR(CheckMutation("remove"));
  PROPELLER_RETURN_IF_ERROR(base_->RemoveFile(path));
  std::lock_guard<std::mutex> lock(mu_);
  files_.erase(path);
  return Status::OK();
}

Status FaultInjectionEnv::RenameFile(const std::string& from, const std::string& to) {
  PROPELLER_RETURN_IF_ERROR(CheckMutation("rename"));
  PROPELLER_RETURN_IF_ERROR(base_->RenameFile(from, to));
  if (from == to) return Status::OK();
  std::lock_guard<std::mutex> lock(mu_);
  // Whatever `to` was is gone: a replaced file, or an empty directory.
  for (auto it = files_.begin(); it != files_.end();) {
    it = IsSameOrBelow(it->first, to) ? files_.erase(it) : std::next(it);
  }
  // `from` and, for a directory, everything below it move under `to`. An untracked `from`
  // leaves `to` untracked: it is durable as far as this env knows.
  std::vector<std::pair<std::string, Tracked>> moved;
  for (auto it = files_.begin(); it != files_.end();) {
    if (IsSameOrBelow(it->first, from)) {
      moved.emplace_back(to + it->first.substr(from.size()), it->second);
      it = files_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& [path, f] : moved) files_[path] = f;
  return Status::OK();
}

Status FaultInjectionEnv::TruncateFile(const std::string& path, uint64_t size) {
  PROPELLER_RETURN_IF_ERROR(CheckMutation("truncate"));
  PROPELLER_RETURN_IF_ERROR(base_->TruncateFile(path, size));
  std::lock_guard<std::mutex> lock(mu_);
  auto it = files_.find(path);
  if (it != files_.end()) {
    it->second.synced = std::min(it->second.synced, size);
    it->second.written = std::min(it->second.written, size);
    it->second.preallocated = std::min(it->second.preallocated, size);
  }
  return Status::OK();
}

Status FaultInjectionEnv::CreateDirs(const std::string& path) {
  PROPELLER_RETURN_IF_ERROR(CheckMutation("create directories"));
  return base_->CreateDirs(path);
}

Status FaultInjectionEnv::RemoveRecursively(const std::string& path) {
  PROPELLER_RETURN_IF_ERROR(CheckMutation("remove recursively"));
  PROPELLER_RETURN_IF_ERROR(base_->RemoveRecursively(path));
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = files_.begin(); it != files_.end();) {
    it = IsSameOrBelow(it->first, path) ? files_.erase(it) : std::next(it);
  }
  return Status::OK();
}

Status FaultInjectionEnv::SyncDir(const std::string& path) {
  PROPELLER_RETURN_IF_ERROR(CheckMutation("sync directory"));
  return base_->SyncDir(path);
}

int64_t FaultInjectionEnv::NowNanos() { return base_->NowNanos(); }

int64_t FaultInjectionEnv::MonotonicNanos() { return base_->MonotonicNanos(); }

}  // namespace propeller
