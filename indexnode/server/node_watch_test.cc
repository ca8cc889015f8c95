// kWatch on an index node (node_watch.cc): the registration frame, events in order, heartbeats,
// the end when the client goes, the admission limits, credentials from the transport, and bad
// requests.
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/temp_dir.h"
#include "indexnode/engine.h"
#include "indexnode/server/fake_master.h"
#include "indexnode/server/node_service.h"
#include "schemas/watch_messages.h"

namespace propeller {
namespace {

using testing::FakeMaster;
using testing::TempDir;

// A reply stream that hands each frame to `on_frame`; its answer is Send's.
class FnStream : public rpc::ReplyStream {
 public:
  explicit FnStream(std::function<bool(std::string_view)> fn) : fn_(std::move(fn)) {}
  bool Send(std::string_view chunk) override { return fn_(chunk); }

 private:
  std::function<bool(std::string_view)> fn_;
};

Update Put(uint64_t ino, const std::string& path, uint64_t size, uint32_t mode = 0100644) {
  Update u;
  u.acg = 1;
  u.record.id = FileId{1, ino};
  u.record.paths = {path};
  u.record.size = size;
  u.record.mode = mode;
  u.record.type = (mode & S_IFMT) == S_IFDIR ? FileType::kDirectory : FileType::kRegular;
  return u;
}

rpc::PeerInfo User(uint32_t uid) {
  rpc::PeerInfo p;
  p.transport = rpc::PeerTransport::kIpc;
  p.uid = uid;
  p.gid = uid;
  return p;
}

class NodeWatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> n{0};
    master_ = FakeMaster::Start("inproc://watch-master-" + std::to_string(n++));
    ASSERT_TRUE(master_);
    master_->SetVolume(1, "/");  // the root is walkable by everyone
    auto ch = rpc::Channel::Connect({.endpoint = master_->endpoint()});
    ASSERT_TRUE(ch.ok());
    master_channel_ = std::move(ch).value();
    EngineOptions eo;
    eo.data_dir = dir_.path();
    eo.background_commit = false;
    auto e = Engine::Open(eo);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    engine_ = std::move(e).value();
    std::vector<Update> dirs = {Put(100, "/", 0, 040755), Put(101, "/pub", 0, 040755),
                                Put(102, "/private", 0, 040700)};
    ASSERT_TRUE(engine_->Apply(dirs).ok());
    NodeServiceOptions so;
    so.engine = engine_.get();
    so.master = master_channel_.get();
    so.node_id = 1;
    so.watch_heartbeat_ms = 20;
    so.max_watches = 3;
    so.max_watches_per_user = 1;
    service_ = std::make_unique<NodeService>(so);
  }

  // Runs a kWatch of `query` as `peer` on a thread; frames are decoded into chunks_.
  void StartWatch(const std::string& query, const rpc::PeerInfo& peer,
                  std::optional<wire::WireCredentials> claimed = std::nullopt) {
    wire::WatchRequest req;
    req.query = query;
    req.creds = claimed;
    threads_.emplace_back([this, req, peer] {
      FnStream out([this](std::string_view bytes) {
        wire::WatchEventsChunk chunk;
        EXPECT_TRUE(wire::Decode(bytes, &chunk).ok());
        std::lock_guard<std::mutex> lock(mu_);
        ++frames_;
        for (const wire::WatchEvent& e : chunk.events) {
          lines_.push_back(std::string(1, wire::WatchKindSymbol(e.kind)) + e.path);
        }
        cv_.notify_all();
        return !stop_;
      });
      std::string reply =
          service_->Handle(wire::EncodeRequest(wire::MsgType::kWatch, req), peer, out);
      wire::ReplyEnvelope env;
      EXPECT_TRUE(wire::DecodeReply(reply, &env).ok());
      std::lock_guard<std::mutex> lock(mu_);
      ends_.push_back(env.status);
      cv_.notify_all();
    });
  }

  bool WaitUntil(const std::function<bool()>& cond) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10), cond);
  }

  void StopAll() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }

  void TearDown() override { StopAll(); }

  TempDir dir_;
  std::unique_ptr<FakeMaster> master_;
  std::unique_ptr<rpc::Channel> master_channel_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<NodeService> service_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  int frames_ = 0;                  // Under mu_.
  std::vector<std::string> lines_;  // Under mu_.
  std::vector<Status> ends_;        // Under mu_.
  bool stop_ = false;               // Under mu_.
};

