// Tests for logging.h: line format, level filtering, and whole lines under concurrency. stderr
// is redirected to a temporary file for the duration of each check.
#include "common/logging.h"

#include <gtest/gtest.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace propeller {
namespace {

// Runs `fn` with stderr pointing at a temporary file and returns what was written.
template <typename Fn>
std::string CaptureStderr(Fn fn) {
  char path[] = "/tmp/propeller_log_XXXXXX";
  const int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  fflush(stderr);
  const int saved = dup(STDERR_FILENO);
  dup2(fd, STDERR_FILENO);
  fn();
  dup2(saved, STDERR_FILENO);
  close(saved);
  close(fd);
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  unlink(path);
  return ss.str();
}

// True when `s` starts with "YYYY-MM-DDTHH:MM:SS.uuuuuuZ " followed by `level` and a space.
// (std::regex would do, but GCC 12 warns inside it under -fsanitize=address.)
bool HasPrefix(std::string_view s, char level) {
  constexpr std::string_view kShape = "0000-00-00T00:00:00.000000Z ";
  if (s.size() < kShape.size() + 2) return false;
  for (size_t i = 0; i < kShape.size(); ++i) {
    const bool digit = s[i] >= '0' && s[i] <= '9';
    if (kShape[i] == '0' ? !digit : s[i] != kShape[i]) return false;
  }
  return s[kShape.size()] == level && s[kShape.size() + 1] == ' ';
}
constexpr size_t kPrefixSize = 30;  // timestamp, space, level letter, space

class LoggingTest : public testing::Test {
 protected:
  void TearDown() override { SetLogLevel(LogLevel::kInfo); }
};

TEST_F(LoggingTest, OneLineWithUtcTimestampAndLevel) {
  const std::string out =
      CaptureStderr([] { Log(LogLevel::kWarning, "disk %s at %d%%", "sda", 93); });
  EXPECT_TRUE(HasPrefix(out, 'W')) << out;
  EXPECT_EQ(out.substr(kPrefixSize), "disk sda at 93%\n") << out;
  // The timestamp is now, in UTC.
  char expected_year[16];
  const time_t now = time(nullptr);
  tm utc{};
  gmtime_r(&now, &utc);
  snprintf(expected_year, sizeof(expected_year), "%04d-", utc.tm_year + 1900);
  EXPECT_EQ(out.substr(0, 5), expected_year);
}

TEST_F(LoggingTest, TrailingNewlineIsNotDoubledAndLongMessagesSurvive) {
  const std::string long_text(5000, 'q');
  const std::string out = CaptureStderr([&] {
    Log(LogLevel::kError, "done\n");
    Log(LogLevel::kInfo, "%s", long_text.c_str());
  });
  EXPECT_NE(out.find(" E done\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("done\n\n"), std::string::npos);
  EXPECT_NE(out.find(" I " + long_text + "\n"), std::string::npos);
}

TEST_F(LoggingTest, LevelFilters) {
  EXPECT_EQ(GetLogLevel(), LogLevel::kInfo);
  EXPECT_FALSE(LogEnabled(LogLevel::kDebug));
  SetLogLevel(LogLevel::kWarning);
  EXPECT_FALSE(LogEnabled(LogLevel::kInfo));
  EXPECT_TRUE(LogEnabled(LogLevel::kError));
  const std::string out = CaptureStderr([] {
    Log(LogLevel::kDebug, "debug");
    Log(LogLevel::kInfo, "info");
    Log(LogLevel::kWarning, "warning");
    Log(LogLevel::kError, "error");
  });
  EXPECT_EQ(out.find("debug"), std::string::npos);
  EXPECT_EQ(out.find("info"), std::string::npos);
  EXPECT_NE(out.find(" W warning\n"), std::string::npos);
  EXPECT_NE(out.find(" E error\n"), std::string::npos);
  SetLogLevel(LogLevel::kDebug);
  EXPECT_NE(CaptureStderr([] { Log(LogLevel::kDebug, "dbg"); }).find(" D dbg\n"),
            std::string::npos);
}

TEST_F(LoggingTest, ConcurrentLinesDoNotInterleave) {
  const std::string out = CaptureStderr([] {
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([t] {
        const std::string payload(100, static_cast<char>('a' + t));
        for (int i = 0; i < 200; ++i) Log(LogLevel::kInfo, "thread-%d-%s", t, payload.c_str());
      });
    }
    for (std::thread& th : threads) th.join();
  });
  std::istringstream lines(out);
  std::string line;
  int count = 0;
  while (std::getline(lines, line)) {
    ASSERT_TRUE(HasPrefix(line, 'I')) << line;
    const std::string body = line.substr(kPrefixSize);
    ASSERT_EQ(body.size(), 9u + 100u) << line;
    ASSERT_EQ(body.substr(0, 7), "thread-") << line;
    const int t = body[7] - '0';
    ASSERT_TRUE(t >= 0 && t < 4) << line;
    ASSERT_EQ(body.substr(9), std::string(100, static_cast<char>('a' + t))) << line;
    ++count;
  }
  EXPECT_EQ(count, 800);
}

}  // namespace
}  // namespace propeller
