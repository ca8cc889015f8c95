// Propeller as a system of the evaluation (eval_system.h), two ways:
//  - propeller-cluster: propeller-master + one propeller-indexnode as separate processes on
//    loopback (tests/cluster_harness.h), reached through libpropeller over ZeroMQ — the fair
//    match for a database server behind a socket. Each Session is its own Client.
//  - propeller-engine: the index node's Engine in the driver's process (no network), the
//    figure of docs/architecture.md §11's in-process budgets.
// Both run at the default durability level (log written before the ack, fsync by group commit
// every 10 ms).
#include <cstdlib>
#include <span>
#include <vector>

#include "bench/eval/eval_system.h"
#include "client/lib/propeller.h"
#include "indexnode/engine.h"
#include "tests/cluster_harness.h"

namespace propeller::eval {
namespace {

constexpr uint64_t kLoadBatch = 1000;

// What a search does with each hit, as the SQL systems' drivers do with each row: read the path
// and the numbers they select (ino, size, mtime, uid) into a checksum. Hits are consumed as
// they stream, as SQLite's rows are, not collected first (SearchAll's vector of every hit was
// ~15% of a `size>16m` search's time at 10 M files, on one core).
uint64_t Checksum(const std::string& path, const FileRecord& r) {
  return path.size() + r.id.ino + r.size + static_cast<uint64_t>(r.mtime) + r.uid;
}

// ---------------------------------------------------------------------------------------------
// Cluster.

class ClusterSession : public Session {
 public:
  ClusterSession(std::unique_ptr<Client> client, int64_t now_ns)
      : client_(std::move(client)), now_ns_(now_ns) {}

  Status Update(const FileRecord& record) override {
    FileUpdate u;
    u.record = record;
    return client_->Update(std::span<const FileUpdate>(&u, 1));
  }

  Result<uint64_t> Search(QueryKind kind) override {
    ClientSearchOptions o;
    o.now_ns = now_ns_;
    uint64_t rows = 0;
    PROPELLER_RETURN_IF_ERROR(client_->Search(QueryText(kind), o, [&](const ClientHit& h) {
      sink_ += Checksum(h.path, h.record);
      ++rows;
      return true;
    }));
    return rows;
  }

 private:
  std::unique_ptr<Client> client_;
  int64_t now_ns_;
  uint64_t sink_ = 0;  // keeps the checksums from being optimised away
};

class PropellerCluster : public System {
 public:
  explicit PropellerCluster(const SystemConfig& config) : config_(config) {}

  std::string Name() const override { return "propeller-cluster"; }

