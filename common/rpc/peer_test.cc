// What the transport proves about a peer, and the keys that make tcp:// prove anything
// (docs/security.md): the transport every request reports, the in-process-only extra
// endpoints, unix socket files (a live one is never taken over, its mode lets users connect),
// and ResolveLinkSecurity's choices for the cluster key, per-member keys and --insecure.
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>

#include "common/rpc/rpc.h"

namespace propeller::rpc {
namespace {

namespace fs = std::filesystem;

class PeerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = "/tmp/propeller-peer-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // The transport a request to a server on `endpoint` reported.
  PeerInfo PeerSeenOn(const std::string& endpoint, const ChannelOptions* link = nullptr,
                      const ServerOptions* base = nullptr) {
    ServerOptions so = base ? *base : ServerOptions{};
    so.endpoint = endpoint;
    std::mutex mu;
    PeerInfo seen;
    seen.transport = PeerTransport::kInProcess;
    auto server = Server::Start(so, [&](std::string_view, const PeerInfo& p, ReplyStream&) {
      std::lock_guard<std::mutex> lock(mu);
      seen = p;
      return std::string("ok");
    });
    EXPECT_TRUE(server.ok()) << server.status().ToString();
    if (!server.ok()) return seen;
    ChannelOptions co = link ? *link : ChannelOptions{};
    co.endpoint = (*server)->endpoint();
    auto channel = Channel::Connect(co);
    EXPECT_TRUE(channel.ok());
    CallOptions call;
    call.timeout_ms = 3000;
    EXPECT_TRUE((*channel)->Call("who", call).ok());
    std::lock_guard<std::mutex> lock(mu);
    return seen;
  }

  std::string dir_;
};

TEST_F(PeerTest, EveryRequestSaysHowItCame) {
  EXPECT_EQ(PeerSeenOn("inproc://peer-test").transport, PeerTransport::kInProcess);
  const PeerInfo ipc = PeerSeenOn("ipc://" + dir_ + "/s.sock");
  EXPECT_EQ(ipc.transport, PeerTransport::kIpc);
  EXPECT_EQ(ipc.uid, static_cast<uint32_t>(::getuid()));
  const PeerInfo tcp = PeerSeenOn("tcp://127.0.0.1:0");
  EXPECT_EQ(tcp.transport, PeerTransport::kTcp);
  EXPECT_FALSE(tcp.uid.has_value());
  EXPECT_TRUE(tcp.curve_public_key.empty());
  // With CURVE the admitted key names the peer.
  auto server_keys = GenerateCurveKeys();
  auto client_keys = GenerateCurveKeys();
  ASSERT_TRUE(server_keys.ok() && client_keys.ok());
  ServerOptions so;
  so.curve = *server_keys;
  so.allowed_clients = {client_keys->public_key};
  ChannelOptions co;
  co.curve = *client_keys;
  co.server_public_key = server_keys->public_key;
  const PeerInfo curve = PeerSeenOn("tcp://127.0.0.1:0", &co, &so);
  EXPECT_EQ(curve.transport, PeerTransport::kTcp);
  EXPECT_EQ(curve.curve_public_key, client_keys->public_key);
}

TEST_F(PeerTest, ExtraEndpointsAreInProcessOnly) {
  for (const std::string& extra : {std::string("tcp://127.0.0.1:0"), "ipc://" + dir_ + "/x.sock",
                                   std::string("inproc://alias")}) {
    ServerOptions so;
    so.endpoint = "ipc://" + dir_ + "/main.sock";
    so.extra_endpoints = {extra};
    auto server = Server::Start(so, [](std::string_view, const PeerInfo&, ReplyStream&) {
      return std::string();
    });
    EXPECT_EQ(server.status().code(), StatusCode::kInvalidArgument) << extra;
  }
  // A direct:// alias reports an in-process peer, even next to a unix socket.
  ServerOptions so;
  so.endpoint = "ipc://" + dir_ + "/main.sock";
  so.extra_endpoints = {"direct://peer-test-alias"};
  std::atomic<int> transport{-1};
  auto server = Server::Start(so, [&](std::string_view, const PeerInfo& p, ReplyStream&) {
    transport = static_cast<int>(p.transport);
    return std::string("ok");
  });
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  auto channel = Channel::Connect({.endpoint = "direct://peer-test-alias"});
  ASSERT_TRUE(channel.ok());
  ASSERT_TRUE((*channel)->Call("x").ok());
  EXPECT_EQ(transport.load(), static_cast<int>(PeerTransport::kInProcess));
}

TEST_F(PeerTest, UnixSocketFilesAreNeverTakenOver) {
  const std::string path = dir_ + "/s.sock";
  auto handler = [](std::string_view, const PeerInfo&, ReplyStream&) { return std::string(); };
  ServerOptions so;
  so.endpoint = "ipc://" + path;
  {
    auto first = Server::Start(so, handler);
    ASSERT_TRUE(first.ok());
    struct stat st;
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0666u);  // every local user may connect and be named
    auto second = Server::Start(so, handler);
    ASSERT_FALSE(second.ok());
    EXPECT_NE(second.status().message().find("another process serves there"), std::string::npos)
        << second.status().ToString();
    ASSERT_EQ(::stat(path.c_str(), &st), 0);  // the first one's socket is still there
  }
  // A socket left by a crash is replaced.
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strcpy(addr.sun_path, path.c_str());
  ::unlink(path.c_str());
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ::close(fd);  // bound, never listening: stale
  so.ipc_socket_mode = 0600;
  {
    auto again = Server::Start(so, handler);
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    struct stat st;
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
  }
  // Anything else at the path is left alone.
  const std::string target = dir_ + "/precious";
  std::ofstream(target) << "keep";
  ::unlink(path.c_str());
  ASSERT_EQ(::symlink(target.c_str(), path.c_str()), 0);
  auto refused = Server::Start(so, handler);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("is not a socket"), std::string::npos);
  EXPECT_TRUE(fs::is_symlink(path));
  EXPECT_TRUE(fs::exists(target));
}

