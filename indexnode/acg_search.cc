// Search inside one ACG: the planner (docs/architecture.md §6 "Search").
//
// Plan(node) returns a candidate set (sorted, unique FileIds) that is a superset of the node's
// matches, or "all" when no index helps. Leaves: the six inode axes go to the K-D tree (an AND
// merges all its axis predicates into one box), paths to the `path` B-tree (equality, ranges,
// glob prefixes), keyword/ext/name equality to the `keyword` B-tree, user attributes to their
// own index. AND intersects its children's sets, cheapest structures first, and stops
// planning once the set is small (verification is cheaper than another index probe); OR
// unions (any "all" makes it "all"); NOT is "all". Every candidate is then verified against
// the whole query, the scope and the volume, so the plan only has to be a superset.
//
// A closed ACG (acg.h) is first planned "memory only": with no LMDB transaction, only its
// loaded K-D tree answers and everything else is "all". If that plan is the empty set no
// record can match and the ACG stays closed — for `size>1g & mtime<1d` over 10 M files this
// skips ~97% of the partitions that the min/max summary cannot.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "common/lmdb_util.h"
#include "indexnode/acg.h"
#include "indexnode/acg_internal.h"
#include "indexnode/summary.h"
#include "schemas/keys.h"
#include "schemas/record_format.h"

namespace propeller {
namespace {

using IdSet = std::vector<FileId>;  // sorted, unique

// A candidate set, or "every record". (Not std::optional<IdSet>: GCC 12 reports a false
// -Wmaybe-uninitialized on it in the sanitizer build.)
class Plan {
 public:
  Plan() = default;  // every record
  explicit Plan(IdSet ids) : all_(false), ids_(std::move(ids)) {}
  explicit operator bool() const { return !all_; }
  IdSet& operator*() { return ids_; }
  const IdSet& operator*() const { return ids_; }
  IdSet* operator->() { return &ids_; }
  const IdSet* operator->() const { return &ids_; }

