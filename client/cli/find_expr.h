// `propeller find`: GNU find's expressions, answered from the index (docs/cli.md "find").
//
// The command line is parsed as find parses it — start paths, then an expression of tests,
// operators and actions — into a tree evaluated per indexed file exactly as find evaluates it
// per file it walks (left to right, -a before -o before ',', short-circuit, an implicit
// -print when no action is given). The index is asked once per start path for the files under
// it, narrowed by a query built from the tests every match must pass (FindProgram::Prefilter);
// the tree then decides each file from its record. Time tests use find's own arithmetic (an
// age's fraction of a day is dropped; -mtime +1 is "more than two days"); sizes round up to
// the unit as find's do.
//
// What the index cannot answer exactly is refused with a clear error instead of an answer
// that differs from find's: -ls (it prints disk blocks, which the index does not keep),
// -exec/-delete/-prune and the other predicates not listed in kFindHelp.
#ifndef PROPELLER_CLIENT_CLI_FIND_EXPR_H_
#define PROPELLER_CLIENT_CLI_FIND_EXPR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "client/cli/commands.h"
#include "common/record.h"
#include "common/status.h"

namespace propeller::cli {

struct FindNode;

// One file as find would see it: the path as find would print it (under the start path as the
// user wrote it), its depth below that start path, and its record.
struct FindFile {
  std::string path;
  int depth = 0;
  const FileRecord* record = nullptr;
  bool empty_dir = false;  // a directory with no entries (for -empty)
};

class FindProgram {
 public:
  // Parses `args` (everything after `propeller find`). `now_ns`: the instant ages count back
  // from (find's start time). `stat_reference`: reads the mtime of a -newer reference file.
  static Result<FindProgram> Parse(const std::vector<std::string>& args, FileTime now_ns,
                                   const std::function<Result<FileTime>(const std::string&)>&
                                       stat_reference);

  const std::vector<std::string>& start_paths() const { return starts_; }
  int min_depth() const { return min_depth_; }
  int max_depth() const { return max_depth_; }  // -1: none
  // Whether -empty appears: every file under a start path must then be seen (to know which
  // directories are empty), so the prefilter is dropped.
  bool needs_children() const { return needs_children_; }
  // A query (docs/query.md) every file the expression can select satisfies; "size>=0" when
  // none narrows it.
  std::string Prefilter() const;

  // Evaluates the expression on `file`, appending what its actions print to *out. Returns
  // false once -quit ran (stop: nothing more is to be evaluated).
  bool Run(const FindFile& file, std::string* out) const;

  FindProgram(FindProgram&&) noexcept;
  FindProgram& operator=(FindProgram&&) noexcept;
  ~FindProgram();

 private:
  FindProgram();
  std::vector<std::string> starts_;
  int min_depth_ = 0;
  int max_depth_ = -1;
  bool needs_children_ = false;
  std::unique_ptr<FindNode> root_;
};

}  // namespace propeller::cli

#endif  // PROPELLER_CLIENT_CLI_FIND_EXPR_H_
