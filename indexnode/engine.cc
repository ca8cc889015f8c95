#include "indexnode/engine.h"
#include "indexnode/move_gate.h"
#include "indexnode/open_acgs.h"
#include "indexnode/periodic_thread.h"
#include "indexnode/quarantine.h"
#include "indexnode/split_reports.h"

#include <fcntl.h>
#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "common/crc32c.h"
#include "common/lmdb_check.h"
#include "common/logging.h"
#include "common/mutex.h"
#include "common/query/query.h"
#include "common/secure_dir.h"
#include "common/thread_pool.h"
#include "indexnode/acg.h"
#include "indexnode/dir_table.h"
#include "indexnode/wal.h"
#include "schemas/keys.h"
#include "schemas/messages.h"
#include "schemas/record_format.h"
#include "schemas/wal_format.h"

namespace propeller {

const char* DurabilityName(Durability d) {
  return d == Durability::kSync ? "sync" : "default";
}

namespace {

constexpr int64_t kCommitterTickNs = 50'000'000;  // how often the committer looks at caches
// An administrator's consent to start without a lost log (Engine::Impl::CheckLogPresent).
constexpr char kStartWithoutLog[] = "START-WITHOUT-LOG";

Status ValidateUpdate(const Update& u) {
  if (u.acg == 0) return Status::InvalidArgument("update names ACG 0 (ACG ids start at 1)");
  switch (u.op) {
    case UpdateOp::kPut: {
      if (u.record.paths.empty()) return Status::InvalidArgument("record has no path");
      for (const std::string& p : u.record.paths) {
        std::string why = ValidatePath(p);
        if (!why.empty()) return Status::InvalidArgument("bad path '" + p + "': " + why);
      }
      if (!std::is_sorted(u.record.paths.begin(), u.record.paths.end()) ||
          std::adjacent_find(u.record.paths.begin(), u.record.paths.end()) !=
              u.record.paths.end()) {
        return Status::InvalidArgument("record paths must be sorted and unique");
      }
      switch (u.record.type) {
        case FileType::kRegular: case FileType::kDirectory: case FileType::kSymlink:
        case FileType::kOther: break;
        default: return Status::InvalidArgument("record has an unknown file type");
      }
      return Status::OK();
    }
    case UpdateOp::kDelete: case UpdateOp::kSetAttrs: case UpdateOp::kRemoveAttrs:
    case UpdateOp::kAddEdge:
      return Status::OK();
  }
  return Status::InvalidArgument("unknown update op " + std::to_string(static_cast<int>(u.op)));
}

// Catalogue file: one "name type\n" line per user index.
std::string EncodeCatalogue(const std::vector<IndexSpec>& specs) {
  std::string out;
  for (const IndexSpec& s : specs) {
    out += s.name;
    out += ' ';
    out += IndexTypeName(s.type);
    out += '\n';
  }
  return out;
}

Status DecodeCatalogue(std::string_view text, std::vector<IndexSpec>* specs) {
  size_t line_no = 0;
  while (!text.empty()) {
    ++line_no;
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    if (line.empty()) continue;
    size_t sp = line.find(' ');
    if (sp == std::string_view::npos) {
      return Status::Corruption("index catalogue line " + std::to_string(line_no) +
                                " is malformed");
    }
    std::string name(line.substr(0, sp));
    Result<IndexType> type = ParseIndexType(line.substr(sp + 1));
    if (!type.ok() || !ValidateIndexName(name).empty()) {
      return Status::Corruption("index catalogue line " + std::to_string(line_no) +
                                " is malformed");
    }
    specs->push_back(IndexSpec{name, *type});
  }
  return Status::OK();
}

bool IsBuiltinIndex(std::string_view name) {
  return name == "path" || name == "keyword" || name == "inode";
}

}  // namespace

class Engine::Impl {
 public:
  static EngineOptions WithDefaults(EngineOptions o) {
    if (o.env == nullptr) o.env = Env::Default();
    return o;
  }

  explicit Impl(const EngineOptions& o)
      : options_(WithDefaults(o)),
        reports_(options_.env, JoinPath(options_.data_dir, "acg")),
        quarantine_(options_.env, options_.data_dir) {
    int threads = options_.search_threads;
    if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    pool_ = std::make_unique<ThreadPool>(threads);
    commit_lanes_ = options_.commit_threads > 0
                        ? static_cast<size_t>(options_.commit_threads)
                        : std::max<size_t>(1, std::thread::hardware_concurrency());
    // Its own workers, so a long commit pass never queues ahead of a search's tasks.
    if (commit_lanes_ > 1) commit_pool_ = std::make_unique<ThreadPool>(commit_lanes_ - 1);
    ctx_.catalogue = [this] {
      MutexLock lock(&specs_mu_);
      return user_indexes_;
    };
    ctx_.on_open = [this](Acg* acg) { OnAcgOpened(acg); };
    ctx_.use_clock = &use_clock_;
    ctx_.commit_hook = options_.commit_hook;
  }

  ~Impl() {
    Status s = Close();
    if (!s.ok()) Log(LogLevel::kError, "engine close: %s", s.ToString().c_str());
  }

  Status Close() {
    if (closed_) return Status::OK();
    closed_ = true;
    StopCommitter();
    Status result;
    if (!crashed_ && wal_) {  // no log: Open failed before anything could be cached
      result = CommitAll();
      Status synced = wal_->Close();
      if (result.ok()) result = synced;
      // Every ACG committed and closed: the store's files are known good as they are now, so
      // the next start may skip reading them all (Store::Open).
      if (result.ok()) {
        bool all_closed = true;
        for (Acg* acg : AllAcgs()) {
          acg->CloseClean();
          all_closed &= !acg->is_open() || acg->retired();
        }
        if (all_closed && store_ != nullptr) store_->CloseClean();
      }
    }
    wal_.reset();
    return result;
  }

  Status Open() {
    Env* env = options_.env;
    if (options_.data_dir.empty()) return Status::InvalidArgument("no data directory given");
    if (options_.group_commit_interval_ns <= 0 || options_.commit_timeout_ns < 0) {
      return Status::InvalidArgument("group commit interval must be > 0 and commit timeout >= 0");
    }
    if (options_.wal_segment_bytes < 4096 || options_.store_map_size < (1u << 20)) {
      return Status::InvalidArgument("log segments must be >= 4 KiB and the store map >= 1 MiB");
    }
    if (options_.store_shards > kMaxStoreShards) {
      return Status::InvalidArgument("the store has 1 to " + std::to_string(kMaxStoreShards) +
                                     " shards (0: one per core)");
    }
    if (options_.cache_bound_updates == 0 || options_.total_cache_bound_updates == 0) {
      return Status::InvalidArgument("cache bounds must be > 0");
    }
    if (options_.tune_malloc) TuneMalloc();
    open_acgs_.SetBounds(options_.max_open_acgs, options_.max_open_acg_bytes);
    PROPELLER_RETURN_IF_ERROR(env->CreateDirs(JoinPath(options_.data_dir, "acg")));
    PROPELLER_RETURN_IF_ERROR(CheckLayout());
    StoreOptions so;
    so.dir = JoinPath(options_.data_dir, "store");
    so.shards = options_.store_shards;
    so.map_size = options_.store_map_size;
    so.env = env;
    std::vector<std::pair<unsigned, std::string>> damaged_shards;
    PROPELLER_ASSIGN_OR_RETURN(
        store_, Store::Open(so, JoinPath(options_.data_dir, "quarantine"), &damaged_shards));
    ctx_.store = store_.get();
    quarantine_.SetStore(store_.get());
    catalogue_path_ = JoinPath(options_.data_dir, "indexes");
    if (env->FileExists(catalogue_path_)) {
      std::string text;
      PROPELLER_RETURN_IF_ERROR(ReadFileToString(env, catalogue_path_, &text));
      std::vector<IndexSpec> specs;
      PROPELLER_RETURN_IF_ERROR(DecodeCatalogue(text, &specs));
      MutexLock lock(&specs_mu_);
      user_indexes_ = std::move(specs);
    }
    // Open every ACG (each is closed again as the cache of open ACGs overflows): the log's next
    // LSN must exceed every LSN any ACG has applied (a power loss may have cut the log's
    // unsynced tail after an ACG had committed it), and the permission table starts from the
    // committed directories.
    PROPELLER_ASSIGN_OR_RETURN(std::vector<std::string> names,
                               env->GetChildren(JoinPath(options_.data_dir, "acg")));
    PROPELLER_RETURN_IF_ERROR(CheckLogPresent(names));
    // A damaged shard was set aside and starts empty: every ACG that lived there is rebuilt.
    for (const auto& [shard, why] : damaged_shards) {
      for (const std::string& name : names) {
        char* end = nullptr;
        const unsigned long long id = std::strtoull(name.c_str(), &end, 10);
        if (name.empty() || *end != '\0' || id == 0 || id % store_->shard_count() != shard) {
          continue;
        }
        if (env->FileExists(JoinPath(AcgDir(id), "data.mdb"))) continue;  // not converted yet
        PROPELLER_RETURN_IF_ERROR(quarantine_.Put(id, why, /*keep_data=*/false));
      }
    }
    PROPELLER_RETURN_IF_ERROR(DropOrphanRanges(names));
    PROPELLER_RETURN_IF_ERROR(UpgradeLayout3(names));
    uint64_t max_applied = 0;
    auto open_acg = [&](uint64_t id) -> Status {
      PROPELLER_ASSIGN_OR_RETURN(Acg * acg, GetOrCreateAcg(id));
      max_applied = std::max(max_applied, acg->applied_lsn());
      std::vector<FileRecord> dirs;
      PROPELLER_RETURN_IF_ERROR(acg->ListDirectories(&dirs));
      for (const FileRecord& d : dirs) dir_table_.Put(d);
      return Status::OK();
    };
    {
      WriterLock lock(&acgs_mu_);
      PROPELLER_RETURN_IF_ERROR(ReadMoved(&moved_));
      any_moved_.store(!moved_.empty());
    }
    std::vector<uint64_t> split_targets;  // with a split marker: decided below
    for (const std::string& name : names) {
      char* end = nullptr;
      unsigned long long id = std::strtoull(name.c_str(), &end, 10);
      if (id != 0 && end != nullptr && std::string_view(end) == kAdoptSuffix) {
        Log(LogLevel::kWarning, "removing %s: an unfinished adoption's copy", name.c_str());
        PROPELLER_RETURN_IF_ERROR(RemoveDir(JoinPath(JoinPath(options_.data_dir, "acg"), name)));
        continue;
      }
      if (name.empty() || *end != '\0' || id == 0) continue;
      // An adoption that did not reach its commit point: the source still has the ACG.
      // A directory of an ACG that moved away: its removal did not finish.
      const bool unadopted = env->FileExists(JoinPath(AcgDir(id), kAdoptMarker));
      if (unadopted || MovedTo(id) != 0) {
        Log(LogLevel::kWarning, "removing ACG %llu: %s", id,
            unadopted ? "an unfinished adoption's copy" : "it moved to another node");
        PROPELLER_RETURN_IF_ERROR(RemoveAcgData(id));
        continue;
      }
      if (env->FileExists(SplitMarkerPath(id))) {
        split_targets.push_back(id);
        continue;
      }
      PROPELLER_RETURN_IF_ERROR(quarantine_.CheckAtOpen(id));
      Status opened = open_acg(id);
      if (opened.code() == StatusCode::kCorruption && !IsDamaged(id)) {
        // LMDB, or the ACG's own meta data, refused it: damage too.
        {
          WriterLock lock(&acgs_mu_);
          auto it = acgs_.find(id);
          if (it != acgs_.end()) {
            // It may have opened (and joined the open set) before its meta data was refused.
            open_acgs_.Forget(it->second.get());
            acgs_.erase(it);
          }
        }
        PROPELLER_RETURN_IF_ERROR(quarantine_.Put(id, opened.message()));
        opened = open_acg(id);
      }
      PROPELLER_RETURN_IF_ERROR(opened);
      PROPELLER_RETURN_IF_ERROR(reports_.Find(id));
    }
    // A split's target whose source recorded the move is complete (the source's transaction
    // is the split's commit point); otherwise the split did not happen and its source still
    // holds every file: the partial copy goes.
    for (uint64_t id : split_targets) {
      bool committed = false;
      for (Acg* acg : AllAcgs()) committed |= acg->RoutesTo(id);
      if (committed) {
        PROPELLER_RETURN_IF_ERROR(open_acg(id));
        PROPELLER_RETURN_IF_ERROR(env->RemoveFile(SplitMarkerPath(id)));
        PROPELLER_RETURN_IF_ERROR(reports_.Find(id));
      } else {
        Log(LogLevel::kWarning, "removing ACG %llu: an unfinished split's copy",
            static_cast<unsigned long long>(id));
        PROPELLER_RETURN_IF_ERROR(RemoveAcgData(id));
      }
    }
    // A merge interrupted before its commit point (the source recording merged_into) is
    // undone: the source still holds every file, so the copies in the target go.
    for (Acg* acg : AllAcgs()) {
      if (!env->FileExists(MergeMarkerPath(acg->id()))) continue;
      PROPELLER_RETURN_IF_ERROR(RecoverMerge(acg));
    }
    // A split or merge that committed but did not finish removing the moved files.
    for (Acg* acg : AllAcgs()) {
      if (!acg->cleanup_pending()) continue;
      PROPELLER_ASSIGN_OR_RETURN(Acg::FileIdSet moved, acg->MovedStillHeld());
      auto lock = acg->LockExclusive();
      PROPELLER_RETURN_IF_ERROR(acg->RemoveHeld(moved, /*last=*/true));
    }
    for (Acg* acg : AllAcgs()) {
      if (acg->has_routes()) any_routes_.store(true);
    }
    Wal::Options wo;
    wo.env = env;
    wo.dir = JoinPath(options_.data_dir, "wal");
    wo.durability = options_.durability;
    wo.group_commit_interval_ns = options_.group_commit_interval_ns;
    wo.segment_bytes = options_.wal_segment_bytes;
    std::vector<Update> batch;
    ApplyScratch sc;
    auto replay = [&](uint64_t lsn, std::string_view payload) -> Status {
      batch.clear();
      PROPELLER_RETURN_IF_ERROR(DecodeUpdateBatch(payload, &batch));
      for (const Update& u : batch) {
        PROPELLER_RETURN_IF_ERROR(ValidateUpdate(u).WithContext("replaying the log"));
      }
      PROPELLER_RETURN_IF_ERROR(GroupByAcg(batch, &sc, /*skip_moved=*/true));
      // Only the ACGs that have not committed this record yet get it (and are still here).
      std::erase_if(sc.groups, [&](const ApplyScratch::Group& g) {
        return g.acg == nullptr || g.acg->applied_lsn() >= lsn;
      });
      if (sc.groups.empty()) return Status::OK();
      std::shared_ptr<StagedBatch> staged = Stage(batch, &sc);
      staged->lsn = lsn;
      const int64_t now = env->MonotonicNanos();
      for (const ApplyScratch::Group& g : sc.groups) {
        g.acg->AppendToCache(staged, g.begin, g.end, now);
        total_cached_ += g.end - g.begin;
      }
      // In log order after the committed directories: the same table as before the crash.
      std::vector<uint64_t> replayed;
      for (const ApplyScratch::Group& g : sc.groups) replayed.push_back(g.acg_id);  // sorted
      for (size_t i = 0; i < batch.size(); ++i) {
        if (std::binary_search(replayed.begin(), replayed.end(), sc.dest[i])) {
          dir_table_.Apply(batch[i]);
        }
      }
      return Status::OK();
    };
    PROPELLER_ASSIGN_OR_RETURN(wal_, Wal::Open(wo, max_applied + 1, replay));
    EnforceOpenBounds();
    if (options_.background_commit) {
      // A failing pass (a full disk, an I/O error) leaves every update in its cache and in the
      // log (Acg::CommitLocked, TruncateLog) and is retried with backoff; Stats() shows the
      // failure until a commit succeeds: the engine resumes by itself when space returns.
      committer_.Start(options_.env, "background commit", kCommitterTickNs,
                       [this] { return CommitDue(/*force_all=*/false); },
                       "updates stay in the log");
    }
    if (options_.split_threshold_files > 0 && options_.split_target_id) {
      // Every split_check_interval_ns, the ACGs above the threshold, one at a time.
      splitter_.Start(options_.env, "background split", options_.split_check_interval_ns,
                      [this] {
                        SplitOversized(&split_retry_at_);
                        return Status::OK();
                      });
    }
    return Status::OK();
  }

