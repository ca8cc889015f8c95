#include "common/query/lexer.h"

#include <algorithm>
#include <cstdio>

namespace propeller::query_internal {

std::string DescribeByte(unsigned char c) {
  if (c >= 0x21 && c <= 0x7e) return std::string(1, static_cast<char>(c));
  char buf[8];
  std::snprintf(buf, sizeof(buf), "\\x%02x", c);
  return buf;
}

Status ErrorAt(size_t offset, std::string_view what) {
  std::string msg = "error at " + std::to_string(offset + 1) + ": ";
  msg.append(what);
  return Status::InvalidArgument(msg);
}

bool IsQuerySpace(unsigned char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

bool IsWordChar(unsigned char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  if (c >= 0x80) return true;
  switch (c) {
    case '.': case '_': case '-': case '/': case '*': case '?':
    case '[': case ']': case ':': case '+': case '@': case '%':
      return true;
    default:
      return false;
  }
}

void Scanner::SkipSpace() {
  while (pos_ < text_.size() && IsQuerySpace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
}

std::optional<CmpOp> Scanner::ReadOperator() {
  if (AtEnd()) return std::nullopt;
  const bool eq_next = pos_ + 1 < text_.size() && text_[pos_ + 1] == '=';
  switch (text_[pos_]) {
    case '=':
      if (pos_ + 1 < text_.size() && text_[pos_ + 1] == '~') {
        pos_ += 2;
        return CmpOp::kRegex;
      }
      pos_ += 1;
      return CmpOp::kEq;
    case '~': pos_ += 1; return CmpOp::kMatch;
    case '!':
      if (!eq_next) return std::nullopt;
      pos_ += 2;
      return CmpOp::kNe;
    case '<':
      pos_ += eq_next ? 2 : 1;
      return eq_next ? CmpOp::kLe : CmpOp::kLt;
    case '>':
      pos_ += eq_next ? 2 : 1;
      return eq_next ? CmpOp::kGe : CmpOp::kGt;
    default:
      return std::nullopt;
  }
}

size_t Scanner::WordEnd(size_t from) const {
  size_t i = from;
  while (i < text_.size() && IsWordChar(static_cast<unsigned char>(text_[i]))) {
    if (text_[i] == '[' && i + 1 < text_.size() && (text_[i + 1] == '!' || text_[i + 1] == '^')) {
      i += 2;  // glob negation "[!x]" / "[^x]": keep the '!' inside the word
    } else {
      i += 1;
    }
  }
  return i;
}

std::string_view Scanner::ReadWord() {
  const size_t end = WordEnd(pos_);
  std::string_view word = text_.substr(pos_, end - pos_);
  pos_ = end;
  return word;
}

Result<std::string> Scanner::ReadQuoted(bool keep_backslashes) {
  const size_t open = pos_;
  std::string out;
  size_t i = pos_ + 1;
  while (i < text_.size()) {
    const char c = text_[i];
    if (c == '"') {
      pos_ = i + 1;
      return out;
    }
    if (c == '\0') return ErrorAt(i, "a string may not contain a NUL byte");
    if (c == '\\') {
      if (i + 1 >= text_.size()) break;  // unterminated
      const char e = text_[i + 1];
      if (keep_backslashes && e != '"') {
        out.push_back(c);
        out.push_back(e);
        i += 2;
        continue;
      }
      if (e != '"' && e != '\\') {
        return ErrorAt(i, "unknown escape '\\" + DescribeByte(static_cast<unsigned char>(e)) +
                              "' in a string (only \\\" and \\\\ are allowed)");
      }
      out.push_back(e);
      i += 2;
      continue;
    }
    out.push_back(c);
    ++i;
  }
  return ErrorAt(open, "unterminated string (missing closing '\"')");
}

Result<ValueToken> Scanner::ReadValue(bool regex) {
  ValueToken token;
  token.offset = pos_;
  if (!AtEnd() && Peek() == '"') {
    PROPELLER_ASSIGN_OR_RETURN(token.text, ReadQuoted(regex));
    token.quoted = true;
    return token;
  }
  if (regex) {
    auto regex_char = [](unsigned char c) {
      return IsWordChar(c) || c == '^' || c == '$' || c == '\\' || c == '{' || c == '}';
    };
    size_t end = pos_;
    while (end < text_.size() && regex_char(static_cast<unsigned char>(text_[end]))) ++end;
    if (end > pos_) {
      token.text = std::string(text_.substr(pos_, end - pos_));
      pos_ = end;
      return token;
    }
  }
  if (AtEnd() || !IsWordChar(static_cast<unsigned char>(Peek()))) {
    if (!AtEnd() && Peek() == '\'') {
      return ErrorAt(pos_, "expected a value (strings take double quotes)");
    }
    return ErrorAt(pos_, "expected a value");
  }
  token.text = std::string(ReadWord());
  return token;
}

std::string Scanner::DescribeTokenAt(size_t offset) const {
  if (offset >= text_.size()) return "end of query";
  const auto c = static_cast<unsigned char>(text_[offset]);
  if (IsWordChar(c) && c < 0x80) {
    constexpr size_t kMaxShown = 32;
    const size_t end = WordEnd(offset);
    std::string word(text_.substr(offset, std::min(end - offset, kMaxShown)));
    if (end - offset > kMaxShown) word += "...";
    return word;
  }
  return DescribeByte(c);
}

}  // namespace propeller::query_internal
