#include "indexnode/engine.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <thread>

#include "common/logging.h"
#include "common/query/query.h"
#include "common/thread_pool.h"
#include "indexnode/acg.h"
#include "indexnode/dir_table.h"
#include "indexnode/wal.h"
#include "schemas/record_format.h"

namespace propeller {

const char* DurabilityName(Durability d) {
  return d == Durability::kSync ? "sync" : "default";
}

namespace {

constexpr int64_t kCommitterTickNs = 50'000'000;  // how often the committer looks at caches

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
  explicit Impl(const EngineOptions& o) : options_(o) {
    if (options_.env == nullptr) options_.env = Env::Default();
    int threads = options_.search_threads;
    if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    pool_ = std::make_unique<ThreadPool>(threads);
  }

  ~Impl() {
    StopCommitter();
    if (!crashed_ && wal_) {  // no log: Open failed before anything could be cached
      Status s = CommitAll();
      if (!s.ok()) Log(LogLevel::kError, "engine close: %s", s.ToString().c_str());
    }
    wal_.reset();
  }

  Status Open() {
    Env* env = options_.env;
    if (options_.data_dir.empty()) return Status::InvalidArgument("no data directory given");
    if (options_.group_commit_interval_ns <= 0 || options_.commit_timeout_ns < 0) {
      return Status::InvalidArgument("group commit interval must be > 0 and commit timeout >= 0");
    }
    if (options_.wal_segment_bytes < 4096 || options_.acg_map_size < (1u << 20)) {
      return Status::InvalidArgument("log segments must be >= 4 KiB and the ACG map >= 1 MiB");
    }
    if (options_.cache_bound_updates == 0 || options_.total_cache_bound_updates == 0) {
      return Status::InvalidArgument("cache bounds must be > 0");
    }
    PROPELLER_RETURN_IF_ERROR(env->CreateDirs(JoinPath(options_.data_dir, "acg")));
    catalogue_path_ = JoinPath(options_.data_dir, "indexes");
    if (env->FileExists(catalogue_path_)) {
      std::string text;
      PROPELLER_RETURN_IF_ERROR(ReadFileToString(env, catalogue_path_, &text));
      PROPELLER_RETURN_IF_ERROR(DecodeCatalogue(text, &user_indexes_));
    }
    // Open every ACG; the log's next LSN must exceed every LSN any ACG has applied (a power
    // loss may have cut the log's unsynced tail after an ACG had committed it).
    PROPELLER_ASSIGN_OR_RETURN(std::vector<std::string> names,
                               env->GetChildren(JoinPath(options_.data_dir, "acg")));
    uint64_t max_applied = 0;
    for (const std::string& name : names) {
      char* end = nullptr;
      unsigned long long id = std::strtoull(name.c_str(), &end, 10);
      if (name.empty() || *end != '\0' || id == 0) continue;
      PROPELLER_ASSIGN_OR_RETURN(Acg * acg, GetOrCreateAcg(id));
      max_applied = std::max(max_applied, acg->applied_lsn());
    }
    Wal::Options wo;
    wo.env = env;
    wo.dir = JoinPath(options_.data_dir, "wal");
    wo.durability = options_.durability;
    wo.group_commit_interval_ns = options_.group_commit_interval_ns;
    wo.segment_bytes = options_.wal_segment_bytes;
    std::vector<Update> batch;
    auto replay = [&](uint64_t lsn, std::string_view payload) -> Status {
      batch.clear();
      PROPELLER_RETURN_IF_ERROR(DecodeUpdateBatch(payload, &batch));
      for (const Update& u : batch) {
        PROPELLER_ASSIGN_OR_RETURN(Acg * acg, GetOrCreateAcg(u.acg));
        if (lsn > acg->applied_lsn()) {
          acg->AddToCache(lsn, u, env->MonotonicNanos());
          ++total_cached_;
        }
      }
      return Status::OK();
    };
    PROPELLER_ASSIGN_OR_RETURN(wal_, Wal::Open(wo, max_applied + 1, replay));
    // The permission table: committed directories plus replayed ones.
    for (Acg* acg : AllAcgs()) {
      std::vector<FileRecord> dirs;
      PROPELLER_RETURN_IF_ERROR(acg->ListDirectories(&dirs));
      for (const FileRecord& d : dirs) dir_table_.Put(d);
    }
    if (options_.background_commit) {
      committer_ = std::thread([this] { CommitterMain(); });
    }
    return Status::OK();
  }

