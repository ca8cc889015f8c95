// What Reconcile (client/lib/reconcile.h) holds of each file while it compares the index with
// the tree: the fields it compares (FileState; Unchanged decides), the paths in a shared arena
// (PathArena), and the index's side by inode number (HeldFiles). Small on purpose: 100 bytes
// per file plus its paths' bytes, where a whole FileRecord per file in a hash map took several
// times that (peak memory in docs/reconcile.md "Cost").
//
// Thread-compatible: HeldFiles is filled and sealed by one thread (Reconcile's searcher), then,
// after a happens-before edge, read by several at once (its walking threads, each with its own
// Finger), which mark files seen with MarkSeen.
#ifndef PROPELLER_CLIENT_LIB_RECONCILE_STATE_H_
#define PROPELLER_CLIENT_LIB_RECONCILE_STATE_H_

#include <sys/stat.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "common/record.h"

namespace propeller {

// The fields of a file's record that reconcile compares besides its paths: those a change in
// the tree moves. Not the user attributes (the index keeps only those with an index of their
// name; setting or removing an extended attribute changes the ctime, which is compared) nor
// the access time (reading the tree moves it). Times as seconds and nanoseconds: the same
// values as FileTime, 16 bytes fewer per file than two __int128.
struct FileState {
  uint64_t parent_ino = 0;
  uint64_t size = 0;
  int64_t mtime_sec = 0;
  int64_t ctime_sec = 0;
  uint32_t mtime_nsec = 0;
  uint32_t ctime_nsec = 0;
  uint32_t uid = 0;
  uint32_t gid = 0;
  uint32_t mode = 0;
  uint32_t nlink = 0;
  FileType type = FileType::kRegular;
};

// The compared fields of a record, and of a walked file (its lstat, as FillRecordFromStat
// reads it, and the inode of the directory holding its first path).
FileState StateOf(const FileRecord& record);
FileState StateOf(const struct stat& st, uint64_t parent_ino);
// The ctime of a state as a record holds it.
FileTime CtimeOf(const FileState& state);

// Whether the file the index holds (`held`, with `held_paths`) is still the file walked
// (`now`, `now_paths`): every compared field, and the paths, equal. Paths are a file's sorted
// paths joined by '\0' (JoinPaths). The one place that decides what "changed" means.
bool Unchanged(const FileState& held, std::string_view held_paths, const FileState& now,
               std::string_view now_paths);

// A file's sorted paths as one string, each after the first preceded by '\0' (no path holds a
// NUL), into *out; SplitPaths reverses it.
void JoinPaths(const std::vector<std::string>& paths, std::string* out);
std::vector<std::string> SplitPaths(std::string_view joined);

// Append-only storage of strings in 1 MiB blocks (a longer string gets a block of its own),
// so that a million paths cost their bytes and 12 bytes of reference each, not a std::string
// and an allocation each. Views stay valid while the arena lives.
class PathArena {
 public:
  struct Ref {
    uint32_t block = 0;
    uint32_t offset = 0;
    uint32_t size = 0;
  };
  Ref Add(std::string_view s);
  std::string_view Get(Ref ref) const {
    return std::string_view(blocks_[ref.block].get() + ref.offset, ref.size);
  }
  size_t bytes() const { return bytes_; }  // allocated

 private:
  static constexpr size_t kBlock = 1 << 20;
  std::vector<std::unique_ptr<char[]>> blocks_;
  size_t capacity_ = 0;  // of the last block
  size_t used_ = 0;      // of the last block
  size_t bytes_ = 0;
};

// One file of the index.
struct HeldFile {
  uint64_t ino = 0;
  FileState state;
  PathArena::Ref paths;  // joined (JoinPaths)
  bool seen = false;       // the walk met it (MarkSeen: walks on several threads)
  bool duplicate = false;  // a second record of an inode already held: ignored
};

// Every record the index holds for a volume, by inode number: Add each record (the search
// gives a hit per path; a record with several paths is kept once), Seal, then Find.
//
// Sealing sorts the inode numbers (a radix sort of number and position: the files stay where
// they are), and Find searches from where the last lookup with the same Finger ended: the walk
// meets the files of a directory one after the other, and those were mostly created together,
// with nearby numbers, so a lookup mostly touches memory the last one did; and the search
// answers mostly in inode order too, so nearby numbers are mostly nearby files. (A hash table
// cost a cache miss or two per lookup: 12% of a reconcile at 1,000,000 files; sorting the
// files themselves 0.2 s.)
class HeldFiles {
 public:
  // Where a thread's last lookup ended.
  struct Finger {
    size_t pos = 0;
  };

  // REQUIRES: not sealed.
  void Add(const FileRecord& record);
  // Sorts the numbers and marks repeated ones. REQUIRES: called once, after the last Add.
  void Seal();
  // The file with inode `ino`, or null; `finger` is the calling thread's. The pointer stays
  // valid while this object lives. Several threads may look up at once, each with its own
  // finger. REQUIRES: sealed.
  HeldFile* Find(uint64_t ino, Finger* finger);
  std::string_view Paths(const HeldFile& file) const { return arena_.Get(file.paths); }
  // Sets file->seen; several threads may mark at once.
  static void MarkSeen(HeldFile* file);

  // Every file, for the files the walk did not meet (duplicates included: skip them).
  const std::deque<HeldFile>& files() const { return files_; }
  size_t count() const { return files_.size() - duplicates_; }
  // Bytes held: the files, the sorted numbers and the paths' blocks (the deque's own
  // bookkeeping, under 1%, left out).
  size_t MemoryBytes() const;

 private:
  std::deque<HeldFile> files_;  // a deque: no copy of a million entries as it grows
  PathArena arena_;
  std::unordered_set<uint64_t> multi_path_;  // inodes of records with several paths, added
  // Once sealed: every file's number, ascending, and its position in files_.
  std::vector<uint64_t> inos_;
  std::vector<uint32_t> positions_;
  size_t duplicates_ = 0;
  std::string joined_;  // scratch
};

}  // namespace propeller

#endif  // PROPELLER_CLIENT_LIB_RECONCILE_STATE_H_
