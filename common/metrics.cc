#include "common/metrics.h"

#include <cmath>
#include <cstdio>
#include <limits>

namespace propeller::metrics {

CounterVec::CounterVec(std::string label, std::vector<std::string> values)
    : label_(std::move(label)), values_(std::move(values)), counters_(values_.size()) {}

uint64_t HistogramSnapshot::count() const {
  uint64_t n = 0;
  for (uint64_t c : counts) n += c;
  return n;
}

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1) {}

void Histogram::Observe(double value) {
  // Linear search: the tables have 16 bounds or fewer, and most observations land early.
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  counts_[i].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(value, std::memory_order_relaxed);
}

HistogramSnapshot Histogram::Snapshot() const {
  HistogramSnapshot s;
  s.bounds = bounds_;
  s.counts.reserve(counts_.size());
  for (const auto& c : counts_) s.counts.push_back(c.load(std::memory_order_relaxed));
  s.sum = sum_.load(std::memory_order_relaxed);
  return s;
}

std::vector<double> LatencyBuckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
          0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,     10};
}

std::vector<double> SizeBuckets() {
  std::vector<double> b;
  for (double v = 1; v <= 16'777'216; v *= 4) b.push_back(v);
  return b;
}

bool ValidName(std::string_view name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

std::string Label(std::string_view name, std::string_view value) {
  std::string out(name);
  out += "=\"";
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  out += '"';
  return out;
}

std::string FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buf[32];
  // Whole numbers below 2^53 are exact in a double: print them as integers.
  if (value == std::floor(value) && std::fabs(value) < 9007199254740992.0) {
    std::snprintf(buf, sizeof(buf), "%lld", static_cast<long long>(value));
  } else {
    std::snprintf(buf, sizeof(buf), "%.17g", value);
  }
  return buf;
}

void Writer::Family(std::string_view name, std::string_view help, Type type) {
  family_ = std::string(name);
  out_ += "# HELP ";
  out_ += name;
  out_ += ' ';
  out_ += help;
  out_ += "\n# TYPE ";
  out_ += name;
  out_ += type == Type::kCounter ? " counter\n" : type == Type::kGauge ? " gauge\n" : " histogram\n";
}

namespace {

void Sample(std::string* out, std::string_view name, std::string_view suffix,
            std::string_view labels, std::string_view value) {
  *out += name;
  *out += suffix;
  if (!labels.empty()) {
    *out += '{';
    *out += labels;
    *out += '}';
  }
  *out += ' ';
  *out += value;
  *out += '\n';
}

}  // namespace

void Writer::Value(double value, std::string_view labels) {
  Sample(&out_, family_, "", labels, FormatValue(value));
}

void Writer::Histogram(const HistogramSnapshot& h, std::string_view labels) {
  const std::string sep = labels.empty() ? "" : std::string(labels) + ",";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < h.counts.size(); ++i) {
    cumulative += h.counts[i];
    const std::string le = i < h.bounds.size() ? FormatValue(h.bounds[i]) : "+Inf";
    Sample(&out_, family_, "_bucket", sep + Label("le", le), FormatValue(cumulative));
  }
  Sample(&out_, family_, "_sum", labels, FormatValue(h.sum));
  Sample(&out_, family_, "_count", labels, FormatValue(cumulative));
}

void Writer::CounterVec(std::string_view name, std::string_view help,
                        const metrics::CounterVec& v, bool skip_zero) {
  Family(name, help, Type::kCounter);
  for (size_t i = 0; i < v.size(); ++i) {
    const uint64_t n = v.value(i);
    if (n == 0 && skip_zero) continue;
    Value(static_cast<double>(n), Label(v.label(), v.label_value(i)));
  }
}

void Registry::Add(Collector collect) {
  MutexLock lock(&mu_);
  collectors_.push_back(std::move(collect));
}

std::string Registry::Render() const {
  Writer w;
  MutexLock lock(&mu_);
  for (const Collector& c : collectors_) c(w);
  return w.Take();
}

}  // namespace propeller::metrics
