#include "master/master_flags.h"

#include "common/daemon/metrics_server.h"

#include <unistd.h>

#include <cstdio>

namespace propeller::master {

using daemon::OptionKind;
using daemon::OptionScope;
using daemon::OptionSpec;
using daemon::OptionValue;

const std::vector<OptionSpec>& MasterOptionSpecs() {
  static const std::vector<OptionSpec> specs = {
      {.name = "config", .kind = OptionKind::kString, .value_name = "FILE",
       .help = "read options from this TOML file first (default /etc/propeller/master.toml "
               "when it exists); options given here win over the file's",
       .example = "/etc/propeller/master.toml", .scope = OptionScope::kCommandLineOnly},
      {.name = "data", .kind = OptionKind::kString, .value_name = "DIR",
       .help = "data directory (created if missing; required)",
       .example = "/var/lib/propeller/master"},
      {.name = "listen", .kind = OptionKind::kString, .value_name = "ENDPOINT",
       .help = "where to serve (default tcp://127.0.0.1:7470); tcp://HOST:PORT, ipc://PATH. "
               "tcp:// is CURVE-authenticated with the cluster key; on ipc:// local users "
               "search with their own permissions",
       .example = "tcp://127.0.0.1:0"},
      {.name = "cluster-key", .kind = OptionKind::kString, .value_name = "FILE",
       .help = "the cluster's key pair, made here at the first start when missing; copy it "
               "(mode 0600) to the index nodes and client hosts (default "
               "$PROPELLER_CLUSTER_KEY, else /etc/propeller/cluster.key for root)",
       .example = "/etc/propeller/cluster.key"},
      {.name = "curve-key", .kind = OptionKind::kString, .value_name = "FILE",
       .help = "instead of the cluster key: this master's own key pair (needs --allow)",
       .example = "/etc/propeller/master.key"},
      {.name = "allow", .kind = OptionKind::kString, .value_name = "FILE",
       .help = "public keys of admitted clients and nodes, one per line",
       .example = "/etc/propeller/master.allow"},
      {.name = "insecure", .kind = OptionKind::kFlag,
       .help = "serve tcp:// without authentication: anyone who reaches the port may read and "
               "change the whole index. Tests only"},
      {.name = "node-timeout-ms", .kind = OptionKind::kInteger, .value_name = "N",
       .help = "a node silent this long is marked down (default 5000)", .example = "7000"},
      {.name = "acg-threshold", .kind = OptionKind::kInteger, .value_name = "N",
       .help = "files in an application's ACG before a new one is opened (default 50000)",
       .example = "1000"},
      {.name = "merge-after-ms", .kind = OptionKind::kInteger, .value_name = "N",
       .help = "merge an app's small ACGs on a node (below a quarter of the threshold) once "
               "they stayed small this long (default 300000; 0 = never)",
       .example = "0"},
      {.name = "no-split-moves", .kind = OptionKind::kFlag,
       .help = "keep both halves of a split on the splitting node (default: the new half "
               "moves to the node with the fewest files when that node stays below the "
               "splitting one even with it)"},
      {.name = "threads", .kind = OptionKind::kInteger, .value_name = "N",
       .help = "request worker threads (default 4)", .example = "8"},
      daemon::MetricsListenOption(),
      daemon::LogLevelOption(),
      // Fault tests only: the master dies (SIGKILL-like, no clean stop) right after
      // committing an ACG move, before replying, as a crash there would.
      {.name = "test-exit-after-move", .kind = OptionKind::kFlag,
       .scope = OptionScope::kCommandLineOnly},
      daemon::HelpOption(),
  };
  return specs;
}

namespace {

// Sets the option `v` in *flags. InvalidArgument naming v (v.Describe()) when malformed.
Status Apply(const OptionValue& v, MasterFlags* flags) {
  MasterOptions& o = flags->options;
  const std::string what = v.Describe();
  PROPELLER_ASSIGN_OR_RETURN(const bool shared, daemon::ApplySharedOption(
                                                 v, {&flags->metrics_listen, &flags->log_level}));
  if (shared) return Status::OK();
  if (v.name == "data") {
    if (v.value.empty()) return Status::InvalidArgument(what + " needs a directory");
    o.data_dir = v.value;
  } else if (v.name == "listen") {
    o.listen = v.value;
  } else if (v.name == "cluster-key") {
    o.cluster_key_file = v.value;
  } else if (v.name == "curve-key") {
    o.curve_key_file = v.value;
  } else if (v.name == "allow") {
    o.allow_file = v.value;
  } else if (v.name == "insecure") {
    o.insecure = true;
  } else if (v.name == "node-timeout-ms") {
    PROPELLER_ASSIGN_OR_RETURN(o.node_timeout_ms,
                               daemon::ParseIntOption(what, v.value, 1, 86400000));
  } else if (v.name == "acg-threshold") {
    PROPELLER_ASSIGN_OR_RETURN(const long long n,
                               daemon::ParseIntOption(what, v.value, 1, 1000000000000LL));
    o.acg_threshold = static_cast<uint64_t>(n);
  } else if (v.name == "merge-after-ms") {
    PROPELLER_ASSIGN_OR_RETURN(o.merge_after_ms,
                               daemon::ParseIntOption(what, v.value, 0, 86400000LL * 365));
  } else if (v.name == "no-split-moves") {
    o.move_split_halves = false;
  } else if (v.name == "threads") {
    PROPELLER_ASSIGN_OR_RETURN(const long long n, daemon::ParseIntOption(what, v.value, 1, 256));
    o.worker_threads = static_cast<int>(n);
  } else if (v.name == "test-exit-after-move") {
    o.move_commit_hook = [](uint64_t) { ::_exit(9); };
  } else {
    return Status::Internal("option --" + v.name + " has no handler");
  }
  return Status::OK();
}

}  // namespace

Result<MasterFlags> ParseMasterFlags(const std::vector<std::string>& args,
                                     const std::string& default_config) {
  PROPELLER_ASSIGN_OR_RETURN(
      daemon::LoadedOptions loaded,
      daemon::LoadOptions(MasterOptionSpecs(), args, default_config, /*allow_positional=*/false));
  MasterFlags flags;
  flags.help = loaded.help;
  if (flags.help) return flags;
  flags.config_file = loaded.config_file;
  for (const OptionValue& v : loaded.values) PROPELLER_RETURN_IF_ERROR(Apply(v, &flags));
  flags.values = std::move(loaded.values);
  const std::string in_file =
      flags.config_file.empty() ? "" : " (command line or " + flags.config_file + ")";
  if (flags.options.data_dir.empty()) {
    return Status::InvalidArgument("--data DIR is required" + in_file);
  }
  const std::string& listen = flags.options.listen;
  if (listen.rfind("tcp://", 0) != 0 && listen.rfind("ipc://", 0) != 0 &&
      listen.rfind("inproc://", 0) != 0) {
    return Status::InvalidArgument("--listen wants tcp://HOST:PORT or ipc://PATH, not '" +
                                   listen + "'");
  }
  if (flags.options.curve_key_file.empty() != flags.options.allow_file.empty()) {
    return Status::InvalidArgument("--curve-key and --allow go together" + in_file);
  }
  return flags;
}

std::string MasterHelp() {
  return "propeller-master: the Propeller master. It keeps the file -> ACG and ACG -> "
         "index-node\nmaps, the node table, the index catalogue and the volumes in an LMDB "
         "store, places new\nfiles on index nodes, and watches index-node heartbeats.\n"
         "\n"
         "Usage: propeller-master --data DIR [options]\n"
         "       propeller-master --config FILE [options]\n"
         "\n" +
         daemon::OptionHelp(MasterOptionSpecs()) +
         "\n"
         "Every option but --config and --help can also be set in the configuration file,\n"
         "one `name = value` line each without the dashes (data = \"/var/lib/propeller/master\",\n"
         "threads = 8, insecure = true); the command line wins. `propeller config check FILE`\n"
         "checks a file. Under systemd (Type=notify) it reports readiness once serving.\n"
         "\n"
         "Stops cleanly on SIGINT or SIGTERM; SIGHUP re-reads the configuration file and\n"
         "applies its log level (other changes need a restart and are logged as such).\n"
         "Exit codes: 0 clean stop, 1 runtime error, 2 usage error.\n"
         "\n"
         "Example:\n"
         "  propeller-master --data /var/lib/propeller/master --listen tcp://127.0.0.1:7470\n";
}

}  // namespace propeller::master
