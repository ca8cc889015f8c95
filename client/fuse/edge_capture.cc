#include "client/fuse/edge_capture.h"

#include <algorithm>
#include <chrono>

#include "common/logging.h"

namespace propeller::fuse {
namespace {

int64_t MonoNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

EdgeCapture::EdgeCapture(const EdgeCaptureOptions& options)
    : options_(options), processes_("/proc", options.flush_interval_ms * 1'000'000) {}

EdgeCapture::~EdgeCapture() { StopFlusher(); }

void EdgeCapture::StartFlusher() {
  flusher_ = std::thread([this] { FlusherMain(); });
}

void EdgeCapture::StopFlusher() {
  {
    std::lock_guard<std::mutex> lock(flusher_mu_);
    flusher_stop_ = true;
  }
  flusher_cv_.notify_all();
  if (flusher_.joinable()) flusher_.join();
}

bool EdgeCapture::Identify(pid_t pid, ProcessInfo* info) {
  return processes_.Identify(pid, MonoNanos(), info);
}

uint64_t EdgeCapture::OnOpen(const ProcessInfo& owner, uint64_t ino, uint32_t generation,
                             bool reads, bool write, std::vector<FileId>* producers) {
  if (!options_.capture_edges) return 0;
  return processes_.OnOpen(owner, FileId{options_.volume, ino}, reads, write, MonoNanos(),
                           producers, generation);
}

void EdgeCapture::OnWriteClose(const ProcessInfo& owner, uint64_t ino, uint32_t generation,
                               uint64_t mark) {
  if (!options_.capture_edges) return;
  processes_.OnWriteClose(owner, FileId{options_.volume, ino}, MonoNanos(), mark, generation);
}

void EdgeCapture::Flush() {
  std::vector<CapturedEdge> edges;
  processes_.Sweep(MonoNanos(), /*all=*/true, &edges);
  Send(edges);
}

void EdgeCapture::Send(const std::vector<CapturedEdge>& edges) {
  constexpr size_t kChunk = 4096;
  for (size_t i = 0; i < edges.size(); i += kChunk) {
    std::vector<FileUpdate> ups;
    for (size_t j = i; j < std::min(edges.size(), i + kChunk); ++j) {
      FileUpdate u;
      u.op = UpdateOp::kAddEdge;
      u.record.id = edges[j].src;
      u.record.inode_generation = edges[j].src_generation;
      u.edge_dst = edges[j].dst;
      u.edge_dst_generation = edges[j].dst_generation;
      u.edge_weight = edges[j].weight;
      ups.push_back(std::move(u));
    }
    Status s = options_.client->Update(ups);
    if (s.ok()) {
      edges_sent_ += ups.size();
    } else {
      edge_errors_ += ups.size();
      Log(LogLevel::kDebug, "mount: %zu ACG edges dropped: %s", ups.size(),
          s.ToString().c_str());
    }
  }
}

void EdgeCapture::FlusherMain() {
  std::unique_lock<std::mutex> lock(flusher_mu_);
  while (!flusher_stop_) {
    flusher_cv_.wait_for(lock, std::chrono::milliseconds(500));
    if (flusher_stop_) break;
    lock.unlock();
    std::vector<CapturedEdge> edges;
    processes_.Sweep(MonoNanos(), /*all=*/false, &edges);
    if (!edges.empty()) Send(edges);
    lock.lock();
  }
}

}  // namespace propeller::fuse
