// propeller volume list|remove: the directory trees the index holds (docs/reconcile.md).
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "client/cli/args.h"
#include "client/cli/commands.h"
#include "client/lib/mount_registry.h"

namespace propeller::cli {
namespace {

constexpr const char* kVolumeHelp = R"(usage: propeller volume list [--json]
       propeller volume remove ROOT|ID

A volume is a directory tree the index holds: registered by `propeller import DIR` or by the
first `propeller mount` of a backing directory. Volumes never overlap.
  list            every volume: its id and root directory
  remove          deletes every record of the volume from the index, then forgets it (the
                  files themselves are not touched). Refused while the volume is mounted:
                  unmount it first. Importing the directory again makes a new volume.
Options:
  --json          one JSON object per volume
Only root (or the service's user) may remove a volume.
)";

}  // namespace

int RunVolume(const GlobalOptions& global, const std::vector<std::string>& argv) {
  auto args = Args::Parse(argv, {}, {"--help", "-h", "--json"});
  if (!args.ok()) return ReportError(args.status(), /*usage=*/true);
  if (args->Has("--help") || args->Has("-h")) {
    std::fputs(kVolumeHelp, stdout);
    return kExitOk;
  }
  const std::vector<std::string>& pos = args->positional();
  const bool list = pos.size() == 1 && pos[0] == "list";
  const bool remove = pos.size() == 2 && pos[0] == "remove";
  if (!list && !remove) {
    std::fputs("propeller: volume takes `list` or `remove ROOT|ID` (see --help)\n", stderr);
    return kExitUsage;
  }
  auto client = ConnectOrReport(global);
  if (!client) return kExitError;
  auto volumes = client->ListVolumes();
  if (!volumes.ok()) return ReportError(volumes.status());
  if (list) {
    for (const wire::VolumeInfo& v : *volumes) {
      if (args->Has("--json")) {
        std::printf("{\"volume\":%u,\"root\":%s}\n", v.volume, JsonString(v.root).c_str());
      } else {
        std::printf("%u\t%s\n", v.volume, v.root.c_str());
      }
    }
    return kExitOk;
  }
  // ROOT or ID.
  const std::string& which = pos[1];
  const wire::VolumeInfo* target = nullptr;
  char* end = nullptr;
  errno = 0;
  const unsigned long id = std::strtoul(which.c_str(), &end, 10);
  const bool numeric = !which.empty() && *end == '\0' && errno == 0;
  for (const wire::VolumeInfo& v : *volumes) {
    if ((numeric && v.volume == id) || v.root == which) target = &v;
  }
  if (target == nullptr) {
    return ReportError(Status::NotFound("no volume " + which +
                                        " (`propeller volume list` shows them)"));
  }
  for (const MountRecord& m : ListMounts()) {
    if (m.backing == target->root) {
      return ReportError(Status::InvalidArgument(
          "volume " + std::to_string(target->volume) + " (" + target->root +
          ") is mounted at " + m.mountpoint + " (pid " + std::to_string(m.pid) +
          "): unmount it first"));
    }
  }
  uint64_t removed = 0;
  if (Status s = client->RemoveVolume(target->volume, target->root, &removed); !s.ok()) {
    return ReportError(s.WithContext("removing volume " + std::to_string(target->volume)));
  }
  std::printf("removed volume %u (%s): %llu records deleted\n", target->volume,
              target->root.c_str(), static_cast<unsigned long long>(removed));
  return kExitOk;
}

}  // namespace propeller::cli
