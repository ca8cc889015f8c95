// ReadProcStatus: this process's memory figures from /proc/self/status, for the benchmarks
// that report resident memory (memory_report, engine_bench). Any thread may call it.
#ifndef PROPELLER_BENCH_PROC_STATUS_H_
#define PROPELLER_BENCH_PROC_STATUS_H_

#include <cstdint>
#include <map>
#include <string>

namespace propeller::bench {

// VmRSS, RssAnon, RssFile and VmHWM in bytes (keys as in the file); a key the kernel does not
// report is absent.
std::map<std::string, uint64_t> ReadProcStatus();

}  // namespace propeller::bench

#endif  // PROPELLER_BENCH_PROC_STATUS_H_
