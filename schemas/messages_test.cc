// Tests of the wire message codecs (schemas/messages.h): seeded round trips of every message,
// golden bytes, the compatibility rule (extra trailing fields ignored, missing trailing fields
// defaulted, required fields enforced), type and range checks naming the field, envelopes, and
// hostile input (every truncation, byte flips, huge claims, deep nesting, allocation bounds).
// The field specs below (required counts, names, kinds) restate messages.cc's tables
// independently, so a drift between the two fails here.
// Randomised tests use a fixed seed, overridable with PROPELLER_SEED, printed on failure.
#include "schemas/messages.h"

#include <gtest/gtest.h>
#include <msgpack.hpp>

#include <array>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <new>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "common/random.h"
#include "schemas/record_format.h"

// ---- allocation accounting -----------------------------------------------------------------
// Global operator new/delete are replaced so tests can bound what a decode allocates (msgpack-c
// allocates its object tree with malloc in a zone, which these do not see; that part is bounded
// by msgpack_util's structure check and pinned by HugeClaimsFailBeforeParsing).
namespace {
std::atomic<size_t> g_live_bytes{0};
std::atomic<size_t> g_peak_bytes{0};
constexpr size_t kHeader = 16;  // keeps malloc's 16-byte alignment

void* CountedAlloc(size_t n) {
  void* p = std::malloc(n + kHeader);
  if (p == nullptr) throw std::bad_alloc();
  *static_cast<size_t*>(p) = n;
  const size_t live = g_live_bytes.fetch_add(n) + n;
  size_t peak = g_peak_bytes.load();
  while (live > peak && !g_peak_bytes.compare_exchange_weak(peak, live)) {
  }
  return static_cast<char*>(p) + kHeader;
}

void CountedFree(void* p) {
  if (p == nullptr) return;
  char* block = static_cast<char*>(p) - kHeader;
  g_live_bytes.fetch_sub(*reinterpret_cast<size_t*>(block));
  std::free(block);
}

// Peak bytes allocated with operator new while `fn` runs, above what was live before.
size_t PeakNewBytes(const std::function<void()>& fn) {
  const size_t base = g_live_bytes.load();
  g_peak_bytes.store(base);
  fn();
  return g_peak_bytes.load() - base;
}
}  // namespace

void* operator new(size_t n) { return CountedAlloc(n); }
void* operator new[](size_t n) { return CountedAlloc(n); }
void operator delete(void* p) noexcept { CountedFree(p); }
void operator delete[](void* p) noexcept { CountedFree(p); }
void operator delete(void* p, size_t) noexcept { CountedFree(p); }
void operator delete[](void* p, size_t) noexcept { CountedFree(p); }

namespace propeller::wire {

// ---- value comparison (messages.h declares no operator==) ----------------------------------
// Tie(m) is the tuple of m's fields in declared (= wire) order.
inline auto Tie(const Empty&) { return std::tie(); }
inline auto Tie(Empty&) { return std::tie(); }
#define PROPELLER_TIE(T, ...)                                    \
  inline auto Tie(const T& m) { return std::tie(__VA_ARGS__); } \
  inline auto Tie(T& m) { return std::tie(__VA_ARGS__); }
PROPELLER_TIE(RegisterNodeRequest, m.node_id, m.endpoint)
PROPELLER_TIE(RegisterNodeReply, m.node_id, m.heartbeat_interval_ms)
PROPELLER_TIE(AcgLoad, m.acg, m.files)
PROPELLER_TIE(AcgMerge, m.source, m.target)
PROPELLER_TIE(HeartbeatRequest, m.node_id, m.acgs, m.free_disk_bytes, m.load, m.cached_updates,
              m.indexes)
PROPELLER_TIE(IndexDef, m.name, m.type)
PROPELLER_TIE(HeartbeatReply, m.reregister, m.indexes, m.merges, m.not_yours, m.moves)
PROPELLER_TIE(NodeInfo, m.node_id, m.endpoint, m.up, m.acgs, m.files, m.free_disk_bytes, m.load,
              m.last_heartbeat_ns)
PROPELLER_TIE(NodesReply, m.nodes)
PROPELLER_TIE(FilesRequest, m.files, m.generations)
PROPELLER_TIE(AssignItem, m.file, m.app, m.producers, m.fresh)
PROPELLER_TIE(AssignFilesRequest, m.items)
PROPELLER_TIE(FileLocation, m.file, m.acg, m.node_id, m.endpoint, m.generation)
PROPELLER_TIE(LocationsReply, m.locations)
PROPELLER_TIE(AcgLocation, m.acg, m.node_id, m.endpoint)
PROPELLER_TIE(LocateAcgsRequest, m.acgs)
PROPELLER_TIE(AcgLocationsReply, m.locations)
PROPELLER_TIE(NewAcgRequest, m.node_id, m.source)
PROPELLER_TIE(NewAcgReply, m.acg)
PROPELLER_TIE(SplitDoneRequest, m.node_id, m.source, m.target, m.files, m.merged)
PROPELLER_TIE(SplitDoneReply, m.remapped)
PROPELLER_TIE(IndexName, m.name)
PROPELLER_TIE(IndexesReply, m.indexes)
PROPELLER_TIE(RegisterVolumeRequest, m.root)
PROPELLER_TIE(VolumeInfo, m.volume, m.root)
PROPELLER_TIE(VolumesReply, m.volumes)
PROPELLER_TIE(ClusterStatusReply, m.nodes, m.acgs, m.files, m.indexes, m.volumes)
PROPELLER_TIE(ApplyRequest, m.updates)
PROPELLER_TIE(WireCredentials, m.uid, m.gid, m.groups)
PROPELLER_TIE(SearchQuery, m.query, m.scope, m.volume, m.creds, m.limit, m.sort_by,
              m.descending, m.now_ns, m.acgs, m.roots)
PROPELLER_TIE(WireHit, m.path, m.record, m.acg)
PROPELLER_TIE(SearchHitsChunk, m.hits)
PROPELLER_TIE(SearchDone, m.acgs_total, m.acgs_skipped, m.candidates, m.hits, m.moved,
              m.adopted, m.unknown_attrs)
PROPELLER_TIE(GetRecordRequest, m.acg, m.file)
PROPELLER_TIE(RecordReply, m.record)
PROPELLER_TIE(NodeStatusReply, m.node_id, m.acgs, m.files, m.cached_updates, m.wal_bytes,
              m.disk_bytes, m.index_memory_bytes, m.acg_list, m.commit_error,
              m.failing_since_ns, m.damaged_acgs)
PROPELLER_TIE(MountStatusReply, m.pending, m.degraded_since_ns, m.last_error, m.sent,
              m.queued, m.delivered, m.refused, m.errors, m.admit_refusals)
PROPELLER_TIE(Ping, m.payload)
PROPELLER_TIE(MoveAcgRequest, m.acg, m.from_node, m.to_node)
PROPELLER_TIE(MigrateAcgRequest, m.acg, m.to_node)
PROPELLER_TIE(MigrateAcgReply, m.bytes, m.files, m.micros)
PROPELLER_TIE(ReleaseAcgRequest, m.acg)
PROPELLER_TIE(AdoptAcgChunk, m.acg, m.from_node, m.offset, m.total_bytes, m.data, m.crc)
#undef PROPELLER_TIE

// Field-wise equality for every wire struct (found by ADL, also inside vectors and optionals).
template <typename T>
  requires requires(const T& t) { Tie(t); }
bool operator==(const T& a, const T& b) {
  return Tie(a) == Tie(b);
}

namespace {

std::string Hex(std::string_view bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  for (char c : bytes) {
    out.push_back(kDigits[static_cast<uint8_t>(c) >> 4]);
    out.push_back(kDigits[static_cast<uint8_t>(c) & 0xF]);
  }
  return out;
}

std::string Unhex(std::string_view hex) {
  std::string out;
  auto nibble = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(nibble(hex[i]) * 16 + nibble(hex[i + 1])));
  }
  return out;
}

template <typename T>
std::string Enc(const T& msg) {
  std::string out;
  Encode(msg, &out);
  return out;
}

// ---- random values -------------------------------------------------------------------------

class Gen {
 public:
  explicit Gen(uint64_t seed) : rng_(seed) {}

