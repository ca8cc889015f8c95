// PendingUpdates: what is appended survives a restart in order, delivered batches never come
// back, a write torn by a crash is cut, damage before intact records is refused (and the file
// left alone), and a queue is neither shared nor handed to another index.
#include "client/fuse/pending_updates.h"

#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/temp_dir.h"

namespace propeller::fuse {
namespace {

using testing::TempDir;
using testing::ReadAll;
using testing::WriteFile;

constexpr uint64_t kReserve = 1 << 20;
const char kOwner[] = "cluster test\nvolume 1\nbacking /b\n";



// One kPut of file `ino` at `path`, and one kDelete of ino+1 (the two kinds a mount queues).
std::vector<FileUpdate> Batch(uint64_t ino, const std::string& path) {
  std::vector<FileUpdate> b(2);
  b[0].record.id = FileId{1, ino};
  b[0].record.paths = {path};
  b[0].record.size = ino * 10;
  b[0].app = "cc";
  b[0].producers = {FileId{1, 7}};
  b[1].op = UpdateOp::kDelete;
  b[1].record.id = FileId{1, ino + 1};
  b[1].record.paths = {path + ".old"};
  b[1].record.ctime = 42;
  b[1].acg = 3;
  b[1].generation = 9;
  return b;
}

void ExpectSame(const std::vector<FileUpdate>& got, const std::vector<FileUpdate>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].op, want[i].op);
    EXPECT_EQ(got[i].record, want[i].record);
    EXPECT_EQ(got[i].app, want[i].app);
    EXPECT_EQ(got[i].producers, want[i].producers);
    EXPECT_EQ(got[i].acg, want[i].acg);
    EXPECT_EQ(got[i].generation, want[i].generation);
  }
}

std::unique_ptr<PendingUpdates> OpenOrDie(const std::string& dir) {
  auto q = PendingUpdates::Open(dir, kReserve, kOwner);
  EXPECT_TRUE(q.ok()) << q.status().ToString();
  return q.ok() ? std::move(q).value() : nullptr;
}

TEST(PendingUpdatesTest, BatchesSurviveARestartInOrderAndDeliveredOnesNeverComeBack) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/pending";
  {
    auto q = OpenOrDie(dir);
    ASSERT_NE(q, nullptr);
    EXPECT_TRUE(q->empty());
    EXPECT_GE(q->room(), kReserve);  // the reserve is allocated ahead
    for (uint64_t i = 1; i <= 3; ++i) {
      ASSERT_TRUE(q->Append(Batch(i * 100, "/d/f" + std::to_string(i))).ok());
    }
    EXPECT_EQ(q->size(), 6u);
  }
  {
    auto q = OpenOrDie(dir);
    ASSERT_NE(q, nullptr);
    EXPECT_EQ(q->size(), 6u);
    ExpectSame(*q->Front(), Batch(100, "/d/f1"));
    ASSERT_TRUE(q->PopFront().ok());
  }
  {
    auto q = OpenOrDie(dir);
    ASSERT_NE(q, nullptr);
    EXPECT_EQ(q->size(), 4u);
    ExpectSame(*q->Front(), Batch(200, "/d/f2"));
    ASSERT_TRUE(q->PopFront().ok());
    ASSERT_TRUE(q->PopFront().ok());
    EXPECT_TRUE(q->empty());
    EXPECT_FALSE(q->Front().has_value());
  }
  // All delivered: the file starts over.
  EXPECT_EQ(std::filesystem::file_size(dir + "/queue"), 0u);
  auto q = OpenOrDie(dir);
  ASSERT_NE(q, nullptr);
  EXPECT_TRUE(q->empty());
}

TEST(PendingUpdatesTest, AWriteTornByACrashIsCutAndWhatCameBeforeIsKept) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/pending";
  uint64_t intact = 0;
  {
    auto q = OpenOrDie(dir);
    ASSERT_NE(q, nullptr);
    ASSERT_TRUE(q->Append(Batch(100, "/a")).ok());
    ASSERT_TRUE(q->Append(Batch(200, "/b")).ok());
    intact = std::filesystem::file_size(dir + "/queue");
    ASSERT_TRUE(q->Append(Batch(300, "/c")).ok());
  }
  // The last record half written (its call never returned: nothing acknowledged is lost).
  const std::string all = ReadAll(dir + "/queue");
  for (uint64_t keep : {intact + 3, intact + 9, all.size() - 1}) {
    WriteFile(dir + "/queue", all.substr(0, keep));
    auto q = OpenOrDie(dir);
    ASSERT_NE(q, nullptr);
    EXPECT_EQ(q->size(), 4u) << keep;
    EXPECT_EQ(std::filesystem::file_size(dir + "/queue"), intact) << keep;
    ExpectSame(*q->Front(), Batch(100, "/a"));
    // Appends go on after the cut.
    ASSERT_TRUE(q->Append(Batch(300, "/c")).ok());
  }
}