  static void TuneMalloc() {
    static std::once_flag once;
    std::call_once(once, [] { mallopt(M_MMAP_THRESHOLD, kMmapThreshold); });
  }

  // The ACG `id`, opening (creating) it when this process has not seen it yet.
  Result<Acg*> GetOrCreateAcg(uint64_t id) {
    {
      ReaderLock lock(&acgs_mu_);
      auto it = acgs_.find(id);
      if (it != acgs_.end()) return it->second.get();
    }
    Acg* raw = nullptr;
    {
      WriterLock lock(&acgs_mu_);
      auto it = acgs_.find(id);
      if (it != acgs_.end()) return it->second.get();
      // Never created again here once it moved away (an update following an old route, or
      // the log's replay of records from before the move).
      if (auto m = moved_.find(id); m != moved_.end()) return MovedStatus(id, m->second);
      std::string dir = AcgDir(id);
      PROPELLER_ASSIGN_OR_RETURN(std::unique_ptr<Acg> acg, Acg::Open(id, dir, &ctx_));
      raw = acg.get();
      acgs_[id] = std::move(acg);
    }
    OnAcgOpened(raw);  // Acg::Open leaves it open
    EnforceOpenBounds();  // the caller may not need it open (Apply does not)
    return raw;
  }

  std::vector<Acg*> AllAcgs() {
    ReaderLock lock(&acgs_mu_);
    std::vector<Acg*> out;
    out.reserve(acgs_.size());
    for (auto& [id, acg] : acgs_) out.push_back(acg.get());
    return out;
  }

  // The ACGs searches and listings see: all but the target of a split in progress (it holds
  // copies of files its source still answers for).
  std::vector<Acg*> VisibleAcgs() {
    ReaderLock lock(&acgs_mu_);
    std::vector<Acg*> out;
    out.reserve(acgs_.size());
    for (auto& [id, acg] : acgs_) {
      if (id != hidden_acg_ && acg->merged_into() == 0 && !acg->retired()) {
        out.push_back(acg.get());
      }
    }
    return out;
  }

  // The ACG that holds file `id` for an update or lookup addressed to `acg_id`: a split leaves
  // routes behind in its source (Acg::RouteOf), followed here, also across later splits.
  uint64_t Route(uint64_t acg_id, FileId id) {
    for (int hop = 0; hop < kMaxRouteHops; ++hop) {
      Acg* acg = FindAcg(acg_id);
      if (acg == nullptr || !acg->has_routes()) return acg_id;
      const uint64_t next = acg->RouteOf(id);
      if (next == 0) return acg_id;
      acg_id = next;
    }
    return acg_id;
  }

  // ---- the cache of open ACGs (open_acgs.h) ----

  void OnAcgOpened(Acg* acg) { open_acgs_.Opened(acg); }
  void EnforceOpenBounds() { open_acgs_.Enforce(); }

  // ---- write path ----

  // Buffers of Apply (per thread, reused across calls) and of replay.
  struct ApplyScratch {
    struct Group {
      Acg* acg = nullptr;
      uint64_t acg_id = 0;
      uint32_t first = 0, last = 0;  // [first, last) of `order`
      uint32_t begin = 0, end = 0;   // the group's entries in the staged batch
    };
    std::vector<uint64_t> dest;   // batch position -> the ACG it goes to (routes followed)
    std::vector<uint32_t> order;  // batch positions grouped by ACG (stable)
    std::vector<uint32_t> entry_of;  // batch position -> its entry in the staged batch
    std::vector<Group> groups;
    std::string payload;          // the log record
    size_t bytes_per_update = 0;  // of the previous batch, to size the next one
  };

  // Groups the batch by ACG keeping the batch order inside each ACG — one lookup, one cache
  // lock and one reference per ACG instead of per update — and resolves (creates) the ACGs.
  // Groups `updates` by the ACG each goes to (following routes), creating ACGs this node has
  // not seen. An ACG that moved to another node (DropMovedAcg) gives a Redirect, or with
  // `skip_moved` (the log's replay) a group with a null acg, which the caller drops.
  Status GroupByAcg(std::span<const Update> updates, ApplyScratch* sc, bool skip_moved) {
    const size_t n = updates.size();
    sc->order.resize(n);
    sc->dest.resize(n);
    const bool routed = any_routes_.load(std::memory_order_acquire);
    bool grouped = true;
    for (size_t i = 0; i < n; ++i) {
      sc->order[i] = static_cast<uint32_t>(i);
      sc->dest[i] = routed ? Route(updates[i].acg, updates[i].record.id) : updates[i].acg;
      if (i > 0 && sc->dest[i] < sc->dest[i - 1]) grouped = false;
    }
    if (!grouped) {
      std::stable_sort(sc->order.begin(), sc->order.end(), [&](uint32_t a, uint32_t b) {
        return sc->dest[a] < sc->dest[b];
      });
    }
    sc->groups.clear();
    for (size_t k = 0; k < n; ++k) {
      const uint64_t id = sc->dest[sc->order[k]];
      if (sc->groups.empty() || sc->groups.back().acg_id != id) {
        ApplyScratch::Group g;
        g.acg_id = id;
        g.first = static_cast<uint32_t>(k);
        sc->groups.push_back(g);
      }
      sc->groups.back().last = static_cast<uint32_t>(k + 1);
    }
    {
      ReaderLock lock(&acgs_mu_);
      for (ApplyScratch::Group& g : sc->groups) {
        auto it = acgs_.find(g.acg_id);
        if (it != acgs_.end()) g.acg = it->second.get();
      }
    }
    for (ApplyScratch::Group& g : sc->groups) {
      if (g.acg != nullptr && !g.acg->retired()) continue;
      if (g.acg == nullptr && !any_moved_.load(std::memory_order_acquire)) {
        PROPELLER_ASSIGN_OR_RETURN(g.acg, GetOrCreateAcg(g.acg_id));
        continue;
      }
      Result<Acg*> acg = g.acg == nullptr ? GetOrCreateAcg(g.acg_id) : MovedError(g.acg_id);
      if (acg.ok()) {
        g.acg = *acg;
      } else if (skip_moved && acg.status().code() == StatusCode::kRedirect) {
        g.acg = nullptr;
      } else {
        return acg.status();
      }
    }
    return Status::OK();
  }

  // Encodes the updates of sc->groups into one batch for the caches (outside the log lock;
  // under it the caches only take references). Accounted in total_cache_bytes_ until freed.
  std::shared_ptr<StagedBatch> Stage(std::span<const Update> updates, ApplyScratch* sc) {
    auto staged = std::make_shared<StagedBatch>();
    size_t count = 0;
    for (const ApplyScratch::Group& g : sc->groups) count += g.last - g.first;
    staged->entries.reserve(count);
    sc->entry_of.assign(updates.size(), UINT32_MAX);
    staged->data.reserve(count * sc->bytes_per_update + count * sc->bytes_per_update / 8);
    for (ApplyScratch::Group& g : sc->groups) {
      g.begin = static_cast<uint32_t>(staged->entries.size());
      for (uint32_t k = g.first; k < g.last; ++k) {
        sc->entry_of[sc->order[k]] = static_cast<uint32_t>(staged->entries.size());
        StageUpdate(updates[sc->order[k]], staged.get());
      }
      g.end = static_cast<uint32_t>(staged->entries.size());
    }
    if (count > 0) sc->bytes_per_update = staged->data.size() / count;
    total_cache_bytes_ += staged->bytes();
    staged->live_bytes = &total_cache_bytes_;
    return staged;
  }

  // on_logged of a batch grouped before a split switched routes: caches each group's entries
  // with the ACG they go to now, in runs. Rare (only batches in flight at the switch). Under
  // the log lock. True when a cache went over its bound.
  bool CacheRerouted(const std::shared_ptr<StagedBatch>& staged, const ApplyScratch& sc,
                     int64_t now) {
    bool over = false;
    for (const ApplyScratch::Group& g : sc.groups) {
      uint32_t run = g.begin;
      uint64_t run_dest = 0;
      auto flush = [&](uint32_t end) {
        if (end == run) return;
        Acg* a = run_dest == g.acg_id ? g.acg : FindAcg(run_dest);
        if (a == nullptr) a = g.acg;  // cannot happen: a split registers its target first
        if (a->AppendToCache(staged, run, end, now) > options_.cache_bound_updates) over = true;
      };
      for (uint32_t k = g.begin; k < g.end; ++k) {
        const uint64_t d = Route(g.acg_id, staged->entries[k].id);
        if (k == g.begin) {
          run_dest = d;
        } else if (d != run_dest) {
          flush(k);
          run = k;
          run_dest = d;
        }
      }
      flush(g.end);
    }
    return over;
  }

  Status Apply(std::span<const Update> updates) {
    if (crashed_) return Status::Aborted("engine crashed");
    if (updates.empty()) return Status::OK();
    if (updates.size() > UINT32_MAX) return Status::InvalidArgument("update batch is too large");
    for (const Update& u : updates) PROPELLER_RETURN_IF_ERROR(ValidateUpdate(u));
    // A batch that touches an ACG being moved waits for the move to end (ThawAcg or
    // DropMovedAcg), then goes again: it is applied, or it gets the Redirect of a moved ACG.
    for (;;) {
      uint64_t frozen = 0;
      Status s = ApplyOnce(updates, &frozen);
      if (frozen == 0) return s;
      PROPELLER_RETURN_IF_ERROR(
          frozen_.WaitUntilThawed(frozen, options_.env, kMoveWaitNs, crashed_));
    }
  }

