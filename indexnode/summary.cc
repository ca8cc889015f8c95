#include "indexnode/summary.h"

#include <algorithm>
#include <bit>
#include <climits>
#include <cstring>

namespace propeller {
namespace {

// FNV-1a then a 64-bit finaliser; two halves give the double-hashing probe sequence. With
// `lower`, of the key with ASCII letters lowercased (a token as PathKeywords returns it).
uint64_t HashKey(std::string_view key, bool lower = false) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : key) {
    if (lower && c >= 'A' && c <= 'Z') c = static_cast<unsigned char>(c - 'A' + 'a');
    h ^= c;
    h *= 1099511628211ull;
  }
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return h;
}

// Two bits of 64 for a token's hash (KeywordBits).
uint64_t TwoBits(uint64_t h) { return (uint64_t{1} << (h & 63)) | (uint64_t{1} << ((h >> 6) & 63)); }

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

AcgSummary::AcgSummary() = default;

int AcgSummary::SizeClass(int64_t size) {
  return size <= 0 ? 0 : 64 - __builtin_clzll(static_cast<uint64_t>(size));
}

KdPoint AcgSummary::PointOf(const FileRecord& r) {
  return KdPoint{static_cast<int64_t>(std::min<uint64_t>(r.size, INT64_MAX)),
                 ClampToInt64(r.mtime), ClampToInt64(r.ctime), ClampToInt64(r.atime), r.uid,
                 r.gid};
}

void AcgSummary::Add(const FileRecord& record) {
  AddAttributes(record);
  // A record without a path has no directory in common with the others.
  if (record.paths.empty()) NarrowCommonDir("");
  const int64_t week = WeekOf(ClampToInt64(record.mtime));
  for (const std::string& path : record.paths) {
    for (const std::string& token : PathKeywords(path)) {
      BloomAdd(token);
      WeekBloomAdd(WeekKey(TokenHash(token), week), &weeks_);
    }
    NarrowCommonDir(path);
  }
}

void AcgSummary::AddKeywordWeeks(const FileRecord& record) {
  const int64_t week = WeekOf(ClampToInt64(record.mtime));
  for (const std::string& path : record.paths) {
    ForEachPathToken(path, [&](std::string_view token) {
      WeekBloomAdd(WeekKey(TokenHash(token), week), &weeks_);
    });
  }
}

uint64_t AcgSummary::TokenHash(std::string_view token) { return HashKey(token, /*lower=*/true); }

uint64_t AcgSummary::TokenBits(uint64_t token_hash) { return TwoBits(token_hash); }

