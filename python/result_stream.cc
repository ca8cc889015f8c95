#include "python/result_stream.h"

#include <utility>

namespace propeller::python {

std::unique_ptr<ResultStream> ResultStream::StartSearch(std::shared_ptr<Client> client,
                                                        std::string query,
                                                        ClientSearchOptions options) {
  std::unique_ptr<ResultStream> s(new ResultStream());
  ResultStream* self = s.get();  // the destructor joins the worker before `self` goes
  s->worker_ = std::thread([self, client = std::move(client), query = std::move(query),
                            options = std::move(options)] {
    Status st = client->Search(query, options, [self](const ClientHit& hit) {
      return self->Push(StreamItem{0, hit.path, hit.record});
    });
    self->Finish(st);
  });
  return s;
}

std::unique_ptr<ResultStream> ResultStream::StartWatch(std::shared_ptr<Client> client,
                                                       std::string query,
                                                       ClientWatchOptions options) {
  std::unique_ptr<ResultStream> s(new ResultStream());
  ResultStream* self = s.get();
  options.on_ready = [self] { self->MarkReady(); };
  // The idle tick is how a cancelled watch with nothing to report notices it is over.
  options.on_idle = [self] { return !self->Cancelled(); };
  s->worker_ = std::thread([self, client = std::move(client), query = std::move(query),
                            options = std::move(options)] {
    Status st = client->Watch(query, options, [self](const ClientWatchEvent& e) {
      return self->Push(StreamItem{e.kind, e.path, e.record});
    });
    // A watch only ends by itself on an error; OK means it was cancelled.
    self->Finish(st);
  });
  return s;
}

ResultStream::~ResultStream() {
  Cancel(Status::Aborted("the stream was closed"));
  Join();
}

void ResultStream::Join() {
  if (worker_.joinable()) worker_.join();
}

bool ResultStream::Push(StreamItem&& item) {
  MutexLock lock(&mu_);
  while (!cancelled_ && items_.size() >= kCapacity) cv_.Wait(&mu_);
  if (cancelled_) return false;
  items_.push_back(std::move(item));
  cv_.NotifyAll();
  return true;
}

void ResultStream::MarkReady() {
  MutexLock lock(&mu_);
  ready_ = true;
  cv_.NotifyAll();
}

bool ResultStream::Cancelled() {
  MutexLock lock(&mu_);
  return cancelled_;
}

void ResultStream::Finish(const Status& status) {
  MutexLock lock(&mu_);
  finished_ = true;
  if (!cancelled_) status_ = status;
  cv_.NotifyAll();
}

void ResultStream::Cancel(const Status& why) {
  MutexLock lock(&mu_);
  if (finished_ || cancelled_) return;  // its outcome is decided (a finished stream's items stay)
  cancelled_ = true;
  status_ = why;
  items_.clear();
  cv_.NotifyAll();
}

ResultStream::Outcome ResultStream::Next(size_t max, std::chrono::milliseconds wait,
                                         std::vector<StreamItem>* out, Status* status) {
  out->clear();
  MutexLock lock(&mu_);
  const auto deadline = std::chrono::steady_clock::now() + wait;
  while (items_.empty() && !finished_ && !cancelled_) {
    const auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) return Outcome::kWaiting;
    cv_.WaitFor(&mu_, left);
  }
  if (items_.empty()) {
    *status = status_;
    return Outcome::kEnded;
  }
  while (!items_.empty() && out->size() < max) {
    out->push_back(std::move(items_.front()));
    items_.pop_front();
  }
  cv_.NotifyAll();  // room for the worker
  return Outcome::kItems;
}

ResultStream::Outcome ResultStream::WaitReady(std::chrono::milliseconds wait, Status* status) {
  MutexLock lock(&mu_);
  const auto deadline = std::chrono::steady_clock::now() + wait;
  while (!ready_ && !finished_ && !cancelled_) {
    const auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) return Outcome::kWaiting;
    cv_.WaitFor(&mu_, left);
  }
  if (ready_) return Outcome::kItems;
  *status = status_;
  return Outcome::kEnded;
}

}  // namespace propeller::python
