// MasterStore: transactions commit all or nothing, counts follow the file map, the mirrors
// equal what LMDB holds, a full map grows, reopen gives the same state, one opener per dir.
#include "master/store.h"

#include <lmdb.h>

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "master/master_test_util.h"
#include "schemas/keys.h"

namespace propeller::master {
namespace {

using testing::TempDir;

std::unique_ptr<MasterStore> OpenStore(const std::string& dir, uint64_t map_bytes = 1ull << 30) {
  MasterStoreOptions o;
  o.dir = dir;
  o.sync = false;
  o.initial_map_bytes = map_bytes;
  auto s = MasterStore::Open(o);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(*s) : nullptr;
}

// The mirrors (what placement reads) must equal what LMDB holds.
void ExpectMirrorsMatch(const MasterStore& store) {
  auto dump = store.Dump();
  ASSERT_TRUE(dump.ok()) << dump.status().ToString();
  EXPECT_EQ(store.Acgs(), dump->acgs);
  EXPECT_EQ(store.Nodes(), dump->nodes);
  EXPECT_EQ(store.Indexes(), dump->indexes);
  EXPECT_EQ(store.Volumes(), dump->volumes);
  EXPECT_EQ(store.FileCount(), dump->files.size());
}

TEST(MasterStoreTest, FreshStoreIsEmpty) {
  TempDir dir;
  auto store = OpenStore(dir.path());
  ASSERT_NE(store, nullptr);
  auto dump = store->Dump();
  ASSERT_TRUE(dump.ok());
  EXPECT_EQ(*dump, StoreDump{});
  std::vector<uint64_t> acgs;
  ASSERT_TRUE(store->LookupFiles({FileId{1, 2}, FileId{3, 4}}, &acgs).ok());
  EXPECT_EQ(acgs, (std::vector<uint64_t>{0, 0}));
}

TEST(MasterStoreTest, UpdateCommitsEverythingAndSurvivesReopen) {
  TempDir dir;
  StoreDump expected;
  {
    auto store = OpenStore(dir.path());
    ASSERT_NE(store, nullptr);
    Status s = store->Update([&](MasterStore::Txn& t) -> Status {
      PROPELLER_ASSIGN_OR_RETURN(uint32_t n1, t.NewNodeId());
      PROPELLER_ASSIGN_OR_RETURN(uint32_t n2, t.NewNodeId());
      EXPECT_EQ(n1, 1u);
      EXPECT_EQ(n2, 2u);
      PROPELLER_RETURN_IF_ERROR(t.PutNode(n1, "tcp://127.0.0.1:1"));
      PROPELLER_RETURN_IF_ERROR(t.PutNode(n2, "tcp://127.0.0.1:2"));
      PROPELLER_ASSIGN_OR_RETURN(uint64_t a1, t.CreateAcg(n1, "cc"));
      PROPELLER_ASSIGN_OR_RETURN(uint64_t a2, t.CreateAcg(n2, ""));
      EXPECT_EQ(a1, 1u);
      EXPECT_EQ(a2, 2u);
      PROPELLER_RETURN_IF_ERROR(t.SetAppAcg("cc", a1));
      PROPELLER_RETURN_IF_ERROR(t.SetAppAcg("", a2));  // the empty tag is a legal key
      for (uint64_t ino = 1; ino <= 10; ++ino) {
        PROPELLER_RETURN_IF_ERROR(t.MapFile(FileId{1, ino}, ino <= 7 ? a1 : a2));
      }
      // Reads see the transaction's own writes.
      EXPECT_EQ(t.FindAcg(a1)->files, 7u);
      EXPECT_EQ(*t.FileAcg(FileId{1, 9}), a2);
      EXPECT_EQ(t.AppAcg("cc"), a1);
      PROPELLER_RETURN_IF_ERROR(t.PutIndex("project", IndexType::kHash));
      PROPELLER_ASSIGN_OR_RETURN(uint32_t v, t.AddVolume("/data"));
      EXPECT_EQ(v, 1u);
      EXPECT_EQ(t.FindVolume("/data"), 1u);
      return Status::OK();
    });
    ASSERT_TRUE(s.ok()) << s.ToString();
    // Moving a file moves its count; unmapping decrements.
    s = store->Update([&](MasterStore::Txn& t) -> Status {
      PROPELLER_RETURN_IF_ERROR(t.MapFile(FileId{1, 1}, 2));
      bool was = false;
      PROPELLER_RETURN_IF_ERROR(t.UnmapFile(FileId{1, 2}, &was));
      EXPECT_TRUE(was);
      PROPELLER_RETURN_IF_ERROR(t.UnmapFile(FileId{9, 9}, &was));
      EXPECT_FALSE(was);
      return Status::OK();
    });
    ASSERT_TRUE(s.ok()) << s.ToString();
    for (uint64_t ino = 3; ino <= 7; ++ino) expected.files[FileId{1, ino}] = 1;
    for (uint64_t ino : {1, 8, 9, 10}) expected.files[FileId{1, ino}] = 2;
    expected.acgs[1] = AcgRecord{1, 5, "cc", AcgState::kActive};
    expected.acgs[2] = AcgRecord{2, 4, "", AcgState::kActive};
    expected.apps = {{"cc", 1}, {"", 2}};
    expected.nodes = {{1, "tcp://127.0.0.1:1"}, {2, "tcp://127.0.0.1:2"}};
    expected.indexes = {{"project", IndexType::kHash}};
    expected.volumes = {{1, "/data"}};
    expected.next_acg = 3;
    expected.next_node = 3;
    expected.next_volume = 2;
    auto dump = store->Dump();
    ASSERT_TRUE(dump.ok());
    EXPECT_EQ(*dump, expected);
    ExpectMirrorsMatch(*store);
    std::vector<uint64_t> acgs;
    ASSERT_TRUE(store->LookupFiles({FileId{1, 1}, FileId{1, 2}, FileId{1, 3}}, &acgs).ok());
    EXPECT_EQ(acgs, (std::vector<uint64_t>{2, 0, 1}));
  }
  auto store = OpenStore(dir.path());
  ASSERT_NE(store, nullptr);
  auto dump = store->Dump();
  ASSERT_TRUE(dump.ok());
  EXPECT_EQ(*dump, expected);
  ExpectMirrorsMatch(*store);
}

TEST(MasterStoreTest, RemovingAVolumeUnmapsItsFilesOnlyAndSurvivesReopen) {
  TempDir dir;
  {
    auto store = OpenStore(dir.path());
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->Update([&](MasterStore::Txn& t) -> Status {
      PROPELLER_ASSIGN_OR_RETURN(uint32_t n, t.NewNodeId());
      PROPELLER_RETURN_IF_ERROR(t.PutNode(n, "ipc:///n"));
      PROPELLER_ASSIGN_OR_RETURN(uint64_t a, t.CreateAcg(n, ""));
      PROPELLER_ASSIGN_OR_RETURN(uint32_t v1, t.AddVolume("/one"));
      PROPELLER_ASSIGN_OR_RETURN(uint32_t v2, t.AddVolume("/two"));
      PROPELLER_ASSIGN_OR_RETURN(uint32_t v3, t.AddVolume("/three"));
      for (uint64_t ino = 1; ino <= 50; ++ino) {
        for (uint32_t v : {v1, v2, v3}) PROPELLER_RETURN_IF_ERROR(t.MapFile(FileId{v, ino}, a));
      }
      return Status::OK();
    }).ok());
    uint64_t unmapped = 0;
    ASSERT_TRUE(store->Update([&](MasterStore::Txn& t) -> Status {
      PROPELLER_RETURN_IF_ERROR(t.RemoveVolume(2, &unmapped));
      EXPECT_FALSE(t.HasVolume(2));
      EXPECT_EQ(t.FindVolume("/two"), 0u);
      EXPECT_EQ(t.FindAcg(1)->files, 100u);
      return Status::OK();
    }).ok());
    EXPECT_EQ(unmapped, 50u);
    EXPECT_EQ(store->Update([&](MasterStore::Txn& t) -> Status {
      uint64_t n = 0;
      return t.RemoveVolume(2, &n);
    }).code(), StatusCode::kNotFound);
    ExpectMirrorsMatch(*store);
  }
  auto store = OpenStore(dir.path());
  ASSERT_NE(store, nullptr);
  auto dump = store->Dump();
  ASSERT_TRUE(dump.ok());
  EXPECT_EQ(dump->volumes, (std::map<uint32_t, std::string>{{1, "/one"}, {3, "/three"}}));
  EXPECT_EQ(dump->files.size(), 100u);
  for (const auto& [id, acg] : dump->files) EXPECT_NE(id.volume, 2u);
  EXPECT_EQ(dump->acgs.at(1).files, 100u);
  ExpectMirrorsMatch(*store);
  // A root registered again gets a new id.
  uint32_t again = 0;
  ASSERT_TRUE(store->Update([&](MasterStore::Txn& t) -> Status {
    PROPELLER_ASSIGN_OR_RETURN(again, t.AddVolume("/two"));
    return Status::OK();
  }).ok());
  EXPECT_EQ(again, 4u);
}

TEST(MasterStoreTest, FailedUpdateKeepsNothing) {
  TempDir dir;
  auto store = OpenStore(dir.path());
  ASSERT_NE(store, nullptr);
  auto before = store->Dump();
  ASSERT_TRUE(before.ok());
  Status s = store->Update([&](MasterStore::Txn& t) -> Status {
    PROPELLER_ASSIGN_OR_RETURN(uint32_t n, t.NewNodeId());
    PROPELLER_RETURN_IF_ERROR(t.PutNode(n, "tcp://h:1"));
    PROPELLER_ASSIGN_OR_RETURN(uint64_t a, t.CreateAcg(n, "x"));
    PROPELLER_RETURN_IF_ERROR(t.MapFile(FileId{1, 1}, a));
    PROPELLER_RETURN_IF_ERROR(t.PutIndex("tag", IndexType::kBTree));
    PROPELLER_RETURN_IF_ERROR(t.AddVolume("/v").status());
    return Status::Unavailable("changed my mind");
  });
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  auto after = store->Dump();
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(*after, *before);  // ids were not consumed either
  ExpectMirrorsMatch(*store);
  // Mapping to an ACG that does not exist is refused.
  s = store->Update([&](MasterStore::Txn& t) { return t.MapFile(FileId{1, 1}, 42); });
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  s = store->Update(
      [&](MasterStore::Txn& t) { return t.CreateAcg(1, std::string(256, 'a')).status(); });
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
}

TEST(MasterStoreTest, FullMapGrowsAndRetries) {
  TempDir dir;
  constexpr uint64_t kFiles = 60000;  // ~4 MB of B-tree: several doublings from 1 MiB
  StoreDump expected;
  {
    auto store = OpenStore(dir.path(), /*map_bytes=*/1u << 20);
    ASSERT_NE(store, nullptr);
    const uint64_t initial = store->map_bytes();
    int runs = 0;
    Status s = store->Update([&](MasterStore::Txn& t) -> Status {
      ++runs;
      PROPELLER_RETURN_IF_ERROR(t.PutNode(1, "inproc://n1"));
      PROPELLER_ASSIGN_OR_RETURN(uint64_t a, t.CreateAcg(1, "big"));
      for (uint64_t i = 0; i < kFiles; ++i) {
        PROPELLER_RETURN_IF_ERROR(t.MapFile(FileId{1, i * 7919}, a));
      }
      return Status::OK();
    });
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_GT(runs, 1);
    EXPECT_GT(store->map_bytes(), initial);
    // Growth between small transactions too.
    for (uint64_t b = 0; b < 20; ++b) {
      s = store->Update([&](MasterStore::Txn& t) -> Status {
        for (uint64_t i = 0; i < 2000; ++i) {
          PROPELLER_RETURN_IF_ERROR(t.MapFile(FileId{2, b * 2000 + i}, 1));
        }
        return Status::OK();
      });
      ASSERT_TRUE(s.ok()) << s.ToString();
    }
    EXPECT_EQ(store->FileCount(), kFiles + 40000);
    auto dump = store->Dump();
    ASSERT_TRUE(dump.ok()) << dump.status().ToString();
    expected = *dump;
    EXPECT_EQ(expected.acgs[1].files, kFiles + 40000);
  }
  auto store = OpenStore(dir.path(), /*map_bytes=*/1u << 20);  // the file is larger: used
  ASSERT_NE(store, nullptr);
  auto dump = store->Dump();
  ASSERT_TRUE(dump.ok());
  EXPECT_EQ(*dump, expected);
}

TEST(MasterStoreTest, OneOpenerPerDirectory) {
  TempDir dir;
  auto store = OpenStore(dir.path());
  ASSERT_NE(store, nullptr);
  MasterStoreOptions o;
  o.dir = dir.path();
  auto second = MasterStore::Open(o);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kIOError);
  EXPECT_NE(second.status().message().find("in use"), std::string::npos);
  store.reset();
  EXPECT_TRUE(MasterStore::Open(o).ok());
}

