// Engine::Impl (engine_impl.h): construction, the write path, search, user indexes and
// introspection; and Engine's forwarding to it. Commits: engine_commit.cc.
#include "indexnode/engine.h"

#include <fcntl.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>

#include "common/crc32c.h"
#include "common/lmdb_check.h"
#include "common/logging.h"
#include "common/mutex.h"
#include "common/query/query.h"
#include "common/secure_dir.h"
#include "common/thread_pool.h"
#include "indexnode/acg.h"
#include "indexnode/dir_table.h"
#include "indexnode/engine_impl.h"
#include "indexnode/wal.h"
#include "schemas/keys.h"
#include "schemas/messages.h"
#include "schemas/record_format.h"
#include "schemas/wal_format.h"

namespace propeller {

const char* DurabilityName(Durability d) {
  return d == Durability::kSync ? "sync" : "default";
}

// A user attribute the query language could never ask for (a built-in name such as `size`,
// or an invalid one) is refused when it is set: accepted, it would silently match nothing.
// (Removing one stays possible: data written before a name became built in.)
Status CheckAttrNames(const FileRecord& record) {
  for (const auto& [name, value] : record.attrs) {
    const std::string why = CheckUserAttrName(name);
    if (!why.empty()) {
      return Status::InvalidArgument("bad user attribute name '" + name + "': " + why);
    }
  }
  return Status::OK();
}

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
      return CheckAttrNames(u.record);
    }
    case UpdateOp::kSetAttrs:
      return CheckAttrNames(u.record);
    case UpdateOp::kDelete: case UpdateOp::kRemoveAttrs: case UpdateOp::kAddEdge:
      return Status::OK();
  }
  return Status::InvalidArgument("unknown update op " + std::to_string(static_cast<int>(u.op)));
}

namespace {

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

bool IsBuiltinIndex(std::string_view name) {
  return name == "path" || name == "keyword" || name == "inode";
}

}  // namespace

EngineOptions Engine::Impl::WithDefaults(EngineOptions o) {
  if (o.env == nullptr) o.env = Env::Default();
  return o;
}

Engine::Impl::Impl(const EngineOptions& o)
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
  ctx_.on_load = [this](Acg* acg) { open_acgs_.Loaded(acg); };
  ctx_.use_clock = &use_clock_;
  ctx_.busy_acgs = &busy_acgs_;
  ctx_.commit_hook = options_.commit_hook;
}

Engine::Impl::~Impl() {
  Status s = Close();
  if (!s.ok()) Log(LogLevel::kError, "engine close: %s", s.ToString().c_str());
}

Status Engine::Impl::Close() {
  if (closed_) return Status::OK();
  closed_ = true;
  watches_.Shutdown();
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

Result<Acg*> Engine::Impl::GetOrCreateAcg(uint64_t id) {
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
    ++acgs_changes_;
  }
  OnAcgOpened(raw);  // Acg::Open leaves it open
  EnforceOpenBounds();  // the caller may not need it open (Apply does not)
  return raw;
}

std::vector<Acg*> Engine::Impl::AcgListLocked() {
  MutexLock lock(&acg_list_mu_);
  if (acg_list_changes_ != acgs_changes_) {
    acg_list_.clear();
    acg_list_.reserve(acgs_.size());
    for (auto& [id, acg] : acgs_) acg_list_.push_back(acg.get());
    acg_list_changes_ = acgs_changes_;
  }
  return acg_list_;
}

std::vector<Acg*> Engine::Impl::AllAcgs() {
  ReaderLock lock(&acgs_mu_);
  return AcgListLocked();
}

std::vector<Acg*> Engine::Impl::SearchableAcgs() {
  ReaderLock lock(&acgs_mu_);
  std::vector<Acg*> out = AcgListLocked();
  if (hidden_acg_ != 0) {  // the list is in id order: a binary search reads a few ACGs
    auto it = std::lower_bound(out.begin(), out.end(), hidden_acg_,
                               [](Acg* a, uint64_t id) { return a->id() < id; });
    if (it != out.end() && (*it)->id() == hidden_acg_) out.erase(it);
  }
  return out;
}

std::vector<Acg*> Engine::Impl::VisibleAcgs() {
  ReaderLock lock(&acgs_mu_);
  std::vector<Acg*> out = AcgListLocked();
  const uint64_t hidden = hidden_acg_;
  std::erase_if(out, [hidden](Acg* acg) {
    return acg->id() == hidden || acg->merged_into() != 0 || acg->retired();
  });
  return out;
}