 private:
  bool all_ = true;
  IdSet ids_;
};

// Below this many candidates, verifying is cheaper than probing another structure.
constexpr size_t kSmallEnough = 64;
// ... except the `keyword` B-tree: one seek in the ACG's key range (~1 µs) is cheaper than
// reading, checking and decoding more than this many candidate records (~1 µs each). Over
// 1 M files in 1,000 ACGs, `keyword=firefox & mtime<1w` verified ~50 records per ACG when the
// K-D box stopped the planning (11.3 -> 7.6 ms with this).
constexpr size_t kKeywordProbeAbove = 4;
// ... but when the K-D box carried the keywords' tags (kdtree_index.h), its candidates are
// files with the keywords bar the tags' false positives (a few percent of the box), so reading
// the postings to drop those pays only for more candidates than this.
constexpr size_t kTaggedProbeAbove = 16;

// A keyword's candidates that are at least 1/kBoxSearchShare of the ACG's files are kept in
// the K-D box by a search of it, fewer by a lookup each (FilterBox). At 10 M files in
// 1,000-file ACGs, where `firefox` is in every path of one ACG in 16 and in a few percent of
// the others, `keyword=firefox & mtime<1w` took 82.0 / 84.3 ms with lookups only, 73.0 / 75.6
// at a quarter, 73.1 / 74.5 at a sixteenth, 79.7 / 76.7 at 1/64 (one core, alternating).
constexpr uint64_t kBoxSearchShare = 8;

// Whether `n` is an equality the `keyword` index answers (keyword, ext, name).
bool IsKeywordProbe(const QueryNode& n) {
  return n.kind == QueryNode::Kind::kPred && n.pred.op == CmpOp::kEq && n.pred.root.empty() &&
         (n.pred.attr == Attr::kKeyword || n.pred.attr == Attr::kExt ||
          n.pred.attr == Attr::kName);
}

// Whether `node` (the query's root) is, or is an AND of, a keyword probe.
bool HasKeywordProbe(const QueryNode& node) {
  if (IsKeywordProbe(node)) return true;
  if (node.kind != QueryNode::Kind::kAnd) return false;
  for (const auto& c : node.children) {
    if (IsKeywordProbe(*c)) return true;
  }
  return false;
}


bool IsGlobChar(char c) { return c == '*' || c == '?' || c == '['; }

// The literal prefix of a glob ("/src/*.c" -> "/src/"); nullopt when the pattern is a
// substring test (no glob characters) or starts with a wildcard.
std::optional<std::string> GlobPrefix(const std::string& pattern) {
  size_t i = 0;
  while (i < pattern.size() && !IsGlobChar(pattern[i]) && pattern[i] != '\\') ++i;
  if (i == pattern.size()) return std::nullopt;  // no wildcard: '~' means substring
  if (i == 0) return std::nullopt;
  return pattern.substr(0, i);
}

void Normalise(IdSet* ids) {
  // Most sets come sorted and unique (a keyword's posting chunks, a B-tree range): one pass
  // says so, where sorting them anyway was ~5% of a keyword search (perf, 1 M files).
  if (std::adjacent_find(ids->begin(), ids->end(),
                         [](const FileId& a, const FileId& b) { return !(a < b); }) ==
      ids->end()) {
    return;
  }
  std::sort(ids->begin(), ids->end());
  ids->erase(std::unique(ids->begin(), ids->end()), ids->end());
}

IdSet Intersect(const IdSet& a, const IdSet& b) {
  IdSet out;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

// Adds an axis predicate to a box; false when the predicate cannot use the box.
bool AddToBox(const Predicate& p, IndexQuery* box, bool* empty) {
  int axis = InodeAxis(p.attr);
  const int64_t* v = std::get_if<int64_t>(&p.value);
  if (axis < 0 || v == nullptr) return false;
  auto tighten_lo = [&](int64_t lo) {
    if (!box->box_lo[axis] || *box->box_lo[axis] < lo) box->box_lo[axis] = lo;
  };
  auto tighten_hi = [&](int64_t hi) {
    if (!box->box_hi[axis] || *box->box_hi[axis] > hi) box->box_hi[axis] = hi;
  };
  switch (p.op) {
    case CmpOp::kEq: tighten_lo(*v); tighten_hi(*v); break;
    case CmpOp::kLe: tighten_hi(*v); break;
    case CmpOp::kGe: tighten_lo(*v); break;
    case CmpOp::kLt:
      if (*v == INT64_MIN) *empty = true; else tighten_hi(*v - 1);
      break;
    case CmpOp::kGt:
      if (*v == INT64_MAX) *empty = true; else tighten_lo(*v + 1);
      break;
    default: return false;
  }
  return true;
}

}  // namespace

// The planner needs the ACG's private members; it is a set of member-like helpers defined
// here to keep acg.cc about storage and this file about search.
class AcgPlanner {
 public:
  // txn == nullptr: memory only (structures that need LMDB are treated as "all").
  AcgPlanner(MDB_txn* txn, const acg_internal::IndexTable& idx, const Acg& acg)
      : txn_(txn), indexes_(idx), acg_(acg) {}

  Result<Plan> PlanNode(const QueryNode& node) {
    switch (node.kind) {
      case QueryNode::Kind::kPred: return PlanPred(node.pred);
      case QueryNode::Kind::kNot: return Plan();
      case QueryNode::Kind::kOr: {
        IdSet all;
        for (const auto& c : node.children) {
          PROPELLER_ASSIGN_OR_RETURN(Plan p, PlanNode(*c));
          if (!p) return Plan();
          all.insert(all.end(), p->begin(), p->end());
        }
        Normalise(&all);
        return Plan(std::move(all));
      }
      case QueryNode::Kind::kAnd: return PlanAnd(node);
    }
    return Plan();
  }

  // LMDB entries read by B-tree probes so far (for Acg::open_bytes()).
  uint64_t lmdb_reads() const { return lmdb_reads_; }
  // Whether a K-D box searched so far carried keyword tags (IndexQuery::box_tags): its
  // candidates are then files that have the query's keywords, bar a few false positives, and
  // need no probe of the `keyword` index to be few.
  bool keyword_tagged() const { return keyword_tagged_; }
  // Plans from now on with `txn` (null: memory only). Box results are kept across: a planner
  // that planned from memory under a shared lock and then, under the same lock, plans with a
  // transaction does not search the K-D tree twice.
  void set_txn(MDB_txn* txn) { txn_ = txn; }

