// propeller index create|list|drop, propeller attr set|get|rm, propeller status.
#include <sys/xattr.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "client/cli/args.h"
#include "client/cli/commands.h"
#include "client/lib/mount_registry.h"
#include "common/record.h"
#include "common/rpc/rpc.h"
#include "common/tree_walk.h"
#include "schemas/wire_call.h"

namespace propeller::cli {
namespace {

constexpr const char* kIndexHelp = R"(usage: propeller index create NAME [--type btree|hash]
       propeller index list [--json]
       propeller index drop NAME

User-defined indexes are fed by the user attribute of the same name, set with
`propeller attr set` or as a user.NAME extended attribute (read by `propeller import`):
  propeller index create project --type hash
  propeller attr set /data/run42/a.parquet project alpha
  propeller search 'project=alpha'
Types: btree (ranges, prefixes; the default), hash (equality). See docs/query.md.
)";

constexpr const char* kAttrHelp =
    R"(usage: propeller attr set PATH NAME VALUE [--index-only [--string]]
       propeller attr get PATH [NAME] [--json]
       propeller attr rm PATH NAME [--index-only]

Sets, shows or removes a user attribute of an indexed file. `set` writes VALUE to the file's
user.NAME extended attribute, as you (the kernel decides whether you may), and to the index;
`rm` removes both. The file then carries its attributes: a mount, an import or a reconcile
that reads the file again keeps them. VALUE is stored as an integer or a floating-point number
when it reads as one, else as a string.

  --index-only  change the index alone, for a file system without user.* attributes or one
                you may not write (read-only exports). The next re-read of the file (a change
                through a mount, an import) replaces the index's attributes with the file's.
  --string      with --index-only: store VALUE as a string even when it reads as a number
)";

constexpr const char* kStatusHelp = R"(usage: propeller status [--json]

Shows the Propeller mounts of this host and their queues of index updates not delivered yet
(docs/faults.md), then the master, every index node (up or down, partitions, files, cached
updates, disk, failing commits), the volumes and the user-defined indexes. Without --master,
the cluster shown is the default one, else that of a mount of this host.
)";

// A mount of this host and its queue of index updates (kMountStatus of its query engine).
struct MountQueue {
  MountRecord mount;
  Result<wire::MountStatusReply> status = Status::Unavailable("not asked");
};

std::vector<MountQueue> MountQueues() {
  std::vector<MountQueue> out;
  for (MountRecord& m : ListMounts()) {
    MountQueue q;
    q.mount = std::move(m);
    rpc::ChannelOptions co;
    co.endpoint = q.mount.engine_endpoint;
    auto channel = rpc::Channel::Connect(co);
    if (channel.ok()) {
      wire::MountStatusReply rep;
      rpc::CallOptions call;
      call.timeout_ms = 2000;
      Status st = wire::WireCall(**channel, wire::MsgType::kMountStatus, wire::Empty{}, &rep, call);
      q.status = st.ok() ? Result<wire::MountStatusReply>(rep) : Result<wire::MountStatusReply>(st);
    } else {
      q.status = channel.status();
    }
    out.push_back(std::move(q));
  }
  return out;
}

void PrintMountQueues(const std::vector<MountQueue>& mounts) {
  if (mounts.empty()) return;
  std::printf("mounts   %zu\n", mounts.size());
  for (const MountQueue& q : mounts) {
    std::printf("  %s (of %s, pid %u): ", q.mount.mountpoint.c_str(), q.mount.backing.c_str(),
                q.mount.pid);
    if (!q.status.ok()) {
      std::printf("(%s)\n", q.status.status().ToString().c_str());
      continue;
    }
    const wire::MountStatusReply& r = *q.status;
    if (r.pending == 0 && r.degraded_since_ns == 0) {
      std::printf("index current");
    } else {
      std::printf("%" PRIu64 " index updates pending since %s: %s", r.pending,
                  FormatTime(r.degraded_since_ns).c_str(), r.last_error.c_str());
    }
    std::printf(" (%" PRIu64 " sent, %" PRIu64 " through the queue", r.sent, r.queued);
    if (r.refused != 0) std::printf(", %" PRIu64 " refused by the index", r.refused);
    if (r.errors != 0) std::printf(", %" PRIu64 " calls failed", r.errors);
    if (r.admit_refusals != 0) {
      std::printf(", %" PRIu64 " changes refused for a full queue", r.admit_refusals);
    }
    std::printf(")\n");
  }
}

