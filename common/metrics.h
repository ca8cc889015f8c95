// Metrics: counters, gauges and fixed-bucket histograms, and the Prometheus text exposition
// format (version 0.0.4) they are scraped in (docs/metrics.md lists every metric).
//
// Design:
//   - Counter and Histogram are updated with relaxed atomics only: an update is one or two
//     fetch_adds on the caller's thread, never a lock, so they may sit on request paths.
//   - Most figures are not counted here at all: a Registry's collectors run at scrape time and
//     read the stats structs the components keep anyway (EngineStats, IndexWriterStats, ...),
//     so the hot paths gain no bookkeeping for them.
//   - Labels are a small fixed set per family (a status code, a message type): CounterVec
//     holds one Counter per label value, indexed by a small integer, so there is no map lookup
//     and the number of series is bounded by the table.
//   - A scrape reads each atomic once, so values of different series may come from slightly
//     different instants; a histogram's _count is the sum of its buckets as read, so the
//     +Inf bucket always equals _count.
//
// Threading: Counter, CounterVec and Histogram may be updated and read from any thread.
// Registry::Add and Registry::Render may be called from any thread (a mutex orders them);
// collectors run on the thread calling Render.
#ifndef PROPELLER_COMMON_METRICS_H_
#define PROPELLER_COMMON_METRICS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/mutex.h"

namespace propeller::metrics {

enum class Type { kCounter, kGauge, kHistogram };

// A monotonically increasing count.
class Counter {
 public:
  void Add(uint64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> value_{0};
};

// One Counter per value of one label ("code", "type", ...). Values are given once, at
// construction; Add(i) with i >= size() is ignored (an unexpected enum value must not crash a
// daemon).
class CounterVec {
 public:
  CounterVec(std::string label, std::vector<std::string> values);
  void Add(size_t i, uint64_t n = 1) {
    if (i < counters_.size()) counters_[i].Add(n);
  }
  uint64_t value(size_t i) const { return i < counters_.size() ? counters_[i].value() : 0; }
  size_t size() const { return values_.size(); }
  const std::string& label() const { return label_; }
  const std::string& label_value(size_t i) const { return values_[i]; }

 private:
  std::string label_;
  std::vector<std::string> values_;
  std::vector<Counter> counters_;
};

// A histogram's figures as read at one instant: per-bucket counts (not cumulative), the last
// one being +Inf.
struct HistogramSnapshot {
  std::vector<double> bounds;    // upper bounds, ascending, without +Inf
  std::vector<uint64_t> counts;  // bounds.size() + 1 entries
  double sum = 0;
  uint64_t count() const;
};

// Observations counted into fixed buckets (upper bounds, ascending).
class Histogram {
 public:
  // REQUIRES: `bounds` ascending and finite.
  explicit Histogram(std::vector<double> bounds);
  void Observe(double value);
  HistogramSnapshot Snapshot() const;

 private:
  std::vector<double> bounds_;
  std::vector<std::atomic<uint64_t>> counts_;
  std::atomic<double> sum_{0};
};

// Bucket bounds in seconds for request latencies: 100 us to 10 s.
std::vector<double> LatencyBuckets();
// Bucket bounds for sizes in powers of 4 from 1 to 4^12 (16,777,216).
std::vector<double> SizeBuckets();

// `name="value"` with the value escaped for the exposition format (\\, \" and \n).
std::string Label(std::string_view name, std::string_view value);

// Writes one scrape's text. Families must be written one at a time: Family() starts one (its
// # HELP and # TYPE lines) and the Value/Histogram calls that follow are its samples.
class Writer {
 public:
  // REQUIRES: `name` matches [a-zA-Z_:][a-zA-Z0-9_:]* (counters end in _total); `help` has
  // no newline.
  void Family(std::string_view name, std::string_view help, Type type);
  // A sample of the current counter or gauge family; `labels` is "" or Label()s joined by
  // commas.
  void Value(double value, std::string_view labels = {});
  // The _bucket, _sum and _count samples of the current histogram family.
  void Histogram(const HistogramSnapshot& h, std::string_view labels = {});
  void Counter(std::string_view name, std::string_view help, uint64_t value) {
    Family(name, help, Type::kCounter);
    Value(static_cast<double>(value));
  }
  void Gauge(std::string_view name, std::string_view help, double value) {
    Family(name, help, Type::kGauge);
    Value(value);
  }
  // The family with one sample per label value; zero counts are left out when `skip_zero`
  // (sparse families such as errors by code).
  void CounterVec(std::string_view name, std::string_view help, const metrics::CounterVec& v,
                  bool skip_zero);

  const std::string& text() const { return out_; }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
  std::string family_;
};

// A number as the exposition format writes it: integers without a fraction, "+Inf", "NaN".
std::string FormatValue(double value);

// What a daemon exposes: collectors, each writing one or more families when scraped.
class Registry {
 public:
  using Collector = std::function<void(Writer&)>;
  // `collect` runs on every Render until the Registry is destroyed; whatever it reads must
  // outlive the Registry (or the server rendering it).
  void Add(Collector collect);
  // The text of one scrape: every collector, in the order added.
  std::string Render() const;

 private:
  mutable Mutex mu_;
  std::vector<Collector> collectors_ PROPELLER_GUARDED_BY(mu_);
};

// Whether `name` is a valid metric name.
bool ValidName(std::string_view name);

}  // namespace propeller::metrics

#endif  // PROPELLER_COMMON_METRICS_H_