uint64_t AcgSummary::WeekKey(uint64_t token_hash, int64_t week) {
  uint64_t x = token_hash ^ (static_cast<uint64_t>(week) * 0x9E3779B97F4A7C15ull);
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

namespace {

// A key's place in the keyword-week filter: one of its 64-byte lines (the low bits), and three
// bits of that line (nine bits each above them).
constexpr size_t kWeekLines = AcgSummary::kWeekBloomBytes / 64;
static_assert(kWeekLines > 0 && (kWeekLines & (kWeekLines - 1)) == 0 && kWeekLines <= 1024);
constexpr int kWeekLineBits = std::countr_zero(kWeekLines);

template <class Fn>
void ForEachWeekBit(uint64_t key, Fn&& fn) {
  const size_t line = (key & (kWeekLines - 1)) * 64;
  for (int i = 0; i < 3; ++i) {
    const uint32_t bit = static_cast<uint32_t>(key >> (kWeekLineBits + 9 * i)) & 511;
    fn(line + bit / 8, static_cast<uint8_t>(1u << (bit % 8)));
  }
}

}  // namespace

void AcgSummary::WeekBloomAdd(uint64_t key, WeekBloom* bloom) {
  ForEachWeekBit(key, [&](size_t byte, uint8_t mask) { (*bloom)[byte] |= mask; });
}

void AcgSummary::CompleteKeywordWeeks(const WeekBloom& bloom) {
  for (size_t i = 0; i < kWeekBloomBytes; ++i) weeks_[i] |= bloom[i];
  weeks_complete_ = true;
}

void AcgSummary::NarrowCommonDir(std::string_view path) {
  // The directory of `path`: up to its last '/'. Nothing in common ends as "/", which claims
  // no keyword.
  size_t n = path.rfind('/');
  n = n == std::string_view::npos ? 0 : n + 1;
  std::string_view dir = path.substr(0, std::min(n, kMaxCommonDir));
  const size_t before = common_dir_.size();
  if (common_dir_.empty()) {
    common_dir_.assign(dir);
  } else {
    size_t same = 0;
    const size_t most = std::min(common_dir_.size(), dir.size());
    while (same < most && common_dir_[same] == dir[same]) ++same;
    common_dir_.resize(same);
  }
  // Back to a whole directory: "/a/b" of "/a/b/" and "/a/bc/" is "/a/".
  const size_t slash = common_dir_.rfind('/');
  common_dir_.resize(slash == std::string::npos ? 0 : slash + 1);
  if (common_dir_.empty()) common_dir_ = "/";
  // It only narrows: a change is a change of length.
  if (common_dir_.size() != before) dir_bits_valid_ = false;
}

uint64_t AcgSummary::KeywordBits(std::string_view token) { return TwoBits(HashKey(token)); }

uint64_t AcgSummary::PathKeywordBits(std::string_view path) {
  uint64_t bits = 0;
  ForEachPathToken(path, [&](std::string_view t) { bits |= TwoBits(HashKey(t, /*lower=*/true)); });
  return bits;
}

uint64_t AcgSummary::RecordKeywordBits(const FileRecord& record) {
  uint64_t bits = 0;
  for (const std::string& p : record.paths) bits |= PathKeywordBits(p);
  return bits;
}

uint64_t AcgSummary::common_dir_bits() const {
  if (!dir_bits_valid_) {
    dir_bits_ = 0;
    if (common_dir_.size() > 1) {
      for (const std::string& t : PathKeywords(common_dir_)) dir_bits_ |= KeywordBits(t);
    }
    dir_bits_valid_ = true;
  }
  return dir_bits_;
}

bool AcgSummary::EveryPathHasKeyword(std::string_view token) const {
  const uint64_t need = KeywordBits(token);
  if ((common_dir_bits() & need) != need) return false;
  return !empty_ && common_dir_.size() > 1 && PathHasKeyword(common_dir_, token);
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
  const int c = SizeClass(p[0]);
  classes_[c].min = std::min(classes_[c].min, p[1]);
  classes_[c].max = std::max(classes_[c].max, p[1]);
  class_mask_ |= uint64_t{1} << c;
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
  for (size_t i = 0; i < kWeekBloomBytes; ++i) weeks_[i] |= other.weeks_[i];
  weeks_complete_ = weeks_complete_ && other.weeks_complete_;
  has_classes_ = has_classes_ && other.has_classes_;
  for (int c = 0; c < kSizeClasses; ++c) {
    classes_[c].min = std::min(classes_[c].min, other.classes_[c].min);
    classes_[c].max = std::max(classes_[c].max, other.classes_[c].max);
  }
  class_mask_ |= other.class_mask_;
  // (Non-empty, `other` has a common directory: "/" at least.)
  NarrowCommonDir(other.common_dir_.empty() ? std::string_view("/") : other.common_dir_);
}

namespace {

// The bits of the Bloom filter that stand for `key`.
std::array<uint32_t, AcgSummary::kBloomProbes> BloomBits(std::string_view key) {
  const uint64_t h = HashKey(key);
  const uint32_t h1 = static_cast<uint32_t>(h), h2 = static_cast<uint32_t>(h >> 32) | 1;
  std::array<uint32_t, AcgSummary::kBloomProbes> bits;
  for (int i = 0; i < AcgSummary::kBloomProbes; ++i) {
    bits[i] = (h1 + static_cast<uint32_t>(i) * h2) % (AcgSummary::kBloomBytes * 8);
  }
  return bits;
}

}  // namespace

void AcgSummary::BloomAdd(std::string_view key) {
  for (uint32_t bit : BloomBits(key)) bloom_[bit / 8] |= static_cast<uint8_t>(1u << (bit % 8));
}

bool AcgSummary::BloomMayContain(std::string_view key) const {
  for (uint32_t bit : BloomBits(key)) {
    if ((bloom_[bit / 8] & (1u << (bit % 8))) == 0) return false;
  }
  return true;
}

void AcgSummary::BloomProbes(const QueryNode& node, std::vector<uint32_t>* offsets) {
  auto add = [&](std::string_view key) {
    for (uint32_t bit : BloomBits(key)) offsets->push_back(bit / 8);
  };
  switch (node.kind) {
    case QueryNode::Kind::kPred: {
      // As PredMayMatch reads the filter.
      const Predicate& p = node.pred;
      if (!p.root.empty() || p.op != CmpOp::kEq) return;
      if (const int64_t* v = std::get_if<int64_t>(&p.value); v && p.attr == Attr::kUid) {
        add(UidKey(*v));
      } else if (std::optional<std::string> token = RequiredToken(p)) {
        add(*token);
      }
      return;
    }
    case QueryNode::Kind::kAnd:
    case QueryNode::Kind::kOr:
      for (const auto& c : node.children) BloomProbes(*c, offsets);
      return;
    case QueryNode::Kind::kNot: return;
  }
}

std::optional<std::string> AcgSummary::RequiredToken(const Predicate& p) {
  const std::string* s = std::get_if<std::string>(&p.value);
  if (p.op != CmpOp::kEq || s == nullptr || !p.root.empty()) return std::nullopt;
  switch (p.attr) {
    case Attr::kKeyword: return *s;
    case Attr::kExt: {
      // The extension is a keyword token of the path when it is one token in lower case (as
      // PathKeywords returns it). Without building the list: a search asks this of every ACG.
      const bool one_token = !s->empty() && std::all_of(s->begin(), s->end(), [](char c) {
        return IsPathTokenByte(c) && !(c >= 'A' && c <= 'Z');
      });
      if (!one_token) return std::nullopt;
      return *s;
    }
    case Attr::kName: {
      // Every token of the name is a keyword token of the path: the first, in lower case.
      std::optional<std::string> first;
      ForEachPathToken(*s, [&](std::string_view t) {
        if (first) return;
        first.emplace(t);
        for (char& c : *first) {
          if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
        }
      });
      return first;
    }
    default: return std::nullopt;
  }
}

bool AcgSummary::PredMayMatch(const Predicate& pred) const {
  if (!pred.root.empty()) return true;  // about paths under a root the summary did not see
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
  // A keyword, or an extension or name that is made of keywords.
  if (std::optional<std::string> token = RequiredToken(pred)) return BloomMayContain(*token);
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
      return SizeMtimeMayMatch(node) && KeywordWeeksMayMatch(node);
    case QueryNode::Kind::kOr:
      for (const auto& c : node.children) {
        if (MayMatch(*c)) return true;
      }
      return false;
    case QueryNode::Kind::kNot: return true;  // a summary cannot prove a negation
  }
  return true;
}

