// Configuration files of propeller-master, propeller-indexnode and `propeller mount`
// (common/daemon/config_file.h): every option of each program's table is settable from a
// file and does there what it does on the command line (the cases come from the tables, so a
// new option is tested without touching this file), the command line wins, errors name the
// file and line, `propeller config check` exits 0/1/2, and the example files of deploy/config
// list every key and pass the check.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "client/cli/mount_options.h"
#include "common/temp_dir.h"
#include "indexnode/server/indexnode_flags.h"
#include "master/master_flags.h"

namespace propeller {
namespace {

using daemon::OptionKind;
using daemon::OptionScope;
using daemon::OptionSpec;

// One program: its table, what it requires, and its parser reduced to a fingerprint of every
// setting (so two parses compare equal exactly when they configure the program the same way).
struct Program {
  std::string name;
  const std::vector<OptionSpec>* specs;
  std::map<std::string, std::string> required;  // key -> TOML value
  std::map<std::string, std::vector<std::string>> companions;  // option -> options it needs
  std::function<Result<std::string>(const std::vector<std::string>& args)> parse;
};

std::string Fingerprint(const master::MasterFlags& f) {
  const master::MasterOptions& o = f.options;
  std::ostringstream s;
  s << o.data_dir << '|' << o.listen << '|' << o.cluster_key_file << '|' << o.curve_key_file
    << '|' << o.allow_file << '|' << o.insecure << '|' << o.node_timeout_ms << '|'
    << o.acg_threshold << '|' << o.merge_after_ms << '|' << o.move_split_halves << '|'
    << o.worker_threads << '|' << static_cast<int>(f.log_level) << '|' << f.metrics_listen;
  return s.str();
}

std::string Fingerprint(const IndexNodeFlags& f) {
  const IndexNodeOptions& o = f.options;
  std::ostringstream s;
  s << o.data_dir << '|' << o.master_endpoint << '|' << o.listen_endpoint << '|'
    << o.advertised_endpoint << '|' << static_cast<int>(o.durability) << '|'
    << o.cluster_key_file << '|' << o.curve_key_file << '|' << o.allow_file << '|'
    << o.master_key_file << '|' << o.insecure << '|' << o.worker_threads << '|'
    << o.engine.split_threshold_files << '|' << static_cast<int>(f.log_level) << '|'
    << f.metrics_listen;
  return s.str();
}

std::string Fingerprint(const cli::MountFlags& f) {
  std::ostringstream s;
  s << f.backing << '|' << f.mountpoint << '|' << f.data << '|' << static_cast<int>(f.durability)
    << '|' << f.cache_timeout_s << '|' << f.threads << '|' << f.poll_us << '|' << f.dir_cache
    << '|' << f.index_timeout_ms << '|' << f.search_wait_ms << '|' << f.ready_file << '|'
    << static_cast<int>(f.log_level) << '|' << f.metrics_listen << '|' << f.writeback
    << f.passthrough << f.import
    << f.reconcile << f.capture << f.allow_other << f.debug << '|' << f.client.master_endpoint
    << '|' << f.client.timeout_ms << '|' << f.client.cluster_key_file << '|'
    << f.client.curve_key_file << '|' << f.client.server_key_file << '|' << f.client.insecure;
  return s.str();
}

template <typename Flags>
Result<std::string> FingerprintOf(Result<Flags> r) {
  if (!r.ok()) return r.status();
  return Fingerprint(*r);
}

std::vector<Program> Programs() {
  return {
      {"master", &master::MasterOptionSpecs(), {{"data", "\"/base\""}},
       {{"curve-key", {"allow"}}, {"allow", {"curve-key"}}},
       [](const std::vector<std::string>& a) {
         return FingerprintOf(master::ParseMasterFlags(a, ""));
       }},
      {"indexnode", &IndexNodeOptionSpecs(), {{"data", "\"/base\""}},
       {{"curve-key", {"allow"}}, {"master-key", {"curve-key", "allow"}}},
       [](const std::vector<std::string>& a) {
         return FingerprintOf(ParseIndexNodeFlags(a, ""));
       }},
      {"mount", &cli::MountOptionSpecs(),
       {{"backing", "\"/base/b\""}, {"mountpoint", "\"/base/m\""}},
       {},
       [](const std::vector<std::string>& a) {
         return FingerprintOf(cli::ParseMountFlags(ClientOptions(), {}, a));
       }},
  };
}

// The TOML value of an option's example.
std::string TomlValue(const OptionSpec& s) {
  switch (s.kind) {
    case OptionKind::kFlag: return "true";
    case OptionKind::kString: return "\"" + std::string(s.example) + "\"";
    default: return std::string(s.example);
  }
}

class ConfigTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = dir_.path() + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  testing::TempDir dir_;
};

// Every option a file may set, one at a time: the file's value configures the program as the
// same value on the command line does, and differently from leaving it out.
TEST_F(ConfigTest, EveryOptionOfEveryProgramIsSettableFromAFile) {
  for (const Program& p : Programs()) {
    size_t tested = 0;
    for (const OptionSpec& spec : *p.specs) {
      if (spec.scope == OptionScope::kCommandLineOnly) continue;
      const std::string name(spec.name);
      SCOPED_TRACE(p.name + ": " + name);
      ASSERT_TRUE(spec.kind == OptionKind::kFlag || !spec.example.empty())
          << "the table gives no example value to test with";
      // The file: the required keys, the option's companions, then the option.
      std::string base;
      for (const auto& [k, v] : p.required) {
        if (k != name) base += k + " = " + v + "\n";
      }
      auto companions = p.companions.find(name);
      for (const std::string& c : companions == p.companions.end() ? std::vector<std::string>() : companions->second) {
        const OptionSpec* cs = daemon::FindOption(*p.specs, c);
        base += c + " = " + TomlValue(*cs) + "\n";
      }
      const std::string with = Write(p.name + "-with.toml", base + name + " = " +
                                                                 TomlValue(spec) + "\n");
      const std::string without = Write(p.name + "-without.toml", base);
      Result<std::string> from_file = p.parse({"--config", with});
      ASSERT_TRUE(from_file.ok()) << from_file.status().ToString();
      if (Result<std::string> left_out = p.parse({"--config", without}); left_out.ok()) {
        EXPECT_NE(*from_file, *left_out) << "the option changed nothing";
      }
      if (spec.scope == OptionScope::kEverywhere) {
        std::vector<std::string> args = {"--config", without, "--" + name};
        if (spec.kind != OptionKind::kFlag) args.push_back(std::string(spec.example));
        Result<std::string> from_line = p.parse(args);
        ASSERT_TRUE(from_line.ok()) << from_line.status().ToString();
        EXPECT_EQ(*from_file, *from_line);
      }
      ++tested;
    }
    EXPECT_GE(tested, 10u) << p.name;
  }
}

TEST_F(ConfigTest, TheCommandLineWins) {
  const std::string file = Write("master.toml", "data = \"/file\"\nthreads = 2\n");
  auto f = master::ParseMasterFlags({"--config", file, "--threads", "3"}, "");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->options.worker_threads, 3);
  EXPECT_EQ(f->options.data_dir, "/file");
  EXPECT_EQ(f->config_file, file);
  // A mount's global options from the command line win over the file's.
  const std::string mount = Write("mount.toml",
                                  "backing = \"/b\"\nmountpoint = \"/m\"\n"
                                  "master = \"tcp://file:1\"\ntimeout-ms = 7\n");
  ClientOptions global;
  global.master_endpoint = "tcp://line:1";
  auto m = cli::ParseMountFlags(global, {"master"}, {"--config", mount, "/b2", "/m2"});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->client.master_endpoint, "tcp://line:1");
  EXPECT_EQ(m->client.timeout_ms, 7);
  EXPECT_EQ(m->backing, "/b2");
  EXPECT_EQ(m->mountpoint, "/m2");
}

