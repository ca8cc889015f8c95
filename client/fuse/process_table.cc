#include "client/fuse/process_table.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace propeller::fuse {
namespace {

constexpr int64_t kRecheckNs = 1'000'000'000;

// Reads a small /proc file whole; false when it does not exist (process gone).
bool ReadSmallFile(const std::string& path, std::string* out) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[4096];
  ssize_t n = ::read(fd, buf, sizeof(buf));
  ::close(fd);
  if (n <= 0) return false;
  out->assign(buf, static_cast<size_t>(n));
  return true;
}

// The value of "Key:\t..." in a /proc status file.
bool StatusField(const std::string& status, const char* key, std::string* value) {
  const std::string k = std::string("\n") + key + ":";
  size_t pos = status.find(k);
  if (pos == std::string::npos) {
    if (status.rfind(std::string(key) + ":", 0) != 0) return false;
    pos = 0;
  } else {
    pos += 1;
  }
  pos += std::strlen(key) + 1;
  while (pos < status.size() && (status[pos] == '\t' || status[pos] == ' ')) ++pos;
  size_t end = status.find('\n', pos);
  *value = status.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
  return true;
}

}  // namespace

ProcessTable::ProcessTable(std::string proc_root, int64_t flush_interval_ns)
    : proc_root_(std::move(proc_root)), flush_interval_ns_(flush_interval_ns) {}

bool ProcessTable::StartTime(uint32_t pid, uint64_t* start, uint32_t* ppid) {
  std::string stat;
  if (!ReadSmallFile(proc_root_ + "/" + std::to_string(pid) + "/stat", &stat)) return false;
  // "pid (comm) state ppid ..." — comm may contain spaces and parentheses: parse after the
  // last ')'.
  size_t close = stat.rfind(')');
  if (close == std::string::npos) return false;
  const char* p = stat.c_str() + close + 1;
  // Fields after comm: 3 state, 4 ppid, ..., 22 starttime.
  int field = 2;
  uint64_t values[23] = {};
  while (*p != '\0' && field < 22) {
    while (*p == ' ') ++p;
    ++field;
    char* end = nullptr;
    if (field == 3) {
      ++p;  // the state letter
      continue;
    }
    values[field] = std::strtoull(p, &end, 10);
    if (end == p) return false;
    p = end;
  }
  if (field != 22) return false;
  *start = values[22];
  if (ppid != nullptr) *ppid = static_cast<uint32_t>(values[4]);
  return true;
}

bool ProcessTable::ReadProcess(uint32_t tid, ProcessInfo* out) {
  std::string status;
  if (!ReadSmallFile(proc_root_ + "/" + std::to_string(tid) + "/status", &status)) return false;
  std::string tgid, name;
  if (!StatusField(status, "Tgid", &tgid) || !StatusField(status, "Name", &name)) return false;
  out->key.pid = static_cast<uint32_t>(std::strtoul(tgid.c_str(), nullptr, 10));
  out->app = name;
  uint32_t ppid = 0;
  if (!StartTime(out->key.pid, &out->key.start, &ppid)) return false;
  out->parent = {};
  if (ppid > 1) {
    uint64_t pstart = 0;
    if (StartTime(ppid, &pstart, nullptr)) out->parent = ProcessKey{ppid, pstart};
  }
  return true;
}

bool ProcessTable::Alive(const ProcessKey& key) {
  uint64_t start = 0;
  return StartTime(key.pid, &start, nullptr) && start == key.start;
}

bool ProcessTable::Identify(uint32_t tid, int64_t now_ns, ProcessInfo* out) {
  if (tid == 0) return false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = threads_.find(tid);
    if (it != threads_.end() && now_ns - it->second.checked_ns < kRecheckNs) {
      *out = it->second.info;
      return true;
    }
  }
  ProcessInfo info;
  if (!ReadProcess(tid, &info)) return false;
  std::lock_guard<std::mutex> lock(mu_);
  if (threads_.size() > 4 * kMaxProcesses) threads_.clear();  // bound; entries are cheap to redo
  threads_[tid] = Cached{info, now_ns};
  *out = std::move(info);
  return true;
}