std::string MountQueuesJson(const std::vector<MountQueue>& mounts) {
  std::string out = "[";
  for (size_t i = 0; i < mounts.size(); ++i) {
    const MountQueue& q = mounts[i];
    out += (i ? "," : "") + std::string("{\"mountpoint\":") + JsonString(q.mount.mountpoint) +
           ",\"backing\":" + JsonString(q.mount.backing) +
           ",\"pid\":" + std::to_string(q.mount.pid);
    if (q.status.ok()) {
      const wire::MountStatusReply& r = *q.status;
      out += ",\"pending\":" + std::to_string(r.pending) +
             ",\"degraded_since_ns\":" + std::to_string(r.degraded_since_ns) +
             ",\"last_error\":" + JsonString(r.last_error) +
             ",\"sent\":" + std::to_string(r.sent) + ",\"queued\":" + std::to_string(r.queued) +
             ",\"delivered\":" + std::to_string(r.delivered) +
             ",\"refused\":" + std::to_string(r.refused) +
             ",\"errors\":" + std::to_string(r.errors) +
             ",\"admit_refusals\":" + std::to_string(r.admit_refusals);
    } else {
      out += ",\"error\":" + JsonString(q.status.status().ToString());
    }
    out += "}";
  }
  return out + "]";
}

bool WantsHelp(const std::vector<std::string>& argv) {
  for (const std::string& a : argv) {
    if (a == "--help" || a == "-h") return true;
  }
  return false;
}

// Sets (value != nullptr) or removes the file's `user.NAME` extended attribute, as the caller.
Status WriteUserXattr(const std::string& path, const std::string& name, const std::string* value) {
  const std::string key = "user." + name;
  const int rc = value != nullptr
                     ? ::lsetxattr(path.c_str(), key.c_str(), value->data(), value->size(), 0)
                     : ::lremovexattr(path.c_str(), key.c_str());
  if (rc == 0 || (value == nullptr && errno == ENODATA)) return Status::OK();
  const int err = errno;
  const std::string what = (value != nullptr ? "setting " : "removing ") + key + " of " + path;
  if (err == EACCES || err == EPERM) {
    return Status::PermissionDenied(what + ": " + std::strerror(err) +
                                    " (you may not change this file's user.* attributes)");
  }
  if (err == ENOTSUP || err == EROFS) {
    return Status::NotSupported(what + ": " + std::strerror(err) +
                                " (--index-only changes the index alone)");
  }
  return Status::IOError(what, err);
}

std::string ValueText(const AttrValue& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  if (const auto* d = std::get_if<double>(&v)) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.17g", *d);
    return buf;
  }
  return std::get<std::string>(v);
}

}  // namespace