 private:
  // The index `name` if it can answer now: it exists, its in-memory part is loaded (an index
  // can be unloaded here only after a concurrent reconcile), and it needs no LMDB transaction
  // when there is none. nullptr makes the predicate "all", which verification keeps correct.
  Index* Find(std::string_view name) const {
    Index* index = indexes_.Find(name);
    if (index == nullptr || !index->loaded()) return nullptr;
    if (txn_ == nullptr && index->type() == IndexType::kBTree) return nullptr;
    return index;
  }

  Result<Plan> Run(Index* index, const IndexQuery& q) {
    const bool box = q.kind == IndexQuery::Kind::kBox;
    if (box) {
      if (q.box_tags != 0) keyword_tagged_ = true;
      for (const auto& [done, ids] : boxes_) {
        if (done.box_lo == q.box_lo && done.box_hi == q.box_hi && done.box_tags == q.box_tags) {
          return Plan(ids);
        }
      }
    }
    IdSet ids;
    PROPELLER_RETURN_IF_ERROR(index->Collect(txn_, q, &ids));
    if (index->type() == IndexType::kBTree) lmdb_reads_ += ids.size();
    Normalise(&ids);
    if (box) boxes_.emplace_back(q, ids);
    return Plan(std::move(ids));
  }

  // Run for a box, but "every record" as soon as more than `cap` ids are found (nothing
  // kept for set_txn then: the answer is not whole).
  Result<Plan> RunCapped(Index* index, const IndexQuery& q, size_t cap) {
    for (const auto& [done, ids] : boxes_) {
      if (done.box_lo == q.box_lo && done.box_hi == q.box_hi && done.box_tags == q.box_tags) {
        return ids.size() <= cap ? Plan(ids) : Plan();
      }
    }
    if (q.box_tags != 0) keyword_tagged_ = true;
    IdSet ids;
    PROPELLER_RETURN_IF_ERROR(index->Search(txn_, q, [&](FileId id) {
      ids.push_back(id);
      return ids.size() <= cap;
    }));
    if (ids.size() > cap) return Plan();
    Normalise(&ids);
    boxes_.emplace_back(q, ids);
    return Plan(std::move(ids));
  }

  // Whether `n` is `keyword=K` with K a keyword of the ACG's common directory.
  bool InEveryPath(const QueryNode& n) const {
    if (n.kind != QueryNode::Kind::kPred || n.pred.attr != Attr::kKeyword) return false;
    const std::string* s = std::get_if<std::string>(&n.pred.value);
    return s != nullptr && acg_.EveryPathHasKeyword(*s);
  }

  Result<Plan> Equal(const char* index_name, AttrValue v) {
    Index* index = Find(index_name);
    if (!index) return Plan();
    IndexQuery q;
    q.kind = IndexQuery::Kind::kEqual;
    q.value = std::move(v);
    return Run(index, q);
  }

  // Candidates for a string-ordered predicate on a B-tree (path, user btree indexes).
  Result<Plan> BTreePred(Index* index, const Predicate& p) {
    IndexQuery q;
    switch (p.op) {
      case CmpOp::kEq:
        q.kind = IndexQuery::Kind::kEqual;
        q.value = p.value;
        break;
      case CmpOp::kLt: case CmpOp::kLe:
        q.kind = IndexQuery::Kind::kRange;
        q.hi = IndexBound{p.value, p.op == CmpOp::kLe};
        break;
      case CmpOp::kGt: case CmpOp::kGe:
        q.kind = IndexQuery::Kind::kRange;
        q.lo = IndexBound{p.value, p.op == CmpOp::kGe};
        break;
      case CmpOp::kMatch: {
        const std::string* s = std::get_if<std::string>(&p.value);
        if (!s) return Plan();
        std::optional<std::string> prefix = GlobPrefix(*s);
        if (!prefix) return Plan();
        q.kind = IndexQuery::Kind::kPrefix;
        q.prefix = *prefix;
        break;
      }
      default: return Plan();
    }
    return Run(index, q);
  }

