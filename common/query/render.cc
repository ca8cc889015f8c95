// Query::ToString: canonical text that Parse reads back into the same tree.
//
// Parentheses appear exactly where the tree needs them: around an '|' list inside an '&' list,
// around a list under '!', and around a list directly inside a list of the same kind (which
// only the user's own parentheses can create). Each of those stands for a parenthesis the
// original text must have had on the same path, so the rendering never nests deeper than the
// text it came from and always passes the parser's 64-level limit. (Full parenthesisation
// would not: "!!!!a=1" would nest twice as deep as written.)
//
// Values are rendered in their resolved form, chosen so that re-parsing resolves them to the
// same value:
//  - times as absolute UTC dates with nanoseconds ("2024-05-01T12:00:00.5"): an age was already
//    turned into an instant with a flipped operator, and a date keeps its operator, so the
//    round trip no longer depends on the parse-time clock;
//  - sizes, ids, nlink as plain integers (bytes); mode in octal with a leading 0;
//  - strings always double-quoted (so a string "12" stays a string for user attributes);
//    user-attribute doubles always with a '.' or exponent (so 1.0 stays a double).
#include <cstdio>
#include <string>

#include "common/query/query.h"
#include "common/query/values.h"

namespace propeller {
namespace {

void AppendQuoted(const std::string& text, std::string* out) {
  out->push_back('"');
  for (char c : text) {
    if (c == '"' || c == '\\') out->push_back('\\');
    out->push_back(c);
  }
  out->push_back('"');
}

void AppendValue(const Predicate& pred, std::string* out) {
  if (pred.attr == Attr::kMtime || pred.attr == Attr::kCtime || pred.attr == Attr::kAtime) {
    *out += query_internal::FormatDateNanos(pred.time);
    return;
  }
  if (const auto* i = std::get_if<int64_t>(&pred.value)) {
    switch (pred.attr) {
      case Attr::kMtime:
      case Attr::kCtime:
      case Attr::kAtime:
        *out += query_internal::FormatDateNanos(*i);
        return;
      case Attr::kMode: {
        char buf[32];
        std::snprintf(buf, sizeof(buf), "0%llo", static_cast<unsigned long long>(*i));
        *out += buf;
        return;
      }
      default:
        *out += std::to_string(*i);
        return;
    }
  }
  if (const auto* d = std::get_if<double>(&pred.value)) {
    *out += query_internal::FormatDouble(*d);
    return;
  }
  const std::string& text = std::get<std::string>(pred.value);
  if (pred.op == CmpOp::kRegex) {
    // As the lexer reads a quoted regex back: backslashes kept, only '"' escaped.
    out->push_back('"');
    for (char c : text) {
      if (c == '"') out->push_back('\\');
      out->push_back(c);
    }
    out->push_back('"');
    return;
  }
  if (pred.attr == Attr::kType && text.size() == 1) {
    *out += text;  // f d l o: a bare letter reads best
    return;
  }
  AppendQuoted(text, out);
}

void Render(const QueryNode& node, std::string* out);

void RenderChild(const QueryNode& child, bool parenthesise, std::string* out) {
  if (parenthesise) out->push_back('(');
  Render(child, out);
  if (parenthesise) out->push_back(')');
}

bool IsList(const QueryNode& node) {
  return node.kind == QueryNode::Kind::kAnd || node.kind == QueryNode::Kind::kOr;
}

void Render(const QueryNode& node, std::string* out) {
  switch (node.kind) {
    case QueryNode::Kind::kPred: {
      const Predicate& p = node.pred;
      if (p.op == CmpOp::kBitsAll || p.op == CmpOp::kBitsAny) {
        char buf[32];
        const auto bits = std::get_if<int64_t>(&p.value);
        std::snprintf(buf, sizeof(buf), "perm = %c0%llo", p.op == CmpOp::kBitsAll ? '-' : '/',
                      static_cast<unsigned long long>(bits ? *bits : 0));
        *out += buf;
        break;
      }
      if (p.attr == Attr::kUser) {
        *out += p.user_attr;
      } else if (p.icase && (p.attr == Attr::kName || p.attr == Attr::kPath)) {
        *out += p.attr == Attr::kName ? "iname" : "ipath";
      } else {
        *out += AttrName(p.attr);
      }
      *out += ' ';
      *out += CmpOpName(p.op);
      *out += ' ';
      AppendValue(p, out);
      break;
    }
    case QueryNode::Kind::kNot:
      out->push_back('!');
      if (!node.children.empty()) {
        RenderChild(*node.children[0], IsList(*node.children[0]), out);
      }
      break;
    case QueryNode::Kind::kAnd:
    case QueryNode::Kind::kOr: {
      const bool is_and = node.kind == QueryNode::Kind::kAnd;
      for (size_t i = 0; i < node.children.size(); ++i) {
        if (i > 0) *out += is_and ? " & " : " | ";
        const QueryNode& child = *node.children[i];
        // '|' inside '&' for precedence; a same-kind child to keep the tree's grouping.
        const bool parens = child.kind == QueryNode::Kind::kOr || (is_and && IsList(child));
        RenderChild(child, parens, out);
      }
      break;
    }
  }
}

}  // namespace

std::string Query::ToString() const {
  std::string out;
  if (root_ != nullptr) Render(*root_, &out);
  return out;
}

}  // namespace propeller