int RunIndex(const GlobalOptions& global, const std::vector<std::string>& argv) {
  if (WantsHelp(argv) || argv.empty()) {
    std::fputs(kIndexHelp, argv.empty() ? stderr : stdout);
    return argv.empty() ? kExitUsage : kExitOk;
  }
  auto args = Args::Parse(argv, {"--type"}, {"--json"});
  if (!args.ok()) return ReportError(args.status(), /*usage=*/true);
  const auto& pos = args->positional();
  if (pos.empty()) {  // only options (`index --json`)
    std::fputs("propeller: index needs a command: create, list or drop (see --help)\n", stderr);
    return kExitUsage;
  }
  const std::string& verb = pos[0];
  if ((verb == "create" || verb == "drop") && pos.size() != 2) {
    std::fprintf(stderr, "propeller: index %s takes one NAME (see --help)\n", verb.c_str());
    return kExitUsage;
  }
  if (verb != "create" && verb != "drop" && verb != "list") {
    std::fprintf(stderr, "propeller: unknown index command '%s' (create, list, drop)\n",
                 verb.c_str());
    return kExitUsage;
  }
  IndexType type = IndexType::kBTree;
  if (auto t = args->Get("--type")) {
    auto parsed = ParseIndexType(*t);
    if (!parsed.ok()) return ReportError(parsed.status(), /*usage=*/true);
    type = *parsed;
  }
  auto client = ConnectOrReport(global);
  if (!client) return kExitError;
  if (verb == "create") {
    Status st = client->CreateIndex(pos[1], type);
    if (!st.ok()) return ReportError(st);
    std::printf("created %s index '%s'\n", IndexTypeName(type), pos[1].c_str());
  } else if (verb == "drop") {
    Status st = client->DropIndex(pos[1]);
    if (!st.ok()) return ReportError(st);
    std::printf("dropped index '%s'\n", pos[1].c_str());
  } else {
    auto list = client->ListIndexes();
    if (!list.ok()) return ReportError(list.status());
    for (const wire::IndexDef& d : *list) {
      if (args->Has("--json")) {
        std::printf("{\"name\":%s,\"type\":\"%s\"}\n", JsonString(d.name).c_str(),
                    IndexTypeName(d.type));
      } else {
        std::printf("%-32s %s\n", d.name.c_str(), IndexTypeName(d.type));
      }
    }
  }
  return kExitOk;
}