  // Apply, unless the batch touches a frozen ACG: then nothing happens and *frozen names it.
  Status ApplyOnce(std::span<const Update> updates, uint64_t* frozen) {
    thread_local ApplyScratch sc;
    ApplyGate::Ticket ticket(&apply_gate_);
    // ACGs are resolved (created) before logging: opening an environment must not happen
    // under the log lock. A split may switch routes before this batch is logged: on_logged
    // then routes it again (route_epoch_ changes only under the log lock).
    const uint64_t epoch = route_epoch_.load(std::memory_order_acquire);
    PROPELLER_RETURN_IF_ERROR(GroupByAcg(updates, &sc, /*skip_moved=*/false));
    if (frozen_.Any()) {
      *frozen = frozen_.FirstFrozen(sc.groups.begin(), sc.groups.end(),
                                    [](const ApplyScratch::Group& g) { return g.acg_id; });
      if (*frozen != 0) return Status::OK();
    }
    std::shared_ptr<StagedBatch> staged = Stage(updates, &sc);
    sc.payload.clear();
    // The log gets the records' encodings the cache already made (one encoding per record).
    const StagedBatch& sb = *staged;
    EncodeUpdateBatch(
        updates,
        [&](size_t i) -> std::string_view {
          if (sc.entry_of[i] == UINT32_MAX) return {};  // not staged: encoded by the log
          const CachedUpdate& e = sb.entries[sc.entry_of[i]];
          return e.size == 0 ? std::string_view()
                             : std::string_view(sb.data).substr(e.offset, e.size);
        },
        &sc.payload);
    Env* env = options_.env;
    bool over = false;
    auto on_logged = [&](uint64_t lsn) {
      staged->lsn = lsn;
      const int64_t now = env->MonotonicNanos();
      if (route_epoch_.load(std::memory_order_relaxed) != epoch) {
        over |= CacheRerouted(staged, sc, now);
      } else {
        for (const ApplyScratch::Group& g : sc.groups) {
          if (g.acg->AppendToCache(staged, g.begin, g.end, now) > options_.cache_bound_updates) {
            over = true;
          }
        }
      }
      dir_table_.ApplyBatch(updates);
    };
    PROPELLER_RETURN_IF_ERROR(wal_->Append(sc.payload, on_logged).status());
    staged.reset();  // the caches hold it now
    const uint64_t total = total_cached_.fetch_add(updates.size()) + updates.size();
    // Enforce the cache bounds.
    if (total > options_.total_cache_bound_updates) over = true;
    if (options_.max_cache_bytes != 0 && total_cache_bytes_.load() > options_.max_cache_bytes) {
      // Backpressure: the caller commits (the committer cannot keep up).
      return CommitDue(/*force_all=*/false);
    }
    if (over) {
      if (options_.background_commit) {
        committer_.Wake();
      } else {
        PROPELLER_RETURN_IF_ERROR(CommitDue(/*force_all=*/false));
      }
    }
    return Status::OK();
  }

  // Commits caches that are too old or too big; with force_all, every cache.
  Status CommitDue(bool force_all) {
    MutexLock commit_lock(&commit_mu_);
    const int64_t now = options_.env->MonotonicNanos();
    std::vector<Acg*> acgs = AllAcgs();
    // One log sync for the whole pass (not one per partition: with 1,000 partitions under a
    // steady write load that would be 1,000 fsyncs per pass).
    if (Status synced = wal_->Sync(); !synced.ok()) {
      NoteCommit(synced);
      return synced;
    }
    const uint64_t durable = wal_->synced_lsn();
    std::vector<Acg*> todo;
    struct Candidate {
      size_t updates;
      uint64_t bytes;
      Acg* acg;
    };
    std::vector<Candidate> others;
    for (Acg* acg : acgs) {
      size_t n = acg->cached();
      if (n == 0) continue;
      bool due = force_all || n > options_.cache_bound_updates ||
                 now - acg->oldest_cached_time_ns() >= options_.commit_timeout_ns;
      if (due) {
        todo.push_back(acg);
      } else {
        others.push_back(Candidate{n, acg->cache_bytes(), acg});
      }
    }
    // Node-wide bounds: the largest caches until under half of them (counted before the pass;
    // updates arriving meanwhile are the next pass's).
    std::sort(others.begin(), others.end(),
              [](const Candidate& a, const Candidate& b) { return a.updates > b.updates; });
    uint64_t remaining = 0;
    for (const Candidate& c : others) remaining += c.updates;
    uint64_t bytes = total_cache_bytes_.load();
    for (Acg* acg : todo) bytes -= std::min(bytes, acg->cache_bytes());
    for (const Candidate& c : others) {
      const bool bytes_over = options_.max_cache_bytes != 0 && bytes > options_.max_cache_bytes / 2;
      if (remaining <= options_.total_cache_bound_updates / 2 && !bytes_over) break;
      todo.push_back(c.acg);
      remaining -= c.updates;
      bytes -= std::min(bytes, c.bytes);
    }
    // Commits of ACGs in different store shards share nothing but the counters (those in one
    // shard take turns at its LMDB writer lock), so they run on commit_lanes_ threads at once
    // (commit_pool_'s workers and this thread), overlapping one fsync with another's CPU work.
    Status first_error;
    Mutex error_mu;
    std::atomic<uint64_t> committed{0};
    std::atomic<size_t> next{0};
    const size_t lanes = std::min(todo.size(), commit_lanes_);
    auto lane = [&](size_t) {
      for (size_t i; (i = next.fetch_add(1)) < todo.size();) {
        uint64_t n = 0;
        Status s = CommitAcg(todo[i], durable, &n);
        committed.fetch_add(n);
        if (!s.ok()) {
          MutexLock lock(&error_mu);
          if (first_error.ok()) first_error = s;
        }
      }
    };
    if (lanes <= 1) {
      lane(0);
    } else {
      commit_pool_->ParallelFor(lanes, lane);
    }
    Status truncated = TruncateLog();
    EnforceOpenBounds();
    if (options_.tune_malloc && committed.load() >= kTrimAfterUpdates) malloc_trim(0);
    if (first_error.ok()) first_error = truncated;
    NoteCommit(first_error);
    return first_error;
  }

  // Commits `acg`'s cache up to the durable end of the log, so the indexes never hold an
  // update the log could lose in a power loss. durable_lsn = 0: sync the log now and use its
  // end (everything acknowledged before this call); otherwise an LSN already known durable.
  Status CommitAcg(Acg* acg, uint64_t durable_lsn = 0, uint64_t* committed = nullptr) {
    if (acg->cached() == 0) return Status::OK();
    if (durable_lsn == 0) {
      PROPELLER_RETURN_IF_ERROR(wal_->Sync());
      durable_lsn = wal_->synced_lsn();
    }
    size_t n = 0;
    Status s = acg->Commit(durable_lsn, &n);
    if (n > 0) {
      acg_commits_.fetch_add(1, std::memory_order_relaxed);
      committed_updates_.fetch_add(n, std::memory_order_relaxed);
      Subtract(&total_cached_, n);
      if (committed != nullptr) *committed += n;
    }
    return s;
  }

  static void Subtract(std::atomic<uint64_t>* counter, uint64_t n) {
    uint64_t cur = counter->load();
    while (!counter->compare_exchange_weak(cur, cur - std::min(cur, n))) {
    }
  }

  // Deletes the log segments every ACG has committed.
  Status TruncateLog() {
    uint64_t needed = wal_->next_lsn();
    // A split in progress keeps what was logged since its switch: until its commit point,
    // those updates belong to the source again after a crash, whatever the target committed.
    const uint64_t hold = split_hold_lsn_.load();
    if (hold != 0) needed = std::min(needed, hold);
    for (Acg* acg : AllAcgs()) {
      uint64_t oldest = acg->oldest_cached_lsn();
      if (oldest != 0) needed = std::min(needed, oldest);
    }
    return wal_->DeleteObsolete(needed);
  }

  Status CommitAll() {
    if (crashed_) return Status::Aborted("engine crashed");
    return CommitDue(/*force_all=*/true);
  }

  // Every commit path reports here (CommitDue, CommitAcg): Stats() shows the failure until a
  // commit succeeds again.
  void NoteCommit(const Status& s) {
    MutexLock lock(&health_mu_);
    if (s.ok()) {
      commit_error_ = Status::OK();
      failing_since_ns_ = 0;
      return;
    }
    ++commit_failures_;
    commit_error_ = s;
    if (failing_since_ns_ == 0) failing_since_ns_ = options_.env->NowNanos();
  }

  // Stops the background threads. A split failing on the splitter thread stops the engine
  // from there (Crash): the splitter is then only told to stop, and joined at destruction.
  void StopCommitter() {
    committer_.Stop();
    splitter_.Stop();
  }

  void SplitOversized(std::map<uint64_t, int64_t>* retry_at) {
    constexpr int64_t kRetryNs = 30'000'000'000;
    for (Acg* acg : VisibleAcgs()) {
      if (crashed_) return;
      const uint64_t source = acg->id();
      if (acg->files() <= options_.split_threshold_files) continue;
      const int64_t now = options_.env->MonotonicNanos();
      auto it = retry_at->find(source);
      if (it != retry_at->end() && now < it->second) continue;
      const int64_t t0 = now;
      SplitReport report;
      Result<std::vector<FileId>> plan = PlanSplit(source, 0.05, /*seed=*/1, &report);
      Result<uint64_t> target = plan.ok() ? options_.split_target_id(source) : plan.status();
      Status s = target.ok() ? SplitAcg(source, *target, *plan, 0) : target.status();
      if (!s.ok()) {
        Log(LogLevel::kWarning, "split of ACG %llu (%llu files): %s; retrying in 30 s",
            static_cast<unsigned long long>(source),
            static_cast<unsigned long long>(acg->files()), s.ToString().c_str());
        (*retry_at)[source] = options_.env->MonotonicNanos() + kRetryNs;
        if (crashed_) return;
        continue;
      }
      retry_at->erase(source);
      Log(LogLevel::kInfo,
          "split ACG %llu: %zu of %u files to ACG %llu in %.3f s (partition %.3f s, cut %.2f%%)",
          static_cast<unsigned long long>(source), plan->size(), report.vertices,
          static_cast<unsigned long long>(*target),
          static_cast<double>(options_.env->MonotonicNanos() - t0) / 1e9,
          report.partition_seconds, report.cut_percent);
      if (options_.on_split) options_.on_split(source, *target, *plan);
    }
  }

  // ---- search ----

