// search_latency: one process searching a running Propeller through libpropeller, the way a
// program on the host does: Client::Connect once, then the same search N times. Prints one
// JSON line with the latency quantiles (microseconds) and the hit count.
//
//   search_latency QUERY [--master ENDPOINT] [--scope DIR] [--runs N] [--warmup N]
//
// Uses only the client API that every version since the first round has (Connect, Search), so
// bench/security/search_latency.py builds it against an older tree too and compares both in
// one run (docs/security.md: the trust model must not make searches slower).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "client/lib/propeller.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: search_latency QUERY [--master E] [--scope DIR] [--runs N]\n");
    return 2;
  }
  const std::string query = argv[1];
  propeller::ClientOptions co;
  propeller::ClientSearchOptions so;
  int runs = 200, warmup = 20;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--master") co.master_endpoint = value;
    if (flag == "--scope") so.scope = value;
    if (flag == "--runs") runs = std::atoi(value.c_str());
    if (flag == "--warmup") warmup = std::atoi(value.c_str());
  }
  auto client = propeller::Client::Connect(co);
  if (!client.ok()) {
    std::fprintf(stderr, "%s\n", client.status().ToString().c_str());
    return 1;
  }
  std::vector<double> us;
  size_t hits = 0;
  for (int i = 0; i < warmup + runs; ++i) {
    size_t n = 0;
    const auto t0 = std::chrono::steady_clock::now();
    propeller::Status st = (*client)->Search(query, so, [&](const propeller::ClientHit&) {
      ++n;
      return true;
    });
    const auto t1 = std::chrono::steady_clock::now();
    if (!st.ok()) {
      std::fprintf(stderr, "%s\n", st.ToString().c_str());
      return 1;
    }
    hits = n;
    if (i >= warmup) us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  std::sort(us.begin(), us.end());
  auto q = [&](double f) { return us[static_cast<size_t>(f * static_cast<double>(us.size() - 1))]; };
  std::printf("{\"query\": \"%s\", \"runs\": %d, \"hits\": %zu, \"p50_us\": %.1f, "
              "\"p10_us\": %.1f, \"p90_us\": %.1f}\n",
              query.c_str(), runs, hits, q(0.5), q(0.1), q(0.9));
  return 0;
}
