// propeller config check FILE [--for master|indexnode|mount]: checks a configuration file with
// the very parser the program it is for runs at start (master_flags.h, indexnode_flags.h,
// mount_options.h), so a file this accepts is one the program accepts.
#include <cstdio>
#include <string>
#include <vector>

#include "client/cli/args.h"
#include "client/cli/commands.h"
#include "client/cli/mount_options.h"
#include "indexnode/server/indexnode_flags.h"
#include "master/master_flags.h"

namespace propeller::cli {
namespace {

constexpr const char* kConfigHelp = R"(usage: propeller config check FILE [--for master|indexnode|mount]

Checks the configuration file of propeller-master, propeller-indexnode or a mount
(/etc/propeller/*.toml; docs/install.md, "Configuration files") exactly as the program reads it
at start: TOML syntax, known keys, value types, values and their combinations (--data given,
--curve-key with --allow, ...). It does not open data directories, key files or the network,
which the program checks when it starts.

  --for PROGRAM   master, indexnode or mount (default: from the file's name, which starts
                  with master, indexnode or mount, as /etc/propeller/indexnode-a.toml)

Exit status: 0 the file is valid, 1 it is not (each error as FILE:LINE: what), or it cannot be
read, 2 a usage error.

Example:
  propeller config check /etc/propeller/master.toml
)";

// "master", "indexnode" or "mount" from the file's base name, or "".
std::string ProgramOf(const std::string& path) {
  const std::string base = path.substr(path.find_last_of('/') + 1);
  for (const char* p : {"master", "indexnode", "mount"}) {
    if (base.rfind(p, 0) == 0) return p;
  }
  return "";
}

}  // namespace

int RunConfig(const GlobalOptions& /*global*/, const std::vector<std::string>& argv) {
  auto args = Args::Parse(argv, {"--for"}, {"--help", "-h"});
  if (!args.ok()) return ReportError(args.status(), /*usage=*/true);
  if (args->Has("--help") || args->Has("-h")) {
    std::fputs(kConfigHelp, stdout);
    return kExitOk;
  }
  const auto& pos = args->positional();
  if (pos.size() != 2 || pos[0] != "check") {
    std::fputs("propeller: config takes check FILE (see propeller config --help)\n", stderr);
    return kExitUsage;
  }
  const std::string& file = pos[1];
  const std::string program = args->GetOr("--for", ProgramOf(file));
  if (program.empty()) {
    std::fprintf(stderr,
                 "propeller: cannot tell from its name which program %s is for: add --for "
                 "master, --for indexnode or --for mount\n",
                 file.c_str());
    return kExitUsage;
  }
  const std::vector<std::string> config = {"--config", file};
  Status st;
  size_t options = 0;
  if (program == "master") {
    auto flags = master::ParseMasterFlags(config, /*default_config=*/"");
    st = flags.status();
    if (flags.ok()) options = flags->values.size();
  } else if (program == "indexnode") {
    auto flags = ParseIndexNodeFlags(config, /*default_config=*/"");
    st = flags.status();
    if (flags.ok()) options = flags->values.size();
  } else if (program == "mount") {
    auto flags = ParseMountFlags(ClientOptions(), {}, config);
    st = flags.status();
    if (flags.ok()) options = flags->values.size();
  } else {
    std::fprintf(stderr, "propeller: --for takes master, indexnode or mount, not '%s'\n",
                 program.c_str());
    return kExitUsage;
  }
  if (!st.ok()) {
    std::fprintf(stderr, "propeller: %s\n", st.message().c_str());
    return kExitError;
  }
  std::printf("%s: a valid configuration of %s (%s)\n", file.c_str(),
              program == "mount" ? "propeller mount" : ("propeller-" + program).c_str(),
              Counted(options, "option").c_str());
  return kExitOk;
}

}  // namespace propeller::cli
