// propeller acg stats|show|export: the captured access-causality graphs (docs/architecture.md §3,
// §9).
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "client/cli/args.h"
#include "client/cli/commands.h"
#include "client/lib/mount_registry.h"
#include "partitioner/graph.h"
#include "partitioner/split.h"

namespace propeller::cli {
namespace {

constexpr const char* kAcgHelp = R"(usage: propeller acg stats [--json]
       propeller acg show FILE
       propeller acg export [--dot|--json]
       propeller acg move ACG NODE

The access-causality graphs the mounts captured (an edge a -> b: a process read a, then wrote
b; its weight counts the processes that did).
  stats    per ACG and in total: files (vertices), edges, total weight, and what a
           METIS 2-way split would give now —
           its time, the sizes of the halves, the weight of the cut and its share of the total
  show     the ACG of FILE and its neighbours (producers and products) with weights
  export   every edge, as Graphviz (--dot, the default; one cluster per ACG) or JSON
  move     moves ACG (a number, as `propeller status` and `acg stats` list them) to the index
           node NODE (its id) in bulk: its owner freezes it, sends a compacted copy of its
           data, and drops its own once NODE adopted it and the master names NODE.
           Updates to that ACG wait meanwhile; searches go on. An ACG with routes (one that
           was split or merged) stays where it is.
With a FILE inside a Propeller mount, or --master, the command finds the cluster itself;
otherwise it uses the default master (see propeller --help, --master).
)";

struct Graphs {
  std::map<uint64_t, uint64_t> files;                 // acg -> files (from the nodes)
  std::map<uint64_t, std::vector<AcgEdge>> edges;     // acg -> edges
};

Result<Graphs> Load(Client* client) {
  Graphs g;
  // Edges first: listing them commits the ACGs' write caches, so the file counts that follow
  // include every acknowledged file.
  PROPELLER_ASSIGN_OR_RETURN(std::vector<AcgEdge> edges, client->ListEdges());
  for (AcgEdge& e : edges) g.edges[e.acg].push_back(e);
  PROPELLER_ASSIGN_OR_RETURN(ClusterStatus status, client->GetStatus());
  for (const NodeStatus& n : status.nodes) {
    if (!n.node) continue;
    for (const wire::AcgLoad& a : n.node->acg_list) g.files[a.acg] = a.files;
  }
  return g;
}

// The METIS split of one ACG: vertices are its files (those without edges are isolated).
Result<SplitReport> SplitOf(uint64_t files, const std::vector<AcgEdge>& edges) {
  std::unordered_map<FileId, uint32_t, FileIdHash> index;
  std::vector<WeightedEdge> wedges;
  auto vertex = [&](const FileId& f) {
    auto [it, fresh] = index.emplace(f, static_cast<uint32_t>(index.size()));
    return it->second;
  };
  for (const AcgEdge& e : edges) {
    wedges.push_back(WeightedEdge{vertex(e.src), vertex(e.dst), e.weight});
  }
  const uint64_t n = std::max<uint64_t>(files, index.size());
  if (n > static_cast<uint64_t>(CsrGraph::kMaxIndex)) {
    return Status::ResourceExhausted("ACG too large to split here");
  }
  CsrGraph graph = CsrGraph::FromDirectedEdges(static_cast<uint32_t>(n), wedges);
  PROPELLER_ASSIGN_OR_RETURN(Split split, SplitInTwo(graph, SplitOptions{}));
  return split.report;
}

// Paths for file ids, through the index (host paths; under the mount point for a mount).
class Namer {
 public:
  Namer(Client* client, std::optional<MountRecord> mount) : client_(client), mount_(mount) {}
  // Whether `id` is an indexed file and, when both are known, has inode generation
  // `generation`. An edge whose end was deleted, kept in another ACG than the deleted file's
  // (an ACG drops the edges of the files it deletes), is not shown, nor one that names
  // another generation than the file's: it was captured for a deleted file that had the
  // number before (docs/capture.md "Identity").
  bool Live(const FileId& id, uint32_t generation) {
    Name(id);
    if (dead_.contains(id)) return false;
    auto it = generations_.find(id);
    const uint32_t now = it == generations_.end() ? 0 : it->second;
    return generation == 0 || now == 0 || generation == now;
  }
  bool Live(const AcgEdge& e) {
    return Live(e.src, e.src_generation) && Live(e.dst, e.dst_generation);
  }
  std::string Name(const FileId& id) {
    auto it = cache_.find(id);
    if (it != cache_.end()) return it->second;
    std::string name = "(volume " + std::to_string(id.volume) + " inode " +
                       std::to_string(id.ino) + ")";
    Result<FileRecord> rec = client_->Get(id);
    if (!rec.ok() && rec.status().code() == StatusCode::kNotFound) dead_.insert(id);
    if (rec.ok()) generations_[id] = rec->inode_generation;
    if (rec.ok() && !rec->paths.empty()) {
      if (mount_ && mount_->volume == id.volume) {
        name = mount_->mountpoint + (rec->paths[0] == "/" ? "" : rec->paths[0]);
      } else {
        name = VolumeRoot(id.volume) + (rec->paths[0] == "/" ? "" : rec->paths[0]);
      }
    }
    cache_[id] = name;
    return name;
  }

