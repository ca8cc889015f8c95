// The exposition writer against hand-written text, and the counters and histograms under
// concurrent updates.
#include "common/metrics.h"

#include <gtest/gtest.h>

#include <limits>
#include <thread>
#include <vector>

namespace propeller::metrics {
namespace {

TEST(MetricsTest, CounterGaugeAndLabels) {
  CounterVec errors("code", {"ok", "not \"found\"", "a\\b\nc"});
  errors.Add(1, 3);
  errors.Add(2);
  errors.Add(7);  // out of the table: ignored
  Writer w;
  w.Counter("x_requests_total", "Requests.", 42);
  w.Gauge("x_bytes", "Bytes.", 1.5);
  w.CounterVec("x_errors_total", "Errors by code.", errors, /*skip_zero=*/true);
  EXPECT_EQ(w.text(),
            "# HELP x_requests_total Requests.\n"
            "# TYPE x_requests_total counter\n"
            "x_requests_total 42\n"
            "# HELP x_bytes Bytes.\n"
            "# TYPE x_bytes gauge\n"
            "x_bytes 1.5\n"
            "# HELP x_errors_total Errors by code.\n"
            "# TYPE x_errors_total counter\n"
            "x_errors_total{code=\"not \\\"found\\\"\"} 3\n"
            "x_errors_total{code=\"a\\\\b\\nc\"} 1\n");
}

TEST(MetricsTest, HistogramIsCumulative) {
  Histogram h({0.5, 1, 2});
  for (double v : {0.25, 0.5, 0.75, 3.0, 1.0}) h.Observe(v);
  Writer w;
  w.Family("x_latency_seconds", "Latency.", Type::kHistogram);
  w.Histogram(h.Snapshot(), Label("type", "apply"));
  // 0.25 and 0.5 are <= 0.5; 0.75 and 1.0 <= 1; 3.0 only in +Inf. Sum 5.5.
  EXPECT_EQ(w.text(),
            "# HELP x_latency_seconds Latency.\n"
            "# TYPE x_latency_seconds histogram\n"
            "x_latency_seconds_bucket{type=\"apply\",le=\"0.5\"} 2\n"
            "x_latency_seconds_bucket{type=\"apply\",le=\"1\"} 4\n"
            "x_latency_seconds_bucket{type=\"apply\",le=\"2\"} 4\n"
            "x_latency_seconds_bucket{type=\"apply\",le=\"+Inf\"} 5\n"
            "x_latency_seconds_sum{type=\"apply\"} 5.5\n"
            "x_latency_seconds_count{type=\"apply\"} 5\n");
}

TEST(MetricsTest, FormatValueAndNames) {
  EXPECT_EQ(FormatValue(0), "0");
  EXPECT_EQ(FormatValue(18014398509481984.0), "18014398509481984");
  EXPECT_EQ(FormatValue(0.0001), "0.0001");
  EXPECT_EQ(FormatValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatValue(std::numeric_limits<double>::quiet_NaN()), "NaN");
  EXPECT_TRUE(ValidName("propeller_node_updates_total"));
  EXPECT_TRUE(ValidName(":a1"));
  EXPECT_FALSE(ValidName("1a"));
  EXPECT_FALSE(ValidName("a-b"));
  EXPECT_FALSE(ValidName(""));
}

TEST(MetricsTest, RegistryRendersCollectorsInOrder) {
  Registry r;
  Counter c;
  r.Add([&](Writer& w) { w.Counter("a_total", "A.", c.value()); });
  r.Add([](Writer& w) { w.Gauge("b", "B.", 2); });
  c.Add(5);
  EXPECT_EQ(r.Render(),
            "# HELP a_total A.\n# TYPE a_total counter\na_total 5\n"
            "# HELP b B.\n# TYPE b gauge\nb 2\n");
}

TEST(MetricsTest, ConcurrentUpdatesAreAllCounted) {
  Counter c;
  Histogram h(LatencyBuckets());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        c.Add();
        h.Observe(0.001 * (i % 7));
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(c.value(), 40000u);
  EXPECT_EQ(h.Snapshot().count(), 40000u);
}

}  // namespace
}  // namespace propeller::metrics
