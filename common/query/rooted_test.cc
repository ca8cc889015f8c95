// Query::WithRoot against brute force: for random path queries, roots and in-volume paths, the
// rewritten query on the in-volume path answers exactly what the original query answers on the
// path as results print it (root + in-volume path; the root itself for "/").
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/query/query.h"
#include "common/random.h"
#include "common/record.h"

namespace propeller {
namespace {

std::string Shown(const std::string& root, const std::string& p) {
  if (root == "/") return p;
  return p == "/" ? root : root + p;
}

bool AnyRooted(const QueryNode& n) {
  if (n.kind == QueryNode::Kind::kPred) return !n.pred.root.empty();
  for (const auto& c : n.children) {
    if (AnyRooted(*c)) return true;
  }
  return false;
}

TEST(QueryWithRootTest, RewriteAnswersAsTheShownPathsDo) {
  const std::vector<std::string> roots = {"/", "/usr/share", "/usr", "/mnt/data", "/a b",
                                          "/srv/Share2", "/usr/sharex"};
  const std::vector<std::string> inner = {"/", "/doc", "/doc/git", "/doc/git/README.md",
                                          "/share", "/x.TXT", "/data/run42/a.parquet",
                                          "/usr/share/doc", "/Doc/Git-2.4"};
  const std::vector<std::string> values = {
      "/usr/share", "/usr/share/", "/usr/share/doc", "/usr/share/doc/git*", "/usr/share/*",
      "/usr/*", "/usr*", "/usr/share*", "/usr/sharex/*", "/mnt/data/doc", "/mnt/data/*/git",
      "*/doc/*", "doc", "share", "/", "/*", "*", "/doc", "/doc/*", "[/]usr*", "/usr/sh?re/*",
      "\\/usr/*", "/a b/*", "/srv/Share2/x.TXT"};
  const std::vector<std::string> ops = {"=", "!=", "~", "<", ">=", "=~"};
  const std::vector<std::string> attrs = {"path", "ipath", "name", "iname", "ext"};
  const std::vector<std::string> keywords = {"share", "usr", "doc", "git", "data", "mnt",
                                             "run42", "x", "txt", "share2", "sharex", "b"};
  Random rng(11);
  int rooted = 0, rewritten = 0, checked = 0;
  for (int round = 0; round < 20000; ++round) {
    std::string text;
    if (rng.OneIn(4)) {
      text = std::string("keyword") + (rng.OneIn(3) ? "!=" : "=") +
             keywords[rng.Uniform(keywords.size())];
    } else {
      const std::string& attr = attrs[rng.Uniform(attrs.size())];
      const std::string& op = ops[rng.Uniform(ops.size())];
      std::string value = values[rng.Uniform(values.size())];
      if (op == "=~") value = "^/usr/share";
      text = attr + op + "\"" + value + "\"";
    }
    if (rng.OneIn(3)) text = "!(" + text + ")";
    if (rng.OneIn(4)) text += " & size>=0";
    auto q = Query::Parse(text);
    if (!q.ok()) continue;  // e.g. an ordering on ext
    for (const std::string& root : roots) {
      bool changed = false;
      Query w = q->WithRoot(root, &changed);
      if (changed) ++rewritten;
      if (AnyRooted(w.root())) ++rooted;
      if (root == "/") {
        EXPECT_FALSE(changed);
      }
      for (const std::string& p : inner) {
        FileRecord rec;
        rec.id = {1, 1};
        rec.paths = {p};
        FileRecord shown = rec;
        shown.paths = {Shown(root, p)};
        ASSERT_EQ(w.MatchesLink(rec, p), q->MatchesLink(shown, shown.paths[0]))
            << text << " root " << root << " path " << p << " rewritten " << w.ToString();
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 100000);
  // The rewrite mostly stays answerable by the indexes; some predicates must go under the root.
  EXPECT_GT(rewritten, 1000);
  EXPECT_GT(rooted, 100);
}

TEST(QueryWithRootTest, CommonQueriesStayIndexable) {
  auto q = Query::Parse("path~/usr/share/doc/git* & keyword=share");
  ASSERT_TRUE(q.ok());
  bool changed = false;
  Query w = q->WithRoot("/usr/share", &changed);
  EXPECT_TRUE(changed);
  EXPECT_FALSE(AnyRooted(w.root())) << w.ToString();
  EXPECT_EQ(w.ToString(), "path ~ \"/doc/git*\" & path != \"/\" & !path = \"\"");
  // Another volume: nothing of it can match.
  Query other = q->WithRoot("/home", &changed);
  EXPECT_TRUE(changed);
  FileRecord rec;
  rec.id = {1, 1};
  rec.paths = {"/doc/git/x"};
  EXPECT_FALSE(other.Matches(rec));
  // Without a root: the same query.
  Query same = q->WithRoot("/", &changed);
  EXPECT_FALSE(changed);
  EXPECT_EQ(same.ToString(), q->ToString());
}

}  // namespace
}  // namespace propeller