TEST_F(ConfigTest, ErrorsNameTheFileAndLine) {
  const std::string bad_key = Write("master.toml", "data = \"/d\"\n\ndta = \"/x\"\n");
  EXPECT_EQ(master::ParseMasterFlags({"--config", bad_key}, "").status().message(),
            bad_key + ":3: unknown key 'dta' (did you mean 'data'?)");
  const std::string bad_type = Write("indexnode.toml", "data = \"/d\"\nthreads = \"4\"\n");
  EXPECT_EQ(ParseIndexNodeFlags({"--config", bad_type}, "").status().message(),
            bad_type + ":2: threads wants a whole number, not a string");
  const std::string bad_value = Write("indexnode2.toml", "data = \"/d\"\nthreads = 0\n");
  EXPECT_EQ(ParseIndexNodeFlags({"--config", bad_value}, "").status().message(),
            bad_value + ":2: threads wants a whole number from 1 to 256, not '0'");
  const std::string bad_level = Write("mount.toml", "backing = \"/b\"\nmountpoint = \"/m\"\n"
                                                    "log-level = \"loud\"\n");
  EXPECT_EQ(cli::ParseMountFlags({}, {}, {"--config", bad_level}).status().message(),
            bad_level + ":3: log-level wants debug, info, warning or error, not 'loud'");
  // Fault-test hooks stay out of files.
  const std::string hook = Write("master2.toml", "data = \"/d\"\ntest-exit-after-move = true\n");
  EXPECT_EQ(master::ParseMasterFlags({"--config", hook}, "").status().message(),
            hook + ":2: 'test-exit-after-move' is a command-line option and cannot be set in a "
                   "file");
  // A missing --config file is an error; a missing default file is not.
  EXPECT_TRUE(master::ParseMasterFlags({"--config", dir_.path() + "/none.toml"}, "")
                  .status()
                  .IsNotFound());
  EXPECT_TRUE(master::ParseMasterFlags({"--data", "/d"}, dir_.path() + "/none.toml").ok());
}

