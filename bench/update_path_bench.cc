// update_path_bench: what one acknowledged index update costs a mount in the embedded default
// (`propeller mount` without --master): a master and an index node in this process, reached
// through their direct:// aliases, as client/cli/cmd_mount.cc sets them up. No FUSE: the
// figures are the daemon's own work per update, the part of issue 4's PostMark gap that is
// Propeller's and not the kernel's.
//
//   update_path/create   a new file and its directory (FileUpdate::created: the master places
//                        the file), as the mount sends on create(2)
//   update_path/put      a known file and nothing else, as on close(2) after writing
//   update_path/delete   a known file and its directory, as on unlink(2) (the master forgets
//                        the mapping in the background)
//   update_path/file_lifecycle  create + put + delete of one file (PostMark's create/delete pair)
//
// Each reports the median and p99 of the per-call time (counters median_us, p99_us). Data
// goes to a fresh directory under $TMPDIR (default /var/tmp), removed at exit. Every flag goes
// to Google Benchmark (--benchmark_filter, --benchmark_repetitions, ...).
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>

#include "client/lib/propeller.h"
#include "common/env.h"
#include "indexnode/server/node_server.h"
#include "master/master_server.h"

namespace propeller::bench {
namespace {

// The embedded service and its client, built once per process.
class Embedded {
 public:
  static Embedded* Get() {
    if (instance_ == nullptr) instance_ = new Embedded();
    return instance_;
  }
  // Stops the service (client, node, master) and removes its data.
  static void Shutdown() {
    if (instance_ == nullptr) return;
    const std::string dir = instance_->dir_;
    delete instance_;
    instance_ = nullptr;
    if (!dir.empty()) (void)Env::Default()->RemoveRecursively(dir);
  }
  ~Embedded() {
    client_.reset();
    node_.reset();
    master_.reset();
  }

  Client* client() { return client_.get(); }
  uint32_t volume() const { return volume_; }
  bool ok() const { return client_ != nullptr; }

  // A file record as the mount reads it: one path in directory `dir` of the volume.
  FileRecord Record(uint64_t ino, uint64_t dir_ino, uint64_t size) const {
    FileRecord r;
    r.id = FileId{volume_, ino};
    r.paths = {"/d" + std::to_string(dir_ino) + "/f" + std::to_string(ino)};
    r.parent_ino = dir_ino;
    r.type = FileType::kRegular;
    r.size = size;
    r.mode = 0644;
    r.nlink = 1;
    r.mtime = r.ctime = r.atime = now_ns_;
    return r;
  }
  FileRecord DirRecord(uint64_t dir_ino) const {
    FileRecord r;
    r.id = FileId{volume_, dir_ino};
    r.paths = {"/d" + std::to_string(dir_ino)};
    r.parent_ino = 2;
    r.type = FileType::kDirectory;
    r.size = 4096;
    r.mode = 0755;
    r.nlink = 2;
    r.mtime = r.ctime = r.atime = now_ns_;
    return r;
  }

