// The master over the real transport: MasterServer with rpc::Channel + wire::WireCall, CURVE,
// bind failures, garbage on the socket; and the propeller-master binary itself (usage errors,
// SIGTERM, kill -9 and restart with every acknowledged mapping intact).
#include "master/master_server.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <thread>

#include "common/logging.h"
#include "common/random.h"
#include "master/master_test_util.h"
#include "schemas/wire_call.h"

namespace propeller::master {
namespace {

using testing::TempDir;
using wire::MsgType;

std::unique_ptr<rpc::Channel> Connect(const std::string& endpoint,
                                      std::optional<rpc::CurveKeys> keys = std::nullopt,
                                      const std::string& server_key = "") {
  rpc::ChannelOptions o;
  o.endpoint = endpoint;
  o.curve = std::move(keys);
  o.server_public_key = server_key;
  auto c = rpc::Channel::Connect(o);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? std::move(*c) : nullptr;
}

rpc::CallOptions Quick(int64_t timeout_ms = 2000) {
  rpc::CallOptions o;
  o.timeout_ms = timeout_ms;
  o.idempotent = true;
  o.retries = 0;
  return o;
}

// The cluster key of a test master on tcp:// (made by the master at its first start).
std::string KeyFile(const std::string& dir) { return dir + "/cluster.key"; }

MasterOptions Options(const std::string& dir, const std::string& listen = "tcp://127.0.0.1:0") {
  MasterOptions o;
  o.data_dir = dir;
  o.listen = listen;
  o.cluster_key_file = KeyFile(dir);
  o.sync = false;
  o.worker_threads = 2;
  return o;
}

TEST(MasterServerTest, ServesOverTcpWithWireCall) {
  TempDir dir;
  auto server = MasterServer::Start(Options(dir.path()));
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const std::string endpoint = (*server)->endpoint();
  EXPECT_NE(endpoint, "tcp://127.0.0.1:0");
  // The master made the cluster key at its first start, private to its user.
  auto key = rpc::ReadKeyFile(KeyFile(dir.path()));
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  auto ch = Connect(endpoint, *key, key->public_key);
  ASSERT_NE(ch, nullptr);

  wire::VolumeInfo vol;
  ASSERT_TRUE(wire::WireCall(*ch, MsgType::kRegisterVolume, wire::RegisterVolumeRequest{"/data"},
                             &vol).ok());
  wire::RegisterNodeReply reg;
  ASSERT_TRUE(wire::WireCall(*ch, MsgType::kRegisterNode,
                             wire::RegisterNodeRequest{0, "tcp://127.0.0.1:7471"}, &reg).ok());
  EXPECT_EQ(reg.node_id, 1u);
  wire::AssignFilesRequest assign;
  for (uint64_t i = 1; i <= 100; ++i) assign.items.push_back({FileId{vol.volume, i}, "cc", {}});
  wire::LocationsReply locs;
  ASSERT_TRUE(wire::WireCall(*ch, MsgType::kAssignFiles, assign, &locs).ok());
  ASSERT_EQ(locs.locations.size(), 100u);
  EXPECT_EQ(locs.locations[99].endpoint, "tcp://127.0.0.1:7471");
  wire::FilesRequest lookup{{FileId{vol.volume, 50}, FileId{vol.volume, 500}}};
  ASSERT_TRUE(wire::WireCall(*ch, MsgType::kLookupFiles, lookup, &locs).ok());
  EXPECT_EQ(locs.locations[0].acg, 1u);
  EXPECT_EQ(locs.locations[1].acg, 0u);

  // Errors come back as statuses: about the request as the master words them (the user
  // asked; which socket answered is noise), failures of the peer itself with its endpoint
  // in front (wire::RemoteError).
  wire::Empty empty;
  Status st = wire::WireCall(*ch, MsgType::kDropIndex, wire::IndexName{"nope"}, &empty);
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_EQ(st.message(), "no index named 'nope'");
  EXPECT_EQ(wire::RemoteError(Status::IOError("disk"), endpoint).message(), endpoint + ": disk");
  st = wire::WireCall(*ch, MsgType::kSearch, wire::SearchQuery{}, &empty);
  EXPECT_EQ(st.code(), StatusCode::kNotSupported);

  // Garbage frames get an error reply; everyone else keeps being served.
  Random rnd(5);
  for (int i = 0; i < 200; ++i) {
    std::string junk(rnd.Uniform(100), '\0');
    for (char& c : junk) c = static_cast<char>(rnd.Next());
    auto raw = ch->Call(junk, Quick());
    ASSERT_TRUE(raw.ok()) << raw.status().ToString();
    wire::ReplyEnvelope env;
    ASSERT_TRUE(wire::DecodeReply(*raw, &env).ok());
    EXPECT_FALSE(env.status.ok());
  }
  auto other = Connect(endpoint, *key, key->public_key);
  wire::ClusterStatusReply status;
  ASSERT_TRUE(wire::WireCall(*other, MsgType::kClusterStatus, empty, &status).ok());
  EXPECT_EQ(status.files, 100u);
  EXPECT_EQ(status.nodes.size(), 1u);
}

TEST(MasterServerTest, BindFailureIsAClearError) {
  TempDir a, b;
  auto first = MasterServer::Start(Options(a.path()));
  ASSERT_TRUE(first.ok());
  auto second = MasterServer::Start(Options(b.path(), (*first)->endpoint()));
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kIOError);
  EXPECT_NE(second.status().message().find("cannot bind " + (*first)->endpoint()),
            std::string::npos)
      << second.status().ToString();
  // The same data directory cannot serve twice either.
  auto third = MasterServer::Start(Options(a.path()));
  ASSERT_FALSE(third.ok());
  EXPECT_NE(third.status().message().find("in use"), std::string::npos);
  // Half a CURVE configuration is refused.
  MasterOptions o = Options(b.path());
  o.curve_key_file = "/nonexistent";
  EXPECT_EQ(MasterServer::Start(o).status().code(), StatusCode::kInvalidArgument);
}

TEST(MasterServerTest, CurveAdmitsOnlyAllowedKeys) {
  auto server_keys = rpc::GenerateCurveKeys();
  if (!server_keys.ok() && server_keys.status().code() == StatusCode::kNotSupported) {
    GTEST_SKIP() << "libzmq without CURVE";
  }
  ASSERT_TRUE(server_keys.ok());
  auto good = rpc::GenerateCurveKeys();
  auto bad = rpc::GenerateCurveKeys();
  ASSERT_TRUE(good.ok() && bad.ok());
  TempDir dir, keys;
  const std::string key_file = keys.path() + "/master.key";
  const std::string allow_file = keys.path() + "/allow";
  ASSERT_TRUE(rpc::WriteKeyFile(key_file, *server_keys).ok());
  ASSERT_TRUE(rpc::WriteKeyFile(allow_file, rpc::CurveKeys{good->public_key, ""}).ok());
  MasterOptions o = Options(dir.path());
  o.curve_key_file = key_file;
  o.allow_file = allow_file;
  auto server = MasterServer::Start(o);
  ASSERT_TRUE(server.ok()) << server.status().ToString();

  auto allowed = Connect((*server)->endpoint(), *good, server_keys->public_key);
  wire::Ping pong;
  ASSERT_TRUE(wire::WireCall(*allowed, MsgType::kPing, wire::Ping{"hi"}, &pong, Quick()).ok());
  EXPECT_EQ(pong.payload, "hi");
  auto denied = Connect((*server)->endpoint(), *bad, server_keys->public_key);
  Status st = wire::WireCall(*denied, MsgType::kPing, wire::Ping{"hi"}, &pong, Quick(500));
  EXPECT_FALSE(st.ok());
  auto plain = Connect((*server)->endpoint());
  st = wire::WireCall(*plain, MsgType::kPing, wire::Ping{"hi"}, &pong, Quick(500));
  EXPECT_FALSE(st.ok());
}

// ---- the binary ---------------------------------------------------------------------------

// Runs a shell command; returns (exit status, combined output).
std::pair<int, std::string> RunCommand(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return {-1, ""};
  char buf[512];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int status = ::pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// Starts propeller-master with `args`; stderr goes to `log`.
pid_t Spawn(const std::vector<std::string>& args, const std::string& log) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    FILE* f = std::freopen(log.c_str(), "a", stderr);
    (void)f;
    std::vector<char*> argv;
    std::string bin = PROPELLER_MASTER_BIN;
    argv.push_back(bin.data());
    std::vector<std::string> copy = args;
    for (std::string& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

// Pings until the daemon answers (or ~10 s pass).
bool WaitReady(rpc::Channel& ch) {
  for (int i = 0; i < 100; ++i) {
    wire::Ping pong;
    if (wire::WireCall(ch, MsgType::kPing, wire::Ping{"ready?"}, &pong, Quick(100)).ok()) {
      return true;
    }
  }
  return false;
}

TEST(MasterBinaryTest, UsageHelpAndErrors) {
  const std::string bin = PROPELLER_MASTER_BIN;
  auto [code, out] = RunCommand(bin + " --help");
  EXPECT_EQ(code, 0);
  for (const char* flag : {"--config", "--data", "--listen", "--curve-key", "--allow",
                           "--node-timeout-ms", "--acg-threshold", "--threads", "--log-level",
                           "Example"}) {
    EXPECT_NE(out.find(flag), std::string::npos) << flag;
  }
  std::tie(code, out) = RunCommand(bin);
  EXPECT_EQ(code, 2);
  EXPECT_EQ(out, "propeller-master: --data DIR is required (try --help)\n");
  std::tie(code, out) = RunCommand(bin + " --data /tmp/x --threads zero");
  EXPECT_EQ(code, 2);
  std::tie(code, out) = RunCommand(bin + " --data /tmp/x --bogus");
  EXPECT_EQ(code, 2);
  EXPECT_NE(out.find("unknown option '--bogus'"), std::string::npos) << out;
  // A --config file that is missing is a runtime error; one with a bad key a usage error
  // naming its line (tests/config_test.cc has the rest).
  std::tie(code, out) = RunCommand(bin + " --config /nonexistent/master.toml");
  EXPECT_EQ(code, 1) << out;
  {
    TempDir c;
    const std::string file = c.path() + "/master.toml";
    FILE* f = std::fopen(file.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("data = \"/tmp/x\"\nthreds = 2\n", f);
    std::fclose(f);
    std::tie(code, out) = RunCommand(bin + " --config " + file);
    EXPECT_EQ(code, 2);
    EXPECT_NE(out.find(file + ":2: unknown key 'threds' (did you mean 'threads'?)"),
              std::string::npos)
        << out;
  }
  std::tie(code, out) = RunCommand(bin + " --data /tmp/x --curve-key k");
  EXPECT_EQ(code, 2);
  std::tie(code, out) = RunCommand(bin + " --data /tmp/x --listen bogus");
  EXPECT_EQ(code, 2);

  // Bind failure: exit 1 with one line naming the endpoint.
  TempDir a, b;
  auto holder = MasterServer::Start(Options(a.path()));
  ASSERT_TRUE(holder.ok());
  std::tie(code, out) = RunCommand(bin + " --data " + b.path() + " --listen " +
                                   (*holder)->endpoint() + " --cluster-key " + KeyFile(a.path()));
  EXPECT_EQ(code, 1);
  EXPECT_EQ(out.rfind("propeller-master: cannot bind " + (*holder)->endpoint(), 0), 0u) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
}

TEST(MasterBinaryTest, SigkillLosesNoAcknowledgedMappingAndSigtermStopsCleanly) {
  SetLogLevel(LogLevel::kWarning);
  TempDir dir, run;
  const std::string endpoint = "ipc://" + run.path() + "/master.sock";
  const std::string log = run.path() + "/master.log";
  const std::vector<std::string> args = {"--data", dir.path() + "/m", "--listen", endpoint,
                                         "--node-timeout-ms", "60000"};
  auto ch = Connect(endpoint);
  ASSERT_NE(ch, nullptr);
  std::map<FileId, uint64_t> acknowledged;
  Random rnd(99);
  uint32_t volume = 0;
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const pid_t pid = Spawn(args, log);
    ASSERT_GT(pid, 0);
    ASSERT_TRUE(WaitReady(*ch)) << "the master did not come up; see " << log;
    // Everything acknowledged before is there (the client reconnected by itself).
    wire::FilesRequest lookup;
    for (const auto& [f, acg] : acknowledged) lookup.files.push_back(f);
    wire::LocationsReply locs;
    ASSERT_TRUE(wire::WireCall(*ch, MsgType::kLookupFiles, lookup, &locs, Quick(5000)).ok());
    for (size_t i = 0; i < lookup.files.size(); ++i) {
      ASSERT_EQ(locs.locations[i].acg, acknowledged[lookup.files[i]]) << "file " << i;
    }
    wire::VolumeInfo vol;
    ASSERT_TRUE(wire::WireCall(*ch, MsgType::kRegisterVolume, wire::RegisterVolumeRequest{"/v"},
                               &vol).ok());
    volume = vol.volume;
    wire::RegisterNodeReply reg;
    // A new node the first time, the same node (id 1) after each restart.
    ASSERT_TRUE(wire::WireCall(*ch, MsgType::kRegisterNode,
                               wire::RegisterNodeRequest{round == 0 ? 0u : 1u,
                                                         "tcp://127.0.0.1:7471"},
                               &reg).ok());
    EXPECT_EQ(reg.node_id, 1u);
    const int batches = 5 + static_cast<int>(rnd.Uniform(20));
    for (int b = 0; b < batches; ++b) {
      wire::AssignFilesRequest req;
      for (int i = 0; i < 20; ++i) {
        req.items.push_back({FileId{volume, rnd.Next() >> 24}, "app" + std::to_string(b % 3), {}});
      }
      ASSERT_TRUE(wire::WireCall(*ch, MsgType::kAssignFiles, req, &locs).ok());
      for (const auto& loc : locs.locations) acknowledged[loc.file] = loc.acg;
    }
    if (round < 2) {
      ::kill(pid, SIGKILL);
      int status = 0;
      ASSERT_EQ(::waitpid(pid, &status, 0), pid);
      ASSERT_TRUE(WIFSIGNALED(status));
    } else {
      ::kill(pid, SIGTERM);
      int status = 0;
      ASSERT_EQ(::waitpid(pid, &status, 0), pid);
      ASSERT_TRUE(WIFEXITED(status));
      EXPECT_EQ(WEXITSTATUS(status), 0);
    }
  }
  // Finally open the store directly: it is consistent and holds every acknowledged mapping.
  MasterConfig c;
  c.data_dir = dir.path() + "/m";
  auto m = Master::Open(c);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto dump = (*m)->store().Dump();
  ASSERT_TRUE(dump.ok()) << dump.status().ToString();
  for (const auto& [f, acg] : acknowledged) {
    auto it = dump->files.find(f);
    ASSERT_NE(it, dump->files.end());
    EXPECT_EQ(it->second, acg);
  }
  EXPECT_EQ(dump->files.size(), acknowledged.size());  // nothing else was ever assigned
}

}  // namespace
}  // namespace propeller::master
