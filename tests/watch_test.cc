// `propeller watch` against a scripted workload on a real mount: every create, write, rename,
// chmod, link and delete that changes the set of matches (or a match) is printed, in order,
// and nothing else. Each step is followed by a marker file whose '+' line closes the step's
// events, so the events of every step are compared with what the step did, checked against
// the backing directory with stat (the oracle), one step at a time.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "client/lib/mount_registry.h"
#include "tests/mount_harness.h"

namespace propeller {
namespace {

using testing::ChildProcess;
using testing::Mount;

void WriteFile(const std::string& path, const std::string& data, int flags = O_TRUNC) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | flags, 0644);
  ASSERT_GE(fd, 0) << path;
  ASSERT_EQ(::write(fd, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  ASSERT_EQ(::close(fd), 0);
}

// The event lines ("+ /mnt/a.txt") of a watch's log, in order.
std::vector<std::string> EventLines(const std::string& log) {
  std::ifstream in(log);
  std::vector<std::string> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.size() > 2 && (line[0] == '+' || line[0] == '-' || line[0] == '~') &&
        line[1] == ' ') {
      out.push_back(line);
    }
  }
  return out;
}

// The standard output of a shell command (its exit status must be 0).
std::string Shell(const std::string& command) {
  FILE* p = ::popen(command.c_str(), "r");
  if (p == nullptr) return "(popen failed)";
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int status = ::pclose(p);
  EXPECT_EQ(status, 0) << command << "\n" << out;
  return out;
}

bool LogHas(const std::string& log, const std::string& text) {
  std::ifstream in(log);
  std::stringstream all;
  all << in.rdbuf();
  return all.str().find(text) != std::string::npos;
}