ProcessTable::Proc* ProcessTable::GetProc(const ProcessInfo& info, int64_t now_ns) {
  auto it = procs_.find(info.key);
  if (it == procs_.end()) {
    auto proc = std::make_unique<Proc>();
    proc->info = info;
    proc->last_flush_ns = now_ns;
    it = procs_.emplace(info.key, std::move(proc)).first;
  }
  if (it->second->info.app.empty() && !info.app.empty()) {
    it->second->info = info;  // first seen as somebody's parent; now from its own request
  }
  it->second->last_seen_ns = now_ns;
  return it->second.get();
}

void ProcessTable::Remember(Proc* proc, const FileId& file, uint32_t generation) {
  auto [it, fresh] = proc->opened_set.try_emplace(file, generation);
  if (!fresh) {
    if (generation != 0) it->second = generation;
    return;
  }
  proc->opened.push_back(file);
  proc->opened_mark.push_back(++mark_);
  if (proc->opened.size() > kMaxOpened) {
    proc->opened_set.erase(proc->opened.front());
    proc->opened.erase(proc->opened.begin());
    proc->opened_mark.erase(proc->opened_mark.begin());
  }
}

ProcessTable::Proc* ProcessTable::ParentOf(const ProcessInfo& p, int64_t now_ns) {
  if (p.parent.pid == 0) return nullptr;
  auto it = procs_.find(p.parent);
  if (it != procs_.end()) return it->second.get();
  // The parent has opened nothing itself yet; it still collects its descendants' reads. Its
  // own parent comes from /proc now (once per process), so reads propagate further up.
  ProcessInfo pi;
  pi.key = p.parent;
  uint64_t start = 0;
  uint32_t ppid = 0;
  if (StartTime(p.parent.pid, &start, &ppid) && start == p.parent.start && ppid > 1) {
    uint64_t pstart = 0;
    if (StartTime(ppid, &pstart, nullptr)) pi.parent = ProcessKey{ppid, pstart};
  }
  return GetProc(pi, now_ns);
}

void ProcessTable::AddEdgesTo(const ProcessInfo& p, const FileId& file, uint32_t generation,
                              int64_t now_ns, uint64_t since, Proc** proc_out,
                              Proc** parent_out, std::vector<FileId>* producers) {
  if (procs_.size() >= kMaxProcesses && procs_.find(p.key) == procs_.end()) {
    // Drop the least recently seen process (its edges are lost: weakly consistent).
    auto victim = procs_.begin();
    for (auto it = procs_.begin(); it != procs_.end(); ++it) {
      if (it->second->last_seen_ns < victim->second->last_seen_ns) victim = it;
    }
    procs_.erase(victim);
  }
  Proc* proc = GetProc(p, now_ns);
  Proc* parent = ParentOf(p, now_ns);
  *proc_out = proc;
  *parent_out = parent;
  if (producers != nullptr) producers->clear();
  auto add = [&](const FileId& f, uint32_t f_generation) {
    if (f == file) return;
    if (proc->edges.size() < kMaxPendingEdges) {
      proc->edges[{f, file}] = {f_generation, generation};
    } else {
      // Weakly consistent (docs/architecture.md §4); flushed sets make room again.
      ++dropped_edges_;
    }
    if (producers != nullptr && producers->size() < kMaxProducers) producers->push_back(f);
  };
  // Most recent first; marks increase along `opened`, so stop at the first one not after
  // `since`.
  for (size_t i = proc->opened.size(); i-- > 0 && proc->opened_mark[i] > since;) {
    add(proc->opened[i], proc->opened_set[proc->opened[i]]);
  }
  // A driver's stages (see the header): the reads of the parent's other children count too,
  // but only when the parent read nothing itself.
  if (parent != nullptr && !parent->reads_itself) {
    for (size_t i = parent->opened.size(); i-- > 0 && parent->opened_mark[i] > since;) {
      if (!proc->opened_set.contains(parent->opened[i])) {
        add(parent->opened[i], parent->opened_set[parent->opened[i]]);
      }
    }
  }
}