 private:
  std::string VolumeRoot(uint32_t volume) {
    if (roots_.empty()) {
      auto vols = client_->ListVolumes();
      if (vols.ok()) {
        for (const wire::VolumeInfo& v : *vols) roots_[v.volume] = v.root == "/" ? "" : v.root;
      }
    }
    auto it = roots_.find(volume);
    return it == roots_.end() ? "" : it->second;
  }

  Client* client_;
  std::optional<MountRecord> mount_;
  std::map<uint32_t, std::string> roots_;
  std::unordered_map<FileId, std::string, FileIdHash> cache_;
  std::unordered_set<FileId, FileIdHash> dead_;
  std::unordered_map<FileId, uint32_t, FileIdHash> generations_;
};

std::string DotQuote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

int Stats(Client* client, bool json) {
  auto g = Load(client);
  if (!g.ok()) return ReportError(g.status());
  std::set<uint64_t> acgs;
  for (const auto& [acg, files] : g->files) acgs.insert(acg);
  for (const auto& [acg, edges] : g->edges) acgs.insert(acg);
  SplitReport total{};
  uint64_t total_files = 0;
  double total_seconds = 0;
  if (!json) {
    std::printf("%-8s %10s %10s %12s %10s %21s %12s %7s\n", "ACG", "files", "edges", "weight",
                "split ms", "halves", "cut weight", "cut %");
  } else {
    std::printf("{\"acgs\":[");
  }
  bool first = true;
  for (uint64_t acg : acgs) {
    const uint64_t files = g->files.count(acg) ? g->files[acg] : 0;
    auto r = SplitOf(files, g->edges[acg]);
    if (!r.ok()) return ReportError(r.status().WithContext("ACG " + std::to_string(acg)));
    total_files += files;
    total.edges += r->edges;
    total.total_weight += r->total_weight;
    total.cut_weight += r->cut_weight;
    total_seconds += r->partition_seconds;
    if (json) {
      std::printf("%s{\"acg\":%llu,\"files\":%llu,\"split\":%s}", first ? "" : ",",
                  static_cast<unsigned long long>(acg), static_cast<unsigned long long>(files),
                  SplitReportToJson(*r).c_str());
    } else {
      std::printf("%-8llu %10llu %10llu %12llu %10.2f %10u/%-10u %12llu %7.2f\n",
                  static_cast<unsigned long long>(acg), static_cast<unsigned long long>(files),
                  static_cast<unsigned long long>(r->edges),
                  static_cast<unsigned long long>(r->total_weight), r->partition_seconds * 1e3,
                  r->side_vertices[0], r->side_vertices[1],
                  static_cast<unsigned long long>(r->cut_weight), r->cut_percent);
    }
    first = false;
  }
  const double pct = total.total_weight == 0 ? 0.0
                                             : 100.0 * static_cast<double>(total.cut_weight) /
                                                   static_cast<double>(total.total_weight);
  if (json) {
    std::printf("],\"total\":{\"acgs\":%zu,\"files\":%llu,\"edges\":%llu,\"total_weight\":%llu,"
                "\"split_seconds\":%.6f,\"cut_weight\":%llu,\"cut_percent\":%.4f}}\n",
                acgs.size(), static_cast<unsigned long long>(total_files),
                static_cast<unsigned long long>(total.edges),
                static_cast<unsigned long long>(total.total_weight), total_seconds,
                static_cast<unsigned long long>(total.cut_weight), pct);
  } else {
    std::printf("%-8s %10llu %10llu %12llu %10.2f %21s %12llu %7.2f\n", "total",
                static_cast<unsigned long long>(total_files),
                static_cast<unsigned long long>(total.edges),
                static_cast<unsigned long long>(total.total_weight), total_seconds * 1e3, "",
                static_cast<unsigned long long>(total.cut_weight), pct);
  }
  return kExitOk;
}

int Show(Client* client, const std::string& file, std::optional<MountRecord> mount) {
  // A path through a mount names the backing file (same inode number).
  std::string path = file;
  if (mount) {
    path = mount->backing + file.substr(mount->mountpoint == "/" ? 0 : mount->mountpoint.size());
  }
  auto id = client->FileIdOf(path);
  if (!id.ok()) return ReportError(id.status());
  auto edges = client->ListEdges();
  if (!edges.ok()) return ReportError(edges.status());
  Namer namer(client, mount);
  std::set<uint64_t> acgs;
  std::vector<std::pair<std::string, uint64_t>> producers, products;
  for (const AcgEdge& e : *edges) {
    if (!namer.Live(e)) continue;
    if (e.dst == *id) {
      producers.push_back({namer.Name(e.src), e.weight});
      acgs.insert(e.acg);
    }
    if (e.src == *id) {
      products.push_back({namer.Name(e.dst), e.weight});
      acgs.insert(e.acg);
    }
  }
  std::printf("%s (volume %u, inode %llu)\n", file.c_str(), id->volume,
              static_cast<unsigned long long>(id->ino));
  if (acgs.empty()) {
    std::printf("  no captured edges\n");
    return kExitOk;
  }
  for (uint64_t acg : acgs) std::printf("  ACG %llu\n", static_cast<unsigned long long>(acg));
  std::printf("  read before it was written (%zu):\n", producers.size());
  for (const auto& [n, w] : producers) std::printf("    %6llu  %s\n", (unsigned long long)w, n.c_str());
  std::printf("  written after it was read (%zu):\n", products.size());
  for (const auto& [n, w] : products) std::printf("    %6llu  %s\n", (unsigned long long)w, n.c_str());
  return kExitOk;
}

int Export(Client* client, bool json, std::optional<MountRecord> mount) {
  auto g = Load(client);
  if (!g.ok()) return ReportError(g.status());
  Namer namer(client, mount);
  if (json) {
    std::printf("{\"acgs\":[");
    bool first_acg = true;
    for (const auto& [acg, edges] : g->edges) {
      std::printf("%s{\"acg\":%llu,\"files\":%llu,\"edges\":[", first_acg ? "" : ",",
                  static_cast<unsigned long long>(acg),
                  static_cast<unsigned long long>(g->files.count(acg) ? g->files[acg] : 0));
      bool first = true;
      for (const AcgEdge& e : edges) {
        if (!namer.Live(e)) continue;
        std::printf("%s{\"src\":%s,\"dst\":%s,\"weight\":%llu}", first ? "" : ",",
                    JsonString(namer.Name(e.src)).c_str(), JsonString(namer.Name(e.dst)).c_str(),
                    static_cast<unsigned long long>(e.weight));
        first = false;
      }
      std::printf("]}");
      first_acg = false;
    }
    std::printf("]}\n");
    return kExitOk;
  }
  std::printf("digraph acg {\n  rankdir=LR;\n  node [shape=box, fontsize=10];\n");
  for (const auto& [acg, edges] : g->edges) {
    std::printf("  subgraph cluster_%llu {\n    label=\"ACG %llu\";\n",
                static_cast<unsigned long long>(acg), static_cast<unsigned long long>(acg));
    for (const AcgEdge& e : edges) {
      if (!namer.Live(e)) continue;
      std::printf("    %s -> %s [weight=%llu, label=%llu];\n",
                  DotQuote(namer.Name(e.src)).c_str(), DotQuote(namer.Name(e.dst)).c_str(),
                  static_cast<unsigned long long>(e.weight),
                  static_cast<unsigned long long>(e.weight));
    }
    std::printf("  }\n");
  }
  std::printf("}\n");
  return kExitOk;
}

}  // namespace