  uint64_t U64() { return rng_() >> (rng_() % 64); }
  uint32_t U32() { return static_cast<uint32_t>(rng_() >> (32 + rng_() % 33 % 32)); }
  bool Bool() { return rng_() % 2 == 1; }
  size_t Count(size_t max) { return rng_() % (max + 1); }
  int64_t I64() {
    switch (rng_() % 4) {
      case 0: return static_cast<int64_t>(rng_());
      case 1: return static_cast<int64_t>(rng_() % 300) - 150;
      case 2:
        return Bool() ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max();
      default: return static_cast<int64_t>(rng_() >> (rng_() % 64));
    }
  }
  // Any double but NaN (which == cannot compare); whole numbers must stay doubles.
  double F64() {
    switch (rng_() % 4) {
      case 0: return static_cast<double>(static_cast<int64_t>(rng_() % 2001) - 1000);
      case 1: return std::uniform_real_distribution<double>(-1e12, 1e12)(rng_);
      case 2: {
        const double specials[] = {std::numeric_limits<double>::infinity(), -0.0, 1e308,
                                   std::numeric_limits<double>::denorm_min(), 0.0};
        return specials[rng_() % 5];
      }
      default: return std::uniform_real_distribution<double>(0, 64)(rng_);
    }
  }
  std::string Str(size_t max) {
    std::string s(Count(max), '\0');
    for (char& c : s) c = static_cast<char>(rng_());
    return s;
  }
  IndexType Type() { return static_cast<IndexType>(1 + rng_() % 3); }
  FileId Id() { return {U32(), U64()}; }
  FileRecord Record() {
    FileRecord r;
    r.id = Id();
    const size_t paths = Count(3);
    for (size_t i = 0; i < paths; ++i) r.paths.push_back("/" + Str(40));
    r.parent_ino = U64();
    const FileType types[] = {FileType::kRegular, FileType::kDirectory, FileType::kSymlink,
                              FileType::kOther};
    r.type = types[rng_() % 4];
    r.size = U64();
    r.mtime = I64();
    r.ctime = I64();
    r.atime = I64();
    r.uid = U32();
    r.gid = U32();
    r.mode = U32();
    r.nlink = U32();
    const size_t attrs = Count(3);
    for (size_t i = 0; i < attrs; ++i) {
      switch (rng_() % 3) {
        case 0: r.attrs[Str(8)] = I64(); break;
        case 1: r.attrs[Str(8)] = F64(); break;
        default: r.attrs[Str(8)] = Str(20); break;
      }
    }
    return r;
  }
  Update Upd() {
    Update u;
    u.op = static_cast<UpdateOp>(1 + rng_() % 5);
    u.acg = U64();
    u.record = Record();
    u.edge_dst = Id();
    u.edge_weight = U32();
    return u;
  }
  template <typename Fn>
  auto List(size_t max, Fn make) {
    std::vector<decltype(make())> v(Count(max));
    for (auto& e : v) e = make();
    return v;
  }

 private:
  std::mt19937_64 rng_;
};

AcgLoad RandomAcgLoad(Gen& g) { return {g.U64(), g.U64()}; }
IndexDef RandomIndexDef(Gen& g) { return {g.Str(12), g.Type()}; }
NodeInfo RandomNode(Gen& g) {
  return {g.U32(), g.Str(30), g.Bool(), g.U64(), g.U64(), g.U64(), g.F64(), g.I64()};
}
AcgLocation RandomAcgLocation(Gen& g) { return {g.U64(), g.U32(), g.Str(20)}; }
VolumeInfo RandomVolume(Gen& g) { return {g.U32(), g.Str(30)}; }

void Fill(Gen&, Empty*) {}
void Fill(Gen& g, RegisterNodeRequest* m) { *m = {g.U32(), g.Str(30)}; }
void Fill(Gen& g, RegisterNodeReply* m) { *m = {g.U32(), g.U32()}; }
void Fill(Gen& g, HeartbeatRequest* m) {
  m->node_id = g.U32();
  m->acgs = g.List(5, [&] { return RandomAcgLoad(g); });
  m->free_disk_bytes = g.U64();
  m->load = g.F64();
  m->cached_updates = g.U64();
  m->indexes = g.List(4, [&] { return g.Str(10); });
}
void Fill(Gen& g, HeartbeatReply* m) {
  m->reregister = g.Bool();
  m->indexes = g.List(4, [&] { return RandomIndexDef(g); });
  m->merges = g.List(3, [&] { return AcgMerge{g.U64(), g.U64()}; });
  m->not_yours = g.List(3, [&] { return RandomAcgLocation(g); });
  m->moves = g.List(3, [&] { return RandomAcgLocation(g); });
}
void Fill(Gen& g, NodesReply* m) { m->nodes = g.List(4, [&] { return RandomNode(g); }); }
void Fill(Gen& g, FilesRequest* m) {
  m->files = g.List(6, [&] { return g.Id(); });
  m->generations = g.List(6, [&] { return g.U64(); });
}
void Fill(Gen& g, AssignFilesRequest* m) {
  m->items = g.List(4, [&] {
    return AssignItem{g.Id(), g.Str(12), g.List(3, [&] { return g.Id(); }), g.Bool()};
  });
}
void Fill(Gen& g, LocationsReply* m) {
  m->locations = g.List(5, [&] {
    return FileLocation{g.Id(), g.U64(), g.U32(), g.Str(20), g.Bool() ? g.U64() : 0};
  });
}
void Fill(Gen& g, LocateAcgsRequest* m) { m->acgs = g.List(8, [&] { return g.U64(); }); }
void Fill(Gen& g, AcgLocationsReply* m) {
  m->locations = g.List(5, [&] { return RandomAcgLocation(g); });
}
void Fill(Gen& g, NewAcgRequest* m) { *m = NewAcgRequest{g.U32(), g.U64()}; }
void Fill(Gen& g, NewAcgReply* m) { m->acg = g.U64(); }
void Fill(Gen& g, SplitDoneRequest* m) {
  *m = SplitDoneRequest{g.U32(), g.U64(), g.U64(), g.List(6, [&] { return g.Id(); }), g.Bool()};
}
void Fill(Gen& g, SplitDoneReply* m) { m->remapped = g.U64(); }
void Fill(Gen& g, IndexDef* m) { *m = RandomIndexDef(g); }
void Fill(Gen& g, IndexName* m) { m->name = g.Str(12); }
void Fill(Gen& g, IndexesReply* m) { m->indexes = g.List(4, [&] { return RandomIndexDef(g); }); }
void Fill(Gen& g, RegisterVolumeRequest* m) { m->root = g.Str(30); }
void Fill(Gen& g, VolumeInfo* m) { *m = RandomVolume(g); }
void Fill(Gen& g, VolumesReply* m) { m->volumes = g.List(4, [&] { return RandomVolume(g); }); }
void Fill(Gen& g, ClusterStatusReply* m) {
  m->nodes = g.List(3, [&] { return RandomNode(g); });
  m->acgs = g.U64();
  m->files = g.U64();
  m->indexes = g.List(3, [&] { return RandomIndexDef(g); });
  m->volumes = g.List(3, [&] { return RandomVolume(g); });
}
void Fill(Gen& g, ApplyRequest* m) { m->updates = g.List(4, [&] { return g.Upd(); }); }
void Fill(Gen& g, SearchQuery* m) {
  m->query = g.Str(40);
  m->scope = g.Str(20);
  if (g.Bool()) m->volume = g.U32();
  if (g.Bool()) {
    m->creds = WireCredentials{g.U32(), g.U32(), g.List(4, [&] { return g.U32(); })};
  }
  m->limit = g.U64();
  m->sort_by = g.Str(6);
  m->descending = g.Bool();
  m->now_ns = g.I64();
  m->acgs = g.List(4, [&] { return g.U64(); });
  m->roots = g.List(3, [&] { return RandomVolume(g); });
}
void Fill(Gen& g, SearchHitsChunk* m) {
  m->hits = g.List(4, [&] { return WireHit{g.Str(40), g.Record(), g.U64()}; });
}
void Fill(Gen& g, SearchDone* m) {
  *m = {g.U64(), g.U64(), g.U64(), g.U64(), g.List(3, [&] { return RandomAcgLocation(g); }),
        g.List(3, [&] { return g.U64(); }), g.List(3, [&] { return g.Str(20); })};
}
void Fill(Gen& g, GetRecordRequest* m) { *m = {g.U64(), g.Id()}; }
void Fill(Gen& g, RecordReply* m) { m->record = g.Record(); }
void Fill(Gen& g, NodeStatusReply* m) {
  *m = {g.U32(), g.U64(), g.U64(), g.U64(), g.U64(), g.U64(), g.U64(),
        g.List(5, [&] { return RandomAcgLoad(g); }), g.Str(60),
        static_cast<int64_t>(g.U64() >> 1), g.List(3, [&] { return g.Str(40); })};
}
void Fill(Gen& g, MountStatusReply* m) {
  *m = {g.U64(), static_cast<int64_t>(g.U64() >> 1), g.Str(60), g.U64(), g.U64(), g.U64(),
        g.U64(),  g.U64(), g.U64()};
}
void Fill(Gen& g, Ping* m) { m->payload = g.Str(100); }
void Fill(Gen& g, MoveAcgRequest* m) { *m = {g.U64(), g.U32(), g.U32()}; }
void Fill(Gen& g, MigrateAcgRequest* m) { *m = {g.U64(), g.U32()}; }
void Fill(Gen& g, MigrateAcgReply* m) { *m = {g.U64(), g.U64(), g.U64()}; }
void Fill(Gen& g, ReleaseAcgRequest* m) { m->acg = g.U64(); }