namespace {

// Narrows [*lo, *hi] to the values `op v` admits (an empty range: *lo > *hi).
void Narrow(CmpOp op, int64_t v, int64_t* lo, int64_t* hi) {
  switch (op) {
    case CmpOp::kEq:
      *lo = std::max(*lo, v);
      *hi = std::min(*hi, v);
      break;
    case CmpOp::kLt:
      if (v == INT64_MIN) {
        *lo = INT64_MAX;
        *hi = INT64_MIN;
      } else {
        *hi = std::min(*hi, v - 1);
      }
      break;
    case CmpOp::kLe: *hi = std::min(*hi, v); break;
    case CmpOp::kGt:
      if (v == INT64_MAX) {
        *lo = INT64_MAX;
        *hi = INT64_MIN;
      } else {
        *lo = std::max(*lo, v + 1);
      }
      break;
    case CmpOp::kGe: *lo = std::max(*lo, v); break;
    default: break;  // != and ~ leave the range as it is
  }
}

}  // namespace

bool AcgSummary::SizeMtimeMayMatch(const QueryNode& and_node) const {
  if (!has_classes_) return true;
  int64_t size_lo = INT64_MIN, size_hi = INT64_MAX;
  int64_t mtime_lo = INT64_MIN, mtime_hi = INT64_MAX;
  bool sized = false, timed = false;
  for (const auto& c : and_node.children) {
    if (c->kind != QueryNode::Kind::kPred) continue;
    const Predicate& pred = c->pred;
    const int64_t* v = std::get_if<int64_t>(&pred.value);
    if (v == nullptr) continue;
    if (pred.attr == Attr::kSize) {
      Narrow(pred.op, *v, &size_lo, &size_hi);
      sized = true;
    } else if (pred.attr == Attr::kMtime) {
      Narrow(pred.op, *v, &mtime_lo, &mtime_hi);
      timed = true;
    }
  }
  if (!sized || !timed) return true;
  // Sizes are summarised as non-negative (PointOf clamps): a range below 0 holds no file.
  if (size_hi < 0 || size_lo > size_hi || mtime_lo > mtime_hi) return false;
  const int first = SizeClass(std::max<int64_t>(size_lo, 0));
  const int last = SizeClass(size_hi);
  // The classes in [first, last] that hold a file (last <= 63).
  uint64_t held = class_mask_ >> first;
  if (last - first < 63) held &= (uint64_t{1} << (last - first + 1)) - 1;
  for (; held != 0; held &= held - 1) {
    const ClassTimes& t = classes_[first + __builtin_ctzll(held)];
    if (t.max >= mtime_lo && t.min <= mtime_hi) return true;
  }
  return false;
}