// Writes `key` = `value` into the named database of the (closed) store at `dir`.
void PokeLmdb(const std::string& dir, const char* db, std::string_view key,
              std::string_view value) {
  MDB_env* env = nullptr;
  ASSERT_EQ(mdb_env_create(&env), 0);
  mdb_env_set_maxdbs(env, 8);
  ASSERT_EQ(mdb_env_open(env, dir.c_str(), 0, 0644), 0);
  MDB_txn* txn = nullptr;
  ASSERT_EQ(mdb_txn_begin(env, nullptr, 0, &txn), 0);
  MDB_dbi dbi;
  ASSERT_EQ(mdb_dbi_open(txn, db, 0, &dbi), 0);
  MDB_val k{key.size(), const_cast<char*>(key.data())};
  MDB_val v{value.size(), const_cast<char*>(value.data())};
  ASSERT_EQ(mdb_put(txn, dbi, &k, &v, 0), 0);
  ASSERT_EQ(mdb_txn_commit(txn), 0);
  mdb_env_close(env);
}

TEST(MasterStoreTest, RefusesNewerFormatAndBadRecords) {
  {
    TempDir dir;
    OpenStore(dir.path()).reset();
    std::string v;
    AppendOrderedU64(kMasterFormatVersion + 1, &v);
    PokeLmdb(dir.path(), "meta", "format_version", v);
    MasterStoreOptions o;
    o.dir = dir.path();
    auto s = MasterStore::Open(o);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.status().code(), StatusCode::kCorruption);
  }
  {
    TempDir dir;
    OpenStore(dir.path()).reset();
    std::string key;
    AppendOrderedU64(1, &key);
    PokeLmdb(dir.path(), "acgs", key, "short");
    MasterStoreOptions o;
    o.dir = dir.path();
    auto s = MasterStore::Open(o);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.status().code(), StatusCode::kCorruption);
  }
  {
    // A file mapped to an ACG that does not count it: the counts no longer add up.
    TempDir dir;
    {
      auto store = OpenStore(dir.path());
      ASSERT_TRUE(store->Update([](MasterStore::Txn& t) -> Status {
                         PROPELLER_RETURN_IF_ERROR(t.CreateAcg(1, "a").status());
                         return t.MapFile(FileId{1, 1}, 1);
                       }).ok());
    }
    std::string key, value;
    AppendFileIdKey(FileId{1, 2}, &key);
    AppendOrderedU64(1, &value);
    PokeLmdb(dir.path(), "files", key, value);
    MasterStoreOptions o;
    o.dir = dir.path();
    auto s = MasterStore::Open(o);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.status().code(), StatusCode::kCorruption);
  }
}