  // `on_hit` may move from the hit it is given.
  Status Search(const SearchRequest& req, const std::function<bool(SearchHit&)>& on_hit,
                SearchStats* stats_out) {
    if (crashed_) return Status::Aborted("engine crashed");
    ParseOptions po;
    po.now_ns = req.now_ns != 0 ? req.now_ns : options_.env->NowNanos();
    PROPELLER_ASSIGN_OR_RETURN(Query query, Query::Parse(req.query, po));
    std::string why = ValidatePath(req.scope);
    if (!why.empty()) return Status::InvalidArgument("bad scope '" + req.scope + "': " + why);
    PROPELLER_RETURN_IF_ERROR(CheckSortKey(req.sort_by));

    // A split's final step (SplitAcg) happens between searches, never during one.
    ReaderLock gate(&search_gate_);
    std::vector<Acg*> acgs = VisibleAcgs();
    SearchStats stats;
    // Before the recent moves are noted: an excluded ACG is not reported as adopted either.
    if (!req.exclude.empty()) {
      std::erase_if(acgs, [&](Acg* a) {
        return std::find(req.exclude.begin(), req.exclude.end(), a->id()) != req.exclude.end();
      });
    }
    if (!req.acgs.empty()) {
      std::vector<uint64_t> wanted = req.acgs;
      std::sort(wanted.begin(), wanted.end());
      std::erase_if(acgs, [&](Acg* a) {
        return !std::binary_search(wanted.begin(), wanted.end(), a->id());
      });
      NoteRecentMoves(acgs, &wanted, &stats);
    } else if (any_recent_moves_.load(std::memory_order_acquire)) {
      NoteRecentMoves(acgs, nullptr, &stats);
    }
    // A damaged ACG's files cannot be searched, and which they are is unknown: a search that
    // would include it fails rather than answer without them.
    for (Acg* acg : acgs) {
      if (std::string why = DamageOf(acg); !why.empty()) {
        return Status::Unavailable("ACG " + std::to_string(acg->id()) + " is damaged and not rebuilt yet, so "
                                   "this search cannot be answered whole: " + why);
      }
    }
    stats.acgs_total = acgs.size();
    std::vector<Acg*> todo;
    for (Acg* acg : acgs) {
      if (acg->MayMatch(query.root())) {
        todo.push_back(acg);
      } else {
        ++stats.acgs_skipped;
      }
    }
    // Open ACGs first, then closed ones: a search touching more than the cache holds would
    // otherwise close those (least recently used) before it reaches them — a cyclic scan
    // defeats LRU — and open every ACG again. This way a repeated search finds what the bound
    // lets stay open still open. Ranked once (a snapshot): other threads change the ranks
    // under us, and a comparator that reads them live would be inconsistent (undefined
    // behaviour in a sort).
    auto rank = [](Acg* a) { return a->is_open() ? 0 : 1; };
    std::vector<std::pair<int, Acg*>> ranked;
    ranked.reserve(todo.size());
    for (Acg* a : todo) ranked.emplace_back(rank(a), a);
    std::stable_sort(ranked.begin(), ranked.end(),
                     [](const auto& x, const auto& y) { return x.first < y.first; });
    for (size_t i = 0; i < todo.size(); ++i) todo[i] = ranked[i].second;

    const bool sorted = !req.sort_by.empty();
    Mutex out_mu;
    std::atomic<bool> stop{false};
    std::vector<SearchHit> collected;  // when sorted; Under out_mu.
    uint64_t delivered = 0;            // Under out_mu.
    std::atomic<uint64_t> committed{0}, candidates{0}, closed{0};
    std::vector<Status> errors(todo.size());

    pool_->ParallelFor(todo.size(), [&](size_t i) {
      if (stop.load()) return;
      Acg* acg = todo[i];
      if (acg->cached() > 0) {
        Status s = CommitAcg(acg);
        if (!s.ok()) {
          errors[i] = s;
          return;
        }
        committed.fetch_add(1);
      }
      // This ACG's matches go out in batches, one lock per batch: with a lock per match, the
      // threads of a search returning 100k matches spent 14% of its time waking each other
      // (futex) on out_mu. Returns false when the search must stop.
      std::vector<SearchHit> batch;
      auto deliver = [&]() -> bool {
        MutexLock lock(&out_mu);
        if (stop.load()) {
          batch.clear();
          return false;
        }
        for (SearchHit& hit : batch) {
          if (sorted) {
            collected.push_back(std::move(hit));
            continue;
          }
          ++delivered;
          if (!on_hit(hit) || (req.limit != 0 && delivered >= req.limit)) {
            stop.store(true);
            batch.clear();
            return false;
          }
        }
        batch.clear();
        return true;
      };
      const size_t batch_size =
          req.limit != 0 && !sorted ? std::min<size_t>(kHitBatch, req.limit) : kHitBatch;
      AcgSearchRequest ar;
      ar.query = &query;
      ar.scope = req.scope;
      ar.volume = req.volume;
      ar.stop = &stop;
      ar.on_match = [&](const std::string& path, FileRecord& rec) {
        if (req.creds) {
          if (req.volume_visible && !req.volume_visible(rec.id.volume)) return true;
          if (!dir_table_.Visible(rec.id.volume, path, *req.creds)) return true;
          if (rec.paths.size() > 1) RestrictToVisible(&rec, *req.creds);
        }
        batch.push_back(SearchHit{path, std::move(rec), acg->id()});
        return batch.size() < batch_size || deliver();
      };
      AcgSearchStats as;
      errors[i] = acg->Search(ar, &as);
      if (!batch.empty() && errors[i].ok()) deliver();
      candidates.fetch_add(as.candidates);
      if (as.answered_closed) closed.fetch_add(1);
    });
    EnforceOpenBounds();
    for (const Status& s : errors) PROPELLER_RETURN_IF_ERROR(s);

    if (sorted) {
      SortHits(req.sort_by, req.descending, &collected);
      if (req.limit != 0 && collected.size() > req.limit) collected.resize(req.limit);
      for (SearchHit& h : collected) {
        ++delivered;
        if (!on_hit(h)) break;
      }
    }
    stats.acgs_committed = committed.load();
    stats.acgs_answered_closed = closed.load();
    stats.candidates = candidates.load();
    stats.hits = delivered;
    if (stats_out) *stats_out = stats;
    return Status::OK();
  }

  // Matches of one ACG handed to the caller under one lock (Search).
  static constexpr size_t kHitBatch = 64;

  void PruneRecentMovesLocked() PROPELLER_REQUIRES(acgs_mu_) {
    const int64_t now = options_.env->MonotonicNanos();
    std::erase_if(moved_at_, [&](const auto& e) { return now - e.second > kRecentMoveNs; });
    std::erase_if(adopted_at_, [&](const auto& e) { return now - e.second > kRecentMoveNs; });
  }

  // Fills stats->moved and ->adopted from the recent moves (limited to `wanted` if given),
  // with `searched` the ACGs this search takes.
  void NoteRecentMoves(const std::vector<Acg*>& searched, const std::vector<uint64_t>* wanted,
                       SearchStats* stats) PROPELLER_REQUIRES_SHARED(search_gate_) {
    const int64_t now = options_.env->MonotonicNanos();
    auto in = [&](uint64_t id) {
      return wanted == nullptr || std::binary_search(wanted->begin(), wanted->end(), id);
    };
    ReaderLock lock(&acgs_mu_);
    for (const auto& [id, at] : moved_at_) {
      if (now - at > kRecentMoveNs || !in(id)) continue;
      auto to = moved_.find(id);
      if (to != moved_.end()) stats->moved.emplace_back(id, to->second);
    }
    for (const auto& [id, at] : adopted_at_) {
      if (now - at > kRecentMoveNs || !in(id)) continue;
      for (Acg* a : searched) {
        if (a->id() == id) {
          stats->adopted.push_back(id);
          break;
        }
      }
    }
  }

  static void SortHits(const std::string& key, bool desc, std::vector<SearchHit>* hits) {
    std::sort(hits->begin(), hits->end(), [&](const SearchHit& a, const SearchHit& b) {
      return SortsBefore(key, desc, a.path, a.record, b.path, b.record);
    });
  }

  // The ACG `id` if it is here (not one that moved away).
  Acg* FindAcg(uint64_t id) {
    ReaderLock lock(&acgs_mu_);
    auto it = acgs_.find(id);
    return it == acgs_.end() || it->second->retired() ? nullptr : it->second.get();
  }

  bool RestrictToVisible(FileRecord* record, const Credentials& creds) const {
    if (creds.uid == 0) return true;
    std::erase_if(record->paths, [&](const std::string& p) {
      return !dir_table_.Visible(record->id.volume, p, creds);
    });
    return !record->paths.empty();
  }

  Result<FileRecord> Get(uint64_t acg_id, FileId id) {
    if (crashed_) return Status::Aborted("engine crashed");
    if (any_routes_.load(std::memory_order_acquire)) acg_id = Route(acg_id, id);
    Acg* acg = FindAcg(acg_id);
    if (acg == nullptr) return NotHere(acg_id);
    PROPELLER_RETURN_IF_ERROR(CommitAcg(acg));
    Result<FileRecord> rec = acg->Get(id);
    EnforceOpenBounds();
    return rec;
  }

  // ---- user indexes ----

  Status CreateIndex(const std::string& name, IndexType type) {
    if (crashed_) return Status::Aborted("engine crashed");
    std::string why = ValidateIndexName(name);
    if (!why.empty()) return Status::InvalidArgument("bad index name '" + name + "': " + why);
    if (IsBuiltinIndex(name)) return Status::AlreadyExists("'" + name + "' is a built-in index");
    MutexLock lock(&catalogue_mu_);
    std::vector<IndexSpec> next = Catalogue();
    for (const IndexSpec& s : next) {
      if (s.name == name) return Status::AlreadyExists("index '" + name + "' exists");
    }
    next.push_back(IndexSpec{name, type});
    // Catalogue first: a crash after it leaves ACGs that build the index when they open.
    PROPELLER_RETURN_IF_ERROR(
        WriteFileAtomically(options_.env, catalogue_path_, EncodeCatalogue(next)));
    return ApplyCatalogue(std::move(next));
  }

  Status DropIndex(const std::string& name) {
    if (crashed_) return Status::Aborted("engine crashed");
    MutexLock lock(&catalogue_mu_);
    std::vector<IndexSpec> next;
    bool found = false;
    for (const IndexSpec& s : Catalogue()) {
      if (s.name == name) {
        found = true;
      } else {
        next.push_back(s);
      }
    }
    if (!found) {
      if (IsBuiltinIndex(name)) {
        return Status::InvalidArgument("'" + name + "' is a built-in index and cannot be dropped");
      }
      return Status::NotFound("no index named '" + name + "'");
    }
    PROPELLER_RETURN_IF_ERROR(
        WriteFileAtomically(options_.env, catalogue_path_, EncodeCatalogue(next)));
    return ApplyCatalogue(std::move(next));
  }

  std::vector<IndexSpec> Catalogue() {
    MutexLock lock(&specs_mu_);
    return user_indexes_;
  }

  // Makes `specs` the catalogue and brings every open ACG in line now; closed ACGs reconcile
  // when they next open.
  Status ApplyCatalogue(std::vector<IndexSpec> specs) PROPELLER_REQUIRES(catalogue_mu_) {
    {
      MutexLock lock(&specs_mu_);
      user_indexes_ = std::move(specs);
    }
    Status first_error;
    for (Acg* acg : AllAcgs()) {
      Status s = acg->SyncIndexes();
      if (!s.ok() && first_error.ok()) first_error = s;
    }
    EnforceOpenBounds();  // building an index in an open (perhaps trimmed) ACG maps its pages
    return first_error;
  }

  std::vector<IndexInfo> ListIndexes() {
    std::vector<IndexInfo> out = {{"inode", IndexType::kKdTree, true},
                                  {"keyword", IndexType::kBTree, true},
                                  {"path", IndexType::kBTree, true}};
    for (const IndexSpec& s : Catalogue()) out.push_back({s.name, s.type, false});
    return out;
  }

  // ---- introspection ----

  std::vector<AcgInfo> ListAcgs() {
    std::vector<AcgInfo> out;
    ReaderLock gate(&search_gate_);  // not across a split's switch
    for (Acg* acg : VisibleAcgs()) {
      out.push_back(AcgInfo{acg->id(), acg->files(), acg->edges(), acg->cached(),
                            acg->disk_bytes()});
    }
    return out;
  }

  EngineStats Stats() {
    EngineStats st;
    ReaderLock gate(&search_gate_);  // not across a split's switch
    for (Acg* acg : VisibleAcgs()) {
      ++st.acgs;
      st.files += acg->files();
      st.cached_updates += acg->cached();

      st.index_memory_bytes += acg->index_memory_bytes();
      if (acg->is_open()) {
        ++st.open_acgs;
        st.open_acg_bytes += acg->open_bytes();
      }
    }
    st.cache_bytes = total_cache_bytes_.load();
    st.acg_opens = open_acgs_.opens();
    st.disk_bytes += store_ != nullptr ? store_->disk_bytes() : 0;
    st.store_environments = store_ != nullptr ? store_->shard_count() : 0;
    st.acg_commits = acg_commits_.load();
    st.committed_updates = committed_updates_.load();
    st.wal_bytes = wal_ ? wal_->bytes() : 0;
    st.disk_bytes += st.wal_bytes;
    st.next_lsn = wal_ ? wal_->next_lsn() : 0;
    {
      MutexLock lock(&health_mu_);
      st.commit_failures = commit_failures_;
      st.commit_error = commit_error_.ok() ? "" : commit_error_.ToString();
      st.commit_failing_since_ns = failing_since_ns_;
    }
    return st;
  }

  Status ListEdges(uint64_t acg_id,
                   std::vector<StoredEdge>* edges) {
    if (crashed_) return Status::Aborted("engine crashed");
    Acg* acg = FindAcg(acg_id);
    if (acg == nullptr) return NotHere(acg_id);
    PROPELLER_RETURN_IF_ERROR(CommitAcg(acg));
    Status s = acg->ListEdges(edges);
    EnforceOpenBounds();
    return s;
  }

  Status SyncLog() { return wal_->Sync(); }

  // ---- splits ----

