// write_seeds DIR: writes the seed corpus of every fuzz target as DIR/<target>/seed-<n>
// (scripts/fuzz.sh runs it before fuzzing). Exit code 0 on success, 1 on an I/O error,
// 2 on a usage error.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

#include "schemas/fuzz/fuzz_targets.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\nwrites DIR/<target>/seed-<n> for each fuzz target\n",
                 argv[0]);
    return 2;
  }
  namespace fs = std::filesystem;
  for (propeller::fuzz::Target target : propeller::fuzz::kAllTargets) {
    const fs::path dir = fs::path(argv[1]) / propeller::fuzz::TargetName(target);
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) {
      std::fprintf(stderr, "write_seeds: cannot create %s: %s\n", dir.c_str(),
                   ec.message().c_str());
      return 1;
    }
    int n = 0;
    for (const std::string& seed : propeller::fuzz::Seeds(target)) {
      const fs::path file = dir / ("seed-" + std::to_string(n++));
      std::ofstream out(file, std::ios::binary | std::ios::trunc);
      out.write(seed.data(), static_cast<std::streamsize>(seed.size()));
      if (!out.good()) {
        std::fprintf(stderr, "write_seeds: cannot write %s\n", file.c_str());
        return 1;
      }
    }
  }
  return 0;
}
