#include "indexnode/server/indexnode_flags.h"

#include "common/daemon/metrics_server.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <memory>

namespace propeller {

using daemon::OptionKind;
using daemon::OptionScope;
using daemon::OptionSpec;
using daemon::OptionValue;

namespace {

constexpr char kDefaultMaster[] = "tcp://127.0.0.1:7470";

}  // namespace

const std::vector<OptionSpec>& IndexNodeOptionSpecs() {
  static const std::vector<OptionSpec> specs = {
      {.name = "config", .kind = OptionKind::kString, .value_name = "FILE",
       .help = "read options from this TOML file first (default /etc/propeller/indexnode.toml "
               "when it exists); options given here win over the file's",
       .example = "/etc/propeller/indexnode-a.toml", .scope = OptionScope::kCommandLineOnly},
      {.name = "data", .kind = OptionKind::kString, .value_name = "DIR",
       .help = "data directory (required; created if missing)",
       .example = "/var/lib/propeller/indexnode-a"},
      {.name = "master", .kind = OptionKind::kString, .value_name = "ENDPOINT",
       .help = "the master (default tcp://127.0.0.1:7470)", .example = "tcp://10.0.0.1:7470"},
      {.name = "listen", .kind = OptionKind::kString, .value_name = "ENDPOINT",
       .help = "where to serve (default tcp://127.0.0.1:7471; port 0 = any free port)",
       .example = "tcp://0.0.0.0:7471"},
      {.name = "advertise", .kind = OptionKind::kString, .value_name = "ENDPOINT",
       .help = "what the master tells clients (default: the bound endpoint; set it when "
               "listening on 0.0.0.0)",
       .example = "tcp://10.0.0.2:7471"},
      {.name = "durability", .kind = OptionKind::kString, .value_name = "LEVEL",
       .help = "default (fsync every 10 ms) or sync (fsync before acknowledging)",
       .example = "sync"},
      {.name = "cluster-key", .kind = OptionKind::kString, .value_name = "FILE",
       .help = "the cluster's key pair, copied from the master's host (it makes one at its "
               "first start): tcp:// links are CURVE-authenticated with it (default "
               "$PROPELLER_CLUSTER_KEY, else /etc/propeller/cluster.key for root)",
       .example = "/etc/propeller/cluster.key"},
      {.name = "curve-key", .kind = OptionKind::kString, .value_name = "FILE",
       .help = "instead of the cluster key: this node's own key pair (needs --allow to serve "
               "tcp://, --master-key to dial a tcp:// master)",
       .example = "/etc/propeller/server.key"},
      {.name = "allow", .kind = OptionKind::kString, .value_name = "FILE",
       .help = "more public keys to admit; with --curve-key, all of them: list the index "
               "nodes' shared key too, so that other nodes may move ACGs here",
       .example = "/etc/propeller/node.allow"},
      {.name = "master-key", .kind = OptionKind::kString, .value_name = "FILE",
       .help = "the master's public key (with --curve-key)",
       .example = "/etc/propeller/server.pub"},
      {.name = "insecure", .kind = OptionKind::kFlag,
       .help = "tcp:// without authentication: anyone who reaches the port may read and "
               "change this node's index. Tests only"},
      {.name = "threads", .kind = OptionKind::kInteger, .value_name = "N",
       .help = "request handler threads (default 4)", .example = "8"},
      {.name = "split-threshold", .kind = OptionKind::kInteger, .value_name = "N",
       .help = "split an ACG in two (METIS) once it holds more than N files (default 50000; "
               "0 = never). The master names the new half.",
       .example = "0"},
      daemon::MetricsListenOption(),
      daemon::LogLevelOption(),
      // Fault tests only (not in --help or files): at step N (1-5) of its first split the
      // splitter creates <data>/split-hold and waits until it is removed, so a test can kill
      // this node or the master at that point (EngineOptions::split_step_hook).
      {.name = "test-hold-in-split", .kind = OptionKind::kInteger,
       .scope = OptionScope::kCommandLineOnly},
      // Fault tests only: the first time a migration reaches step N (1-5,
      // NodeServiceOptions::migrate_step_hook) the node creates <data>/migrate-hold and waits
      // until it is removed.
      {.name = "test-hold-in-migrate", .kind = OptionKind::kInteger,
       .scope = OptionScope::kCommandLineOnly},
      // Fault tests only: IndexNodeOptions::release_wait_ms.
      {.name = "test-release-wait-ms", .kind = OptionKind::kInteger,
       .scope = OptionScope::kCommandLineOnly},
      daemon::HelpOption(),
  };
  return specs;
}

namespace {

// A hook that, the first time `step` comes, creates `hold` and waits until it is removed.
std::function<void(int)> HoldAt(int wanted, std::string hold) {
  auto held = std::make_shared<std::atomic<bool>>(false);
  return [wanted, hold = std::move(hold), held](int step) {
    if (step != wanted || held->exchange(true)) return;
    if (FILE* f = std::fopen(hold.c_str(), "w")) std::fclose(f);
    while (::access(hold.c_str(), F_OK) == 0) ::usleep(10'000);
  };
}

struct TestHooks {
  int hold_in_split = 0;
  int hold_in_migrate = 0;
};

Status Apply(const OptionValue& v, IndexNodeFlags* flags, TestHooks* hooks) {
  IndexNodeOptions& o = flags->options;
  const std::string what = v.Describe();
  if (daemon::FindOption(IndexNodeOptionSpecs(), v.name)->kind != OptionKind::kFlag &&
      v.value.empty()) {
    return Status::InvalidArgument(what + " needs a non-empty value");
  }
  PROPELLER_ASSIGN_OR_RETURN(const bool shared, daemon::ApplySharedOption(
                                                 v, {&flags->metrics_listen, &flags->log_level}));
  if (shared) return Status::OK();
  if (v.name == "data") {
    o.data_dir = v.value;
  } else if (v.name == "master") {
    o.master_endpoint = v.value;
  } else if (v.name == "listen") {
    o.listen_endpoint = v.value;
  } else if (v.name == "advertise") {
    o.advertised_endpoint = v.value;
  } else if (v.name == "durability") {
    if (v.value == "default") {
      o.durability = Durability::kDefault;
    } else if (v.value == "sync") {
      o.durability = Durability::kSync;
    } else {
      return Status::InvalidArgument(what + " must be 'default' or 'sync', not '" + v.value +
                                     "'");
    }
  } else if (v.name == "cluster-key") {
    o.cluster_key_file = v.value;
  } else if (v.name == "curve-key") {
    o.curve_key_file = v.value;
  } else if (v.name == "allow") {
    o.allow_file = v.value;
  } else if (v.name == "master-key") {
    o.master_key_file = v.value;
  } else if (v.name == "insecure") {
    o.insecure = true;
  } else if (v.name == "threads") {
    PROPELLER_ASSIGN_OR_RETURN(const long long n, daemon::ParseIntOption(what, v.value, 1, 256));
    o.worker_threads = static_cast<int>(n);
  } else if (v.name == "split-threshold") {
    PROPELLER_ASSIGN_OR_RETURN(const long long n,
                               daemon::ParseIntOption(what, v.value, 0, 1LL << 62));
    o.engine.split_threshold_files = static_cast<uint64_t>(n);
  } else if (v.name == "test-hold-in-split") {
    PROPELLER_ASSIGN_OR_RETURN(const long long n, daemon::ParseIntOption(what, v.value, 1, 5));
    hooks->hold_in_split = static_cast<int>(n);
  } else if (v.name == "test-hold-in-migrate") {
    PROPELLER_ASSIGN_OR_RETURN(const long long n, daemon::ParseIntOption(what, v.value, 1, 5));
    hooks->hold_in_migrate = static_cast<int>(n);
  } else if (v.name == "test-release-wait-ms") {
    PROPELLER_ASSIGN_OR_RETURN(o.release_wait_ms,
                               daemon::ParseIntOption(what, v.value, 0, 1LL << 40));
  } else {
    return Status::Internal("option --" + v.name + " has no handler");
  }
  return Status::OK();
}

}  // namespace

Result<IndexNodeFlags> ParseIndexNodeFlags(const std::vector<std::string>& args,
                                           const std::string& default_config) {
  PROPELLER_ASSIGN_OR_RETURN(daemon::LoadedOptions loaded,
                             daemon::LoadOptions(IndexNodeOptionSpecs(), args, default_config,
                                                 /*allow_positional=*/false));
  IndexNodeFlags flags;
  flags.help = loaded.help;
  if (flags.help) return flags;
  flags.config_file = loaded.config_file;
  flags.options.master_endpoint = kDefaultMaster;
  TestHooks hooks;
  for (const OptionValue& v : loaded.values) PROPELLER_RETURN_IF_ERROR(Apply(v, &flags, &hooks));
  flags.values = std::move(loaded.values);
  const IndexNodeOptions& o = flags.options;
  const std::string in_file =
      flags.config_file.empty() ? "" : " (command line or " + flags.config_file + ")";
  if (o.data_dir.empty()) return Status::InvalidArgument("--data DIR is required" + in_file);
  if (!o.curve_key_file.empty() && o.allow_file.empty()) {
    return Status::InvalidArgument("--curve-key needs --allow FILE (the client keys to admit)" +
                                   in_file);
  }
  if (!o.master_key_file.empty() && o.curve_key_file.empty()) {
    return Status::InvalidArgument("--master-key needs --curve-key FILE (this node's key pair)" +
                                   in_file);
  }
  // The hooks name files in the data directory, known only once every option is read.
  if (hooks.hold_in_split != 0) {
    flags.options.engine.split_step_hook = HoldAt(hooks.hold_in_split, o.data_dir + "/split-hold");
  }
  if (hooks.hold_in_migrate != 0) {
    flags.options.migrate_step_hook =
        HoldAt(hooks.hold_in_migrate, o.data_dir + "/migrate-hold");
  }
  return flags;
}

std::string IndexNodeHelp() {
  return "usage: propeller-indexnode --data DIR [OPTIONS]\n"
         "       propeller-indexnode --config FILE [OPTIONS]\n"
         "\n"
         "Propeller index node: holds ACG partitions of the file-metadata index, applies "
         "file-indexing\nupdates and answers searches for them. Registers with the master and "
         "heartbeats; runs until\nSIGINT or SIGTERM, then commits, syncs and exits. SIGHUP "
         "re-reads the configuration file and\napplies its log level (other changes need a "
         "restart and are logged as such).\n"
         "\n"
         "Options:\n" +
         daemon::OptionHelp(IndexNodeOptionSpecs()) +
         "\n"
         "Every option but --config and --help can also be set in the configuration file, one\n"
         "`name = value` line each without the dashes (data = \"/var/lib/propeller/node1\",\n"
         "threads = 8, insecure = true); the command line wins. `propeller config check FILE`\n"
         "checks a file. Under systemd (Type=notify) it reports readiness once listening.\n"
         "\n"
         "Example:\n"
         "  propeller-indexnode --data /var/lib/propeller/node1 --master tcp://10.0.0.1:7470 \\\n"
         "      --listen tcp://0.0.0.0:7471 --advertise tcp://10.0.0.2:7471\n"
         "\n"
         "Exit codes: 0 clean stop, 1 runtime error, 2 bad usage.\n";
}

}  // namespace propeller