  Result<Acg*> GetOrCreateAcg(uint64_t id) {
    {
      std::shared_lock<std::shared_mutex> lock(acgs_mu_);
      auto it = acgs_.find(id);
      if (it != acgs_.end()) return it->second.get();
    }
    std::unique_lock<std::shared_mutex> lock(acgs_mu_);
    auto it = acgs_.find(id);
    if (it != acgs_.end()) return it->second.get();
    std::string dir = JoinPath(JoinPath(options_.data_dir, "acg"), std::to_string(id));
    PROPELLER_ASSIGN_OR_RETURN(std::unique_ptr<Acg> acg,
                               Acg::Open(id, dir, options_.acg_map_size, user_indexes_));
    Acg* raw = acg.get();
    acgs_[id] = std::move(acg);
    return raw;
  }

  std::vector<Acg*> AllAcgs() {
    std::shared_lock<std::shared_mutex> lock(acgs_mu_);
    std::vector<Acg*> out;
    out.reserve(acgs_.size());
    for (auto& [id, acg] : acgs_) out.push_back(acg.get());
    return out;
  }

  Status Apply(std::span<const Update> updates) {
    if (crashed_) return Status::Aborted("engine crashed");
    if (updates.empty()) return Status::OK();
    std::vector<Acg*> targets;
    targets.reserve(updates.size());
    for (const Update& u : updates) {
      PROPELLER_RETURN_IF_ERROR(ValidateUpdate(u));
      // Create ACGs before logging: opening an environment must not happen under the log lock.
      // Batches usually target few ACGs in runs: reuse the previous lookup.
      if (targets.empty() || targets.back()->id() != u.acg) {
        PROPELLER_ASSIGN_OR_RETURN(Acg * acg, GetOrCreateAcg(u.acg));
        targets.push_back(acg);
      } else {
        targets.push_back(targets.back());
      }
    }
    thread_local std::string payload;
    payload.clear();
    EncodeUpdateBatch(updates, &payload);
    Env* env = options_.env;
    auto on_logged = [&](uint64_t lsn) {
      int64_t now = env->MonotonicNanos();
      for (size_t i = 0; i < updates.size(); ++i) {
        targets[i]->AddToCache(lsn, updates[i], now);
        dir_table_.Apply(updates[i]);
      }
    };
    PROPELLER_RETURN_IF_ERROR(wal_->Append(payload, on_logged).status());
    uint64_t total = total_cached_.fetch_add(updates.size()) + updates.size();
    // Enforce the cache bounds.
    bool over = total > options_.total_cache_bound_updates;
    for (Acg* acg : targets) {
      if (acg->cached() > options_.cache_bound_updates) over = true;
    }
    if (over) {
      if (options_.background_commit) {
        std::lock_guard<std::mutex> lock(committer_mu_);
        committer_wake_ = true;
        committer_cv_.notify_one();
      } else {
        PROPELLER_RETURN_IF_ERROR(CommitDue(/*force_all=*/false));
      }
    }
    return Status::OK();
  }

  // Commits caches that are too old or too big; with force_all, every cache.
  Status CommitDue(bool force_all) {
    std::lock_guard<std::mutex> commit_lock(commit_mu_);
    const int64_t now = options_.env->MonotonicNanos();
    std::vector<Acg*> acgs = AllAcgs();
    // One log sync for the whole pass (not one per partition: with 1,000 partitions under a
    // steady write load that would be 1,000 fsyncs per pass).
    PROPELLER_RETURN_IF_ERROR(wal_->Sync());
    const uint64_t durable = wal_->synced_lsn();
    Status first_error;
    std::vector<std::pair<size_t, Acg*>> sizes;
    for (Acg* acg : acgs) {
      size_t n = acg->cached();
      if (n == 0) continue;
      bool due = force_all || n > options_.cache_bound_updates ||
                 now - acg->oldest_cached_time_ns() >= options_.commit_timeout_ns;
      if (due) {
        Status s = CommitAcg(acg, durable);
        if (!s.ok() && first_error.ok()) first_error = s;
      } else {
        sizes.emplace_back(n, acg);
      }
    }
    // Node-wide bound: commit the largest caches until under it.
    std::sort(sizes.begin(), sizes.end(), [](auto& a, auto& b) { return a.first > b.first; });
    uint64_t remaining = 0;
    for (auto& [n, acg] : sizes) remaining += n;
    for (auto& [n, acg] : sizes) {
      if (remaining <= options_.total_cache_bound_updates / 2) break;
      Status s = CommitAcg(acg, durable);
      if (!s.ok() && first_error.ok()) first_error = s;
      remaining -= n;
    }
    PROPELLER_RETURN_IF_ERROR(TruncateLog());
    return first_error;
  }

  // Commits `acg`'s cache up to the durable end of the log, so the indexes never hold an
  // update the log could lose in a power loss. durable_lsn = 0: sync the log now and use its
  // end (everything acknowledged before this call); otherwise an LSN already known durable.
  Status CommitAcg(Acg* acg, uint64_t durable_lsn = 0) {
    size_t n = acg->cached();
    if (n == 0) return Status::OK();
    if (durable_lsn == 0) {
      PROPELLER_RETURN_IF_ERROR(wal_->Sync());
      durable_lsn = wal_->synced_lsn();
    }
    Status s = acg->Commit(durable_lsn);
    if (s.ok()) {
      uint64_t cur = total_cached_.load();
      uint64_t sub;
      do {
        sub = std::min<uint64_t>(cur, n);
      } while (!total_cached_.compare_exchange_weak(cur, cur - sub));
    }
    return s;
  }

