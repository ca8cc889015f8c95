// WalkTree against std::filesystem and lstat (the oracle); WalkOrderLess against the walk's
// own order and against a component-wise comparison.
#include "common/tree_walk.h"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <vector>

#include "common/dir_fd.h"
#include "common/random.h"
#include "common/temp_dir.h"

namespace propeller {
namespace {

using testing::RemoveTreeAt;

namespace fs = std::filesystem;

class TempTree {
 public:
  TempTree() {
    std::string tmpl = (fs::temp_directory_path() / "tree-walk-XXXXXX").string();
    root_ = ::mkdtemp(tmpl.data()) ? tmpl : "";
  }
  ~TempTree() {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  const std::string& root() const { return root_; }

 private:
  std::string root_;
};

void Touch(const std::string& path, off_t size) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0640);
  ASSERT_GE(fd, 0) << path;
  ASSERT_EQ(::ftruncate(fd, size), 0);
  ::close(fd);
}

std::vector<std::string> Components(const std::string& p) {
  std::vector<std::string> out;
  for (const auto& part : fs::path(p)) {
    if (part != "/") out.push_back(part.string());
  }
  return out;
}

TEST(TreeWalkTest, ReportsEveryEntryOnceInWalkOrder) {
  TempTree t;
  const std::string r = t.root();
  fs::create_directories(r + "/a/b");
  fs::create_directories(r + "/a-c");
  fs::create_directories(r + "/ab");
  Touch(r + "/a/b/x.txt", 10);
  Touch(r + "/a/y", 4096);
  Touch(r + "/a-c/z.tar.gz", 1 << 20);
  Touch(r + "/ab/w", 0);
  ASSERT_EQ(::link((r + "/a/y").c_str(), (r + "/ab/y-link").c_str()), 0);
  ASSERT_EQ(::symlink("a/b", (r + "/sym").c_str()), 0);
  ASSERT_EQ(::setxattr((r + "/a/y").c_str(), "user.level", "42", 2, 0), 0);
  ASSERT_EQ(::setxattr((r + "/a/y").c_str(), "user.ratio", "0.5", 3, 0), 0);
  ASSERT_EQ(::setxattr((r + "/a/y").c_str(), "user.team", "ann", 3, 0), 0);
  // Names no query could ask for are left out: built in (owner, size) or not lowercase.
  ASSERT_EQ(::setxattr((r + "/a/y").c_str(), "user.owner", "ann", 3, 0), 0);
  ASSERT_EQ(::setxattr((r + "/a/y").c_str(), "user.size", "7", 1, 0), 0);
  ASSERT_EQ(::setxattr((r + "/a/y").c_str(), "user.Level", "7", 1, 0), 0);

  std::vector<FileRecord> got;
  TreeWalkStats stats;
  ASSERT_TRUE(WalkTree(r, {.volume = 7}, [&](FileRecord&& rec) {
                got.push_back(std::move(rec));
                return Status::OK();
              }, &stats).ok());

  // Oracle: every path below the root (not following the symlink), hard links merged.
  std::map<uint64_t, std::vector<std::string>> by_ino;
  struct stat st;
  ASSERT_EQ(::lstat(r.c_str(), &st), 0);
  by_ino[st.st_ino].push_back("/");
  for (const auto& e : fs::recursive_directory_iterator(r)) {
    ASSERT_EQ(::lstat(e.path().c_str(), &st), 0);
    by_ino[st.st_ino].push_back(e.path().string().substr(r.size()));
  }
  ASSERT_EQ(got.size(), by_ino.size());
  for (const FileRecord& rec : got) {
    EXPECT_EQ(rec.id.volume, 7u);
    std::vector<std::string> want = by_ino[rec.id.ino];
    std::sort(want.begin(), want.end());
    EXPECT_EQ(rec.paths, want);
    ASSERT_EQ(::lstat((r + (rec.paths[0] == "/" ? "" : rec.paths[0])).c_str(), &st), 0);
    EXPECT_EQ(rec.size, static_cast<uint64_t>(st.st_size)) << rec.paths[0];
    EXPECT_EQ(rec.mode, st.st_mode);
    EXPECT_EQ(rec.nlink, st.st_nlink);
  }
  EXPECT_EQ(stats.dirs, 5u);  // the root, a, a/b, a-c, ab
  EXPECT_EQ(stats.files + stats.dirs, got.size());  // a hard-linked file counts once
  // Single-name entries come in walk order (hard-linked files come at the end).
  std::vector<std::string> order;
  for (const FileRecord& rec : got) {
    if (rec.paths.size() == 1) order.push_back(rec.paths[0]);
  }
  for (size_t i = 1; i < order.size(); ++i) {
    EXPECT_TRUE(WalkOrderLess(order[i - 1], order[i])) << order[i - 1] << " then " << order[i];
  }
  // user.* attributes: integers, doubles and strings.
  for (const FileRecord& rec : got) {
    if (rec.paths[0] != "/a/y") continue;
    EXPECT_EQ(std::get<int64_t>(rec.attrs.at("level")), 42);
    EXPECT_EQ(std::get<double>(rec.attrs.at("ratio")), 0.5);
    EXPECT_EQ(std::get<std::string>(rec.attrs.at("team")), "ann");
    EXPECT_EQ(rec.attrs.size(), 3u);  // not owner, size or Level
  }
}


// A tree deeper than PATH_MAX (80 levels of 100-byte names), and deeper than the walk keeps
// directories open (64): every entry is reported once with its path and attributes, none is
// skipped, a subtree met after returning from the deepest one is read too, and a symbolic
// link is reported, not followed. The oracle is the list the test made.
TEST(TreeWalkTest, ReadsTreesOfAnyDepth) {
  TempTree t;
  const std::string r = t.root();
  UniqueFd root(::open(r.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(root.valid());
  const std::string top(100, 'd');
  struct Cleanup {
    int dir;
    std::string name;
    ~Cleanup() { RemoveTreeAt(dir, name); }
  } cleanup{root.get(), top};
  std::map<std::string, uint64_t> want;  // path -> size (0 for directories and links)
  want["/"] = 0;
  UniqueFd cur(::fcntl(root.get(), F_DUPFD_CLOEXEC, 0));
  std::string rel;
  for (int i = 0; i < 80; ++i) {
    ASSERT_EQ(::mkdirat(cur.get(), top.c_str(), 0755), 0) << i << ": " << std::strerror(errno);
    if (i % 20 == 0 || i == 66) {
      const std::string f = "f" + std::to_string(i);
      const int fd = ::openat(cur.get(), f.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
      ASSERT_GE(fd, 0);
      ASSERT_EQ(::ftruncate(fd, i + 1), 0);
      ::close(fd);
      want[rel + "/" + f] = static_cast<uint64_t>(i + 1);
    }
    if (i == 66) {  // after the deep subtree in walk order ("ddd..." < "e")
      ASSERT_EQ(::mkdirat(cur.get(), "e", 0755), 0);
      ASSERT_EQ(::symlinkat("..", cur.get(), "up"), 0);
      want[rel + "/e"] = 0;
      want[rel + "/up"] = 0;
    }
    rel += "/" + top;
    want[rel] = 0;
    cur.Reset(::openat(cur.get(), top.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    ASSERT_TRUE(cur.valid());
  }
  ASSERT_GT(rel.size(), 8000u);
  ASSERT_EQ(::fsetxattr(cur.get(), "user.depth", "80", 2, 0), 0);
  std::map<std::string, uint64_t> got;
  TreeWalkStats stats;
  int64_t depth_attr = 0;
  ASSERT_TRUE(WalkTree(r, {.volume = 3}, [&](FileRecord&& rec) {
                EXPECT_EQ(rec.paths.size(), 1u);
                got[rec.paths[0]] = rec.type == FileType::kRegular ? rec.size : 0;
                if (rec.paths[0] == rel) depth_attr = std::get<int64_t>(rec.attrs.at("depth"));
                return Status::OK();
              }, &stats).ok());
  EXPECT_EQ(got, want);
  EXPECT_EQ(stats.skipped, 0u);
  EXPECT_EQ(stats.dirs, 82u);  // the root, 80 levels, e
  EXPECT_EQ(depth_attr, 80);
}

// WalkTreeEntries reports what WalkTree does, in the same order: the lstat and paths of each
// entry, and on request the very record WalkTree builds (attributes included) — for files
// with several links too, whose record it read where it met them first.
TEST(TreeWalkTest, EntriesAreWhatWalkTreeReports) {
  TempTree t;
  const std::string r = t.root();
  fs::create_directories(r + "/a/b");
  fs::create_directories(r + "/c");
  Touch(r + "/a/b/x", 10);
  Touch(r + "/a/y", 20);
  Touch(r + "/c/z", 30);
  ASSERT_EQ(::link((r + "/a/y").c_str(), (r + "/c/y2").c_str()), 0);
  ASSERT_EQ(::link((r + "/a/y").c_str(), (r + "/y3").c_str()), 0);
  ASSERT_EQ(::symlink("a", (r + "/s").c_str()), 0);
  ASSERT_EQ(::setxattr((r + "/a/y").c_str(), "user.level", "7", 1, 0), 0);
  ASSERT_EQ(::setxattr((r + "/c/z").c_str(), "user.team", "bo", 2, 0), 0);
  ASSERT_EQ(::setxattr((r + "/a").c_str(), "user.kind", "dir", 3, 0), 0);

  // The access times of directories move as the walks list them: not compared.
  auto without_atime = [](FileRecord rec) {
    rec.atime = 0;
    return rec;
  };
  std::vector<FileRecord> want;
  TreeWalkStats want_stats;
  ASSERT_TRUE(WalkTree(r, {.volume = 4}, [&](FileRecord&& rec) {
                want.push_back(without_atime(std::move(rec)));
                return Status::OK();
              }, &want_stats).ok());
  for (bool take : {false, true}) {
    SCOPED_TRACE(take ? "records taken" : "records not taken");
    std::vector<FileRecord> got;
    TreeWalkStats stats;
    ASSERT_TRUE(WalkTreeEntries(r, {.volume = 4}, [&](TreeEntry& e) {
                  std::vector<std::string> paths;
                  for (size_t i = 0; i < e.path_count(); ++i) paths.emplace_back(e.path(i));
                  EXPECT_TRUE(std::is_sorted(paths.begin(), paths.end()));
                  FileRecord rec;
                  if (take) {
                    rec = e.TakeRecord();
                    EXPECT_EQ(rec.paths, paths);
                    EXPECT_EQ(rec.parent_ino, e.parent_ino());
                    EXPECT_EQ(rec.id.ino, static_cast<uint64_t>(e.stat().st_ino));
                    EXPECT_EQ(rec.mode, e.stat().st_mode);
                    EXPECT_EQ(rec.nlink, e.stat().st_nlink);
                    EXPECT_EQ(rec.ctime, FileTimeOf(e.stat().st_ctim.tv_sec,
                                                    e.stat().st_ctim.tv_nsec));
                  } else {
                    // The record from the lstat alone, to compare with WalkTree's less its
                    // attributes.
                    rec.id = FileId{4, static_cast<uint64_t>(e.stat().st_ino)};
                    rec.paths = paths;
                    rec.parent_ino = e.parent_ino();
                    FillRecordFromStat(e.stat(), &rec);
                  }
                  got.push_back(without_atime(std::move(rec)));
                  return Status::OK();
                }, &stats).ok());
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      FileRecord expected = want[i];
      if (!take) expected.attrs.clear();
      EXPECT_EQ(got[i], expected) << want[i].paths[0];
    }
    EXPECT_EQ(stats.files, want_stats.files);
    EXPECT_EQ(stats.dirs, want_stats.dirs);
    EXPECT_EQ(stats.skipped, 0u);
  }
  // The file with three links comes last, once, with its attribute.
  ASSERT_EQ(want.back().paths, (std::vector<std::string>{"/a/y", "/c/y2", "/y3"}));
  EXPECT_EQ(std::get<int64_t>(want.back().attrs.at("level")), 7);
}

// Attribute lists and values longer than the walk's first buffers (256 bytes) are read whole
// (small enough for the one block ext4 gives a file's attributes).
TEST(TreeWalkTest, ReadsLongAttributeListsAndValues) {
  TempTree t;
  const std::string r = t.root();
  Touch(r + "/f", 1);
  const std::string big(1200, 'v');
  if (::setxattr((r + "/f").c_str(), "user.big", big.data(), big.size(), 0) != 0) {
    GTEST_SKIP() << "this file system refuses a 1,200-byte attribute: " << std::strerror(errno);
  }
  std::map<std::string, std::string> want = {{"big", big}};
  for (int i = 0; i < 24; ++i) {  // a list of about 900 bytes
    const std::string name = "attribute-with-a-long-name-" + std::to_string(i);
    const std::string value = "value " + std::to_string(i);
    ASSERT_EQ(::setxattr((r + "/f").c_str(), ("user." + name).c_str(), value.data(),
                         value.size(), 0), 0);
    want[name] = value;
  }
  std::map<std::string, std::string> got;
  ASSERT_TRUE(WalkTree(r, {.volume = 1}, [&](FileRecord&& rec) {
                if (rec.paths[0] != "/f") return Status::OK();
                for (const auto& [name, value] : rec.attrs) {
                  got[name] = std::get<std::string>(value);
                }
                return Status::OK();
              }, nullptr).ok());
  EXPECT_EQ(got, want);
}

// The records of a walk, atime cleared (listing a directory may move it), by first path.
std::vector<FileRecord> Normalised(std::vector<FileRecord> records) {
  for (FileRecord& r : records) r.atime = 0;
  std::sort(records.begin(), records.end(),
            [](const FileRecord& a, const FileRecord& b) { return a.paths < b.paths; });
  return records;
}

// WalkTreeEntriesParallel reports what WalkTree does — the same records, hard links merged
// across directories with the parent of their first path in walk order — on any number of
// threads, each entry once, files with several links last; a tree deeper than PATH_MAX too;
// and an error from the callback stops every thread and is returned.
TEST(TreeWalkTest, ParallelWalkReportsWhatWalkTreeDoes) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (PROPELLER_SEED)");
  Random rnd(seed);
  TempTree t;
  const std::string r = t.root();
  std::vector<std::string> dirs = {r}, files;
  for (int i = 0; i < 400; ++i) {
    const std::string parent = dirs[rnd.Uniform(dirs.size())];
    const std::string p = parent + "/e" + std::to_string(i);
    switch (rnd.Uniform(6)) {
      case 0:
        ASSERT_EQ(::mkdir(p.c_str(), 0755), 0);
        dirs.push_back(p);
        break;
      case 1:  // another link of a file, anywhere
        if (!files.empty()) {
          ASSERT_EQ(::link(files[rnd.Uniform(files.size())].c_str(), p.c_str()), 0);
          break;
        }
        [[fallthrough]];
      default:
        Touch(p, static_cast<off_t>(rnd.Uniform(5000)));
        if (rnd.OneIn(5)) {
          ASSERT_EQ(::setxattr(p.c_str(), "user.n", "12", 2, 0), 0);
        }
        files.push_back(p);
    }
  }
  // Deeper than PATH_MAX: 45 levels of 100-byte names, a file at the bottom.
  std::string deep = r;
  UniqueFd cur(::open(r.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  const std::string level(100, 'L');
  for (int i = 0; i < 45; ++i) {
    ASSERT_EQ(::mkdirat(cur.get(), level.c_str(), 0755), 0);
    cur.Reset(::openat(cur.get(), level.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    ASSERT_TRUE(cur.valid());
  }
  const int fd = ::openat(cur.get(), "bottom", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ::close(fd);
  struct Cleanup {
    int dir;
    std::string name;
    ~Cleanup() { RemoveTreeAt(dir, name); }
  } cleanup{::open(r.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC), level};

  std::vector<FileRecord> want;
  TreeWalkStats want_stats;
  ASSERT_TRUE(WalkTree(r, {.volume = 2}, [&](FileRecord&& rec) {
                want.push_back(std::move(rec));
                return Status::OK();
              }, &want_stats).ok());
  want = Normalised(std::move(want));
  UniqueFd root(::open(r.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  for (unsigned threads : {1u, 2u, 5u}) {
    SCOPED_TRACE(std::to_string(threads) + " threads");
    std::mutex mu;
    std::vector<FileRecord> got;
    bool linked_seen = false, single_after_linked = false;
    TreeWalkStats stats;
    ASSERT_TRUE(WalkTreeEntriesParallel(root.get(), {.volume = 2}, threads, [&](TreeEntry& e) {
                  FileRecord rec = e.TakeRecord();
                  std::lock_guard<std::mutex> lock(mu);
                  EXPECT_LT(e.worker(), threads);
                  const bool linked = rec.type != FileType::kDirectory && rec.nlink > 1;
                  single_after_linked = single_after_linked || (linked_seen && !linked);
                  linked_seen = linked_seen || linked;
                  got.push_back(std::move(rec));
                  return Status::OK();
                }, &stats).ok());
    EXPECT_EQ(Normalised(std::move(got)), want);
    EXPECT_FALSE(single_after_linked);
    EXPECT_EQ(stats.files, want_stats.files);
    EXPECT_EQ(stats.dirs, want_stats.dirs);
    EXPECT_EQ(stats.skipped, 0u);

    // An error at the 100th entry stops the walk, on every thread.
    std::atomic<int> calls{0};
    Status st = WalkTreeEntriesParallel(root.get(), {.volume = 2}, threads, [&](TreeEntry&) {
      return ++calls == 100 ? Status::Corruption("stop here") : Status::OK();
    }, nullptr);
    EXPECT_EQ(st.code(), StatusCode::kCorruption) << st.ToString();
    EXPECT_LT(calls.load(), static_cast<int>(want.size()));
  }
}

TEST(TreeWalkTest, WalkOrderIsComponentWise) {
  Random rnd(TestSeed());
  const char* kParts[] = {"a", "a-c", "ab", "b", "a.b", "A", "\xc3\xa9"};
  std::vector<std::string> paths = {"/"};
  for (int i = 0; i < 300; ++i) {
    std::string p;
    const int depth = 1 + static_cast<int>(rnd.Uniform(4));
    for (int d = 0; d < depth; ++d) p += std::string("/") + kParts[rnd.Uniform(std::size(kParts))];
    paths.push_back(p);
  }
  for (const std::string& a : paths) {
    for (const std::string& b : paths) {
      const auto ca = Components(a), cb = Components(b);
      const bool want = std::lexicographical_compare(ca.begin(), ca.end(), cb.begin(), cb.end());
      ASSERT_EQ(WalkOrderLess(a, b), want) << a << " vs " << b;
    }
  }
}

}  // namespace
}  // namespace propeller