bool AcgSummary::KeywordWeeksMayMatch(const QueryNode& and_node) const {
  if (!weeks_complete_) return true;
  // Up to four keywords (or extensions, or names: RequiredToken) are tested (one suffices to
  // prune; the rest would only cost).
  std::array<uint64_t, 4> hashes;
  size_t keywords = 0;
  int64_t lo = INT64_MIN, hi = INT64_MAX;
  bool timed = false;
  for (const auto& c : and_node.children) {
    if (c->kind != QueryNode::Kind::kPred) continue;
    const Predicate& pred = c->pred;
    if (pred.attr == Attr::kMtime) {
      if (const int64_t* v = std::get_if<int64_t>(&pred.value)) {
        Narrow(pred.op, *v, &lo, &hi);
        timed = true;
      }
    } else if (keywords < hashes.size()) {
      if (std::optional<std::string> token = RequiredToken(pred)) {
        hashes[keywords++] = TokenHash(*token);
      }
    }
  }
  if (!timed || keywords == 0) return true;
  // Only the weeks that hold a file: an open range (`mtime<1w` has no upper end) ends at the
  // newest file.
  lo = std::max(lo, min_[1]);
  hi = std::min(hi, max_[1]);
  if (lo > hi) return false;
  const int64_t first = WeekOf(lo), last = WeekOf(hi);
  if (last - first >= kMaxWeekProbes) return true;
  for (size_t k = 0; k < keywords; ++k) {
    bool any = false;
    for (int64_t w = first; w <= last && !any; ++w) {
      bool all = true;
      ForEachWeekBit(WeekKey(hashes[k], w), [&](size_t byte, uint8_t mask) {
        all = all && (weeks_[byte] & mask) != 0;
      });
      any = all;
    }
    if (!any) return false;
  }
  return true;
}

