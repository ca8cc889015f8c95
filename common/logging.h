// Minimal leveled logging to stderr for daemons and tools.
//
// One line per call: "2024-05-01T12:00:00.123456Z W message", UTC, microseconds, one letter for
// the level (D, I, W, E). Each line is emitted with a single write(2) so lines from concurrent
// threads never interleave. Messages below the current level are dropped before formatting.
//
// Threading: every function may be called from any thread at any time.
#ifndef PROPELLER_COMMON_LOGGING_H_
#define PROPELLER_COMMON_LOGGING_H_

#include <cstdarg>

namespace propeller {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

// Sets the lowest level that is written; the default is kInfo.
void SetLogLevel(LogLevel level);
// The current lowest level that is written.
LogLevel GetLogLevel();
// True when a message at `level` would be written (to skip building expensive arguments).
bool LogEnabled(LogLevel level);

// Formats `fmt` as printf does and writes it as one line to stderr when `level` is enabled.
// A trailing newline in the message is not doubled. Errors writing stderr are ignored.
void Log(LogLevel level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
// The same with a va_list.
void LogV(LogLevel level, const char* fmt, va_list args) __attribute__((format(printf, 2, 0)));

}  // namespace propeller

#endif  // PROPELLER_COMMON_LOGGING_H_