template <typename T>
T Random(Gen& g) {
  T m;
  Fill(g, &m);
  return m;
}

// ---- the spec: per message, required count, field names and field kinds --------------------
// Kinds: 'u' unsigned, 'i' int64, 'd' float64, 'b' bool, 's' str, 't' IndexType, 'a' array
// (list or nested struct), 'o' optional (nil or value).
template <typename T>
struct Spec;
#define PROPELLER_SPEC(T, R, KINDS, ...)                           \
  template <>                                                      \
  struct Spec<T> {                                                 \
    static constexpr const char* kName = #T;                       \
    static constexpr size_t kRequired = R;                         \
    static constexpr std::string_view kKinds = KINDS;              \
    static constexpr std::array<const char*, sizeof(KINDS) - 1> kNames = {__VA_ARGS__}; \
  };
template <>
struct Spec<Empty> {
  static constexpr const char* kName = "Empty";
  static constexpr size_t kRequired = 0;
  static constexpr std::string_view kKinds = "";
  static constexpr std::array<const char*, 0> kNames = {};
};
PROPELLER_SPEC(RegisterNodeRequest, 2, "us", "node_id", "endpoint")
PROPELLER_SPEC(RegisterNodeReply, 1, "uu", "node_id", "heartbeat_interval_ms")
PROPELLER_SPEC(HeartbeatRequest, 1, "uaudua", "node_id", "acgs",
               "free_disk_bytes", "load", "cached_updates", "indexes")
PROPELLER_SPEC(HeartbeatReply, 2, "baaaa", "reregister", "indexes", "merges", "not_yours",
               "moves")
PROPELLER_SPEC(NodesReply, 1, "a", "nodes")
PROPELLER_SPEC(FilesRequest, 1, "aa", "files", "generations")
PROPELLER_SPEC(AssignFilesRequest, 1, "a", "items")
PROPELLER_SPEC(LocationsReply, 1, "a", "locations")
PROPELLER_SPEC(LocateAcgsRequest, 1, "a", "acgs")
PROPELLER_SPEC(AcgLocationsReply, 1, "a", "locations")
PROPELLER_SPEC(NewAcgRequest, 2, "uu", "node_id", "source")
PROPELLER_SPEC(NewAcgReply, 1, "u", "acg")
PROPELLER_SPEC(SplitDoneRequest, 4, "uuuab", "node_id", "source", "target", "files", "merged")
PROPELLER_SPEC(SplitDoneReply, 1, "u", "remapped")
PROPELLER_SPEC(IndexDef, 2, "st", "name", "type")
PROPELLER_SPEC(IndexName, 1, "s", "name")
PROPELLER_SPEC(IndexesReply, 1, "a", "indexes")
PROPELLER_SPEC(RegisterVolumeRequest, 1, "s", "root")
PROPELLER_SPEC(VolumeInfo, 2, "us", "volume", "root")
PROPELLER_SPEC(VolumesReply, 1, "a", "volumes")
PROPELLER_SPEC(ClusterStatusReply, 1, "auuaa", "nodes", "acgs", "files", "indexes", "volumes")
PROPELLER_SPEC(ApplyRequest, 1, "a", "updates")
PROPELLER_SPEC(SearchQuery, 1, "ssoousbiaa", "query", "scope", "volume", "creds", "limit",
               "sort_by", "descending", "now_ns", "acgs", "roots")
PROPELLER_SPEC(SearchHitsChunk, 1, "a", "hits")
PROPELLER_SPEC(SearchDone, 0, "uuuuaaa", "acgs_total", "acgs_skipped", "candidates", "hits",
               "moved", "adopted", "unknown_attrs")
PROPELLER_SPEC(GetRecordRequest, 2, "ua", "acg", "file")
PROPELLER_SPEC(RecordReply, 1, "a", "record")
PROPELLER_SPEC(NodeStatusReply, 1, "uuuuuuuasia", "node_id", "acgs", "files", "cached_updates",
               "wal_bytes", "disk_bytes", "index_memory_bytes", "acg_list", "commit_error",
               "failing_since_ns", "damaged_acgs")
PROPELLER_SPEC(MountStatusReply, 1, "uisuuuuuu", "pending", "degraded_since_ns", "last_error",
               "sent", "queued", "delivered", "refused", "errors", "admit_refusals")
PROPELLER_SPEC(Ping, 0, "s", "payload")
PROPELLER_SPEC(MoveAcgRequest, 3, "uuu", "acg", "from_node", "to_node")
PROPELLER_SPEC(MigrateAcgRequest, 2, "uu", "acg", "to_node")
PROPELLER_SPEC(MigrateAcgReply, 0, "uuu", "bytes", "files", "micros")
PROPELLER_SPEC(ReleaseAcgRequest, 1, "u", "acg")
#undef PROPELLER_SPEC

#define PROPELLER_ALL_MESSAGES                                                               \
  Empty, RegisterNodeRequest, RegisterNodeReply, HeartbeatRequest, HeartbeatReply, NodesReply, \
      FilesRequest, AssignFilesRequest, LocationsReply, LocateAcgsRequest, AcgLocationsReply,  \
      IndexDef, IndexName, IndexesReply, RegisterVolumeRequest, VolumeInfo, VolumesReply,      \
      ClusterStatusReply, ApplyRequest, SearchQuery, SearchHitsChunk, SearchDone,              \
      GetRecordRequest, RecordReply, NodeStatusReply, MountStatusReply, Ping, NewAcgRequest,   \
      NewAcgReply,                                                                             \
      SplitDoneRequest, SplitDoneReply, MoveAcgRequest, MigrateAcgRequest, MigrateAcgReply,    \
      ReleaseAcgRequest
using AllMessages = ::testing::Types<PROPELLER_ALL_MESSAGES>;
template <typename... T>
struct TypeList {};
using AllMessageList = TypeList<PROPELLER_ALL_MESSAGES>;

template <typename T>
constexpr size_t kNumFields = std::tuple_size_v<decltype(Tie(std::declval<const T&>()))>;

// The message with fields >= k reset to their defaults.
template <typename T>
T Prefix(const T& full, size_t k) {
  T out{};
  auto dst = Tie(out);
  auto src = Tie(full);
  [&]<size_t... I>(std::index_sequence<I...>) {
    ((I < k ? void(std::get<I>(dst) = std::get<I>(src)) : void()), ...);
  }(std::make_index_sequence<kNumFields<T>>{});
  return out;
}

// The top-level elements of an encoded message (a fixarray: every message has < 16 fields).
std::vector<std::string> SplitArray(const std::string& bytes) {
  std::vector<std::string> elems;
  const uint8_t header = static_cast<uint8_t>(bytes.at(0));
  EXPECT_EQ(header & 0xf0, 0x90) << Hex(bytes);
  size_t offset = 1;
  for (size_t i = 0; i < (header & 0x0fu); ++i) {
    const size_t start = offset;
    msgpack::object_handle handle;
    msgpack::unpack(handle, bytes.data(), bytes.size(), offset);
    elems.push_back(bytes.substr(start, offset - start));
  }
  EXPECT_EQ(offset, bytes.size());
  return elems;
}

std::string JoinArray(const std::vector<std::string>& elems) {
  EXPECT_LT(elems.size(), 16u);
  std::string out(1, static_cast<char>(0x90 | elems.size()));
  for (const std::string& e : elems) out += e;
  return out;
}

bool Contains(const Status& s, std::string_view text) {
  return s.message().find(text) != std::string::npos;
}

// ---- typed tests: every message -------------------------------------------------------------

template <typename T>
class MessageTest : public ::testing::Test {};
TYPED_TEST_SUITE(MessageTest, AllMessages);

TYPED_TEST(MessageTest, SpecMatchesStruct) {
  using T = TypeParam;
  static_assert(Spec<T>::kNames.size() == kNumFields<T>);
  static_assert(Spec<T>::kKinds.size() == kNumFields<T>);
  static_assert(Spec<T>::kRequired <= kNumFields<T>);
  // The encoder writes exactly the declared fields.
  T m{};
  EXPECT_EQ(SplitArray(Enc(m)).size(), kNumFields<T>);
}

TYPED_TEST(MessageTest, RoundTrip) {
  using T = TypeParam;
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Gen g(seed);
  for (int i = 0; i < 300; ++i) {
    const T m = Random<T>(g);
    std::string bytes = "prefix";  // Encode appends
    Encode(m, &bytes);
    ASSERT_EQ(bytes.substr(0, 6), "prefix");
    const std::string_view body = std::string_view(bytes).substr(6);
    T back = Random<T>(g);  // decoding replaces the whole message
    const Status s = Decode(body, &back);
    ASSERT_TRUE(s.ok()) << s.ToString() << " at " << i;
    ASSERT_TRUE(back == m) << Spec<T>::kName << " at " << i << ": " << Hex(body);
    ASSERT_EQ(Enc(back), body) << "at " << i;
    // And through a request envelope and an OK reply envelope.
    RequestEnvelope request;
    const std::string request_bytes = EncodeRequest(MsgType::kPing, m);  // request.body views it
    ASSERT_TRUE(DecodeRequest(request_bytes, &request).ok());
    ASSERT_EQ(request.body, body);
    const std::string reply_bytes = EncodeOkReply(m);
    ReplyEnvelope reply;
    ASSERT_TRUE(DecodeReply(reply_bytes, &reply).ok());
    ASSERT_TRUE(reply.status.ok());
    ASSERT_EQ(reply.body, body);
  }
}

