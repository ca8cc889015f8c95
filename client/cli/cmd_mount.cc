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

#include "client/cli/args.h"
#include "client/cli/commands.h"
#include "client/cli/embedded_service.h"
#include "client/cli/service_options.h"
#include "client/fuse/backing_tree.h"
#include "client/fuse/capture_fs.h"
#include "client/fuse/index_writer.h"
#include "client/fuse/pending_updates.h"
#include "client/lib/mount_registry.h"
#include "client/lib/query_engine.h"
#include "client/lib/reconcile.h"
#include "common/env.h"
#include "common/logging.h"
#include "common/record.h"
#include "common/secure_dir.h"
#include "common/tree_walk.h"

namespace propeller::cli {
namespace {

constexpr const char* kMountHelp = R"(usage: propeller [--master ENDPOINT] mount BACKING MOUNTPOINT [options]

Makes the directory tree BACKING available at MOUNTPOINT, unchanged in behaviour, while
Propeller captures which files each process reads before it writes others (the access-causality
graph) and keeps the index of every file exact: a file whose close() returned is found by the
next search. Query directories work anywhere under MOUNTPOINT:
  ls 'MOUNTPOINT/src/?size>1m&mtime<1d'
and `propeller search QUERY --scope MOUNTPOINT/dir` finds this mount's query engine by itself.

Without --master (a global option, anywhere on the line), a master and an index node run
inside this process (the embedded default) with their data in --data (0700); other local
processes reach them through unix sockets only (/run/propeller for root), and every user
searches with their own permissions. No network port is opened. The first mount of a BACKING
indexes the files already there. Runs in the foreground until unmounted (fusermount3 -u
MOUNTPOINT), Ctrl-C or SIGTERM.

A file operation never fails or stalls because the index cannot take its update (its node
down, its disk full): after --index-timeout the update goes to a durable queue in
DATA/pending and is delivered in order once the index takes updates again; until then a
search under the files concerned waits up to --search-wait, then fails with "index catching
up" and the number of updates pending (a query directory: EAGAIN) rather than answer stale. If even the
queue's reserve is used up, changes are refused with ENOSPC before they happen. `propeller
status` shows the queue. See docs/faults.md.
Options:
  --data DIR          data directory (default $XDG_DATA_HOME/propeller/mount, else
                      ~/.local/share/propeller/mount): the embedded master and node, and the
                      queue of pending updates (with --master too). Must be outside BACKING
                      and MOUNTPOINT; one mount at a time.
  --index-timeout MS  how long a file operation waits for the index before its update is
                      queued (default 2000)
  --search-wait MS    how long a search waits for queued updates under its scope before it
                      fails with "index catching up" (default 2000)
  --durability LEVEL  embedded mode: default (log fsynced every 10 ms) or sync
  --writeback         use the kernel's writeback cache (the kernel owns size and mtime until
                      close); turns kernel passthrough off
  --no-passthrough    serve reads and writes of open files through this process (default:
                      the kernel passes them straight to the backing files, Linux 6.9+;
                      opens, closes and all name changes still come here)
  --cache-timeout S   seconds the kernel may cache names and attributes (default 1)
  --threads N         FUSE worker threads (default 10)
  --poll-us N         after each request, one more thread keeps reading for the next one N
                      microseconds before it sleeps, so back-to-back calls skip a thread
                      wake-up (default 50; 0 = off). Spends CPU only while calls keep coming.
  --dir-cache N       backing directories kept open for the directories used most, so a
                      call walks one name instead of the whole path (default 256; 0 = none:
                      every call resolves its directory's path)
  --no-import         do not index the files already in BACKING on the first mount
  --no-reconcile      do not bring the index up to date with BACKING at start (changes
                      made while it was not mounted stay unseen; docs/reconcile.md)
  --no-capture        keep the index exact but capture no access-causality edges
  --no-allow-other    only the mounting user may use the mount (default: every user, with
                      normal permission checks; needs root)
  --ready-file FILE   write "mount <MOUNTPOINT>\nengine <endpoint>\nmaster <endpoint>\n" once
                      serving
  --log-level LEVEL   debug, info (default), warning, error
  --debug             log every FUSE request (libfuse's -d)
)";

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
  auto args = Args::Parse(argv,
                          {"--data", "--durability", "--cache-timeout", "--threads",
                           "--poll-us", "--ready-file", "--log-level", "--index-timeout",
                           "--search-wait", "--dir-cache"},
                          {"--help", "-h", "--writeback", "--no-passthrough", "--no-import",
                           "--no-reconcile", "--no-allow-other", "--no-capture", "--debug"});
  if (!args.ok()) return ReportError(args.status(), /*usage=*/true);
  if (args->Has("--help") || args->Has("-h")) {
    std::fputs(kMountHelp, stdout);
    return kExitOk;
  }
  if (args->positional().size() != 2) {
    std::fputs("propeller: mount takes BACKING and MOUNTPOINT (see --help)\n", stderr);
    return kExitUsage;
  }
  if (Status st = ApplyLogLevelOption(args->GetOr("--log-level", "info")); !st.ok()) {
    return ReportError(st, /*usage=*/true);
  }
  auto threads = args->GetUint("--threads", 10);
  if (!threads.ok()) return ReportError(threads.status(), /*usage=*/true);
  if (*threads == 0 || *threads > 256) {
    return ReportError(Status::InvalidArgument("--threads must be 1..256"), /*usage=*/true);
  }
  auto poll_us = args->GetUint("--poll-us", 50);
  if (!poll_us.ok()) return ReportError(poll_us.status(), /*usage=*/true);
  if (*poll_us > 1'000'000) {
    return ReportError(Status::InvalidArgument("--poll-us must be 0..1000000"), /*usage=*/true);
  }
  auto dir_cache = args->GetUint("--dir-cache", 256);
  if (!dir_cache.ok()) return ReportError(dir_cache.status(), /*usage=*/true);
  if (*dir_cache > 65536) {
    return ReportError(Status::InvalidArgument("--dir-cache must be 0..65536"), /*usage=*/true);
  }
  double cache_timeout = 1.0;
  if (auto t = args->Get("--cache-timeout")) {
    char* end = nullptr;
    cache_timeout = std::strtod(t->c_str(), &end);
    if (t->empty() || *end != '\0' || !(cache_timeout >= 0) || cache_timeout > 86400) {
      return ReportError(Status::InvalidArgument("--cache-timeout takes seconds (0..86400)"),
                         /*usage=*/true);
    }
  }
  auto index_timeout = args->GetUint("--index-timeout", 2000);
  if (!index_timeout.ok()) return ReportError(index_timeout.status(), /*usage=*/true);
  if (*index_timeout == 0 || *index_timeout > 600'000) {
    return ReportError(Status::InvalidArgument("--index-timeout must be 1..600000 ms"),
                       /*usage=*/true);
  }
  auto search_wait = args->GetUint("--search-wait", 2000);
  if (!search_wait.ok()) return ReportError(search_wait.status(), /*usage=*/true);
  if (*search_wait > 600'000) {
    return ReportError(Status::InvalidArgument("--search-wait must be 0..600000 ms"),
                       /*usage=*/true);
  }
  auto durability_opt = ParseDurabilityOption(args->GetOr("--durability", "default"));
  if (!durability_opt.ok()) return ReportError(durability_opt.status(), /*usage=*/true);
  const Durability durability = *durability_opt;

  char resolved[PATH_MAX];
  if (::realpath(args->positional()[0].c_str(), resolved) == nullptr) {
    return ReportError(Status::IOError("cannot open " + args->positional()[0], errno));
  }
  const std::string backing = resolved;
  if (::realpath(args->positional()[1].c_str(), resolved) == nullptr) {
    return ReportError(Status::IOError("cannot open mount point " + args->positional()[1], errno));
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

  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  // The cluster: the one named with --master / $PROPELLER_MASTER, or embedded here.
  const bool embedded =
      global.client.master_endpoint.empty() && std::getenv("PROPELLER_MASTER") == nullptr;
  std::unique_ptr<EmbeddedService> service;
  ClientOptions copts = global.client;
  std::string data = args->GetOr("--data", JoinPath(DefaultDataDir(), "mount"));
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
  auto gate = std::make_shared<SearchGate>(backing, static_cast<int64_t>(*search_wait));
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
    copts.timeout_ms = global.client.timeout_ms;
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
  if (!known && !args->Has("--no-import")) {
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
  if (known && !args->Has("--no-reconcile")) {
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
  wo.timeout_ms = static_cast<int64_t>(*index_timeout);
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
  fo.search_wait_ms = static_cast<int64_t>(*search_wait);
  fo.writeback = args->Has("--writeback");
  fo.passthrough = !args->Has("--no-passthrough");
  fo.entry_timeout_s = cache_timeout;
  fo.attr_timeout_s = cache_timeout;
  fo.allow_other = !args->Has("--no-allow-other");
  fo.max_threads = static_cast<int>(*threads);
  fo.poll_us = static_cast<int64_t>(*poll_us);
  fo.dir_cache = static_cast<size_t>(*dir_cache);
  fo.debug = args->Has("--debug");
  fo.capture_edges = !args->Has("--no-capture");
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
  if (auto ready = args->Get("--ready-file")) {
    Status s = WriteFileAtomically(Env::Default(), *ready,
                                   "mount " + mountpoint + "\nengine " + (*engine)->endpoint() +
                                       "\nmaster " + (*client)->master_endpoint() + "\n");
    if (!s.ok()) return ReportError(s);
  }
  std::fprintf(stderr, "propeller: %s mounted at %s (%s). Unmount or Ctrl-C stops.\n",
               backing.c_str(), mountpoint.c_str(),
               embedded ? ("embedded service, data in " + data).c_str()
                        : ("cluster " + (*client)->master_endpoint()).c_str());

  // A signal thread stops the file system; Run returns on that or on an external unmount.
  fuse::CaptureFs* raw = fs->get();
  std::atomic<bool> done{false};
  std::thread signals([&stop_signals, &done, raw] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    if (done.load()) return;  // our own wake-up after the file system was unmounted
    std::fprintf(stderr, "propeller: stopping (signal %d)\n", sig);
    raw->Stop();
  });
  Status run = raw->Run();
  done = true;
  pthread_kill(signals.native_handle(), SIGTERM);
  signals.join();
  const fuse::CaptureFsStats stats = raw->stats();
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
