// rpc_bench: the per-message overhead of the rpc transport (common/rpc/rpc.h), server and
// client in one process, on each transport.
//
//   rpc_round_trip/<transport>/<bytes>B   one caller, sequential calls of a small request echoed
//                                         back; counters median_us and p99_us are per call
//   rpc_throughput/<transport>/threads:N  N callers sharing one Channel, 16-byte echo;
//                                         items_per_second is calls per second over all callers
//   rpc_echo_1mb/<transport>              a 1 MiB request echoed back (bytes_per_second counts
//                                         both directions)
//
// Transports: inproc://, ipc:// (socket in a temporary directory), tcp://127.0.0.1 (port 0).
// The server has 4 worker threads; the handler copies the request into the reply.
// Every flag goes to Google Benchmark (--benchmark_filter, --benchmark_min_time=0.5, ...).
// Exit status 1 when a call failed.
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "common/env.h"
#include "common/rpc/rpc.h"

namespace propeller::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Rig {
  std::string name;
  std::unique_ptr<rpc::Server> server;
  std::unique_ptr<rpc::Channel> channel;
};

std::vector<Rig>& Rigs() {
  static std::vector<Rig> rigs;
  return rigs;
}

std::atomic<bool> g_failed{false};

bool StartRig(const std::string& name, const std::string& endpoint) {
  rpc::ServerOptions options;
  options.endpoint = endpoint;
  options.worker_threads = 4;
  auto server = rpc::Server::Start(
      options, [](std::string_view request, const rpc::PeerInfo&, rpc::ReplyStream&) {
        return std::string(request);
      });
  if (!server.ok()) {
    std::fprintf(stderr, "rpc_bench: %s\n", server.status().ToString().c_str());
    return false;
  }
  rpc::ChannelOptions channel_options;
  channel_options.endpoint = (*server)->endpoint();
  auto channel = rpc::Channel::Connect(channel_options);
  if (!channel.ok()) {
    std::fprintf(stderr, "rpc_bench: %s\n", channel.status().ToString().c_str());
    return false;
  }
  Rigs().push_back(Rig{name, std::move(server).value(), std::move(channel).value()});
  return true;
}

// One checked call; marks the run failed (and the benchmark skipped) on error.
bool CallOnce(benchmark::State& state, rpc::Channel& channel, const std::string& request) {
  auto reply = channel.Call(request);
  if (!reply.ok() || reply->size() != request.size()) {
    g_failed = true;
    state.SkipWithError(reply.ok() ? "wrong reply size" : reply.status().ToString().c_str());
    return false;
  }
  return true;
}

double Percentile(std::vector<double>& values, double p) {
  if (values.empty()) return 0;
  const size_t k = std::min(values.size() - 1, static_cast<size_t>(p * values.size()));
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(k), values.end());
  return values[k];
}

void RoundTrip(benchmark::State& state, Rig* rig, size_t bytes) {
  const std::string request(bytes, 'q');
  // Warm: the pool's socket is connected and the server's threads are awake.
  if (!CallOnce(state, *rig->channel, request)) return;
  std::vector<double> micros;
  micros.reserve(1 << 16);
  for (auto _ : state) {
    const auto start = Clock::now();
    if (!CallOnce(state, *rig->channel, request)) return;
    micros.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
  }
  state.counters["median_us"] = Percentile(micros, 0.5);
  state.counters["p99_us"] = Percentile(micros, 0.99);
  state.SetItemsProcessed(state.iterations());
}

void Throughput(benchmark::State& state, Rig* rig) {
  const std::string request(16, 't');
  for (auto _ : state) {
    if (!CallOnce(state, *rig->channel, request)) return;
  }
  state.SetItemsProcessed(state.iterations());
}

void Echo1MiB(benchmark::State& state, Rig* rig) {
  const std::string request(size_t{1} << 20, 'm');
  if (!CallOnce(state, *rig->channel, request)) return;
  std::vector<double> micros;
  for (auto _ : state) {
    const auto start = Clock::now();
    if (!CallOnce(state, *rig->channel, request)) return;
    micros.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
  }
  state.counters["median_us"] = Percentile(micros, 0.5);
  state.SetBytesProcessed(state.iterations() * 2 * static_cast<int64_t>(request.size()));
}

void RegisterAll() {
  for (Rig& rig : Rigs()) {
    for (size_t bytes : {size_t{0}, size_t{100}}) {
      benchmark::RegisterBenchmark(
          ("rpc_round_trip/" + rig.name + "/" + std::to_string(bytes) + "B").c_str(), RoundTrip,
          &rig, bytes)
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
    }
  }
  for (Rig& rig : Rigs()) {
    benchmark::RegisterBenchmark(("rpc_throughput/" + rig.name).c_str(), Throughput, &rig)
        ->Threads(1)
        ->Threads(4)
        ->Threads(8)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
  }
  for (Rig& rig : Rigs()) {
    benchmark::RegisterBenchmark(("rpc_echo_1mb/" + rig.name).c_str(), Echo1MiB, &rig)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
  }
}

}  // namespace
}  // namespace propeller::bench

int main(int argc, char** argv) {
  using namespace propeller::bench;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  char dir_template[] = "/tmp/propeller-rpc-bench-XXXXXX";
  const char* dir = mkdtemp(dir_template);
  if (dir == nullptr) {
    std::perror("rpc_bench: mkdtemp");
    return 1;
  }
  const bool ok = StartRig("inproc", "inproc://rpc-bench") &&
                  StartRig("ipc", std::string("ipc://") + dir + "/bench.sock") &&
                  StartRig("tcp", "tcp://127.0.0.1:0");
  if (ok) {
    RegisterAll();
    benchmark::RunSpecifiedBenchmarks();
  }
  benchmark::Shutdown();
  Rigs().clear();  // channels and servers close before the directory goes
  (void)propeller::Env::Default()->RemoveRecursively(dir);
  return ok && !g_failed.load() ? 0 : 1;
}
