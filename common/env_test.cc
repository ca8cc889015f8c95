// Tests for env.h, mem_env.cc, env_posix.cc, env_util.cc and fault_env.h.
//
// The behavioural suite (EnvTest) runs the same checks against four Envs: the POSIX Env in a
// fresh temporary directory, NewMemEnv(), and a FaultInjectionEnv (with no faults planned)
// over each, which must be indistinguishable from its base. FaultEnvTest then checks the fault
// plan and the power-loss model against a byte-exact model of what was synced.
#include "common/env.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "common/fault_env.h"
#include "common/random.h"

namespace propeller {
namespace {

enum class EnvKind { kPosix, kMem, kFaultOverPosix, kFaultOverMem };

std::string KindName(const testing::TestParamInfo<EnvKind>& info) {
  switch (info.param) {
    case EnvKind::kPosix: return "Posix";
    case EnvKind::kMem: return "Mem";
    case EnvKind::kFaultOverPosix: return "FaultOverPosix";
    case EnvKind::kFaultOverMem: return "FaultOverMem";
  }
  return "Unknown";
}

// Makes a fresh, empty directory for a test: a real temporary directory for the POSIX Env, a
// fixed path for an in-memory one.
std::string MakeTestRoot(EnvKind kind) {
  if (kind == EnvKind::kPosix || kind == EnvKind::kFaultOverPosix) {
    const char* tmpdir = getenv("TMPDIR");
    std::string tmpl = std::string(tmpdir && *tmpdir ? tmpdir : "/tmp") + "/propeller_env_XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) return "";
    return tmpl;
  }
  return "/test_root";
}

std::string ReadAll(Env* env, const std::string& path) {
  std::string out;
  Status s = ReadFileToString(env, path, &out);
  EXPECT_TRUE(s.ok()) << path << ": " << s.ToString();
  return out;
}

void WriteString(Env* env, const std::string& path, std::string_view data) {
  auto file = env->NewWritableFile(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  ASSERT_TRUE((*file)->Append(data).ok());
  ASSERT_TRUE((*file)->Close().ok());
}

std::vector<std::string> Sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

class EnvTest : public testing::TestWithParam<EnvKind> {
 protected:
  void SetUp() override {
    switch (GetParam()) {
      case EnvKind::kPosix: env_ = Env::Default(); break;
      case EnvKind::kMem:
        owned_ = NewMemEnv();
        env_ = owned_.get();
        break;
      case EnvKind::kFaultOverPosix:
        owned_ = std::make_unique<FaultInjectionEnv>(Env::Default());
        env_ = owned_.get();
        break;
      case EnvKind::kFaultOverMem:
        base_ = NewMemEnv();
        owned_ = std::make_unique<FaultInjectionEnv>(base_.get());
        env_ = owned_.get();
        break;
    }
    root_ = MakeTestRoot(GetParam());
    ASSERT_FALSE(root_.empty());
    ASSERT_TRUE(env_->CreateDirs(root_).ok());
  }
  void TearDown() override {
    if (!root_.empty()) {
      EXPECT_TRUE(env_->RemoveRecursively(root_).ok());
    }
    EXPECT_FALSE(env_->FileExists(root_));
  }

  std::string P(std::string_view name) const { return JoinPath(root_, name); }

  std::unique_ptr<Env> base_;
  std::unique_ptr<Env> owned_;
  Env* env_ = nullptr;
  std::string root_;
};

TEST_P(EnvTest, WriteCloseReadBack) {
  auto file = env_->NewWritableFile(P("f"));
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ((*file)->Size(), 0u);
  ASSERT_TRUE((*file)->Append("hello ").ok());
  ASSERT_TRUE((*file)->Append("").ok());
  ASSERT_TRUE((*file)->Append("world").ok());
  EXPECT_EQ((*file)->Size(), 11u);
  ASSERT_TRUE((*file)->Close().ok());
  EXPECT_TRUE((*file)->Close().ok());  // idempotent
  EXPECT_FALSE((*file)->Append("x").ok());
  EXPECT_TRUE(env_->FileExists(P("f")));
  auto size = env_->GetFileSize(P("f"));
  ASSERT_TRUE(size.ok());
  EXPECT_EQ(*size, 11u);
  EXPECT_EQ(ReadAll(env_, P("f")), "hello world");
}

TEST_P(EnvTest, FlushMakesDataVisibleToReaders) {
  auto file = env_->NewWritableFile(P("f"));
  ASSERT_TRUE(file.ok());
  ASSERT_TRUE((*file)->Append("abc").ok());
  ASSERT_TRUE((*file)->Flush().ok());
  EXPECT_EQ(ReadAll(env_, P("f")), "abc");
  ASSERT_TRUE((*file)->Append("def").ok());
  ASSERT_TRUE((*file)->Sync().ok());
  EXPECT_EQ(ReadAll(env_, P("f")), "abcdef");
  ASSERT_TRUE((*file)->Close().ok());
}

TEST_P(EnvTest, DestructorFlushes) {
  {
    auto file = env_->NewWritableFile(P("f"));
    ASSERT_TRUE(file.ok());
    ASSERT_TRUE((*file)->Append("unclosed").ok());
  }
  EXPECT_EQ(ReadAll(env_, P("f")), "unclosed");
}

TEST_P(EnvTest, LargeAndManySmallAppendsMatchModel) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  Random rnd(seed);
  std::string expected;
  auto file = env_->NewWritableFile(P("big"));
  ASSERT_TRUE(file.ok());
  // Piece sizes straddle the 64 KiB write buffer: many tiny ones, some exactly at and above it.
  for (int i = 0; i < 60; ++i) {
    size_t len = rnd.OneIn(8) ? 60 * 1024 + rnd.Uniform(10 * 1024) : rnd.Uniform(3000);
    if (i == 30) len = 64 * 1024;
    std::string piece(len, '\0');
    for (char& c : piece) c = static_cast<char>(rnd.Uniform(256));
    ASSERT_TRUE((*file)->Append(piece).ok());
    expected += piece;
    ASSERT_EQ((*file)->Size(), expected.size());
    if (rnd.OneIn(10)) {
      ASSERT_TRUE((*file)->Flush().ok());
    }
  }
  ASSERT_TRUE((*file)->Close().ok());
  EXPECT_EQ(*env_->GetFileSize(P("big")), expected.size());
  EXPECT_TRUE(ReadAll(env_, P("big")) == expected);
}

TEST_P(EnvTest, NewWritableFileTruncates) {
  WriteString(env_, P("f"), "old contents");
  WriteString(env_, P("f"), "new");
  EXPECT_EQ(ReadAll(env_, P("f")), "new");
}

TEST_P(EnvTest, AppendableFileKeepsContentsAndCountsThem) {
  WriteString(env_, P("f"), "12345");
  auto file = env_->NewAppendableFile(P("f"));
  ASSERT_TRUE(file.ok());
  EXPECT_EQ((*file)->Size(), 5u);
  ASSERT_TRUE((*file)->Append("678").ok());
  EXPECT_EQ((*file)->Size(), 8u);
  ASSERT_TRUE((*file)->Close().ok());
  EXPECT_EQ(ReadAll(env_, P("f")), "12345678");

  auto fresh = env_->NewAppendableFile(P("new"));
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ((*fresh)->Size(), 0u);
  ASSERT_TRUE((*fresh)->Append("x").ok());
  ASSERT_TRUE((*fresh)->Close().ok());
  EXPECT_EQ(ReadAll(env_, P("new")), "x");
}

TEST_P(EnvTest, SequentialReadsInChunksThenEof) {
  WriteString(env_, P("f"), "0123456789");
  auto file = env_->NewSequentialFile(P("f"));
  ASSERT_TRUE(file.ok());
  std::string got;
  std::string chunk;
  for (;;) {
    ASSERT_TRUE((*file)->Read(3, &chunk).ok());
    ASSERT_LE(chunk.size(), 3u);
    if (chunk.empty()) break;
    got += chunk;
  }
  EXPECT_EQ(got, "0123456789");
  ASSERT_TRUE((*file)->Read(3, &chunk).ok());
  EXPECT_TRUE(chunk.empty());
}

TEST_P(EnvTest, MissingFilesAreNotFound) {
  EXPECT_FALSE(env_->FileExists(P("missing")));
  EXPECT_FALSE(env_->FileExists(""));
  EXPECT_EQ(env_->NewSequentialFile(P("missing")).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(env_->GetFileSize(P("missing")).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(env_->RemoveFile(P("missing")).code(), StatusCode::kNotFound);
  EXPECT_EQ(env_->RenameFile(P("missing"), P("x")).code(), StatusCode::kNotFound);
  EXPECT_EQ(env_->TruncateFile(P("missing"), 0).code(), StatusCode::kNotFound);
  EXPECT_EQ(env_->GetChildren(P("missing")).status().code(), StatusCode::kNotFound);
  std::string out = "stale";
  EXPECT_EQ(ReadFileToString(env_, P("missing"), &out).code(), StatusCode::kNotFound);
  // A file in a directory that does not exist cannot be created.
  EXPECT_EQ(env_->NewWritableFile(P("nodir/f")).status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(env_->NewAppendableFile(P("nodir/f")).ok());
  // The message names the path.
  EXPECT_NE(env_->RemoveFile(P("missing")).message().find("missing"), std::string::npos);
}

TEST_P(EnvTest, RemoveFile) {
  WriteString(env_, P("f"), "x");
  ASSERT_TRUE(env_->RemoveFile(P("f")).ok());
  EXPECT_FALSE(env_->FileExists(P("f")));
  EXPECT_FALSE(env_->RemoveFile(P("f")).ok());
}

TEST_P(EnvTest, RenameReplacesTarget) {
  WriteString(env_, P("a"), "from a");
  WriteString(env_, P("b"), "old b");
  ASSERT_TRUE(env_->RenameFile(P("a"), P("b")).ok());
  EXPECT_FALSE(env_->FileExists(P("a")));
  EXPECT_EQ(ReadAll(env_, P("b")), "from a");
  ASSERT_TRUE(env_->RenameFile(P("b"), P("c")).ok());
  EXPECT_EQ(ReadAll(env_, P("c")), "from a");
  EXPECT_EQ(Sorted(*env_->GetChildren(root_)), std::vector<std::string>{"c"});
  ASSERT_TRUE(env_->RenameFile(P("c"), P("c")).ok());
  EXPECT_EQ(ReadAll(env_, P("c")), "from a");
}

TEST_P(EnvTest, RenameDirectoryMovesContents) {
  ASSERT_TRUE(env_->CreateDirs(P("d/sub")).ok());
  WriteString(env_, P("d/f"), "f");
  WriteString(env_, P("d/sub/g"), "g");
  WriteString(env_, P("dx"), "sibling");  // shares the prefix "d" but is not inside d
  ASSERT_TRUE(env_->RenameFile(P("d"), P("e")).ok());
  EXPECT_FALSE(env_->FileExists(P("d")));
  EXPECT_EQ(ReadAll(env_, P("e/f")), "f");
  EXPECT_EQ(ReadAll(env_, P("e/sub/g")), "g");
  EXPECT_EQ(ReadAll(env_, P("dx")), "sibling");
  EXPECT_EQ(Sorted(*env_->GetChildren(P("e"))), (std::vector<std::string>{"f", "sub"}));
  EXPECT_EQ(Sorted(*env_->GetChildren(root_)), (std::vector<std::string>{"dx", "e"}));
}

TEST_P(EnvTest, OpenHandlesSurviveRename) {
  auto file = env_->NewWritableFile(P("a"));
  ASSERT_TRUE(file.ok());
  ASSERT_TRUE((*file)->Append("one").ok());
  ASSERT_TRUE((*file)->Flush().ok());
  ASSERT_TRUE(env_->RenameFile(P("a"), P("b")).ok());
  ASSERT_TRUE((*file)->Append("two").ok());
  ASSERT_TRUE((*file)->Close().ok());
  EXPECT_EQ(ReadAll(env_, P("b")), "onetwo");
}

TEST_P(EnvTest, TruncateShrinksAndGrowsWithZeros) {
  WriteString(env_, P("f"), "0123456789");
  ASSERT_TRUE(env_->TruncateFile(P("f"), 4).ok());
  EXPECT_EQ(ReadAll(env_, P("f")), "0123");
  ASSERT_TRUE(env_->TruncateFile(P("f"), 6).ok());
  EXPECT_EQ(ReadAll(env_, P("f")), std::string("0123\0\0", 6));
  ASSERT_TRUE(env_->TruncateFile(P("f"), 0).ok());
  EXPECT_EQ(*env_->GetFileSize(P("f")), 0u);
}

// Preallocate reserves zeros; appends overwrite them from Size() on; the file keeps its
// reserved size. A file opened for append cannot be preallocated (it writes at the end).
TEST_P(EnvTest, PreallocatedFileIsOverwrittenInPlace) {
  auto file = env_->NewWritableFile(P("f"));
  ASSERT_TRUE(file.ok());
  ASSERT_TRUE((*file)->Append("head").ok());
  ASSERT_TRUE((*file)->Preallocate(64).ok());
  EXPECT_EQ((*file)->Size(), 4u);
  EXPECT_EQ(*env_->GetFileSize(P("f")), 64u);
  ASSERT_TRUE((*file)->Append("+tail").ok());
  ASSERT_TRUE((*file)->Sync().ok());
  EXPECT_EQ((*file)->Size(), 9u);
  EXPECT_EQ(ReadAll(env_, P("f")), "head+tail" + std::string(55, '\0'));
  ASSERT_TRUE((*file)->Preallocate(8).ok());  // never shrinks
  ASSERT_TRUE((*file)->Append(std::string(70, 'x')).ok());  // past the reservation: grows
  ASSERT_TRUE((*file)->Close().ok());
  EXPECT_EQ(ReadAll(env_, P("f")), "head+tail" + std::string(70, 'x'));
  auto appendable = env_->NewAppendableFile(P("f"));
  ASSERT_TRUE(appendable.ok());
  EXPECT_EQ((*appendable)->Preallocate(200).code(), StatusCode::kNotSupported);
}

TEST_P(EnvTest, ChildrenListsOnlyDirectEntries) {
  EXPECT_TRUE(env_->GetChildren(root_)->empty());
  WriteString(env_, P("x"), "");
  WriteString(env_, P("y.log"), "");
  ASSERT_TRUE(env_->CreateDirs(P("sub/deeper")).ok());
  WriteString(env_, P("sub/z"), "");
  WriteString(env_, P("sub/deeper/w"), "");
  EXPECT_EQ(Sorted(*env_->GetChildren(root_)), (std::vector<std::string>{"sub", "x", "y.log"}));
  EXPECT_EQ(Sorted(*env_->GetChildren(P("sub"))), (std::vector<std::string>{"deeper", "z"}));
  EXPECT_EQ(Sorted(*env_->GetChildren(P("sub/deeper"))), std::vector<std::string>{"w"});
  // A trailing slash names the same directory.
  EXPECT_EQ(Sorted(*env_->GetChildren(P("sub") + "/")), (std::vector<std::string>{"deeper", "z"}));
  EXPECT_FALSE(env_->GetChildren(P("x")).ok());  // not a directory
}

TEST_P(EnvTest, CreateDirsIsMkdirP) {
  ASSERT_TRUE(env_->CreateDirs(P("a/b/c")).ok());
  EXPECT_TRUE(env_->FileExists(P("a")));
  EXPECT_TRUE(env_->FileExists(P("a/b/c")));
  EXPECT_TRUE(env_->CreateDirs(P("a/b/c")).ok());  // exists: OK
  EXPECT_TRUE(env_->CreateDirs(P("a/b")).ok());
  WriteString(env_, P("a/b/c/file"), "data");
  EXPECT_TRUE(env_->SyncDir(P("a/b/c")).ok());
  // A regular file in the way is an error, never silently replaced.
  EXPECT_FALSE(env_->CreateDirs(P("a/b/c/file")).ok());
  EXPECT_FALSE(env_->CreateDirs(P("a/b/c/file/sub")).ok());
  EXPECT_EQ(ReadAll(env_, P("a/b/c/file")), "data");
  EXPECT_FALSE(env_->NewWritableFile(P("a")).ok());  // a directory is not a file
  EXPECT_FALSE(env_->RemoveFile(P("a")).ok());
}

TEST_P(EnvTest, RemoveRecursively) {
  ASSERT_TRUE(env_->CreateDirs(P("t/u/v")).ok());
  WriteString(env_, P("t/f"), "1");
  WriteString(env_, P("t/u/v/g"), "2");
  WriteString(env_, P("tt"), "keep");  // prefix sibling must survive
  ASSERT_TRUE(env_->RemoveRecursively(P("t")).ok());
  EXPECT_FALSE(env_->FileExists(P("t")));
  EXPECT_FALSE(env_->FileExists(P("t/u/v/g")));
  EXPECT_EQ(ReadAll(env_, P("tt")), "keep");
  EXPECT_TRUE(env_->RemoveRecursively(P("t")).ok());  // missing: OK
  ASSERT_TRUE(env_->RemoveRecursively(P("tt")).ok());  // a plain file
  EXPECT_FALSE(env_->FileExists(P("tt")));
  EXPECT_TRUE(env_->GetChildren(root_)->empty());
}

TEST_P(EnvTest, SyncDir) {
  EXPECT_TRUE(env_->SyncDir(root_).ok());
  EXPECT_FALSE(env_->SyncDir(P("missing")).ok());
}

TEST_P(EnvTest, WriteFileAtomicallyReplacesAndLeavesNoTemporary) {
  ASSERT_TRUE(WriteFileAtomically(env_, P("meta"), "v1").ok());
  EXPECT_EQ(ReadAll(env_, P("meta")), "v1");
  ASSERT_TRUE(WriteFileAtomically(env_, P("meta"), std::string(100000, 'z')).ok());
  EXPECT_EQ(ReadAll(env_, P("meta")), std::string(100000, 'z'));
  EXPECT_EQ(*env_->GetChildren(root_), std::vector<std::string>{"meta"});
  EXPECT_FALSE(WriteFileAtomically(env_, P("nodir/meta"), "x").ok());
}

TEST_P(EnvTest, Clocks) {
  const int64_t now = env_->NowNanos();
  const int64_t wall = static_cast<int64_t>(time(nullptr)) * 1'000'000'000;
  EXPECT_LT(std::abs(now - wall), int64_t{5'000'000'000});
  int64_t prev = env_->MonotonicNanos();
  for (int i = 0; i < 1000; ++i) {
    const int64_t t = env_->MonotonicNanos();
    ASSERT_GE(t, prev);
    prev = t;
  }
}

TEST_P(EnvTest, ConcurrentWritersOnDistinctFiles) {
  constexpr int kThreads = 4;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::string path = P("t" + std::to_string(t));
      auto file = env_->NewWritableFile(path);
      if (!file.ok()) {
        ++failures;
        return;
      }
      for (int i = 0; i < 500; ++i) {
        if (!(*file)->Append(std::to_string(t)).ok()) ++failures;
        if (i % 100 == 0 && !(*file)->Flush().ok()) ++failures;
        if (i % 50 == 0 && !env_->GetChildren(root_).ok()) ++failures;
      }
      if (!(*file)->Close().ok()) ++failures;
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(ReadAll(env_, P("t" + std::to_string(t))),
              std::string(500, static_cast<char>('0' + t)));
  }
}

INSTANTIATE_TEST_SUITE_P(AllEnvs, EnvTest,
                         testing::Values(EnvKind::kPosix, EnvKind::kMem, EnvKind::kFaultOverPosix,
                                         EnvKind::kFaultOverMem),
                         KindName);

TEST(JoinPathTest, NeverDoublesTheSlash) {
  EXPECT_EQ(JoinPath("a", "b"), "a/b");
  EXPECT_EQ(JoinPath("a/", "b"), "a/b");
  EXPECT_EQ(JoinPath("a", "/b"), "a/b");
  EXPECT_EQ(JoinPath("a/", "/b"), "a/b");
  EXPECT_EQ(JoinPath("/", "b"), "/b");
  EXPECT_EQ(JoinPath("/x/y", "z/w"), "/x/y/z/w");
  EXPECT_EQ(JoinPath("", "b"), "b");
  EXPECT_EQ(JoinPath("a", ""), "a");
  EXPECT_EQ(JoinPath("/", "/"), "/");
}

// ---- FaultInjectionEnv ----

class FaultEnvTest : public testing::TestWithParam<bool /*over_posix*/> {
 protected:
  void SetUp() override {
    if (GetParam()) {
      base_ = Env::Default();
      root_ = MakeTestRoot(EnvKind::kPosix);
    } else {
      mem_ = NewMemEnv();
      base_ = mem_.get();
      root_ = "/fault";
    }
    ASSERT_FALSE(root_.empty());
    ASSERT_TRUE(base_->CreateDirs(root_).ok());
    env_ = std::make_unique<FaultInjectionEnv>(base_);
  }
  void TearDown() override { EXPECT_TRUE(base_->RemoveRecursively(root_).ok()); }

  std::string P(std::string_view name) const { return JoinPath(root_, name); }
  std::string BaseRead(const std::string& path) { return ReadAll(base_, path); }

  std::unique_ptr<Env> mem_;
  Env* base_ = nullptr;
  std::unique_ptr<FaultInjectionEnv> env_;
  std::string root_;
};

TEST_P(FaultEnvTest, FailAfterAllowsExactlyNMutations) {
  EXPECT_FALSE(env_->Failed());
  env_->SetFailAfter(3);
  auto file = env_->NewWritableFile(P("f"));  // 1
  ASSERT_TRUE(file.ok());
  ASSERT_TRUE((*file)->Append("a").ok());  // 2
  ASSERT_TRUE((*file)->Flush().ok());      // 3
  EXPECT_FALSE(env_->Failed());
  Status s = (*file)->Append("b");  // 4: refused
  EXPECT_EQ(s.code(), StatusCode::kIOError);
  EXPECT_TRUE(env_->Failed());
  // Every later mutation is refused too, of any kind; reads still work.
  EXPECT_FALSE((*file)->Sync().ok());
  EXPECT_FALSE(env_->NewWritableFile(P("g")).ok());
  EXPECT_FALSE(env_->RenameFile(P("f"), P("h")).ok());
  EXPECT_FALSE(env_->RemoveFile(P("f")).ok());
  EXPECT_FALSE(env_->TruncateFile(P("f"), 0).ok());
  EXPECT_FALSE(env_->CreateDirs(P("d")).ok());
  EXPECT_FALSE(env_->SyncDir(root_).ok());
  EXPECT_TRUE(env_->FileExists(P("f")));
  EXPECT_FALSE(env_->FileExists(P("g")));
  EXPECT_FALSE(env_->FileExists(P("d")));
  EXPECT_EQ(ReadAll(env_.get(), P("f")), "a");
  EXPECT_EQ(env_->MutationCount(), 11);
  file->reset();  // its close is refused as well
  EXPECT_EQ(BaseRead(P("f")), "a");

  env_->ResetState();
  EXPECT_FALSE(env_->Failed());
  EXPECT_EQ(env_->MutationCount(), 0);
  EXPECT_TRUE(env_->RemoveFile(P("f")).ok());
}

TEST_P(FaultEnvTest, FailAfterZeroRefusesTheFirstMutation) {
  env_->SetFailAfter(0);
  EXPECT_FALSE(env_->NewWritableFile(P("f")).ok());
  EXPECT_TRUE(env_->Failed());
  EXPECT_FALSE(base_->FileExists(P("f")));
}

TEST_P(FaultEnvTest, MutationCountCountsEveryMutatingCall) {
  auto file = env_->NewWritableFile(P("f"));  // 1
  ASSERT_TRUE(file.ok());
  ASSERT_TRUE((*file)->Append("x").ok());  // 2
  ASSERT_TRUE((*file)->Sync().ok());       // 3
  ASSERT_TRUE((*file)->Close().ok());      // 4
  ASSERT_TRUE((*file)->Close().ok());      // already closed: not counted
  EXPECT_TRUE(env_->FileExists(P("f")));
  EXPECT_TRUE(env_->GetFileSize(P("f")).ok());
  EXPECT_EQ(env_->MutationCount(), 4);
  ASSERT_TRUE(env_->RenameFile(P("f"), P("g")).ok());  // 5
  ASSERT_TRUE(env_->RemoveFile(P("g")).ok());          // 6
  EXPECT_EQ(env_->MutationCount(), 6);
}

TEST_P(FaultEnvTest, AppendedButUnflushedBytesDieWithTheProcess) {
  auto file = env_->NewWritableFile(P("f"));
  ASSERT_TRUE(file.ok());
  ASSERT_TRUE((*file)->Append("flushed").ok());
  ASSERT_TRUE((*file)->Flush().ok());
  ASSERT_TRUE((*file)->Append("-buffered").ok());
  env_->SetFailAfter(0);
  file->reset();  // the process "dies": the destructor's close is refused
  EXPECT_EQ(BaseRead(P("f")), "flushed");
}

TEST_P(FaultEnvTest, DropUnsyncedDataKeepsExactlyTheSyncedPrefix) {
  auto a = env_->NewWritableFile(P("a"));
  auto b = env_->NewWritableFile(P("b"));
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE((*a)->Append("synced-").ok());
  ASSERT_TRUE((*a)->Sync().ok());
  ASSERT_TRUE((*a)->Append("flushed-only").ok());
  ASSERT_TRUE((*a)->Flush().ok());
  ASSERT_TRUE((*b)->Append("never synced").ok());
  ASSERT_TRUE((*a)->Close().ok());
  ASSERT_TRUE((*b)->Close().ok());
  EXPECT_EQ(BaseRead(P("a")), "synced-flushed-only");
  ASSERT_TRUE(env_->DropUnsyncedData().ok());
  EXPECT_EQ(BaseRead(P("a")), "synced-");
  EXPECT_EQ(BaseRead(P("b")), "");
}

// A preallocated file is synced up to the data written into it, not up to its size: a power
// loss turns what came after the last sync back into zeros and keeps the reservation, also
// when the sync goes through a second handle (as the WAL's does).
TEST_P(FaultEnvTest, DropUnsyncedDataZeroesThePreallocatedTail) {
  auto w = env_->NewWritableFile(P("seg"));
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->Append("hdr|").ok());
  ASSERT_TRUE((*w)->Sync().ok());
  ASSERT_TRUE((*w)->Preallocate(32).ok());
  auto syncer = env_->NewAppendableFile(P("seg"));
  ASSERT_TRUE(syncer.ok());
  ASSERT_TRUE((*w)->Append("one|").ok());
  ASSERT_TRUE((*w)->Flush().ok());
  ASSERT_TRUE((*syncer)->Sync().ok());
  ASSERT_TRUE((*w)->Append("two|").ok());
  ASSERT_TRUE((*w)->Flush().ok());
  ASSERT_TRUE((*w)->Close().ok());
  ASSERT_TRUE((*syncer)->Close().ok());
  EXPECT_EQ(BaseRead(P("seg")), "hdr|one|two|" + std::string(20, '\0'));
  ASSERT_TRUE(env_->DropUnsyncedData().ok());
  EXPECT_EQ(BaseRead(P("seg")), "hdr|one|" + std::string(24, '\0'));
}

TEST_P(FaultEnvTest, AppendableFileStartsSyncedAtItsExistingSize) {
  WriteString(base_, P("log"), "before reboot|");
  auto file = env_->NewAppendableFile(P("log"));
  ASSERT_TRUE(file.ok());
  ASSERT_TRUE((*file)->Append("unsynced").ok());
  ASSERT_TRUE((*file)->Close().ok());
  ASSERT_TRUE(env_->DropUnsyncedData().ok());
  EXPECT_EQ(BaseRead(P("log")), "before reboot|");

  // Reopening a file this env wrote does not make its unsynced bytes durable.
  auto w = env_->NewWritableFile(P("w"));
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->Append("s").ok());
  ASSERT_TRUE((*w)->Sync().ok());
  ASSERT_TRUE((*w)->Append("u").ok());
  ASSERT_TRUE((*w)->Close().ok());
  auto again = env_->NewAppendableFile(P("w"));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->Size(), 2u);
  ASSERT_TRUE((*again)->Close().ok());
  ASSERT_TRUE(env_->DropUnsyncedData().ok());
  EXPECT_EQ(BaseRead(P("w")), "s");
}

TEST_P(FaultEnvTest, RenameAndRemoveUpdateBookkeeping) {
  // The WriteFileAtomically pattern: synced, then renamed over an old file.
  WriteString(base_, P("meta"), "old");
  ASSERT_TRUE(WriteFileAtomically(env_.get(), P("meta"), "new").ok());
  // An unsynced file renamed elsewhere is still unsynced under its new name.
  auto t = env_->NewWritableFile(P("t"));
  ASSERT_TRUE(t.ok());
  ASSERT_TRUE((*t)->Append("unsynced").ok());
  ASSERT_TRUE((*t)->Close().ok());
  ASSERT_TRUE(env_->RenameFile(P("t"), P("moved")).ok());
  // A removed file is not resurrected, and a new file under its name is tracked afresh.
  auto r = env_->NewWritableFile(P("r"));
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE((*r)->Append("12345").ok());
  ASSERT_TRUE((*r)->Sync().ok());
  ASSERT_TRUE((*r)->Close().ok());
  ASSERT_TRUE(env_->RemoveFile(P("r")).ok());
  WriteString(base_, P("r"), "untracked");
  // Files in a renamed directory keep their synced lengths.
  ASSERT_TRUE(env_->CreateDirs(P("dir")).ok());
  auto d = env_->NewWritableFile(P("dir/x"));
  ASSERT_TRUE(d.ok());
  ASSERT_TRUE((*d)->Append("ab").ok());
  ASSERT_TRUE((*d)->Sync().ok());
  ASSERT_TRUE((*d)->Append("cd").ok());
  ASSERT_TRUE((*d)->Close().ok());
  ASSERT_TRUE(env_->RenameFile(P("dir"), P("dir2")).ok());

  ASSERT_TRUE(env_->DropUnsyncedData().ok());
  EXPECT_EQ(BaseRead(P("meta")), "new");
  EXPECT_EQ(BaseRead(P("moved")), "");
  EXPECT_FALSE(base_->FileExists(P("t")));
  EXPECT_EQ(BaseRead(P("r")), "untracked");
  EXPECT_EQ(BaseRead(P("dir2/x")), "ab");
}

TEST_P(FaultEnvTest, TruncateLowersTheSyncedLength) {
  auto f = env_->NewWritableFile(P("f"));
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE((*f)->Append("0123456789").ok());
  ASSERT_TRUE((*f)->Sync().ok());
  ASSERT_TRUE((*f)->Close().ok());
  ASSERT_TRUE(env_->TruncateFile(P("f"), 4).ok());
  auto g = env_->NewAppendableFile(P("f"));
  ASSERT_TRUE(g.ok());
  ASSERT_TRUE((*g)->Append("xyz").ok());
  ASSERT_TRUE((*g)->Close().ok());
  ASSERT_TRUE(env_->DropUnsyncedData().ok());
  EXPECT_EQ(BaseRead(P("f")), "0123");
}

// Random appends, flushes and syncs over several files, then a crash at a random point and a
// power loss: each file must hold exactly the prefix that the model says was synced.
TEST_P(FaultEnvTest, RandomCrashKeepsSyncedPrefixes) {
  const uint64_t seed = TestSeed();
  for (int round = 0; round < 20; ++round) {
    SCOPED_TRACE("seed=" + std::to_string(seed) + " round=" + std::to_string(round));
    Random rnd(seed * 1000 + static_cast<uint64_t>(round));
    env_->ResetState();
    ASSERT_TRUE(base_->RemoveRecursively(P("r")).ok());
    ASSERT_TRUE(base_->CreateDirs(P("r")).ok());
    env_->SetFailAfter(static_cast<int64_t>(rnd.Uniform(120)));

    constexpr int kFiles = 3;
    std::vector<std::unique_ptr<WritableFile>> files(kFiles);
    std::vector<std::string> appended(kFiles);  // everything accepted by Append
    std::vector<size_t> synced(kFiles, 0);       // model: synced prefix length
    std::vector<bool> created(kFiles, false);
    for (int op = 0; op < 200 && !env_->Failed(); ++op) {
      const int i = static_cast<int>(rnd.Uniform(kFiles));
      const std::string path = P("r/f" + std::to_string(i));
      if (!created[i]) {
        auto f = env_->NewWritableFile(path);
        if (!f.ok()) break;
        files[i] = std::move(*f);
        created[i] = true;
        continue;
      }
      const uint64_t kind = rnd.Uniform(10);
      if (kind < 6) {
        std::string piece(rnd.Uniform(50000), static_cast<char>('a' + rnd.Uniform(26)));
        if (files[i]->Append(piece).ok()) appended[i] += piece;
      } else if (kind < 8) {
        (void)files[i]->Flush();
      } else {
        if (files[i]->Sync().ok()) synced[i] = appended[i].size();
      }
    }
    files.clear();  // the process dies (or exits) here
    ASSERT_TRUE(env_->DropUnsyncedData().ok());
    for (int i = 0; i < kFiles; ++i) {
      const std::string path = P("r/f" + std::to_string(i));
      if (!created[i]) {
        EXPECT_FALSE(base_->FileExists(path));
        continue;
      }
      const std::string got = BaseRead(path);
      ASSERT_EQ(got.size(), synced[i]) << "file " << i;
      EXPECT_TRUE(got == appended[i].substr(0, synced[i])) << "file " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Bases, FaultEnvTest, testing::Values(false, true),
                         [](const testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "OverPosix" : "OverMem");
                         });

}  // namespace
}  // namespace propeller
