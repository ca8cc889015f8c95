// direct:// endpoints: a call runs the server's handler on the caller's thread (rpc.h).
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>

#include "common/logging.h"
#include "common/rpc/rpc.h"
#include "common/rpc/rpc_internal.h"

namespace propeller::rpc::internal {
namespace {

std::mutex& RegistryMu() {
  static std::mutex* mu = new std::mutex;
  return *mu;
}
std::map<std::string, std::shared_ptr<DirectTarget>>& Registry() {
  static auto* registry = new std::map<std::string, std::shared_ptr<DirectTarget>>;
  return *registry;
}

// Frames of a streamed reply go straight to the caller's callback.
class DirectStream : public ReplyStream {
 public:
  explicit DirectStream(const std::function<bool(std::string_view)>& on_chunk)
      : on_chunk_(on_chunk) {}
  bool Send(std::string_view chunk) override {
    if (abandoned_) return false;
    if (!on_chunk_ || !on_chunk_(chunk)) abandoned_ = true;
    return !abandoned_;
  }
  bool abandoned() const { return abandoned_; }

 private:
  const std::function<bool(std::string_view)>& on_chunk_;
  bool abandoned_ = false;
};

}  // namespace

bool IsDirectEndpoint(std::string_view endpoint) { return endpoint.rfind("direct://", 0) == 0; }

Status RegisterDirect(const std::string& endpoint, std::shared_ptr<DirectTarget> target) {
  if (endpoint.size() <= 9) return Status::InvalidArgument("direct:// endpoint without a name");
  std::lock_guard<std::mutex> lock(RegistryMu());
  if (!Registry().emplace(endpoint, std::move(target)).second) {
    return Status::IOError("cannot bind " + endpoint + ": address in use");
  }
  return Status::OK();
}

void UnregisterDirect(const std::string& endpoint) {
  std::shared_ptr<DirectTarget> target;
  {
    std::lock_guard<std::mutex> lock(RegistryMu());
    auto it = Registry().find(endpoint);
    if (it == Registry().end()) return;
    target = std::move(it->second);
    Registry().erase(it);
  }
  std::unique_lock<std::shared_mutex> wait(target->mu);  // running calls finish first
  target->closed = true;
}

Result<std::string> CallDirect(const std::string& endpoint, std::string_view request,
                               const std::function<bool(std::string_view)>& on_chunk) {
  std::shared_ptr<DirectTarget> target;
  {
    std::lock_guard<std::mutex> lock(RegistryMu());
    auto it = Registry().find(endpoint);
    if (it != Registry().end()) target = it->second;
  }
  if (target == nullptr) return Status::Unavailable("no server at " + endpoint);
  std::shared_lock<std::shared_mutex> lock(target->mu);
  if (target->closed) return Status::Unavailable("the server at " + endpoint + " stopped");
  DirectStream stream(on_chunk);
  std::string reply;
  try {
    reply = target->handler(request, PeerInfo{}, stream);
  } catch (const std::exception& e) {
    Log(LogLevel::kError, "rpc: handler on %s threw: %s", endpoint.c_str(), e.what());
    return Status::Internal("the handler on " + endpoint + " failed");
  }
  if (stream.abandoned()) return Status::Aborted("call abandoned by the caller");
  return reply;
}

}  // namespace propeller::rpc::internal
