// GroupComponents (grouping.h): per-component size and tag, first-fit decreasing per tag,
// renumbering by lowest vertex.
#include "partitioner/grouping.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <utility>

namespace propeller {
namespace {

// First-fit bins: a max segment tree over the remaining capacity of up to `max_bins` bins, so
// "the first bin with room for s" is O(log bins). A linear scan would be O(components x bins):
// 100k one-file components with max_group_size 1 would take 10^10 steps.
class FirstFitBins {
 public:
  static constexpr int64_t kNoBin = -1;

  explicit FirstFitBins(size_t max_bins) {
    while (leaves_ < max_bins) leaves_ *= 2;
    tree_.assign(2 * leaves_, 0);  // unopened bins have no room
  }

  // Returns the lowest-numbered open bin with remaining capacity >= size, or kNoBin.
  // REQUIRES: size >= 1 (unopened bins have room 0).
  int64_t FindFirst(uint64_t size) const {
    if (tree_[1] < size) return kNoBin;
    size_t node = 1;
    while (node < leaves_) node = tree_[2 * node] >= size ? 2 * node : 2 * node + 1;
    return static_cast<int64_t>(node - leaves_);
  }

  // Opens bin `opened_` with capacity `room` and returns its number.
  size_t Open(uint64_t room) {
    const size_t bin = opened_++;
    Set(bin, room);
    return bin;
  }

  void Take(size_t bin, uint64_t size) { Set(bin, tree_[leaves_ + bin] - size); }

 private:
  void Set(size_t bin, uint64_t room) {
    size_t node = leaves_ + bin;
    tree_[node] = room;
    for (node /= 2; node >= 1; node /= 2) {
      tree_[node] = std::max(tree_[2 * node], tree_[2 * node + 1]);
    }
  }