  // Moves the files `moving` of ACG `source` into the new ACG `target` (DESIGN §5), while
  // updates and searches go on:
  //   1. commit the source and watch its commits; copy the moving files' records and edges
  //      from a snapshot into the target, built under a marker file and hidden from searches;
  //   2. then, with searches held at the gate and both ACGs locked: switch routes under the log
  //      lock (updates logged from here on go to the target), commit the source up to there,
  //      copy what its commits changed since the snapshot, and remove the moving files from the
  //      source — recording the routes in the same transaction, the split's commit point —
  //      then drop the marker and show the target.
  // A crash before the commit point leaves the source whole (Open removes the marked target;
  // the log replays into the source); after it, Open keeps the target and the recorded
  // routes send logged updates there. An error after the target exists stops the engine
  // (like CrashForTesting) so that reopening recovers by the same rules; only destruction is
  // valid then. `crash_after_step` (tests): stop after step 1..4 as if the process died.
  Status SplitAcg(uint64_t source_id, uint64_t target_id, std::span<const FileId> moving_ids,
                  int crash_after_step) {
    if (crashed_) return Status::Aborted("engine crashed");
    MutexLock split_lock(&split_mu_);
    if (target_id == 0 || target_id == source_id) {
      return Status::InvalidArgument("split target must be a new ACG id other than the source");
    }
    Acg* source = FindAcg(source_id);
    if (source == nullptr) return NotHere(source_id);
    if (frozen_.IsFrozen(source_id)) {
      return Status::Unavailable("ACG " + std::to_string(source_id) + " is being moved");
    }
    if (FindAcg(target_id) != nullptr || options_.env->FileExists(AcgDir(target_id)) ||
        MovedTo(target_id) != 0) {
      return Status::AlreadyExists("ACG " + std::to_string(target_id) + " exists");
    }
    const int64_t t_start = options_.env->MonotonicNanos();
    Acg::FileIdSet moving(moving_ids.begin(), moving_ids.end());
    const std::string what =
        "splitting ACG " + std::to_string(source_id) + " into " + std::to_string(target_id);
    PROPELLER_RETURN_IF_ERROR(CommitAcg(source).WithContext(what));
    source->StartWatch();
    // From here on a failure stops the engine: Open decides from the marker and the routes.
    auto fail = [&](const Status& s) {
      Log(LogLevel::kError, "%s: %s; the engine stops (reopen to recover)", what.c_str(),
          s.ToString().c_str());
      Crash();
      return s.WithContext(what + " (engine stopped; reopen to recover)");
    };
    auto crash_at = [&](int step) {
      if (options_.split_step_hook) options_.split_step_hook(step);
      return crash_after_step == step;
    };

    Status s = options_.env->CreateDirs(AcgDir(target_id));
    if (s.ok()) {
      s = WriteFileAtomically(options_.env, SplitMarkerPath(target_id),
                              std::to_string(source_id) + "\n");
    }
    if (s.ok()) {  // the cluster's record of the split, kept until SplitReported
      s = reports_.Write(target_id, source_id, moving_ids);
    }
    if (!s.ok()) {  // nothing refers to the directory yet (Open removes it: no routes)
      source->StopWatch();
      return s.WithContext(what);
    }
    {
      WriterLock lock(&acgs_mu_);
      hidden_acg_ = target_id;
    }
    Result<Acg*> created = GetOrCreateAcg(target_id);
    if (!created.ok()) return fail(created.status());
    Acg* target = *created;

    // Step 1: the snapshot copy.
    std::vector<FileRecord> records;
    std::vector<FileId> absent;
    std::vector<StoredEdge> edges;
    uint64_t snapshot_lsn = 0;
    {
      auto lock = source->LockExclusive();
      s = source->ExportHeld(moving, /*watched_only=*/false, &records, &absent, &edges);
      snapshot_lsn = source->applied_lsn();
    }
    std::vector<Update> copy;
    if (s.ok()) {
      AppendSplitCopy(target_id, records, {}, edges, {}, &copy);
      auto lock = target->LockExclusive();
      s = target->ImportHeld(copy, snapshot_lsn);
    }
    if (!s.ok()) return fail(s);
    if (crash_at(1)) return fail(Status::Aborted("crash after step 1 (test)"));

    // What the source's commits changed in the moving files since the last copy, copied as
    // deltas against the target (edge weights only grow). REQUIRES: both ACGs locked.
    auto copy_delta = [&](uint64_t applied_lsn, size_t* n) -> Status {
      std::vector<FileRecord> changed, unused_records;
      std::vector<FileId> gone, unused_absent;
      std::vector<StoredEdge> edges_now, edges_copied;
      PROPELLER_RETURN_IF_ERROR(
          source->ExportHeld(moving, /*watched_only=*/true, &changed, &gone, &edges_now));
      Acg::FileIdSet touched;
      for (const FileRecord& r : changed) touched.insert(r.id);
      for (const FileId& id : gone) touched.insert(id);
      PROPELLER_RETURN_IF_ERROR(target->ExportHeld(touched, /*watched_only=*/false,
                                                   &unused_records, &unused_absent,
                                                   &edges_copied));
      copy.clear();
      AppendSplitCopy(target_id, changed, gone, edges_now, edges_copied, &copy);
      *n = copy.size();
      return target->ImportHeld(copy, applied_lsn);
    };
    // Catch-up passes while searches go on (only the two ACGs' own searches wait, for one
    // pass each): the switch below then copies only what changed during the last one.
    size_t passes = 0;
    while (passes < kSplitCatchUpPasses) {
      ++passes;
      size_t n = 0;
      s = [&]() -> Status {
        auto source_lock = source->LockExclusive();
        auto target_lock = target->LockExclusive();
        PROPELLER_RETURN_IF_ERROR(wal_->Sync());
        PROPELLER_RETURN_IF_ERROR(source->CommitHeld(wal_->synced_lsn()));
        return copy_delta(source->applied_lsn(), &n);
      }();
      if (!s.ok()) return fail(s);
      if (n <= kSplitSmallDelta) break;
    }

    // Step 2: the switch. Errors leave the block first: Crash() waits for the committer,
    // which may be waiting for these locks.
    const int64_t t_switch = options_.env->MonotonicNanos();
    size_t delta_updates = 0;
    int64_t t_remove = 0;
    s = AtSwitch(source, target, [&]() -> Status {
      uint64_t switch_lsn = 0;
      wal_->RunLocked([&](uint64_t next_lsn) {
        switch_lsn = next_lsn - 1;  // every record up to here was cached by the old routes
        split_hold_lsn_.store(next_lsn);
        source->AddRoutes(moving, target_id);
        any_routes_.store(true);
        route_epoch_.fetch_add(1);
      });
      if (crash_at(2)) return Status::Aborted("crash after step 2 (test)");
      PROPELLER_RETURN_IF_ERROR(wal_->Sync());  // commits never get ahead of the durable log
      PROPELLER_RETURN_IF_ERROR(source->CommitHeld(switch_lsn));
      PROPELLER_RETURN_IF_ERROR(copy_delta(switch_lsn, &delta_updates));
      source->StopWatchHeld();
      if (crash_at(3)) return Status::Aborted("crash after step 3 (test)");
      t_remove = options_.env->MonotonicNanos();
      PROPELLER_RETURN_IF_ERROR(source->RecordMovedHeld(moving, target_id, false));  // commit
      if (crash_at(4)) return Status::Aborted("crash after step 4 (test)");
      PROPELLER_RETURN_IF_ERROR(options_.env->RemoveFile(SplitMarkerPath(target_id)));
      PROPELLER_RETURN_IF_ERROR(options_.env->SyncDir(AcgDir(target_id)));
      reports_.Note(target_id, source_id);
      WriterLock lock(&acgs_mu_);
      hidden_acg_ = 0;
      split_hold_lsn_.store(0);
      return Status::OK();
    });
    if (!s.ok()) return fail(s);
    const int64_t t_end = options_.env->MonotonicNanos();
    if (options_.split_step_hook) options_.split_step_hook(5);
    CleanUpMoved(source, moving);
    Log(LogLevel::kInfo,
        "%s: %zu files and %zu edges copied in %.3f s (%zu catch-up passes); switch "
        "(searches paused) %.3f s: commit and a delta of %zu updates %.3f s, routes %.3f s; "
        "then the moved files left the source in %.3f s",
        what.c_str(), records.size(), edges.size(),
        static_cast<double>(t_switch - t_start) / 1e9, passes,
        static_cast<double>(t_end - t_switch) / 1e9, delta_updates,
        static_cast<double>(t_remove - t_switch) / 1e9,
        static_cast<double>(t_end - t_remove) / 1e9,
        static_cast<double>(options_.env->MonotonicNanos() - t_end) / 1e9);
    OnAcgOpened(source);
    OnAcgOpened(target);
    return Status::OK();
  }

  Result<std::vector<FileId>> PlanSplit(uint64_t acg_id, double imbalance, int seed,
                                        SplitReport* report) {
    if (crashed_) return Status::Aborted("engine crashed");
    Acg* acg = FindAcg(acg_id);
    if (acg == nullptr) return Status::NotFound("no ACG " + std::to_string(acg_id));
    PROPELLER_RETURN_IF_ERROR(CommitAcg(acg));
    std::vector<FileId> ids;
    PROPELLER_RETURN_IF_ERROR(acg->ListFileIds(&ids));  // sorted
    std::vector<StoredEdge> edges;
    PROPELLER_RETURN_IF_ERROR(acg->ListEdges(&edges));
    EnforceOpenBounds();
    if (ids.size() > static_cast<size_t>(CsrGraph::kMaxIndex)) {
      return Status::ResourceExhausted("ACG too large to partition");
    }
    auto vertex = [&](const FileId& id) -> int64_t {
      auto it = std::lower_bound(ids.begin(), ids.end(), id);
      return it != ids.end() && *it == id ? it - ids.begin() : -1;
    };
    // Edges to files elsewhere (or deleted) do not tie two of this ACG's files.
    std::vector<WeightedEdge> graph_edges;
    for (const StoredEdge& e : edges) {
      const int64_t u = vertex(e.src), v = vertex(e.dst);
      if (u >= 0 && v >= 0) {
        graph_edges.push_back(
            WeightedEdge{static_cast<uint32_t>(u), static_cast<uint32_t>(v), e.weight});
      }
    }
    const CsrGraph graph =
        CsrGraph::FromDirectedEdges(static_cast<uint32_t>(ids.size()), graph_edges);
    SplitOptions so;
    so.imbalance = imbalance;
    so.seed = seed;
    PROPELLER_ASSIGN_OR_RETURN(Split split, SplitInTwo(graph, so));
    std::vector<FileId> lighter;
    for (size_t v = 0; v < ids.size(); ++v) {
      if (split.side[v] == 1) lighter.push_back(ids[v]);
    }
    if (report != nullptr) *report = split.report;
    return lighter;
  }

  // Updates that bring the target of a split to the source's state for some files: a kPut per
  // record, a kDelete per file gone, and kAddEdge for each edge's weight beyond what the
  // target has (`have`; edge weights only grow; an update carries at most 2^32-1).
  static void AppendSplitCopy(uint64_t target, const std::vector<FileRecord>& records,
                              const std::vector<FileId>& gone,
                              const std::vector<StoredEdge>& edges,
                              const std::vector<StoredEdge>& have,
                              std::vector<Update>* out) {
    for (const FileRecord& r : records) {
      Update& u = out->emplace_back();
      u.op = UpdateOp::kPut;
      u.acg = target;
      u.record = r;
    }
    for (const FileId& id : gone) {
      Update& u = out->emplace_back();
      u.op = UpdateOp::kDelete;
      u.acg = target;
      u.record.id = id;
    }
    std::map<std::pair<FileId, FileId>, const StoredEdge*> had;
    for (const StoredEdge& e : have) had[{e.src, e.dst}] = &e;
    for (const StoredEdge& e : edges) {
      auto it = had.find({e.src, e.dst});
      // The target's edge counts only when it names the same generations: one of another
      // file is replaced by the first kAddEdge (Acg::ApplyOne), so the whole weight goes.
      const bool same = it != had.end() && it->second->src_generation == e.src_generation &&
                        it->second->dst_generation == e.dst_generation;
      uint64_t delta = e.weight - std::min(e.weight, same ? it->second->weight : 0);
      while (delta > 0) {
        const uint32_t part = static_cast<uint32_t>(std::min<uint64_t>(delta, UINT32_MAX));
        Update& u = out->emplace_back();
        u.op = UpdateOp::kAddEdge;
        u.acg = target;
        u.record.id = e.src;
        u.record.inode_generation = e.src_generation;
        u.edge_dst = e.dst;
        u.edge_dst_generation = e.dst_generation;
        u.edge_weight = part;
        delta -= part;
      }
    }
  }

  Result<std::vector<SplitNotice>> UnreportedSplits() {
    return reports_.Unreported([this](uint64_t source, uint64_t target) {
      Acg* from = FindAcg(source);
      return from != nullptr && from->merged_into() == target;
    });
  }

  Status SplitReported(uint64_t source, uint64_t target) {
    return reports_.Reported(source, target);
  }