  Status Load(const bench::Dataset& ds, uint64_t files) override {
    // LocalCluster keeps its data in a fresh directory under $TMPDIR: point it at work_dir.
    ::setenv("TMPDIR", config_.work_dir.c_str(), 1);
    testing::ClusterConfig cc;
    cc.nodes = 1;
    cc.acg_threshold = ds.options().files_per_acg;
    cc.ipc = config_.cluster_ipc;
    cluster_ = std::make_unique<testing::LocalCluster>(cc);
    if (!cluster_->Start()) return Status::IOError("cannot start the cluster's processes");
    auto client = Client::Connect(cluster_->client_options(120'000));
    if (!client.ok()) return client.status();
    if (!cluster_->WaitNodesUp(**client, 1)) {
      return Status::Unavailable("index node did not come up:\n" + cluster_->Logs());
    }
    auto volume = (*client)->RegisterVolume("/");
    if (!volume.ok()) return volume.status();
    if (*volume != ds.options().volume) return Status::Internal("unexpected volume id");
    // Each group's files go with their application tag so the master places a group in its own
    // ACG, as capture would (the group's producer).
    std::vector<FileUpdate> batch;
    for (uint64_t b = 0; b < files; b += kLoadBatch) {
      batch.clear();
      for (uint64_t i = b; i < std::min(files, b + kLoadBatch); ++i) {
        FileUpdate u;
        u.record = ds.Record(i);
        u.app = "group-" + std::to_string(ds.AcgOf(i));
        batch.push_back(std::move(u));
      }
      Status st = (*client)->Update(batch);
      if (!st.ok()) return st;
    }
    return Status::OK();
  }

  Result<std::unique_ptr<Session>> Connect() override {
    auto client = Client::Connect(cluster_->client_options(120'000));
    if (!client.ok()) return client.status();
    return std::unique_ptr<Session>(new ClusterSession(std::move(*client), config_.now_ns));
  }

  Status Restart(const std::function<void()>& between) override {
    cluster_->node(0).Terminate();
    cluster_->master().Terminate();
    between();
    if (!cluster_->StartMaster() || !cluster_->StartNode(0)) {
      return Status::IOError("cannot restart the cluster");
    }
    auto client = Client::Connect(cluster_->client_options(120'000));
    if (!client.ok()) return client.status();
    if (!cluster_->WaitNodesUp(**client, 1)) {
      return Status::Unavailable("index node did not come back:\n" + cluster_->Logs());
    }
    return Status::OK();
  }

 private:
  SystemConfig config_;
  std::unique_ptr<testing::LocalCluster> cluster_;
};

// ---------------------------------------------------------------------------------------------
// In-process engine.

class EngineSession : public Session {
 public:
  EngineSession(Engine* engine, const bench::Dataset* ds, int64_t now_ns)
      : engine_(engine), ds_(ds), now_ns_(now_ns) {}

  Status Update(const FileRecord& record) override {
    update_.op = UpdateOp::kPut;
    update_.acg = ds_->AcgOf(record.id.ino - 1);
    update_.record = record;
    return engine_->Apply(std::span<const propeller::Update>(&update_, 1));
  }

  Result<uint64_t> Search(QueryKind kind) override {
    SearchRequest req;
    req.query = QueryText(kind);
    req.now_ns = now_ns_;
    uint64_t rows = 0;
    PROPELLER_RETURN_IF_ERROR(engine_->Search(req, [&](const SearchHit& h) {
      sink_ += Checksum(h.path, h.record);
      ++rows;
      return true;
    }));
    return rows;
  }

 private:
  Engine* engine_;
  const bench::Dataset* ds_;
  int64_t now_ns_;
  uint64_t sink_ = 0;
  propeller::Update update_;  // reused: no allocation per call beyond the record copy
};

class PropellerEngine : public System {
 public:
  explicit PropellerEngine(const SystemConfig& config) : config_(config) {}

  std::string Name() const override { return "propeller-engine"; }

  Status Load(const bench::Dataset& ds, uint64_t files) override {
    ds_ = &ds;
    Status st = Open();
    if (!st.ok()) return st;
    std::vector<propeller::Update> chunk;
    for (uint64_t b = 0; b < files; b += 10'000) {
      chunk.clear();
      ds.AppendPuts(b, std::min(files, b + 10'000), &chunk);
      st = engine_->Apply(chunk);
      if (!st.ok()) return st;
    }
    st = engine_->CommitAll();
    if (!st.ok() || !config_.compact_after_load) return st;
    engine_.reset();
    return Open(/*compact=*/true);
  }

  Status Attach(const bench::Dataset& ds) override {
    ds_ = &ds;
    if (!std::filesystem::exists(config_.work_dir + "/engine")) {
      return Status::NotFound(config_.work_dir + "/engine (no kept run)");
    }
    return Open();
  }

  Result<std::unique_ptr<Session>> Connect() override {
    return std::unique_ptr<Session>(new EngineSession(engine_.get(), ds_, config_.now_ns));
  }

  Status Restart(const std::function<void()>& between) override {
    engine_.reset();  // commits, syncs, closes every file
    between();
    return Open();
  }

 private:
  Status Open(bool compact = false) {
    EngineOptions eo;
    eo.data_dir = config_.work_dir + "/engine";
    eo.compact_store = compact;
    auto engine = Engine::Open(eo);
    if (!engine.ok()) return engine.status();
    engine_ = std::move(*engine);
    return Status::OK();
  }

  SystemConfig config_;
  const bench::Dataset* ds_ = nullptr;
  std::unique_ptr<Engine> engine_;
};

}  // namespace

std::unique_ptr<System> MakePropellerCluster(const SystemConfig& config) {
  return std::make_unique<PropellerCluster>(config);
}
std::unique_ptr<System> MakePropellerEngine(const SystemConfig& config) {
  return std::make_unique<PropellerEngine>(config);
}

}  // namespace propeller::eval
