// The option tables' command-line and configuration-file parsing (options.h, config_file.h),
// on a table of its own; the daemons' real tables are tested in tests/config_test.cc.
#include "common/daemon/config_file.h"

#include <gtest/gtest.h>

#include <fstream>

#include "common/daemon/options.h"
#include "common/temp_dir.h"

namespace propeller::daemon {
namespace {

const std::vector<OptionSpec>& Specs() {
  static const std::vector<OptionSpec> specs = {
      {.name = "config", .kind = OptionKind::kString, .value_name = "FILE", .help = "file",
       .scope = OptionScope::kCommandLineOnly},
      {.name = "data", .kind = OptionKind::kString, .value_name = "DIR", .help = "data"},
      {.name = "threads", .kind = OptionKind::kInteger, .value_name = "N", .help = "threads"},
      {.name = "timeout", .kind = OptionKind::kNumber, .value_name = "S", .help = "seconds"},
      {.name = "insecure", .kind = OptionKind::kFlag, .help = "no keys"},
      {.name = "peer", .kind = OptionKind::kString, .value_name = "E", .help = "peers",
       .repeated = true},
      {.name = "backing", .kind = OptionKind::kString, .help = "BACKING",
       .scope = OptionScope::kFileOnly},
      {.name = "test-hook", .kind = OptionKind::kFlag, .scope = OptionScope::kCommandLineOnly},
      {.name = "help", .kind = OptionKind::kFlag, .help = "help",
       .scope = OptionScope::kCommandLineOnly},
  };
  return specs;
}

class ConfigFileTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = dir_.path() + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  // The error of reading `text` as a file, with the file's path replaced by "F".
  std::string Error(const std::string& text) {
    const std::string path = Write("f.toml", text);
    auto r = ReadConfigFile(Specs(), path);
    EXPECT_FALSE(r.ok());
    std::string m = r.status().message();
    if (m.rfind(path, 0) == 0) m = "F" + m.substr(path.size());
    return m;
  }
  testing::TempDir dir_;
};

TEST(CommandLineTest, ParsesValuesFlagsAndPositionals) {
  auto r = ParseCommandLine(Specs(), {"--data", "/d", "--threads=3", "--insecure", "x"}, true);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->options.size(), 3u);
  EXPECT_EQ(r->options[0].name, "data");
  EXPECT_EQ(r->options[0].value, "/d");
  EXPECT_EQ(r->options[1].value, "3");
  EXPECT_EQ(r->options[2].name, "insecure");
  EXPECT_EQ(r->positional, std::vector<std::string>{"x"});
}

TEST(CommandLineTest, RefusesWhatItDoesNotKnow) {
  EXPECT_EQ(ParseCommandLine(Specs(), {"--dta", "x"}, false).status().message(),
            "unknown option '--dta' (did you mean --data?)");
  EXPECT_EQ(ParseCommandLine(Specs(), {"--data"}, false).status().message(),
            "--data needs a value");
  EXPECT_EQ(ParseCommandLine(Specs(), {"--insecure=1"}, false).status().message(),
            "--insecure takes no value");
  EXPECT_EQ(ParseCommandLine(Specs(), {"x"}, false).status().message(),
            "unexpected argument 'x'");
  EXPECT_EQ(ParseCommandLine(Specs(), {"--data", "a", "--data", "b"}, false).status().message(),
            "--data is given twice");
  EXPECT_FALSE(ParseCommandLine(Specs(), {"--backing", "/x"}, false).ok());
  EXPECT_TRUE(ParseCommandLine(Specs(), {"--peer", "a", "--peer", "b"}, false).ok());
}

TEST_F(ConfigFileTest, ReadsEveryKindWithItsLine) {
  const std::string path = Write("m.toml",
                                 "# comment\n"
                                 "data = \"/var/lib/x\"\n"
                                 "threads = 8\n"
                                 "timeout = 1.5\n"
                                 "insecure = true\n"
                                 "peer = [\"a\", \"b\"]\n"
                                 "backing = \"/srv\"\n");
  auto r = ReadConfigFile(Specs(), path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 7u);
  EXPECT_EQ((*r)[0].name, "data");
  EXPECT_EQ((*r)[0].value, "/var/lib/x");
  EXPECT_EQ((*r)[0].origin, path + ":2");
  EXPECT_EQ((*r)[1].value, "8");
  EXPECT_EQ((*r)[2].value, "1.5");
  EXPECT_EQ((*r)[3].name, "insecure");
  EXPECT_EQ((*r)[4].value, "a");
  EXPECT_EQ((*r)[5].value, "b");
  EXPECT_EQ((*r)[6].name, "backing");
  EXPECT_EQ((*r)[1].Describe(), path + ":3: threads");
}