TYPED_TEST(MessageTest, TrailingExtraFieldsIgnored) {
  using T = TypeParam;
  Gen g(TestSeed());
  for (int i = 0; i < 20; ++i) {
    const T m = Random<T>(g);
    std::vector<std::string> elems = SplitArray(Enc(m));
    elems.push_back(Unhex("a8" "6675747572652e31"));  // "future.1"
    elems.push_back(Unhex("c0"));                     // nil
    elems.push_back(Unhex("9201" "81a178c3"));        // [1, {"x": true}]
    T back;
    const Status s = Decode(JoinArray(elems), &back);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_TRUE(back == m);
  }
}

TYPED_TEST(MessageTest, MissingTrailingFieldsTakeDefaults) {
  using T = TypeParam;
  Gen g(TestSeed());
  for (int i = 0; i < 20; ++i) {
    const T m = Random<T>(g);
    const std::vector<std::string> elems = SplitArray(Enc(m));
    for (size_t k = 0; k < elems.size(); ++k) {
      SCOPED_TRACE("first " + std::to_string(k) + " fields");
      const std::string bytes =
          JoinArray(std::vector<std::string>(elems.begin(), elems.begin() + k));
      T back = Random<T>(g);
      const Status s = Decode(bytes, &back);
      if (k < Spec<T>::kRequired) {
        EXPECT_EQ(s.code(), StatusCode::kCorruption);
        EXPECT_TRUE(Contains(s, "needs at least " + std::to_string(Spec<T>::kRequired)))
            << s.ToString();
        EXPECT_TRUE(Contains(s, Spec<T>::kNames[k])) << s.ToString();  // the first missing
      } else {
        ASSERT_TRUE(s.ok()) << s.ToString();
        EXPECT_TRUE(back == Prefix(m, k));
      }
    }
  }
}

// Values of the wrong msgpack type for a field of each kind.
std::vector<std::string> WrongValues(char kind) {
  const std::string nil = "c0", yes = "c3", str = "a178", int5 = "05", neg = "ff",
                    f64 = "cb3ff8000000000000", map = "80", arr = "9101", bin = "c40178";
  std::vector<std::string> hex;
  switch (kind) {
    case 'u': hex = {nil, yes, str, neg, f64, arr}; break;
    case 'i': hex = {nil, yes, str, f64, arr, "cf8000000000000000" /* 2^63 > int64 */}; break;
    case 'd': hex = {nil, yes, str, arr, map}; break;
    case 'b': hex = {nil, int5, str, arr}; break;
    case 's': hex = {nil, yes, int5, bin, arr}; break;
    case 't': hex = {nil, yes, str, "00", "04", "cd0101", neg}; break;
    case 'a': hex = {nil, yes, str, int5, map, bin}; break;
    case 'o': hex = {yes, str, map}; break;
  }
  std::vector<std::string> out;
  for (const std::string& h : hex) out.push_back(Unhex(h));
  return out;
}

TYPED_TEST(MessageTest, WrongTypeIsCorruptionNamingTheField) {
  using T = TypeParam;
  Gen g(TestSeed());
  const T m = Random<T>(g);
  const std::vector<std::string> elems = SplitArray(Enc(m));
  for (size_t i = 0; i < elems.size(); ++i) {
    for (const std::string& wrong : WrongValues(Spec<T>::kKinds[i])) {
      std::vector<std::string> bad = elems;
      bad[i] = wrong;
      T back;
      const Status s = Decode(JoinArray(bad), &back);
      EXPECT_EQ(s.code(), StatusCode::kCorruption) << Spec<T>::kNames[i] << " = " << Hex(wrong);
      EXPECT_TRUE(Contains(s, std::string("field '") + Spec<T>::kNames[i] + "'")) << s.ToString();
      EXPECT_TRUE(Contains(s, Spec<T>::kName)) << s.ToString();
    }
  }
  // Not an array at all.
  for (const char* hex : {"c0", "05", "a178", "80", "c40190"}) {
    T back;
    EXPECT_EQ(Decode(Unhex(hex), &back).code(), StatusCode::kCorruption) << hex;
  }
}

TYPED_TEST(MessageTest, EveryTruncationIsCorruption) {
  using T = TypeParam;
  Gen g(TestSeed());
  for (int i = 0; i < 10; ++i) {
    const std::string bytes = Enc(Random<T>(g));
    for (size_t len = 0; len < bytes.size(); ++len) {
      T back;
      const Status s = Decode(std::string_view(bytes).substr(0, len), &back);
      ASSERT_EQ(s.code(), StatusCode::kCorruption) << "length " << len << " of " << Hex(bytes);
    }
    // Trailing bytes after a complete message are Corruption too.
    T back;
    EXPECT_EQ(Decode(bytes + '\0', &back).code(), StatusCode::kCorruption);
  }
}

TYPED_TEST(MessageTest, ByteFlipsNeverCrash) {
  using T = TypeParam;
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Gen g(seed);
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 1500; ++i) {
    std::string bytes = Enc(Random<T>(g));
    const int flips = 1 + static_cast<int>(rng() % 3);
    for (int f = 0; f < flips; ++f) {
      const size_t at = rng() % bytes.size();
      if (rng() % 2) {
        bytes[at] = static_cast<char>(bytes[at] ^ (1 << (rng() % 8)));
      } else {
        bytes[at] = static_cast<char>(rng());
      }
    }
    T back;
    const Status s = Decode(bytes, &back);
    ASSERT_TRUE(s.ok() || s.code() == StatusCode::kCorruption) << s.ToString();
    if (s.ok()) {  // whatever decodes re-encodes to something that decodes the same
      T again;
      ASSERT_TRUE(Decode(Enc(back), &again).ok());
      ASSERT_EQ(Enc(again), Enc(back));
    }
  }
}

// ---- golden bytes ---------------------------------------------------------------------------

// FileRecord {id {7, 5}} with every other field at its default (record_format.cc's table).
const std::string kRecord75 = "9f" "01" "07" "05" "90" "00" "66" "00" "00" "00" "00" "00" "00"
                              "00" "01" "90";

template <typename T>
void ExpectGolden(const T& msg, const std::string& hex) {
  EXPECT_EQ(Hex(Enc(msg)), hex);
  T back;
  const Status s = Decode(Unhex(hex), &back);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(back == msg);
}

FileRecord Record75() {
  FileRecord r;
  r.id = {7, 5};
  return r;
}

TEST(MessagesGoldenTest, Ping) {
  ExpectGolden(Ping{"hi"}, "91" "a26869");
  ExpectGolden(Ping{}, "91" "a0");
  ExpectGolden(Empty{}, "90");
  ExpectGolden(SearchDone{}, "97" "00" "00" "00" "00" "90" "90" "90");
  // A node before 1.4 sends six fields: no unknown attributes.
  SearchDone old;
  old.unknown_attrs = {"x"};
  ASSERT_TRUE(Decode(Unhex("96" "00" "00" "00" "00" "90" "90"), &old).ok());
  EXPECT_TRUE(old == SearchDone{});
}

TEST(MessagesGoldenTest, RequestEnvelope) {
  const std::string hex = "93"       // [
                          "cd03e8"   //  version 1000 (uint16)
                          "40"       //  type 64 = ping
                          "c404"     //  bin of 4 bytes:
                          "91a26869";  //  Ping{"hi"}
  EXPECT_EQ(Hex(EncodeRequest(MsgType::kPing, Ping{"hi"})), hex);
  EXPECT_EQ(Hex(EncodeRequest(MsgType::kPing, std::string_view(Unhex("91a26869")))), hex);
  RequestEnvelope e;
  const std::string bytes = Unhex(hex);
  ASSERT_TRUE(DecodeRequest(bytes, &e).ok());
  EXPECT_EQ(e.version, 1000u);
  EXPECT_EQ(e.type, MsgType::kPing);
  EXPECT_EQ(Hex(e.body), "91a26869");
  EXPECT_EQ(e.body.data(), bytes.data() + 7);  // points into the input, not a copy
  // Types >= 128 take a uint8/uint16 form.
  EXPECT_EQ(Hex(EncodeRequest(static_cast<MsgType>(300), std::string_view())),
            "93" "cd03e8" "cd012c" "c400");
}

