// Query::WithRoot: a query about the paths results print (a volume's root + in-volume path)
// turned into one about the in-volume paths records hold (docs/query.md "Paths").
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/query/query.h"
#include "common/record.h"

namespace propeller {
namespace {

std::unique_ptr<QueryNode> Pred(Predicate p) {
  auto n = std::make_unique<QueryNode>();
  n->kind = QueryNode::Kind::kPred;
  n->pred = std::move(p);
  return n;
}

// `path = ""`: no record has the empty path; the path index answers it with nothing.
std::unique_ptr<QueryNode> False(size_t pos) {
  Predicate p;
  p.attr = Attr::kPath;
  p.op = CmpOp::kEq;
  p.value = std::string();
  p.pos = pos;
  return Pred(std::move(p));
}

std::unique_ptr<QueryNode> True(size_t pos) {
  auto n = std::make_unique<QueryNode>();
  n->kind = QueryNode::Kind::kNot;
  n->children.push_back(False(pos));
  return n;
}

std::unique_ptr<QueryNode> Negated(std::unique_ptr<QueryNode> child) {
  auto n = std::make_unique<QueryNode>();
  n->kind = QueryNode::Kind::kNot;
  n->children.push_back(std::move(child));
  return n;
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// The literal start of a glob (up to its first wildcard or escape); nullopt when the text has
// no wildcard ('~' then means "contains").
std::optional<std::string_view> GlobLiteral(std::string_view glob) {
  const size_t i = glob.find_first_of("*?[\\");
  if (i == std::string_view::npos) return std::nullopt;
  if (glob[i] == '\\' && glob.find_first_of("*?[", i) == std::string_view::npos) {
    return std::nullopt;
  }
  return glob.substr(0, i);
}

// The rewrite of a path predicate for root `r` (not "/"): in-volume path p shows as r + p,
// and the root itself ("/") as r.
std::unique_ptr<QueryNode> RewritePath(const Predicate& pred, const std::string& r,
                                       bool* changed) {
  *changed = true;
  const auto* v = std::get_if<std::string>(&pred.value);
  if (v != nullptr && !pred.icase && (pred.op == CmpOp::kEq || pred.op == CmpOp::kNe)) {
    std::unique_ptr<QueryNode> eq;
    if (*v == r) {
      Predicate p = pred;
      p.op = CmpOp::kEq;
      p.value = std::string("/");
      eq = Pred(std::move(p));
    } else if (v->size() > r.size() + 1 && StartsWith(*v, r) && (*v)[r.size()] == '/') {
      Predicate p = pred;
      p.op = CmpOp::kEq;
      p.value = v->substr(r.size());
      eq = Pred(std::move(p));
    } else {
      eq = False(pred.pos);  // no path of this volume shows as *v
    }
    return pred.op == CmpOp::kEq ? std::move(eq) : Negated(std::move(eq));
  }
  if (v != nullptr && !pred.icase && pred.op == CmpOp::kMatch) {
    if (std::optional<std::string_view> lit = GlobLiteral(*v)) {
      // Every path matching the glob starts with its literal part, every shown path with r.
      if (lit->size() > r.size() && StartsWith(*lit, r)) {
        if ((*lit)[r.size()] != '/') return False(pred.pos);  // r + p goes on with '/'
        // The glob after r, on p; the root itself (shown as r) matches no glob that needs
        // more after r, and "/" might match the rest ("/*"): it is excluded.
        Predicate p = pred;
        p.value = v->substr(r.size());
        auto both = std::make_unique<QueryNode>();
        both->kind = QueryNode::Kind::kAnd;
        both->children.push_back(Pred(std::move(p)));
        Predicate not_root;
        not_root.attr = Attr::kPath;
        not_root.op = CmpOp::kNe;
        not_root.value = std::string("/");
        not_root.pos = pred.pos;
        both->children.push_back(Pred(std::move(not_root)));
        return both;
      }
      if (!StartsWith(r, *lit)) return False(pred.pos);  // they part before either ends
    }
  }
  Predicate p = pred;  // evaluated under the root: exact, answered by no index
  p.root = r;
  return Pred(std::move(p));
}

std::unique_ptr<QueryNode> Clone(const QueryNode& node) {
  auto n = std::make_unique<QueryNode>();
  n->kind = node.kind;
  n->pred = node.pred;
  for (const auto& c : node.children) n->children.push_back(Clone(*c));
  return n;
}

std::unique_ptr<QueryNode> Rewrite(const QueryNode& node, const std::string& r, bool* changed) {
  if (node.kind != QueryNode::Kind::kPred) {
    auto n = std::make_unique<QueryNode>();
    n->kind = node.kind;
    for (const auto& c : node.children) {
      std::unique_ptr<QueryNode> child = Rewrite(*c, r, changed);
      if (node.kind == QueryNode::Kind::kAnd && child->kind == QueryNode::Kind::kAnd) {
        for (auto& g : child->children) n->children.push_back(std::move(g));  // flat, as parsed
      } else {
        n->children.push_back(std::move(child));
      }
    }
    return n;
  }
  const Predicate& pred = node.pred;
  switch (pred.attr) {
    case Attr::kKeyword: {
      // The tokens of r + p are those of r and those of p ('/' separates them).
      const auto* k = std::get_if<std::string>(&pred.value);
      if (k == nullptr || !PathHasKeyword(r, *k)) break;
      *changed = true;
      if (pred.op == CmpOp::kEq) return True(pred.pos);
      if (pred.op == CmpOp::kNe) return False(pred.pos);
      break;
    }
    case Attr::kName:
    case Attr::kExt:
      // Only the root's own name differs ("" in the volume, its last component shown).
      if (PathPredicateMatches(pred, "/") != PathPredicateMatches(pred, r)) {
        *changed = true;
        Predicate p = pred;
        p.root = r;
        return Pred(std::move(p));
      }
      break;
    case Attr::kPath: {
      bool c = false;
      auto n = RewritePath(pred, r, &c);
      *changed |= c;
      return n;
    }
    default:
      break;
  }
  return Pred(pred);
}

bool AnyPathPredicate(const QueryNode& node) {
  if (node.kind == QueryNode::Kind::kPred) {
    const Attr a = node.pred.attr;
    return a == Attr::kName || a == Attr::kExt || a == Attr::kPath || a == Attr::kKeyword;
  }
  for (const auto& c : node.children) {
    if (AnyPathPredicate(*c)) return true;
  }
  return false;
}

}  // namespace

bool HasPathPredicates(const Query& query) { return AnyPathPredicate(query.root()); }

Query Query::WithRoot(std::string_view root, bool* changed) const {
  bool any = false;
  Query q;
  q.text_ = text_;
  q.now_ns_ = now_ns_;
  if (root_ != nullptr) {
    std::string r(root);
    while (r.size() > 1 && r.back() == '/') r.pop_back();
    if (r.empty() || r == "/") {
      q.root_ = Clone(*root_);
    } else {
      q.root_ = Rewrite(*root_, r, &any);
    }
  }
  if (changed != nullptr) *changed = any;
  return q;
}

}  // namespace propeller
