// HeldFiles against a std::map (random numbers, repeated answers, records with several paths,
// lookups in walk-like and random order from several fingers); StateOf of an lstat against
// StateOf of the record FillRecordFromStat makes of it; the path arena and joined paths.
#include "client/lib/reconcile_state.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <map>
#include <string>
#include <vector>

#include "common/random.h"
#include "common/tree_walk.h"

namespace propeller {
namespace {

FileRecord RecordOf(uint64_t ino, std::vector<std::string> paths, uint64_t size) {
  FileRecord r;
  r.id = FileId{1, ino};
  r.paths = std::move(paths);
  r.parent_ino = ino / 100;
  r.size = size;
  r.mtime = FileTimeOf(1700000000 + static_cast<int64_t>(ino), static_cast<int64_t>(ino % 1000));
  r.ctime = FileTimeOf(-5, 999999999);  // before 1970: floor seconds, positive nanoseconds
  r.nlink = static_cast<uint32_t>(r.paths.size());
  return r;
}

TEST(HeldFilesTest, FindsWhatAMapFinds) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (PROPELLER_SEED)");
  Random rnd(seed);
  for (int round = 0; round < 20; ++round) {
    HeldFiles held;
    std::map<uint64_t, FileRecord> model;  // the first record added per number
    // Numbers in runs (files of a directory) far apart, some beyond 32 and 48 bits.
    const int n = static_cast<int>(rnd.Uniform(3000));
    std::vector<uint64_t> numbers;
    uint64_t next = rnd.Uniform(1000);
    for (int i = 0; i < n; ++i) {
      if (rnd.OneIn(50)) next += rnd.OneIn(3) ? (uint64_t{1} << (32 + rnd.Uniform(30))) : 100000;
      next += 1 + rnd.Uniform(3);
      numbers.push_back(next);
    }
    // The search's order: partitions, each in number order, interleaved.
    for (size_t i = numbers.size(); i > 1; --i) {
      if (rnd.OneIn(10)) std::swap(numbers[i - 1], numbers[rnd.Uniform(i)]);
    }
    for (uint64_t ino : numbers) {
      std::vector<std::string> paths = {"/d/f" + std::to_string(ino)};
      if (rnd.OneIn(10)) paths.push_back("/e/link" + std::to_string(ino));
      const FileRecord r = RecordOf(ino, paths, rnd.Uniform(1 << 20));
      for (size_t k = 0; k < r.paths.size(); ++k) held.Add(r);  // a hit per path
      if (rnd.OneIn(30)) held.Add(RecordOf(ino, {"/again"}, 0));  // a repeated answer
      model.try_emplace(ino, r);
    }
    held.Seal();
    EXPECT_EQ(held.count(), model.size());

    auto check = [&](uint64_t ino, HeldFiles::Finger* finger) {
      const HeldFile* f = held.Find(ino, finger);
      auto it = model.find(ino);
      if (it == model.end()) {
        EXPECT_EQ(f, nullptr) << ino;
        return;
      }
      ASSERT_NE(f, nullptr) << ino;
      EXPECT_EQ(f->ino, ino);
      EXPECT_FALSE(f->duplicate);
      std::string joined;
      JoinPaths(it->second.paths, &joined);
      EXPECT_TRUE(Unchanged(f->state, held.Paths(*f), StateOf(it->second), joined)) << ino;
    };
    HeldFiles::Finger walk, random;
    for (const auto& [ino, r] : model) {
      check(ino, &walk);
      check(ino + 1, &walk);  // maybe absent
      if (ino > 0) check(ino - 1, &walk);
      check(model.empty() ? 0 : std::next(model.begin(), static_cast<ptrdiff_t>(
                                    rnd.Uniform(model.size())))->first,
            &random);
      check(rnd.Next(), &random);
    }
    check(0, &walk);
    check(~uint64_t{0}, &walk);
    // Every file once, repeats marked.
    size_t unique = 0;
    for (const HeldFile& f : held.files()) unique += !f.duplicate;
    EXPECT_EQ(unique, model.size());
  }
}

TEST(HeldFilesTest, StateOfAnLstatIsStateOfItsRecord) {
  const uint64_t seed = TestSeed();
  Random rnd(seed);
  for (int i = 0; i < 1000; ++i) {
    struct stat st = {};
    st.st_ino = rnd.Next();
    st.st_size = static_cast<off_t>(rnd.Uniform(1ull << 40));
    st.st_mtim.tv_sec = static_cast<time_t>(rnd.Next());  // any 64-bit second, negative too
    st.st_mtim.tv_nsec = static_cast<long>(rnd.Uniform(kNanosPerSecond));
    st.st_ctim.tv_sec = static_cast<time_t>(rnd.Uniform(4000000000)) - 2000000000;
    st.st_ctim.tv_nsec = static_cast<long>(rnd.Uniform(kNanosPerSecond));
    st.st_uid = static_cast<uid_t>(rnd.Next());
    st.st_gid = static_cast<gid_t>(rnd.Next());
    const mode_t types[] = {S_IFREG, S_IFDIR, S_IFLNK, S_IFIFO, S_IFSOCK, S_IFCHR};
    st.st_mode = types[rnd.Uniform(std::size(types))] | static_cast<mode_t>(rnd.Uniform(07777));
    st.st_nlink = static_cast<nlink_t>(rnd.Uniform(100));
    FileRecord r;
    FillRecordFromStat(st, &r);
    r.parent_ino = 42;
    const FileState a = StateOf(st, 42), b = StateOf(r);
    EXPECT_TRUE(Unchanged(a, "/p", b, "/p")) << "time " << st.st_mtim.tv_sec;
    EXPECT_EQ(CtimeOf(a), r.ctime);
    // Each field counts.
    FileState c = b;
    c.mtime_nsec ^= 1;
    EXPECT_FALSE(Unchanged(a, "/p", c, "/p"));
    c = b;
    c.ctime_sec += 1;
    EXPECT_FALSE(Unchanged(a, "/p", c, "/p"));
    c = b;
    c.parent_ino += 1;
    EXPECT_FALSE(Unchanged(a, "/p", c, "/p"));
    EXPECT_FALSE(Unchanged(a, "/p", b, "/q"));
  }
}

TEST(HeldFilesTest, ArenaAndJoinedPaths) {
  PathArena arena;
  std::vector<std::pair<PathArena::Ref, std::string>> kept;
  for (int i = 0; i < 5000; ++i) {
    // Mostly short; some longer than a block, which get a block of their own.
    const size_t size = i % 1000 == 7 ? (3u << 20) : static_cast<size_t>(i % 300);
    std::string s(size, static_cast<char>('a' + i % 26));
    kept.emplace_back(arena.Add(s), s);
  }
  for (const auto& [ref, s] : kept) ASSERT_EQ(arena.Get(ref), s);

  for (const std::vector<std::string>& paths :
       {std::vector<std::string>{"/"}, std::vector<std::string>{"/a", "/b/c", "/d"}}) {
    std::string joined;
    JoinPaths(paths, &joined);
    EXPECT_EQ(SplitPaths(joined), paths);
  }
}

}  // namespace
}  // namespace propeller
