// propeller find [PATH...] [EXPRESSION]: GNU find's expressions, answered from the index.
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>

#include "client/cli/args.h"
#include "client/cli/commands.h"
#include "client/cli/find_expr.h"
#include "client/lib/mount_registry.h"

namespace propeller::cli {
namespace {

constexpr const char* kFindHelp = R"(usage: propeller find [PATH...] [EXPRESSION]

Answers GNU find's expressions from the index instead of walking the tree: the same lines as
`find PATH... EXPRESSION` would print (in path order), for the files you could find yourself.
Each PATH (default .) must lie in an indexed volume or a Propeller mount.
  propeller find /srv/data -name '*.parquet' -size +100M -mtime -7
  propeller find . -type f -user alice -newer stamp -printf '%s %p\n'
  propeller find /home \( -iname '*.jpg' -o -iname '*.png' \) -print0 | xargs -0 du -c

Tests:    -name -iname -path -ipath -wholename -iwholename -regex -iregex -type
          -size -empty -mtime -mmin -atime -amin -ctime -cmin -newer -anewer -cnewer
          -user -group -uid -gid -nouser -nogroup -perm (octal, -MODE, /MODE) -links
          -inum -true -false
Options:  -maxdepth N -mindepth N -regextype TYPE
Operators: ( EXPR ) ! -not -a -and -o -or ,
Actions:  -print -print0 -printf FORMAT -quit (no action: -print)
-printf directives: %p %f %h %s %m %u %g %U %G %n %y %t %T@ %% and \n \t \0 \\.
Not answered from the index, and refused: -ls (disk blocks are not indexed), -exec,
-delete, -prune, symbolic -perm modes, -type of devices whose kind the index lost.
Exit status: 0, 1 when a PATH could not be searched or the expression is wrong.
)";

// The absolute form of `path` with its directories resolved (symlinks, ".", ".."), its last
// component kept as written unless it is "." or ".." — as the index names files.
std::string IndexPathOf(const std::string& path) {
  std::string abs = path;
  if (abs.empty() || abs[0] != '/') {
    char cwd[PATH_MAX];
    if (::getcwd(cwd, sizeof(cwd)) != nullptr) abs = std::string(cwd) + "/" + path;
  }
  while (abs.size() > 1 && abs.back() == '/') abs.pop_back();
  const size_t slash = abs.rfind('/');
  const std::string last = abs.substr(slash + 1);
  char resolved[PATH_MAX];
  if (last.empty() || last == "." || last == "..") {
    return ::realpath(abs.c_str(), resolved) != nullptr ? resolved : abs;
  }
  const std::string dir = slash == 0 ? "/" : abs.substr(0, slash);
  if (::realpath(dir.c_str(), resolved) == nullptr) return abs;
  const std::string parent = resolved;
  return parent == "/" ? "/" + last : parent + "/" + last;
}

struct Found {
  std::string printed;
  std::string indexed;  // the path in the index (absolute)
  int depth = 0;
  FileRecord record;
};

}  // namespace

