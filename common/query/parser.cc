// Query::Parse: a recursive-descent parser over the grammar of query.h.
//
// Limits (all errors, never crashes): 64 KiB of text, 64 levels of nesting ('(' and '!' each
// count one, so the recursion is at most ~200 frames deep), 1024 predicates. Subqueries keep
// the grouping written ("(a & b) & c" stays two kAnd nodes), so ToString reproduces the tree.
#include <chrono>
#include <memory>
#include <utility>

#include "common/query/lexer.h"
#include "common/query/query.h"
#include "common/query/resolve.h"

namespace propeller {
namespace query_internal {
namespace {

using NodePtr = std::unique_ptr<QueryNode>;

class Parser {
 public:
  Parser(std::string_view text, const ParseOptions& options, int64_t now_ns)
      : scanner_(text), options_(options), now_ns_(now_ns) {}

  Result<NodePtr> ParseAll() {
    scanner_.SkipSpace();
    if (scanner_.AtEnd()) return ErrorAt(scanner_.offset(), "empty query");
    PROPELLER_ASSIGN_OR_RETURN(NodePtr root, ParseOr(0));
    scanner_.SkipSpace();
    if (!scanner_.AtEnd()) return Unexpected();
    return root;
  }

 private:
  // or := and ('|' and)*
  Result<NodePtr> ParseOr(int depth) {
    return ParseList(depth, QueryNode::Kind::kOr, [this](int d) { return ParseAnd(d); });
  }

  // and := not (('&' | ',') not)*
  Result<NodePtr> ParseAnd(int depth) {
    return ParseList(depth, QueryNode::Kind::kAnd, [this](int d) { return ParseNot(d); });
  }

  // Parses operand (sep operand)*; one operand comes back as itself.
  template <typename ParseOperand>
  Result<NodePtr> ParseList(int depth, QueryNode::Kind kind, ParseOperand parse_operand) {
    PROPELLER_ASSIGN_OR_RETURN(NodePtr first, parse_operand(depth));
    std::vector<NodePtr> children;
    children.push_back(std::move(first));
    while (true) {
      scanner_.SkipSpace();
      if (scanner_.AtEnd() || !IsSeparator(kind, scanner_.Peek())) break;
      scanner_.Advance();
      PROPELLER_ASSIGN_OR_RETURN(NodePtr next, parse_operand(depth));
      children.push_back(std::move(next));
    }
    if (children.size() == 1) return std::move(children[0]);
    auto node = std::make_unique<QueryNode>();
    node->kind = kind;
    node->children = std::move(children);
    return node;
  }

  static bool IsSeparator(QueryNode::Kind kind, char c) {
    return kind == QueryNode::Kind::kOr ? c == '|' : (c == '&' || c == ',');
  }

  // not := '!' not | '(' query ')' | pred
  Result<NodePtr> ParseNot(int depth) {
    scanner_.SkipSpace();
    if (scanner_.AtEnd()) return ErrorAt(scanner_.offset(), "expected an attribute name");
    const char c = scanner_.Peek();
    if (c != '!' && c != '(') return ParsePredicate();
    const size_t open = scanner_.offset();
    if (depth + 1 > kMaxDepth) {
      return ErrorAt(open, "nesting too deep (at most " + std::to_string(kMaxDepth) + " levels)");
    }
    scanner_.Advance();
    if (c == '!') {
      PROPELLER_ASSIGN_OR_RETURN(NodePtr child, ParseNot(depth + 1));
      auto node = std::make_unique<QueryNode>();
      node->kind = QueryNode::Kind::kNot;
      node->children.push_back(std::move(child));
      return node;
    }
    PROPELLER_ASSIGN_OR_RETURN(NodePtr inner, ParseOr(depth + 1));
    scanner_.SkipSpace();
    if (scanner_.AtEnd() || scanner_.Peek() != ')') return ErrorAt(scanner_.offset(), "expected ')'");
    scanner_.Advance();
    return inner;
  }

  // pred := attr op value
  Result<NodePtr> ParsePredicate() {
    RawPredicate raw;
    raw.attr_offset = scanner_.offset();
    const std::string_view word = scanner_.ReadWord();
    if (word.empty()) return ErrorAt(raw.attr_offset, "expected an attribute name");
    PROPELLER_ASSIGN_OR_RETURN(raw.attr, ResolveAttrName(word, raw.attr_offset, options_));
    if (++predicates_ > kMaxPredicates) {
      return ErrorAt(raw.attr_offset,
                     "too many predicates (at most " + std::to_string(kMaxPredicates) + ")");
    }

    scanner_.SkipSpace();
    raw.op_offset = scanner_.offset();
    const std::optional<CmpOp> op = scanner_.ReadOperator();
    if (!op) return ErrorAt(raw.op_offset, "expected an operator (= != < <= > >= ~ =~)");
    raw.op = *op;

    scanner_.SkipSpace();
    PROPELLER_ASSIGN_OR_RETURN(raw.value, scanner_.ReadValue(raw.op == CmpOp::kRegex));

    return ResolveNode(raw, options_, now_ns_);
  }

  Status Unexpected() const {
    return ErrorAt(scanner_.offset(),
                   "unexpected '" + scanner_.DescribeTokenAt(scanner_.offset()) + "'");
  }

  Scanner scanner_;
  const ParseOptions& options_;
  const int64_t now_ns_;
  int predicates_ = 0;
};

int64_t RealNowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace
}  // namespace query_internal

Result<Query> Query::Parse(std::string_view text, const ParseOptions& options) {
  using query_internal::kMaxQueryBytes;
  if (text.size() > kMaxQueryBytes) {
    return query_internal::ErrorAt(kMaxQueryBytes, "query too long (at most " +
                                                       std::to_string(kMaxQueryBytes) + " bytes)");
  }
  const int64_t now_ns = options.now_ns != 0 ? options.now_ns : query_internal::RealNowNanos();
  query_internal::Parser parser(text, options, now_ns);
  PROPELLER_ASSIGN_OR_RETURN(std::unique_ptr<QueryNode> root, parser.ParseAll());
  Query query;
  query.root_ = std::move(root);
  query.text_ = std::string(text);
  query.now_ns_ = now_ns;
  // Resolved values can be longer than written ("1d" becomes a 29-byte date), so a query near
  // the limit could render to text Parse would refuse; refuse it now so ToString() always
  // parses back.
  const size_t rendered = query.ToString().size();
  if (rendered > kMaxQueryBytes) {
    return query_internal::ErrorAt(
        0, "query too long once its values are written out (" + std::to_string(rendered) +
               " bytes, at most " + std::to_string(kMaxQueryBytes) + ")");
  }
  return query;
}

}  // namespace propeller
