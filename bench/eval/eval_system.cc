// Query definitions, the brute-force oracle and the system factory (eval_system.h).
#include "bench/eval/eval_system.h"

#include <cctype>
#include <string_view>

namespace propeller::eval {

namespace {

constexpr int64_t kDayNs = 86'400'000'000'000;
constexpr uint64_t kGiB = 1ull << 30;
constexpr uint64_t k16MiB = 16ull << 20;

// True when `path` has "firefox" as one of its tokens: maximal runs of letters and digits,
// compared lowercased (docs/architecture.md §3's keyword index). Bytes >= 0x80 belong to tokens.
bool HasFirefoxToken(std::string_view path) {
  size_t i = 0;
  while (i < path.size()) {
    auto in_token = [&](size_t j) {
      const unsigned char c = static_cast<unsigned char>(path[j]);
      return c >= 0x80 || std::isalnum(c);
    };
    if (!in_token(i)) {
      ++i;
      continue;
    }
    size_t j = i;
    std::string token;
    while (j < path.size() && in_token(j)) {
      token.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(path[j]))));
      ++j;
    }
    if (token == "firefox") return true;
    i = j;
  }
  return false;
}

}  // namespace

const char* QueryText(QueryKind kind) {
  switch (kind) {
    case QueryKind::kBigRecent:
      return "size>1g & mtime<1d";
    case QueryKind::kFirefoxWeek:
      return "keyword=firefox & mtime<1w";
    case QueryKind::kOver16M:
      return "size>16m";
    case QueryKind::kPathFirefox:
      return "path~firefox";
  }
  return "?";
}

bool Matches(QueryKind kind, const FileRecord& r, int64_t now_ns) {
  switch (kind) {
    case QueryKind::kBigRecent:
      return r.size > kGiB && r.mtime > now_ns - kDayNs;
    case QueryKind::kFirefoxWeek: {
      if (r.mtime <= now_ns - 7 * kDayNs) return false;
      for (const std::string& p : r.paths) {
        if (HasFirefoxToken(p)) return true;
      }
      return false;
    }
    case QueryKind::kOver16M:
      return r.size > k16MiB;
    case QueryKind::kPathFirefox:
      for (const std::string& p : r.paths) {
        if (p.find("firefox") != std::string::npos) return true;
      }
      return false;
  }
  return false;
}

std::string SqlCondition(QueryKind kind, int64_t now_ns, bool sqlite) {
  switch (kind) {
    case QueryKind::kBigRecent:
      return "f.size > " + std::to_string(kGiB) + " AND f.mtime > " +
             std::to_string(now_ns - kDayNs);
    case QueryKind::kFirefoxWeek:
      return "k.word = 'firefox' AND f.mtime > " + std::to_string(now_ns - 7 * kDayNs);
    case QueryKind::kOver16M:
      return "f.size > " + std::to_string(k16MiB);
    case QueryKind::kPathFirefox:
      return sqlite ? "p.path GLOB '*firefox*'" : "p.path LIKE '%firefox%'";
  }
  return "FALSE";
}

bool SqlNeedsKeywords(QueryKind kind) { return kind == QueryKind::kFirefoxWeek; }

}  // namespace propeller::eval