uint64_t Engine::Impl::Route(uint64_t acg_id, FileId id) {
  for (int hop = 0; hop < kMaxRouteHops; ++hop) {
    Acg* acg = FindAcg(acg_id);
    if (acg == nullptr || !acg->has_routes()) return acg_id;
    const uint64_t next = acg->RouteOf(id);
    if (next == 0) return acg_id;
    acg_id = next;
  }
  return acg_id;
}

Status Engine::Impl::GroupByAcg(std::span<const Update> updates, ApplyScratch* sc,
                                bool skip_moved) {
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

std::shared_ptr<StagedBatch> Engine::Impl::Stage(std::span<const Update> updates,
                                                 ApplyScratch* sc) {
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

bool Engine::Impl::CacheRerouted(const std::shared_ptr<StagedBatch>& staged, const ApplyScratch& sc,
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

Status Engine::Impl::Apply(std::span<const Update> updates) {
  if (crashed_) return Status::Aborted("engine crashed");
  if (updates.empty()) return Status::OK();
  if (updates.size() > UINT32_MAX) return Status::InvalidArgument("update batch is too large");
  for (const Update& u : updates) PROPELLER_RETURN_IF_ERROR(ValidateUpdate(u));
  for (const Update& u : updates) {
    if (u.op == UpdateOp::kPut || u.op == UpdateOp::kSetAttrs) {
      PROPELLER_RETURN_IF_ERROR(attr_names_.Note(u.record));
    }
  }
  // A batch that touches an ACG being moved waits for the move to end (ThawAcg or
  // DropMovedAcg), then goes again: it is applied, or it gets the Redirect of a moved ACG.
  for (;;) {
    uint64_t frozen = 0;
    Status s;
    bool watched = watches_.active();
    if (!watched && tracking_ids_.load(std::memory_order_relaxed)) StopTrackingIds();
    if (!watched) {
      ReaderLock lock(&watch_mu_);
      watched = watches_.active();  // registered meanwhile (Watch holds watch_mu_ alone)
      if (!watched) s = ApplyOnce(updates, &frozen);
    }
    if (watched) s = ApplyWatched(updates, &frozen);
    if (frozen == 0) return s;
    PROPELLER_RETURN_IF_ERROR(
        frozen_.WaitUntilThawed(frozen, options_.env, kMoveWaitNs, crashed_));
  }
}

Status Engine::Impl::ApplyOnce(std::span<const Update> updates, uint64_t* frozen) {
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

Acg* Engine::Impl::FindAcg(uint64_t id) {
  ReaderLock lock(&acgs_mu_);
  auto it = acgs_.find(id);
  return it == acgs_.end() || it->second->retired() ? nullptr : it->second.get();
}

bool Engine::Impl::RestrictToVisible(FileRecord* record, const Credentials& creds) const {
  if (creds.uid == 0) return true;
  std::erase_if(record->paths, [&](const std::string& p) {
    return !dir_table_.Visible(record->id.volume, p, creds);
  });
  return !record->paths.empty();
}

Result<FileRecord> Engine::Impl::Get(uint64_t acg_id, FileId id) {
  if (crashed_) return Status::Aborted("engine crashed");
  if (any_routes_.load(std::memory_order_acquire)) acg_id = Route(acg_id, id);
  Acg* acg = FindAcg(acg_id);
  if (acg == nullptr) return NotHere(acg_id);
  PROPELLER_RETURN_IF_ERROR(CommitAcg(acg));
  Result<FileRecord> rec = acg->Get(id);
  EnforceOpenBounds();
  return rec;
}

Status Engine::Impl::CreateIndex(const std::string& name, IndexType type) {
  if (crashed_) return Status::Aborted("engine crashed");
  std::string why = CheckNewIndexName(name);
  if (!why.empty()) return Status::InvalidArgument("bad index name '" + name + "': " + why);
  if (IsBuiltinIndex(name)) return Status::AlreadyExists("'" + name + "' is a built-in index");
  if (type == IndexType::kKdTree) {
    // No update feeds a user K-D tree (a user attribute is one value: a btree ranges over
    // it); one offered would stay empty and answer nothing.
    return Status::InvalidArgument("a user index is btree (ranges, prefixes) or hash "
                                   "(equality); kdtree is only the built-in inode index's");
  }
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

Status Engine::Impl::DropIndex(const std::string& name) {
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

std::vector<IndexSpec> Engine::Impl::Catalogue() {
  MutexLock lock(&specs_mu_);
  return user_indexes_;
}

Status Engine::Impl::ApplyCatalogue(std::vector<IndexSpec> specs) {
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

std::vector<IndexInfo> Engine::Impl::ListIndexes() {
  std::vector<IndexInfo> out = {{"inode", IndexType::kKdTree, true},
                                {"keyword", IndexType::kBTree, true},
                                {"path", IndexType::kBTree, true}};
  for (const IndexSpec& s : Catalogue()) out.push_back({s.name, s.type, false});
  return out;
}

std::vector<AcgInfo> Engine::Impl::ListAcgs() {
  std::vector<AcgInfo> out;
  ReaderLock gate(&search_gate_);  // not across a split's switch
  for (Acg* acg : VisibleAcgs()) {
    out.push_back(AcgInfo{acg->id(), acg->files(), acg->edges(), acg->cached(),
                          acg->disk_bytes()});
  }
  return out;
}

EngineStats Engine::Impl::Stats() {
  EngineStats st;
  ReaderLock gate(&search_gate_);  // not across a split's switch
  for (Acg* acg : VisibleAcgs()) {
    ++st.acgs;
    st.files += acg->files();
    st.cached_updates += acg->cached();
    st.index_memory_bytes += acg->index_memory_bytes();
    if (acg->is_open()) ++st.open_acgs;
    if (const uint64_t tables = acg->hash_bytes(); tables > 0) {
      ++st.loaded_acgs;
      st.open_acg_bytes += tables;
    }
  }
  st.cache_bytes = total_cache_bytes_.load();
  st.acg_opens = open_acgs_.opens();
  st.acg_unloads = open_acgs_.unloads();
  st.disk_bytes += store_ != nullptr ? store_->disk_bytes() : 0;
  st.store_resident_bytes = store_ != nullptr ? store_->ResidentBytes() : 0;
  st.map_trims = map_trims_.load();
  st.store_environments = store_ != nullptr ? store_->shard_count() : 0;
  st.acg_commits = acg_commits_.load();
  st.store_commits = store_commits_.load();
  st.committed_updates = committed_updates_.load();
  st.splits = splits_.load(std::memory_order_relaxed);
  st.merges = merges_.load(std::memory_order_relaxed);
  st.commit_seconds = commit_seconds_.Snapshot();
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

Status Engine::Impl::ListEdges(uint64_t acg_id, std::vector<StoredEdge>* edges) {
  if (crashed_) return Status::Aborted("engine crashed");
  Acg* acg = FindAcg(acg_id);
  if (acg == nullptr) return NotHere(acg_id);
  PROPELLER_RETURN_IF_ERROR(CommitAcg(acg));
  Status s = acg->ListEdges(edges);
  EnforceOpenBounds();
  return s;
}

void Engine::Impl::AppendSplitCopy(uint64_t target, const std::vector<FileRecord>& records,
                                   const std::vector<FileId>& gone,
                                   const std::vector<StoredEdge>& edges,
                                   const std::vector<StoredEdge>& have, std::vector<Update>* out) {
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

void Engine::Impl::Crash() {
  crashed_ = true;
  frozen_.WakeAll();  // batches waiting for a move give up
  StopCommitter();
  MutexLock commit_lock(&commit_mu_);  // wait for a running commit
  wal_->Crash();
}

std::map<uint64_t, std::string> Engine::Impl::DamagedAcgs() {
  std::map<uint64_t, std::string> out = quarantine_.All();
  for (Acg* acg : AllAcgs()) {
    if (std::string d = acg->damage(); !d.empty()) out.emplace(acg->id(), d);
  }
  return out;
}

std::string Engine::Impl::DamageOf(Acg* acg) {
  if (std::string why = quarantine_.WhyOf(acg->id()); !why.empty()) return why;
  return acg->damage();
}

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;
Status Engine::Close() { return impl_->Close(); }
Result<std::unique_ptr<EngineWatch>> Engine::Watch(const WatchSpec& spec) {
  return impl_->Watch(spec);
}

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