  // Moves every file of the small ACG `source` into ACG `target` on this node (DESIGN §5:
  // small ACGs of one application are merged). Everything happens at one switch, with
  // searches held at the gate and both ACGs locked:
  //   - under the log lock, `source` starts routing everything to `target`;
  //   - both are committed up to there; the source's records and edges are copied into the
  //     target (a MERGING marker in the target's directory, written first, names the source);
  //   - one source transaction deletes its files and records merged_into: the commit point;
  //   - the marker goes.
  // A crash before the commit point is undone by Open (RecoverMerge: the copies leave the
  // target; the log replays into the source); after it the merge stands. `crash_after_step`
  // (tests): 1 = after the copy, 2 = after the commit point.
  Status MergeAcg(uint64_t source_id, uint64_t target_id, int crash_after_step) {
    if (crashed_) return Status::Aborted("engine crashed");
    MutexLock split_lock(&split_mu_);
    if (source_id == 0 || target_id == 0 || source_id == target_id) {
      return Status::InvalidArgument("a merge needs two distinct non-zero ACG ids");
    }
    Acg* source = FindAcg(source_id);
    Acg* target = FindAcg(target_id);
    if (source == nullptr || target == nullptr) {
      return Status::NotFound("no ACG " + std::to_string(source == nullptr ? source_id
                                                                              : target_id));
    }
    if (frozen_.IsFrozen(source_id) || frozen_.IsFrozen(target_id)) {
      const uint64_t moving = frozen_.IsFrozen(source_id) ? source_id : target_id;
      return Status::Unavailable("ACG " + std::to_string(moving) + " is being moved");
    }
    if (source->merged_into() == target_id) return Status::OK();  // asked again: done
    if (source->merged_into() != 0 || target->merged_into() != 0) {
      const Acg* merged = source->merged_into() != 0 ? source : target;
      return Status::InvalidArgument("ACG " + std::to_string(merged->id()) +
                                     " was merged into ACG " +
                                     std::to_string(merged->merged_into()));
    }
    if (source->files() > wire::kMaxMergeFiles) {
      return Status::InvalidArgument("ACG " + std::to_string(source_id) + " holds " +
                                     std::to_string(source->files()) +
                                     " files; only ACGs of at most " +
                                     std::to_string(wire::kMaxMergeFiles) + " are merged");
    }
    const int64_t t0 = options_.env->MonotonicNanos();
    const std::string what =
        "merging ACG " + std::to_string(source_id) + " into " + std::to_string(target_id);
    // Nothing refers to the marker until the copy: Open's undo then finds nothing to remove.
    PROPELLER_RETURN_IF_ERROR(WriteFileAtomically(options_.env, MergeMarkerPath(target_id),
                                                  std::to_string(source_id) + "\n")
                                  .WithContext(what));
    size_t moved = 0;
    Acg::FileIdSet all;
    Status s = AtSwitch(source, target, [&]() -> Status {
      uint64_t switch_lsn = 0;
      wal_->RunLocked([&](uint64_t next_lsn) {
        switch_lsn = next_lsn - 1;
        source->MergeInto(target_id);
        any_routes_.store(true);
        route_epoch_.fetch_add(1);
      });
      PROPELLER_RETURN_IF_ERROR(wal_->Sync());
      PROPELLER_RETURN_IF_ERROR(source->CommitHeld(switch_lsn));
      PROPELLER_RETURN_IF_ERROR(target->CommitHeld(switch_lsn));
      std::vector<FileId> ids;
      PROPELLER_RETURN_IF_ERROR(source->ListFileIdsHeld(&ids));
      all.insert(ids.begin(), ids.end());
      std::vector<FileRecord> records;
      std::vector<FileId> absent;
      std::vector<StoredEdge> edges;
      PROPELLER_RETURN_IF_ERROR(source->ExportHeld(all, false, &records, &absent, &edges));
      moved = records.size();
      PROPELLER_RETURN_IF_ERROR(reports_.Write(target_id, source_id, ids));
      std::vector<Update> copy;
      AppendSplitCopy(target_id, records, {}, edges, {}, &copy);
      PROPELLER_RETURN_IF_ERROR(target->ImportHeld(copy, target->applied_lsn()));
      if (crash_after_step == 1) return Status::Aborted("crash after step 1 (test)");
      PROPELLER_RETURN_IF_ERROR(source->RecordMovedHeld(all, target_id, /*merge=*/true));
      if (crash_after_step == 2) return Status::Aborted("crash after step 2 (test)");
      PROPELLER_RETURN_IF_ERROR(options_.env->RemoveFile(MergeMarkerPath(target_id)));
      PROPELLER_RETURN_IF_ERROR(options_.env->SyncDir(AcgDir(target_id)));
      reports_.Note(target_id, source_id);
      return Status::OK();
    });
    if (!s.ok()) {
      Log(LogLevel::kError, "%s: %s; the engine stops (reopen to recover)", what.c_str(),
          s.ToString().c_str());
      Crash();
      return s.WithContext(what + " (engine stopped; reopen to recover)");
    }
    const int64_t t1 = options_.env->MonotonicNanos();
    CleanUpMoved(source, all);  // the source is hidden now: no search waits for this
    Log(LogLevel::kInfo, "%s: %zu files in %.3f s with searches paused, then %.3f s to clean "
        "up the source", what.c_str(), moved, static_cast<double>(t1 - t0) / 1e9,
        static_cast<double>(options_.env->MonotonicNanos() - t1) / 1e9);
    return Status::OK();
  }

  // After the commit point of a split or merge: removes the moved files' records from
  // `source` a chunk at a time (searches of `source` skip them meanwhile and wait for one
  // chunk at most). A failure is logged: the records stay hidden, and the next Open finishes
  // the clean-up.
  void CleanUpMoved(Acg* source, const Acg::FileIdSet& ids) {
    std::vector<FileId> sorted(ids.begin(), ids.end());
    std::sort(sorted.begin(), sorted.end());
    for (size_t at = 0;; at += kCleanupChunk) {
      const size_t end = std::min(sorted.size(), at + kCleanupChunk);
      Acg::FileIdSet chunk(sorted.begin() + static_cast<ptrdiff_t>(at),
                           sorted.begin() + static_cast<ptrdiff_t>(end));
      Status s = [&] {
        auto lock = source->LockExclusive();
        return source->RemoveHeld(chunk, /*last=*/end == sorted.size());
      }();
      if (!s.ok()) {
        Log(LogLevel::kWarning, "removing moved files from ACG %llu: %s (retried at the next "
            "open)", static_cast<unsigned long long>(source->id()), s.ToString().c_str());
        return;
      }
      if (end == sorted.size()) return;
    }
  }

  // The switch of a split or merge: runs `body` with searches held at the gate (they run
  // before or after it, never across) and both ACGs locked. On failure neither ACG may commit
  // again before the engine stops: after the switch, a commit of the source would move its
  // applied LSN past updates that only the (discarded) target has. Errors leave the locks
  // before the caller stops the engine: Crash() waits for the committer, which may be waiting
  // for them.
  Status AtSwitch(Acg* source, Acg* target, const std::function<Status()>& body) {
    WriterLock gate(&search_gate_);
    auto source_lock = source->LockExclusive();
    auto target_lock = target->LockExclusive();
    Status s = body();
    if (!s.ok()) {
      source->FreezeHeld();
      target->FreezeHeld();
    }
    return s;
  }

  // Open: ACG `target` has a MERGING marker. If its source recorded the merge, only the
  // marker is left to remove; otherwise the copies of the source's files leave the target
  // (every file is still in the source), with the merge's report.
  Status RecoverMerge(Acg* target) {
    std::string text;
    PROPELLER_RETURN_IF_ERROR(
        ReadFileToString(options_.env, MergeMarkerPath(target->id()), &text));
    const uint64_t source_id = std::strtoull(text.c_str(), nullptr, 10);
    Acg* source = FindAcg(source_id);
    if (source != nullptr && source->merged_into() != target->id()) {
      std::vector<FileId> ids;
      PROPELLER_RETURN_IF_ERROR(source->ListHeldIds(&ids));  // what MergeAcg copied
      {
        auto lock = target->LockExclusive();
        PROPELLER_RETURN_IF_ERROR(
            target->RemoveHeld(Acg::FileIdSet(ids.begin(), ids.end()), /*last=*/false));
      }
      PROPELLER_RETURN_IF_ERROR(reports_.Forget(target->id(), source_id));
      Log(LogLevel::kWarning, "undid the unfinished merge of ACG %llu into %llu (%zu files)",
          static_cast<unsigned long long>(source_id),
          static_cast<unsigned long long>(target->id()), ids.size());
    }
    PROPELLER_RETURN_IF_ERROR(options_.env->RemoveFile(MergeMarkerPath(target->id())));
    return options_.env->SyncDir(AcgDir(target->id()));
  }

  // ---- moving ACGs between nodes (engine.h: FreezeAndCopyAcg, AdoptAcg, DropMovedAcg) ----
  //
  // Source side: FreezeAndCopyAcg marks the ACG frozen, waits (apply_gate_) until no Apply
  // that missed the mark is still running, commits it and copies its environment; Apply
  // batches touching it wait from then on. DropMovedAcg records the move in <data>/moved
  // (its commit point), retires the ACG with searches held off for that instant, removes its
  // directory and wakes the waiting batches, which get a Redirect. ThawAcg instead lets them
  // through (the move did not happen).
  // Destination side: AdoptAcg renames the copy into acg/<id> under an ADOPTED marker, gives
  // it this node's log position as its applied LSN, and removes the marker: its commit point.
  // Open discards a directory still marked (the source keeps the ACG until the cluster's map
  // names this node, which only happens after AdoptAcg returned) and finishes a drop that a
  // crash interrupted (a directory the moved file names).

  Status FreezeAndCopyAcg(uint64_t id, const std::string& path) {
    if (crashed_) return Status::Aborted("engine crashed");
    MutexLock split_lock(&split_mu_);
    Acg* acg = FindAcg(id);
    if (acg == nullptr) return NotHere(id);
    PROPELLER_RETURN_IF_ERROR(CheckMovable(acg));
    if (!frozen_.Freeze(id)) {
      return Status::InvalidArgument("ACG " + std::to_string(id) + " is being moved already");
    }
    // Every Apply from here on sees the mark; the ones that may not have are waited for, so
    // the commit below holds every update acknowledged before this call returns.
    apply_gate_.Drain();
    Status s = CommitAcg(acg);
    if (s.ok() && acg->cached() != 0) {
      s = Status::Internal("updates were cached after the ACG was frozen");
    }
    if (s.ok() && !path.empty()) s = acg->CopyTo(path);
    if (!s.ok()) {
      frozen_.Thaw(id);
      if (!path.empty()) (void)options_.env->RemoveFile(path);  // a partial copy; gone or not
      return s.WithContext("copying ACG " + std::to_string(id) + " for a move");
    }
    return Status::OK();
  }

  Status ThawAcg(uint64_t id) {
    if (!frozen_.IsFrozen(id)) {
      return Status::InvalidArgument("ACG " + std::to_string(id) + " is not being moved");
    }
    frozen_.Thaw(id);
    return Status::OK();
  }

  Status DropMovedAcg(uint64_t id, uint64_t destination, const std::string& set_aside) {
    if (crashed_) return Status::Aborted("engine crashed");
    MutexLock split_lock(&split_mu_);
    Acg* acg = FindAcg(id);
    if (acg == nullptr) {
      if (MovedTo(id) == destination && destination != 0) return Status::OK();  // asked again
      return NotHere(id);
    }
    if (!frozen_.IsFrozen(id)) {
      return Status::InvalidArgument("ACG " + std::to_string(id) +
                                     " is not frozen: FreezeAndCopyAcg comes first");
    }
    // The commit point: from here the ACG is not this node's, also after a crash.
    std::map<uint64_t, uint64_t> moved;
    {
      ReaderLock lock(&acgs_mu_);
      moved = moved_;
    }
    moved[id] = destination;
    PROPELLER_RETURN_IF_ERROR(WriteMoved(moved).WithContext("recording the move of ACG " +
                                                            std::to_string(id)));
    {
      WriterLock lock(&acgs_mu_);
      moved_ = std::move(moved);
      any_moved_.store(true, std::memory_order_release);
    }
    // A failure below leaves the ACG frozen-in-place until restart; searches still see it
    // until the retirement, and report it as moved once it is gone.
    {
      // No search is running while the ACG leaves: each one saw it whole or not at all.
      WriterLock gate(&search_gate_);
      acg->Retire();
      WriterLock lock(&acgs_mu_);
      PruneRecentMovesLocked();
      moved_at_[id] = options_.env->MonotonicNanos();
      adopted_at_.erase(id);
      any_recent_moves_.store(true, std::memory_order_release);
    }
    Status s;
    if (set_aside.empty()) {
      s = RemoveAcgData(id);
    } else {
      // The control directory with the ACG's data beside it (a file Store::IngestAcg takes).
      const size_t slash = set_aside.rfind('/');
      s = MakeDirs(slash == std::string::npos ? "." : set_aside.substr(0, slash), 0700);
      if (s.ok()) s = options_.env->RenameFile(AcgDir(id), set_aside);
      if (s.ok()) s = store_->ExportAcg(id, JoinPath(set_aside, "data.mdb"));
      if (s.ok()) s = store_->DropAcg(id);
    }
    if (!s.ok()) {
      // Moved all the same (recorded above); Open removes what is left.
      Log(LogLevel::kWarning, "ACG %llu moved, but its directory stays until restart: %s",
          static_cast<unsigned long long>(id), s.ToString().c_str());
    }
    frozen_.Thaw(id);
    Log(LogLevel::kInfo, "ACG %llu moved to %llu", static_cast<unsigned long long>(id),
        static_cast<unsigned long long>(destination));
    return Status::OK();
  }

