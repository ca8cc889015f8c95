#include "bench/proc_status.h"

#include <cstdlib>
#include <fstream>

namespace propeller::bench {

std::map<std::string, uint64_t> ReadProcStatus() {
  std::map<std::string, uint64_t> out;
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    for (const char* key : {"VmRSS", "RssAnon", "RssFile", "VmHWM"}) {
      const std::string prefix = std::string(key) + ":";
      if (line.starts_with(prefix)) {  // "<key>:   <n> kB"
        out[key] = std::strtoull(line.c_str() + prefix.size(), nullptr, 10) * 1024;
      }
    }
  }
  return out;
}

}  // namespace propeller::bench
