#include "common/logging.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <ctime>
#include <string>

namespace propeller {
namespace {

std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};

char LevelLetter(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return 'D';
    case LogLevel::kInfo: return 'I';
    case LogLevel::kWarning: return 'W';
    case LogLevel::kError: return 'E';
  }
  return '?';
}

// Appends "YYYY-MM-DDTHH:MM:SS.uuuuuuZ ".
void AppendTimestamp(std::string* line) {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  tm utc{};
  gmtime_r(&ts.tv_sec, &utc);
  char buf[64];
  const int n = std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ ",
                              utc.tm_year + 1900, utc.tm_mon + 1, utc.tm_mday, utc.tm_hour,
                              utc.tm_min, utc.tm_sec, static_cast<long>(ts.tv_nsec / 1000));
  if (n > 0) line->append(buf, static_cast<size_t>(n) < sizeof(buf) ? n : sizeof(buf) - 1);
}

// One write(2) per line; loops only on a short write or EINTR, so a line can split only when
// stderr is a pipe and the line exceeds PIPE_BUF (4 KiB).
void WriteAll(const std::string& line) {
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(STDERR_FILENO, line.data() + done, line.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    done += static_cast<size_t>(n);
  }
}

}  // namespace

void SetLogLevel(LogLevel level) {
  g_level.store(static_cast<int>(level), std::memory_order_relaxed);
}

LogLevel GetLogLevel() { return static_cast<LogLevel>(g_level.load(std::memory_order_relaxed)); }

bool LogEnabled(LogLevel level) {
  return static_cast<int>(level) >= g_level.load(std::memory_order_relaxed);
}

void LogV(LogLevel level, const char* fmt, va_list args) {
  if (!LogEnabled(level)) return;
  const int saved_errno = errno;  // so callers may log strerror(errno)-style context freely
  std::string line;
  line.reserve(128);
  AppendTimestamp(&line);
  line += LevelLetter(level);
  line += ' ';
  const size_t prefix = line.size();
  char small[256];
  va_list copy;
  va_copy(copy, args);
  const int n = std::vsnprintf(small, sizeof(small), fmt, copy);
  va_end(copy);
  if (n > 0 && static_cast<size_t>(n) < sizeof(small)) {
    line.append(small, static_cast<size_t>(n));
  } else if (n > 0) {
    line.resize(prefix + static_cast<size_t>(n) + 1);
    std::vsnprintf(line.data() + prefix, static_cast<size_t>(n) + 1, fmt, args);
    line.resize(prefix + static_cast<size_t>(n));
  }
  if (line.size() > prefix && line.back() == '\n') line.pop_back();
  line += '\n';
  WriteAll(line);
  errno = saved_errno;
}

void Log(LogLevel level, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  LogV(level, fmt, args);
  va_end(args);
}

}  // namespace propeller