  Status AdoptAcg(uint64_t id, const std::string& path, bool frozen) {
    if (crashed_) return Status::Aborted("engine crashed");
    if (id == 0) return Status::InvalidArgument("ACG ids start at 1");
    MutexLock split_lock(&split_mu_);
    if (FindAcg(id) != nullptr) {
      return Status::AlreadyExists("ACG " + std::to_string(id) + " exists on this node");
    }
    Env* env = options_.env;
    const std::string dir = AcgDir(id);
    const std::string staging = dir + kAdoptSuffix;
    const std::string what = "adopting ACG " + std::to_string(id);
    PROPELLER_RETURN_IF_ERROR(RemoveDir(staging).WithContext(what));
    PROPELLER_RETURN_IF_ERROR(env->CreateDirs(staging).WithContext(what));
    // A copy that came over the network is read whole before LMDB maps it (lmdb_check.h).
    PROPELLER_RETURN_IF_ERROR(CheckLmdbFile(path, /*deep=*/true).WithContext(what));
    PROPELLER_RETURN_IF_ERROR(
        WriteFileAtomically(env, JoinPath(staging, kAdoptMarker), "").WithContext(what));
    PROPELLER_RETURN_IF_ERROR(RemoveDir(dir).WithContext(what));  // a drop's leftover
    PROPELLER_RETURN_IF_ERROR(env->RenameFile(staging, dir).WithContext(what));
    PROPELLER_RETURN_IF_ERROR(env->SyncDir(JoinPath(options_.data_dir, "acg")).WithContext(what));
    auto undo = [&](const Status& s) {
      // Best effort: Open removes an unfinished adoption (its marker stays).
      (void)store_->DropAcg(id);
      (void)env->RemoveRecursively(dir);
      return s.WithContext(what);
    };
    // Into the store under the marker: until the marker goes, a restart drops it again.
    if (Status s = store_->IngestAcg(id, path); !s.ok()) return undo(s);
    (void)env->RemoveFile(path);  // the copy is in the store now
    Result<std::unique_ptr<Acg>> opened = Acg::Open(id, dir, &ctx_);
    if (!opened.ok()) return undo(opened.status());
    Acg* acg = opened->get();
    if (acg->has_routes() || acg->cleanup_pending()) {
      return undo(Status::InvalidArgument("the copy is of an ACG with routes, which cannot move"));
    }
    // Records logged here before now are not this ACG's (it was elsewhere): replay must give
    // it only what comes after.
    Status s = acg->SetAppliedLsn(wal_->next_lsn() - 1);
    std::vector<FileRecord> dirs;
    if (s.ok()) s = acg->ListDirectories(&dirs);
    std::map<uint64_t, uint64_t> moved;
    bool was_moved = false;
    {
      ReaderLock lock(&acgs_mu_);
      moved = moved_;
    }
    was_moved = moved.erase(id) != 0;
    if (s.ok() && was_moved) s = WriteMoved(moved);
    if (!s.ok()) return undo(s);
    for (const FileRecord& d : dirs) dir_table_.Put(d);
    if (frozen) frozen_.Freeze(id);  // before any Apply can find it
    {
      WriterLock lock(&acgs_mu_);
      PruneRecentMovesLocked();
      adopted_at_[id] = options_.env->MonotonicNanos();
      moved_at_.erase(id);
      any_recent_moves_.store(true, std::memory_order_release);
      auto it = acgs_.find(id);
      if (it != acgs_.end()) retired_.push_back(std::move(it->second));  // keep its pointers valid
      acgs_[id] = std::move(*opened);
      moved_ = std::move(moved);
    }
    // The commit point. Failing here leaves the marker: the next Open discards the copy,
    // which is right, since no one was told it arrived.
    PROPELLER_RETURN_IF_ERROR(env->RemoveFile(JoinPath(dir, kAdoptMarker)).WithContext(what));
    PROPELLER_RETURN_IF_ERROR(env->SyncDir(dir).WithContext(what));
    OnAcgOpened(acg);
    return Status::OK();
  }

  uint64_t MovedTo(uint64_t id) {
    ReaderLock lock(&acgs_mu_);
    auto it = moved_.find(id);
    return it == moved_.end() ? 0 : it->second;
  }

  // NotFound, or the Redirect of an ACG that moved away.
  Status NotHere(uint64_t id) {
    const uint64_t to = MovedTo(id);
    if (to != 0) return MovedStatus(id, to);
    return Status::NotFound("no ACG " + std::to_string(id));
  }
  Status MovedError(uint64_t id) {
    const uint64_t to = MovedTo(id);
    return MovedStatus(id, to);
  }
  static Status MovedStatus(uint64_t id, uint64_t destination) {
    return Status::Redirect("ACG " + std::to_string(id) + " moved to node " +
                            std::to_string(destination));
  }

  // Only a plain ACG moves: routes (a split or merge source), a split in progress and an
  // unreported split into it (its record lives in its directory here) keep it on this node.
  Status CheckMovable(Acg* acg) {
    const std::string name = "ACG " + std::to_string(acg->id());
    {
      ReaderLock lock(&acgs_mu_);
      if (hidden_acg_ == acg->id()) return Status::InvalidArgument(name + " is being split into");
    }
    if (acg->has_routes() || acg->merged_into() != 0 || acg->cleanup_pending()) {
      return Status::InvalidArgument(name +
                                     " has routes from a split or merge and cannot move");
    }
    if (const uint64_t source = reports_.AnyInto(acg->id()); source != 0) {
      return Status::InvalidArgument(name + " holds the unreported split of ACG " +
                                     std::to_string(source) + "; report it first");
    }
    return Status::OK();
  }

  // <data>/moved: "PMV1\n", then "<acg> <destination>\n" per moved ACG, then "crc <hex>\n"
  // with the masked CRC-32C of everything before it. Replaced atomically.
  std::string MovedPath() const { return JoinPath(options_.data_dir, "moved"); }
  Status WriteMoved(const std::map<uint64_t, uint64_t>& moved) {
    std::string text = "PMV1\n";
    for (const auto& [acg, to] : moved) {
      text += std::to_string(acg) + " " + std::to_string(to) + "\n";
    }
    char crc[32];
    std::snprintf(crc, sizeof(crc), "crc %08x\n", Crc32cMask(Crc32c(text)));
    text += crc;
    return WriteFileAtomically(options_.env, MovedPath(), text);
  }
  Status ReadMoved(std::map<uint64_t, uint64_t>* moved) {
    moved->clear();
    if (!options_.env->FileExists(MovedPath())) return Status::OK();
    std::string text;
    PROPELLER_RETURN_IF_ERROR(ReadFileToString(options_.env, MovedPath(), &text));
    const Status bad = Status::Corruption(MovedPath() + ": not a valid record of moved ACGs");
    const size_t crc_at = text.rfind("crc ");
    if (text.compare(0, 5, "PMV1\n") != 0 || crc_at == std::string::npos) return bad;
    unsigned crc = 0;
    if (std::sscanf(text.c_str() + crc_at, "crc %8x\n", &crc) != 1 ||
        crc != Crc32cMask(Crc32c(std::string_view(text).substr(0, crc_at)))) {
      return bad;
    }
    size_t at = 5;
    while (at < crc_at) {
      const size_t eol = text.find('\n', at);
      if (eol == std::string::npos || eol > crc_at) return bad;
      unsigned long long acg = 0, to = 0;
      char extra = 0;
      if (std::sscanf(text.substr(at, eol - at).c_str(), "%llu %llu%c", &acg, &to, &extra) != 2 ||
          acg == 0) {
        return bad;
      }
      (*moved)[acg] = to;
      at = eol + 1;
    }
    return Status::OK();
  }

  // ACGs without a log: the log (with every acknowledged update not committed yet) was
  // removed. Starting would answer without those updates and without saying so: refuse, unless
  // an administrator put the file kStartWithoutLog in the log's directory (then it is removed
  // and the engine starts with what the ACGs committed). Every engine that ever held an ACG
  // keeps at least one log segment (a clean close keeps the last).
  Status CheckLogPresent(const std::vector<std::string>& acg_names) {
    if (acg_names.empty()) return Status::OK();
    Env* env = options_.env;
    const std::string dir = JoinPath(options_.data_dir, "wal");
    Result<std::vector<std::string>> names = env->GetChildren(dir);
    if (names.ok()) {
      for (const std::string& n : *names) {
        uint64_t first = 0;
        if (ParseWalSegmentName(n, &first)) return Status::OK();
      }
    }
    const std::string accept = JoinPath(dir, kStartWithoutLog);
    if (env->FileExists(accept)) {
      Log(LogLevel::kWarning, "starting without the log %s, as %s asks: updates that were not "
          "committed into the ACGs are lost", dir.c_str(), accept.c_str());
      return env->RemoveFile(accept);
    }
    return Status::NotFound(
        "the log " + dir + " is missing, but " + options_.data_dir + " holds " +
        std::to_string(acg_names.size()) + " ACG directories: starting would drop every update "
        "they had not committed, without a word. Restore the log from a backup; or, to start "
        "with what the ACGs committed, create the empty file " + accept);
  }

  Status RemoveDir(const std::string& dir) { return options_.env->RemoveRecursively(dir); }
  // An ACG's data in the store, then its control directory (in this order: a directory
  // without data is an empty ACG, data without a directory is dropped at the next Open).
  Status RemoveAcgData(uint64_t id) {
    PROPELLER_RETURN_IF_ERROR(store_->DropAcg(id));
    return RemoveDir(AcgDir(id));
  }

  // The data directory's layout (schemas/LAYOUT.md): <data>/LAYOUT holds its number; a
  // directory without one is of layout 3 (or new). A newer layout is refused.
  Status CheckLayout() {
    Env* env = options_.env;
    const std::string path = JoinPath(options_.data_dir, "LAYOUT");
    if (env->FileExists(path)) {
      std::string text;
      PROPELLER_RETURN_IF_ERROR(ReadFileToString(env, path, &text));
      char* end = nullptr;
      const unsigned long v = std::strtoul(text.c_str(), &end, 10);
      if (end == text.c_str() || v == 0) {
        return Status::Corruption(path + " does not hold a layout number");
      }
      if (v > kStoreLayoutVersion) {
        return Status::Corruption(options_.data_dir + " has data layout " + std::to_string(v) +
                                  ", newer than this program's (" +
                                  std::to_string(kStoreLayoutVersion) +
                                  "): run the version that wrote it");
      }
      if (v == kStoreLayoutVersion) return Status::OK();
    }
    // Written first: the conversion of layout-3 ACGs (UpgradeLayout3) is resumed per ACG.
    PROPELLER_RETURN_IF_ERROR(WriteFileAtomically(
        env, path, std::to_string(kStoreLayoutVersion) + "\n"));
    return env->SyncDir(options_.data_dir);
  }

  // Converts the ACG directories of layout 3 (acg/<id>/data.mdb, one environment each) into
  // the store, logging progress: each ACG in one transaction of its shard (the commit point),
  // after which its old files go. An interrupted conversion resumes at the next open (the
  // ingest replaces a partial copy). Damaged ones were quarantined by CheckAtOpen first.
  Status UpgradeLayout3(const std::vector<std::string>& names) {
    Env* env = options_.env;
    std::vector<uint64_t> todo;
    for (const std::string& name : names) {
      char* end = nullptr;
      const unsigned long long id = std::strtoull(name.c_str(), &end, 10);
      if (name.empty() || *end != '\0' || id == 0) continue;
      if (env->FileExists(JoinPath(AcgDir(id), "data.mdb"))) todo.push_back(id);
    }
    if (todo.empty()) return Status::OK();
    Log(LogLevel::kInfo, "converting %zu ACGs of data layout 3 into the store (layout %u)",
        todo.size(), kStoreLayoutVersion);
    const int64_t start = env->MonotonicNanos();
    int64_t last_report = start;
    for (size_t i = 0; i < todo.size(); ++i) {
      const uint64_t id = todo[i];
      const std::string dir = AcgDir(id);
      PROPELLER_RETURN_IF_ERROR(quarantine_.CheckAtOpen(id));
      if (!env->FileExists(JoinPath(dir, "data.mdb"))) continue;  // quarantined
      Status s = store_->IngestLegacyAcg(id, dir);
      if (s.code() == StatusCode::kCorruption) {
        PROPELLER_RETURN_IF_ERROR(quarantine_.Put(id, s.message()));
        continue;
      }
      PROPELLER_RETURN_IF_ERROR(s.WithContext("converting ACG " + std::to_string(id)));
      for (const char* f : {"data.mdb", "lock.mdb", "CLEAN"}) {
        const std::string file = JoinPath(dir, f);
        if (env->FileExists(file)) PROPELLER_RETURN_IF_ERROR(env->RemoveFile(file));
      }
      PROPELLER_RETURN_IF_ERROR(env->SyncDir(dir));
      const int64_t now = env->MonotonicNanos();
      if (now - last_report > 2'000'000'000 || i + 1 == todo.size()) {
        last_report = now;
        Log(LogLevel::kInfo, "converted %zu of %zu ACGs (%.1f s)", i + 1, todo.size(),
            static_cast<double>(now - start) / 1e9);
      }
    }
    return Status::OK();
  }

