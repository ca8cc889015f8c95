// propeller import DIR: index an existing tree (docs/architecture.md §9), with progress, resumable.
//
// The walk order is deterministic (common/tree_walk.h: depth-first, names sorted), so a
// checkpoint is just the last path whose batch the cluster acknowledged. It is written to the
// state file after every acknowledged batch; a rerun skips every entry up to it. Records are
// whole-record puts, so sending a few again after a crash is harmless.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <sstream>

#include "client/cli/args.h"
#include "client/cli/commands.h"
#include "client/lib/reconcile.h"
#include "common/env.h"
#include "common/secure_dir.h"
#include "common/tree_walk.h"

namespace propeller::cli {
namespace {

constexpr const char* kImportHelp = R"(usage: propeller import DIR [options]

Indexes the existing tree under DIR: every file and directory (not following symlinks, not
crossing into other file systems) with its attributes and user.* extended attributes. DIR
becomes a volume; searches print paths under it. Interrupted imports resume where they stopped
when run again. Importing a DIR imported before brings its index up to date with the tree
(docs/reconcile.md): new, changed, renamed and vanished entries; only the differences are
sent. A DIR inside an existing volume, or holding one, is refused: import the volume's root.
  propeller import /srv/data
Options:
  --app NAME      application tag for placement of new partitions (default: import)
  --batch N       files per update batch (default 1000)
  --state FILE    checkpoint file (default: $XDG_STATE_HOME/propeller/import-<service>-
                  <volume>.state, or ~/.local/state/propeller/...; <service> names the master)
  --restart       ignore an existing checkpoint and import everything again
  --quiet         no progress output
)";

struct Checkpoint {
  std::string root;
  std::string last;  // last acknowledged path ("" = none)
  uint64_t count = 0;
};

// $XDG_STATE_HOME/propeller, else ~/.local/state/propeller, else the runtime directory (never a
// directory others could have made first, such as /tmp/propeller). Named after the service
// (a hash of its master's endpoint) and the volume: two services each have a volume 1, and
// an import into one must not resume from, or overwrite, the other's checkpoint.
std::string DefaultStatePath(const std::string& master, uint32_t volume) {
  std::string dir;
  if (const char* x = std::getenv("XDG_STATE_HOME"); x != nullptr && *x == '/') {
    dir = std::string(x) + "/propeller";
  } else if (const char* home = std::getenv("HOME"); home != nullptr && *home == '/') {
    dir = std::string(home) + "/.local/state/propeller";
  } else {
    dir = DefaultRuntimeDir() + "/state";
  }
  uint64_t h = 14695981039346656037ull;  // FNV-1a: stable across runs and builds
  for (unsigned char c : master) h = (h ^ c) * 1099511628211ull;
  char service[17];
  std::snprintf(service, sizeof(service), "%016llx", static_cast<unsigned long long>(h));
  return dir + "/import-" + service + "-" + std::to_string(volume) + ".state";
}

// The checkpoint's directory: made 0700 when missing, and used only when nobody else may
// change it or its ancestors (the checkpoint names the paths imported).
Status PrepareStateDir(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos || slash == 0) return Status::OK();
  PROPELLER_RETURN_IF_ERROR(MakeDirs(path.substr(0, slash), 0700));
  return CheckAncestorsTrusted(path).WithContext("import state " + path);
}

// Format: "propeller-import 1\n" then "root <root>\n" "count <n>\n" "last <path>\n" (the path
// is the rest of the line; paths with a newline are checkpointed as their parent's entry).
std::string EncodeCheckpoint(const Checkpoint& c) {
  return "propeller-import 1\nroot " + c.root + "\ncount " + std::to_string(c.count) +
         "\nlast " + c.last + "\n";
}

Result<Checkpoint> DecodeCheckpoint(const std::string& text, const std::string& path) {
  std::istringstream in(text);
  std::string line;
  Checkpoint c;
  bool header = false;
  while (std::getline(in, line)) {
    if (line == "propeller-import 1") {
      header = true;
    } else if (line.rfind("root ", 0) == 0) {
      c.root = line.substr(5);
    } else if (line.rfind("count ", 0) == 0) {
      c.count = std::strtoull(line.c_str() + 6, nullptr, 10);
    } else if (line.rfind("last ", 0) == 0) {
      c.last = line.substr(5);
    }
  }
  if (!header || c.root.empty()) {
    return Status::Corruption(path + " is not an import checkpoint (use --restart to ignore it)");
  }
  return c;
}

class Progress {
 public:
  explicit Progress(bool quiet) : quiet_(quiet), tty_(::isatty(2) != 0) {}
  // Progress only on a terminal (stderr): a pipe or a log gets the summary line alone.
  void Update(uint64_t done, bool final = false) {
    if (quiet_ || !tty_) return;
    const auto now = std::chrono::steady_clock::now();
    const double since_print = std::chrono::duration<double>(now - last_print_).count();
    if (!final && since_print < 0.5) return;
    last_print_ = now;
    const double secs = std::chrono::duration<double>(now - start_).count();
    std::fprintf(stderr, "\rimported %llu entries (%.0f/s)%s",
                 static_cast<unsigned long long>(done), secs > 0 ? done / secs : 0.0,
                 final ? "\n" : "");
  }
  double Seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  const bool quiet_, tty_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_print_ = start_;
};

}  // namespace