TEST_F(PeerTest, LinkSecurityResolution) {
  LinkSecurityOptions lo;
  lo.cluster_key_file = dir_ + "/keys/cluster.key";
  // Nothing on tcp://: nothing needed.
  auto none = ResolveLinkSecurity(lo, false, false, false);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->keys.has_value());
  // A missing cluster key is an error with what to do, unless a master may make it.
  auto missing = ResolveLinkSecurity(lo, true, false, false);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("--insecure"), std::string::npos);
  EXPECT_FALSE(fs::exists(lo.cluster_key_file));
  auto made = ResolveLinkSecurity(lo, true, false, true);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  EXPECT_TRUE(made->created);
  struct stat st;
  ASSERT_EQ(::stat(lo.cluster_key_file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat((dir_ + "/keys").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  auto again = ResolveLinkSecurity(lo, true, true, true);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->keys->public_key, made->keys->public_key);
  EXPECT_EQ(again->server_public_key, made->keys->public_key);
  EXPECT_EQ(again->allowed, std::vector<std::string>{made->keys->public_key});
  // Applied to tcp:// only: unix sockets name their peers by the kernel.
  ServerOptions so;
  so.endpoint = "ipc://" + dir_ + "/x.sock";
  again->Apply(&so);
  EXPECT_FALSE(so.curve.has_value());
  so.endpoint = "tcp://127.0.0.1:0";
  again->Apply(&so);
  EXPECT_TRUE(so.curve.has_value());
  ChannelOptions co;
  co.endpoint = "tcp://127.0.0.1:1";
  again->Apply(&co);
  EXPECT_EQ(co.server_public_key, made->keys->public_key);
  // A key others may read is refused, as ssh refuses such private keys.
  ASSERT_EQ(::chmod(lo.cluster_key_file.c_str(), 0644), 0);
  EXPECT_EQ(ResolveLinkSecurity(lo, true, false, true).status().code(),
            StatusCode::kInvalidArgument);
  ASSERT_EQ(::chmod(lo.cluster_key_file.c_str(), 0600), 0);
  // --insecure is explicit and excludes keys.
  LinkSecurityOptions insecure;
  insecure.insecure = true;
  auto plain = ResolveLinkSecurity(insecure, true, true, true);
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE(plain->insecure);
  EXPECT_FALSE(plain->keys.has_value());
  insecure.cluster_key_file = lo.cluster_key_file;
  EXPECT_EQ(ResolveLinkSecurity(insecure, true, false, false).status().code(),
            StatusCode::kInvalidArgument);
  // Per-member keys: a server needs an allowlist, a client the server's key.
  LinkSecurityOptions member;
  member.curve_key_file = lo.cluster_key_file;
  EXPECT_EQ(ResolveLinkSecurity(member, true, false, false).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ResolveLinkSecurity(member, false, true, false).status().code(),
            StatusCode::kInvalidArgument);
  member.allow_file = lo.cluster_key_file;
  member.server_key_file = lo.cluster_key_file;
  auto own = ResolveLinkSecurity(member, true, true, false);
  ASSERT_TRUE(own.ok()) << own.status().ToString();
  EXPECT_EQ(own->cluster_key_file, "");
}

}  // namespace
}  // namespace propeller::rpc