  // Drops the store's key ranges of ACGs that have no directory (a removal cut short).
  Status DropOrphanRanges(const std::vector<std::string>& names) {
    std::set<uint64_t> dirs;
    for (const std::string& name : names) {
      char* end = nullptr;
      const unsigned long long id = std::strtoull(name.c_str(), &end, 10);
      if (!name.empty() && *end == '\0' && id != 0) dirs.insert(id);
    }
    std::vector<uint64_t> orphans;
    PROPELLER_RETURN_IF_ERROR(store_->ForEachAcg([&](uint64_t id) {
      if (!dirs.contains(id)) orphans.push_back(id);
    }));
    for (uint64_t id : orphans) {
      Log(LogLevel::kWarning, "dropping the data of ACG %llu: it has no directory",
          static_cast<unsigned long long>(id));
      PROPELLER_RETURN_IF_ERROR(store_->DropAcg(id));
    }
    return Status::OK();
  }

  void Crash() {
    crashed_ = true;
    frozen_.WakeAll();  // batches waiting for a move give up
    StopCommitter();
    MutexLock commit_lock(&commit_mu_);  // wait for a running commit
    wal_->Crash();
  }

 private:
  // Routes chain when a split's target is split again; a cycle cannot arise (targets are new
  // ACGs), this only bounds the walk.
  static constexpr int kMaxRouteHops = 64;
  static constexpr char kSplitMarker[] = "SPLITTING";
  static constexpr char kMergeMarker[] = "MERGING";
  // An adopted copy's directory is acg/<id>.adopt until it is complete, then acg/<id> with
  // this marker until its commit point (AdoptAcg).
  static constexpr char kAdoptSuffix[] = ".adopt";
  static constexpr char kAdoptMarker[] = "ADOPTED";
  // How long an Apply waits for a move of one of its ACGs to end.
  static constexpr int64_t kMoveWaitNs = 10'000'000'000;
  // Moved files removed from their source per transaction after a split or merge.
  static constexpr size_t kCleanupChunk = 2048;
  // Catch-up passes before a split's switch, until one copies at most kSplitSmallDelta updates.
  static constexpr size_t kSplitCatchUpPasses = 4;
  static constexpr size_t kSplitSmallDelta = 256;

 public:
  // ---- damaged ACGs (docs/faults.md, "Damaged files") ----

  bool IsDamaged(uint64_t id) { return !quarantine_.WhyOf(id).empty(); }

  std::map<uint64_t, std::string> DamagedAcgs() {
    std::map<uint64_t, std::string> out = quarantine_.All();
    for (Acg* acg : AllAcgs()) {
      if (std::string d = acg->damage(); !d.empty()) out.emplace(acg->id(), d);
    }
    return out;
  }

  Status MarkRebuilt(uint64_t id) { return quarantine_.MarkRebuilt(id); }

  // Why ACG `acg` cannot answer searches, or "".
  std::string DamageOf(Acg* acg) {
    if (std::string why = quarantine_.WhyOf(acg->id()); !why.empty()) return why;
    return acg->damage();
  }

 private:
  std::string AcgDir(uint64_t id) const {
    return JoinPath(JoinPath(options_.data_dir, "acg"), std::to_string(id));
  }
  std::string SplitMarkerPath(uint64_t id) const { return JoinPath(AcgDir(id), kSplitMarker); }
  std::string MergeMarkerPath(uint64_t id) const { return JoinPath(AcgDir(id), kMergeMarker); }

  // glibc's M_MMAP_THRESHOLD with tune_malloc (EngineOptions).
  static constexpr int kMmapThreshold = 256 << 10;
  // A commit pass that drained at least this many updates returns freed heap to the kernel.
  static constexpr uint64_t kTrimAfterUpdates = 100'000;
  // An open ACG's LMDB environment holds its data file, its lock file and a second descriptor
  // of the data file for meta-page writes.

  EngineOptions options_;
  SplitReports reports_;  // splits and merges the master has not been told of
  Quarantine quarantine_;  // damaged ACGs waiting for their rebuild
  std::unique_ptr<ThreadPool> pool_;
  size_t commit_lanes_ = 1;  // ACG commits run at once in one pass. Constant after Open.
  std::unique_ptr<ThreadPool> commit_pool_;  // commit_lanes_ - 1 workers, or null
  std::unique_ptr<Wal> wal_;
  std::string catalogue_path_;
  DirTable dir_table_;
  std::atomic<bool> crashed_{false};
  std::atomic<uint64_t> total_cached_{0};
  // Bytes of the staged batches caches still reference (StagedBatch::bytes()).
  std::atomic<uint64_t> total_cache_bytes_{0};
  std::atomic<uint64_t> use_clock_{0};
  std::atomic<uint64_t> acg_commits_{0};        // Stats
  std::atomic<uint64_t> committed_updates_{0};

  // Lock order: catalogue_mu_ > commit_mu_ > acgs_mu_ > (Acg locks); the components' locks
  // (open_acgs_, frozen_, reports_, quarantine_) are leaves, open_acgs_'s taken with no Acg
  // lock held (eviction try-locks ACGs after releasing it); specs_mu_ is a leaf
  // (Acg::OpenLocked reads the catalogue through it while holding the Acg's lock);
  // Wal::mu_ > Acg cache locks.
  Mutex catalogue_mu_;
  Mutex specs_mu_;
  // Written under catalogue_mu_ too.
  std::vector<IndexSpec> user_indexes_ PROPELLER_GUARDED_BY(specs_mu_);
  std::unique_ptr<Store> store_;  // set by Open; outlives acgs_
  AcgContext ctx_;  // constant after Open; outlives acgs_
  SharedMutex acgs_mu_;
  std::map<uint64_t, std::unique_ptr<Acg>> acgs_ PROPELLER_GUARDED_BY(acgs_mu_);  // never shrinks
  // Retired ACGs replaced in acgs_ by an adopted copy of the same id: kept, so pointers that
  // threads took before stay valid.
  std::vector<std::unique_ptr<Acg>> retired_ PROPELLER_GUARDED_BY(acgs_mu_);
  // ACG -> node it moved to (<data>/moved).
  std::map<uint64_t, uint64_t> moved_ PROPELLER_GUARDED_BY(acgs_mu_);
  std::atomic<bool> any_moved_{false};  // moved_ is not empty
  // When ACGs moved away or were adopted, monotonic ns (SearchStats::moved, adopted); pruned
  // after kRecentMoveNs.
  std::map<uint64_t, int64_t> moved_at_ PROPELLER_GUARDED_BY(acgs_mu_);
  std::map<uint64_t, int64_t> adopted_at_ PROPELLER_GUARDED_BY(acgs_mu_);
  std::atomic<bool> any_recent_moves_{false};  // a move or adoption happened since Open
  // The target of a split in progress, or 0.
  uint64_t hidden_acg_ PROPELLER_GUARDED_BY(acgs_mu_) = 0;

  // ---- splits (SplitAcg) ----
  Mutex split_mu_;  // one split at a time
  PeriodicThread splitter_;  // SplitOversized; stopped with the committer
  // ACG -> monotonic ns before which its split is not retried. The splitter thread's only.
  std::map<uint64_t, int64_t> split_retry_at_;
  // Searches hold it shared throughout; a split's last step holds it exclusively, so that no
  // search sees a moved file in both ACGs or in neither. Lock order: before any Acg's rw_.
  SharedMutex search_gate_;
  std::atomic<bool> any_routes_{false};     // some ACG has routes: Apply follows them
  std::atomic<uint64_t> route_epoch_{0};    // changed (under the log lock) when routes switch
  std::atomic<uint64_t> split_hold_lsn_{0};  // TruncateLog keeps LSNs >= this; 0 = none
  OpenAcgs open_acgs_;  // the bound on open environments (bounds set at Open)
  Mutex commit_mu_;  // serialises CommitDue passes

  // ---- moves (FreezeAndCopyAcg) ----
  ApplyGate apply_gate_;
  FrozenAcgs frozen_;  // ACGs whose updates wait (being moved)

  bool closed_ = false;   // Close() ran; by the owner's thread only
  Mutex health_mu_;  // a leaf
  uint64_t commit_failures_ PROPELLER_GUARDED_BY(health_mu_) = 0;
  // The last commit's, when it failed.
  Status commit_error_ PROPELLER_GUARDED_BY(health_mu_);
  // Wall clock; 0 = not failing.
  int64_t failing_since_ns_ PROPELLER_GUARDED_BY(health_mu_) = 0;

  PeriodicThread committer_;  // CommitDue every tick, and when a cache is over its bound
};

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;
Status Engine::Close() { return impl_->Close(); }

Result<std::unique_ptr<Engine>> Engine::Open(const EngineOptions& options) {
  auto impl = std::make_unique<Impl>(options);
  PROPELLER_RETURN_IF_ERROR(impl->Open());
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

Status Engine::Apply(std::span<const Update> updates) { return impl_->Apply(updates); }

Status Engine::Search(const SearchRequest& request,
                      const std::function<bool(const SearchHit&)>& on_hit, SearchStats* stats) {
  return impl_->Search(request, [&](SearchHit& h) { return on_hit(h); }, stats);
}

Result<std::vector<SearchHit>> Engine::SearchAll(const SearchRequest& request,
                                                 SearchStats* stats) {
  std::vector<SearchHit> hits;
  PROPELLER_RETURN_IF_ERROR(impl_->Search(
      request,
      [&](SearchHit& h) {
        hits.push_back(std::move(h));
        return true;
      },
      stats));
  return hits;
}

Result<FileRecord> Engine::Get(uint64_t acg, FileId id) { return impl_->Get(acg, id); }
bool Engine::RestrictToVisible(FileRecord* record, const Credentials& creds) {
  return impl_->RestrictToVisible(record, creds);
}
Status Engine::CreateIndex(const std::string& name, IndexType type) {
  return impl_->CreateIndex(name, type);
}
Status Engine::DropIndex(const std::string& name) { return impl_->DropIndex(name); }
std::vector<IndexInfo> Engine::ListIndexes() { return impl_->ListIndexes(); }
Status Engine::CommitAll() { return impl_->CommitAll(); }
Status Engine::SyncLog() { return impl_->SyncLog(); }
std::vector<AcgInfo> Engine::ListAcgs() { return impl_->ListAcgs(); }
EngineStats Engine::Stats() { return impl_->Stats(); }
Status Engine::ListEdges(uint64_t acg, std::vector<StoredEdge>* e) {
  return impl_->ListEdges(acg, e);
}
void Engine::CrashForTesting() { impl_->Crash(); }

Status Engine::SplitAcg(uint64_t source, uint64_t target, std::span<const FileId> moving) {
  return impl_->SplitAcg(source, target, moving, /*crash_after_step=*/0);
}

Result<std::vector<FileId>> Engine::PlanSplit(uint64_t acg, double imbalance, int seed,
                                              SplitReport* report) {
  return impl_->PlanSplit(acg, imbalance, seed, report);
}

Result<std::vector<SplitNotice>> Engine::UnreportedSplits() { return impl_->UnreportedSplits(); }
Status Engine::SplitReported(uint64_t source, uint64_t target) {
  return impl_->SplitReported(source, target);
}
Status Engine::MergeAcg(uint64_t source, uint64_t target) {
  return impl_->MergeAcg(source, target, /*crash_after_step=*/0);
}
Status Engine::MergeAcgCrashingForTesting(uint64_t source, uint64_t target, int step) {
  return impl_->MergeAcg(source, target, step);
}
Status Engine::FreezeAndCopyAcg(uint64_t acg, const std::string& path) {
  return impl_->FreezeAndCopyAcg(acg, path);
}
Status Engine::ThawAcg(uint64_t acg) { return impl_->ThawAcg(acg); }
Status Engine::DropMovedAcg(uint64_t acg, uint64_t destination, const std::string& set_aside) {
  return impl_->DropMovedAcg(acg, destination, set_aside);
}
std::map<uint64_t, std::string> Engine::DamagedAcgs() { return impl_->DamagedAcgs(); }
Status Engine::MarkRebuilt(uint64_t acg) { return impl_->MarkRebuilt(acg); }
Status Engine::AdoptAcg(uint64_t acg, const std::string& path, bool frozen) {
  return impl_->AdoptAcg(acg, path, frozen);
}
uint64_t Engine::MovedTo(uint64_t acg) { return impl_->MovedTo(acg); }

Status Engine::SplitAcgCrashingForTesting(uint64_t source, uint64_t target,
                                          std::span<const FileId> moving, int step) {
  return impl_->SplitAcg(source, target, moving, step);
}

}  // namespace propeller