struct CliRun {
  int code = -1;
  std::string output;  // stdout and stderr
};

CliRun RunCli(const std::string& args) {
  CliRun r;
  FILE* p = ::popen((std::string(PROPELLER_CLI_BIN) + " " + args + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) r.output.append(buf, n);
  const int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

TEST_F(ConfigTest, ConfigCheckExitCodesAndMessages) {
  const std::string good = Write("indexnode-a.toml", "data = \"/d\"\nthreads = 8\n");
  CliRun r = RunCli("config check " + good);
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output, good + ": a valid configuration of propeller-indexnode (2 options)\n");
  const std::string bad = Write("master.toml", "data = \"/d\"\nnode-timeout-ms = -5\n");
  r = RunCli("config check " + bad);
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.output, "propeller: " + bad +
                          ":2: node-timeout-ms wants a whole number from 1 to 86400000, not "
                          "'-5'\n");
  const std::string missing_data = Write("master-b.toml", "threads = 2\n");
  r = RunCli("config check " + missing_data);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("--data DIR is required"), std::string::npos) << r.output;
  // The name does not tell the program: --for does.
  const std::string other = Write("cluster.toml", "backing = \"/b\"\nmountpoint = \"/m\"\n");
  r = RunCli("config check " + other);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("add --for master"), std::string::npos) << r.output;
  EXPECT_EQ(RunCli("config check " + other + " --for mount").code, 0);
  EXPECT_EQ(RunCli("config check " + other + " --for master").code, 1);
  EXPECT_EQ(RunCli("config check " + other + " --for nothing").code, 2);
  r = RunCli("config check " + dir_.path() + "/none.toml --for master");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("does not exist"), std::string::npos) << r.output;
  EXPECT_EQ(RunCli("config").code, 2);
  EXPECT_EQ(RunCli("config --help").code, 0);
}

// deploy/config/*.toml list every key a file may set (commented out with its default, or set)
// and pass the check as they are.
TEST_F(ConfigTest, ExampleFilesListEveryKeyAndAreValid) {
  for (const Program& p : Programs()) {
    const std::string path = std::string(PROPELLER_EXAMPLE_CONFIG_DIR) + "/" + p.name + ".toml";
    std::ifstream in(path);
    ASSERT_TRUE(in) << path;
    std::stringstream text;
    text << in.rdbuf();
    for (const OptionSpec& spec : *p.specs) {
      if (spec.scope == OptionScope::kCommandLineOnly) continue;
      const std::string key(spec.name);
      const bool listed = text.str().find("\n" + key + " = ") != std::string::npos ||
                          text.str().find("\n# " + key + " = ") != std::string::npos;
      EXPECT_TRUE(listed) << path << " does not list " << key;
    }
    CliRun r = RunCli("config check " + path + " --for " + p.name);
    EXPECT_EQ(r.code, 0) << r.output;
  }
}

}  // namespace
}  // namespace propeller