  Result<Plan> PlanPred(const Predicate& p) {
    if (InodeAxis(p.attr) >= 0) {
      IndexQuery box;
      box.kind = IndexQuery::Kind::kBox;
      bool empty = false;
      if (!AddToBox(p, &box, &empty)) return Plan();
      if (empty) return Plan(IdSet());
      Index* inode = Find("inode");
      if (!inode) return Plan();
      return Run(inode, box);
    }
    // A path predicate under a root (Query::WithRoot) is about paths no index holds.
    if (!p.root.empty()) return Plan();
    switch (p.attr) {
      case Attr::kPath: {
        if (p.icase) return Plan();  // the path B-tree's order is case-sensitive
        Index* path = Find("path");
        return path ? BTreePred(path, p) : Result<Plan>(Plan());
      }
      case Attr::kKeyword:
      case Attr::kExt:
      case Attr::kName: {
        std::optional<std::string> token = AcgSummary::RequiredToken(p);
        if (!token) return Plan();
        return Equal("keyword", std::move(*token));
      }
      case Attr::kUser: {
        Index* index = Find(p.user_attr);
        if (!index) return Plan();
        if (index->type() == IndexType::kBTree) return BTreePred(index, p);
        if (index->type() == IndexType::kHash && p.op == CmpOp::kEq) {
          IndexQuery q;
          q.kind = IndexQuery::Kind::kEqual;
          q.value = p.value;
          return Run(index, q);
        }
        return Plan();
      }
      default: return Plan();
    }
  }

  Result<Plan> PlanAnd(const QueryNode& node) {
    // One box for every axis predicate among the direct children.
    IndexQuery box;
    box.kind = IndexQuery::Kind::kBox;
    bool have_box = false, empty = false;
    std::vector<const QueryNode*> hashy, others;
    for (const auto& c : node.children) {
      if (c->kind == QueryNode::Kind::kPred && AddToBox(c->pred, &box, &empty)) {
        have_box = true;
      } else if (IsKeywordProbe(*c)) {
        hashy.push_back(c.get());
      } else {
        others.push_back(c.get());
      }
    }
    if (empty) return Plan(IdSet());
    // A file that satisfies a keyword probe has its token among its paths' keywords, so the
    // K-D tree's tags of that file have the token's bits (kdtree_index.h): the box keeps only
    // such files, from memory.
    if (have_box) {
      for (const QueryNode* c : hashy) {
        if (std::optional<std::string> token = AcgSummary::RequiredToken(c->pred)) {
          box.box_tags |= AcgSummary::KeywordBits(*token);
        }
      }
    }
    Plan acc;  // nullopt = no restriction yet
    auto combine = [&](Plan p) {
      if (!p) return;
      acc = acc ? Plan(Intersect(*acc, *p)) : std::move(p);
    };
    Index* inode = have_box ? Find("inode") : nullptr;
    if (inode != nullptr && !hashy.empty() && txn_ != nullptr) {
      // Keywords first: a keyword's files are one read of its posting chunks, usually far
      // fewer than a box's (`mtime<1w` keeps a fifth of an ACG), and the box then keeps those
      // inside it by one table lookup each (FilterBox) instead of a search of the tree — the
      // largest cost of `keyword=firefox & mtime<1w` when the box came first.
      for (const QueryNode* c : hashy) {
        // A keyword of the directory every path lies under is in every record: its postings
        // would list the whole ACG, so the box alone is the candidate set. (At 10 M files one
        // ACG in 16 lies under `/<top>/firefox-<n>/`: not reading their ~1,000 ids each took
        // `keyword=firefox & mtime<1w` from 70.8 to 68.6 ms on one core.)
        if (InEveryPath(*c)) continue;
        PROPELLER_ASSIGN_OR_RETURN(Plan p, PlanNode(*c));
        combine(std::move(p));
        if (acc && acc->empty()) return acc;
      }
      if (acc && acc->size() * kBoxSearchShare >= inode->Size()) {
        // Many candidates (a keyword in most of the ACG's paths): one search of the box, which
        // reads only its axes' columns in the leaves it meets, costs less than a table lookup
        // per candidate.
        PROPELLER_ASSIGN_OR_RETURN(Plan p, Run(inode, box));
        combine(std::move(p));
      } else if (acc) {
        PROPELLER_RETURN_IF_ERROR(inode->FilterBox(box, &*acc));
      } else {
        PROPELLER_ASSIGN_OR_RETURN(Plan p, Run(inode, box));
        combine(std::move(p));
      }
      for (const QueryNode* c : others) {
        if (acc && acc->size() <= kSmallEnough) return acc;
        PROPELLER_ASSIGN_OR_RETURN(Plan p, PlanNode(*c));
        combine(std::move(p));
      }
      return acc;
    }
    // Otherwise cheapest first: the in-memory K-D box (always resident), then keyword probes
    // (with a transaction; worth it above a few candidates), then other index scans.
    if (have_box) {
      if (inode && txn_ == nullptr && box.box_tags != 0) {
        // From memory, for a query the keyword index could answer with a transaction: the box
        // with the keywords' tags, given up past the few candidates that are verified without
        // reading the keyword's postings (Acg::Search). More files in the box with the
        // keywords (`keyword=firefox & size>0`) are better found by the postings, then kept by
        // a lookup each: a whole search of a wide box first cost such a query 8% (10 M files).
        PROPELLER_ASSIGN_OR_RETURN(Plan p, RunCapped(inode, box, kTaggedProbeAbove));
        combine(std::move(p));
        if (acc) return acc;
      } else if (inode) {
        PROPELLER_ASSIGN_OR_RETURN(Plan p, Run(inode, box));
        combine(std::move(p));
        const bool probe_next = !hashy.empty() && txn_ != nullptr;
        if (acc && acc->size() <= (probe_next ? kKeywordProbeAbove : kSmallEnough)) return acc;
      }
    }
    for (const QueryNode* c : hashy) {
      PROPELLER_ASSIGN_OR_RETURN(Plan p, PlanNode(*c));
      combine(std::move(p));
      if (acc && acc->size() <= kSmallEnough) return acc;
    }
    for (const QueryNode* c : others) {
      PROPELLER_ASSIGN_OR_RETURN(Plan p, PlanNode(*c));
      combine(std::move(p));
      if (acc && acc->size() <= kSmallEnough) return acc;
    }
    return acc;
  }

