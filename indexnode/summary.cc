#include "indexnode/summary.h"

#include <cstring>

namespace propeller {
namespace {

// FNV-1a then a 64-bit finaliser; two halves give the double-hashing probe sequence.
uint64_t HashKey(std::string_view key) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : key) {
    h ^= c;
    h *= 1099511628211ull;
  }
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return h;
}

std::string UidKey(int64_t uid) { return "\x01u" + std::to_string(uid); }

void PutI64(int64_t v, std::string* out) {
  uint64_t u = static_cast<uint64_t>(v);
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>(u >> (8 * i)));
}

int64_t GetI64(const char* p) {
  uint64_t u = 0;
  for (int i = 7; i >= 0; --i) u = (u << 8) | static_cast<uint8_t>(p[i]);
  return static_cast<int64_t>(u);
}

}  // namespace

AcgSummary::AcgSummary() : bloom_(kBloomBytes, 0) {}

KdPoint AcgSummary::PointOf(const FileRecord& r) {
  return KdPoint{static_cast<int64_t>(std::min<uint64_t>(r.size, INT64_MAX)), r.mtime, r.ctime,
                 r.atime, r.uid, r.gid};
}

void AcgSummary::Add(const FileRecord& record) {
  AddAttributes(record);
  for (const std::string& path : record.paths) {
    for (const std::string& token : PathKeywords(path)) BloomAdd(token);
  }
}

void AcgSummary::AddAttributes(const FileRecord& record) {
  KdPoint p = PointOf(record);
  if (empty_) {
    min_ = max_ = p;
    empty_ = false;
  } else {
    for (int i = 0; i < kNumInodeAxes; ++i) {
      min_[i] = std::min(min_[i], p[i]);
      max_[i] = std::max(max_[i], p[i]);
    }
  }
  BloomAdd(UidKey(record.uid));
}

void AcgSummary::Merge(const AcgSummary& other) {
  if (other.empty_) return;
  if (empty_) {
    min_ = other.min_;
    max_ = other.max_;
    empty_ = false;
  } else {
    for (int i = 0; i < kNumInodeAxes; ++i) {
      min_[i] = std::min(min_[i], other.min_[i]);
      max_[i] = std::max(max_[i], other.max_[i]);
    }
  }
  for (size_t i = 0; i < kBloomBytes; ++i) bloom_[i] |= other.bloom_[i];
}

void AcgSummary::BloomAdd(std::string_view key) {
  uint64_t h = HashKey(key);
  uint32_t h1 = static_cast<uint32_t>(h), h2 = static_cast<uint32_t>(h >> 32) | 1;
  for (int i = 0; i < kBloomProbes; ++i) {
    uint32_t bit = (h1 + static_cast<uint32_t>(i) * h2) % (kBloomBytes * 8);
    bloom_[bit / 8] |= static_cast<uint8_t>(1u << (bit % 8));
  }
}

bool AcgSummary::BloomMayContain(std::string_view key) const {
  uint64_t h = HashKey(key);
  uint32_t h1 = static_cast<uint32_t>(h), h2 = static_cast<uint32_t>(h >> 32) | 1;
  for (int i = 0; i < kBloomProbes; ++i) {
    uint32_t bit = (h1 + static_cast<uint32_t>(i) * h2) % (kBloomBytes * 8);
    if ((bloom_[bit / 8] & (1u << (bit % 8))) == 0) return false;
  }
  return true;
}

bool AcgSummary::PredMayMatch(const Predicate& pred) const {
  int axis = InodeAxis(pred.attr);
  if (axis >= 0) {
    const int64_t* v = std::get_if<int64_t>(&pred.value);
    if (v == nullptr) return true;
    switch (pred.op) {
      case CmpOp::kEq:
        if (*v < min_[axis] || *v > max_[axis]) return false;
        if (pred.attr == Attr::kUid) return BloomMayContain(UidKey(*v));
        return true;
      case CmpOp::kLt: return min_[axis] < *v;
      case CmpOp::kLe: return min_[axis] <= *v;
      case CmpOp::kGt: return max_[axis] > *v;
      case CmpOp::kGe: return max_[axis] >= *v;
      default: return true;
    }
  }
  if (pred.attr == Attr::kKeyword && pred.op == CmpOp::kEq) {
    const std::string* s = std::get_if<std::string>(&pred.value);
    return s == nullptr || BloomMayContain(*s);
  }
  return true;
}

bool AcgSummary::MayMatch(const QueryNode& node) const {
  if (empty_) return false;
  switch (node.kind) {
    case QueryNode::Kind::kPred: return PredMayMatch(node.pred);
    case QueryNode::Kind::kAnd:
      for (const auto& c : node.children) {
        if (!MayMatch(*c)) return false;
      }
      return true;
    case QueryNode::Kind::kOr:
      for (const auto& c : node.children) {
        if (MayMatch(*c)) return true;
      }
      return false;
    case QueryNode::Kind::kNot: return true;  // a summary cannot prove a negation
  }
  return true;
}

void AcgSummary::EncodeTo(std::string* out) const {
  out->push_back(1);
  out->push_back(empty_ ? 1 : 0);
  for (int i = 0; i < kNumInodeAxes; ++i) {
    PutI64(min_[i], out);
    PutI64(max_[i], out);
  }
  out->append(reinterpret_cast<const char*>(bloom_.data()), bloom_.size());
}

Status AcgSummary::DecodeFrom(std::string_view bytes) {
  const size_t expected = 2 + kNumInodeAxes * 16 + kBloomBytes;
  if (bytes.size() != expected || bytes[0] != 1) {
    return Status::Corruption("ACG summary has an unknown layout");
  }
  empty_ = bytes[1] != 0;
  const char* p = bytes.data() + 2;
  for (int i = 0; i < kNumInodeAxes; ++i) {
    min_[i] = GetI64(p);
    max_[i] = GetI64(p + 8);
    p += 16;
  }
  std::memcpy(bloom_.data(), p, kBloomBytes);
  return Status::OK();
}

}  // namespace propeller