// A format-1 store (8-byte file values) opens as format 2: its mappings read as generation 0,
// new mappings carry their transaction's generation, and a conditional unmap checks it.
TEST(MasterStoreTest, ReadsFormatOneFileValuesAsGenerationZero) {
  TempDir dir;
  {
    auto store = OpenStore(dir.path());
    ASSERT_TRUE(store->Update([](MasterStore::Txn& t) -> Status {
                       PROPELLER_RETURN_IF_ERROR(t.CreateAcg(1, "a").status());
                       return t.MapFile(FileId{1, 1}, 1);
                     }).ok());
  }
  std::string key, value, version;
  AppendFileIdKey(FileId{1, 1}, &key);
  AppendOrderedU64(1, &value);  // the format-1 value: the ACG alone
  PokeLmdb(dir.path(), "files", key, value);
  AppendOrderedU64(1, &version);
  PokeLmdb(dir.path(), "meta", "format_version", version);
  auto store = OpenStore(dir.path());
  ASSERT_NE(store, nullptr);
  std::vector<uint64_t> acgs, gens;
  ASSERT_TRUE(store->LookupFiles({FileId{1, 1}}, &acgs, &gens).ok());
  EXPECT_EQ(acgs, std::vector<uint64_t>{1});
  EXPECT_EQ(gens, std::vector<uint64_t>{0});
  uint64_t g2 = 0, g3 = 0;
  ASSERT_TRUE(store->Update([&](MasterStore::Txn& t) -> Status {
                     PROPELLER_RETURN_IF_ERROR(t.MapFile(FileId{1, 2}, 1, false, &g2));
                     // Unchanged mapping, not renewed: keeps generation 0.
                     uint64_t g = 99;
                     PROPELLER_RETURN_IF_ERROR(t.MapFile(FileId{1, 1}, 1, false, &g));
                     EXPECT_EQ(g, 0u);
                     EXPECT_EQ(g2, t.generation());
                     return Status::OK();
                   }).ok());
  EXPECT_NE(g2, 0u);
  ASSERT_TRUE(store->Update([&](MasterStore::Txn& t) -> Status {
                     PROPELLER_RETURN_IF_ERROR(t.MapFile(FileId{1, 2}, 1, true, &g3));
                     bool was = true;
                     PROPELLER_RETURN_IF_ERROR(t.UnmapFile(FileId{1, 2}, &was, g2));  // stale
                     EXPECT_FALSE(was);
                     PROPELLER_RETURN_IF_ERROR(t.UnmapFile(FileId{1, 1}, &was, 0));
                     EXPECT_TRUE(was);
                     return Status::OK();
                   }).ok());
  EXPECT_GT(g3, g2);
  ASSERT_TRUE(store->LookupFiles({FileId{1, 1}, FileId{1, 2}}, &acgs, &gens).ok());
  EXPECT_EQ(acgs, (std::vector<uint64_t>{0, 1}));
  EXPECT_EQ(gens, (std::vector<uint64_t>{0, g3}));
  ExpectMirrorsMatch(*store);
  EXPECT_EQ(store->GetAcg(1)->files, 1u);
  store.reset();
  store = OpenStore(dir.path());  // upgraded to this format; counts check out at open
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->LookupFiles({FileId{1, 2}}, &acgs, &gens).ok());
  EXPECT_EQ(gens, std::vector<uint64_t>{g3});
}

