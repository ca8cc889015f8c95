#include "common/daemon/metrics_server.h"

#include <httplib.h>

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "common/logging.h"
#include "common/mutex.h"
#include "common/daemon/options.h"

namespace propeller::daemon {

Status ParseListenAddress(const std::string& what, const std::string& text, std::string* host,
                          int* port) {
  const size_t colon = text.rfind(':');
  std::string h = colon == std::string::npos ? "" : text.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  if (colon == std::string::npos || h.empty() || h.find_first_of("[]/ ") != std::string::npos) {
    return Status::InvalidArgument(what + " wants HOST:PORT (such as 127.0.0.1:9471), not '" +
                                   text + "'");
  }
  PROPELLER_ASSIGN_OR_RETURN(long long p, ParseIntOption(what, text.substr(colon + 1), 0, 65535));
  *host = h;
  *port = static_cast<int>(p);
  return Status::OK();
}

namespace {

// cpp-httplib's own ThreadPool queues accepted connections without a bound; this one makes
// the accepting thread wait instead, so at most threads + kMaxQueuedConnections connections
// are held and the rest wait in (or are refused by) the kernel's listen backlog.
class BoundedPool : public httplib::TaskQueue {
 public:
  BoundedPool(size_t threads, size_t max_queued) : max_queued_(max_queued) {
    for (size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { Work(); });
  }
  ~BoundedPool() override = default;

  void enqueue(std::function<void()> fn) override {
    MutexLock lock(&mu_);
    while (jobs_.size() >= max_queued_ && !shutdown_) space_.Wait(&mu_);
    jobs_.push_back(std::move(fn));  // after shutdown too: the job closes its socket
    ready_.NotifyOne();
  }

  void shutdown() override {
    {
      MutexLock lock(&mu_);
      shutdown_ = true;
    }
    ready_.NotifyAll();
    space_.NotifyAll();
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }

 private:
  void Work() {
    for (;;) {
      std::function<void()> job;
      {
        MutexLock lock(&mu_);
        while (jobs_.empty() && !shutdown_) ready_.Wait(&mu_);
        if (jobs_.empty()) return;  // shut down and drained
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      space_.NotifyOne();
      job();
    }
  }

  const size_t max_queued_;
  Mutex mu_;
  CondVar ready_;  // a job was queued, or shutdown
  CondVar space_;  // a job was taken
  std::deque<std::function<void()>> jobs_ PROPELLER_GUARDED_BY(mu_);
  bool shutdown_ PROPELLER_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;  // started in the constructor, joined by shutdown()
};

constexpr size_t kHandlerThreads = 2;
constexpr size_t kMaxBodyBytes = 1024;
constexpr time_t kTimeoutSeconds = 2;

}  // namespace

class MetricsServer::Impl {
 public:
  httplib::Server server;
  std::string address;
  std::thread thread;  // runs listen_after_bind() until server.stop()
};

MetricsServer::MetricsServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

MetricsServer::~MetricsServer() {
  impl_->server.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

const std::string& MetricsServer::address() const { return impl_->address; }

Result<std::unique_ptr<MetricsServer>> MetricsServer::Start(const std::string& listen,
                                                            const metrics::Registry* registry) {
  std::string host;
  int port = 0;
  PROPELLER_RETURN_IF_ERROR(ParseListenAddress("--metrics-listen", listen, &host, &port));
  auto impl = std::make_unique<Impl>();
  httplib::Server& s = impl->server;
  s.new_task_queue = [] { return new BoundedPool(kHandlerThreads, kMaxQueuedConnections); };
  s.set_payload_max_length(kMaxBodyBytes);
  s.set_read_timeout(kTimeoutSeconds, 0);
  s.set_write_timeout(kTimeoutSeconds, 0);
  s.set_keep_alive_max_count(1);
  s.set_pre_routing_handler([](const httplib::Request& req, httplib::Response& res) {
    if ((req.method == "GET" || req.method == "HEAD") && req.path == "/metrics") {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    res.status = 404;
    res.set_content("not found: only GET /metrics is served\n", "text/plain");
    return httplib::Server::HandlerResponse::Handled;
  });
  s.Get("/metrics", [registry](const httplib::Request&, httplib::Response& res) {
    res.set_content(registry->Render(), "text/plain; version=0.0.4; charset=utf-8");
  });
  if (port == 0) {
    port = s.bind_to_any_port(host);
    if (port < 0) port = 0;
  } else if (!s.bind_to_port(host, port)) {
    port = 0;
  }
  if (port == 0) {
    return Status::IOError("--metrics-listen: cannot listen on " + listen +
                           " (address in use, or not an address of this host)");
  }
  const bool v6 = host.find(':') != std::string::npos;
  impl->address = (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
  impl->thread = std::thread([&s] { s.listen_after_bind(); });
  Log(LogLevel::kInfo, "metrics: serving http://%s/metrics", impl->address.c_str());
  return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(impl)));
}

}  // namespace propeller::daemon
