// Runs the examples of docs/query.md: the page's tree table becomes records, and each query of
// its examples table must match exactly the paths the page lists (the page is the oracle, the
// parser and evaluator the thing tested; a wrong page fails as surely as a wrong evaluator).
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/query/query.h"
#include "common/record.h"

namespace propeller {
namespace {

// The cells of a markdown table row ("| a | b \| c |" -> {"a", "b | c"}), or empty.
std::vector<std::string> Cells(const std::string& line) {
  std::vector<std::string> cells;
  if (line.size() < 2 || line[0] != '|') return cells;
  std::string cell;
  for (size_t i = 1; i < line.size(); ++i) {
    if (line[i] == '\\' && i + 1 < line.size() && line[i + 1] == '|') {
      cell += '|';
      ++i;
    } else if (line[i] == '|') {
      const size_t b = cell.find_first_not_of(' ');
      const size_t e = cell.find_last_not_of(' ');
      cells.push_back(b == std::string::npos ? "" : cell.substr(b, e - b + 1));
      cell.clear();
    } else {
      cell += line[i];
    }
  }
  return cells;
}

std::vector<std::string> Words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// "2026-11-26T09:00" -> nanoseconds, through the language's own date parser: the parser is
// also what turns a query's dates into instants, and its date arithmetic has tests of its own.
int64_t DateNanos(const std::string& date) {
  ParseOptions po;
  Result<Query> q = Query::Parse("mtime>=" + date, po);
  EXPECT_TRUE(q.ok()) << date;
  return q.ok() ? static_cast<int64_t>(q->root().pred.time) : 0;
}

struct Page {
  std::vector<FileRecord> tree;
  std::vector<std::pair<std::string, std::set<std::string>>> examples;
};

Page ReadPage() {
  Page page;
  std::ifstream in(std::string(PROPELLER_DOCS_DIR) + "/query.md");
  EXPECT_TRUE(in.good()) << "cannot read docs/query.md";
  bool in_examples = false;
  std::string line;
  uint64_t ino = 0;
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0) in_examples = line == "## Examples";
    if (!in_examples) continue;
    const std::vector<std::string> c = Cells(line);
    if (c.size() == 7 && c[0].rfind("/", 0) == 0) {
      FileRecord r;
      r.id = FileId{1, ++ino};
      r.paths = {c[0]};
      r.type = c[1] == "d" ? FileType::kDirectory : FileType::kRegular;
      r.size = std::stoull(c[2]);
      r.mtime = r.ctime = r.atime = DateNanos(c[3]);
      r.uid = static_cast<uint32_t>(std::stoul(c[4]));
      r.mode = (r.type == FileType::kDirectory ? 040000u : 0100000u) |
               static_cast<uint32_t>(std::stoul(c[5], nullptr, 8));
      r.nlink = 1;
      for (const std::string& kv : Words(c[6])) {
        const size_t eq = kv.find('=');
        const std::string v = kv.substr(eq + 1);
        if (v.find_first_not_of("0123456789") == std::string::npos) {
          r.attrs[kv.substr(0, eq)] = static_cast<int64_t>(std::stoll(v));
        } else {
          r.attrs[kv.substr(0, eq)] = v;
        }
      }
      page.tree.push_back(std::move(r));
    } else if (c.size() == 2 && c[0].size() > 2 && c[0].front() == '`' && c[0].back() == '`') {
      const std::vector<std::string> paths = Words(c[1]);
      page.examples.emplace_back(c[0].substr(1, c[0].size() - 2),
                                 std::set<std::string>(paths.begin(), paths.end()));
    }
  }
  return page;
}

TEST(DocsExamples, EveryExampleOfTheQueryPageAnswersWhatThePageSays) {
  const Page page = ReadPage();
  ASSERT_GE(page.tree.size(), 9u);
  ASSERT_GE(page.examples.size(), 25u);
  ParseOptions po;
  po.now_ns = DateNanos("2026-11-27");
  po.resolver.user = [](const std::string& n) -> std::optional<uint32_t> {
    if (n == "alice") return 1000;
    if (n == "bob") return 1001;
    return std::nullopt;
  };
  for (const auto& [text, want] : page.examples) {
    Result<Query> q = Query::Parse(text, po);
    ASSERT_TRUE(q.ok()) << text << ": " << q.status().ToString();
    std::set<std::string> got;
    for (const FileRecord& r : page.tree) {
      if (q->Matches(r)) got.insert(r.paths[0]);
    }
    EXPECT_EQ(got, want) << text;
  }
}

TEST(DocsExamples, TheTypoOnThePageIsRefused) {
  ParseOptions po;
  const std::vector<std::string> known = {"project", "stage"};
  po.user_attrs = &known;
  Result<Query> q = Query::Parse("sise>1m", po);
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(q.status().message().rfind(
                "error at 1: unknown attribute 'sise' (did you mean size?)", 0),
            0u);
}

}  // namespace
}  // namespace propeller
