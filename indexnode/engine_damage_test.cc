// Damaged data files (docs/faults.md, "Damaged files"): a truncated store shard, flipped bits
// in an LMDB branch page or meta page of one, and a flipped bit inside a stored record. Each
// time: no crash, the damaged ACG is quarantined (the damaged shard, or the ACG's data,
// moved aside, nothing deleted) with the file named, a search that would need it fails
// saying so, the other ACG (in the other shard) keeps serving exactly, updates go on, and
// once the ACG's files are put again and it is marked rebuilt, searches are exact again
// (oracle: the updates the test applied).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "common/lmdb_check.h"
#include "indexnode/engine.h"
#include "indexnode/engine_test_util.h"

namespace propeller {
namespace {

namespace fs = std::filesystem;
using testing::kNow;
using testing::RecordGen;
using testing::TempDir;
using testing::ReadAll;
using testing::WriteFile;


class EngineDamageTest : public ::testing::Test {
 protected:
  static constexpr int kFiles = 3000;  // per ACG: several levels of branch pages

  void SetUp() override {
    eo_.data_dir = dir_.path();
    eo_.background_commit = false;
    eo_.store_shards = 2;  // ACG 1 in shard 1, ACG 2 in shard 0
    auto engine = Engine::Open(eo_);
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    for (uint64_t acg : {1, 2}) {
      std::vector<Update> batch;
      for (int i = 0; i < kFiles; ++i) {
        Update u;
        u.acg = acg;
        u.record = gen_.NewRecord(FileId{1, acg * 100'000 + static_cast<uint64_t>(i)});
        u.record.paths = {"/acg" + std::to_string(acg) + "/file" + std::to_string(i)};
        // A string only the record holds (no index has user attributes by default).
        if (i == 1234) u.record.attrs["note"] = std::string("only-in-the-record");
        files_[acg][u.record.id] = u.record;
        batch.push_back(std::move(u));
      }
      ASSERT_TRUE((*engine)->Apply(batch).ok());
    }
    ASSERT_TRUE((*engine)->Close().ok());  // clean: each shard's data file is marked good
  }

  // The data file holding ACG `acg`.
  std::string Data(uint64_t acg) const {
    return dir_.path() + "/store/shard-" + std::to_string(acg % 2) + "/data.mdb";
  }

  // Every record the search finds (restricted to `acgs` when given).
  Result<std::map<FileId, FileRecord>> Found(Engine* e, std::vector<uint64_t> acgs = {}) {
    SearchRequest req;
    req.query = "size>=0";
    req.now_ns = kNow;
    req.acgs = std::move(acgs);
    PROPELLER_ASSIGN_OR_RETURN(std::vector<SearchHit> hits, e->SearchAll(req));
    std::map<FileId, FileRecord> out;
    for (SearchHit& h : hits) out[h.record.id] = std::move(h.record);
    return out;
  }

  // Reopens after damaging ACG 1 with `damage`, and checks everything the header promises.
  // `kept(bytes)` says whether a quarantined data file holds what the damage left (by default
  // the damaged shard file, byte for byte).
  void ExpectQuarantinedAndRebuilt(
      const std::function<void()>& damage,
      std::function<bool(const std::string&)> kept = nullptr) {
    damage();
    const std::string damaged = ReadAll(Data(1));
    if (!kept) kept = [&](const std::string& bytes) { return bytes == damaged; };
    auto engine = Engine::Open(eo_);
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    Engine* e = engine->get();
    auto damaged_acgs = e->DamagedAcgs();
    ASSERT_EQ(damaged_acgs.count(1), 1u) << "ACG 1 was not found damaged";
    EXPECT_EQ(damaged_acgs.count(2), 0u);
    EXPECT_NE(damaged_acgs[1].find("data.mdb"), std::string::npos) << damaged_acgs[1];
    // Set aside, nothing deleted; the reason names where.
    std::vector<fs::path> holding;
    for (const auto& d : fs::directory_iterator(dir_.path() + "/quarantine")) {
      const fs::path data = d.path() / "data.mdb";
      if (fs::exists(data) && kept(ReadAll(data.string()))) holding.push_back(d.path());
    }
    ASSERT_EQ(holding.size(), 1u) << "no quarantined file holds the damaged data";
    EXPECT_NE(damaged_acgs[1].find(holding[0].string()), std::string::npos) << damaged_acgs[1];
    // Searches needing it fail, clearly; the other ACG serves exactly.
    auto all = Found(e);
    ASSERT_FALSE(all.ok());
    EXPECT_EQ(all.status().code(), StatusCode::kUnavailable);
    EXPECT_NE(all.status().message().find("ACG 1 is damaged"), std::string::npos)
        << all.status().ToString();
    auto other = Found(e, {2});
    ASSERT_TRUE(other.ok()) << other.status().ToString();
    EXPECT_EQ(*other, files_[2]);
    // Updates go on; the rebuild puts ACG 1's files again.
    std::vector<Update> again;
    for (const auto& [id, rec] : files_[1]) {
      Update u;
      u.acg = 1;
      u.record = rec;
      again.push_back(u);
    }
    ASSERT_TRUE(e->Apply(again).ok());
    EXPECT_FALSE(Found(e).ok()) << "not before it is marked rebuilt";
    ASSERT_TRUE(e->MarkRebuilt(1).ok());
    auto rebuilt = Found(e);
    ASSERT_TRUE(rebuilt.ok()) << rebuilt.status().ToString();
    std::map<FileId, FileRecord> want = files_[1];
    want.insert(files_[2].begin(), files_[2].end());
    EXPECT_EQ(*rebuilt, want);
    ASSERT_TRUE(e->Close().ok());
    engine->reset();
    // And it stays rebuilt.
    auto reopened = Engine::Open(eo_);
    ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
    EXPECT_TRUE((*reopened)->DamagedAcgs().empty());
    auto final_found = Found(reopened->get());
    ASSERT_TRUE(final_found.ok()) << final_found.status().ToString();
    EXPECT_EQ(*final_found, want);
  }

  TempDir dir_;
  EngineOptions eo_;
  RecordGen gen_{11};
  std::map<uint64_t, std::map<FileId, FileRecord>> files_;
};

TEST_F(EngineDamageTest, ATruncatedDataFileIsQuarantined) {
  ExpectQuarantinedAndRebuilt([&] {
    const std::string good = ReadAll(Data(1));
    WriteFile(Data(1), good.substr(0, good.size() / 2));
  });
}

TEST_F(EngineDamageTest, FlippedBitsInABranchPageAreQuarantined) {
  ExpectQuarantinedAndRebuilt([&] {
    LmdbCheckStats stats;
    ASSERT_TRUE(CheckLmdbFile(Data(1), true, &stats).ok());
    ASSERT_FALSE(stats.branch_pages.empty());
    std::string bytes = ReadAll(Data(1));
    // The node table and the first node header of a branch page.
    const size_t page = stats.branch_pages.front() * 4096;
    for (size_t off : {size_t{17}, size_t{19}, size_t{4090}}) bytes[page + off] ^= 0x24;
    WriteFile(Data(1), bytes);
  });
}

TEST_F(EngineDamageTest, ADamagedMetaPageIsQuarantined) {
  ExpectQuarantinedAndRebuilt([&] {
    std::string bytes = ReadAll(Data(1));
    bytes[16] ^= 0x01;  // the first meta page's magic number
    bytes[4096 + 16] ^= 0x01;
    WriteFile(Data(1), bytes);
  });
}

TEST_F(EngineDamageTest, AFlippedBitInARecordFailsItsChecksumAndIsQuarantinedAtTheNextStart) {
  // The record's bytes; LMDB's structure is intact.
  std::string bytes = ReadAll(Data(1));
  const size_t at = bytes.find("only-in-the-record");
  ASSERT_NE(at, std::string::npos);
  ASSERT_EQ(bytes.find("only-in-the-record", at + 1), std::string::npos);
  bytes[at + 7] ^= 0x02;
  WriteFile(Data(1), bytes);
  {
    auto engine = Engine::Open(eo_);
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    // Nothing found at open (the structure is fine): the first read of the record finds it.
    auto first = Found(engine->get());
    ASSERT_FALSE(first.ok());
    EXPECT_NE(first.status().ToString().find("checksum"), std::string::npos)
        << first.status().ToString();
    EXPECT_NE(first.status().ToString().find(Data(1)), std::string::npos)
        << first.status().ToString();
    auto second = Found(engine->get());
    ASSERT_FALSE(second.ok());
    EXPECT_EQ(second.status().code(), StatusCode::kUnavailable) << second.status().ToString();
    auto other = Found(engine->get(), {2});
    ASSERT_TRUE(other.ok()) << other.status().ToString();
    EXPECT_EQ(*other, files_[2]);
    ASSERT_TRUE((*engine)->Close().ok());
  }
  // The ACG's data is kept (an export of its key ranges), with the flipped bit.
  std::string flipped = "only-in-the-record";
  flipped[7] ^= 0x02;
  ExpectQuarantinedAndRebuilt([] {}, [&](const std::string& bytes) {
    return bytes.find(flipped) != std::string::npos;
  });
}

TEST_F(EngineDamageTest, AnUncleanAndAnUntouchedDataFileOpenAsTheyAre) {
  // No clean mark (a crash): the deep check reads the whole file and finds it intact.
  fs::remove(dir_.path() + "/store/shard-1/CLEAN");
  auto engine = Engine::Open(eo_);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  EXPECT_TRUE((*engine)->DamagedAcgs().empty());
  auto found = Found(engine->get());
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  std::map<FileId, FileRecord> want = files_[1];
  want.insert(files_[2].begin(), files_[2].end());
  EXPECT_EQ(*found, want);
  EXPECT_FALSE(fs::exists(dir_.path() + "/quarantine"));
}

}  // namespace
}  // namespace propeller
