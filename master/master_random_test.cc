// The master (store + placement + membership) against a brute-force in-memory model on a
// seeded random stream of assign / lookup / forget / register / heartbeat / clock / reopen
// operations. The model recomputes node loads from scratch for every decision, so it checks
// the incremental load tracking as well as the rules. Seed: PROPELLER_SEED or the fixed
// defaults below; printed on failure.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <set>

#include "common/logging.h"
#include "common/random.h"
#include "master/master.h"
#include "master/master_test_util.h"

namespace propeller::master {
namespace {

using testing::FakeClock;
using testing::TempDir;

constexpr uint64_t kThreshold = 6;
constexpr int64_t kTimeoutMs = 5000;
const char* const kApps[] = {"", "cc", "ld", "python3", "make"};

struct ModelNode {
  std::string endpoint;
  bool alive = false;  // registered or heartbeated since the master (re)opened
  int64_t last = 0;
  std::map<uint64_t, uint64_t> reported;
};

struct Model {
  std::map<FileId, uint64_t> files;
  std::map<uint64_t, AcgRecord> acgs;
  std::map<std::string, uint64_t> apps;
  std::map<uint32_t, ModelNode> nodes;
  uint64_t next_acg = 1;
  uint64_t next_node = 1;

  bool Up(uint32_t id, int64_t now) const {
    auto it = nodes.find(id);
    return it != nodes.end() && it->second.alive &&
           now - it->second.last <= kTimeoutMs * 1000000;
  }
  // Brute force: the load definition of placement.h, term by term.
  uint64_t Load(uint32_t id) const {
    const ModelNode& n = nodes.at(id);
    uint64_t load = 0;
    for (const auto& [acg, rec] : acgs) {
      if (rec.node_id != id) continue;
      auto r = n.reported.find(acg);
      load += std::max(rec.files, r == n.reported.end() ? 0 : r->second);
    }
    for (const auto& [acg, files] : n.reported) {
      auto a = acgs.find(acg);
      if (a == acgs.end() || a->second.node_id != id) load += files;
    }
    return load;
  }
  // Applies one batch; false (and no change) when it must fail with Unavailable.
  bool Assign(const std::vector<wire::AssignItem>& items, int64_t now,
              std::vector<uint64_t>* out) {
    Model next = *this;
    out->clear();
    for (const auto& item : items) {
      uint64_t acg = 0;
      if (auto f = next.files.find(item.file); f != next.files.end()) acg = f->second;
      for (size_t p = 0; acg == 0 && p < item.producers.size(); ++p) {
        if (auto f = next.files.find(item.producers[p]); f != next.files.end()) acg = f->second;
      }
      if (acg == 0) {
        auto a = next.apps.find(item.app);
        if (a != next.apps.end()) {
          const AcgRecord& rec = next.acgs.at(a->second);
          if (rec.files < kThreshold && next.Up(rec.node_id, now)) acg = a->second;
        }
      }
      if (acg == 0) {
        uint32_t best = 0;
        uint64_t best_load = 0;
        for (const auto& [id, n] : next.nodes) {
          if (!next.Up(id, now)) continue;
          const uint64_t load = next.Load(id);
          if (best == 0 || load < best_load) {
            best = id;
            best_load = load;
          }
        }
        if (best == 0) return false;
        acg = next.next_acg++;
        next.acgs[acg] = AcgRecord{best, 0, item.app, AcgState::kActive};
        next.apps[item.app] = acg;
      }
      if (next.files.emplace(item.file, acg).second) ++next.acgs[acg].files;
      out->push_back(acg);
    }
    *this = std::move(next);
    return true;
  }
};

void CheckAgainstModel(Master& master, const Model& model, int64_t now) {
  auto dump = master.store().Dump();
  ASSERT_TRUE(dump.ok()) << dump.status().ToString();
  EXPECT_EQ(dump->files, model.files);
  EXPECT_EQ(dump->acgs, model.acgs);
  EXPECT_EQ(dump->apps, model.apps);
  EXPECT_EQ(dump->next_acg, model.next_acg);
  EXPECT_EQ(dump->next_node, model.next_node);
  std::map<uint32_t, std::string> endpoints;
  for (const auto& [id, n] : model.nodes) endpoints[id] = n.endpoint;
  EXPECT_EQ(dump->nodes, endpoints);
  wire::NodesReply nodes;
  ASSERT_TRUE(master.ListNodes(&nodes).ok());
  ASSERT_EQ(nodes.nodes.size(), model.nodes.size());
  for (const auto& info : nodes.nodes) {
    EXPECT_EQ(info.up, model.Up(info.node_id, now)) << "node " << info.node_id;
    EXPECT_EQ(info.files, model.Load(info.node_id)) << "node " << info.node_id;
  }
}

class MasterRandomTest : public ::testing::TestWithParam<uint64_t> {};

TEST_P(MasterRandomTest, MatchesModel) {
  uint64_t seed = GetParam();
  if (const char* env = std::getenv("PROPELLER_SEED")) seed = std::strtoull(env, nullptr, 10);
  SCOPED_TRACE("seed " + std::to_string(seed));
  SetLogLevel(LogLevel::kError);  // nodes going up and down thousands of times
  Random rnd(seed);
  int unavailable = 0, refused = 0, assigned = 0;
  TempDir dir;
  FakeClock clock;
  std::unique_ptr<Master> master;
  auto open = [&] {
    master.reset();
    MasterConfig c;
    c.data_dir = dir.path();
    c.sync = false;
    c.acg_threshold = kThreshold;
    c.node_timeout_ms = kTimeoutMs;
    c.initial_map_bytes = 1u << 20;
    c.clock = clock.clock();
    auto m = Master::Open(c);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    master = std::move(*m);
  };
  open();
  Model model;
  wire::VolumeInfo vol;
  ASSERT_TRUE(master->RegisterVolume({"/vol"}, &vol).ok());
  auto random_file = [&] {
    // Volume 2 is never registered: assigning it must be refused.
    return FileId{rnd.Uniform(200) == 0 ? 2u : 1u, 1 + rnd.Uniform(400)};
  };

  constexpr int kOps = 1500;
  for (int op = 0; op < kOps; ++op) {
    SCOPED_TRACE("op " + std::to_string(op));
    const uint64_t kind = rnd.Uniform(100);
    if (kind < 4) {  // register: new node, or a known one re-registering (maybe moved)
      uint32_t id = 0;
      if (!model.nodes.empty() && rnd.Uniform(2) == 0) {
        auto it = model.nodes.begin();
        std::advance(it, rnd.Uniform(model.nodes.size()));
        id = it->first;
      }
      const uint32_t expect_id = id != 0 ? id : static_cast<uint32_t>(model.next_node);
      const std::string endpoint =
          "tcp://127.0.0.1:" + std::to_string(10000 + expect_id * 10 + rnd.Uniform(3));
      wire::RegisterNodeReply r;
      ASSERT_TRUE(master->RegisterNode({id, endpoint}, &r).ok());
      ASSERT_EQ(r.node_id, expect_id);
      if (id == 0) ++model.next_node;
      ModelNode& n = model.nodes[expect_id];
      n.endpoint = endpoint;
      n.alive = true;
      n.last = clock.now();
    } else if (kind < 25) {  // heartbeat of a known (or unknown) node
      wire::HeartbeatRequest hb;
      hb.node_id = static_cast<uint32_t>(rnd.Uniform(model.next_node + 1));
      std::map<uint64_t, uint64_t> reported;
      const uint64_t k = rnd.Uniform(4);
      for (uint64_t i = 0; i < k && model.next_acg > 1; ++i) {
        const uint64_t acg = 1 + rnd.Uniform(model.next_acg + 1);  // sometimes unknown
        const uint64_t files = rnd.Uniform(12);
        hb.acgs.push_back(wire::AcgLoad{acg, files});
        reported[acg] += files;
      }
      wire::HeartbeatReply r;
      ASSERT_TRUE(master->Heartbeat(hb, &r).ok());
      auto it = model.nodes.find(hb.node_id);
      ASSERT_EQ(r.reregister, it == model.nodes.end());
      if (it != model.nodes.end()) {
        it->second.alive = true;
        it->second.last = clock.now();
        it->second.reported = reported;
      }
    } else if (kind < 35) {  // time passes
      clock.Advance(static_cast<int64_t>(rnd.Uniform(3000)));
    } else if (kind < 65) {  // assign a batch
      wire::AssignFilesRequest req;
      const uint64_t n = 1 + rnd.Uniform(12);
      bool bad_volume = false;
      for (uint64_t i = 0; i < n; ++i) {
        wire::AssignItem it;
        it.file = random_file();
        bad_volume |= it.file.volume != 1;
        it.app = kApps[rnd.Uniform(std::size(kApps))];
        const uint64_t np = rnd.Uniform(4);
        for (uint64_t p = 0; p < np; ++p) it.producers.push_back(FileId{1, 1 + rnd.Uniform(400)});
        req.items.push_back(std::move(it));
      }
      wire::LocationsReply rep;
      Status s = master->AssignFiles(req, &rep);
      if (bad_volume) {
        ASSERT_EQ(s.code(), StatusCode::kInvalidArgument);
        ++refused;
        continue;
      }
      std::vector<uint64_t> expected;
      if (!model.Assign(req.items, clock.now(), &expected)) {
        ASSERT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
        ++unavailable;
        continue;
      }
      ASSERT_TRUE(s.ok()) << s.ToString();
      ++assigned;
      ASSERT_EQ(rep.locations.size(), expected.size());
      for (size_t i = 0; i < expected.size(); ++i) {
        ASSERT_EQ(rep.locations[i].acg, expected[i]) << "item " << i;
        const uint32_t node = model.acgs.at(expected[i]).node_id;
        ASSERT_EQ(rep.locations[i].node_id, node);
        ASSERT_EQ(rep.locations[i].endpoint, model.nodes.at(node).endpoint);
      }
    } else if (kind < 80) {  // lookup
      wire::FilesRequest req;
      const uint64_t n = rnd.Uniform(15);
      for (uint64_t i = 0; i < n; ++i) req.files.push_back(random_file());
      wire::LocationsReply rep;
      ASSERT_TRUE(master->LookupFiles(req, &rep).ok());
      ASSERT_EQ(rep.locations.size(), req.files.size());
      for (size_t i = 0; i < req.files.size(); ++i) {
        auto f = model.files.find(req.files[i]);
        ASSERT_EQ(rep.locations[i].file, req.files[i]);
        ASSERT_EQ(rep.locations[i].acg, f == model.files.end() ? 0 : f->second);
      }
    } else if (kind < 92) {  // forget
      wire::FilesRequest req;
      const uint64_t n = rnd.Uniform(8);
      for (uint64_t i = 0; i < n; ++i) req.files.push_back(random_file());
      ASSERT_TRUE(master->ForgetFiles(req).ok());
      for (const FileId& f : req.files) {
        auto it = model.files.find(f);
        if (it == model.files.end()) continue;
        --model.acgs.at(it->second).files;
        model.files.erase(it);
      }
    } else if (kind < 95) {  // close and reopen: maps intact, liveness forgotten
      auto before = master->store().Dump();
      ASSERT_TRUE(before.ok());
      open();
      auto after = master->store().Dump();
      ASSERT_TRUE(after.ok());
      ASSERT_EQ(*after, *before);
      for (auto& [id, n] : model.nodes) {
        n.alive = false;
        n.reported.clear();
      }
    } else {
      CheckAgainstModel(*master, model, clock.now());
      if (::testing::Test::HasFailure()) return;
    }
    if (::testing::Test::HasFatalFailure()) return;
  }
  CheckAgainstModel(*master, model, clock.now());
  // The stream did exercise placement and its failure paths.
  EXPECT_GT(model.acgs.size(), 5u);
  EXPECT_GT(assigned, 100);
  EXPECT_GT(unavailable + refused, 5);
  std::printf("seed %llu: %d batches assigned, %d unavailable, %d refused, %zu ACGs, %zu nodes\n",
              static_cast<unsigned long long>(seed), assigned, unavailable, refused,
              model.acgs.size(), model.nodes.size());
}

INSTANTIATE_TEST_SUITE_P(Seeds, MasterRandomTest, ::testing::Values(1, 2, 3, 4, 20240501));

}  // namespace
}  // namespace propeller::master