  size_t leaves_ = 1;
  size_t opened_ = 0;
  std::vector<uint64_t> tree_;
};

// The most frequent tag per component (ties: smallest tag). `component_of_vertex` is valid.
std::vector<uint32_t> MajorityTags(std::span<const uint32_t> component_of_vertex,
                                   uint32_t num_components,
                                   std::span<const uint32_t> tag_of_vertex) {
  std::vector<std::pair<uint32_t, uint32_t>> pairs(component_of_vertex.size());
  for (size_t v = 0; v < pairs.size(); ++v) pairs[v] = {component_of_vertex[v], tag_of_vertex[v]};
  std::sort(pairs.begin(), pairs.end());
  std::vector<uint32_t> tag(num_components, 0);
  std::vector<size_t> best_count(num_components, 0);
  for (size_t i = 0; i < pairs.size();) {
    size_t j = i;
    while (j < pairs.size() && pairs[j] == pairs[i]) ++j;
    // Runs arrive in increasing tag order, so '>' keeps the smallest tag on ties.
    const uint32_t c = pairs[i].first;
    if (j - i > best_count[c]) {
      best_count[c] = j - i;
      tag[c] = pairs[i].second;
    }
    i = j;
  }
  return tag;
}

}  // namespace

Result<Grouping> GroupComponents(std::span<const uint32_t> component_of_vertex,
                                 uint32_t num_components,
                                 std::span<const uint32_t> tag_of_vertex,
                                 const GroupOptions& options) {
  if (component_of_vertex.size() != tag_of_vertex.size()) {
    return Status::InvalidArgument("grouping: component and tag lists differ in length");
  }
  std::vector<uint64_t> size(num_components, 0);
  for (uint32_t c : component_of_vertex) {
    if (c >= num_components) {
      return Status::InvalidArgument("grouping: component id " + std::to_string(c) +
                                     " >= number of components");
    }
    ++size[c];
  }
  for (uint32_t c = 0; c < num_components; ++c) {
    if (size[c] == 0) {
      return Status::InvalidArgument("grouping: component " + std::to_string(c) +
                                     " has no vertex");
    }
  }
  const std::vector<uint32_t> tag = MajorityTags(component_of_vertex, num_components,
                                                 tag_of_vertex);

  // Every tag's components, largest first, in one sorted list.
  std::vector<uint32_t> order(num_components);
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    if (tag[a] != tag[b]) return tag[a] < tag[b];
    if (size[a] != size[b]) return size[a] > size[b];
    return a < b;
  });

  // Pack each tag's run; bins get provisional ids in creation order across all tags.
  constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();
  std::vector<uint32_t> bin_of_component(num_components, kNone);
  std::vector<uint32_t> lowest_component_of_bin;  // groups are renumbered by this
  for (size_t begin = 0; begin < order.size();) {
    size_t end = begin;
    while (end < order.size() && tag[order[end]] == tag[order[begin]]) ++end;
    FirstFitBins bins(end - begin);
    const auto first_bin = static_cast<uint32_t>(lowest_component_of_bin.size());
    for (size_t i = begin; i < end; ++i) {
      const uint32_t c = order[i];
      int64_t bin = FirstFitBins::kNoBin;
      if (size[c] <= options.max_group_size) bin = bins.FindFirst(size[c]);
      if (bin == FirstFitBins::kNoBin) {
        // An oversized component gets room 0: it stays alone.
        const uint64_t room =
            size[c] <= options.max_group_size ? options.max_group_size - size[c] : 0;
        bin = static_cast<int64_t>(bins.Open(room));
        lowest_component_of_bin.push_back(c);
      } else {
        bins.Take(static_cast<size_t>(bin), size[c]);
        uint32_t& lowest = lowest_component_of_bin[first_bin + static_cast<uint32_t>(bin)];
        lowest = std::min(lowest, c);
      }
      bin_of_component[c] = first_bin + static_cast<uint32_t>(bin);
    }
    begin = end;
  }

  // Renumber bins by their lowest component, i.e. by their lowest vertex.
  const auto num_bins = static_cast<uint32_t>(lowest_component_of_bin.size());
  std::vector<uint32_t> bins_by_lowest(num_bins);
  std::iota(bins_by_lowest.begin(), bins_by_lowest.end(), 0u);
  std::sort(bins_by_lowest.begin(), bins_by_lowest.end(), [&](uint32_t a, uint32_t b) {
    return lowest_component_of_bin[a] < lowest_component_of_bin[b];
  });
  std::vector<uint32_t> group_of_bin(num_bins);
  for (uint32_t g = 0; g < num_bins; ++g) group_of_bin[bins_by_lowest[g]] = g;

  Grouping grouping;
  grouping.num_groups = num_bins;
  grouping.group_of_component.resize(num_components);
  grouping.group_size.assign(num_bins, 0);
  grouping.group_tag.assign(num_bins, 0);
  for (uint32_t c = 0; c < num_components; ++c) {
    const uint32_t g = group_of_bin[bin_of_component[c]];
    grouping.group_of_component[c] = g;
    grouping.group_size[g] += size[c];
    grouping.group_tag[g] = tag[c];
  }
  grouping.group_of_vertex.resize(component_of_vertex.size());
  for (size_t v = 0; v < component_of_vertex.size(); ++v) {
    grouping.group_of_vertex[v] = grouping.group_of_component[component_of_vertex[v]];
  }
  return grouping;
}

Result<Grouping> GroupComponents(const CsrGraph& graph, std::span<const uint32_t> tag_of_vertex,
                                 const GroupOptions& options) {
  if (tag_of_vertex.size() != graph.num_vertices()) {
    return Status::InvalidArgument("grouping: " + std::to_string(tag_of_vertex.size()) +
                                   " tags for " + std::to_string(graph.num_vertices()) +
                                   " vertices");
  }
  uint32_t num_components = 0;
  const std::vector<uint32_t> components = ConnectedComponents(graph, &num_components);
  return GroupComponents(components, num_components, tag_of_vertex, options);
}

Result<Grouping> GroupComponents(const CsrGraph& graph,
                                 std::span<const std::string> tag_of_vertex,
                                 const GroupOptions& options) {
  if (tag_of_vertex.size() != graph.num_vertices()) {
    return Status::InvalidArgument("grouping: " + std::to_string(tag_of_vertex.size()) +
                                   " tags for " + std::to_string(graph.num_vertices()) +
                                   " vertices");
  }
  // Ids in lexicographic order of the names, so "smallest tag id" means "first name".
  std::vector<std::string> names(tag_of_vertex.begin(), tag_of_vertex.end());
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  std::vector<uint32_t> ids(tag_of_vertex.size());
  for (size_t v = 0; v < ids.size(); ++v) {
    ids[v] = static_cast<uint32_t>(
        std::lower_bound(names.begin(), names.end(), tag_of_vertex[v]) - names.begin());
  }
  Result<Grouping> grouping = GroupComponents(graph, ids, options);
  if (grouping.ok()) grouping->tag_names = std::move(names);
  return grouping;
}

}  // namespace propeller