TEST(PendingUpdatesTest, DamageBeforeIntactRecordsIsRefusedAndTheFileLeftAlone) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/pending";
  {
    auto q = OpenOrDie(dir);
    ASSERT_NE(q, nullptr);
    for (uint64_t i = 1; i <= 3; ++i) ASSERT_TRUE(q->Append(Batch(i * 100, "/x")).ok());
  }
  const std::string good = ReadAll(dir + "/queue");
  for (size_t at : {size_t{2}, size_t{6}, size_t{20}, good.size() / 2}) {
    std::string bad = good;
    bad[at] = static_cast<char>(bad[at] ^ 0x10);
    WriteFile(dir + "/queue", bad);
    auto q = PendingUpdates::Open(dir, kReserve, kOwner);
    ASSERT_FALSE(q.ok()) << "byte " << at;
    EXPECT_EQ(q.status().code(), StatusCode::kCorruption) << q.status().ToString();
    EXPECT_NE(q.status().ToString().find(dir + "/queue"), std::string::npos)
        << q.status().ToString();
    EXPECT_EQ(ReadAll(dir + "/queue"), bad) << "a damaged queue must not be cut";
  }
  WriteFile(dir + "/queue", good);
  auto q = OpenOrDie(dir);
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->size(), 6u);
}

TEST(PendingUpdatesTest, AHeadPastTheEndIsAStartOverOnlyWhenTheQueueIsEmpty) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/pending";
  {
    auto q = OpenOrDie(dir);
    ASSERT_NE(q, nullptr);
    ASSERT_TRUE(q->Append(Batch(100, "/a")).ok());
  }
  const std::string head_past = std::string("\xff\x00\x00\x00\x00\x00\x00\x00", 8);
  WriteFile(dir + "/head", head_past);
  auto bad = PendingUpdates::Open(dir, kReserve, kOwner);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kCorruption) << bad.status().ToString();
  // A crash between emptying the file and resetting the head (PopFront of the last batch).
  WriteFile(dir + "/queue", "");
  auto q = OpenOrDie(dir);
  ASSERT_NE(q, nullptr);
  EXPECT_TRUE(q->empty());
  ASSERT_TRUE(q->Append(Batch(100, "/a")).ok());
  q.reset();
  q = OpenOrDie(dir);
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->size(), 2u);
}

TEST(PendingUpdatesTest, AQueueIsNeitherSharedNorHandedToAnotherIndex) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/pending";
  auto q = OpenOrDie(dir);
  ASSERT_NE(q, nullptr);
  auto second = PendingUpdates::Open(dir, kReserve, kOwner);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable) << second.status().ToString();
  ASSERT_TRUE(q->Append(Batch(100, "/a")).ok());
  q.reset();
  // Updates for one index must not go to another.
  auto other = PendingUpdates::Open(dir, kReserve, "cluster other\nvolume 1\nbacking /b\n");
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), StatusCode::kInvalidArgument) << other.status().ToString();
  EXPECT_NE(other.status().ToString().find("cluster test"), std::string::npos);
  q = OpenOrDie(dir);
  ASSERT_NE(q, nullptr);
  ASSERT_TRUE(q->PopFront().ok());
  q.reset();
  // An empty queue may be taken over.
  auto taken = PendingUpdates::Open(dir, kReserve, "cluster other\nvolume 1\nbacking /b\n");
  EXPECT_TRUE(taken.ok()) << taken.status().ToString();
}

TEST(PendingUpdatesTest, ScopesCountTheirPathsAndTheOldNamesATouchedListNames) {
  TempDir tmp;
  auto q = OpenOrDie(tmp.path() + "/pending");
  ASSERT_NE(q, nullptr);
  ASSERT_TRUE(q->Append(Batch(100, "/src/a.c")).ok());
  // A rename of /old/dir to /new/dir: the records name /new/..., the touched list /old/dir.
  std::vector<FileUpdate> moved(1);
  moved[0].record.id = FileId{1, 500};
  moved[0].record.paths = {"/new/dir/x"};
  ASSERT_TRUE(q->Append(moved, std::vector<std::string>{"/old/dir"}).ok());
  EXPECT_EQ(q->CountInScope("/"), 3u);
  EXPECT_EQ(q->CountInScope("/src"), 2u);  // the put of /src/a.c and the delete of its .old
  EXPECT_EQ(q->CountInScope("/new"), 1u);
  EXPECT_EQ(q->CountInScope("/old/dir/sub"), 1u);
  EXPECT_EQ(q->CountInScope("/old"), 1u);
  EXPECT_EQ(q->CountInScope("/elsewhere"), 0u);
  EXPECT_EQ(q->WaitForScope("/elsewhere", 10'000), 0u);
  EXPECT_EQ(q->WaitForScope("/src", 10), 2u);  // times out
  std::thread deliverer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_TRUE(q->PopFront().ok());
  });
  EXPECT_EQ(q->WaitForScope("/src", 10'000), 0u);
  deliverer.join();
  EXPECT_EQ(q->WaitForScope("/new", 10), 1u);
}

}  // namespace
}  // namespace propeller::fuse