TEST(WatchTest, ScriptedWorkloadThroughTheMountIsReportedInOrderAndNothingElse) {
  Mount m;
  ASSERT_TRUE(m.Start());
  const std::string mnt = m.mnt();
  ASSERT_EQ(::mkdir((mnt + "/markers").c_str(), 0755), 0);
  const std::string log = m.root() + "/watch.log";
  // A typo of an attribute is refused with the nearest names, as a search refuses it, not a
  // watch that silently never matches (through the mount's query engine and the service).
  const std::string typo = Shell(std::string(PROPELLER_CLI_BIN) + " watch 'sise>1m' --scope " +
                                 mnt + " 2>&1; echo \"exit $?\"");
  EXPECT_NE(typo.find("unknown attribute 'sise' (did you mean size?)"), std::string::npos) << typo;
  EXPECT_NE(typo.find("\nexit 1\n"), std::string::npos) << typo;
  // Directories are 4 KB: type=f keeps them (and their mtime changes) out.
  const std::string query = "type=f & (name~\"*.txt\" | size>100)";
  ChildProcess watch({PROPELLER_CLI_BIN, "watch", query, "--scope", mnt}, log);
  ASSERT_TRUE(watch.Start());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!LogHas(log, "propeller watch: watching") && std::chrono::steady_clock::now() < deadline) {
    ASSERT_FALSE(watch.Exited()) << "the watch ended early";
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(LogHas(log, "propeller watch: watching"));

  size_t seen = 0;  // event lines of the steps before
  int marker = 0;
  // Runs `step`, then creates a marker file and returns the events printed in between.
  auto Step = [&](const std::function<void()>& step) {
    step();
    const std::string name = mnt + "/markers/m" + std::to_string(++marker) + ".txt";
    WriteFile(name, "");
    const std::string end = "+ " + name;
    std::vector<std::string> lines;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    for (;;) {
      lines = EventLines(log);
      auto it = std::find(lines.begin() + static_cast<long>(seen), lines.end(), end);
      if (it != lines.end()) {
        std::vector<std::string> events(lines.begin() + static_cast<long>(seen), it);
        seen = static_cast<size_t>(it - lines.begin()) + 1;
        return events;
      }
      if (std::chrono::steady_clock::now() > until) {
        ADD_FAILURE() << "no '" << end << "' line; log:\n" << lines.size() << " lines";
        return std::vector<std::string>{"(timeout)"};
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  };
  using V = std::vector<std::string>;
  const std::string a = mnt + "/a.txt", b = mnt + "/b.txt", c = mnt + "/c.dat";
  const std::string e = mnt + "/d/e.txt", f = mnt + "/f.txt";
  struct stat st;

  // Creating a matching file: it starts matching; writing it on the way may show as a change.
  V got = Step([&] { WriteFile(a, "hello"); });
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got[0], "+ " + a);
  for (size_t i = 1; i < got.size(); ++i) EXPECT_EQ(got[i], "~ " + a);
  // Writing a match changes it.
  got = Step([&] { WriteFile(a, " world", O_APPEND); });
  ASSERT_FALSE(got.empty());
  for (const std::string& l : got) EXPECT_EQ(l, "~ " + a);
  // A rename: the old path stops matching, the new one starts.
  got = Step([&] { ASSERT_EQ(::rename(a.c_str(), b.c_str()), 0); });
  EXPECT_EQ(got, (V{"- " + a, "+ " + b}));
  // chmod changes the match.
  got = Step([&] { ASSERT_EQ(::chmod(b.c_str(), 0600), 0); });
  ASSERT_FALSE(got.empty());
  for (const std::string& l : got) EXPECT_EQ(l, "~ " + b);
  ASSERT_EQ(::stat((m.backing() + "/b.txt").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  // A file that does not match: nothing, until it grows past 100 bytes.
  got = Step([&] { WriteFile(c, "small"); });
  EXPECT_EQ(got, V{});
  got = Step([&] { WriteFile(c, std::string(200, 'x')); });
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got.back(), "+ " + c);
  got = Step([&] { ASSERT_EQ(::truncate(c.c_str(), 0), 0); });
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got.back(), "- " + c);
  for (const std::string& l : got) EXPECT_TRUE(l == "- " + c || l == "~ " + c) << l;
  got = Step([&] { ASSERT_EQ(::unlink(c.c_str()), 0); });
  EXPECT_EQ(got, V{});
  // Deleting a match.
  got = Step([&] { ASSERT_EQ(::unlink(b.c_str()), 0); });
  EXPECT_EQ(got, V{"- " + b});
  // Directories do not match; a file in one does.
  got = Step([&] { ASSERT_EQ(::mkdir((mnt + "/d").c_str(), 0755), 0); });
  EXPECT_EQ(got, V{});
  got = Step([&] { WriteFile(e, "e"); });
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got[0], "+ " + e);
  // A hard link is a path of its own (and the first path's file changed: one more link).
  got = Step([&] { ASSERT_EQ(::link(e.c_str(), f.c_str()), 0); });
  EXPECT_EQ(std::set<std::string>(got.begin(), got.end()),
            (std::set<std::string>{"~ " + e, "+ " + f}));
  got = Step([&] { ASSERT_EQ(::unlink(f.c_str()), 0); });
  EXPECT_EQ(std::set<std::string>(got.begin(), got.end()),
            (std::set<std::string>{"- " + f, "~ " + e}));
  got = Step([&] { ASSERT_EQ(::unlink(e.c_str()), 0); });
  EXPECT_EQ(got, V{"- " + e});
  // Renaming a directory renames the matches in it.
  got = Step([&] { WriteFile(mnt + "/d/g.txt", "g"); });
  ASSERT_FALSE(got.empty());
  got = Step([&] { ASSERT_EQ(::rename((mnt + "/d").c_str(), (mnt + "/d2").c_str()), 0); });
  EXPECT_EQ(got, (V{"- " + mnt + "/d/g.txt", "+ " + mnt + "/d2/g.txt"}));

  // Path predicates see the paths results print: under the mount point through the mount,
  // under the backing directory through the service (docs/query.md "Paths").
  const std::string cli = PROPELLER_CLI_BIN;
  EXPECT_EQ(Shell(cli + " search 'path~" + mnt + "/d2/*' --scope " + mnt), mnt + "/d2/g.txt\n");
  const std::string mnt_name = mnt.substr(mnt.rfind('/') + 1);  // "mnt"
  EXPECT_EQ(Shell(cli + " search 'keyword=" + mnt_name + " & name=g.txt' --scope " + mnt),
            mnt + "/d2/g.txt\n");
  // A plain search from a directory inside the mount goes through the mount as well (the
  // same answer as --scope MNT); one sent to the service by --master sees the backing paths.
  EXPECT_EQ(Shell("cd " + mnt + "/d2 && " + cli + " search 'path~" + mnt + "/d2/*'"),
            mnt + "/d2/g.txt\n");
  EXPECT_EQ(Shell("cd " + mnt + "/d2 && " + cli + " search 'path~" + m.backing() + "/d2/*'"),
            "");
  Result<std::optional<MountRecord>> record = FindMountFor(mnt);
  ASSERT_TRUE(record.ok() && *record) << record.status().ToString();
  EXPECT_EQ(Shell("cd " + mnt + " && " + cli + " search 'path~" + m.backing() + "/d2/*' --master " +
                  (*record)->master_endpoint),
            m.backing() + "/d2/g.txt\n");
  // A query directory too: keywords of the mount point's own name.
  EXPECT_EQ(testing::List(mnt + "/?keyword=" + mnt_name + "&name=g.txt"),
            std::vector<std::string>{"d2%2Fg.txt"});

  // The watch runs on until stopped; a clean stop by signal.
  EXPECT_FALSE(watch.Exited());
  watch.Kill();
}

}  // namespace
}  // namespace propeller
