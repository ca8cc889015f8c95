// Tests for grouping.h against independent models: union-find components, majority tags by
// counting, and a straightforward first-fit-decreasing packer (linear scan over bins), plus the
// invariants grouping promises (whole components, one tag per group, size bound, numbering).
#include "partitioner/grouping.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "common/random.h"

namespace propeller {
namespace {

struct UnionFind {
  explicit UnionFind(uint32_t n) : parent(n) { std::iota(parent.begin(), parent.end(), 0u); }
  uint32_t Find(uint32_t x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  }
  void Union(uint32_t a, uint32_t b) { parent[Find(a)] = Find(b); }
  std::vector<uint32_t> parent;
};

// The model: components as sets of vertices (keyed by lowest vertex), their majority tag, and
// first-fit decreasing per tag with a linear scan. Returns the groups as sorted vertex lists,
// sorted by lowest vertex.
std::vector<std::vector<uint32_t>> ModelGroups(uint32_t n, const std::vector<WeightedEdge>& edges,
                                               const std::vector<uint32_t>& tags,
                                               uint64_t max_group_size,
                                               std::vector<uint32_t>* group_tags) {
  UnionFind uf(n);
  for (const WeightedEdge& e : edges) {
    if (e.src < n && e.dst < n && e.src != e.dst && e.weight > 0) uf.Union(e.src, e.dst);
  }
  std::map<uint32_t, std::vector<uint32_t>> by_root;
  for (uint32_t v = 0; v < n; ++v) by_root[uf.Find(v)].push_back(v);
  struct Comp {
    std::vector<uint32_t> vertices;  // ascending
    uint32_t tag;
  };
  std::vector<Comp> comps;
  for (auto& [root, vertices] : by_root) {
    std::map<uint32_t, size_t> count;
    for (uint32_t v : vertices) ++count[tags[v]];
    uint32_t best = 0;
    size_t best_count = 0;
    for (auto [tag, c] : count) {  // ascending tag: strict '>' keeps the smallest on ties
      if (c > best_count) {
        best = tag;
        best_count = c;
      }
    }
    comps.push_back({vertices, best});
  }
  // Component ids by lowest vertex.
  std::sort(comps.begin(), comps.end(),
            [](const Comp& a, const Comp& b) { return a.vertices[0] < b.vertices[0]; });
  std::vector<std::vector<uint32_t>> groups;
  std::vector<uint32_t> tag_of_group;
  std::set<uint32_t> all_tags;
  for (const Comp& c : comps) all_tags.insert(c.tag);
  for (uint32_t tag : all_tags) {
    std::vector<size_t> order;
    for (size_t i = 0; i < comps.size(); ++i) {
      if (comps[i].tag == tag) order.push_back(i);
    }
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return comps[a].vertices.size() > comps[b].vertices.size();
    });
    std::vector<std::vector<uint32_t>> bins;
    std::vector<uint64_t> used;
    std::vector<bool> oversized;
    for (size_t i : order) {
      const uint64_t size = comps[i].vertices.size();
      size_t b = 0;
      while (b < bins.size() &&
             (oversized[b] || size > max_group_size || used[b] + size > max_group_size)) {
        ++b;
      }
      if (b == bins.size()) {
        bins.emplace_back();
        used.push_back(0);
        oversized.push_back(size > max_group_size);
      }
      bins[b].insert(bins[b].end(), comps[i].vertices.begin(), comps[i].vertices.end());
      used[b] += size;
    }
    for (auto& bin : bins) {
      std::sort(bin.begin(), bin.end());
      groups.push_back(bin);
      tag_of_group.push_back(tag);
    }
  }
  std::vector<size_t> idx(groups.size());
  std::iota(idx.begin(), idx.end(), 0u);
  std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return groups[a][0] < groups[b][0]; });
  std::vector<std::vector<uint32_t>> sorted;
  group_tags->clear();
  for (size_t i : idx) {
    sorted.push_back(groups[i]);
    group_tags->push_back(tag_of_group[i]);
  }
  return sorted;
}

std::vector<std::vector<uint32_t>> GroupsOf(const Grouping& g) {
  std::vector<std::vector<uint32_t>> groups(g.num_groups);
  for (uint32_t v = 0; v < g.group_of_vertex.size(); ++v) {
    groups[g.group_of_vertex[v]].push_back(v);
  }
  return groups;
}

