// The write-ahead log on an in-memory Env: replay order, torn tails, damage in the middle,
// LSN continuity across restarts and deletion, segment rolling and deletion, group commit.
#include "indexnode/wal.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>
#include <thread>
#include <cerrno>

#include "common/fault_env.h"
#include "schemas/wal_format.h"

namespace propeller {
namespace {

struct Replayed {
  std::vector<std::pair<uint64_t, std::string>> records;
  Wal::ReplayFn fn() {
    return [this](uint64_t lsn, std::string_view p) {
      records.emplace_back(lsn, std::string(p));
      return Status::OK();
    };
  }
};

Wal::Options Opts(Env* env, Durability d = Durability::kDefault, uint64_t segment = 1 << 20) {
  Wal::Options o;
  o.env = env;
  o.dir = "/db/wal";
  o.durability = d;
  o.group_commit_interval_ns = 1'000'000;
  o.segment_bytes = segment;
  return o;
}

std::unique_ptr<Wal> OpenOrDie(const Wal::Options& o, uint64_t min_next, Replayed* r) {
  auto w = Wal::Open(o, min_next, r->fn());
  EXPECT_TRUE(w.ok()) << w.status().ToString();
  return w.ok() ? std::move(w).value() : nullptr;
}

// The path of the newest segment.
std::string LastSegment(Env* env) {
  auto names = env->GetChildren("/db/wal");
  std::string best;
  for (const std::string& n : *names) best = std::max(best, n);
  return "/db/wal/" + best;
}

TEST(WalTest, ReplaysEveryRecordInOrderAcrossRestartsAndSegments) {
  auto env = NewMemEnv();
  for (Durability d : {Durability::kDefault, Durability::kSync}) {
    ASSERT_TRUE(env->RemoveRecursively("/db").ok());
    std::vector<std::pair<uint64_t, std::string>> expected;
    for (int round = 0; round < 3; ++round) {
      Replayed r;
      auto wal = OpenOrDie(Opts(env.get(), d, /*segment=*/300), 1, &r);
      ASSERT_TRUE(wal);
      EXPECT_EQ(r.records, expected);
      for (int i = 0; i < 20; ++i) {
        std::string payload = "round" + std::to_string(round) + "-" + std::to_string(i);
        uint64_t seen = 0;
        auto lsn = wal->Append(payload, [&](uint64_t l) { seen = l; });
        ASSERT_TRUE(lsn.ok());
        EXPECT_EQ(*lsn, seen);
        if (!expected.empty()) {
          EXPECT_EQ(*lsn, expected.back().first + 1);
        }
        expected.emplace_back(*lsn, payload);
      }
    }
    auto names = env->GetChildren("/db/wal");
    EXPECT_GT(names->size(), 3u) << "small segments must roll";
  }
}

TEST(WalTest, DeleteObsoleteKeepsNeededRecordsAndLsnsNeverRepeat) {
  auto env = NewMemEnv();
  Replayed r;
  auto wal = OpenOrDie(Opts(env.get(), Durability::kDefault, 200), 1, &r);
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(wal->Append("x" + std::to_string(i), nullptr).ok());
  ASSERT_TRUE(wal->DeleteObsolete(40).ok());
  wal.reset();
  Replayed r2;
  wal = OpenOrDie(Opts(env.get(), Durability::kDefault, 200), 1, &r2);
  ASSERT_FALSE(r2.records.empty());
  EXPECT_LE(r2.records.front().first, 40u);  // everything from 40 on is still there
  EXPECT_EQ(r2.records.back().first, 50u);
  // Delete everything: the next LSN still continues from min_next_lsn (the ACGs' applied LSN).
  ASSERT_TRUE(wal->DeleteObsolete(wal->next_lsn()).ok());
  wal.reset();
  Replayed r3;
  wal = OpenOrDie(Opts(env.get()), /*min_next=*/51, &r3);
  auto lsn = wal->Append("after", nullptr);
  ASSERT_TRUE(lsn.ok());
  EXPECT_GE(*lsn, 51u);
}

TEST(WalTest, TornTailIsTruncatedAndNeverReplayed) {
  auto env = NewMemEnv();
  Replayed r;
  auto wal = OpenOrDie(Opts(env.get()), 1, &r);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(wal->Append("rec" + std::to_string(i), nullptr).ok());
  wal.reset();
  // Cut the last record in half.
  std::string seg = LastSegment(env.get());
  auto size = env->GetFileSize(seg);
  ASSERT_TRUE(env->TruncateFile(seg, *size - 3).ok());
  Replayed r2;
  wal = OpenOrDie(Opts(env.get()), 1, &r2);
  ASSERT_EQ(r2.records.size(), 4u);
  auto lsn = wal->Append("new", nullptr);
  ASSERT_TRUE(lsn.ok());
  EXPECT_EQ(*lsn, 5u) << "the torn record's LSN is reused: it was never acknowledged";
  wal.reset();
  Replayed r3;
  wal = OpenOrDie(Opts(env.get()), 1, &r3);
  ASSERT_EQ(r3.records.size(), 5u);
  EXPECT_EQ(r3.records.back().second, "new");
}

TEST(WalTest, GarbageTailIsTruncatedButDamageInTheMiddleIsCorruption) {
  auto env = NewMemEnv();
  {
    Replayed r;
    auto wal = OpenOrDie(Opts(env.get()), 1, &r);
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(wal->Append("rec" + std::to_string(i), nullptr).ok());
  }
  std::string seg = LastSegment(env.get());
  std::string data;
  ASSERT_TRUE(ReadFileToString(env.get(), seg, &data).ok());
  {
    // Flip a byte inside the third record's payload. Intact records follow it in the same
    // (last) segment: damage in place, not a torn tail. Before, recovery truncated the log
    // there and every later acknowledged update was gone.
    std::string bad = data;
    const size_t third = kWalHeaderSize + 2 * (kWalRecordHeaderSize + 4);
    bad[third + kWalRecordHeaderSize + 1] ^= 0x40;
    ASSERT_TRUE(WriteFileAtomically(env.get(), seg, bad).ok());
    Replayed r;
    auto wal = Wal::Open(Opts(env.get()), 1, r.fn());
    ASSERT_FALSE(wal.ok());
    EXPECT_EQ(wal.status().code(), StatusCode::kCorruption);
    EXPECT_NE(wal.status().message().find(seg), std::string::npos) << wal.status().ToString();
    EXPECT_NE(wal.status().message().find("offset " + std::to_string(third)), std::string::npos)
        << wal.status().ToString();
    std::string after;
    ASSERT_TRUE(ReadFileToString(env.get(), seg, &after).ok());
    EXPECT_EQ(after, bad) << "the damaged log must be left as it is";
    ASSERT_TRUE(WriteFileAtomically(env.get(), seg, data).ok());
  }
  {
    // A power loss can leave later unsynced records on disk across a hole of sectors that
    // were never written: that is the end of what survived, and is truncated as before.
    auto env3 = NewMemEnv();
    {
      Replayed r;
      auto wal = OpenOrDie(Opts(env3.get()), 1, &r);
      for (int i = 0; i < 6; ++i) ASSERT_TRUE(wal->Append(std::string(700, 'a' + i), nullptr).ok());
    }
    const std::string seg3 = LastSegment(env3.get());
    std::string d3;
    ASSERT_TRUE(ReadFileToString(env3.get(), seg3, &d3).ok());
    const size_t hole = 2048;  // inside the third record, which starts at 16 + 2 * 716
    std::fill(d3.begin() + hole, d3.begin() + hole + 512, '\0');
    ASSERT_TRUE(WriteFileAtomically(env3.get(), seg3, d3).ok());
    Replayed r;
    auto wal = Wal::Open(Opts(env3.get()), 1, r.fn());
    ASSERT_TRUE(wal.ok()) << wal.status().ToString();
    EXPECT_EQ(r.records.size(), 2u);
  }
  {
    // Damage in a segment that is not the last one is corruption, named by file and offset.
    auto env2 = NewMemEnv();
    {
      Replayed r;
      auto wal = OpenOrDie(Opts(env2.get(), Durability::kDefault, 60), 1, &r);
      for (int i = 0; i < 10; ++i) ASSERT_TRUE(wal->Append("record" + std::to_string(i), nullptr).ok());
    }
    auto names = env2->GetChildren("/db/wal");
    std::sort(names->begin(), names->end());
    ASSERT_GT(names->size(), 2u);
    std::string first = "/db/wal/" + (*names)[0];
    std::string d2;
    ASSERT_TRUE(ReadFileToString(env2.get(), first, &d2).ok());
    d2[kWalHeaderSize + kWalRecordHeaderSize] ^= 1;
    ASSERT_TRUE(WriteFileAtomically(env2.get(), first, d2).ok());
    Replayed r;
    auto wal = Wal::Open(Opts(env2.get()), 1, r.fn());
    ASSERT_FALSE(wal.ok());
    EXPECT_EQ(wal.status().code(), StatusCode::kCorruption);
    EXPECT_NE(wal.status().message().find(first), std::string::npos) << wal.status().ToString();
  }
}

// A full disk (ENOSPC at random writes, some cut short): every Append either fails or is
// acknowledged, the log takes updates again by itself once the faults stop, and a reopened log
// replays exactly the acknowledged records, in order — no torn record in front of others. An
// fsync that failed stops the log until it is reopened (fsyncgate), which the loop also does.
TEST(WalTest, FullDiskFailsAppendsUntilSpaceReturnsAndLosesNothingAcknowledged) {
  const uint64_t seed = 4242;
  auto base = NewMemEnv();
  FaultInjectionEnv env(base.get());
  std::vector<std::pair<uint64_t, std::string>> acked;
  // A record whose write passed but whose fsync failed (kSync) was not acknowledged, yet is in
  // the log: its fate is unknown, as after a timeout. Every other record is exactly as told.
  std::set<std::string> in_doubt;
  int failed = 0, reopened = 0;
  auto check = [&](const Replayed& r) {
    std::vector<std::pair<uint64_t, std::string>> told;
    for (const auto& rec : r.records) {
      if (in_doubt.count(rec.second) == 0) told.push_back(rec);
    }
    EXPECT_EQ(told, acked);
    if (told.size() != r.records.size()) {
      // Adopt what the log kept: later rounds expect it.
      acked = r.records;
      for (const auto& rec : r.records) in_doubt.erase(rec.second);
    }
  };
  for (int round = 0; round < 6; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    Replayed r;
    auto wal = OpenOrDie(Opts(&env, round % 2 ? Durability::kSync : Durability::kDefault,
                              /*segment=*/4096),
                         1, &r);
    ASSERT_TRUE(wal);
    check(r);
    env.SetTransientFault(ENOSPC, 0.2, seed + static_cast<uint64_t>(round));
    for (int i = 0; i < 300; ++i) {
      std::string payload = std::to_string(round) + "-" + std::to_string(i) + "-" +
                            std::string(50 + (i * 37) % 400, static_cast<char>('a' + i % 26));
      auto lsn = wal->Append(payload, nullptr);
      if (lsn.ok()) {
        ASSERT_TRUE(acked.empty() || *lsn > acked.back().first);
        acked.emplace_back(*lsn, payload);
      } else {
        ++failed;
        in_doubt.insert(payload);
        EXPECT_NE(lsn.status().message().find("No space left"), std::string::npos)
            << lsn.status().ToString();
      }
    }
    // Space returns: appends succeed again without a restart, unless an fsync failed.
    env.ClearTransientFault();
    auto again = wal->Append("after the disk had room again", nullptr);
    if (again.ok()) {
      acked.emplace_back(*again, "after the disk had room again");
    } else {
      EXPECT_NE(again.status().message().find("syncing the log"), std::string::npos)
          << again.status().ToString();
      ++reopened;
    }
  }
  Replayed last;
  auto wal = OpenOrDie(Opts(&env), 1, &last);
  check(last);
  EXPECT_GT(failed, 0);
  EXPECT_GT(env.TransientFaults(), 0);
  (void)reopened;
}

TEST(WalTest, SyncModeAcknowledgesOnlySyncedRecordsUnderConcurrency) {
  auto base = NewMemEnv();
  FaultInjectionEnv env(base.get());
  Replayed r;
  auto wal = OpenOrDie(Opts(&env, Durability::kSync), 1, &r);
  std::vector<std::thread> threads;
  std::atomic<int> acked{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) {
        if (wal->Append("t" + std::to_string(t) + "-" + std::to_string(i), nullptr).ok()) ++acked;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(acked.load(), 400);
  wal->Crash();
  wal.reset();
  ASSERT_TRUE(env.DropUnsyncedData().ok());
  env.ResetState();
  Replayed r2;
  wal = OpenOrDie(Opts(&env, Durability::kSync), 1, &r2);
  EXPECT_EQ(r2.records.size(), 400u) << "every acknowledged record survives a power loss";
}

TEST(WalTest, DefaultModeGroupCommitSyncsWithinTheInterval) {
  auto base = NewMemEnv();
  FaultInjectionEnv env(base.get());
  Replayed r;
  auto wal = OpenOrDie(Opts(&env, Durability::kDefault), 1, &r);
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(wal->Append("a" + std::to_string(i), nullptr).ok());
  // The group commit runs every 1 ms here; wait until it has covered everything.
  for (int i = 0; i < 2000 && wal->synced_lsn() < 10; ++i) usleep(1000);
  EXPECT_EQ(wal->synced_lsn(), 10u);
  wal->Crash();
  wal.reset();
  ASSERT_TRUE(env.DropUnsyncedData().ok());
  env.ResetState();
  Replayed r2;
  wal = OpenOrDie(Opts(&env, Durability::kDefault), 1, &r2);
  EXPECT_EQ(r2.records.size(), 10u);
}

// A failed write acknowledges nothing and leaves no torn record in front of later ones: the
// next Append cuts the segment back and starts a new one. A failed fsync is sticky.
TEST(WalTest, FailedWriteIsRepairedAndFailedSyncIsSticky) {
  auto base = NewMemEnv();
  FaultInjectionEnv env(base.get());
  Replayed r;
  auto wal = OpenOrDie(Opts(&env, Durability::kSync), 1, &r);
  ASSERT_TRUE(wal->Append("ok", nullptr).ok());
  env.SetTransientFault(ENOSPC);
  bool called = false;
  EXPECT_FALSE(wal->Append("lost", [&](uint64_t) { called = true; }).ok());
  EXPECT_FALSE(called) << "on_logged must not run for a record that failed to be written";
  EXPECT_FALSE(wal->Append("still no room", nullptr).ok());
  env.ClearTransientFault();
  auto after = wal->Append("after", nullptr);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(*after, 2u) << "the failed records were never acknowledged: their LSNs are reused";
  wal.reset();
  Replayed r2;
  wal = OpenOrDie(Opts(&env, Durability::kSync), 1, &r2);
  EXPECT_EQ(r2.records, (std::vector<std::pair<uint64_t, std::string>>{{1, "ok"}, {2, "after"}}));
  // A crash-like failure of the sync itself stays: the kernel may have dropped the data.
  ASSERT_TRUE(wal->Append("x", nullptr).ok());
  env.SetFailAfter(2);  // the record's append and flush pass, its fsync fails
  EXPECT_FALSE(wal->Append("y", nullptr).ok());
  env.SetFailAfter(-1);
  EXPECT_FALSE(wal->Append("z", nullptr).ok()) << "a failed fsync is sticky";
}

// Zeros (a preallocated segment's unused space) never parse as a record, whatever their
// length: a zero length needs the CRC of eight zero bytes, which is not zero.
TEST(WalTest, ZerosAreNeverARecord) {
  for (size_t n : {size_t{0}, size_t{15}, size_t{16}, size_t{17}, size_t{4096}}) {
    const std::string zeros(n, '\0');
    uint64_t lsn = 0;
    std::string_view payload;
    size_t consumed = 0;
    EXPECT_NE(ParseWalRecord(zeros, &lsn, &payload, &consumed), WalParse::kOk) << n;
  }
}

// On a real file system: the current segment is preallocated to segment_bytes, earlier
// ones hold records only, a clean close cuts the last one to its records, and a crash (which
// leaves the zeros) loses nothing; every restart replays every record once.
TEST(WalTest, SegmentsArePreallocatedAndCutToTheirRecords) {
  const char* base = getenv("TMPDIR");
  std::string root = std::string(base ? base : "/tmp") + "/propeller-wal-XXXXXX";
  ASSERT_NE(mkdtemp(root.data()), nullptr);
  Env* env = Env::Default();
  Wal::Options o = Opts(env, Durability::kSync, /*segment=*/4096);
  o.dir = root + "/wal";
  auto sizes = [&] {
    std::map<std::string, uint64_t> out;
    Result<std::vector<std::string>> names = env->GetChildren(o.dir);
    EXPECT_TRUE(names.ok());
    if (!names.ok()) return out;
    for (const std::string& n : names.value()) {
      Result<uint64_t> size = env->GetFileSize(o.dir + "/" + n);
      if (size.ok()) out[n] = size.value();
    }
    return out;
  };
  std::vector<std::string> expected;
  for (int round = 0; round < 3; ++round) {
    Replayed r;
    auto w = Wal::Open(o, 1, r.fn());
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    std::unique_ptr<Wal> wal = std::move(w).value();
    ASSERT_EQ(r.records.size(), expected.size());
    for (size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(r.records[i].second, expected[i]);
    for (int i = 0; i < 100; ++i) {  // ~10 KB: three segments
      expected.push_back(std::string(80, static_cast<char>('a' + i % 26)) + std::to_string(i));
      ASSERT_TRUE(wal->Append(expected.back(), nullptr).ok());
    }
    std::map<std::string, uint64_t> on_disk = sizes();
    ASSERT_GE(on_disk.size(), 3u);
    uint64_t total = 0;
    for (const auto& [name, size] : on_disk) total += size;
    const uint64_t current = on_disk.rbegin()->second;
    EXPECT_EQ(current, 4096u) << "the current segment is preallocated";
    EXPECT_LT(wal->bytes(), total) << "bytes() counts records, not the reserved zeros";
    for (auto it = on_disk.begin(); std::next(it) != on_disk.end(); ++it) {
      // An earlier segment holds its records and nothing else: it parses to its end.
      std::string data;
      ASSERT_TRUE(ReadFileToString(env, o.dir + "/" + it->first, &data).ok());
      size_t off = kWalHeaderSize;
      while (off < data.size()) {
        uint64_t lsn = 0;
        std::string_view payload;
        size_t consumed = 0;
        ASSERT_EQ(ParseWalRecord(std::string_view(data).substr(off), &lsn, &payload, &consumed),
                  WalParse::kOk)
            << it->first << " at " << off;
        off += consumed;
      }
    }
    if (round == 1) {
      wal->Crash();  // the zeros stay; the next open must read them as the end
    } else {
      wal.reset();
      EXPECT_LT(sizes().rbegin()->second, 4096u) << "a clean close cuts the last segment";
    }
  }
  std::error_code ec;
  std::filesystem::remove_all(root, ec);
}

// Power loss in the default mode with preallocated segments: what the group commit synced
// survives, what came after reads as zeros and is not replayed, and nothing is half there.
TEST(WalTest, PowerLossInDefaultModeKeepsTheSyncedPrefix) {
  auto base = NewMemEnv();
  FaultInjectionEnv env(base.get());
  Wal::Options o = Opts(&env, Durability::kDefault);
  Replayed r;
  auto wal = OpenOrDie(o, 1, &r);
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(wal->Append("s" + std::to_string(i), nullptr).ok());
  ASSERT_TRUE(wal->Sync().ok());
  wal->Crash();
  wal.reset();
  o.group_commit_interval_ns = 3'600'000'000'000;  // no group commit in this run
  wal = OpenOrDie(o, 1, &r);
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(wal->Append("u" + std::to_string(i), nullptr).ok());
  wal->Crash();
  wal.reset();
  ASSERT_TRUE(env.DropUnsyncedData().ok());
  env.ResetState();
  Replayed r2;
  wal = OpenOrDie(o, 1, &r2);
  ASSERT_EQ(r2.records.size(), 10u);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(r2.records[i].second, "s" + std::to_string(i));
  auto lsn = wal->Append("next", nullptr);
  ASSERT_TRUE(lsn.ok());
  EXPECT_EQ(*lsn, 11u);
}

}  // namespace
}  // namespace propeller