TEST_F(ConfigFileTest, AFlagSetToFalseIsNotGiven) {
  auto r = ReadConfigFile(Specs(), Write("m.toml", "insecure = false\n"));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->empty());
}

TEST_F(ConfigFileTest, ErrorsNameTheLine) {
  EXPECT_EQ(Error("data = \"/x\"\n\ndta = \"/y\"\n"),
            "F:3: unknown key 'dta' (did you mean 'data'?)");
  EXPECT_EQ(Error("colour = 1\n"), "F:1: unknown key 'colour'");
  EXPECT_EQ(Error("\nthreads = \"8\"\n"), "F:2: threads wants a whole number, not a string");
  EXPECT_EQ(Error("data = 5\n"), "F:1: data wants a string (in double quotes), not a whole number");
  EXPECT_EQ(Error("insecure = 1\n"), "F:1: insecure wants true or false, not a whole number");
  EXPECT_EQ(Error("timeout = \"1\"\n"), "F:1: timeout wants a number, not a string");
  EXPECT_EQ(Error("data = [\"a\"]\n"), "F:1: data is given once, not as an array");
  EXPECT_EQ(Error("peer = [1]\n"), "F:1: peer wants a string (in double quotes), not a whole number");
  EXPECT_EQ(Error("config = \"x\"\n"),
            "F:1: 'config' is a command-line option and cannot be set in a file");
  EXPECT_EQ(Error("test-hook = true\n"),
            "F:1: 'test-hook' is a command-line option and cannot be set in a file");
  EXPECT_NE(Error("[master]\ndata = \"x\"\n").find("F:1: sections ([master]) are not used"),
            std::string::npos);
  // A syntax error, and a key given twice (TOML forbids it).
  EXPECT_EQ(Error("threads = 1\ndata = \"unterminated\n").substr(0, 4), "F:2:");
  EXPECT_EQ(Error("threads = 1\nthreads = 2\n").substr(0, 4), "F:2:");
}

TEST_F(ConfigFileTest, MissingFiles) {
  auto r = ReadConfigFile(Specs(), dir_.path() + "/none.toml");
  EXPECT_TRUE(r.status().IsNotFound()) << r.status().ToString();
  // An explicit --config must exist; a default file need not.
  EXPECT_TRUE(LoadOptions(Specs(), {"--config", dir_.path() + "/none.toml"}, "", false)
                  .status()
                  .IsNotFound());
  auto loaded = LoadOptions(Specs(), {"--data", "/d"}, dir_.path() + "/none.toml", false);
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(loaded->config_file, "");
  EXPECT_FALSE(LoadOptions(Specs(), {"--config", ""}, "", false).ok());
}

TEST_F(ConfigFileTest, TheCommandLineComesLastAndReplacesRepeatedOptions) {
  const std::string path = Write("m.toml", "data = \"/file\"\nthreads = 2\npeer = [\"f\"]\n");
  auto r = LoadOptions(Specs(), {"--config", path, "--data", "/line", "--peer", "c"}, "", false);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->config_file, path);
  std::vector<std::string> seen;
  for (const OptionValue& v : r->values) seen.push_back(v.name + "=" + v.value);
  EXPECT_EQ(seen, (std::vector<std::string>{"data=/file", "threads=2", "data=/line", "peer=c"}));
  // The default file is read when there is no --config, and --help reads no file at all.
  auto d = LoadOptions(Specs(), {}, path, false);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->values.size(), 3u);
  auto h = LoadOptions(Specs(), {"-h", "--config", dir_.path() + "/none"}, "", false);
  ASSERT_TRUE(h.ok());
  EXPECT_TRUE(h->help);
}

TEST(OptionHelpTest, ListsVisibleOptionsOnly) {
  const std::string help = OptionHelp(Specs());
  EXPECT_NE(help.find("  --data DIR"), std::string::npos);
  EXPECT_NE(help.find("  --config FILE"), std::string::npos);
  EXPECT_EQ(help.find("test-hook"), std::string::npos);
  EXPECT_EQ(help.find("--backing"), std::string::npos);
}

TEST(ParseIntOptionTest, Ranges) {
  EXPECT_EQ(*ParseIntOption("--n", "7", 1, 9), 7);
  EXPECT_EQ(ParseIntOption("f:3: n", "10", 1, 9).status().message(),
            "f:3: n wants a whole number from 1 to 9, not '10'");
  EXPECT_FALSE(ParseIntOption("--n", "", 1, 9).ok());
  EXPECT_FALSE(ParseIntOption("--n", "3x", 1, 9).ok());
}

}  // namespace
}  // namespace propeller::daemon