 private:
  Embedded() {
    const char* tmp = std::getenv("TMPDIR");
    std::string base = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/var/tmp");
    std::string pattern = base + "/propeller-update-path.XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      std::perror("update_path_bench: mkdtemp");
      return;
    }
    dir_ = pattern;
    master::MasterOptions mo;
    mo.data_dir = dir_ + "/master";
    mo.listen = "ipc://" + dir_ + "/master.sock";  // as the mount's embedded service
    mo.sync = false;  // the mount's default durability level
    mo.sync_interval_ms = 10;
    mo.local_alias = "direct://update-path-bench-master";
    auto m = master::MasterServer::Start(mo);
    if (!m.ok()) {
      Fail("master", m.status());
      return;
    }
    master_ = std::move(*m);
    IndexNodeOptions no;
    no.data_dir = dir_ + "/node";
    no.listen_endpoint = "ipc://" + dir_ + "/node.sock";
    no.master_endpoint = mo.local_alias;
    no.local_alias = "direct://update-path-bench-node";
    auto n = IndexNodeServer::Start(no);
    if (!n.ok()) {
      Fail("index node", n.status());
      return;
    }
    node_ = std::move(*n);
    for (int i = 0; i < 3000 && !node_->registered(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (!node_->registered()) {
      Fail("index node", Status::Timeout("did not register"));
      return;
    }
    ClientOptions co;
    co.master_endpoint = master_->endpoint();
    co.endpoint_aliases[master_->endpoint()] = mo.local_alias;
    co.endpoint_aliases[node_->advertised_endpoint()] = no.local_alias;
    auto c = Client::Connect(co);
    if (!c.ok()) {
      Fail("client", c.status());
      return;
    }
    auto v = (*c)->RegisterVolume(dir_);
    if (!v.ok()) {
      Fail("volume", v.status());
      return;
    }
    volume_ = *v;
    now_ns_ = std::chrono::duration_cast<std::chrono::nanoseconds>(
                  std::chrono::system_clock::now().time_since_epoch())
                  .count();
    client_ = std::move(*c);
  }

  void Fail(const char* what, const Status& s) {
    std::fprintf(stderr, "update_path_bench: %s: %s\n", what, s.ToString().c_str());
  }

  static inline Embedded* instance_ = nullptr;
  std::string dir_;
  std::unique_ptr<master::MasterServer> master_;
  std::unique_ptr<IndexNodeServer> node_;
  std::unique_ptr<Client> client_;
  uint32_t volume_ = 0;
  int64_t now_ns_ = 0;
};

constexpr uint64_t kDirs = 200;  // PostMark's subdirectories
uint64_t next_ino = 1'000'000;   // inode numbers of new files, never reused

// Median and p99 of `ns` as counters (microseconds).
void ReportPercentiles(benchmark::State& state, std::vector<int64_t>* ns) {
  if (ns->empty()) return;
  std::sort(ns->begin(), ns->end());
  state.counters["median_us"] = static_cast<double>((*ns)[ns->size() / 2]) / 1000.0;
  state.counters["p99_us"] = static_cast<double>((*ns)[ns->size() * 99 / 100]) / 1000.0;
}

int64_t Nanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The three updates of one file's life, as the mount builds them.
Status Create(Embedded* e, uint64_t ino) {
  const uint64_t dir = 2 + ino % kDirs + 1;
  FileUpdate ups[2];
  ups[0].record = e->Record(ino, dir, 0);
  ups[0].created = true;
  ups[0].app = "postmark";
  ups[1].record = e->DirRecord(dir);
  return e->client()->Update(ups);
}
Status Put(Embedded* e, uint64_t ino) {
  FileUpdate u;
  u.record = e->Record(ino, 2 + ino % kDirs + 1, 4096);
  return e->client()->Update(std::span<const FileUpdate>(&u, 1));
}
Status Delete(Embedded* e, uint64_t ino) {
  const uint64_t dir = 2 + ino % kDirs + 1;
  FileUpdate ups[2];
  ups[0].op = UpdateOp::kDelete;
  ups[0].record.id = FileId{e->volume(), ino};
  ups[0].record.paths = e->Record(ino, dir, 0).paths;
  ups[1].record = e->DirRecord(dir);
  Status s = e->client()->ResolveRoutes(std::span<FileUpdate>(ups, 1));
  if (!s.ok()) return s;
  return e->client()->Update(ups);
}

enum class Op { kCreate, kPut, kDelete, kLifecycle };

void BM_UpdatePath(benchmark::State& state, Op op) {
  Embedded* e = Embedded::Get();
  if (!e->ok()) {
    state.SkipWithError("the embedded service did not start");
    return;
  }
  // Files for put and delete, made outside the timed loop.
  std::vector<uint64_t> files;
  if (op == Op::kPut || op == Op::kDelete) {
    for (int i = 0; i < 20'000; ++i) {
      const uint64_t ino = next_ino++;
      if (Status s = Create(e, ino); !s.ok()) {
        state.SkipWithError(s.ToString().c_str());
        return;
      }
      files.push_back(ino);
    }
  }
  std::vector<int64_t> ns;
  size_t i = 0;
  for (auto _ : state) {
    Status s;
    const int64_t t0 = Nanos();
    switch (op) {
      case Op::kCreate:
        s = Create(e, next_ino++);
        break;
      case Op::kPut:
        s = Put(e, files[i++ % files.size()]);
        break;
      case Op::kDelete:
        s = Delete(e, files[i++ % files.size()]);  // a second round deletes unknown files
        break;
      case Op::kLifecycle: {
        const uint64_t ino = next_ino++;
        s = Create(e, ino);
        if (s.ok()) s = Put(e, ino);
        if (s.ok()) s = Delete(e, ino);
        break;
      }
    }
    ns.push_back(Nanos() - t0);
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      return;
    }
  }
  ReportPercentiles(state, &ns);
}

BENCHMARK_CAPTURE(BM_UpdatePath, create, Op::kCreate)->Iterations(20'000);
BENCHMARK_CAPTURE(BM_UpdatePath, put, Op::kPut)->Iterations(20'000);
BENCHMARK_CAPTURE(BM_UpdatePath, delete, Op::kDelete)->Iterations(20'000);
BENCHMARK_CAPTURE(BM_UpdatePath, file_lifecycle, Op::kLifecycle)->Iterations(10'000);

}  // namespace
}  // namespace propeller::bench

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  propeller::bench::Embedded::Shutdown();
  return 0;
}
