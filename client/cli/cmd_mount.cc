// propeller mount BACKING MOUNTPOINT: the capture file system (DESIGN §4, §9), connected to a
// cluster (--master) or, by default, with a master and an index node embedded in this process.
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "client/cli/args.h"
#include "client/cli/commands.h"
#include "client/cli/embedded_service.h"
#include "client/cli/service_options.h"
#include "client/fuse/capture_fs.h"
#include "client/lib/mount_registry.h"
#include "client/lib/query_engine.h"
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

Without --master (a global option, before `mount`), a master and an index node run inside this
process (the embedded default) with their data in --data (0700); other local processes reach
them through unix sockets only (/run/propeller for root), and every user searches with their own
permissions. No network port is opened. The first mount of a BACKING indexes the files already
there. Runs in the foreground until unmounted (fusermount3 -u MOUNTPOINT), Ctrl-C or SIGTERM.
Options:
  --data DIR          embedded mode: data directory (default $XDG_DATA_HOME/propeller/mount,
                      else ~/.local/share/propeller/mount). Must be outside BACKING and
                      MOUNTPOINT.
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
  --no-import         do not index the files already in BACKING on the first mount
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

}  // namespace

int RunMount(const GlobalOptions& global, const std::vector<std::string>& argv) {
  auto args = Args::Parse(argv,
                          {"--data", "--durability", "--cache-timeout", "--threads",
                           "--poll-us", "--ready-file", "--log-level"},
                          {"--help", "-h", "--writeback", "--no-passthrough", "--no-import",
                           "--no-allow-other", "--no-capture", "--debug"});
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
  double cache_timeout = 1.0;
  if (auto t = args->Get("--cache-timeout")) {
    char* end = nullptr;
    cache_timeout = std::strtod(t->c_str(), &end);
    if (t->empty() || *end != '\0' || !(cache_timeout >= 0) || cache_timeout > 86400) {
      return ReportError(Status::InvalidArgument("--cache-timeout takes seconds (0..86400)"),
                         /*usage=*/true);
    }
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
  std::string data;
  if (embedded) {
    data = args->GetOr("--data", JoinPath(DefaultDataDir(), "mount"));
    char dres[PATH_MAX];
    if (::realpath(data.c_str(), dres) != nullptr) {
      data = dres;
    } else if (data[0] != '/') {
      char cwd[PATH_MAX];
      if (::getcwd(cwd, sizeof(cwd)) != nullptr) data = JoinPath(cwd, data);
    }
    if (PathInScope(data, backing) || PathInScope(data, mountpoint)) {
      return ReportError(Status::InvalidArgument(
          "--data " + data + " is inside the tree this mount serves; put it elsewhere"));
    }
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
    auto started = StartEmbeddedService(eo);
    if (!started.ok()) return ReportError(started.status());
    service = std::move(started).value();
    copts = service->client_options;
    copts.timeout_ms = global.client.timeout_ms;
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

  // The local query engine (for `propeller search --scope MOUNTPOINT/...` and libpropeller).
  QueryEngineOptions qo;
  qo.client = client->get();
  qo.volume = *volume;
  qo.backing = backing;
  qo.mountpoint = mountpoint;
  auto engine = QueryEngine::Start(qo);
  if (!engine.ok()) return ReportError(engine.status().WithContext("query engine"));

  fuse::CaptureFsOptions fo;
  fo.backing = backing;
  fo.mountpoint = mountpoint;
  fo.volume = *volume;
  fo.client = client->get();
  fo.writeback = args->Has("--writeback");
  fo.passthrough = !args->Has("--no-passthrough");
  fo.entry_timeout_s = cache_timeout;
  fo.attr_timeout_s = cache_timeout;
  fo.allow_other = !args->Has("--no-allow-other");
  fo.max_threads = static_cast<int>(*threads);
  fo.poll_us = static_cast<int64_t>(*poll_us);
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
  std::fprintf(stderr,
               "propeller: %s unmounted: %llu index updates (%llu calls failed on one), %llu "
               "opens in kernel passthrough, %llu requests served by the polling reader\n",
               mountpoint.c_str(), static_cast<unsigned long long>(stats.updates),
               static_cast<unsigned long long>(stats.update_errors),
               static_cast<unsigned long long>(stats.passthrough_opens),
               static_cast<unsigned long long>(stats.polled_requests));
  RemoveMountRecord(mountpoint);
  fs->reset();
  engine->reset();
  client->reset();
  // Commits every cache and syncs the log: a failure there is this command's failure too.
  Status stopped = service ? service->Stop() : Status::OK();
  service.reset();
  if (!run.ok()) return ReportError(run);
  if (!stopped.ok()) return ReportError(stopped.WithContext("stopping the embedded service"));
  return kExitOk;
}

}  // namespace propeller::cli