TEST(GroupingTest, RandomGraphsMatchFirstFitDecreasingModel) {
  const uint64_t seed = TestSeed();
  for (int round = 0; round < 300; ++round) {
    SCOPED_TRACE("seed=" + std::to_string(seed) + " round=" + std::to_string(round));
    Random rnd(seed * 13 + static_cast<uint64_t>(round));
    const auto n = static_cast<uint32_t>(rnd.Uniform(300));
    const size_t num_edges = n == 0 ? 0 : rnd.Uniform(n);  // sparse: many small components
    std::vector<WeightedEdge> edges;
    for (size_t i = 0; i < num_edges; ++i) {
      edges.push_back({static_cast<uint32_t>(rnd.Uniform(n)),
                       static_cast<uint32_t>(rnd.Uniform(n)),
                       static_cast<uint64_t>(rnd.Range(0, 3))});
    }
    const auto num_tags = static_cast<uint32_t>(rnd.Range(1, 5));
    std::vector<uint32_t> tags(n);
    for (uint32_t& t : tags) t = static_cast<uint32_t>(rnd.Uniform(num_tags)) * 7 + 3;
    GroupOptions options;
    options.max_group_size = static_cast<uint64_t>(rnd.Range(0, 40));
    const CsrGraph g = CsrGraph::FromDirectedEdges(n, edges);
    Result<Grouping> got = GroupComponents(g, tags, options);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    std::vector<uint32_t> want_tags;
    const auto want = ModelGroups(n, edges, tags, options.max_group_size, &want_tags);
    ASSERT_EQ(got->num_groups, want.size());
    ASSERT_EQ(GroupsOf(*got), want);
    ASSERT_EQ(got->group_tag, want_tags);
    ASSERT_TRUE(got->tag_names.empty());

    // Invariants, stated directly.
    uint32_t num_components = 0;
    const std::vector<uint32_t> comp = ConnectedComponents(g, &num_components);
    ASSERT_EQ(got->group_of_component.size(), num_components);
    std::vector<uint32_t> components_in_group(got->num_groups, 0);
    for (uint32_t c = 0; c < num_components; ++c) ++components_in_group[got->group_of_component[c]];
    for (uint32_t v = 0; v < n; ++v) {
      ASSERT_EQ(got->group_of_vertex[v], got->group_of_component[comp[v]]);
    }
    for (uint32_t gid = 0; gid < got->num_groups; ++gid) {
      ASSERT_EQ(got->group_size[gid], want[gid].size());
      // A group over the bound is a single component.
      if (got->group_size[gid] > options.max_group_size) {
        ASSERT_EQ(components_in_group[gid], 1u);
      }
      // Numbered by lowest vertex.
      if (gid > 0) {
        ASSERT_LT(want[gid - 1][0], want[gid][0]);
      }
    }
    // First-fit property: no two groups of one tag within the bound could be merged.
    for (uint32_t a = 0; a < got->num_groups; ++a) {
      for (uint32_t b = a + 1; b < got->num_groups; ++b) {
        if (got->group_tag[a] != got->group_tag[b]) continue;
        if (got->group_size[a] > options.max_group_size ||
            got->group_size[b] > options.max_group_size) {
          continue;
        }
        ASSERT_GT(got->group_size[a] + got->group_size[b], options.max_group_size);
      }
    }
  }
}

TEST(GroupingTest, SmallFixedExample) {
  // Components (by lowest vertex): {0,1,2} app 5, {3} app 5, {4,5} app 9, {6} app 5,
  // {7,8,9,10} app 5 with one app-9 vertex (majority 5), {11} app 9.
  const std::vector<WeightedEdge> edges = {{0, 1, 1}, {2, 1, 1}, {4, 5, 2},
                                           {7, 8, 1}, {8, 9, 1}, {10, 9, 1}};
  const std::vector<uint32_t> tags = {5, 5, 5, 5, 9, 9, 5, 5, 9, 5, 5, 9};
  const CsrGraph g = CsrGraph::FromDirectedEdges(12, edges);
  GroupOptions options;
  options.max_group_size = 5;
  Result<Grouping> got = GroupComponents(g, tags, options);
  ASSERT_TRUE(got.ok());
  // App 5, largest first: {7..10} (4) -> bin A; {0,1,2} (3) -> bin B; {3} -> A (5); {6} -> B.
  // App 9: {4,5} + {11} -> one bin. Numbered by lowest vertex: B (0) = 0, A (3) = 1,
  // {4,5,11} = 2.
  EXPECT_EQ(got->group_of_vertex, (std::vector<uint32_t>{0, 0, 0, 1, 2, 2, 0, 1, 1, 1, 1, 2}));
  EXPECT_EQ(got->group_size, (std::vector<uint64_t>{4, 5, 3}));
  EXPECT_EQ(got->group_tag, (std::vector<uint32_t>{5, 5, 9}));
  EXPECT_EQ(got->group_of_component, (std::vector<uint32_t>{0, 1, 2, 0, 1, 2}));
}