TEST(MessagesGoldenTest, ReplyEnvelopes) {
  EXPECT_EQ(Hex(EncodeOkReply(Ping{"hi"})), "95"        // [
                                            "cd03e8"    //  version 1000
                                            "00"        //  code 0 (OK)
                                            "a0"        //  message ""
                                            "90"        //  redirects []
                                            "c404" "91a26869");  // body
  // An error: the body is dropped.
  EXPECT_EQ(Hex(EncodeReply(Status::NotFound("no such acg"), "ignored")),
            "95" "cd03e8" "01" "ab" "6e6f207375636820616367" "90" "c400");
  const std::string redirect_hex = "95" "cd03e8" "0d" "a5" "6d6f766564"  // 13, "moved"
                                   "91" "93" "09" "02" "a9" "7463703a2f2f683a31"  // [[9, 2, ..]]
                                   "c400";
  EXPECT_EQ(Hex(EncodeReply(Status::Redirect("moved"), "", {{9, 2, "tcp://h:1"}})),
            redirect_hex);
  ReplyEnvelope e;
  const std::string redirect_bytes = Unhex(redirect_hex);
  ASSERT_TRUE(DecodeReply(redirect_bytes, &e).ok());
  EXPECT_EQ(e.version, 1000u);
  EXPECT_EQ(e.status.code(), StatusCode::kRedirect);
  EXPECT_EQ(e.status.message(), "moved");
  ASSERT_EQ(e.redirects.size(), 1u);
  EXPECT_TRUE(e.redirects[0] == (AcgLocation{9, 2, "tcp://h:1"}));
  EXPECT_TRUE(e.body.empty());
}

TEST(MessagesGoldenTest, ApplyRequest) {
  Update put;
  put.op = UpdateOp::kPut;
  put.acg = 9;
  put.record = Record75();
  Update edge;
  edge.op = UpdateOp::kAddEdge;
  edge.acg = 9;
  edge.record = Record75();
  edge.edge_dst = {7, 6};
  edge.edge_weight = 3;
  ExpectGolden(ApplyRequest{{put, edge}},
               "91"                                          // [updates:
               "92"                                          //  [
               "96" "01" "09" + kRecord75 + "00" "00" "00" +  //   put, acg 9, record, no edge
               "96" "05" "09" + kRecord75 + "07" "06" "03");  //   edge -> {7, 6} weight 3
  // The updates array is exactly the update batch's (record_format.h) without its version.
  std::string batch;
  const std::vector<Update> updates = {put, edge};
  EncodeUpdateBatch(updates, &batch);
  EXPECT_EQ(Hex(batch).substr(4), Hex(Enc(ApplyRequest{{put, edge}})).substr(2));
}

TEST(MessagesGoldenTest, SearchQuery) {
  SearchQuery q;
  q.query = "size>1";
  q.scope = "/src";
  q.volume = 3;
  q.creds = WireCredentials{1000, 100, {4, 27}};
  q.limit = 50;
  q.sort_by = "mtime";
  q.descending = true;
  q.now_ns = 1700000000000000000;
  q.acgs = {7, 300};
  q.roots = {{3, "/usr"}};
  ExpectGolden(q, "9a"                   // 10 fields
                  "a6" "73697a653e31"    // "size>1"
                  "a4" "2f737263"        // "/src"
                  "03"                   // volume 3
                  "93" "cd03e8" "64" "92" "04" "1b"  // creds [1000, 100, [4, 27]]
                  "32"                   // limit 50
                  "a5" "6d74696d65"      // "mtime"
                  "c3"                   // descending
                  "cf" "17979cfe362a0000"  // now_ns (positive: uint64 form)
                  "92" "07" "cd012c"     // acgs [7, 300]
                  "91" "92" "03" "a4" "2f757372");  // roots [[3, "/usr"]]
  SearchQuery defaults;
  defaults.query = "x";
  ExpectGolden(defaults, "9a" "a178" "a12f" "c0" "c0" "00" "a0" "c2" "00" "90" "90");
}

TEST(MessagesGoldenTest, SearchHitsChunk) {
  FileRecord b = Record75();
  b.paths = {"/b"};
  ExpectGolden(SearchHitsChunk{{{"/a", Record75(), 9}, {"/b", b, 300}}},
               "91" "92"                                   // [hits: [
               "93" "a22f61" + kRecord75 + "09" +           //  ["/a", record, acg 9]
               "93" "a22f62" "9f" "01" "07" "05" "91a22f62"  //  ["/b", record with path "/b",
               "00" "66" "00" "00" "00" "00" "00" "00" "00" "01" "90" "cd012c");  // acg 300
}

TEST(MessagesGoldenTest, LocationsReply) {
  ExpectGolden(LocationsReply{{{{1, 0x1234}, 5, 2, "tcp://h:1"}, {{1, 7}, 0, 0, ""}}},
               "91" "92"                                             // [locations: [
               "94" "92" "01" "cd1234" "05" "02" "a9" "7463703a2f2f683a31"  // [[1,0x1234],5,2,..]
               "94" "92" "01" "07" "00" "00" "a0");                  //  [[1, 7], 0, 0, ""]
}

// An edge carries its ends' inode generations since 1.7; an edge of an older node (four
// fields) decodes with none.
TEST(MessagesGoldenTest, WireEdgeGenerations) {
  const EdgesReply reply{{WireEdge{5, {1, 10}, {1, 11}, 3, 7, 0x10000}}, false};
  const std::string hex = "92" "91" "96" "05" "92010a" "92010b" "03" "07" "ce00010000" "c2";
  EXPECT_EQ(Hex(Enc(reply)), hex);
  EdgesReply back;
  ASSERT_TRUE(Decode(Unhex(hex), &back).ok());
  ASSERT_EQ(back.edges.size(), 1u);
  EXPECT_EQ(back.edges[0].src_generation, 7u);
  EXPECT_EQ(back.edges[0].dst_generation, 0x10000u);
  EXPECT_EQ(back.edges[0].weight, 3u);
  ASSERT_TRUE(Decode(Unhex("92" "91" "94" "05" "92010a" "92010b" "03" "c2"), &back).ok());
  ASSERT_EQ(back.edges.size(), 1u);
  EXPECT_EQ(back.edges[0].src_generation, 0u);
  EXPECT_EQ(back.edges[0].dst_generation, 0u);
  EXPECT_EQ(back.edges[0].dst, (FileId{1, 11}));
}

TEST(MessagesGoldenTest, HeartbeatRequest) {
  ExpectGolden(HeartbeatRequest{3, {{1, 10}, {2, 300}}, uint64_t{1} << 40, 0.5, 7, {"tag"}},
               "96"                                   // 6 fields
               "03"                                   // node 3
               "92" "92" "01" "0a" "92" "02" "cd012c"  // acgs [[1, 10], [2, 300]]
               "cf" "0000010000000000"                // free_disk_bytes 2^40
               "cb" "3fe0000000000000"                // load 0.5 (float64)
               "07"                                   // cached_updates
               "91" "a3" "746167");                   // indexes ["tag"]
  // A whole-number double stays a float64 (docs/pitfalls.md MP-3: msgpack-c would write 0x02).
  EXPECT_EQ(Hex(Enc(HeartbeatRequest{0, {}, 0, 2.0, 0, {}})),
            "96" "00" "90" "00" "cb4000000000000000" "00" "90");
}

// ---- field rules beyond the generic ones ----------------------------------------------------

TEST(MessagesTest, DoublesAcceptIntegersAndFloat32) {
  // Other writers (msgpack-c's pack_double, other languages) may send 2.0 as 0x02 or float32.
  for (const auto& [hex, value] : std::vector<std::pair<std::string, double>>{
           {"02", 2.0},
           {"d0fe", -2.0},
           {"ca40200000", 2.5},
           {"cf8000000000000000", 9.223372036854775808e18}}) {
    HeartbeatRequest m;
    const Status s = Decode(Unhex("9403" "90" "00" + hex), &m);
    ASSERT_TRUE(s.ok()) << hex << ": " << s.ToString();
    EXPECT_EQ(m.load, value) << hex;
  }
  // NaN survives (compared by bits).
  HeartbeatRequest nan;
  nan.load = std::numeric_limits<double>::quiet_NaN();
  HeartbeatRequest back;
  ASSERT_TRUE(Decode(Enc(nan), &back).ok());
  EXPECT_TRUE(std::isnan(back.load));
}