uint64_t ProcessTable::OnOpen(const ProcessInfo& p, const FileId& file, bool reads,
                              bool writes, int64_t now_ns, std::vector<FileId>* producers,
                              uint32_t generation) {
  std::lock_guard<std::mutex> lock(mu_);
  Proc* proc = nullptr;
  Proc* parent = nullptr;
  if (writes) {
    AddEdgesTo(p, file, generation, now_ns, /*since=*/0, &proc, &parent, producers);
  } else {
    if (producers != nullptr) producers->clear();
    proc = GetProc(p, now_ns);
    parent = ParentOf(p, now_ns);
  }
  // Files remembered from now on get a larger mark than the one returned.
  const uint64_t mark = mark_;
  if (reads) {
    proc->reads_itself = true;
    Remember(proc, file, generation);
    // Every ancestor collects it (bounded: kMaxAncestors levels, and a cycle of stale keys
    // cannot loop).
    Proc* up = parent;
    for (size_t level = 0; up != nullptr && level < kMaxAncestors; ++level) {
      Remember(up, file, generation);
      up = ParentOf(up->info, now_ns);
    }
  }
  return mark;
}

void ProcessTable::Forget(const FileId& file) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [key, proc] : procs_) {
    if (proc->opened_set.erase(file) != 0) {
      for (size_t i = 0; i < proc->opened.size(); ++i) {
        if (proc->opened[i] != file) continue;
        proc->opened.erase(proc->opened.begin() + static_cast<ptrdiff_t>(i));
        proc->opened_mark.erase(proc->opened_mark.begin() + static_cast<ptrdiff_t>(i));
        break;
      }
    }
    if (!proc->edges.empty()) {
      std::erase_if(proc->edges, [&](const auto& e) {
        return e.first.first == file || e.first.second == file;
      });
    }
  }
}

void ProcessTable::OnWriteClose(const ProcessInfo& p, const FileId& file, int64_t now_ns,
                                uint64_t since, uint32_t generation) {
  std::lock_guard<std::mutex> lock(mu_);
  Proc* proc = nullptr;
  Proc* parent = nullptr;
  AddEdgesTo(p, file, generation, now_ns, since, &proc, &parent, nullptr);
}

void ProcessTable::TakeEdges(Proc* proc, std::vector<CapturedEdge>* out) {
  for (const auto& [ends, generations] : proc->edges) {
    out->push_back(
        CapturedEdge{ends.first, ends.second, 1, generations.first, generations.second});
  }
  proc->edges.clear();
}

void ProcessTable::Sweep(int64_t now_ns, bool all, std::vector<CapturedEdge>* out) {
  // Which processes exited: checked outside the lock (it reads /proc).
  std::vector<ProcessKey> keys;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [key, proc] : procs_) keys.push_back(key);
  }
  std::vector<ProcessKey> gone;
  for (const ProcessKey& k : keys) {
    if (!Alive(k)) gone.push_back(k);
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (const ProcessKey& k : gone) {
    auto it = procs_.find(k);
    if (it == procs_.end()) continue;
    TakeEdges(it->second.get(), out);
    procs_.erase(it);
  }
  for (auto& [key, proc] : procs_) {
    if (all || now_ns - proc->last_flush_ns >= flush_interval_ns_) {
      TakeEdges(proc.get(), out);
      proc->last_flush_ns = now_ns;
    }
  }
  if (!gone.empty()) {
    // Forget cached threads of exited processes.
    std::erase_if(threads_, [&](const auto& kv) {
      return std::find(gone.begin(), gone.end(), kv.second.info.key) != gone.end();
    });
  }
}

uint64_t ProcessTable::dropped_edges() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_edges_;
}

size_t ProcessTable::processes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return procs_.size();
}

}  // namespace propeller::fuse