TEST(GroupingTest, ThresholdEdgeCases) {
  const std::vector<WeightedEdge> edges = {{0, 1, 1}, {1, 2, 1}};
  const std::vector<uint32_t> tags(6, 1);
  const CsrGraph g = CsrGraph::FromDirectedEdges(6, edges);
  GroupOptions options;
  options.max_group_size = 0;  // nothing may share: every component alone
  Result<Grouping> got = GroupComponents(g, tags, options);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->num_groups, 4u);
  options.max_group_size = 3;  // exactly full bins: {0,1,2} alone, singletons together
  got = GroupComponents(g, tags, options);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->group_of_vertex, (std::vector<uint32_t>{0, 0, 0, 1, 1, 1}));
  options.max_group_size = 2;  // {0,1,2} oversized alone; singletons 2 + 1
  got = GroupComponents(g, tags, options);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->group_of_vertex, (std::vector<uint32_t>{0, 0, 0, 1, 1, 2}));
  options.max_group_size = 1000;
  got = GroupComponents(g, tags, options);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->num_groups, 1u);
  EXPECT_EQ(got->group_size, std::vector<uint64_t>{6});

  const CsrGraph empty;
  got = GroupComponents(empty, std::vector<uint32_t>{}, options);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->num_groups, 0u);
  EXPECT_TRUE(got->group_of_vertex.empty());
}

TEST(GroupingTest, StringTagsMatchNumericTags) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  Random rnd(seed + 17);
  const std::vector<std::string> names = {"make", "cc1", "ld", "python3", "as"};
  const uint32_t n = 500;
  std::vector<WeightedEdge> edges;
  for (int i = 0; i < 350; ++i) {
    edges.push_back({static_cast<uint32_t>(rnd.Uniform(n)), static_cast<uint32_t>(rnd.Uniform(n)),
                     1});
  }
  std::vector<std::string> tags(n);
  std::vector<uint32_t> ids(n);
  // Lexicographic ids: as=0, cc1=1, ld=2, make=3, python3=4.
  const std::map<std::string, uint32_t> lex = {
      {"as", 0}, {"cc1", 1}, {"ld", 2}, {"make", 3}, {"python3", 4}};
  for (uint32_t v = 0; v < n; ++v) {
    tags[v] = names[rnd.Uniform(names.size())];
    ids[v] = lex.at(tags[v]);
  }
  const CsrGraph g = CsrGraph::FromDirectedEdges(n, edges);
  GroupOptions options;
  options.max_group_size = 20;
  Result<Grouping> by_name = GroupComponents(g, std::span<const std::string>(tags), options);
  Result<Grouping> by_id = GroupComponents(g, ids, options);
  ASSERT_TRUE(by_name.ok());
  ASSERT_TRUE(by_id.ok());
  EXPECT_EQ(by_name->group_of_vertex, by_id->group_of_vertex);
  EXPECT_EQ(by_name->group_tag, by_id->group_tag);
  EXPECT_EQ(by_name->tag_names, (std::vector<std::string>{"as", "cc1", "ld", "make", "python3"}));

  // A tie between two names goes to the lexicographically first.
  const CsrGraph pair = CsrGraph::FromDirectedEdges(2, std::vector<WeightedEdge>{{0, 1, 1}});
  const std::vector<std::string> tied = {"zsh", "bash"};
  Result<Grouping> t = GroupComponents(pair, std::span<const std::string>(tied), options);
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->num_groups, 1u);
  EXPECT_EQ(t->tag_names[t->group_tag[0]], "bash");
}

TEST(GroupingTest, InvalidArguments) {
  const GroupOptions options;
  const std::vector<uint32_t> comps = {0, 1, 1};
  const std::vector<uint32_t> tags2 = {0, 0};
  EXPECT_EQ(GroupComponents(comps, 2, tags2, options).status().code(),
            StatusCode::kInvalidArgument);
  const std::vector<uint32_t> tags3 = {0, 0, 0};
  EXPECT_EQ(GroupComponents(comps, 1, tags3, options).status().code(),
            StatusCode::kInvalidArgument);  // label 1 >= 1 component
  EXPECT_EQ(GroupComponents(comps, 3, tags3, options).status().code(),
            StatusCode::kInvalidArgument);  // component 2 labels nothing
  EXPECT_TRUE(GroupComponents(comps, 2, tags3, options).ok());
  const CsrGraph g = CsrGraph::FromDirectedEdges(3, {});
  EXPECT_EQ(GroupComponents(g, tags2, options).status().code(), StatusCode::kInvalidArgument);
  const std::vector<std::string> names = {"a"};
  EXPECT_EQ(GroupComponents(g, std::span<const std::string>(names), options).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(GroupingTest, ManySingletonsWithTinyGroupsStayFast) {
  // 200k one-file components, max 1 per group: 200k bins. A linear first-fit scan would take
  // 2*10^10 steps; the segment tree keeps this well under a second.
  const uint32_t n = 200000;
  const CsrGraph g = CsrGraph::FromDirectedEdges(n, {});
  const std::vector<uint32_t> tags(n, 0);
  GroupOptions options;
  options.max_group_size = 1;
  Result<Grouping> got = GroupComponents(g, tags, options);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->num_groups, n);
  for (uint32_t v = 0; v < n; ++v) ASSERT_EQ(got->group_of_vertex[v], v);
  options.max_group_size = 1000;
  got = GroupComponents(g, tags, options);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->num_groups, n / 1000);
  for (uint32_t v = 0; v < n; ++v) ASSERT_EQ(got->group_of_vertex[v], v / 1000);
}

}  // namespace
}  // namespace propeller
