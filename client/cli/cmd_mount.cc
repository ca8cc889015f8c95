// propeller mount BACKING MOUNTPOINT: the capture file system (docs/architecture.md §4, §9),
// connected to a cluster (--master) or, by default, with a master and an index node embedded in
// this process.
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <shared_mutex>
#include <thread>

#include "client/cli/commands.h"
#include "client/cli/embedded_service.h"
#include "client/cli/service_metrics.h"
#include "client/cli/mount_options.h"
#include "client/cli/service_options.h"
#include "client/fuse/backing_tree.h"
#include "client/fuse/capture_fs.h"
#include "client/fuse/index_writer.h"
#include "client/fuse/pending_updates.h"
#include "client/lib/mount_registry.h"
#include "client/lib/query_engine.h"
#include "client/lib/reconcile.h"
#include "common/daemon/metrics_server.h"
#include "common/daemon/notify.h"
#include "common/daemon/signals.h"
#include "common/env.h"
#include "common/logging.h"
#include "common/record.h"
#include "common/secure_dir.h"
#include "common/tree_walk.h"

namespace propeller::cli {
namespace {

// Indexes every file of the new volume (the first mount of BACKING).
Status ImportTree(Client* client, const std::string& root, uint32_t volume) {
  std::vector<FileUpdate> batch;
  uint64_t sent = 0;
  auto flush = [&]() -> Status {
    if (batch.empty()) return Status::OK();
    PROPELLER_RETURN_IF_ERROR(client->Update(batch));
    sent += batch.size();
    batch.clear();
    return Status::OK();
  };
  TreeWalkOptions wo;
  wo.volume = volume;
  const auto start = std::chrono::steady_clock::now();
  Status st = WalkTree(root, wo, [&](FileRecord&& rec) -> Status {
    FileUpdate u;
    u.record = std::move(rec);
    u.app = "import";
    batch.push_back(std::move(u));
    return batch.size() >= 1000 ? flush() : Status::OK();
  }, nullptr);
  if (st.ok()) st = flush();
  if (!st.ok()) return st.WithContext("indexing the files already in " + root);
  std::fprintf(stderr, "propeller: indexed %llu existing entries of %s in %.1f s\n",
               static_cast<unsigned long long>(sent), root.c_str(),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return Status::OK();
}

// The queue's reserve (PendingUpdates): 64 MiB, at most an eighth of the data directory's
// file system.
uint64_t QueueReserve(const std::string& data) {
  constexpr uint64_t kMax = 64ull << 20;
  struct statvfs sv;
  if (::statvfs(data.c_str(), &sv) != 0) return kMax;
  return std::min<uint64_t>(kMax, uint64_t{sv.f_blocks} * sv.f_frsize / 8);
}

wire::MountStatusReply MountStatusOf(const fuse::IndexWriterStats& s) {
  wire::MountStatusReply r;
  r.pending = s.pending;
  r.degraded_since_ns = s.degraded_since_ns;
  r.last_error = s.last_error;
  r.sent = s.sent;
  r.queued = s.queued;
  r.delivered = s.delivered;
  r.refused = s.refused;
  r.errors = s.errors;
  r.admit_refusals = s.admit_refusals;
  return r;
}

// Makes every search of this mount's files wait for the updates queued under its scope, then
// fail with "index catching up" (IndexWriter::WaitForScope): searches through the embedded
// node (any local process), the query engine and the query directories (CaptureFs itself).
// Open once the writer exists; Close before it goes (waits for searches in the gate).
class SearchGate {
 public:
  SearchGate(std::string backing, int64_t wait_ms)
      : backing_(std::move(backing)), wait_ms_(wait_ms) {}

  void Open(fuse::IndexWriter* writer, uint32_t volume) {
    std::unique_lock<std::shared_mutex> lock(mu_);
    writer_ = writer;
    volume_ = volume;
  }
  void Close() {
    std::unique_lock<std::shared_mutex> lock(mu_);
    writer_ = nullptr;
  }

  // A search as the index node gets it: in-volume scope with a volume, else a host path.
  Status Check(const wire::SearchQuery& q) {
    std::shared_lock<std::shared_mutex> lock(mu_);
    if (writer_ == nullptr) return Status::OK();
    std::string scope;
    if (q.volume) {
      if (*q.volume != volume_) return Status::OK();
      scope = q.scope.empty() ? "/" : q.scope;
    } else if (PathInScope(q.scope, backing_)) {
      scope = q.scope.size() == backing_.size() || backing_ == "/"
                  ? (backing_ == "/" ? q.scope : "/")
                  : q.scope.substr(backing_.size());
    } else if (PathInScope(backing_, q.scope)) {
      scope = "/";
    } else {
      return Status::OK();
    }
    return WaitLocked(scope);
  }
  Status CheckInVolume(const std::string& scope) {
    std::shared_lock<std::shared_mutex> lock(mu_);
    if (writer_ == nullptr) return Status::OK();
    return WaitLocked(scope);
  }

 private:
  Status WaitLocked(const std::string& scope) {
    const uint64_t n = writer_->WaitForScope(scope, wait_ms_);
    if (n == 0) return Status::OK();
    return Status::Unavailable(std::string(kIndexCatchingUp) + " (" + std::to_string(n) +
                               " updates pending under " + scope + " of " + backing_ +
                               "; propeller status shows the queue)");
  }

  const std::string backing_;
  const int64_t wait_ms_;
  std::shared_mutex mu_;
  fuse::IndexWriter* writer_ = nullptr;  // Under mu_.
  uint32_t volume_ = 0;                  // Under mu_.
};

}  // namespace

int RunMount(const GlobalOptions& global, const std::vector<std::string>& argv) {
  auto flags = ParseMountFlags(global.client, global.given, argv);
  if (!flags.ok()) {
    return ReportError(flags.status(),
                       /*usage=*/flags.status().code() == StatusCode::kInvalidArgument);
  }
  if (flags->help) {
    std::fputs(MountHelp().c_str(), stdout);
    return kExitOk;
  }
  SetLogLevel(flags->log_level);
  const Durability durability = flags->durability;

  char resolved[PATH_MAX];
  if (::realpath(flags->backing.c_str(), resolved) == nullptr) {
    return ReportError(Status::IOError("cannot open " + flags->backing, errno));
  }
  const std::string backing = resolved;
  if (::realpath(flags->mountpoint.c_str(), resolved) == nullptr) {
    return ReportError(Status::IOError("cannot open mount point " + flags->mountpoint, errno));
  }
  const std::string mountpoint = resolved;
  struct stat st;
  if (::stat(backing.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return ReportError(Status::InvalidArgument(backing + " is not a directory"));
  }
  if (::stat(mountpoint.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return ReportError(Status::InvalidArgument(mountpoint + " is not a directory"));
  }
  if (PathInScope(mountpoint, backing) || PathInScope(backing, mountpoint)) {
    return ReportError(Status::InvalidArgument(
        "BACKING and MOUNTPOINT must not contain each other (the mount would serve itself)"));
  }

  // SIGINT and SIGTERM stop the mount, SIGHUP reloads (common/daemon/signals.h).
  const sigset_t stop_signals = daemon::BlockStopSignals();

  // The cluster: the one named with --master / $PROPELLER_MASTER, or embedded here.
  const bool embedded =
      flags->client.master_endpoint.empty() && std::getenv("PROPELLER_MASTER") == nullptr;
  std::unique_ptr<EmbeddedService> service;
  ClientOptions copts = flags->client;
  std::string data = flags->data.empty() ? JoinPath(DefaultDataDir(), "mount") : flags->data;
  {
    char dres[PATH_MAX];
    if (::realpath(data.c_str(), dres) != nullptr) {
      data = dres;
    } else if (data[0] != '/') {
      char cwd[PATH_MAX];
      if (::getcwd(cwd, sizeof(cwd)) != nullptr) data = JoinPath(cwd, data);
    }
  }
  if (PathInScope(data, backing) || PathInScope(data, mountpoint)) {
    return ReportError(Status::InvalidArgument(
        "--data " + data + " is inside the tree this mount serves; put it elsewhere"));
  }
  // Searches of this mount's files, wherever they come from, wait for its queue (SearchGate).
  auto gate = std::make_shared<SearchGate>(backing, flags->search_wait_ms);
  if (embedded) {
    // Other local processes reach the embedded master and node through unix sockets only
    // (docs/security.md); this process's own client calls them directly.
    const std::string runtime = DefaultRuntimeDir();
    if (Status s = PrepareRuntimeDir(runtime); !s.ok()) return ReportError(s);
    const std::string tag = "mount-" + std::to_string(::getpid());
    EmbeddedServiceOptions eo;
    eo.data_dir = data;
    eo.master_listen = "ipc://" + runtime + "/" + tag + ".master.sock";
    eo.node_listen = "ipc://" + runtime + "/" + tag + ".node.sock";
    eo.tag = tag;
    eo.durability = durability;
    eo.search_gate = [gate](const wire::SearchQuery& q) { return gate->Check(q); };
    auto started = StartEmbeddedService(eo);
    if (!started.ok()) return ReportError(started.status());
    service = std::move(started).value();
    copts = service->client_options;
    copts.timeout_ms = flags->client.timeout_ms;
  } else if (Status s = PrepareDataDir(data); !s.ok()) {
    return ReportError(s);
  }
  auto client = Client::Connect(copts);
  if (!client.ok()) return ReportError(client.status());

  // The volume; a new one is indexed as it is before the mount serves it.
  bool known = false;
  auto volumes = (*client)->ListVolumes();
  if (!volumes.ok()) return ReportError(volumes.status());
  for (const wire::VolumeInfo& v : *volumes) known = known || v.root == backing;
  auto volume = (*client)->RegisterVolume(backing);
  if (!volume.ok()) return ReportError(volume.status());
  if (!known && flags->import) {
    if (Status s = ImportTree(client->get(), backing, *volume); !s.ok()) return ReportError(s);
  }
  if (service) {
    // Partitions quarantined for damage (docs/faults.md) are rebuilt from the backing tree
    // before the mount serves: every file is put again, and goes to the partition the master
    // maps it to.
    const std::map<uint64_t, std::string> damaged = service->node->engine()->DamagedAcgs();
    if (!damaged.empty()) {
      std::fprintf(stderr, "propeller: rebuilding %zu damaged partition(s) from %s\n",
                   damaged.size(), backing.c_str());
      if (Status s = ImportTree(client->get(), backing, *volume); !s.ok()) {
        return ReportError(s.WithContext("rebuilding damaged partitions"));
      }
      for (const auto& [acg, why] : damaged) {
        if (Status s = service->node->engine()->MarkRebuilt(acg); !s.ok()) return ReportError(s);
      }
    }
  }

  // The queue of updates the index could not take (docs/faults.md), and what feeds the index.
  auto pending = fuse::PendingUpdates::Open(
      JoinPath(data, "pending"), QueueReserve(data),
      "cluster " + (embedded ? std::string("embedded in ") + data : (*client)->master_endpoint()) +
          "\nvolume " + std::to_string(*volume) + "\nbacking " + backing + "\n");
  if (!pending.ok()) return ReportError(pending.status());
  if (known && flags->reconcile) {
    // What changed in BACKING while it was not mounted, and what a crash cut off
    // (docs/reconcile.md), before the mount serves. An index that cannot be reached does not
    // keep the mount from serving (docs/faults.md): the next start reconciles.
    ReconcileStats rs;
    if (Status s = Reconcile(client->get(), backing, *volume, &rs); s.ok()) {
      std::fprintf(stderr, "propeller: %s\n", ReconcileSummary(backing, rs).c_str());
    } else {
      std::fprintf(stderr,
                   "propeller: warning: not reconciled with %s (%s); changes made while it "
                   "was not mounted are not indexed until the next start\n",
                   backing.c_str(), s.ToString().c_str());
    }
  }
  // The backing directory, open: every call on the tree starts there (backing_tree.h).
  auto tree = fuse::BackingTree::Open(backing);
  if (!tree.ok()) return ReportError(tree.status());
  fuse::IndexWriterOptions wo;
  wo.client = client->get();
  wo.tree = tree->get();
  wo.volume = *volume;
  wo.queue = pending->get();
  wo.timeout_ms = flags->index_timeout_ms;
  auto writer = std::make_unique<fuse::IndexWriter>(wo);
  writer->Start();
  gate->Open(writer.get(), *volume);

  // The local query engine (for `propeller search --scope MOUNTPOINT/...` and libpropeller).
  QueryEngineOptions qo;
  qo.client = client->get();
  qo.volume = *volume;
  qo.backing = backing;
  qo.mountpoint = mountpoint;
  qo.before_search = [gate](const std::string& scope) { return gate->CheckInVolume(scope); };
  qo.mount_status = [w = writer.get()] { return MountStatusOf(w->stats()); };
  auto engine = QueryEngine::Start(qo);
  if (!engine.ok()) return ReportError(engine.status().WithContext("query engine"));

  fuse::CaptureFsOptions fo;
  fo.backing = backing;
  fo.tree = tree->get();
  fo.mountpoint = mountpoint;
  fo.volume = *volume;
  fo.client = client->get();
  fo.index = writer.get();
  fo.search_wait_ms = flags->search_wait_ms;
  fo.writeback = flags->writeback;
  fo.passthrough = flags->passthrough;
  fo.entry_timeout_s = flags->cache_timeout_s;
  fo.attr_timeout_s = flags->cache_timeout_s;
  fo.allow_other = flags->allow_other;
  fo.max_threads = flags->threads;
  fo.poll_us = flags->poll_us;
  fo.dir_cache = flags->dir_cache;
  fo.debug = flags->debug;
  fo.capture_edges = flags->capture;
  auto fs = fuse::CaptureFs::Mount(fo);
  if (!fs.ok()) return ReportError(fs.status());

  MountRecord record;
  record.mountpoint = mountpoint;
  record.backing = backing;
  record.engine_endpoint = (*engine)->endpoint();
  record.master_endpoint = (*client)->master_endpoint();
  record.volume = *volume;
  record.pid = static_cast<uint32_t>(::getpid());
  if (Status s = WriteMountRecord(record); !s.ok()) {
    Log(LogLevel::kWarning, "mount: %s (propeller search --scope cannot find this mount)",
        s.ToString().c_str());
  }
  if (!flags->ready_file.empty()) {
    Status s = WriteFileAtomically(Env::Default(), flags->ready_file,
                                   "mount " + mountpoint + "\nengine " + (*engine)->endpoint() +
                                       "\nmaster " + (*client)->master_endpoint() + "\n");
    if (!s.ok()) return ReportError(s);
  }
  const std::string where = embedded ? "embedded service, data in " + data
                                     : "cluster " + (*client)->master_endpoint();
  std::fprintf(stderr, "propeller: %s mounted at %s (%s). Unmount or Ctrl-C stops.\n",
               backing.c_str(), mountpoint.c_str(), where.c_str());
  // --metrics-listen: the mount's families, and the embedded master's and node's.
  metrics::Registry registry;
  std::unique_ptr<daemon::MetricsServer> metrics_server;
  if (!flags->metrics_listen.empty()) {
    RegisterMountMetrics(writer.get(), fs->get(), &registry);
    if (service) RegisterEmbeddedMetrics(service.get(), &registry);
    auto m = daemon::MetricsServer::Start(flags->metrics_listen, &registry);
    if (!m.ok()) return ReportError(m.status());
    metrics_server = std::move(*m);
  }
  // Mounted: the kernel queues requests until Run below serves them.
  const std::string status = backing + " mounted at " + mountpoint + " (" + where + ")";
  daemon::NotifyReady(status);

  // A signal thread stops the file system, or reloads on SIGHUP; Run returns on a stop or on
  // an external unmount.
  fuse::CaptureFs* raw = fs->get();
  std::atomic<bool> done{false};
  std::thread signals([&] {
    const int sig = daemon::WaitForStopSignal(stop_signals, [&] {
      daemon::Reload("propeller mount", flags->values, [&]() -> Result<daemon::Reparsed> {
        PROPELLER_ASSIGN_OR_RETURN(MountFlags next,
                                   ParseMountFlags(global.client, global.given, argv));
        return daemon::Reparsed{next.log_level, std::move(next.values)};
      }, status);
    });
    if (done.load()) return;  // our own wake-up after the file system was unmounted
    std::fprintf(stderr, "propeller: stopping (signal %d)\n", sig);
    raw->Stop();
  });
  Status run = raw->Run();
  done = true;
  pthread_kill(signals.native_handle(), SIGTERM);
  signals.join();
  const fuse::CaptureFsStats stats = raw->stats();
  metrics_server.reset();  // its collectors read the file system and the writer
  RemoveMountRecord(mountpoint);
  fs->reset();
  engine->reset();
  gate->Close();
  const fuse::IndexWriterStats ws = writer->stats();
  writer.reset();
  std::fprintf(stderr,
               "propeller: %s unmounted: %llu index updates (%llu through the queue), %llu "
               "opens in kernel passthrough, %llu requests served by the polling reader\n",
               mountpoint.c_str(), static_cast<unsigned long long>(ws.sent + ws.delivered),
               static_cast<unsigned long long>(ws.queued),
               static_cast<unsigned long long>(stats.passthrough_opens),
               static_cast<unsigned long long>(stats.polled_requests));
  if (ws.pending > 0) {
    std::fprintf(stderr,
                 "propeller: %llu index updates are still queued in %s; the next mount of %s "
                 "with --data %s delivers them\n",
                 static_cast<unsigned long long>(ws.pending),
                 JoinPath(data, "pending").c_str(), backing.c_str(), data.c_str());
  }
  pending->reset();
  client->reset();
  // Commits every cache and syncs the log: a failure there is this command's failure too.
  Status stopped = service ? service->Stop() : Status::OK();
  service.reset();
  if (!run.ok()) return ReportError(run);
  if (!stopped.ok()) return ReportError(stopped.WithContext("stopping the embedded service"));
  return kExitOk;
}

}  // namespace propeller::cli