int RunAttr(const GlobalOptions& global, const std::vector<std::string>& argv) {
  if (WantsHelp(argv) || argv.empty()) {
    std::fputs(kAttrHelp, argv.empty() ? stderr : stdout);
    return argv.empty() ? kExitUsage : kExitOk;
  }
  auto args = Args::Parse(argv, {}, {"--string", "--json", "--index-only"});
  if (!args.ok()) return ReportError(args.status(), /*usage=*/true);
  const bool index_only = args->Has("--index-only");
  if (args->Has("--string") && !index_only) {
    std::fputs("propeller: --string needs --index-only: a file's user.* attribute is text, typed "
               "by its form when read (see --help)\n", stderr);
    return kExitUsage;
  }
  const auto& pos = args->positional();
  if (pos.empty()) {  // only options (`attr --json`)
    std::fputs("propeller: attr needs a command: set, get or rm (see --help)\n", stderr);
    return kExitUsage;
  }
  const std::string& verb = pos[0];
  const size_t want = verb == "set" ? 4 : verb == "rm" ? 3 : 0;
  if ((want != 0 && pos.size() != want) || (verb == "get" && (pos.size() < 2 || pos.size() > 3))) {
    std::fprintf(stderr, "propeller: wrong arguments for attr %s (see --help)\n", verb.c_str());
    return kExitUsage;
  }
  if (verb != "set" && verb != "get" && verb != "rm") {
    std::fprintf(stderr, "propeller: unknown attr command '%s' (set, get, rm)\n", verb.c_str());
    return kExitUsage;
  }
  if (verb != "get") {
    if (std::string why = CheckUserAttrName(pos[2]); !why.empty()) {
      return ReportError(Status::InvalidArgument("attribute name '" + pos[2] + "': " + why));
    }
  }
  // A file seen through a Propeller mount: the mount indexes what is done to the file, so
  // setting or removing its user.* attribute there is the whole change, and reading goes
  // through the mount's query engine, as a search scoped to the file does.
  const std::string path = ScopeArgument(pos[1]);
  std::optional<MountRecord> mount;
  if (Result<std::optional<MountRecord>> found = FindMountFor(path); found.ok()) {
    mount = *found;
  }
  if (mount && index_only) {
    std::fprintf(stderr, "propeller: --index-only is for volumes that are not mounted: %s is in "
                 "the mount at %s, which re-reads the file's attributes at every change\n",
                 path.c_str(), mount->mountpoint.c_str());
    return kExitUsage;
  }
  if (mount && verb != "get") {
    Status st = WriteUserXattr(path, pos[2], verb == "set" ? &pos[3] : nullptr);
    return st.ok() ? kExitOk : ReportError(st);
  }
  auto client = ConnectOrReport(global);
  if (!client) return kExitError;
  std::optional<FileRecord> found;
  if (mount) {
    ClientSearchOptions so;
    so.scope = path;
    Status st = client->Search("size>=0", so, [&](const ClientHit& hit) {
      if (hit.path != path) return true;  // a file below a directory named
      found = hit.record;
      return false;
    });
    if (!st.ok()) return ReportError(st);
    if (!found) return ReportError(Status::NotFound(path + " is not in the index"));
  }
  if (!found) {
    auto id = client->FileIdOf(pos[1]);
    if (!id.ok()) return ReportError(id.status());
    if (verb == "set" || verb == "rm") {
      // The file first: it is where the attribute lives, and where an import or a reconcile
      // reads it again. Then the index.
      if (!index_only) {
        Status st = WriteUserXattr(pos[1], pos[2], verb == "set" ? &pos[3] : nullptr);
        if (!st.ok()) return ReportError(st);
      }
      Status st = verb == "set"
                      ? client->SetAttr(*id, pos[2], args->Has("--string")
                                                         ? AttrValue(pos[3])
                                                         : ParseAttrValue(pos[3]))
                      : client->RemoveAttr(*id, pos[2]);
      return st.ok() ? kExitOk : ReportError(st);
    }
    auto record = client->Get(*id);
    if (!record.ok()) return ReportError(record.status());
    found = std::move(*record);
  }
  const FileRecord& record = *found;
  if (args->Has("--json")) {
    std::printf("%s\n", RecordJson(pos[1], record).c_str());
    return kExitOk;
  }
  for (const auto& [name, value] : record.attrs) {
    if (pos.size() == 3 && name != pos[2]) continue;
    std::printf(pos.size() == 3 ? "%s%s\n" : "%s=%s\n", pos.size() == 3 ? "" : name.c_str(),
                ValueText(value).c_str());
  }
  if (pos.size() == 3 && record.attrs.count(pos[2]) == 0) {
    return ReportError(Status::NotFound(pos[1] + " has no attribute '" + pos[2] + "'"));
  }
  return kExitOk;
}