int RunAcg(const GlobalOptions& global, const std::vector<std::string>& argv) {
  auto args = Args::Parse(argv, {}, {"--help", "-h", "--json", "--dot"});
  if (!args.ok()) return ReportError(args.status(), /*usage=*/true);
  if (args->Has("--help") || args->Has("-h") || args->positional().empty()) {
    std::fputs(kAcgHelp, args->positional().empty() && !args->Has("--help") && !args->Has("-h")
                             ? stderr
                             : stdout);
    return args->positional().empty() && !args->Has("--help") && !args->Has("-h") ? kExitUsage
                                                                                   : kExitOk;
  }
  const std::string sub = args->positional()[0];
  std::optional<MountRecord> mount;
  GlobalOptions g = global;
  std::string file;
  uint64_t move_acg = 0;
  uint32_t move_to = 0;
  if (sub == "move") {
    auto number = [](const std::string& text, uint64_t max, uint64_t* out) {
      char* end = nullptr;
      errno = 0;
      const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
      if (text.empty() || *end != '\0' || errno != 0 || v == 0 || v > max) return false;
      *out = v;
      return true;
    };
    uint64_t to = 0;
    if (args->positional().size() != 3 || !number(args->positional()[1], UINT64_MAX, &move_acg) ||
        !number(args->positional()[2], UINT32_MAX, &to)) {
      std::fputs("propeller: acg move takes an ACG number and a node id (see --help)\n", stderr);
      return kExitUsage;
    }
    move_to = static_cast<uint32_t>(to);
  } else if (sub == "show") {
    if (args->positional().size() != 2) {
      std::fputs("propeller: acg show takes one FILE (see --help)\n", stderr);
      return kExitUsage;
    }
    char resolved[PATH_MAX];
    file = args->positional()[1];
    if (::realpath(file.c_str(), resolved) == nullptr) {
      return ReportError(Status::IOError("cannot open " + file, errno));
    }
    file = resolved;
    auto found = FindMountFor(file);
    if (!found.ok()) return ReportError(found.status());
    mount = *found;
  } else if (args->positional().size() != 1) {
    std::fprintf(stderr, "propeller: acg %s takes no arguments (see --help)\n", sub.c_str());
    return kExitUsage;
  } else {
    // In a mount (the current directory), its cluster is the one meant.
    char cwd[PATH_MAX];
    if (::getcwd(cwd, sizeof(cwd)) != nullptr) {
      auto found = FindMountFor(cwd);
      if (found.ok() && *found) mount = *found;
    }
  }
  if (mount && g.client.master_endpoint.empty() && std::getenv("PROPELLER_MASTER") == nullptr) {
    g.client.master_endpoint = mount->master_endpoint;
  }
  auto client = ConnectOrReport(g);
  if (!client) return kExitError;
  if (sub == "stats") return Stats(client.get(), args->Has("--json"));
  if (sub == "show") return Show(client.get(), file, mount);
  if (sub == "export") return Export(client.get(), args->Has("--json"), mount);
  if (sub == "move") {
    Result<wire::MigrateAcgReply> moved = client->MoveAcg(move_acg, move_to);
    if (!moved.ok()) return ReportError(moved.status());
    std::printf("ACG %llu moved to node %u: %llu files, %llu bytes copied, %.3f s\n",
                static_cast<unsigned long long>(move_acg), static_cast<unsigned>(move_to),
                static_cast<unsigned long long>(moved->files),
                static_cast<unsigned long long>(moved->bytes),
                static_cast<double>(moved->micros) / 1e6);
    return kExitOk;
  }
  std::fprintf(stderr, "propeller: unknown acg command '%s' (stats, show, export, move)\n",
               sub.c_str());
  return kExitUsage;
}

}  // namespace propeller::cli
