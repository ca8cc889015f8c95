#include "bench/dataset.h"

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <numbers>
#include <string_view>

namespace propeller::bench {
namespace {

// Independent random streams: every attribute draws from its own stream, so changing how one
// attribute is generated leaves the others (and thus expected query counts) unchanged.
enum Stream : uint64_t {
  kStreamTop = 1,
  kStreamApp,
  kStreamDir,
  kStreamName,
  kStreamExt,
  kStreamSize,
  kStreamTail,
  kStreamMtime,
  kStreamRecent,
  kStreamCtime,
  kStreamAtime,
  kStreamUid,
  kStreamGid,
  kStreamMode,
  kStreamOwner,
  kStreamTouch,
};

constexpr uint64_t kFilesPerDir = 32;
constexpr uint64_t kFanOut = 8;
constexpr uint64_t kDirInoBase = uint64_t{1} << 40;  // directory inodes never collide with files
constexpr int64_t kSpanNs = 3 * 365 * kNanosPerDay;  // mtimes spread over three years
constexpr double kRecentFraction = 0.005;            // modified within the last day
constexpr double kMedianSize = 16384.0;
// P(size > 16 MiB) = 1% for a lognormal with median 16 KiB: ln(1024) / z(0.99) = 6.931 / 2.326.
constexpr double kSizeSigma = 2.98;
// That lognormal alone puts only ~0.01% above 1 GiB; the tail adds the rest of the ~0.05%.
constexpr double kTailFraction = 0.0004;
constexpr double kTailMinLog2 = 30;  // 1 GiB
constexpr double kTailMaxLog2 = 36;  // 64 GiB
constexpr uint64_t kMaxSize = uint64_t{1} << 40;
constexpr uint32_t kFirstUid = 1000;
constexpr uint32_t kUsers = 300;
constexpr uint32_t kFirstGid = 100;
constexpr uint32_t kGroups = 100;

constexpr std::array<std::string_view, 6> kTops = {"home", "data", "srv", "projects", "scratch",
                                                   "opt"};
constexpr std::array<std::string_view, 16> kApps = {
    "firefox", "chromium", "gcc",     "python", "spark",  "postgres", "blender", "matlab",
    "make",    "java",     "ffmpeg",  "rustc",  "thunderbird", "gimp", "hadoop", "latex"};
// 79 words: prime, so (h + 7k) mod 79 is distinct for the 8 siblings k = 0..7.
constexpr std::array<std::string_view, 79> kWords = {
    "firefox", "src",      "cache",   "build",    "lib",     "include", "docs",    "tests",
    "assets",  "images",   "thumbs",  "profile",  "session", "logs",    "tmp",     "data",
    "output",  "input",    "config",  "scripts",  "tools",   "vendor",  "third",   "party",
    "release", "debug",    "obj",     "bin",      "share",   "locale",  "fonts",   "icons",
    "plugins", "modules",  "core",    "net",      "gfx",     "dom",     "js",      "layout",
    "media",   "widget",   "storage", "crash",    "reports", "backup",  "archive", "photos",
    "videos",  "music",    "papers",  "thesis",   "draft",   "final",   "alpha",   "beta",
    "gamma",   "delta",    "run",     "results",  "models",  "weights", "checkpoints", "raw",
    "clean",   "parquet",  "shards",  "index",    "notes",   "work",    "project", "mail",
    "inbox",   "sent",     "drafts",  "spam",     "calendar", "contacts", "downloads"};

struct ExtWeight {
  std::string_view ext;  // without the dot; empty = no extension
  uint32_t weight;
  uint32_t mode;         // permission bits
};
constexpr std::array<ExtWeight, 26> kExts = {{
    {"c", 60, 0644},       {"h", 50, 0644},    {"o", 50, 0644},     {"cc", 30, 0644},
    {"py", 40, 0644},      {"js", 30, 0644},   {"html", 20, 0644},  {"json", 30, 0644},
    {"txt", 40, 0644},     {"md", 15, 0644},   {"log", 50, 0644},   {"csv", 20, 0644},
    {"parquet", 15, 0644}, {"jpg", 60, 0644},  {"png", 40, 0644},   {"pdf", 25, 0644},
    {"mp4", 8, 0644},      {"gz", 15, 0644},   {"tar", 5, 0644},    {"so", 12, 0755},
    {"sh", 10, 0755},      {"xml", 15, 0644},  {"sqlite", 5, 0644}, {"iso", 2, 0644},
    {"tmp", 10, 0600},     {"", 25, 0755},
}};
// A short initialiser list would leave empty names at the end of a std::array silently.
template <size_t N>
constexpr bool AllNonEmpty(const std::array<std::string_view, N>& words) {
  for (std::string_view w : words) {
    if (w.empty()) return false;
  }
  return true;
}
static_assert(AllNonEmpty(kTops) && AllNonEmpty(kApps) && AllNonEmpty(kWords));
static_assert(kWords.size() % 7 != 0 && kWords.size() >= kFanOut, "siblings must differ");
constexpr bool AllWeighted() {
  for (const ExtWeight& e : kExts) {
    if (e.weight == 0) return false;
  }
  return true;
}
static_assert(AllWeighted());

constexpr uint32_t ExtTotalWeight() {
  uint32_t total = 0;
  for (const ExtWeight& e : kExts) total += e.weight;
  return total;
}

uint64_t Mix(uint64_t x) {  // splitmix64 finaliser
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// A uniform double in (0, 1]: never 0, so log() is safe.
double Unit(uint64_t h) { return (static_cast<double>(h >> 11) + 1.0) * 0x1.0p-53; }

const ExtWeight& PickExt(uint64_t h) {
  uint32_t x = static_cast<uint32_t>(h % ExtTotalWeight());
  for (const ExtWeight& e : kExts) {
    if (x < e.weight) return e;
    x -= e.weight;
  }
  return kExts.back();
}

}  // namespace

Dataset::Dataset(const DatasetOptions& options) : options_(options) {
  options_.files_per_acg = std::max<uint64_t>(1, options_.files_per_acg);
  group_dirs_ = (options_.files_per_acg + kFilesPerDir - 1) / kFilesPerDir;
  dir_levels_ = 1;
  for (uint64_t span = kFanOut; span < group_dirs_; span *= kFanOut) ++dir_levels_;
}

uint64_t Dataset::Hash(uint64_t stream, uint64_t a, uint64_t b) const {
  return Mix(Mix(Mix(options_.seed ^ (stream * 0xD6E8FEB86659FD93ull)) ^ a) ^ b);
}

uint64_t Dataset::SampleSize(uint64_t stream, uint64_t a, uint64_t b) const {
  if (Unit(Hash(stream + 100, a, b)) <= kTailFraction) {
    double log2 = kTailMinLog2 + (kTailMaxLog2 - kTailMinLog2) * Unit(Hash(stream + 200, a, b));
    return static_cast<uint64_t>(std::exp2(log2));
  }
  // Box-Muller: one standard normal from two uniforms.
  double u1 = Unit(Hash(stream, a, b));
  double u2 = Unit(Hash(stream + 300, a, b));
  double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  double size = kMedianSize * std::exp(kSizeSigma * z);
  if (size >= static_cast<double>(kMaxSize)) return kMaxSize;
  return static_cast<uint64_t>(size);
}

uint64_t Dataset::SizeOf(uint64_t index) const { return SampleSize(kStreamSize, index, 0); }

int64_t Dataset::MtimeOf(uint64_t index) const {
  const int64_t now = options_.now_ns;
  if (Unit(Hash(kStreamRecent, index)) <= kRecentFraction) {
    // (now - 1 day, now]: "mtime<1d" matches.
    return now - static_cast<int64_t>(Hash(kStreamMtime, index) % kNanosPerDay);
  }
  // [now - 1 day - 3 years, now - 1 day - 1 s]: a whole second clear of the boundary.
  return now - kNanosPerDay - kNanosPerSecond -
         static_cast<int64_t>(Hash(kStreamMtime, index) % kSpanNs);
}

std::string Dataset::DirectoryOf(uint64_t index) const {
  const uint64_t group = index / options_.files_per_acg;
  const uint64_t leaf = (index % options_.files_per_acg) / kFilesPerDir;
  std::string path = "/";
  path += kTops[Hash(kStreamTop, group) % kTops.size()];
  path += '/';
  path += kApps[Hash(kStreamApp, group) % kApps.size()];
  path += '-';
  path += std::to_string(group);
  // The leaf's digits in base kFanOut, most significant first; each level's name depends on
  // the parent's prefix, so sibling directories have distinct names and cousins vary.
  uint64_t divisor = 1;
  for (int l = 1; l < dir_levels_; ++l) divisor *= kFanOut;
  uint64_t prefix = 0;
  for (int level = 0; level < dir_levels_; ++level) {
    uint64_t digit = (leaf / divisor) % kFanOut;
    divisor = std::max<uint64_t>(1, divisor / kFanOut);
    uint64_t h = Hash(kStreamDir, group, (uint64_t{static_cast<uint32_t>(level)} << 48) | prefix);
    path += '/';
    path += kWords[(h + 7 * digit) % kWords.size()];
    prefix = prefix * kFanOut + digit;
  }
  return path;
}

FileRecord Dataset::Record(uint64_t index) const {
  const int64_t now = options_.now_ns;
  const uint64_t group = index / options_.files_per_acg;
  const uint64_t local = index % options_.files_per_acg;
  FileRecord r;
  r.id = FileId{options_.volume, index + 1};

  const ExtWeight& ext = PickExt(Hash(kStreamExt, index));
  std::string path = DirectoryOf(index);
  path += '/';
  path += kWords[Hash(kStreamName, index) % kWords.size()];
  path += '_';
  path += std::to_string(local);
  if (!ext.ext.empty()) {
    path += '.';
    path += ext.ext;
  }
  r.paths.push_back(std::move(path));
  r.parent_ino = kDirInoBase + (group << 24) + local / kFilesPerDir;
  r.type = FileType::kRegular;

  r.size = SizeOf(index);
  r.mtime = MtimeOf(index);
  if (Unit(Hash(kStreamCtime, index)) <= 0.9) {
    r.ctime = r.mtime;
  } else {  // a later chmod/chown/rename: up to 30 days later, never after now
    int64_t room = std::min<int64_t>(now - r.mtime, 30 * kNanosPerDay);
    r.ctime = r.mtime + static_cast<int64_t>(Unit(Hash(kStreamCtime + 50, index)) *
                                             static_cast<double>(room));
  }
  r.atime = r.mtime + static_cast<int64_t>(Unit(Hash(kStreamAtime, index)) *
                                           static_cast<double>(now - r.mtime));

  double who = Unit(Hash(kStreamUid, index));
  if (who <= 0.02) {
    r.uid = 0;
  } else if (who <= 0.20) {
    r.uid = kFirstUid + static_cast<uint32_t>(Hash(kStreamUid + 50, index) % kUsers);
  } else {
    r.uid = kFirstUid + static_cast<uint32_t>(Hash(kStreamOwner, group) % kUsers);
  }
  if (r.uid != 0 && Unit(Hash(kStreamGid, index)) <= 0.9) {
    r.gid = kFirstGid + r.uid % kGroups;  // the user's primary group
  } else {
    r.gid = kFirstGid + static_cast<uint32_t>(Hash(kStreamGid + 50, index) % kGroups);
  }

  uint32_t perm = ext.mode;
  if (perm == 0644) {
    double m = Unit(Hash(kStreamMode, index));
    if (m <= 0.10) {
      perm = 0600;
    } else if (m <= 0.20) {
      perm = 0664;
    } else if (m <= 0.22) {
      perm = 0444;
    }
  }
  r.mode = S_IFREG | perm;
  r.nlink = 1;
  return r;
}

Update Dataset::Put(uint64_t index) const {
  Update u;
  u.op = UpdateOp::kPut;
  u.acg = AcgOf(index);
  u.record = Record(index);
  return u;
}

void Dataset::AppendPuts(uint64_t begin, uint64_t end, std::vector<Update>* out) const {
  out->reserve(out->size() + (end > begin ? end - begin : 0));
  for (uint64_t i = begin; i < end; ++i) out->push_back(Put(i));
}

void Dataset::Touch(uint64_t version, FileRecord* record) const {
  const uint64_t ino = record->id.ino;
  record->size = SampleSize(kStreamTouch, ino, version);
  record->mtime = options_.now_ns - kNanosPerSecond +
                  static_cast<int64_t>(Hash(kStreamTouch + 400, ino, version) % kNanosPerSecond);
  record->ctime = record->mtime;
  record->atime = std::max(record->atime, record->mtime);
}

}  // namespace propeller::bench