int RunImport(const GlobalOptions& global, const std::vector<std::string>& argv) {
  auto args = Args::Parse(argv, {"--app", "--batch", "--state"},
                          {"--restart", "--quiet", "--help", "-h"});
  if (!args.ok()) return ReportError(args.status(), /*usage=*/true);
  if (args->Has("--help") || args->Has("-h")) {
    std::fputs(kImportHelp, stdout);
    return kExitOk;
  }
  if (args->positional().size() != 1) {
    std::fputs("propeller: import takes one DIR (see --help)\n", stderr);
    return kExitUsage;
  }
  auto batch_size = args->GetUint("--batch", 1000);
  if (!batch_size.ok()) return ReportError(batch_size.status(), /*usage=*/true);
  if (*batch_size == 0 || *batch_size > 100'000) {
    return ReportError(Status::InvalidArgument("--batch must be 1..100000"), /*usage=*/true);
  }
  char resolved[PATH_MAX];
  if (::realpath(args->positional()[0].c_str(), resolved) == nullptr) {
    return ReportError(Status::IOError("cannot open " + args->positional()[0], errno));
  }
  const std::string root = resolved;
  struct stat root_st;
  if (::stat(root.c_str(), &root_st) != 0) {
    return ReportError(Status::IOError("cannot read " + root, errno));
  }
  if (!S_ISDIR(root_st.st_mode)) {
    return ReportError(Status::InvalidArgument(root + " is not a directory: import takes the "
                                               "directory tree to index"));
  }
  auto client = ConnectOrReport(global);
  if (!client) return kExitError;
  auto volumes = client->ListVolumes();
  if (!volumes.ok()) return ReportError(volumes.status());
  bool known = false;
  for (const wire::VolumeInfo& v : *volumes) known = known || v.root == root;
  // The master refuses a root inside or holding another volume (volumes never overlap).
  auto volume = client->RegisterVolume(root);
  if (!volume.ok()) return ReportError(volume.status());

  Env* env = Env::Default();
  const std::string state_path = args->GetOr("--state", DefaultStatePath(client->master_endpoint(), *volume));
  Checkpoint checkpoint;
  checkpoint.root = root;
  if (!args->Has("--restart") && env->FileExists(state_path)) {
    std::string text;
    Status st = ReadFileToString(env, state_path, &text);
    if (!st.ok()) return ReportError(st);
    auto decoded = DecodeCheckpoint(text, state_path);
    if (!decoded.ok()) return ReportError(decoded.status());
    if (decoded->root != root) {
      return ReportError(Status::InvalidArgument(
          state_path + " belongs to an import of " + decoded->root + " (use --state or --restart)"));
    }
    checkpoint = *decoded;
    if (!args->Has("--quiet") && !checkpoint.last.empty()) {
      std::fprintf(stderr, "resuming after %s (%llu entries already imported)\n",
                   checkpoint.last.c_str(), static_cast<unsigned long long>(checkpoint.count));
    }
  }
  if (Status st = PrepareStateDir(state_path); !st.ok()) return ReportError(st);
  if (known && checkpoint.last.empty()) {
    // Imported before and not interrupted: only the differences (docs/reconcile.md).
    ReconcileStats rs;
    if (Status st = Reconcile(client.get(), root, *volume, &rs); !st.ok()) return ReportError(st);
    std::printf("%s (volume %u)\n", ReconcileSummary(root, rs).c_str(), *volume);
    return kExitOk;
  }

  const std::string app = args->GetOr("--app", "import");
  const std::string resume_after = checkpoint.last;
  std::vector<FileUpdate> batch;
  std::string batch_last;
  uint64_t sent = 0;
  Progress progress(args->Has("--quiet"));
  auto flush = [&]() -> Status {
    if (batch.empty()) return Status::OK();
    PROPELLER_RETURN_IF_ERROR(client->Update(batch));
    sent += batch.size();
    checkpoint.count += batch.size();
    if (!batch_last.empty()) checkpoint.last = batch_last;
    batch.clear();
    progress.Update(checkpoint.count);
    return WriteFileAtomically(env, state_path, EncodeCheckpoint(checkpoint));
  };
  TreeWalkOptions walk_options;
  walk_options.volume = *volume;
  TreeWalkStats walk_stats;
  Status st = WalkTree(
      root, walk_options,
      [&](FileRecord&& record) -> Status {
        // Hard-linked files come after the walk and are always re-sent (their paths[0] may sort
        // before the checkpoint although they were never acknowledged).
        const bool linked = record.type != FileType::kDirectory && record.nlink > 1;
        const std::string& path = record.paths[0];
        if (!linked && !resume_after.empty() && !WalkOrderLess(resume_after, path)) {
          return Status::OK();
        }
        if (!linked && path.find('\n') == std::string::npos) batch_last = path;
        FileUpdate u;
        u.op = UpdateOp::kPut;
        u.record = std::move(record);
        u.app = app;
        batch.push_back(std::move(u));
        return batch.size() >= *batch_size ? flush() : Status::OK();
      },
      &walk_stats);
  if (st.ok()) st = flush();
  if (!st.ok()) {
    return ReportError(st.WithContext("import stopped after " + std::to_string(checkpoint.count) +
                                      " entries; run it again to resume"));
  }
  progress.Update(checkpoint.count, /*final=*/true);
  Status removed = env->RemoveFile(state_path);
  (void)removed;  // a leftover checkpoint of a finished import only makes a rerun skip work
  std::printf("imported %llu entries (%llu files, %llu directories) from %s as volume %u in "
              "%.1f s; %llu skipped (unreadable or vanished)\n",
              static_cast<unsigned long long>(sent),
              static_cast<unsigned long long>(walk_stats.files),
              static_cast<unsigned long long>(walk_stats.dirs), root.c_str(), *volume,
              progress.Seconds(), static_cast<unsigned long long>(walk_stats.skipped));
  return kExitOk;
}

}  // namespace propeller::cli