TEST(MessagesTest, IntegerRanges) {
  struct Case {
    std::string hex;  // a whole message
    const char* field;
  };
  const std::vector<Case> bad = {
      {"92" "ce00000000" "a0", nullptr},              // control: node_id 0 decodes
      {"92" "cf0000000100000000" "a0", "node_id"},    // 2^32 in a uint32
      {"92" "ff" "a0", "node_id"},                    // -1 in a uint32
      {"92" "d0ff" "a0", "node_id"},                  // -1 as int8
  };
  for (const Case& c : bad) {
    RegisterNodeRequest m;
    const Status s = Decode(Unhex(c.hex), &m);
    if (c.field == nullptr) {
      EXPECT_TRUE(s.ok()) << s.ToString();
      continue;
    }
    EXPECT_EQ(s.code(), StatusCode::kCorruption) << c.hex;
    EXPECT_TRUE(Contains(s, c.field)) << s.ToString();
    EXPECT_TRUE(Contains(s, "uint32")) << s.ToString();
  }
  // The largest uint32 and uint64 pass; int64 takes its full range.
  RegisterNodeRequest max32;
  ASSERT_TRUE(Decode(Unhex("92" "ceffffffff" "a0"), &max32).ok());
  EXPECT_EQ(max32.node_id, 0xffffffffu);
  LocateAcgsRequest max64;
  ASSERT_TRUE(Decode(Unhex("91" "91" "cfffffffffffffffff"), &max64).ok());
  EXPECT_EQ(max64.acgs, std::vector<uint64_t>{~uint64_t{0}});
  LocateAcgsRequest negative;
  const Status neg = Decode(Unhex("91" "92" "01" "ff"), &negative);
  EXPECT_EQ(neg.code(), StatusCode::kCorruption);
  EXPECT_TRUE(Contains(neg, "field 'acgs' element 1 is not a uint64")) << neg.ToString();
  SearchQuery q;
  ASSERT_TRUE(Decode(Unhex("98" "a0" "a0" "c0" "c0" "00" "a0" "c2" "d38000000000000000"), &q).ok());
  EXPECT_EQ(q.now_ns, std::numeric_limits<int64_t>::min());
  // Nested uint32s: a supplementary group, an optional volume, a FileId volume.
  const Status group =
      Decode(Unhex("94" "a0" "a0" "c0" "93" "00" "00" "91" "cf0000000100000000"), &q);
  EXPECT_EQ(group.code(), StatusCode::kCorruption);
  EXPECT_TRUE(Contains(group, "field 'creds' field 'groups' element 0 is not a uint32"))
      << group.ToString();
  const Status volume = Decode(Unhex("93" "a0" "a0" "ff"), &q);
  EXPECT_EQ(volume.code(), StatusCode::kCorruption);
  EXPECT_TRUE(Contains(volume, "field 'volume'")) << volume.ToString();
  FilesRequest files;
  const Status id = Decode(Unhex("91" "91" "92" "cf0000000100000000" "01"), &files);
  EXPECT_EQ(id.code(), StatusCode::kCorruption);
  EXPECT_TRUE(Contains(id, "field 'files' element 0 field 'volume' is not a uint32"))
      << id.ToString();
}

TEST(MessagesTest, IndexTypeIsValidated) {
  for (uint8_t t = 0; t < 8; ++t) {
    IndexDef def;
    const std::string hex = "92" "a178" "0" + std::to_string(t);
    const Status s = Decode(Unhex(hex), &def);
    if (t >= 1 && t <= 3) {
      ASSERT_TRUE(s.ok()) << s.ToString();
      EXPECT_EQ(static_cast<uint8_t>(def.type), t);
    } else {
      EXPECT_EQ(s.code(), StatusCode::kCorruption) << hex;
      EXPECT_TRUE(Contains(s, "field 'type' is not an index type")) << s.ToString();
    }
  }
}

TEST(MessagesTest, NestedStructsFollowTheCompatibilityRule) {
  // AcgLoad with its optional field missing and with an extra field.
  HeartbeatRequest hb;
  ASSERT_TRUE(Decode(Unhex("92" "05" "92" "91" "01" "93" "02" "03" "a178"), &hb).ok());
  ASSERT_EQ(hb.acgs.size(), 2u);
  EXPECT_TRUE(hb.acgs[0] == (AcgLoad{1, 0}));
  EXPECT_TRUE(hb.acgs[1] == (AcgLoad{2, 3}));
  EXPECT_EQ(hb.node_id, 5u);
  EXPECT_EQ(hb.load, 0.0);
  // An AcgLoad without its required acg.
  Status s = Decode(Unhex("92" "05" "91" "90"), &hb);
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_TRUE(Contains(s, "field 'acgs' element 0 has 0 fields, needs at least 1 (missing 'acg')"))
      << s.ToString();
  // NodeInfo with only its 3 required fields; one with 2 fails.
  NodesReply nodes;
  ASSERT_TRUE(Decode(Unhex("91" "91" "93" "02" "a178" "c3"), &nodes).ok());
  ASSERT_EQ(nodes.nodes.size(), 1u);
  EXPECT_TRUE(nodes.nodes[0] == (NodeInfo{2, "x", true, 0, 0, 0, 0, 0}));
  EXPECT_EQ(Decode(Unhex("91" "91" "92" "02" "a178"), &nodes).code(), StatusCode::kCorruption);
  // WireCredentials without groups; WireHit without acg; FileLocation without endpoint;
  // AssignItem with only its file; AcgLocation without endpoint.
  SearchQuery q;
  ASSERT_TRUE(Decode(Unhex("94" "a0" "a0" "c0" "92" "cd03e8" "64"), &q).ok());
  ASSERT_TRUE(q.creds.has_value());
  EXPECT_TRUE(*q.creds == (WireCredentials{1000, 100, {}}));
  EXPECT_EQ(q.scope, "");  // present in the bytes: "" is kept, not replaced by the default "/"
  SearchQuery only_query;
  ASSERT_TRUE(Decode(Unhex("91" "a178"), &only_query).ok());
  EXPECT_EQ(only_query.scope, "/");
  EXPECT_FALSE(only_query.volume.has_value());
  EXPECT_FALSE(only_query.creds.has_value());
  SearchHitsChunk chunk;
  ASSERT_TRUE(Decode(Unhex("91" "91" "92" "a22f61" + kRecord75), &chunk).ok());
  ASSERT_EQ(chunk.hits.size(), 1u);
  EXPECT_TRUE(chunk.hits[0] == (WireHit{"/a", Record75(), 0}));
  EXPECT_EQ(Decode(Unhex("91" "91" "91" "a22f61"), &chunk).code(), StatusCode::kCorruption);
  LocationsReply locations;
  ASSERT_TRUE(Decode(Unhex("91" "91" "93" "920102" "03" "04"), &locations).ok());
  EXPECT_TRUE(locations.locations.at(0) == (FileLocation{{1, 2}, 3, 4, ""}));
  AssignFilesRequest assign;
  ASSERT_TRUE(Decode(Unhex("91" "91" "91" "920102"), &assign).ok());
  EXPECT_TRUE(assign.items.at(0) == (AssignItem{{1, 2}, "", {}}));
  AcgLocationsReply acgs;
  ASSERT_TRUE(Decode(Unhex("91" "91" "92" "09" "00"), &acgs).ok());
  EXPECT_TRUE(acgs.locations.at(0) == (AcgLocation{9, 0, ""}));
  // A FileId needs both fields and may carry more.
  FilesRequest files;
  EXPECT_EQ(Decode(Unhex("91" "91" "9101"), &files).code(), StatusCode::kCorruption);
  ASSERT_TRUE(Decode(Unhex("91" "91" "93010203"), &files).ok());
  EXPECT_EQ(files.files, (std::vector<FileId>{{1, 2}}));
  // Nested records keep their own format version: a newer one is Corruption.
  RecordReply rr;
  std::string rec = kRecord75;
  rec.replace(2, 2, "03");
  const Status v = Decode(Unhex("91" + rec), &rr);
  EXPECT_EQ(v.code(), StatusCode::kCorruption);
  EXPECT_TRUE(Contains(v, "field 'record' record: unsupported version 3")) << v.ToString();
}

// ---- envelopes ------------------------------------------------------------------------------

TEST(EnvelopeTest, RequestVersions) {
  const std::string body = Unhex("91a26869");
  auto request = [&](const std::string& version_hex, const std::string& rest) {
    return Unhex("93" + version_hex + rest);
  };
  const std::string ping_rest = "40" "c404" "91a26869";
  // Same major, other minor: accepted.
  for (const char* v : {"cd03e8", "cd03e9", "cd07cf"}) {  // 1000, 1001, 1999
    RequestEnvelope e;
    const std::string bytes = request(v, ping_rest);  // e.body points into it
    ASSERT_TRUE(DecodeRequest(bytes, &e).ok()) << v;
    EXPECT_EQ(e.body, body);
  }
  // Other majors: NotSupported with the envelope filled in.
  for (const auto& [hex, version] : std::vector<std::pair<std::string, uint32_t>>{
           {"cd07d0", 2000}, {"cd03e7", 999}, {"00", 0}, {"ceffffffff", 0xffffffff}}) {
    RequestEnvelope e;
    const std::string bytes = request(hex, ping_rest);
    const Status s = DecodeRequest(bytes, &e);
    EXPECT_EQ(s.code(), StatusCode::kNotSupported) << hex;
    EXPECT_TRUE(Contains(s, "protocol version " + std::to_string(version) + ", expected 1000"))
        << s.ToString();
    EXPECT_EQ(e.version, version);
    EXPECT_EQ(e.type, MsgType::kPing);
    EXPECT_EQ(e.body, body);
  }
  // Another major may lay the rest out differently: still NotSupported, not Corruption.
  RequestEnvelope e;
  EXPECT_EQ(DecodeRequest(Unhex("91" "cd07d0"), &e).code(), StatusCode::kNotSupported);
  EXPECT_EQ(e.version, 2000u);
  EXPECT_EQ(DecodeRequest(Unhex("93" "cd07d0" "a178" "c0"), &e).code(),
            StatusCode::kNotSupported);
}

