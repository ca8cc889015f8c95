#include "client/lib/reconcile_state.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>
#include <utility>

#include "common/tree_walk.h"

namespace propeller {

namespace {

// A time as seconds (floor) and nanoseconds: FileTimeSeconds and FileTimeNanos, without their
// 128-bit divisions when the time fits 64 bits (any time a file system gives).
void SplitTime(FileTime t, int64_t* sec, uint32_t* nsec) {
  if (t >= INT64_MIN && t <= INT64_MAX) {
    const int64_t v = static_cast<int64_t>(t);
    int64_t s = v / kNanosPerSecond, ns = v % kNanosPerSecond;
    if (ns < 0) {
      --s;
      ns += kNanosPerSecond;
    }
    *sec = s;
    *nsec = static_cast<uint32_t>(ns);
    return;
  }
  *sec = FileTimeSeconds(t);
  *nsec = static_cast<uint32_t>(FileTimeNanos(t));
}

}  // namespace

FileState StateOf(const FileRecord& r) {
  FileState s;
  s.parent_ino = r.parent_ino;
  s.size = r.size;
  SplitTime(r.mtime, &s.mtime_sec, &s.mtime_nsec);
  SplitTime(r.ctime, &s.ctime_sec, &s.ctime_nsec);
  s.uid = r.uid;
  s.gid = r.gid;
  s.mode = r.mode;
  s.nlink = r.nlink;
  s.type = r.type;
  return s;
}

// As StateOf(record) of the record FillRecordFromStat makes of `st` (reconcile_state_test
// checks it), without making one: this runs for every entry of the tree.
FileState StateOf(const struct stat& st, uint64_t parent_ino) {
  FileState s;
  s.parent_ino = parent_ino;
  s.size = static_cast<uint64_t>(st.st_size);
  s.mtime_sec = static_cast<int64_t>(st.st_mtim.tv_sec);
  s.mtime_nsec = static_cast<uint32_t>(st.st_mtim.tv_nsec);
  s.ctime_sec = static_cast<int64_t>(st.st_ctim.tv_sec);
  s.ctime_nsec = static_cast<uint32_t>(st.st_ctim.tv_nsec);
  s.uid = st.st_uid;
  s.gid = st.st_gid;
  s.mode = st.st_mode;
  s.nlink = static_cast<uint32_t>(st.st_nlink);
  s.type = FileTypeOfMode(st.st_mode);
  return s;
}

FileTime CtimeOf(const FileState& s) { return FileTimeOf(s.ctime_sec, s.ctime_nsec); }

bool Unchanged(const FileState& held, std::string_view held_paths, const FileState& now,
               std::string_view now_paths) {
  return held_paths == now_paths && held.parent_ino == now.parent_ino &&
         held.type == now.type && held.size == now.size && held.mtime_sec == now.mtime_sec &&
         held.mtime_nsec == now.mtime_nsec && held.ctime_sec == now.ctime_sec &&
         held.ctime_nsec == now.ctime_nsec && held.uid == now.uid && held.gid == now.gid &&
         held.mode == now.mode && held.nlink == now.nlink;
}

void JoinPaths(const std::vector<std::string>& paths, std::string* out) {
  out->clear();
  for (size_t i = 0; i < paths.size(); ++i) {
    if (i != 0) out->push_back('\0');
    out->append(paths[i]);
  }
}

std::vector<std::string> SplitPaths(std::string_view joined) {
  std::vector<std::string> out;
  for (;;) {
    const size_t end = joined.find('\0');
    out.emplace_back(joined.substr(0, end));
    if (end == std::string_view::npos) return out;
    joined.remove_prefix(end + 1);
  }
}

PathArena::Ref PathArena::Add(std::string_view s) {
  if (blocks_.empty() || s.size() > capacity_ - used_) {
    capacity_ = std::max(kBlock, s.size());
    blocks_.push_back(std::make_unique_for_overwrite<char[]>(capacity_));
    bytes_ += capacity_;
    used_ = 0;
  }
  Ref ref{static_cast<uint32_t>(blocks_.size() - 1), static_cast<uint32_t>(used_),
          static_cast<uint32_t>(s.size())};
  if (!s.empty()) std::memcpy(blocks_.back().get() + used_, s.data(), s.size());
  used_ += s.size();
  return ref;
}

void HeldFiles::Add(const FileRecord& record) {
  // A record with several paths comes once per path.
  if (record.paths.size() > 1 && !multi_path_.insert(record.id.ino).second) return;
  HeldFile f;
  f.ino = record.id.ino;
  f.state = StateOf(record);
  if (record.paths.size() == 1) {
    f.paths = arena_.Add(record.paths[0]);
  } else {
    JoinPaths(record.paths, &joined_);
    f.paths = arena_.Add(joined_);
  }
  files_.push_back(f);
}

namespace {

// Sorts `keys` ascending and `values` along, least significant 16 bits first, only over the
// bits some key has set: two passes for the numbers of most file systems, whose inodes number
// below 2^32. Stable.
void RadixSort(std::vector<uint64_t>* keys, std::vector<uint32_t>* values) {
  uint64_t all = 0;
  for (uint64_t k : *keys) all |= k;
  std::vector<uint64_t> keys2(keys->size());
  std::vector<uint32_t> values2(values->size());
  std::vector<size_t> count(1 << 16);
  for (int shift = 0; shift < 64 && (all >> shift) != 0; shift += 16) {
    std::fill(count.begin(), count.end(), 0);
    for (uint64_t k : *keys) ++count[(k >> shift) & 0xffff];
    size_t sum = 0;
    for (size_t& c : count) sum += std::exchange(c, sum);
    for (size_t i = 0; i < keys->size(); ++i) {
      const size_t to = count[((*keys)[i] >> shift) & 0xffff]++;
      keys2[to] = (*keys)[i];
      values2[to] = (*values)[i];
    }
    keys->swap(keys2);
    values->swap(values2);
  }
}

}  // namespace

void HeldFiles::Seal() {
  multi_path_ = {};
  inos_.resize(files_.size());
  positions_.resize(files_.size());
  for (size_t i = 0; i < files_.size(); ++i) {
    inos_[i] = files_[i].ino;
    positions_[i] = static_cast<uint32_t>(i);
  }
  RadixSort(&inos_, &positions_);
  for (size_t i = 1; i < inos_.size(); ++i) {
    if (inos_[i] == inos_[i - 1]) {  // an answer repeated: the first counts
      files_[positions_[i]].duplicate = true;
      ++duplicates_;
    }
  }
}

HeldFile* HeldFiles::Find(uint64_t ino, Finger* finger) {
  // Galloping search from the finger: steps of 1, 2, 4, ... towards `ino`, then a binary
  // search inside the last step.
  const size_t n = inos_.size();
  if (n == 0) return nullptr;
  size_t lo = 0, hi = n;  // the first number >= ino is in [lo, hi)
  const size_t pos = std::min(finger->pos, n - 1);
  size_t step = 1;
  if (inos_[pos] < ino) {
    lo = pos + 1;
    while (lo + step - 1 < n && inos_[lo + step - 1] < ino) {
      lo += step;
      step *= 2;
    }
    hi = std::min(n, lo + step);
  } else {
    hi = pos + 1;
    while (hi > step && inos_[hi - step - 1] >= ino) {
      hi -= step;
      step *= 2;
    }
    lo = hi > step ? hi - step : 0;
  }
  const size_t i = static_cast<size_t>(
      std::lower_bound(inos_.begin() + static_cast<ptrdiff_t>(lo),
                       inos_.begin() + static_cast<ptrdiff_t>(hi), ino) -
      inos_.begin());
  finger->pos = i;
  if (i == n || inos_[i] != ino) return nullptr;
  return &files_[positions_[i]];
}

void HeldFiles::MarkSeen(HeldFile* file) {
  std::atomic_ref<bool>(file->seen).store(true, std::memory_order_relaxed);
}

size_t HeldFiles::MemoryBytes() const {
  return files_.size() * sizeof(HeldFile) + inos_.capacity() * sizeof(uint64_t) +
         positions_.capacity() * sizeof(uint32_t) + arena_.bytes();
}

}  // namespace propeller