  MDB_txn* txn_;
  const acg_internal::IndexTable& indexes_;
  const Acg& acg_;
  uint64_t lmdb_reads_ = 0;
  bool keyword_tagged_ = false;
  std::vector<std::pair<IndexQuery, IdSet>> boxes_;  // K-D box results (set_txn)
};

namespace {

// The in-memory structures the planner may probe for `node` (not under a NOT, which plans to
// "all"), so they can be loaded before the search takes the shared lock.
void CollectIndexNames(const QueryNode& node, std::vector<std::string>* names, uint32_t* axes) {
  switch (node.kind) {
    case QueryNode::Kind::kPred: {
      const Predicate& p = node.pred;
      std::string name;
      if (InodeAxis(p.attr) >= 0) {
        name = "inode";
        if (axes != nullptr) *axes |= uint32_t{1} << InodeAxis(p.attr);
      } else if ((p.attr == Attr::kKeyword || p.attr == Attr::kExt || p.attr == Attr::kName) &&
                 p.root.empty()) {
        name = "keyword";
      } else if (p.attr == Attr::kUser) {
        name = p.user_attr;
      }
      if (!name.empty() && std::find(names->begin(), names->end(), name) == names->end()) {
        names->push_back(std::move(name));
      }
      return;
    }
    case QueryNode::Kind::kNot: return;
    case QueryNode::Kind::kAnd:
    case QueryNode::Kind::kOr:
      for (const auto& c : node.children) CollectIndexNames(*c, names, axes);
      return;
  }
}

}  // namespace

AcgQueryShape Acg::ShapeOf(const Query& query) {
  AcgQueryShape shape;
  CollectIndexNames(query.root(), &shape.index_names, &shape.box_axes);
  shape.keyword_probe = HasKeywordProbe(query.root());
  return shape;
}

Status Acg::Search(const AcgSearchRequest& req, AcgSearchStats* stats) {
  Pin pin(this);
  std::optional<AcgQueryShape> own_shape;
  const AcgQueryShape& shape = req.shape != nullptr ? *req.shape
                                                    : own_shape.emplace(ShapeOf(*req.query));
  const std::vector<std::string>& names = shape.index_names;
  bool load = true;  // whether to load `names` before searching
  {
    // First what memory alone can say — the resident K-D tree, plus hash tables that happen to
    // be loaded — with no LMDB transaction and nothing opened or loaded:
    //  - nothing can match: done, even for a closed ACG (no environment opened);
    //  - a few candidates: verifying them is cheaper than loading a user hash table (~1-3 ms
    //    for a 1,000-file ACG, and loaded tables are what the open-ACG cache evicts first),
    //    so nothing is loaded and the planner below starts from the same K-D box (PlanAnd).
    ReaderLock lock(&rw_);
    const bool keyword = shape.keyword_probe;
    if (inode_ != nullptr && inode_->loaded()) {
      AcgPlanner planner(nullptr, indexes_, *this);
      Result<Plan> plan = planner.PlanNode(req.query->root());
      if (plan.ok() && *plan && (*plan)->empty()) {
        if (stats) stats->answered_closed = true;
        return Status::OK();
      }
      // Above a few, the keyword's postings are worth reading even after a box with its tags
      // (PlanAnd gives up on it there): they remove the tags' false positives, each a record
      // read (at 10 M files, `keyword=firefox & size>0` verified 5% more candidates without
      // them).
      const size_t small = !keyword                   ? kSmallEnough
                           : planner.keyword_tagged() ? kTaggedProbeAbove
                                                      : kKeywordProbeAbove;
      if (plan.ok() && *plan && (*plan)->size() <= small) {
        // The planner below would start from the same box and stop at the same few
        // candidates (PlanAnd). An open ACG verifies them now, under this lock, so no commit
        // can have added a record the set lacks; a closed one opens first and plans again.
        if (open_.load()) return SearchOpen(req, stats, &**plan);
        load = false;
      } else if (plan.ok() && open_.load() && Loaded(names)) {
        // Nothing to open or load: plan on under this lock with the same planner, which
        // keeps the box it searched (a K-D search was a third of a keyword query's time).
        return SearchOpen(req, stats, nullptr, &planner);
      }
    }
  }
  for (int attempt = 0;; ++attempt) {
    PROPELLER_RETURN_IF_ERROR(EnsureOpen());
    if (load) PROPELLER_RETURN_IF_ERROR(EnsureLoaded(names));
    ReaderLock lock(&rw_);
    if (!open_.load()) {  // closed meanwhile (by a large commit, or a failure)
      if (attempt < kMaxOpenAttempts) continue;
      return Status::Unavailable("ACG " + std::to_string(id_) + " keeps closing");
    }
    return SearchOpen(req, stats, nullptr);
  }
}

void Acg::PrefetchKdTree(int step, uint32_t axes) const {
  if (!rw_.TryLockShared()) return;
  if (inode_ != nullptr) {
    if (step == 0) {
      __builtin_prefetch(inode_.get());  // the vtable pointer the next steps read
    } else if (step == 1) {
      inode_->PrefetchFields(axes);
    } else {
      inode_->PrefetchBoxes(axes);
    }
  }
  rw_.UnlockShared();
}

bool Acg::Loaded(const std::vector<std::string>& names) const {
  for (const std::string& n : names) {
    // The built-in B-trees have nothing in memory, and the K-D tree is inode_: neither is
    // looked up (a search asks this of every ACG, where each object it touches is a cold cache
    // line: 3% of a keyword search's profile).
    if (n == acg_internal::kKeywordIndex || n == acg_internal::kPathIndex) continue;
    if (n == acg_internal::kInodeIndex) {
      if (inode_ != nullptr && !inode_->loaded()) return false;
      continue;
    }
    Index* index = indexes_.Find(n);
    if (index != nullptr && !index->loaded()) return false;
  }
  return true;
}

Status Acg::SearchOpen(const AcgSearchRequest& req, AcgSearchStats* stats,
                       const std::vector<FileId>* planned, AcgPlanner* memory_planner) {
  MDB_txn* txn = nullptr;
  int rc = mdb_txn_begin(env_, nullptr, MDB_RDONLY, &txn);
  if (rc != 0) return LmdbStatus(rc, "mdb_txn_begin");
  struct Abort {
    MDB_txn* t;
    ~Abort() { mdb_txn_abort(t); }
  } abort_guard{txn};

  std::optional<AcgPlanner> own;
  AcgPlanner* planner = memory_planner;
  if (planner == nullptr) planner = &own.emplace(txn, indexes_, *this);
  planner->set_txn(txn);
  Plan plan;
  if (planned != nullptr) {
    plan = Plan(*planned);
  } else {
    PROPELLER_ASSIGN_OR_RETURN(plan, planner->PlanNode(req.query->root()));
  }
  const bool scoped = req.scope != "/";
  if (!plan && scoped) {
    // No index helped the query: the scope's subtree from the path B-tree is the candidate set.
    IdSet ids;
    Index* path = indexes_.At(acg_internal::kPathIndex);
    IndexQuery q;
    q.kind = IndexQuery::Kind::kPrefix;
    q.prefix = std::string(req.scope) + "/";
    auto add = [&](FileId id) {
      ids.push_back(id);
      return true;
    };
    PROPELLER_RETURN_IF_ERROR(path->Search(txn, q, add));
    q.kind = IndexQuery::Kind::kEqual;
    q.value = std::string(req.scope);
    PROPELLER_RETURN_IF_ERROR(path->Search(txn, q, add));
    Normalise(&ids);
    plan = Plan(std::move(ids));
  }

  FileRecord rec;
  std::vector<std::string> linked;  // the matching links of a hard-linked record
  // Files a split moved out stay here until the split's clean-up removes them (RemoveHeld):
  // they are answered by the ACG they moved to. Only then is a record's route looked up
  // (cleanup_pending_ is written under rw_, held here).
  const bool routed = cleanup_pending_.load(std::memory_order_relaxed) && has_routes();
  auto verify = [&](std::string_view bytes) -> Result<bool> {  // false = stop
    if (stats) ++stats->candidates;
    PROPELLER_RETURN_IF_ERROR(DecodeStored(bytes, &rec));
    if (req.volume && rec.id.volume != *req.volume) return true;
    if (req.skip_volumes != nullptr &&
        std::binary_search(req.skip_volumes->begin(), req.skip_volumes->end(), rec.id.volume)) {
      return true;
    }
    if (routed && RouteOf(rec.id) != 0) return true;
    if (rec.paths.size() == 1) {
      if ((scoped && !PathInScope(rec.paths[0], req.scope)) || !req.query->Matches(rec)) {
        return true;
      }
      if (stats) ++stats->matches;
      const std::string path = rec.paths[0];  // on_match may move rec (and its paths) away
      return req.on_match(path, rec);
    }
    // Hard links (docs/search.md "Hard links"): every link in scope that satisfies the query
    // with its own name and path, each once, as find prints them.
    linked.clear();
    for (const std::string& p : rec.paths) {
      if ((!scoped || PathInScope(p, req.scope)) && req.query->MatchesLink(rec, p)) {
        linked.push_back(p);
      }
    }
    if (linked.empty()) return true;
    if (stats) ++stats->matches;
    for (size_t i = 0; i + 1 < linked.size(); ++i) {
      FileRecord copy = rec;
      if (!req.on_match(linked[i], copy)) return false;
    }
    return req.on_match(linked.back(), rec);
  };

  if (plan) {
    std::string key;
    for (const FileId& id : *plan) {
      if (req.stop && req.stop->load(std::memory_order_relaxed)) break;
      key.assign(prefix_);
      AppendFileIdKey(id, &key);
      MDB_val k = Val(key), v;
      rc = mdb_get(txn, files_dbi_, &k, &v);
      if (rc == MDB_NOTFOUND) continue;  // index entry of a file deleted in this commit
      if (rc != 0) return LmdbStatus(rc, "reading a candidate");
      PROPELLER_ASSIGN_OR_RETURN(bool more, verify(View(v)));
      if (!more) break;
    }
    return Status::OK();
  }

  MDB_cursor* cur = nullptr;
  rc = mdb_cursor_open(txn, files_dbi_, &cur);
  if (rc != 0) return LmdbStatus(rc, "mdb_cursor_open");
  MDB_val k, v;
  Status s;
  for (rc = First(cur, &k, &v); rc == 0; rc = Next(cur, &k, &v)) {
    if (req.stop && req.stop->load(std::memory_order_relaxed)) break;
    Result<bool> more = verify(View(v));
    if (!more.ok()) {
      s = more.status();
      break;
    }
    if (!*more) break;
  }
  mdb_cursor_close(cur);
  if (s.ok() && rc != 0 && rc != MDB_NOTFOUND) s = LmdbStatus(rc, "scanning records");
  return s;
}

}  // namespace propeller