int RunStatus(const GlobalOptions& global, const std::vector<std::string>& argv) {
  if (WantsHelp(argv)) {
    std::fputs(kStatusHelp, stdout);
    return kExitOk;
  }
  auto args = Args::Parse(argv, {}, {"--json"});
  if (!args.ok()) return ReportError(args.status(), /*usage=*/true);
  const std::vector<MountQueue> mounts = MountQueues();
  auto client = ConnectOrReport(global);
  if (!client) return kExitError;
  auto status = client->GetStatus();
  const bool named = !global.client.master_endpoint.empty() || std::getenv("PROPELLER_MASTER");
  if (!status.ok() && !named && !mounts.empty()) {
    // No default cluster here: that of a mount (an embedded mount's own master).
    ClientOptions o = global.client;
    o.master_endpoint = mounts.front().mount.master_endpoint;
    auto other = Client::Connect(o);
    if (other.ok()) {
      auto retry = (*other)->GetStatus();
      if (retry.ok()) status = std::move(retry);
    }
  }
  if (!status.ok()) {
    if (!args->Has("--json")) PrintMountQueues(mounts);
    return ReportError(status.status());
  }
  const ClusterStatus& s = *status;
  if (args->Has("--json")) {
    std::string out = "{\"mounts\":" + MountQueuesJson(mounts) +
                      ",\"master\":" + JsonString(s.master_endpoint) +
                      ",\"acgs\":" + std::to_string(s.acgs) +
                      ",\"files\":" + std::to_string(s.files) + ",\"nodes\":[";
    for (size_t i = 0; i < s.nodes.size(); ++i) {
      const NodeStatus& n = s.nodes[i];
      out += (i ? "," : "") + std::string("{\"id\":") + std::to_string(n.info.node_id) +
             ",\"endpoint\":" + JsonString(n.info.endpoint) +
             ",\"up\":" + (n.info.up ? "true" : "false") +
             ",\"acgs\":" + std::to_string(n.info.acgs) +
             ",\"files\":" + std::to_string(n.info.files);
      if (n.node) {
        out += ",\"cached_updates\":" + std::to_string(n.node->cached_updates) +
               ",\"disk_bytes\":" + std::to_string(n.node->disk_bytes) +
               ",\"wal_bytes\":" + std::to_string(n.node->wal_bytes) +
               ",\"commit_error\":" + JsonString(n.node->commit_error) + ",\"damaged\":[";
        for (size_t d = 0; d < n.node->damaged_acgs.size(); ++d) {
          out += (d ? "," : "") + JsonString(n.node->damaged_acgs[d]);
        }
        out += "]";
      } else {
        out += ",\"error\":" + JsonString(n.error);
      }
      out += "}";
    }
    out += "],\"volumes\":[";
    for (size_t i = 0; i < s.volumes.size(); ++i) {
      out += (i ? "," : "") + std::string("{\"id\":") + std::to_string(s.volumes[i].volume) +
             ",\"root\":" + JsonString(s.volumes[i].root) + "}";
    }
    out += "],\"indexes\":[";
    for (size_t i = 0; i < s.indexes.size(); ++i) {
      out += (i ? "," : "") + std::string("{\"name\":") + JsonString(s.indexes[i].name) +
             ",\"type\":\"" + IndexTypeName(s.indexes[i].type) + "\"}";
    }
    std::printf("%s]}\n", out.c_str());
    return kExitOk;
  }
  PrintMountQueues(mounts);
  std::printf("master   %s\n", s.master_endpoint.c_str());
  std::printf("files    %" PRIu64 " in %s (ACGs)\n", s.files, Counted(s.acgs, "partition").c_str());
  std::printf("nodes    %zu\n", s.nodes.size());
  for (const NodeStatus& n : s.nodes) {
    std::printf("  node %-4u %-28s %-5s %6" PRIu64 " ACGs %10" PRIu64 " files",
                n.info.node_id, n.info.endpoint.c_str(), n.info.up ? "up" : "DOWN", n.info.acgs,
                n.info.files);
    if (n.node) {
      std::printf("  %" PRIu64 " cached updates, %.1f MB on disk\n", n.node->cached_updates,
                  static_cast<double>(n.node->disk_bytes) / 1e6);
      for (const std::string& d : n.node->damaged_acgs) {
        std::printf("    DAMAGED, searches that need it fail until it is rebuilt: %s\n",
                    d.c_str());
      }
      if (!n.node->commit_error.empty()) {
        std::printf("    commits failing since %s: %s (updates wait in the log)\n",
                    FormatTime(n.node->failing_since_ns).c_str(), n.node->commit_error.c_str());
      }
    } else {
      std::printf("  (%s)\n", n.error.c_str());
    }
  }
  std::printf("volumes  %zu\n", s.volumes.size());
  for (const wire::VolumeInfo& v : s.volumes) std::printf("  %-4u %s\n", v.volume, v.root.c_str());
  std::printf("indexes  %zu user-defined (built in: inode, path, keyword)\n", s.indexes.size());
  for (const wire::IndexDef& d : s.indexes) {
    std::printf("  %-32s %s\n", d.name.c_str(), IndexTypeName(d.type));
  }
  return kExitOk;
}

}  // namespace propeller::cli