TEST(EnvelopeTest, RequestShape) {
  RequestEnvelope e;
  // Extra trailing fields are ignored.
  const std::string extra = Unhex("95" "cd03e8" "40" "c40190" "c0" "a178");  // e.body views it
  ASSERT_TRUE(DecodeRequest(extra, &e).ok());
  EXPECT_EQ(Hex(e.body), "90");
  // Unknown type numbers decode (the dispatcher answers NotSupported).
  ASSERT_TRUE(DecodeRequest(Unhex("93" "cd03e8" "cdffff" "c400"), &e).ok());
  EXPECT_EQ(static_cast<uint16_t>(e.type), 0xffff);
  EXPECT_STREQ(MsgTypeName(e.type), "unknown");
  struct Case {
    const char* hex;
    const char* text;
  };
  const Case cases[] = {
      {"92" "cd03e8" "40", "needs at least 3"},
      {"90", "empty array"},
      {"c0", "not an array"},
      {"93" "a178" "40" "c400", "field 'version' is not a uint32"},
      {"93" "cd03e8" "ce00010000" "c400", "field 'type' is not a uint16"},
      {"93" "cd03e8" "ff" "c400", "field 'type' is not a uint16"},
      {"93" "cd03e8" "40" "a0", "field 'body' is not a bin"},
      {"93" "cd03e8" "40" "c405" "91a26869", "beyond the end"},
      {"93" "cd03e8" "40" "c400" "00", "1 trailing bytes"},
  };
  for (const Case& c : cases) {
    const Status s = DecodeRequest(Unhex(c.hex), &e);
    EXPECT_EQ(s.code(), StatusCode::kCorruption) << c.hex;
    EXPECT_TRUE(Contains(s, c.text)) << c.hex << ": " << s.ToString();
    EXPECT_TRUE(Contains(s, "request envelope")) << s.ToString();
  }
}

TEST(EnvelopeTest, ReplyStatusCodes) {
  // Every known code travels with its message.
  for (int code = 1; code <= 13; ++code) {
    const Status st(static_cast<StatusCode>(code), "why " + std::to_string(code));
    ReplyEnvelope e;
    const std::string bytes = EncodeReply(st, "body");
    ASSERT_TRUE(DecodeReply(bytes, &e).ok());
    EXPECT_EQ(e.status.code(), st.code());
    EXPECT_EQ(e.status.message(), st.message());
    EXPECT_TRUE(e.body.empty());  // not OK: no body
  }
  // Unknown codes keep their number in an Internal status.
  for (const auto& [hex, number] : std::vector<std::pair<std::string, std::string>>{
           {"0e", "14"}, {"cd03e7", "999"}, {"ff", "-1"}, {"d38000000000000000",
                                                           "-9223372036854775808"}}) {
    ReplyEnvelope e;
    ASSERT_TRUE(DecodeReply(Unhex("95" "cd03e8" + hex + "a3" "626164" "90" "c400"), &e).ok());
    EXPECT_EQ(e.status.code(), StatusCode::kInternal) << hex;
    EXPECT_EQ(e.status.message(), "unknown status code " + number + ": bad");
  }
  // OK: body kept, message ignored.
  ReplyEnvelope e;
  const std::string bytes = Unhex("95" "cd03e8" "00" "a178" "90" "c40190");
  ASSERT_TRUE(DecodeReply(bytes, &e).ok());
  EXPECT_TRUE(e.status.ok());
  EXPECT_EQ(Hex(e.body), "90");
  EXPECT_EQ(e.body.data(), bytes.data() + bytes.size() - 1);  // points into the input
  // Minimal reply: version and code; the rest defaults.
  ASSERT_TRUE(DecodeReply(Unhex("92" "cd03e8" "08"), &e).ok());
  EXPECT_EQ(e.status.code(), StatusCode::kUnavailable);
  EXPECT_EQ(e.status.message(), "");
  EXPECT_TRUE(e.redirects.empty());
  // Extra trailing fields.
  ASSERT_TRUE(DecodeReply(Unhex("97" "cd03e8" "00" "a0" "90" "c400" "c3" "a178"), &e).ok());
  EXPECT_TRUE(e.status.ok());
}

TEST(EnvelopeTest, ReplyShapeAndVersions) {
  struct Case {
    const char* hex;
    StatusCode code;
    const char* text;
  };
  const Case cases[] = {
      {"91" "cd03e8", StatusCode::kCorruption, "needs at least 2"},
      {"95" "cd03e8" "a0" "a0" "90" "c400", StatusCode::kCorruption, "field 'code'"},
      {"95" "cd03e8" "01" "01" "90" "c400", StatusCode::kCorruption, "field 'message'"},
      {"95" "cd03e8" "0d" "a0" "a0" "c400", StatusCode::kCorruption, "field 'redirects'"},
      {"95" "cd03e8" "0d" "a0" "919101" "c400", StatusCode::kCorruption,
       "field 'redirects' element 0 has 1 fields, needs at least 2"},
      {"95" "cd03e8" "0d" "a0" "91" "92" "01" "ff" "c400", StatusCode::kCorruption,
       "field 'redirects' element 0 field 'node_id' is not a uint32"},
      {"95" "cd03e8" "00" "a0" "90" "a0", StatusCode::kCorruption, "field 'body'"},
      {"95" "cd07d0" "00" "a0" "90" "c400", StatusCode::kNotSupported, "protocol version 2000"},
      {"92" "01" "c0", StatusCode::kNotSupported, "protocol version 1, expected 1000"},
  };
  for (const Case& c : cases) {
    ReplyEnvelope e;
    const Status s = DecodeReply(Unhex(c.hex), &e);
    EXPECT_EQ(s.code(), c.code) << c.hex;
    EXPECT_TRUE(Contains(s, c.text)) << c.hex << ": " << s.ToString();
  }
  ReplyEnvelope e;
  ASSERT_EQ(DecodeReply(Unhex("95" "cd07d0" "05" "a178" "90" "c400"), &e).code(),
            StatusCode::kNotSupported);
  EXPECT_EQ(e.version, 2000u);  // filled in for the caller
  EXPECT_EQ(e.status.code(), StatusCode::kAlreadyExists);
}

// The copy part carries its bytes as msgpack bin (any byte, no UTF-8 question).
TEST(MessagesGoldenTest, AdoptAcgChunk) {
  ExpectGolden(AdoptAcgChunk{5, 2, 0, 3, std::string("\0\xff", 2), 9},
               "96" "05" "02" "00" "03" "c402" "00ff" "09");
  AdoptAcgChunk back;
  EXPECT_TRUE(Decode(Unhex("95" "05" "02" "00" "03" "c400"), &back).ok()) << "crc optional";
  EXPECT_EQ(Decode(Unhex("96" "05" "02" "00" "03" "a100" "09"), &back).code(),
            StatusCode::kCorruption)
      << "data as str";
  EXPECT_EQ(Decode(Unhex("94" "05" "02" "00" "03"), &back).code(), StatusCode::kCorruption);
}

TEST(EnvelopeTest, MsgTypeNames) {
  const std::vector<std::pair<MsgType, const char*>> names = {
      {MsgType::kRegisterNode, "register-node"}, {MsgType::kHeartbeat, "heartbeat"},
      {MsgType::kLookupFiles, "lookup-files"},   {MsgType::kAssignFiles, "assign-files"},
      {MsgType::kForgetFiles, "forget-files"},   {MsgType::kLocateAcgs, "locate-acgs"},
      {MsgType::kListNodes, "list-nodes"},       {MsgType::kCreateIndex, "create-index"},
      {MsgType::kDropIndex, "drop-index"},       {MsgType::kListIndexes, "list-indexes"},
      {MsgType::kClusterStatus, "cluster-status"}, {MsgType::kRegisterVolume, "register-volume"},
      {MsgType::kListVolumes, "list-volumes"},   {MsgType::kIndexHolders, "index-holders"},
      {MsgType::kApply, "apply"},                {MsgType::kSearch, "search"},
      {MsgType::kGetRecord, "get-record"},       {MsgType::kNodeStatus, "node-status"},
      {MsgType::kPing, "ping"},                 {MsgType::kListEdges, "list-edges"},
      {MsgType::kNewAcg, "new-acg"},            {MsgType::kSplitDone, "split-done"},
      {MsgType::kMoveAcg, "move-acg"},          {MsgType::kMigrateAcg, "migrate-acg"},
      {MsgType::kAdoptAcg, "adopt-acg"},        {MsgType::kReleaseAcg, "release-acg"},
      {MsgType::kMountStatus, "mount-status"},  {MsgType::kRemoveVolume, "remove-volume"},
      {MsgType::kWatch, "watch"},
  };
  for (const auto& [type, name] : names) EXPECT_STREQ(MsgTypeName(type), name);
  // Every number 0..1000 that is not listed is "unknown".
  size_t known = 0;
  for (int n = 0; n <= 1000; ++n) {
    if (std::string(MsgTypeName(static_cast<MsgType>(n))) != "unknown") ++known;
  }
  EXPECT_EQ(known, names.size());
}

