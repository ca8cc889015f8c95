#include "client/lib/forgetter.h"

#include "common/logging.h"

namespace propeller {

Forgetter::~Forgetter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  (void)Flush(1);
}

void Forgetter::Add(FileId file, uint64_t generation) {
  bool wake;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queued_[file] = generation;
    if (!thread_.joinable() && !stop_) thread_ = std::thread([this] { Run(); });
    // Only what Run() waits for: a first forget, or a full batch. Waking it for every
    // forget of a burst (it then goes back to gathering) cost a futex wake and a context
    // switch per delete, on the deleting caller's thread.
    wake = queued_.size() == 1 || queued_.size() == kForgetBatch;
  }
  if (wake) work_cv_.notify_one();
}

void Forgetter::Settle(FileId file, bool wait) {
  std::unique_lock<std::mutex> lock(mu_);
  if (queued_.empty() && in_flight_.empty()) return;
  queued_.erase(file);
  if (wait) done_cv_.wait(lock, [&] { return in_flight_.count(file) == 0; });
}

Status Forgetter::Flush(int attempts) {
  std::vector<std::pair<FileId, uint64_t>> batch;
  {
    std::lock_guard<std::mutex> lock(mu_);
    batch = TakeLocked(SIZE_MAX);
  }
  Status st = batch.empty() ? Status::OK() : Send(batch, attempts);
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [&] { return in_flight_.empty(); });
  return st;
}

void Forgetter::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [&] { return stop_ || !queued_.empty(); });
    if (stop_) return;
    // Let a batch gather (many deletes come in bursts), unless it is full already.
    work_cv_.wait_for(lock, kForgetGather,
                      [&] { return stop_ || queued_.size() >= kForgetBatch; });
    if (stop_) return;
    std::vector<std::pair<FileId, uint64_t>> batch = TakeLocked(kForgetBatch);
    if (batch.empty()) continue;  // Settle took them back
    lock.unlock();
    (void)Send(batch, kForgetAttempts);
    lock.lock();
  }
}

std::vector<std::pair<FileId, uint64_t>> Forgetter::TakeLocked(size_t max) {
  std::vector<std::pair<FileId, uint64_t>> batch;
  for (auto it = queued_.begin(); it != queued_.end() && batch.size() < max;) {
    batch.emplace_back(it->first, it->second);
    in_flight_.insert(it->first);
    it = queued_.erase(it);
  }
  return batch;
}

Status Forgetter::Send(const std::vector<std::pair<FileId, uint64_t>>& batch, int attempts) {
  wire::FilesRequest req;
  req.files.reserve(batch.size());
  req.generations.reserve(batch.size());
  for (const auto& [file, gen] : batch) {
    req.files.push_back(file);
    req.generations.push_back(gen);
  }
  Status st;
  for (int a = 0; a < attempts; ++a) {
    // Conditional forgets are idempotent: resending one that was applied changes nothing.
    st = send_(req);
    if (st.ok()) break;
    if (a + 1 < attempts) std::this_thread::sleep_for(std::chrono::milliseconds(50 << a));
  }
  if (!st.ok()) {
    Log(LogLevel::kWarning,
        "client: the master did not forget %zu deleted files (%s); their placements stay "
        "until the inode numbers are reused",
        batch.size(), st.ToString().c_str());
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& entry : batch) in_flight_.erase(entry.first);
  }
  done_cv_.notify_all();
  return st;
}

}  // namespace propeller
