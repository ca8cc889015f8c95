// Engine::Impl::Search and its helpers (engine.h; docs/architecture.md §6 "Search").
#include <algorithm>
#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "common/query/query.h"
#include "indexnode/acg.h"
#include "indexnode/engine.h"
#include "indexnode/engine_impl.h"
#include "indexnode/summary.h"

namespace propeller {

Status Engine::Impl::Search(const SearchRequest& req, const std::function<bool(SearchHit&)>& on_hit,
                            SearchStats* stats_out) {
  if (crashed_) return Status::Aborted("engine crashed");
  ParseOptions po;
  po.now_ns = req.now_ns != 0 ? req.now_ns : options_.env->NowNanos();
  PROPELLER_ASSIGN_OR_RETURN(Query query, Query::Parse(req.query, po));
  std::vector<std::string> unknown = UnknownAttrs(query);
  if (!unknown.empty() && !req.report_unknown_attrs) {
    // Parsed again against the names that exist, for the parser's message: the position of
    // the first unknown name and the nearest known ones.
    std::vector<std::string> known = attr_names_.Known();
    for (const IndexSpec& s : Catalogue()) known.push_back(s.name);
    std::sort(known.begin(), known.end());
    po.user_attrs = &known;
    Result<Query> strict = Query::Parse(req.query, po);
    return strict.ok() ? Status::InvalidArgument("unknown attribute '" + unknown[0] + "'")
                       : strict.status();
  }
  std::string why = ValidatePath(req.scope);
  if (!why.empty()) return Status::InvalidArgument("bad scope '" + req.scope + "': " + why);
  PROPELLER_RETURN_IF_ERROR(CheckSortKey(req.sort_by));
  // One pass per distinct meaning of the query: the volumes whose roots change the path
  // predicates each get their own rewrite (Query::WithRoot), the rest the query as written.
  struct Pass {
    const Query* query;
    std::optional<uint32_t> volume;
    const std::vector<uint32_t>* skip = nullptr;
  };
  std::vector<Query> rewritten;
  std::vector<uint32_t> rewritten_volumes;  // sorted (the map's order)
  rewritten.reserve(req.volume_roots.size());
  for (const auto& [volume, root] : req.volume_roots) {
    if (req.volume && volume != *req.volume) continue;
    bool changed = false;
    Query w = query.WithRoot(root, &changed);
    if (!changed) continue;
    rewritten.push_back(std::move(w));
    rewritten_volumes.push_back(volume);
  }
  std::vector<Pass> passes;
  if (!req.volume || rewritten_volumes.empty()) {
    passes.push_back(Pass{&query, req.volume, rewritten_volumes.empty() ? nullptr
                                                                        : &rewritten_volumes});
  }
  for (size_t k = 0; k < rewritten.size(); ++k) {
    passes.push_back(Pass{&rewritten[k], rewritten_volumes[k]});
  }

  // A split's final step (SplitAcg) happens between searches, never during one.
  ReaderLock gate(&search_gate_);
  // Every ACG but a split's hidden target; those merged away or retired are left out by the
  // judge below, in parallel (VisibleAcgs would read each ACG once more, on this thread).
  std::vector<Acg*> acgs = SearchableAcgs();
  SearchStats stats;
  // Before the recent moves are noted: an excluded ACG is not reported as adopted either.
  if (!req.exclude.empty()) {
    std::erase_if(acgs, [&](Acg* a) {
      return std::find(req.exclude.begin(), req.exclude.end(), a->id()) != req.exclude.end();
    });
  }
  std::vector<uint64_t> wanted;
  if (!req.acgs.empty()) {
    wanted = req.acgs;
    std::sort(wanted.begin(), wanted.end());
    std::erase_if(acgs, [&](Acg* a) {
      return !std::binary_search(wanted.begin(), wanted.end(), a->id());
    });
  }
  // Which ACGs the query may match (their summaries), in parallel slices: at 100 M files a
  // search asks 100,000 ACGs, each a few cache misses. A damaged ACG's files cannot be
  // searched, and which they are is unknown: a search that would include it fails rather than
  // answer without them.
  enum : uint8_t { kSkip, kMay, kDamaged, kGone };
  std::vector<uint8_t> verdict(acgs.size());
  const size_t slices = std::min<size_t>(64, acgs.size() / 2048 + 1);
  // The summaries' filter bytes the passes read, prefetched a few ACGs ahead (at 100 M files
  // their misses were 6% of `keyword=firefox & mtime<1w`).
  std::vector<uint32_t> bloom_bytes;
  for (const Pass& pass : passes) AcgSummary::BloomProbes(pass.query->root(), &bloom_bytes);
  constexpr size_t kJudgeAhead = 8;
  auto judge = [&](size_t s) {
    const size_t end = (s + 1) * acgs.size() / slices;
    for (size_t i = s * acgs.size() / slices; i < end; ++i) {
      if (i + kJudgeAhead < end) acgs[i + kJudgeAhead]->PrefetchSummary(bloom_bytes);
      if (acgs[i]->merged_into() != 0 || acgs[i]->retired()) {
        verdict[i] = kGone;
        continue;
      }
      if (!DamageOf(acgs[i]).empty()) {
        verdict[i] = kDamaged;
        continue;
      }
      verdict[i] = kSkip;
      for (const Pass& pass : passes) {
        if (acgs[i]->MayMatch(pass.query->root())) {
          verdict[i] = kMay;
          break;
        }
      }
    }
  };
  if (slices == 1) {
    judge(0);
  } else {
    pool_->ParallelFor(slices, judge);
  }
  {
    size_t kept = 0;
    for (size_t i = 0; i < acgs.size(); ++i) {
      if (verdict[i] == kGone) continue;
      acgs[kept] = acgs[i];
      verdict[kept++] = verdict[i];
    }
    acgs.resize(kept);
    verdict.resize(kept);
  }
  if (!req.acgs.empty()) {
    NoteRecentMoves(acgs, &wanted, &stats);
  } else if (any_recent_moves_.load(std::memory_order_acquire)) {
    NoteRecentMoves(acgs, nullptr, &stats);
  }
  stats.acgs_total = acgs.size();
  stats.unknown_attrs = std::move(unknown);
  std::vector<Acg*> todo;
  for (size_t i = 0; i < acgs.size(); ++i) {
    if (verdict[i] == kDamaged) {
      return Status::Unavailable("ACG " + std::to_string(acgs[i]->id()) +
                                 " is damaged and not rebuilt yet, so this search cannot be "
                                 "answered whole: " + DamageOf(acgs[i]));
    }
    if (verdict[i] == kMay) {
      todo.push_back(acgs[i]);
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
  std::atomic<uint64_t> committed{0};
  // Per ACG, summed at the end: two threads adding to one shared counter for every ACG made
  // its cache line a contended write per ACG (10,000 at 10 M files).
  struct AcgCounts {
    uint64_t candidates = 0;
    uint32_t closed = 0;
  };
  std::vector<AcgCounts> counts(todo.size());
  std::vector<Status> errors(todo.size());
  std::vector<AcgQueryShape> shapes;
  shapes.reserve(passes.size());
  for (const Pass& pass : passes) shapes.push_back(Acg::ShapeOf(*pass.query));

  uint32_t box_axes = 0;  // of any pass
  for (const AcgQueryShape& shape : shapes) box_axes |= shape.box_axes;
  constexpr size_t kPrefetchAhead = 4;

  pool_->ParallelFor(todo.size(), [&](size_t i) {
    if (stop.load()) return;
    // A pipeline over the ACGs ahead: each object, then its K-D tree's object, fields and
    // boxes, one ACG nearer at each step (PrefetchKdTree). At 100 M files the K-D trees of
    // `keyword=firefox & mtime<1w` were 40% of its time, mostly waiting for memory.
    if (i + kPrefetchAhead < todo.size()) todo[i + kPrefetchAhead]->PrefetchForSearch();
    if (box_axes != 0) {
      for (int step = 0; step < 3; ++step) {
        const size_t ahead = kPrefetchAhead - 1 - static_cast<size_t>(step);
        if (i + ahead < todo.size()) todo[i + ahead]->PrefetchKdTree(step, box_axes);
      }
    }
    Acg* acg = todo[i];
    if (acg->busy() && acg->cached() > 0) {
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
    auto on_match = [&](const std::string& path, FileRecord& rec) {
      if (req.creds) {
        if (req.volume_visible && !req.volume_visible(rec.id.volume)) return true;
        if (!dir_table_.Visible(rec.id.volume, path, *req.creds)) return true;
        if (rec.paths.size() > 1) RestrictToVisible(&rec, *req.creds);
      }
      batch.push_back(SearchHit{path, std::move(rec), acg->id()});
      return batch.size() < batch_size || deliver();
    };
    AcgSearchRequest ar;
    ar.scope = req.scope;
    ar.stop = &stop;
    // By a pointer: std::function keeps a capture this small in place, where the lambda's own
    // captures would be allocated once per ACG.
    ar.on_match = [m = &on_match](const std::string& path, FileRecord& rec) {
      return (*m)(path, rec);
    };
    for (size_t k = 0; k < passes.size(); ++k) {
      const Pass& pass = passes[k];
      if (passes.size() > 1 && !acg->MayMatch(pass.query->root())) continue;
      ar.query = pass.query;
      ar.shape = &shapes[k];
      ar.volume = pass.volume;
      ar.skip_volumes = pass.skip;
      AcgSearchStats as;
      errors[i] = acg->Search(ar, &as);
      counts[i].candidates += as.candidates;
      if (as.answered_closed) ++counts[i].closed;
      if (!errors[i].ok() || stop.load()) break;
    }
    if (!batch.empty() && errors[i].ok()) deliver();
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
  for (const AcgCounts& c : counts) {
    stats.acgs_answered_closed += c.closed;
    stats.candidates += c.candidates;
  }
  stats.hits = delivered;
  if (stats_out) *stats_out = stats;
  return Status::OK();
}

std::vector<std::string> Engine::Impl::UnknownAttrs(const Query& query) {
  const std::vector<std::string> names = UserAttrNames(query);
  if (names.empty()) return names;
  std::vector<std::string> unknown = attr_names_.Unknown(names);
  // An index is known too, even before any file has its attribute.
  const std::vector<IndexSpec> indexes = Catalogue();
  std::erase_if(unknown, [&](const std::string& n) {
    return std::any_of(indexes.begin(), indexes.end(),
                       [&](const IndexSpec& s) { return s.name == n; });
  });
  return unknown;
}

void Engine::Impl::PruneRecentMovesLocked() {
  const int64_t now = options_.env->MonotonicNanos();
  std::erase_if(moved_at_, [&](const auto& e) { return now - e.second > kRecentMoveNs; });
  std::erase_if(adopted_at_, [&](const auto& e) { return now - e.second > kRecentMoveNs; });
}

void Engine::Impl::NoteRecentMoves(const std::vector<Acg*>& searched,
                                   const std::vector<uint64_t>* wanted, SearchStats* stats) {
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

void Engine::Impl::SortHits(const std::string& key, bool desc, std::vector<SearchHit>* hits) {
  std::sort(hits->begin(), hits->end(), [&](const SearchHit& a, const SearchHit& b) {
    return SortsBefore(key, desc, a.path, a.record, b.path, b.record);
  });
}

}  // namespace propeller