// A damaged map is a refusal naming the file, never a crash (LMDB would fault on a truncated
// file, SIGBUS, at the first read of the mirror): the file is read first (lmdb_check.h).
TEST(MasterStoreTest, ADamagedMapIsARefusalNotACrash) {
  TempDir dir;
  {
    auto store = OpenStore(dir.path());
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->Update([&](MasterStore::Txn& t) -> Status {
      PROPELLER_ASSIGN_OR_RETURN(uint32_t node, t.NewNodeId());
      PROPELLER_RETURN_IF_ERROR(t.PutNode(node, "tcp://127.0.0.1:1"));
      PROPELLER_ASSIGN_OR_RETURN(uint64_t acg, t.CreateAcg(node, ""));
      for (uint64_t ino = 1; ino <= 20000; ++ino) {
        PROPELLER_RETURN_IF_ERROR(t.MapFile(FileId{1, ino}, acg));
      }
      return Status::OK();
    }).ok());
  }
  const std::string data = dir.path() + "/data.mdb";
  std::string bytes;
  {
    std::ifstream in(data, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    bytes = ss.str();
  }
  ASSERT_GT(bytes.size(), 16u * 4096);
  for (const std::string& bad : {bytes.substr(0, bytes.size() / 2), [&] {
         std::string b = bytes;
         for (size_t page = 2; page * 4096 < b.size(); ++page) b[page * 4096 + 12] ^= 0x40;
         return b;
       }()}) {
    {
      std::ofstream out(data, std::ios::binary | std::ios::trunc);
      out << bad;
    }
    MasterStoreOptions o;
    o.dir = dir.path();
    auto store = MasterStore::Open(o);
    ASSERT_FALSE(store.ok());
    EXPECT_EQ(store.status().code(), StatusCode::kCorruption) << store.status().ToString();
    EXPECT_NE(store.status().ToString().find(data), std::string::npos)
        << store.status().ToString();
  }
}

}  // namespace
}  // namespace propeller::master