  // Deletes the log segments every ACG has committed.
  Status TruncateLog() {
    uint64_t needed = wal_->next_lsn();
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

  void CommitterMain() {
    std::unique_lock<std::mutex> lock(committer_mu_);
    while (!committer_stop_) {
      committer_cv_.wait_for(lock, std::chrono::nanoseconds(kCommitterTickNs),
                             [this] { return committer_stop_ || committer_wake_; });
      if (committer_stop_) break;
      committer_wake_ = false;
      lock.unlock();
      Status s = CommitDue(/*force_all=*/false);
      if (!s.ok()) Log(LogLevel::kError, "background commit: %s", s.ToString().c_str());
      lock.lock();
    }
  }

  void StopCommitter() {
    {
      std::lock_guard<std::mutex> lock(committer_mu_);
      committer_stop_ = true;
      committer_cv_.notify_all();
    }
    if (committer_.joinable()) committer_.join();
  }

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

    std::vector<Acg*> acgs = AllAcgs();
    SearchStats stats;
    stats.acgs_total = acgs.size();
    std::vector<Acg*> todo;
    for (Acg* acg : acgs) {
      if (acg->MayMatch(query.root())) {
        todo.push_back(acg);
      } else {
        ++stats.acgs_skipped;
      }
    }

    const bool sorted = !req.sort_by.empty();
    std::mutex out_mu;
    std::atomic<bool> stop{false};
    std::vector<SearchHit> collected;  // when sorted; Under out_mu.
    uint64_t delivered = 0;            // Under out_mu.
    std::atomic<uint64_t> committed{0}, candidates{0};
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
      AcgSearchRequest ar;
      ar.query = &query;
      ar.scope = req.scope;
      ar.volume = req.volume;
      ar.stop = &stop;
      ar.on_match = [&](const std::string& path, FileRecord& rec) {
        if (req.creds && !dir_table_.Visible(rec.id.volume, path, *req.creds)) return true;
        std::lock_guard<std::mutex> lock(out_mu);
        if (stop.load()) return false;
        SearchHit hit{path, std::move(rec), acg->id()};
        if (sorted) {
          collected.push_back(std::move(hit));
          return true;
        }
        ++delivered;
        if (!on_hit(hit) || (req.limit != 0 && delivered >= req.limit)) {
          stop.store(true);
          return false;
        }
        return true;
      };
      AcgSearchStats as;
      errors[i] = acg->Search(ar, &as);
      candidates.fetch_add(as.candidates);
    });
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
    stats.candidates = candidates.load();
    stats.hits = delivered;
    if (stats_out) *stats_out = stats;
    return Status::OK();
  }

  static void SortHits(const std::string& key, bool desc, std::vector<SearchHit>* hits) {
    std::sort(hits->begin(), hits->end(), [&](const SearchHit& a, const SearchHit& b) {
      return SortsBefore(key, desc, a.path, a.record, b.path, b.record);
    });
  }

  Result<FileRecord> Get(uint64_t acg_id, FileId id) {
    Acg* acg = nullptr;
    {
      std::shared_lock<std::shared_mutex> lock(acgs_mu_);
      auto it = acgs_.find(acg_id);
      if (it == acgs_.end()) return Status::NotFound("no ACG " + std::to_string(acg_id));
      acg = it->second.get();
    }
    PROPELLER_RETURN_IF_ERROR(CommitAcg(acg));
    return acg->Get(id);
  }

  Status CreateIndex(const std::string& name, IndexType type) {
    std::string why = ValidateIndexName(name);
    if (!why.empty()) return Status::InvalidArgument("bad index name '" + name + "': " + why);
    if (IsBuiltinIndex(name)) return Status::AlreadyExists("'" + name + "' is a built-in index");
    std::lock_guard<std::mutex> lock(catalogue_mu_);
    for (const IndexSpec& s : user_indexes_) {
      if (s.name == name) return Status::AlreadyExists("index '" + name + "' exists");
    }
    std::vector<IndexSpec> next = user_indexes_;
    next.push_back(IndexSpec{name, type});
    // Catalogue first: a crash after it leaves ACGs that build the index when they open.
    PROPELLER_RETURN_IF_ERROR(
        WriteFileAtomically(options_.env, catalogue_path_, EncodeCatalogue(next)));
    {
      std::unique_lock<std::shared_mutex> al(acgs_mu_);
      user_indexes_ = next;
    }
    for (Acg* acg : AllAcgs()) {
      PROPELLER_RETURN_IF_ERROR(CommitAcg(acg));
      PROPELLER_RETURN_IF_ERROR(acg->CreateIndex(IndexSpec{name, type}));
    }
    return Status::OK();
  }

  Status DropIndex(const std::string& name) {
    std::lock_guard<std::mutex> lock(catalogue_mu_);
    std::vector<IndexSpec> next;
    bool found = false;
    for (const IndexSpec& s : user_indexes_) {
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
    {
      std::unique_lock<std::shared_mutex> al(acgs_mu_);
      user_indexes_ = next;
    }
    for (Acg* acg : AllAcgs()) {
      PROPELLER_RETURN_IF_ERROR(CommitAcg(acg));
      PROPELLER_RETURN_IF_ERROR(acg->DropIndex(name));
    }
    return Status::OK();
  }

  std::vector<IndexInfo> ListIndexes() {
    std::vector<IndexInfo> out = {{"inode", IndexType::kKdTree, true},
                                  {"keyword", IndexType::kHash, true},
                                  {"path", IndexType::kBTree, true}};
    std::lock_guard<std::mutex> lock(catalogue_mu_);
    for (const IndexSpec& s : user_indexes_) out.push_back({s.name, s.type, false});
    return out;
  }

  std::vector<AcgInfo> ListAcgs() {
    std::vector<AcgInfo> out;
    for (Acg* acg : AllAcgs()) {
      out.push_back(AcgInfo{acg->id(), acg->files(), acg->edges(), acg->cached(),
                            acg->disk_bytes()});
    }
    return out;
  }

  EngineStats Stats() {
    EngineStats st;
    for (Acg* acg : AllAcgs()) {
      ++st.acgs;
      st.files += acg->files();
      st.cached_updates += acg->cached();
      st.disk_bytes += acg->disk_bytes();
      st.index_memory_bytes += acg->index_memory_bytes();
    }
    st.wal_bytes = wal_ ? wal_->bytes() : 0;
    st.disk_bytes += st.wal_bytes;
    st.next_lsn = wal_ ? wal_->next_lsn() : 0;
    return st;
  }

  Status ListEdges(uint64_t acg_id,
                   std::vector<std::tuple<FileId, FileId, uint64_t>>* edges) {
    Acg* acg = nullptr;
    {
      std::shared_lock<std::shared_mutex> lock(acgs_mu_);
      auto it = acgs_.find(acg_id);
      if (it == acgs_.end()) return Status::NotFound("no ACG " + std::to_string(acg_id));
      acg = it->second.get();
    }
    PROPELLER_RETURN_IF_ERROR(CommitAcg(acg));
    return acg->ListEdges(edges);
  }

  Status SyncLog() { return wal_->Sync(); }

  void Crash() {
    crashed_ = true;
    StopCommitter();
    std::lock_guard<std::mutex> commit_lock(commit_mu_);  // wait for a running commit
    wal_->Crash();
  }

 private:
  EngineOptions options_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<Wal> wal_;
  std::string catalogue_path_;
  DirTable dir_table_;
  std::atomic<bool> crashed_{false};
  std::atomic<uint64_t> total_cached_{0};

  // Lock order: catalogue_mu_ > commit_mu_ > acgs_mu_ > (Acg locks); Wal::mu_ > Acg cache locks.
  std::mutex catalogue_mu_;
  std::vector<IndexSpec> user_indexes_;  // Written under catalogue_mu_ and acgs_mu_.
  std::shared_mutex acgs_mu_;
  std::map<uint64_t, std::unique_ptr<Acg>> acgs_;  // Under acgs_mu_. Never shrinks.
  std::mutex commit_mu_;  // serialises CommitDue passes

  std::mutex committer_mu_;
  std::condition_variable committer_cv_;
  bool committer_stop_ = false;  // Under committer_mu_.
  bool committer_wake_ = false;  // Under committer_mu_.
  std::thread committer_;
};

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

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
Status Engine::CreateIndex(const std::string& name, IndexType type) {
  return impl_->CreateIndex(name, type);
}
Status Engine::DropIndex(const std::string& name) { return impl_->DropIndex(name); }
std::vector<IndexInfo> Engine::ListIndexes() { return impl_->ListIndexes(); }
Status Engine::CommitAll() { return impl_->CommitAll(); }
Status Engine::SyncLog() { return impl_->SyncLog(); }
std::vector<AcgInfo> Engine::ListAcgs() { return impl_->ListAcgs(); }
EngineStats Engine::Stats() { return impl_->Stats(); }
Status Engine::ListEdges(uint64_t acg, std::vector<std::tuple<FileId, FileId, uint64_t>>* e) {
  return impl_->ListEdges(acg, e);
}
void Engine::CrashForTesting() { impl_->Crash(); }

}  // namespace propeller
