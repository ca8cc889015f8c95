// propeller find against GNU find (docs/cli.md "propeller find"): random expressions of
// find's tests, operators and actions over a tree built here, each answered from the index
// and by /usr/bin/find on the same tree; the same records must come out, or the same error.
#include "tests/cli_fixture.h"

namespace propeller::testing {
namespace {

// The records of find's output, each with its terminator ('\n' of -print and of the -printf
// formats used here, '\0' of -print0; a last one without when the output does not end in
// one). Sorted, they compare two outputs byte for byte but for the order of the files.
std::vector<std::string> Records(const std::string& text) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : text) {
    cur += c;
    if (c == '\n' || c == '\0') out.push_back(std::move(cur)), cur.clear();
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

double SecondsOf(const struct timespec& t) {
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) / 1e9;
}

double NowSeconds() {
  struct timespec now;
  ::clock_gettime(CLOCK_REALTIME, &now);
  return SecondsOf(now);
}

// The mtimes, ctimes and access times of the entries under `root`, in seconds since the epoch.
std::vector<double> TimesOf(const std::string& root) {
  std::vector<double> out;
  for (const Entry& e : WalkOracle(root)) {
    out.push_back(SecondsOf(e.st.st_mtim));
    out.push_back(SecondsOf(e.st.st_ctim));
    out.push_back(SecondsOf(e.st.st_atim));
  }
  return out;
}

// Whether one of `times` may have crossed an age at which an age test (-mtime, -mmin, -ctime,
// ...) changes its answer while the clock went from `start` to `end`: 1 s (`-ctime -0` is
// "less than one second ago", find's rule of a day minus a second) and every whole minute
// (-cmin; whole days are whole minutes too). 50 ms either side for the clocks' reading.
bool CrossesAgeBoundary(const std::vector<double>& times, double start, double end) {
  constexpr double kSlack = 0.05;
  for (double t : times) {
    const double lo = start - t - kSlack, hi = end - t + kSlack;
    if ((lo <= 1 && hi >= 1) || std::floor(lo / 60) != std::floor(hi / 60)) return true;
  }
  return false;
}

// `propeller find` against GNU find: random expressions over a tree built for find's corner
// cases (size rounding, ages in whole days and minutes, permissions, owners and groups without
// names, empty files and directories, links, case), with every action (-print, -print0,
// -printf, -quit), compared record for record, terminators included (sorted: the orders
// differ, docs/cli.md "find").
TEST_F(CliTest, FindAnswersRandomExpressionsAsGnuFindDoes) {
  SCOPED_TRACE("PROPELLER_SEED=" + std::to_string(TestSeed()));
  Random rnd(TestSeed());
  // A group with a name besides root, for -group; and one that does not exist, where GNU find
  // refuses the expression (and propeller find must too).
  std::string other_group = "root";
  gid_t other_gid = 0;
  if (const struct group* g = ::getgrnam("daemon")) {
    other_group = g->gr_name;
    other_gid = g->gr_gid;
  }
  const std::string kNoGroup = "no-such-group-p27";
  const auto now = std::chrono::system_clock::now();
  const char* kDirs[] = {"", "src", "src/lib", "Docs", "data/run1", "data/run2", "empty1",
                         "data/empty2"};
  for (const char* d : kDirs) fs::create_directories(tree_ + "/" + d);
  const char* kNames[] = {"a.c", "B.C", "main.cc", "util.h", "README", "readme.md", ".hidden",
                          "x y.txt", "data.bin", "log.1", "[br]", "q?"};
  const uint64_t kSizes[] = {0, 1, 511, 512, 513, 1023, 1024, 1025, 4096, 100000,
                             1048575, 1048576, 1048577, 3 << 20};
  const mode_t kModes[] = {0644, 0600, 0755, 04755, 0664, 0640, 0444, 02750};
  // Ages away from find's boundaries: the two runs see slightly different clocks.
  const double kAgesMin[] = {0.4, 1.5, 2.5, 30.5, 90.5, 60 * 24 * 0.5, 60 * 24 * 1.5,
                             60 * 24 * 2.5, 60 * 24 * 7.5, 60 * 24 * 400.5};
  int n = 0;
  for (const char* d : kDirs) {
    if (std::string(d).find("empty") != std::string::npos) continue;
    for (int k = 0; k < 9; ++k) {
      const std::string path = tree_ + "/" + d + (d[0] ? "/" : "") +
                               kNames[rnd.Uniform(std::size(kNames))] + std::to_string(n++ % 3);
      const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      ASSERT_GE(fd, 0) << path;
      ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(kSizes[rnd.Uniform(std::size(kSizes))])), 0);
      ::close(fd);
      ASSERT_EQ(::chmod(path.c_str(), kModes[rnd.Uniform(std::size(kModes))]), 0);
      if (rnd.OneIn(4)) {
        ASSERT_EQ(::chown(path.c_str(), 4321, rnd.OneIn(2) ? 4321 : 0), 0);
      } else if (rnd.OneIn(3)) {
        ASSERT_EQ(::chown(path.c_str(), static_cast<uid_t>(-1), other_gid), 0);
      }
      const double age = kAgesMin[rnd.Uniform(std::size(kAgesMin))] * 60;
      const auto t = std::chrono::duration_cast<std::chrono::nanoseconds>(
                         (now - std::chrono::duration<double>(age)).time_since_epoch())
                         .count();
      const struct timespec times[2] = {{t / 1'000'000'000, t % 1'000'000'000},
                                        {t / 1'000'000'000, t % 1'000'000'000}};
      ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW), 0);
    }
  }
  ASSERT_EQ(::symlink("src/a.c0", (tree_ + "/lnk").c_str()), 0);
  {
    const int fd = ::open((tree_ + "/src/ref").c_str(), O_WRONLY | O_CREAT, 0644);
    ::close(fd);
    const struct timespec times[2] = {{::time(nullptr) - 3 * 86400, 0},
                                      {::time(nullptr) - 3 * 86400, 0}};
    ASSERT_EQ(::utimensat(AT_FDCWD, (tree_ + "/src/ref").c_str(), times, 0), 0);
    ASSERT_EQ(::link((tree_ + "/src/ref").c_str(), (tree_ + "/Docs/ref-link").c_str()), 0);
  }
  // Every directory read once, a clock tick after its last change, before the import: the
  // import's own read would otherwise move the access times of directories after its lstat,
  // and the index would keep the earlier ones (the index takes no access-time change alone,
  // docs/reconcile.md). Read once, they stay (relatime) through the import and every find.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  WalkOracle(tree_);
  const CliResult imported = Cli({"import", tree_});
  ASSERT_EQ(imported.code, 0) << imported.err;
  // Every ctime, and the directories' mtimes and access times, are of the last seconds; the
  // runs below that straddle an age where an age test turns are repeated after the span of
  // those times.
  const std::vector<double> times = TimesOf(tree_);
  const double since = std::chrono::duration<double>(now.time_since_epoch()).count() - 1;
  double first = 1e300, last = -1e300;
  for (double t : times) {
    if (t < since) continue;
    first = std::min(first, t);
    last = std::max(last, t);
  }
  const auto recent_spread =
      std::chrono::milliseconds(static_cast<int64_t>(std::max(0.0, last - first) * 1000));

  auto primary = [&]() -> std::vector<std::string> {
    auto num = [&](int max) {
      const int v = static_cast<int>(rnd.Uniform(static_cast<uint64_t>(max)));
      const char* sign[] = {"", "+", "-"};
      return sign[rnd.Uniform(3)] + std::to_string(v);
    };
    switch (rnd.Uniform(23)) {
      case 0: return {"-name", rnd.OneIn(2) ? "*.c*" : "README*"};
      case 1: return {"-iname", rnd.OneIn(2) ? "*.C?" : "readme*"};
      case 2: return {"-path", rnd.OneIn(2) ? "*/src/*" : "*data/run?/*"};
      case 3: return {"-ipath", "*/DOCS/*"};
      case 4: return {"-regex", rnd.OneIn(2) ? ".*/[a-d].*" : ".*\\.\\(c\\|h\\)[0-9]"};
      case 5: return {"-type", rnd.OneIn(3) ? "d" : rnd.OneIn(2) ? "f" : "l,d"};
      case 6: {
        const char* units[] = {"", "c", "k", "M", "b"};
        return {"-size", num(rnd.OneIn(2) ? 4 : 1200) + units[rnd.Uniform(5)]};
      }
      case 7: return {"-empty"};
      case 8: return {rnd.OneIn(2) ? "-mtime" : "-atime", num(4)};
      case 9: return {"-mmin", num(100)};
      case 10: return {"-newer", tree_ + "/src/ref"};
      case 11: return {"-user", rnd.OneIn(2) ? "root" : "0"};
      case 12: return {"-uid", num(5000)};
      case 13: return {rnd.OneIn(2) ? "-nouser" : "-nogroup"};
      case 14: {
        const char* perms[] = {"644", "-4000", "/022", "-111", "/7000", "600"};
        return {"-perm", perms[rnd.Uniform(std::size(perms))]};
      }
      case 15: return {"-links", num(3)};
      case 16: return {"-gid", num(5000)};
      case 17: return {"-regextype", "posix-extended", "-iregex", ".*/(readme|b)[^/]*"};
      case 18: return {"-amin", num(50)};
      // The ctimes are all of the last seconds (no call sets one): -ctime -0 and -cmin N
      // turn on them; the comparison below repeats a run that straddled such a turn.
      case 19: return {"-ctime", num(3)};
      case 20: return {"-cmin", num(3)};
      case 21: {
        const std::string groups[] = {"root", "0", "4321", other_group, kNoGroup};
        return {"-group", groups[rnd.Uniform(std::size(groups))]};
      }
      default: return {"-true"};
    }
  };
  std::function<std::vector<std::string>(int)> expr = [&](int depth) {
    std::vector<std::string> e = primary();
    if (depth < 2 && rnd.OneIn(2)) {
      std::vector<std::string> rhs = expr(depth + 1);
      // (',' comes below, with actions on both sides: without them GNU find 4.9 prints by
      // its left operand for some tests — `find . -size 0 , -false` prints the empty files —
      // where its manual, and propeller find, take the list's value from the right.)
      const char* ops[] = {"-a", "-o", "-and", "-or"};
      const std::string op = ops[rnd.Uniform(std::size(ops))];
      if (op != "-a" || rnd.OneIn(2)) e.push_back(op);
      e.insert(e.end(), rhs.begin(), rhs.end());
    }
    if (rnd.OneIn(4)) e.insert(e.begin(), rnd.OneIn(2) ? "!" : "-not");
    if (rnd.OneIn(4)) {
      e.insert(e.begin(), "(");
      e.push_back(")");
    }
    return e;
  };
  // Both finds on `args`, from the tree: GNU find's result first.
  auto run_both = [&](const std::vector<std::string>& args) {
    std::vector<std::string> gnu = {"/usr/bin/find"}, ours = {PROPELLER_CLI_BIN, "find"};
    gnu.insert(gnu.end(), args.begin(), args.end());
    ours.insert(ours.end(), args.begin(), args.end());
    ours.push_back("--master");
    ours.push_back(master_);
    return std::make_pair(RunArgv(gnu, tree_), RunArgv(ours, tree_));
  };
  int compared = 0, nonempty = 0;
  std::map<std::string, int> drawn;
  for (int i = 0; i < 150; ++i) {
    std::vector<std::string> args;
    const bool relative = rnd.OneIn(3);
    args.push_back(relative ? (rnd.OneIn(2) ? "." : "src") : tree_);
    if (rnd.OneIn(4)) {
      args.push_back(rnd.OneIn(2) ? "-maxdepth" : "-mindepth");
      args.push_back(std::to_string(rnd.Uniform(3)));
    }
    const size_t expr_at = args.size();
    std::vector<std::string> e = expr(0);
    args.insert(args.end(), e.begin(), e.end());
    // The action: find's default -print, -print, -print0, -printf, or two lists joined by ','
    // with actions on both sides. One in four single lists is also run with -quit after its
    // action (below).
    bool two_lists = false;
    const size_t no_action = args.size();
    switch (rnd.Uniform(6)) {
      case 0:
        args.push_back("-printf");
        args.push_back("%p %s %m %U %G %n %y %f %h\\n");
        break;
      case 1: args.push_back("-print"); break;
      case 2: args.push_back("-print0"); break;
      case 3: {
        std::vector<std::string> second = expr(1);
        args.push_back(rnd.OneIn(2) ? "-print" : "-print0");
        args.push_back(",");
        args.insert(args.end(), second.begin(), second.end());
        args.push_back("-printf");
        args.push_back("2:%p\\n");
        two_lists = true;
        break;
      }
      default: break;
    }
    std::vector<std::string> quit_args;
    if (!two_lists && rnd.OneIn(4)) {
      quit_args = args;
      if (args.size() == no_action) {
        // The default action made explicit, as find's manual puts it: `( EXPR ) -print`.
        // Without the parentheses `A -o B -print` would print only what B matches.
        quit_args.insert(quit_args.begin() + static_cast<ptrdiff_t>(expr_at), "(");
        quit_args.push_back(")");
        quit_args.push_back("-print");
      }
      quit_args.push_back("-quit");
    }
    std::string shown, quit_shown;
    for (const std::string& a : args) shown += "'" + a + "' ";
    for (const std::string& a : quit_args) quit_shown += "'" + a + "' ";
    bool ages = false;
    for (const std::string& a : quit_args.empty() ? args : quit_args) {
      ++drawn[a];
      ages = ages || a == "-mtime" || a == "-mmin" || a == "-ctime" || a == "-cmin" ||
             a == "-atime" || a == "-amin";
    }
    // Run again when a time crossed an age where a test turns while the finds ran, after
    // waiting long enough that the times near that age are all past it.
    CliResult want, got, want_quit, got_quit;
    for (int attempt = 0;; ++attempt) {
      const double start = NowSeconds();
      std::tie(want, got) = run_both(args);
      if (!quit_args.empty()) std::tie(want_quit, got_quit) = run_both(quit_args);
      if (!ages || !CrossesAgeBoundary(times, start, NowSeconds())) break;
      ASSERT_LT(attempt, 3) << "find " << shown << "straddled an age boundary every time";
      std::this_thread::sleep_for(std::chrono::milliseconds(300) + recent_spread);
    }
    ++compared;
    if (want.code != 0) {
      // Only an unknown group makes GNU find refuse an expression drawn here.
      EXPECT_NE(std::find(args.begin(), args.end(), kNoGroup), args.end()) << shown << want.err;
      EXPECT_EQ(got.code, want.code) << "find " << shown << got.out << got.err;
      EXPECT_EQ(want.out, "") << shown;
      EXPECT_EQ(got.out, "") << shown;
      EXPECT_NE(got.err.find("propeller find: "), std::string::npos) << got.err;
      continue;
    }
    ASSERT_EQ(got.code, 0) << shown << got.err;
    const std::vector<std::string> records = Sorted(Records(want.out));
    EXPECT_EQ(Sorted(Records(got.out)), records) << "find " << shown;
    nonempty += !want.out.empty();
    if (quit_args.empty()) continue;
    // -quit stops at the first match, in each program's own order: one record of the full
    // output each (none when it is empty), not necessarily the same one.
    for (const CliResult* r : {&want_quit, &got_quit}) {
      const char* who = r == &want_quit ? "GNU find " : "propeller find ";
      EXPECT_EQ(r->code, 0) << who << quit_shown << r->err;
      const std::vector<std::string> one = Records(r->out);
      EXPECT_EQ(one.size(), records.empty() ? 0u : 1u) << who << quit_shown << r->out;
      if (one.size() == 1) {
        EXPECT_TRUE(std::binary_search(records.begin(), records.end(), one[0]))
            << who << quit_shown << "printed " << one[0];
      }
    }
  }
  EXPECT_EQ(compared, 150);
  EXPECT_GT(nonempty, 60);  // most expressions select something: the comparison has teeth
  for (const char* p : {"-print0", "-quit", "-ctime", "-cmin", "-group"}) {
    EXPECT_GT(drawn[p], 3) << p << " was drawn too rarely to be tested";
  }
  // What the index cannot answer exactly is refused, not approximated.
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{tree_, "-ls"}, {tree_, "-exec", "ls", ";"},
        {tree_, "-perm", "u+w"}, {tree_, "-frobnicate"}, {tree_, "-name"},
        {tree_, "(", "-true"}, {tree_, "-group", kNoGroup}}) {
    std::vector<std::string> argv = {PROPELLER_CLI_BIN, "find"};
    argv.insert(argv.end(), bad.begin(), bad.end());
    argv.push_back("--master");
    argv.push_back(master_);
    const CliResult r = RunArgv(argv);
    EXPECT_EQ(r.code, 1) << bad[1];
    EXPECT_EQ(r.out, "") << bad[1];
    EXPECT_NE(r.err.find("propeller find: "), std::string::npos) << r.err;
  }
  const CliResult gnu_no_group = RunArgv({"/usr/bin/find", tree_, "-group", kNoGroup});
  EXPECT_EQ(gnu_no_group.code, 1) << "GNU find took an unknown group: " << gnu_no_group.err;
}

}  // namespace
}  // namespace propeller::testing