// ---- hostile input --------------------------------------------------------------------------

// Every decoder of this header, by name.
std::vector<std::pair<std::string, std::function<Status(std::string_view)>>> AllDecoders() {
  std::vector<std::pair<std::string, std::function<Status(std::string_view)>>> out;
  out.emplace_back("request", [](std::string_view b) {
    RequestEnvelope e;
    return DecodeRequest(b, &e);
  });
  out.emplace_back("reply", [](std::string_view b) {
    ReplyEnvelope e;
    return DecodeReply(b, &e);
  });
  [&]<typename... T>(TypeList<T...>) {
    (out.emplace_back(Spec<T>::kName,
                      [](std::string_view b) {
                        T m;
                        return Decode(b, &m);
                      }),
     ...);
  }(AllMessageList{});
  out.emplace_back("AdoptAcgChunk", [](std::string_view b) {
    AdoptAcgChunk m;
    return Decode(b, &m);
  });
  return out;
}

TEST(HostileInputTest, HugeClaimsFailBeforeParsing) {
  // Headers claiming up to 4G elements or bytes in a handful of bytes: rejected by the
  // structure check (nothing is parsed, so msgpack-c never sees the claim) with next to no
  // allocation.
  const char* claims[] = {"ddffffffff", "dcffff", "dfffffffff", "deffff", "dbffffffff",
                          "c6ffffffff", "c9ffffffff01", "91ddffffffff", "93cd03e840c6ffffffff",
                          "95cd03e800a0ddffffffff", "dd0001000001"};
  const auto decoders = AllDecoders();
  ASSERT_EQ(decoders.size(), 38u);
  for (const char* hex : claims) {
    const std::string bytes = Unhex(hex);
    for (const auto& [name, decode] : decoders) {
      Status s;
      const size_t peak = PeakNewBytes([&] { s = decode(bytes); });
      EXPECT_EQ(s.code(), StatusCode::kCorruption) << name << " " << hex;
      EXPECT_TRUE(Contains(s, "beyond the end")) << name << " " << hex << ": " << s.ToString();
      EXPECT_LT(peak, 1024u) << name << " " << hex;
    }
  }
}

TEST(HostileInputTest, ArrayLimitAndDepthLimit) {
  // kMaxWireArray elements decode; one more is Corruption even though every byte is there.
  std::string ok = Unhex("91dd") + std::string("\x00\x10\x00\x00", 4) +
                   std::string(kMaxWireArray, '\x07');
  LocateAcgsRequest m;
  ASSERT_TRUE(Decode(ok, &m).ok());
  EXPECT_EQ(m.acgs.size(), kMaxWireArray);
  std::string over = Unhex("91dd") + std::string("\x00\x10\x00\x01", 4) +
                     std::string(kMaxWireArray + 1, '\x07');
  Status s = Decode(over, &m);
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_TRUE(Contains(s, "array size overflow")) << s.ToString();
  // 10k nested arrays, and nesting just over the limit inside a valid message.
  for (const auto& [name, decode] : AllDecoders()) {
    EXPECT_EQ(decode(std::string(10000, '\x91') + '\x01').code(), StatusCode::kCorruption)
        << name;
  }
  // A Ping with an extra trailing field nested 15 deep: 16 containers are allowed, 17 not.
  Ping p;
  s = Decode(Unhex("92a0") + std::string(15, '\x91') + '\x01', &p);
  EXPECT_TRUE(s.ok()) << s.ToString();
  s = Decode(Unhex("92a0") + std::string(16, '\x91') + '\x01', &p);
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_TRUE(Contains(s, "depth")) << s.ToString();
}

TEST(HostileInputTest, GarbageAndMutationsStayBounded) {
  // Random bytes and mutated valid encodings through every decoder: OK, Corruption or
  // (envelopes) NotSupported; and what operator new allocates stays proportional to the input.
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  Gen g(seed);
  std::vector<std::string> valid;
  for (int i = 0; i < 4; ++i) {
    valid.push_back(Enc(Random<SearchHitsChunk>(g)));
    valid.push_back(Enc(Random<ApplyRequest>(g)));
    valid.push_back(Enc(Random<ClusterStatusReply>(g)));
    valid.push_back(EncodeRequest(MsgType::kSearch, Random<SearchQuery>(g)));
    valid.push_back(EncodeReply(Status::Redirect("r"), "", Random<AcgLocationsReply>(g).locations));
    valid.push_back(EncodeOkReply(Random<AssignFilesRequest>(g)));
  }
  // Dense inputs: many small elements per byte, the worst case for the decoded size.
  std::string ids = Unhex("91dc0400");  // FilesRequest, 1024 ids [0, 0]
  std::string names = Unhex("96009000cb000000000000000000dc0400");  // 1024 "" index names
  std::string paths = Unhex("919f010705dc0400");  // RecordReply, a record with 1024 "" paths
  std::string hits = Unhex("91dc00c8");  // SearchHitsChunk, 200 minimal hits
  for (int i = 0; i < 1024; ++i) {
    ids += Unhex("920000");
    names += Unhex("a0");
    paths += Unhex("a0");
  }
  paths += Unhex("0066000000000000000190");
  for (int i = 0; i < 200; ++i) hits += Unhex("92a0" + kRecord75);
  {
    FilesRequest f;
    HeartbeatRequest h;
    RecordReply r;
    SearchHitsChunk c;
    size_t peak = PeakNewBytes([&] { ASSERT_TRUE(Decode(ids, &f).ok()); });
    EXPECT_EQ(f.files.size(), 1024u);
    EXPECT_LE(peak, 160 * ids.size() + 16384);
    peak = PeakNewBytes([&] { ASSERT_TRUE(Decode(names, &h).ok()); });
    EXPECT_EQ(h.indexes.size(), 1024u);
    EXPECT_LE(peak, 160 * names.size() + 16384);
    peak = PeakNewBytes([&] { ASSERT_TRUE(Decode(paths, &r).ok()); });
    EXPECT_EQ(r.record.paths.size(), 1024u);
    EXPECT_LE(peak, 160 * paths.size() + 16384);
    peak = PeakNewBytes([&] { ASSERT_TRUE(Decode(hits, &c).ok()); });
    EXPECT_EQ(c.hits.size(), 200u);
    EXPECT_LE(peak, 160 * hits.size() + 16384);
  }
  for (const std::string* dense : {&ids, &names, &paths, &hits}) valid.push_back(*dense);
  const auto decoders = AllDecoders();
  size_t ok = 0;
  size_t worst_ratio = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string bytes;
    if (i % 4 == 0) {
      bytes.resize(rng() % 200);
      for (char& c : bytes) c = static_cast<char>(rng());
    } else {
      bytes = valid[rng() % valid.size()];
      const int flips = 1 + static_cast<int>(rng() % 4);
      for (int f = 0; f < flips && !bytes.empty(); ++f) {
        bytes[rng() % bytes.size()] = static_cast<char>(rng());
      }
    }
    for (const auto& [name, decode] : decoders) {
      Status s;
      const size_t peak = PeakNewBytes([&] { s = decode(bytes); });
      ASSERT_TRUE(s.ok() || s.code() == StatusCode::kCorruption ||
                  (s.code() == StatusCode::kNotSupported && (name == "request" || name == "reply")))
          << name << ": " << s.ToString();
      if (s.ok()) ++ok;
      // Bound: 160 bytes of C++ objects per input byte plus a constant (vectors double, a
      // 1-byte empty string is a 32-byte std::string, an 18-byte hit a ~250-byte WireHit).
      ASSERT_LE(peak, 160 * bytes.size() + 16384) << name << " " << Hex(bytes.substr(0, 64));
      if (bytes.size() > 100) worst_ratio = std::max(worst_ratio, peak / bytes.size());
    }
  }
  EXPECT_GT(ok, 1000u);  // the mutations do reach the decoders' success paths
  std::printf("decoded OK: %zu; worst allocation ratio (inputs > 100 B): %zu bytes/byte\n", ok,
              worst_ratio);
}

}  // namespace
}  // namespace propeller::wire