TEST_F(NodeWatchTest, StreamsEventsWithHeartbeatsUntilTheClientGoes) {
  StartWatch("size>10", rpc::PeerInfo{});  // a member: in-process
  ASSERT_TRUE(WaitUntil([&] { return frames_ >= 1; }));  // registered
  std::vector<Update> batch = {Put(1, "/pub/a", 20), Put(2, "/pub/b", 5), Put(1, "/pub/c", 20)};
  ASSERT_TRUE(engine_->Apply(batch).ok());
  ASSERT_TRUE(WaitUntil([&] { return lines_.size() >= 3; }));
  // Heartbeats keep coming while nothing changes.
  const int frames_then = [&] {
    std::lock_guard<std::mutex> lock(mu_);
    return frames_;
  }();
  ASSERT_TRUE(WaitUntil([&] { return frames_ >= frames_then + 3; }));
  {
    std::lock_guard<std::mutex> lock(mu_);
    EXPECT_EQ(lines_, (std::vector<std::string>{"+/pub/a", "-/pub/a", "+/pub/c"}));
  }
  StopAll();  // the client goes: the handler notices at its next frame and returns
  ASSERT_EQ(ends_.size(), 1u);
  EXPECT_EQ(ends_[0].code(), StatusCode::kAborted);
}

TEST_F(NodeWatchTest, UsersSeeOnlyWhatTheyMayAndHoldFewWatches) {
  StartWatch("size>0", User(1000));
  ASSERT_TRUE(WaitUntil([&] { return frames_ >= 1; }));
  // A second watch of the same user is refused at once; another user's is not.
  wire::WatchRequest req;
  req.query = "size>0";
  FnStream sink([](std::string_view) { return true; });
  std::string reply =
      service_->Handle(wire::EncodeRequest(wire::MsgType::kWatch, req), User(1000), sink);
  wire::ReplyEnvelope env;
  ASSERT_TRUE(wire::DecodeReply(reply, &env).ok());
  EXPECT_EQ(env.status.code(), StatusCode::kResourceExhausted) << env.status.ToString();
  StartWatch("size>0", User(1001));
  ASSERT_TRUE(WaitUntil([&] { return frames_ >= 2; }));
  // Claimed credentials in the body count for nothing: the kernel's uid decides.
  req.creds = wire::WireCredentials{0, 0, {}};
  StartWatch("size>0", User(1002), req.creds);
  ASSERT_TRUE(WaitUntil([&] { return frames_ >= 3; }));
  // The node's limit (3) is reached now, for everyone.
  reply = service_->Handle(wire::EncodeRequest(wire::MsgType::kWatch, req), rpc::PeerInfo{}, sink);
  ASSERT_TRUE(wire::DecodeReply(reply, &env).ok());
  EXPECT_EQ(env.status.code(), StatusCode::kResourceExhausted);

  std::vector<Update> files = {Put(1, "/private/secret", 5), Put(2, "/pub/open", 5)};
  ASSERT_TRUE(engine_->Apply(files).ok());
  ASSERT_TRUE(WaitUntil([&] { return lines_.size() >= 3; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // nothing more comes
  std::lock_guard<std::mutex> lock(mu_);
  EXPECT_EQ(lines_, (std::vector<std::string>{"+/pub/open", "+/pub/open", "+/pub/open"}));
}

TEST_F(NodeWatchTest, BadRequestsGetErrors) {
  FnStream sink([](std::string_view) { return true; });
  auto status_of = [&](std::string_view body, const rpc::PeerInfo& peer) {
    std::string reply = service_->Handle(wire::EncodeRequest(wire::MsgType::kWatch, body), peer,
                                         sink);
    wire::ReplyEnvelope env;
    EXPECT_TRUE(wire::DecodeReply(reply, &env).ok());
    return env.status;
  };
  EXPECT_EQ(status_of("\xc1", rpc::PeerInfo{}).code(), StatusCode::kCorruption);
  wire::WatchRequest req;
  req.query = "size>";
  std::string body;
  wire::Encode(req, &body);
  Status s = status_of(body, rpc::PeerInfo{});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("error at"), std::string::npos) << s.ToString();
  // An unauthenticated tcp peer may not watch.
  rpc::PeerInfo tcp;
  tcp.transport = rpc::PeerTransport::kTcp;
  req.query = "size>1";
  body.clear();
  wire::Encode(req, &body);
  EXPECT_EQ(status_of(body, tcp).code(), StatusCode::kPermissionDenied);
}

}  // namespace
}  // namespace propeller
