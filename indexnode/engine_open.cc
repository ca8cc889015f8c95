// Engine::Impl (engine_impl.h): opening a data directory — its layout (and the conversion of
// layout 3, schemas/LAYOUT.md), the store, the ACGs and their recovery from interrupted
// splits, merges, adoptions and removals, and the replay of the log.
#include <malloc.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/lmdb_check.h"
#include "common/logging.h"
#include "common/secure_dir.h"
#include "indexnode/engine_impl.h"
#include "schemas/keys.h"
#include "schemas/record_format.h"
#include "schemas/wal_format.h"

namespace propeller {
namespace {

// An administrator's consent to start without a lost log (Engine::Impl::CheckLogPresent).
constexpr char kStartWithoutLog[] = "START-WITHOUT-LOG";

// Catalogue file: one "name type\n" line per user index (Engine::Impl::CreateIndex).
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

}  // namespace

Status Engine::Impl::Open() {
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
  if (options_.compact_store) {
    const int64_t start = env->MonotonicNanos();
    uint64_t before = 0, after = 0;
    PROPELLER_RETURN_IF_ERROR(store_->Compact(&before, &after));
    Log(LogLevel::kInfo, "compacted the store: %.1f MB -> %.1f MB in %.1f s",
        static_cast<double>(before) / 1e6, static_cast<double>(after) / 1e6,
        static_cast<double>(env->MonotonicNanos() - start) / 1e9);
  }
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
  // No ACG yet: a new data directory, whose list of attribute names starts complete.
  PROPELLER_RETURN_IF_ERROR(
      attr_names_.Open(env, JoinPath(options_.data_dir, "attrs"), /*fresh=*/names.empty()));
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
  const int64_t open_start = env->MonotonicNanos();
  int64_t last_report = open_start;
  size_t seen = 0;
  for (const std::string& name : names) {
    ++seen;
    if (upgrading_ && env->MonotonicNanos() - last_report > 2'000'000'000) {
      // An upgrade rebuilds indexes as the ACGs open: say how far it is.
      last_report = env->MonotonicNanos();
      Log(LogLevel::kInfo, "opened %zu of %zu ACG directories (%.1f s)", seen, names.size(),
          static_cast<double>(last_report - open_start) / 1e9);
    }
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
          ++acgs_changes_;
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
    WriterLock lock(acg->mutex());
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

void Engine::Impl::TuneMalloc() {
  static std::once_flag once;
  std::call_once(once, [] { mallopt(M_MMAP_THRESHOLD, kMmapThreshold); });
}

Status Engine::Impl::CheckLogPresent(const std::vector<std::string>& acg_names) {
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

Status Engine::Impl::RemoveAcgData(uint64_t id) {
  PROPELLER_RETURN_IF_ERROR(store_->DropAcg(id));
  return RemoveDir(AcgDir(id));
}

Status Engine::Impl::CheckLayout() {
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
    if (v == 4) {
      // 4 -> 5: each ACG rebuilds its keyword index as it opens (Acg::ReconcileIndexes sees
      // the older format); layout 3 converts through UpgradeLayout3, then the same.
      Log(LogLevel::kInfo, "data layout 4: every ACG rebuilds its keyword index in posting "
          "chunks (layout %u) as it opens", kStoreLayoutVersion);
    }
    upgrading_ = true;
  }
  // Written first: the conversion of layout-3 ACGs (UpgradeLayout3) is resumed per ACG.
  PROPELLER_RETURN_IF_ERROR(WriteFileAtomically(
      env, path, std::to_string(kStoreLayoutVersion) + "\n"));
  return env->SyncDir(options_.data_dir);
}

Status Engine::Impl::UpgradeLayout3(const std::vector<std::string>& names) {
  Env* env = options_.env;
  std::vector<uint64_t> todo;
  for (const std::string& name : names) {
    char* end = nullptr;
    const unsigned long long id = std::strtoull(name.c_str(), &end, 10);
    if (name.empty() || *end != '\0' || id == 0) continue;
    if (env->FileExists(JoinPath(AcgDir(id), "data.mdb"))) todo.push_back(id);
  }
  if (todo.empty()) return Status::OK();
  upgrading_ = true;
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

Status Engine::Impl::DropOrphanRanges(const std::vector<std::string>& names) {
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

}  // namespace propeller
