// The token-level scanner of the query language (private to common/query/).
//
// The grammar is small and context-dependent ('!' is negation before a predicate but part of
// "!=" after an attribute), so the parser drives this scanner directly instead of consuming a
// token stream: it asks for "an operator here" or "a value here". Offsets are 0-based bytes
// into the query text; messages add 1 (docs/query.md counts from 1).
//
// Lexical rules (query.h):
//  - whitespace: space, \t, \n, \r, \v, \f, allowed between any two tokens;
//  - words: ASCII letters, digits, . _ - / * ? [ ] : + @ % and every byte >= 0x80 (so UTF-8
//    names need no quotes); inside a word, '!' or '^' directly after '[' belongs to the word,
//    so the glob negation name~[!a]* needs no quotes either;
//  - strings: "..." with the escapes \" and \\ only; no NUL byte;
//  - punctuation: | & , ! ( ) and the operators = != < <= > >= ~.
// Thread-compatible; a Scanner borrows the text, which must outlive it.
#ifndef PROPELLER_COMMON_QUERY_LEXER_H_
#define PROPELLER_COMMON_QUERY_LEXER_H_

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "common/query/query.h"
#include "common/status.h"

namespace propeller::query_internal {

inline constexpr size_t kMaxQueryBytes = 64 * 1024;
inline constexpr int kMaxDepth = 64;
inline constexpr int kMaxPredicates = 1024;

// InvalidArgument("error at <offset+1>: <what>").
Status ErrorAt(size_t offset, std::string_view what);

// One byte as shown in messages: itself when printable ASCII, else \xNN.
std::string DescribeByte(unsigned char c);

bool IsQuerySpace(unsigned char c);
bool IsWordChar(unsigned char c);

// A value as written: the text of a word, or the unescaped contents of a quoted string.
struct ValueToken {
  std::string text;
  bool quoted = false;
  size_t offset = 0;  // of the first byte (the opening quote for strings)
};

class Scanner {
 public:
  explicit Scanner(std::string_view text) : text_(text) {}

  void SkipSpace();
  bool AtEnd() const { return pos_ >= text_.size(); }
  size_t offset() const { return pos_; }
  // REQUIRES: !AtEnd().
  char Peek() const { return text_[pos_]; }
  void Advance() { ++pos_; }

  // Reads = != < <= > >= ~ at the current offset; nullopt (nothing consumed) otherwise.
  std::optional<CmpOp> ReadOperator();
  // Reads the maximal word at the current offset; empty (nothing consumed) when none.
  std::string_view ReadWord();
  // Reads a value (quoted string or word). Errors: "expected a value" when neither starts
  // here, and the string errors of ReadQuoted.
  // regex (the value of =~): a quoted value keeps every backslash but the one of \" (the
  // pattern's own escapes, "\.", pass through), and an unquoted one may also hold ^ $ \ { }.
  Result<ValueToken> ReadValue(bool regex = false);

  // How the token at `offset` reads in "unexpected 'X'": a whole word (cut after 32 bytes),
  // or one character, non-printable bytes as \xNN.
  std::string DescribeTokenAt(size_t offset) const;

 private:
  // REQUIRES: Peek() == '"'.
  Result<std::string> ReadQuoted(bool keep_backslashes);
  size_t WordEnd(size_t from) const;

  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace propeller::query_internal

#endif  // PROPELLER_COMMON_QUERY_LEXER_H_