void AcgSummary::EncodeTo(std::string* out) const {
  out->push_back(4);
  out->push_back(empty_ ? 1 : 0);
  for (int i = 0; i < kNumInodeAxes; ++i) {
    PutI64(min_[i], out);
    PutI64(max_[i], out);
  }
  out->append(reinterpret_cast<const char*>(bloom_.data()), bloom_.size());
  for (int c = 0; c < kSizeClasses; ++c) {
    PutI64(classes_[c].min, out);
    PutI64(classes_[c].max, out);
  }
  out->push_back(static_cast<char>(common_dir_.size() & 0xff));
  out->push_back(static_cast<char>(common_dir_.size() >> 8));
  out->append(common_dir_);
  out->push_back(weeks_complete_ ? 1 : 0);
  out->append(reinterpret_cast<const char*>(weeks_.data()), weeks_.size());
}

Status AcgSummary::DecodeFrom(std::string_view bytes) {
  const size_t v1_size = 2 + kNumInodeAxes * 16 + kBloomBytes;
  const size_t v2_size = v1_size + kSizeClasses * 16;
  const bool v1 = bytes.size() == v1_size && bytes[0] == 1;
  const bool v2 = bytes.size() == v2_size && bytes[0] == 2;
  std::string_view dir, weeks;
  bool v3 = false;  // or 4
  if (bytes.size() >= v2_size + 2 && (bytes[0] == 3 || bytes[0] == 4)) {
    const size_t n = static_cast<uint8_t>(bytes[v2_size]) |
                     static_cast<size_t>(static_cast<uint8_t>(bytes[v2_size + 1])) << 8;
    dir = bytes.substr(v2_size + 2);
    if (bytes[0] == 4) {
      // The directory, then the flag and the filter.
      const size_t tail = 1 + kWeekBloomBytes;
      weeks = dir.size() >= tail ? dir.substr(dir.size() - tail) : std::string_view();
      dir = dir.substr(0, dir.size() - weeks.size());
    }
    v3 = dir.size() == n && n <= kMaxCommonDir &&
         (n == 0 || (dir.front() == '/' && dir.back() == '/')) &&
         (bytes[0] == 3 || (!weeks.empty() && static_cast<uint8_t>(weeks[0]) <= 1));
  }
  if (!bytes.empty() && static_cast<uint8_t>(bytes[0]) > 4) {
    return Status::Corruption("ACG summary layout " +
                              std::to_string(static_cast<uint8_t>(bytes[0])) +
                              " is newer than this program's (4)");
  }
  if (!v1 && !v2 && !v3) return Status::Corruption("ACG summary has an unknown layout");
  empty_ = bytes[1] != 0;
  const char* p = bytes.data() + 2;
  for (int i = 0; i < kNumInodeAxes; ++i) {
    min_[i] = GetI64(p);
    max_[i] = GetI64(p + 8);
    p += 16;
  }
  std::memcpy(bloom_.data(), p, kBloomBytes);
  p += kBloomBytes;
  has_classes_ = !v1;
  classes_.fill(ClassTimes{});
  class_mask_ = 0;
  for (int c = 0; !v1 && c < kSizeClasses; ++c, p += 16) {
    classes_[c].min = GetI64(p);
    classes_[c].max = GetI64(p + 8);
    if (classes_[c].min <= classes_[c].max) class_mask_ |= uint64_t{1} << c;
  }
  // Layouts 1 and 2 did not keep the directory: "/" claims no keyword, and stays "/".
  // "" only while empty: a summary of records has "/" at least.
  if (v3 && (empty_ || !dir.empty())) {
    common_dir_.assign(dir);
  } else {
    common_dir_ = empty_ ? "" : "/";
  }
  dir_bits_valid_ = false;
  // Before layout 4 there was no keyword-week filter: what is added from now on goes in, and
  // it prunes once completed (CompleteKeywordWeeks).
  weeks_.fill(0);
  weeks_complete_ = false;
  if (!weeks.empty()) {
    weeks_complete_ = weeks[0] == 1;
    std::memcpy(weeks_.data(), weeks.data() + 1, kWeekBloomBytes);
  }
  return Status::OK();
}

}  // namespace propeller
