// Searches whose path predicates are about the paths results print (SearchRequest::
// volume_roots, Query::WithRoot): against brute force over the same records shown under their
// volumes' roots, with the indexes and summaries in play (committed, in the cache, several
// ACGs, several volumes), scoped or not, sorted and limited.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "indexnode/engine.h"
#include "indexnode/engine_test_util.h"

namespace propeller {
namespace {

using testing::kNow;
using testing::Model;
using testing::RecordGen;
using testing::TempDir;

std::string Shown(const std::string& root, const std::string& p) {
  if (root == "/") return p;
  return p == "/" ? root : root + p;
}

TEST(EngineRootsTest, PathPredicatesSeeThePathsResultsPrint) {
  const std::map<uint32_t, std::string> roots = {
      {1, "/usr/share"}, {2, "/mnt/data"}, {3, "/"}, {4, "/home/ann/src"}};
  TempDir dir;
  EngineOptions o;
  o.data_dir = dir.path();
  o.background_commit = false;
  auto engine = Engine::Open(o);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  RecordGen gen(5);
  Model model;
  for (uint64_t ino = 1; ino <= 600; ++ino) {
    Update u;
    u.acg = 1 + ino % 7;
    const uint32_t volume = 1 + static_cast<uint32_t>(ino % 4);
    u.record = gen.NewRecord(FileId{volume, ino});
    if (ino % 50 == 0) u.record.paths = {"/"};  // a volume's root directory
    ASSERT_TRUE((*engine)->Apply({&u, 1}).ok());
    model.Apply(u);
    if (ino == 400) {
      ASSERT_TRUE((*engine)->CommitAll().ok());
    }
  }
  const std::vector<std::string> queries = {
      "keyword=share", "keyword=data", "keyword=src", "keyword=firefox", "keyword!=usr",
      "path~/usr/share/src/*", "path~/mnt/data/*", "path~/usr/*", "path~\"*/src/*\"",
      "path=/mnt/data", "path=/usr/share/data/run42", "path~/home/ann/src/tmp*",
      "path~src", "ipath~/MNT/*", "path</n", "name=share", "name=src", "name~\"*.c\"",
      "keyword=share & size>1m", "(keyword=data | keyword=share) & !ext=c",
      "path~/usr/share/home/* | keyword=mnt", "ext=gz & path~/mnt/*", "keyword=ann"};
  size_t total = 0;
  for (const std::string& text : queries) {
    for (const std::string& scope : {std::string("/"), std::string("/src")}) {
      for (std::optional<uint32_t> only : {std::optional<uint32_t>(), std::optional<uint32_t>(1),
                                           std::optional<uint32_t>(3)}) {
        SCOPED_TRACE(text + " scope " + scope + (only ? " volume " + std::to_string(*only) : ""));
        ParseOptions po;
        po.now_ns = kNow;
        auto q = Query::Parse(text, po);
        ASSERT_TRUE(q.ok()) << q.status().ToString();
        std::vector<std::string> want;
        for (const auto& [id, rec] : model.files) {
          if (only && id.volume != *only) continue;
          for (const std::string& p : rec.paths) {
            if (!PathInScope(p, scope)) continue;
            FileRecord shown = rec;
            for (std::string& s : shown.paths) s = Shown(roots.at(id.volume), s);
            const std::string sp = Shown(roots.at(id.volume), p);
            if (q->MatchesLink(shown, sp)) want.push_back(std::to_string(id.volume) + ":" + p);
          }
        }
        std::sort(want.begin(), want.end());
        total += want.size();
        SearchRequest r;
        r.query = text;
        r.now_ns = kNow;
        r.scope = scope;
        r.volume = only;
        r.volume_roots = roots;
        auto hits = (*engine)->SearchAll(r);
        ASSERT_TRUE(hits.ok()) << hits.status().ToString();
        std::vector<std::string> got;
        for (const SearchHit& h : *hits) {
          got.push_back(std::to_string(h.record.id.volume) + ":" + h.path);
        }
        std::sort(got.begin(), got.end());
        EXPECT_EQ(got, want);
        // Sorted and limited across the passes: the first of the whole order.
        r.sort_by = "path";
        r.limit = 3;
        auto first = (*engine)->SearchAll(r);
        ASSERT_TRUE(first.ok());
        EXPECT_EQ(first->size(), std::min<size_t>(3, want.size()));
      }
    }
  }
  EXPECT_GT(total, 2000u);  // the queries do match, under the roots
}

}  // namespace
}  // namespace propeller
