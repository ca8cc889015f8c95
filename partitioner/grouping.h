// GroupComponents: packs the small connected components of one application into shared ACGs
// (docs/architecture.md §5 "Grouping"), so the index is not fragmented into thousands of tiny
// partitions.
//
// Rules, for every vertex v with an application tag (the executable that created the file):
// - A component's tag is the tag most of its vertices carry (ties: the smallest tag id; for
//   string tags, the lexicographically smallest name).
// - Components are grouped only with components of the same tag. Per tag, components are taken
//   largest first (ties: lower component id) and each goes into the first group, in order of
//   creation, whose total stays <= max_group_size with it; if none, it starts a new group
//   (first-fit decreasing). A component larger than max_group_size is a group on its own: it is
//   the split's job (split.h), not grouping's.
// - Groups are numbered 0..num_groups-1 in increasing order of their lowest vertex, like
//   components, so the numbering does not depend on how tags are numbered.
// The result is a deterministic function of the inputs. O(V log V) time, O(V) memory.
//
// Pure computation; thread-safe.
#ifndef PROPELLER_PARTITIONER_GROUPING_H_
#define PROPELLER_PARTITIONER_GROUPING_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "partitioner/graph.h"

namespace propeller {

struct GroupOptions {
  // The most vertices (files) a group of several components may hold. Default: the split
  // threshold (docs/architecture.md §5), so a fresh group never needs a split.
  uint64_t max_group_size = 50000;
};

struct Grouping {
  uint32_t num_groups = 0;
  std::vector<uint32_t> group_of_vertex;     // one per vertex
  std::vector<uint32_t> group_of_component;  // one per component
  std::vector<uint64_t> group_size;          // vertices per group
  std::vector<uint32_t> group_tag;           // the tag of every component in the group
  // String overload only: tag id -> name, ids in lexicographic order of the names. Empty for
  // the uint32_t overloads, whose tag ids are the caller's.
  std::vector<std::string> tag_names;
};

// Groups the components given as a label per vertex (as ConnectedComponents returns).
// Errors: InvalidArgument when the spans differ in length, a label is >= num_components, or a
// component id in [0, num_components) labels no vertex.
Result<Grouping> GroupComponents(std::span<const uint32_t> component_of_vertex,
                                 uint32_t num_components,
                                 std::span<const uint32_t> tag_of_vertex,
                                 const GroupOptions& options);

// Computes the connected components of `graph` and groups them.
// Errors: InvalidArgument when tag_of_vertex.size() != graph.num_vertices().
Result<Grouping> GroupComponents(const CsrGraph& graph, std::span<const uint32_t> tag_of_vertex,
                                 const GroupOptions& options);

// As above with string tags (e.g. executable names); Grouping::tag_names maps the ids back.
Result<Grouping> GroupComponents(const CsrGraph& graph,
                                 std::span<const std::string> tag_of_vertex,
                                 const GroupOptions& options);

}  // namespace propeller

#endif  // PROPELLER_PARTITIONER_GROUPING_H_
