#include "client/cli/mount_options.h"

#include "common/daemon/metrics_server.h"

#include <cstdlib>

namespace propeller::cli {

using daemon::OptionKind;
using daemon::OptionScope;
using daemon::OptionSpec;
using daemon::OptionValue;

const std::vector<OptionSpec>& MountOptionSpecs() {
  static const std::vector<OptionSpec> specs = {
      {.name = "config", .kind = OptionKind::kString, .value_name = "FILE",
       .help = "read options from this TOML file first (no default); options given here win "
               "over the file's. The file may also set backing, mountpoint and the global "
               "options master, timeout-ms, cluster-key, curve-key, server-key and insecure",
       .example = "/etc/propeller/mount-data.toml", .scope = OptionScope::kCommandLineOnly},
      {.name = "backing", .kind = OptionKind::kString, .value_name = "DIR",
       .help = "BACKING", .example = "/srv/data", .scope = OptionScope::kFileOnly},
      {.name = "mountpoint", .kind = OptionKind::kString, .value_name = "DIR",
       .help = "MOUNTPOINT", .example = "/mnt/data", .scope = OptionScope::kFileOnly},
      {.name = "data", .kind = OptionKind::kString, .value_name = "DIR",
       .help = "data directory (default $XDG_DATA_HOME/propeller/mount, else "
               "~/.local/share/propeller/mount): the embedded master and node, and the queue of "
               "pending updates (with --master too). Must be outside BACKING and MOUNTPOINT; one "
               "mount at a time.",
       .example = "/var/lib/propeller/mount-data"},
      {.name = "index-timeout", .kind = OptionKind::kInteger, .value_name = "MS",
       .help = "how long a file operation waits for the index before its update is queued "
               "(default 2000)",
       .example = "5000"},
      {.name = "search-wait", .kind = OptionKind::kInteger, .value_name = "MS",
       .help = "how long a search waits for queued updates under its scope before it fails "
               "with \"index catching up\" (default 2000)",
       .example = "0"},
      {.name = "durability", .kind = OptionKind::kString, .value_name = "LEVEL",
       .help = "embedded mode: default (log fsynced every 10 ms) or sync", .example = "sync"},
      {.name = "writeback", .kind = OptionKind::kFlag,
       .help = "use the kernel's writeback cache (the kernel owns size and mtime until close); "
               "turns kernel passthrough off"},
      {.name = "no-passthrough", .kind = OptionKind::kFlag,
       .help = "serve reads and writes of open files through this process (default: the kernel "
               "passes them straight to the backing files, Linux 6.9+; opens, closes and all "
               "name changes still come here)"},
      {.name = "cache-timeout", .kind = OptionKind::kNumber, .value_name = "S",
       .help = "seconds the kernel may cache names and attributes (default 1)",
       .example = "0.5"},
      {.name = "threads", .kind = OptionKind::kInteger, .value_name = "N",
       .help = "FUSE worker threads (default 10)", .example = "4"},
      {.name = "poll-us", .kind = OptionKind::kInteger, .value_name = "N",
       .help = "after each request, one more thread keeps reading for the next one N "
               "microseconds before it sleeps, so back-to-back calls skip a thread wake-up "
               "(default 50; 0 = off). Spends CPU only while calls keep coming.",
       .example = "0"},
      {.name = "dir-cache", .kind = OptionKind::kInteger, .value_name = "N",
       .help = "backing directories kept open for the directories used most, so a call walks "
               "one name instead of the whole path (default 256; 0 = none: every call resolves "
               "its directory's path)",
       .example = "16"},
      {.name = "no-import", .kind = OptionKind::kFlag,
       .help = "do not index the files already in BACKING on the first mount"},
      {.name = "no-reconcile", .kind = OptionKind::kFlag,
       .help = "do not bring the index up to date with BACKING at start (changes made while it "
               "was not mounted stay unseen; docs/reconcile.md)"},
      {.name = "no-capture", .kind = OptionKind::kFlag,
       .help = "keep the index exact but capture no access-causality edges"},
      {.name = "no-allow-other", .kind = OptionKind::kFlag,
       .help = "only the mounting user may use the mount (default: every user, with normal "
               "permission checks; needs root)"},
      {.name = "ready-file", .kind = OptionKind::kString, .value_name = "FILE",
       .help = "write \"mount <MOUNTPOINT>\\nengine <endpoint>\\nmaster <endpoint>\\n\" once "
               "serving",
       .example = "/run/propeller/mount-data.ready"},
      daemon::MetricsListenOption(),
      daemon::LogLevelOption(),
      {.name = "debug", .kind = OptionKind::kFlag,
       .help = "log every FUSE request (libfuse's -d)"},
      // The CLI's global options (client/cli/main.cc): on the command line they come before
      // or after the command and main.cc takes them, so only a file spells them here.
      {.name = "master", .kind = OptionKind::kString, .value_name = "ENDPOINT",
       .help = "--master", .example = "tcp://10.0.0.1:7470", .scope = OptionScope::kFileOnly},
      {.name = "timeout-ms", .kind = OptionKind::kInteger, .value_name = "N",
       .help = "--timeout-ms", .example = "10000", .scope = OptionScope::kFileOnly},
      {.name = "cluster-key", .kind = OptionKind::kString, .value_name = "FILE",
       .help = "--cluster-key", .example = "/etc/propeller/cluster.key",
       .scope = OptionScope::kFileOnly},
      {.name = "curve-key", .kind = OptionKind::kString, .value_name = "FILE",
       .help = "--curve-key", .example = "/etc/propeller/client.key",
       .scope = OptionScope::kFileOnly},
      {.name = "server-key", .kind = OptionKind::kString, .value_name = "FILE",
       .help = "--server-key", .example = "/etc/propeller/server.pub",
       .scope = OptionScope::kFileOnly},
      {.name = "insecure", .kind = OptionKind::kFlag, .help = "--insecure",
       .scope = OptionScope::kFileOnly},
      daemon::HelpOption(),
  };
  return specs;
}

namespace {

// A whole number of `what` in [lo, hi].
Result<long long> Int(const OptionValue& v, long long lo, long long hi) {
  return daemon::ParseIntOption(v.Describe(), v.value, lo, hi);
}

Status Apply(const OptionValue& v, const std::set<std::string>& global_given, MountFlags* f) {
  const std::string what = v.Describe();
  // The command line's global options win over the file's.
  if (global_given.count(v.name) != 0) return Status::OK();
  PROPELLER_ASSIGN_OR_RETURN(const bool shared, daemon::ApplySharedOption(
                                                 v, {&f->metrics_listen, &f->log_level}));
  if (shared) return Status::OK();
  if (v.name == "backing") {
    f->backing = v.value;
  } else if (v.name == "mountpoint") {
    f->mountpoint = v.value;
  } else if (v.name == "data") {
    if (v.value.empty()) return Status::InvalidArgument(what + " needs a directory");
    f->data = v.value;
  } else if (v.name == "index-timeout") {
    PROPELLER_ASSIGN_OR_RETURN(f->index_timeout_ms, Int(v, 1, 600'000));
  } else if (v.name == "search-wait") {
    PROPELLER_ASSIGN_OR_RETURN(f->search_wait_ms, Int(v, 0, 600'000));
  } else if (v.name == "durability") {
    if (v.value == "default") {
      f->durability = Durability::kDefault;
    } else if (v.value == "sync") {
      f->durability = Durability::kSync;
    } else {
      return Status::InvalidArgument(what + " takes default or sync, not '" + v.value + "'");
    }
  } else if (v.name == "writeback") {
    f->writeback = true;
  } else if (v.name == "no-passthrough") {
    f->passthrough = false;
  } else if (v.name == "cache-timeout") {
    char* end = nullptr;
    const double s = std::strtod(v.value.c_str(), &end);
    if (v.value.empty() || *end != '\0' || !(s >= 0) || s > 86400) {
      return Status::InvalidArgument(what + " takes seconds (0..86400), not '" + v.value + "'");
    }
    f->cache_timeout_s = s;
  } else if (v.name == "threads") {
    PROPELLER_ASSIGN_OR_RETURN(f->threads, Int(v, 1, 256));
  } else if (v.name == "poll-us") {
    PROPELLER_ASSIGN_OR_RETURN(f->poll_us, Int(v, 0, 1'000'000));
  } else if (v.name == "dir-cache") {
    PROPELLER_ASSIGN_OR_RETURN(f->dir_cache, Int(v, 0, 65536));
  } else if (v.name == "no-import") {
    f->import = false;
  } else if (v.name == "no-reconcile") {
    f->reconcile = false;
  } else if (v.name == "no-capture") {
    f->capture = false;
  } else if (v.name == "no-allow-other") {
    f->allow_other = false;
  } else if (v.name == "ready-file") {
    f->ready_file = v.value;
  } else if (v.name == "debug") {
    f->debug = true;
  } else if (v.name == "master") {
    f->client.master_endpoint = v.value;
  } else if (v.name == "timeout-ms") {
    PROPELLER_ASSIGN_OR_RETURN(f->client.timeout_ms, Int(v, 1, 86'400'000));
  } else if (v.name == "cluster-key") {
    f->client.cluster_key_file = v.value;
  } else if (v.name == "curve-key") {
    f->client.curve_key_file = v.value;
  } else if (v.name == "server-key") {
    f->client.server_key_file = v.value;
  } else if (v.name == "insecure") {
    f->client.insecure = true;
  } else {
    return Status::Internal("option --" + v.name + " has no handler");
  }
  return Status::OK();
}

}  // namespace

Result<MountFlags> ParseMountFlags(const ClientOptions& global,
                                   const std::set<std::string>& global_given,
                                   const std::vector<std::string>& args) {
  PROPELLER_ASSIGN_OR_RETURN(
      daemon::LoadedOptions loaded,
      daemon::LoadOptions(MountOptionSpecs(), args, /*default_config=*/"",
                          /*allow_positional=*/true));
  MountFlags flags;
  flags.help = loaded.help;
  if (flags.help) return flags;
  flags.config_file = loaded.config_file;
  flags.client = global;
  for (const OptionValue& v : loaded.values) {
    PROPELLER_RETURN_IF_ERROR(Apply(v, global_given, &flags));
  }
  flags.values = std::move(loaded.values);
  if (!loaded.positional.empty()) {
    if (loaded.positional.size() != 2) {
      return Status::InvalidArgument("mount takes BACKING and MOUNTPOINT");
    }
    flags.backing = loaded.positional[0];
    flags.mountpoint = loaded.positional[1];
  }
  if (flags.backing.empty() || flags.mountpoint.empty()) {
    return Status::InvalidArgument(
        flags.config_file.empty()
            ? "mount takes BACKING and MOUNTPOINT"
            : "mount takes BACKING and MOUNTPOINT (or backing and mountpoint in " +
                  flags.config_file + ")");
  }
  return flags;
}

std::string MountHelp() {
  return R"(usage: propeller [--master ENDPOINT] mount BACKING MOUNTPOINT [options]
       propeller mount --config FILE [options]

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
MOUNTPOINT), Ctrl-C or SIGTERM; SIGHUP re-reads the --config file and applies its log level.
Under systemd (Type=notify, the propeller-mount@ unit) it reports readiness once mounted.

A file operation never fails or stalls because the index cannot take its update (its node
down, its disk full): after --index-timeout the update goes to a durable queue in
DATA/pending and is delivered in order once the index takes updates again; until then a
search under the files concerned waits up to --search-wait, then fails with "index catching
up" and the number of updates pending (a query directory: EAGAIN) rather than answer stale. If even the
queue's reserve is used up, changes are refused with ENOSPC before they happen. `propeller
status` shows the queue. See docs/faults.md.
Options:
)" + daemon::OptionHelp(MountOptionSpecs()) +
         R"(
Every option but --config and --help can also be set in the --config file, one
`name = value` line each without the dashes (backing = "/srv/data", threads = 4,
no-import = true); `propeller config check FILE` checks one.
)";
}

}  // namespace propeller::cli