int RunFind(const GlobalOptions& global, const std::vector<std::string>& argv) {
  for (const std::string& a : argv) {
    if (a == "--help" || a == "-help") {
      std::fputs(kFindHelp, stdout);
      return kExitOk;
    }
  }
  const FileTime now = static_cast<FileTime>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::chrono::system_clock::now().time_since_epoch()).count());
  auto stat_reference = [](const std::string& file) -> Result<FileTime> {
    struct stat st;
    if (::lstat(file.c_str(), &st) != 0) {
      return Status::InvalidArgument("`" + file + "': " + std::strerror(errno));
    }
    return FileTimeOf(st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
  };
  Result<FindProgram> prog = FindProgram::Parse(argv, now, stat_reference);
  if (!prog.ok()) {
    std::fprintf(stderr, "propeller find: %s\n", prog.status().message().c_str());
    return kExitError;
  }
  // One client per service: a PATH inside a Propeller mount is answered by the service that
  // mount uses (unless --master names one), under the backing path the index knows.
  std::map<std::string, std::unique_ptr<Client>> clients;
  auto client_for = [&](const std::string& master) -> Client* {
    auto it = clients.find(master);
    if (it != clients.end()) return it->second.get();
    GlobalOptions g = global;
    if (!master.empty()) g.client.master_endpoint = master;
    std::unique_ptr<Client> c = ConnectOrReport(g);
    Client* raw = c.get();
    if (c) clients.emplace(master, std::move(c));
    return raw;
  };

  int status = kExitOk;
  std::string out;
  bool go_on = true;
  for (const std::string& start : prog->start_paths()) {
    if (!go_on) break;
    std::string indexed = IndexPathOf(start);
    std::string master;  // "" = the global choice
    if (Result<std::optional<MountRecord>> mount = FindMountFor(indexed);
        mount.ok() && *mount) {
      const MountRecord& m = **mount;
      const std::string rest = indexed.substr(m.mountpoint == "/" ? 0 : m.mountpoint.size());
      indexed = m.backing == "/" ? (rest.empty() ? "/" : rest) : m.backing + rest;
      if (global.client.master_endpoint.empty()) master = m.master_endpoint;
    }
    Client* client = client_for(master);
    if (client == nullptr) return kExitError;
    // The start point itself, by its own record (its name in the index need not be the one
    // written: "." or a volume's root).
    Result<FileId> id = client->FileIdOf(indexed);
    Result<FileRecord> self = id.ok() ? client->Get(*id) : Result<FileRecord>(id.status());
    if (!self.ok()) {
      std::fprintf(stderr, "propeller find: `%s': %s\n", start.c_str(),
                   self.status().message().c_str());
      status = kExitError;
      continue;
    }
    std::vector<Found> found;
    std::set<std::string> parents;  // directories with an entry, when -empty asks
    found.push_back(Found{start, indexed, 0, std::move(*self)});
    const bool dir = found[0].record.type == FileType::kDirectory;
    // (-empty must see a directory's entries even where -maxdepth stops the output.)
    if (dir && (prog->max_depth() != 0 || prog->needs_children())) {
      std::string base = start;
      while (base.size() > 1 && base.back() == '/') base.pop_back();
      if (base == "/") base.clear();
      ClientSearchOptions so;
      so.scope = indexed;
      so.now_ns = static_cast<int64_t>(now);
      Status st = client->Search(prog->Prefilter(), so, [&](const ClientHit& hit) {
        if (hit.path.size() <= indexed.size() ||
            hit.path.compare(0, indexed.size(), indexed) != 0 ||
            (indexed != "/" && hit.path[indexed.size()] != '/')) {
          return true;  // the start itself (read above)
        }
        if (prog->needs_children()) {
          const size_t slash = hit.path.rfind('/');
          parents.insert(slash == 0 ? "/" : hit.path.substr(0, slash));
        }
        const std::string rel = indexed == "/" ? hit.path : hit.path.substr(indexed.size());
        const int depth = static_cast<int>(std::count(rel.begin(), rel.end(), '/'));
        if (prog->max_depth() >= 0 && depth > prog->max_depth()) return true;
        found.push_back(Found{base + rel, hit.path, depth, hit.record});
        return true;
      });
      if (!st.ok()) {
        std::fprintf(stderr, "propeller find: `%s': %s\n", start.c_str(), st.message().c_str());
        status = kExitError;
        continue;
      }
    }
    std::sort(found.begin() + 1, found.end(),
              [](const Found& a, const Found& b) { return a.printed < b.printed; });
    for (const Found& f : found) {
      FindFile file;
      file.path = f.printed;
      file.depth = f.depth;
      file.record = &f.record;
      file.empty_dir = f.record.type == FileType::kDirectory && parents.count(f.indexed) == 0;
      out.clear();
      go_on = prog->Run(file, &out);
      std::fwrite(out.data(), 1, out.size(), stdout);
      if (!go_on || std::ferror(stdout)) break;
    }
  }
  std::fflush(stdout);
  return status;
}

}  // namespace propeller::cli
