// The propeller CLI end to end on the embedded default: `propeller up` (master + index node in
// one process), `propeller import` of a real directory tree built here, and `propeller search`
// in every output form, compared with a brute-force walk of the same tree (the oracle).
// Also: user indexes fed by user.* xattrs, attr set/get, a resumed import after kill -9, and
// the exit codes and one-line errors.
#include "tests/cli_fixture.h"

namespace propeller::testing {
namespace {

TEST_F(CliTest, ImportThenSearchMatchesTheTree) {
  BuildTree(tree_, TestSeed(), 1500);
  ASSERT_EQ(Cli({"index", "create", "project", "--type", "hash"}).code, 0);
  CliResult imp = Cli({"import", tree_, "--state", dir_.path() + "/import.state"});
  ASSERT_EQ(imp.code, 0) << imp.err;
  EXPECT_NE(imp.out.find("imported"), std::string::npos);

  const std::vector<Entry> oracle = WalkOracle(tree_);
  const int64_t now = ::time(nullptr);
  auto expect = [&](const std::function<bool(const Entry&)>& pred) {
    std::vector<std::string> out;
    for (const Entry& e : oracle) {
      if (pred(e)) out.push_back(e.path);
    }
    return Sorted(out);
  };
  auto ext_is = [](const Entry& e, const std::string& x) {
    return fs::path(e.path).extension() == x && !S_ISDIR(e.st.st_mode);
  };
  // Hard links: every name of a file is a result of its own, as with find (docs/search.md).
  // Each query against the oracle; every expectation is non-empty, so none passes vacuously.
  auto check = [&](const std::string& query, std::vector<std::string> extra,
                   const std::function<bool(const Entry&)>& pred) {
    const std::vector<std::string> want = expect(pred);
    EXPECT_FALSE(want.empty()) << query;
    EXPECT_EQ(Sorted(Search(query, extra)), want) << query;
  };
  check("size>1m & type=f", {}, [&](const Entry& e) {
    return S_ISREG(e.st.st_mode) && e.st.st_size > (1 << 20);
  });
  check("ext=parquet", {}, [&](const Entry& e) { return ext_is(e, ".parquet"); });
  check("mtime<2h & type=f", {}, [&](const Entry& e) {
    return S_ISREG(e.st.st_mode) && e.st.st_mtime > now - 7200;
  });
  check("project=alpha", {}, [&](const Entry& e) { return e.project == "alpha"; });
  check("type=d", {}, [](const Entry& e) { return S_ISDIR(e.st.st_mode); });
  check("type=l", {}, [](const Entry& e) { return S_ISLNK(e.st.st_mode); });
  // Scope: a directory, by its host path.
  check("ext=c", {"--scope", tree_ + "/src"}, [&](const Entry& e) {
    return ext_is(e, ".c") && e.path.rfind(tree_ + "/src/", 0) == 0;
  });

  // Sort and limit: the ten largest, in order.
  std::vector<Entry> files;
  for (const Entry& e : oracle) {
    if (S_ISREG(e.st.st_mode)) files.push_back(e);
  }
  std::sort(files.begin(), files.end(), [](const Entry& a, const Entry& b) {
    return a.st.st_size != b.st.st_size ? a.st.st_size > b.st.st_size : a.path < b.path;
  });
  std::vector<std::string> top;
  for (size_t i = 0; i < 10 && i < files.size(); ++i) top.push_back(files[i].path);
  EXPECT_EQ(Search("type=f", {"--sort", "size", "--desc", "--limit", "10"}), top);

  // Output forms: -0 and --json carry the same paths.
  CliResult nul = Cli({"search", "ext=log", "-0"});
  ASSERT_EQ(nul.code, 0);
  const auto plain = Sorted(Search("ext=log"));
  EXPECT_EQ(Sorted(Lines(nul.out, '\0')), plain);
  CliResult json = Cli({"search", "ext=log", "--json"});
  ASSERT_EQ(json.code, 0);
  std::vector<std::string> json_lines = Lines(json.out);
  ASSERT_EQ(json_lines.size(), plain.size());
  for (const std::string& line : json_lines) {
    EXPECT_EQ(line.front(), '{');
    EXPECT_NE(line.find("\"size\":"), std::string::npos);
  }

  // attr set/get: the new value is searchable at once.
  const std::string file = files.back().path;
  ASSERT_EQ(Cli({"attr", "set", file, "project", "gamma"}).code, 0);
  EXPECT_EQ(Search("project=gamma"), std::vector<std::string>{file});
  CliResult get = Cli({"attr", "get", file, "project"});
  EXPECT_EQ(get.code, 0);
  EXPECT_EQ(get.out, "gamma\n");

  CliResult status = Cli({"status", "--json"});
  EXPECT_EQ(status.code, 0);
  EXPECT_NE(status.out.find("\"files\":" + std::to_string(oracle.size() - 1)), std::string::npos)
      << status.out;  // the hard link's two names are one file
}

// Two services each have a volume 1: an import into one neither resumes from nor refuses
// because of the other's interrupted import (the default checkpoint was named by the volume
// number alone: "... belongs to an import of TREE").
TEST_F(CliTest, InterruptedImportsOfTwoServicesKeepTheirOwnCheckpoints) {
  BuildTree(tree_, TestSeed() + 2, 3000);
  const std::string other_tree = dir_.path() + "/other-tree";
  BuildTree(other_tree, TestSeed() + 3, 200);
  const std::string other = "ipc://" + dir_.path() + "/other-master.sock";
  ChildProcess other_up({PROPELLER_CLI_BIN, "up", "--data", dir_.path() + "/other-data",
                         "--listen", other, "--node-listen",
                         "ipc://" + dir_.path() + "/other-node.sock", "--ready-file",
                         dir_.path() + "/other-ready", "--log-level", "warning"},
                        dir_.path() + "/other-up.log");
  ASSERT_TRUE(other_up.Start());
  for (int i = 0; i < 300 && !fs::exists(dir_.path() + "/other-ready"); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(fs::exists(dir_.path() + "/other-ready")) << "the second propeller up did not start";
  // An import into this service, killed after its first checkpoints (default state path).
  const std::string state_dir = dir_.path() + "/state/propeller";
  ChildProcess importer({PROPELLER_CLI_BIN, "--master", master_, "import", tree_, "--batch", "5",
                         "--quiet"},
                        dir_.path() + "/import.log");
  ASSERT_TRUE(importer.Start());
  auto checkpoints = [&] {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(state_dir, ec)) {
      const std::string p = e.path();
      if (p.size() > 6 && p.substr(p.size() - 6) == ".state") out.push_back(p);  // not its .tmp
    }
    return out;
  };
  for (int i = 0; i < 2000 && checkpoints().empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  importer.Kill();
  ASSERT_EQ(checkpoints().size(), 1u) << "the import finished before it could be interrupted";
  // The other service's volume 1: imported whole, from the start.
  CliResult theirs = RunCli({"import", other_tree}, other);
  ASSERT_EQ(theirs.code, 0) << theirs.err;
  EXPECT_EQ(theirs.err.find("resuming"), std::string::npos) << theirs.err;
  CliResult found = RunCli({"search", "type=f", "--count"}, other);
  ASSERT_EQ(found.code, 0) << found.err;
  size_t files = 0;
  for (const auto& e : fs::recursive_directory_iterator(other_tree)) {
    files += e.symlink_status().type() == fs::file_type::regular;
  }
  EXPECT_EQ(found.out, std::to_string(files) + "\n");
  // And this one resumes where it stopped.
  CliResult ours = Cli({"import", tree_});
  ASSERT_EQ(ours.code, 0) << ours.err;
  EXPECT_NE(ours.err.find("resuming after"), std::string::npos) << ours.err;
  EXPECT_TRUE(checkpoints().empty()) << "finished imports remove their checkpoints";
  EXPECT_EQ(other_up.Terminate(), 0);
}

TEST_F(CliTest, InterruptedImportResumes) {
  BuildTree(tree_, TestSeed() + 1, 3000);
  const std::string state = dir_.path() + "/import.state";
  // Small batches, so the kill lands between checkpoints.
  ChildProcess importer({PROPELLER_CLI_BIN, "--master", master_, "import", tree_, "--batch", "5",
                         "--state", state, "--quiet"},
                        dir_.path() + "/import.log");
  ASSERT_TRUE(importer.Start());
  for (int i = 0; i < 2000; ++i) {
    std::ifstream in(state);
    std::string text((std::istreambuf_iterator<char>(in)), {});
    auto pos = text.find("count ");
    if (pos != std::string::npos && std::stoull(text.substr(pos + 6)) >= 500) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  importer.Kill();
  ASSERT_TRUE(fs::exists(state)) << "the import finished before it could be interrupted";
  CliResult resumed = Cli({"import", tree_, "--state", state});
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  EXPECT_NE(resumed.err.find("resuming after"), std::string::npos) << resumed.err;
  EXPECT_FALSE(fs::exists(state)) << "a finished import removes its checkpoint";
  std::vector<std::string> want;
  for (const Entry& e : WalkOracle(tree_)) {
    want.push_back(e.path);
  }
  EXPECT_EQ(Sorted(Search("size>=0")), Sorted(want));
}

// JSON strings as `search --json` writes them, back to bytes: \uDCxx is the byte xx
// (commands.h JsonString), other escapes as JSON has them, UTF-8 as is. `end`, when given, is
// set to the index of the path's closing quote.
std::string JsonPathBytes(const std::string& line, size_t* end = nullptr) {
  const std::string key = "{\"path\":\"";
  EXPECT_EQ(line.rfind(key, 0), 0u) << line;
  std::string out;
  size_t i = key.size();
  for (; i < line.size() && line[i] != '"'; ++i) {
    if (line[i] != '\\') {
      out += line[i];
      continue;
    }
    const char e = line[++i];
    if (e == 'u') {
      const unsigned cp = static_cast<unsigned>(std::stoul(line.substr(i + 1, 4), nullptr, 16));
      i += 4;
      EXPECT_TRUE(cp < 0x80 || (cp >= 0xDC80 && cp <= 0xDCFF)) << std::hex << cp;
      out += static_cast<char>(cp < 0x80 ? cp : cp - 0xDC00);
    } else {
      out += e;  // \" and \\ (the writer uses no other short escapes)
    }
  }
  if (end != nullptr) *end = i;
  return out;
}

// The value of `"key":` in a line of `search --json` after its path (a number, or a string
// without its quotes; none of the values the tests read has an escape); "" when absent.
std::string JsonField(const std::string& line, const std::string& key) {
  size_t from = 0;
  JsonPathBytes(line, &from);
  const size_t at = line.find("\"" + key + "\":", from);
  if (at == std::string::npos) return "";
  const size_t v = at + key.size() + 3;
  if (v < line.size() && line[v] == '"') return line.substr(v + 1, line.find('"', v + 1) - v - 1);
  return line.substr(v, line.find_first_of(",}", v) - v);
}

std::string NanosOf(const struct timespec& t) {
  return std::to_string(static_cast<int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec);
}

// Every entry under `root` (itself included) as an lstat walk sees it, one line each, sorted:
// path, type, size, mtime and ctime in nanoseconds, inode number, permission bits, link count
// and user.project. The oracle of the re-import test; IndexedLines prints the index's view
// in the same form.
std::vector<std::string> LstatLines(const std::string& root) {
  std::vector<std::string> out;
  for (const Entry& e : WalkOracle(root)) {
    const mode_t fmt = e.st.st_mode & S_IFMT;
    const char type = fmt == S_IFREG ? 'f' : fmt == S_IFDIR ? 'd' : fmt == S_IFLNK ? 'l' : 'o';
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(e.st.st_mode & 07777));
    out.push_back(e.path + " " + type + " size=" + std::to_string(e.st.st_size) +
                  " mtime=" + NanosOf(e.st.st_mtim) + " ctime=" + NanosOf(e.st.st_ctim) +
                  " ino=" + std::to_string(e.st.st_ino) + " mode=" + mode +
                  " nlink=" + std::to_string(e.st.st_nlink) + " project=" + e.project);
  }
  return Sorted(out);
}

// The lines of `search --json` output in LstatLines' form.
std::vector<std::string> IndexedLines(const std::string& json) {
  std::vector<std::string> out;
  for (const std::string& line : Lines(json)) {
    out.push_back(JsonPathBytes(line) + " " + JsonField(line, "type") +
                  " size=" + JsonField(line, "size") + " mtime=" + JsonField(line, "mtime") +
                  " ctime=" + JsonField(line, "ctime") + " ino=" + JsonField(line, "ino") +
                  " mode=" + JsonField(line, "mode") + " nlink=" + JsonField(line, "nlink") +
                  " project=" + JsonField(line, "project"));
  }
  return Sorted(out);
}

// The lines only `want` has ("missing") and only `got` has ("extra"), both sorted; "" when
// they are equal. Shorter to read than gtest's print of two vectors of a thousand lines.
std::string LineDiff(const std::vector<std::string>& want, const std::vector<std::string>& got) {
  std::vector<std::string> missing, extra;
  std::set_difference(want.begin(), want.end(), got.begin(), got.end(),
                      std::back_inserter(missing));
  std::set_difference(got.begin(), got.end(), want.begin(), want.end(),
                      std::back_inserter(extra));
  std::string out;
  for (const std::string& l : missing) out += "missing: " + l + "\n";
  for (const std::string& l : extra) out += "extra:   " + l + "\n";
  return out;
}

std::string ParentOf(const std::string& path) { return fs::path(path).parent_path().string(); }

// Random changes to a tree between imports, of every kind reconcile must see
// (docs/reconcile.md): files deleted, rewritten, renamed (in place and to another directory),
// re-dated to the nanosecond (before 1970 too), given or stripped of user.project, given
// another hard link; files replaced by directories and, a later round, by files again;
// directories renamed (in place and to another parent) and replaced by files; symbolic links
// retargeted, replaced by files and re-dated; and inode reuse: a file deleted and another
// created at once with its size, mode and mtime, at the same path or a new one, which ext4
// usually gives the freed number (counted, not required), so that only the ctime, the
// attributes and the inode generation tell the two apart.
class TreeChanger {
 public:
  TreeChanger(std::string root, uint64_t seed) : root_(std::move(root)), rnd_(seed) {}

  // One round: each entry of the tree, in path order, may change; something new is added.
  void Round() {
    ++round_;
    TurnBack();
    std::vector<Entry> entries = WalkOracle(root_);
    std::sort(entries.begin(), entries.end(),
              [](const Entry& a, const Entry& b) { return a.path < b.path; });
    for (const Entry& e : entries) {
      struct stat st;
      // Gone when a directory above it was renamed or replaced earlier in this round.
      if (e.path == root_ || ::lstat(e.path.c_str(), &st) != 0) continue;
      if (S_ISREG(st.st_mode)) ChangeFile(e.path, st);
      if (S_ISDIR(st.st_mode)) ChangeDirectory(e.path);
      if (S_ISLNK(st.st_mode)) ChangeSymlink(e.path);
    }
    WriteFile(Fresh(root_, "new"), "new");
    Ok(::symlink(std::string(1 + rnd_.Uniform(40), 'n').c_str(), Fresh(root_, "ln").c_str()),
       "symlink");
  }
  int reuse_attempts() const { return reuse_attempts_; }
  int reuses() const { return reuses_; }
  int changes() const { return changes_; }

 private:
  static void Ok(int rc, const std::string& what) {
    const int err = errno;
    EXPECT_EQ(rc, 0) << what << ": " << std::strerror(err);
  }

  // A name no entry has had: STEM<round>-<serial> in `dir`.
  std::string Fresh(const std::string& dir, const char* stem) {
    return dir + "/" + stem + std::to_string(round_) + "-" + std::to_string(serial_++);
  }

  void ChangeFile(const std::string& f, const struct stat& st) {
    ++changes_;
    switch (rnd_.Uniform(14)) {
      case 0: Ok(::unlink(f.c_str()), f); break;
      case 1:  // a file becomes a directory, and a later round makes it a file again
        Ok(::unlink(f.c_str()), f);
        Ok(::mkdir(f.c_str(), 0755), f);
        WriteFile(f + "/in", "x");
        turned_.push_back(f);
        break;
      case 2: WriteFile(f, std::string(rnd_.Uniform(3000), 'z')); break;
      case 3:
        Ok(::rename(f.c_str(), Fresh(rnd_.OneIn(2) ? ParentOf(f) : root_, "mv").c_str()), f);
        break;
      case 4: ReuseInode(f, st); break;
      case 5: Redate(f); break;
      case 6: {
        char buf[16];
        if (::lgetxattr(f.c_str(), "user.project", buf, sizeof(buf)) >= 0) {
          Ok(::lremovexattr(f.c_str(), "user.project"), f);
        } else {
          Ok(::lsetxattr(f.c_str(), "user.project", "gamma", 5, 0), f);
        }
        break;
      }
      case 7: Ok(::link(f.c_str(), Fresh(ParentOf(f), "hl").c_str()), f); break;
      default: --changes_; break;
    }
  }

  void ChangeDirectory(const std::string& d) {
    ++changes_;
    switch (rnd_.Uniform(12)) {
      case 0: Ok(::rename(d.c_str(), Fresh(ParentOf(d), "dir").c_str()), d); break;
      case 1: Ok(::rename(d.c_str(), Fresh(root_, "up").c_str()), d); break;
      case 2:  // a directory becomes a file: a small one, or a few rounds wither the tree
        if (EntriesUnder(d) > kMaxReplacedDir) {
          --changes_;
          break;
        }
        fs::remove_all(d);
        WriteFile(d, "was a directory");
        break;
      case 3: WriteFile(Fresh(d, "in"), "x"); break;
      case 4: {
        const std::string sub = Fresh(d, "sub");
        Ok(::mkdir(sub.c_str(), 0750), sub);
        WriteFile(sub + "/leaf", "leaf");
        break;
      }
      case 5: Redate(d); break;
      default: --changes_; break;
    }
  }

  void ChangeSymlink(const std::string& l) {
    ++changes_;
    switch (rnd_.Uniform(6)) {
      case 0: Ok(::unlink(l.c_str()), l); break;
      case 1:  // another target, of another length: the link's size changes
        Ok(::unlink(l.c_str()), l);
        Ok(::symlink(std::string(1 + rnd_.Uniform(60), 't').c_str(), l.c_str()), l);
        break;
      case 2:
        Ok(::unlink(l.c_str()), l);
        WriteFile(l, "was a link");
        break;
      case 3: Redate(l); break;
      default: --changes_; break;
    }
  }

  // The entries below directory `d`, at most kMaxReplacedDir + 1 of them.
  static int EntriesUnder(const std::string& d) {
    int n = 0;
    for (auto it = fs::recursive_directory_iterator(d);
         it != fs::recursive_directory_iterator() && n <= kMaxReplacedDir; ++it) {
      ++n;
    }
    return n;
  }

  // Deletes `f` and at once creates a file with its size, mode and times.
  void ReuseInode(const std::string& f, const struct stat& st) {
    if (st.st_nlink != 1) return;  // only the last name frees the number
    Ok(::unlink(f.c_str()), f);
    const std::string to = rnd_.OneIn(2) ? f : Fresh(ParentOf(f), "reuse");
    const int fd = ::open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
    ASSERT_GE(fd, 0) << to << ": " << std::strerror(errno);
    Ok(::fchmod(fd, st.st_mode & 07777), to);
    Ok(::ftruncate(fd, st.st_size), to);
    const struct timespec times[2] = {st.st_atim, st.st_mtim};
    Ok(::futimens(fd, times), to);
    struct stat now;
    Ok(::fstat(fd, &now), to);
    ::close(fd);
    ++reuse_attempts_;
    reuses_ += now.st_ino == st.st_ino;
  }

  // A new mtime with nanoseconds, within the last 400 days or (one in eight) in the 1960s.
  void Redate(const std::string& path) {
    const int64_t now = ::time(nullptr);
    const int64_t secs = rnd_.OneIn(8) ? -static_cast<int64_t>(rnd_.Uniform(300'000'000))
                                       : now - static_cast<int64_t>(rnd_.Uniform(400 * 86400));
    const struct timespec times[2] = {
        {0, UTIME_OMIT}, {secs, static_cast<long>(rnd_.Uniform(1'000'000'000))}};
    Ok(::utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW), path);
  }

  // Half of the files made directories in earlier rounds become files again.
  void TurnBack() {
    std::vector<std::string> keep;
    for (const std::string& p : turned_) {
      struct stat st;
      if (::lstat(p.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
      if (rnd_.OneIn(2)) {
        keep.push_back(p);
        continue;
      }
      fs::remove_all(p);
      WriteFile(p, "a file again");
      ++changes_;
    }
    turned_ = std::move(keep);
  }

  // The largest directory, in entries below it, that a round replaces by a file. BuildTree's
  // hold some 40 files each: replacing those would soon leave too few entries to test.
  static constexpr int kMaxReplacedDir = 8;

  const std::string root_;
  Random rnd_;
  int round_ = 0;
  int serial_ = 0;
  int changes_ = 0;
  int reuse_attempts_ = 0;
  int reuses_ = 0;
  std::vector<std::string> turned_;  // files made directories, to be made files again
};

// Repeated imports of a changing tree converge to it (docs/reconcile.md): after each, every
// entry the index holds under the volume equals what an lstat walk of the tree says — path,
// type, size, times, inode number, mode, links and the indexed attribute — through renames of
// files and directories, type changes both ways and inode reuse (TreeChanger). An import that
// fails registers nothing, and volumes never overlap.
TEST_F(CliTest, ReimportsOfAChangingTreeConvergeAndVolumesNeverOverlap) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("PROPELLER_SEED=" + std::to_string(seed));
  BuildTree(tree_, seed, 300);
  ASSERT_EQ(Cli({"index", "create", "project", "--type", "hash"}).code, 0);
  ASSERT_EQ(Cli({"import", tree_, "--state", dir_.path() + "/import.state"}).code, 0);
  auto indexed = [&] {
    CliResult r = Cli({"search", "size>=0", "--scope", tree_, "--json"});
    EXPECT_EQ(r.code, 0) << r.err;
    return IndexedLines(r.out);
  };
  EXPECT_EQ(LineDiff(LstatLines(tree_), indexed()), "") << "after the first import";
  TreeChanger changer(tree_, seed + 1);
  for (int round = 1; round <= 6; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    ASSERT_NO_FATAL_FAILURE(changer.Round());
    CliResult again = Cli({"import", tree_});
    ASSERT_EQ(again.code, 0) << again.err;
    EXPECT_NE(again.out.find("reconciled " + tree_), std::string::npos) << again.out;
    const std::vector<std::string> want = LstatLines(tree_);
    EXPECT_EQ(LineDiff(want, indexed()), "");
    EXPECT_GT(want.size(), 100u) << "the tree withered: the rounds test little";
  }
  EXPECT_GT(changer.changes(), 500);
  EXPECT_GT(changer.reuse_attempts(), 10);
  RecordProperty("inode_reuses", std::to_string(changer.reuses()) + " of " +
                                     std::to_string(changer.reuse_attempts()));
  // A directory the checks below use, whatever the rounds did to the tree's own.
  fs::create_directories(tree_ + "/inside");
  WriteFile(tree_ + "/inside/f", "f");
  ASSERT_EQ(Cli({"import", tree_}).code, 0);
  EXPECT_EQ(LineDiff(LstatLines(tree_), indexed()), "");
  // Nothing changed: nothing sent.
  CliResult same = Cli({"import", tree_});
  ASSERT_EQ(same.code, 0) << same.err;
  EXPECT_NE(same.out.find("0 added, 0 changed, 0 removed"), std::string::npos)
      << same.out << same.err;
  // A failed import registers no volume; a directory inside a volume, or holding one, is
  // refused with a message naming the volume.
  const std::string before = Cli({"status"}).out;
  CliResult file = Cli({"import", "/etc/passwd"});
  EXPECT_EQ(file.code, 1);
  EXPECT_NE(file.err.find("not a directory"), std::string::npos) << file.err;
  CliResult inside = Cli({"import", tree_ + "/inside"});
  EXPECT_EQ(inside.code, 1);
  EXPECT_NE(inside.err.find("inside volume"), std::string::npos) << inside.err;
  CliResult holds = Cli({"import", dir_.path()});
  EXPECT_EQ(holds.code, 1);
  EXPECT_NE(holds.err.find("holds volume"), std::string::npos) << holds.err;
  EXPECT_EQ(Cli({"status"}).out.find("/etc/passwd"), std::string::npos);
  std::vector<std::string> src = Search("type=f", {"--scope", tree_ + "/inside"});
  EXPECT_EQ(std::set<std::string>(src.begin(), src.end()).size(), src.size());
}

// Hard links (docs/search.md): a differential test against find. Files with 2- and 3-way
// links inside one directory and across directories; for name, path, ext and keyword
// predicates and several scopes, `propeller search` prints exactly the paths find prints.
TEST_F(CliTest, HardLinksAreSearchedAsFindSeesThem) {
  Random rnd(TestSeed());
  for (const char* d : {"a", "b", "c/sub", "d"}) fs::create_directories(tree_ + "/" + d);
  const char* kStems[] = {"git", "git-add", "notes", "main", "lib", "data"};
  const char* kExts[] = {"", "", ".TXT", ".c", ".h", ".csv"};
  auto name = [&](const std::string& tag) {
    const size_t k = rnd.Uniform(6);
    return kStems[k] + tag + kExts[k];
  };
  for (int i = 0; i < 40; ++i) {
    const char* dirs[] = {"a", "b", "c/sub", "d"};
    const std::string dir = tree_ + "/" + dirs[rnd.Uniform(4)];
    const std::string first = dir + "/" + name(std::to_string(i % 7));
    if (fs::exists(first)) continue;
    WriteFile(first, std::string(rnd.Uniform(100), 'h'));
    const int links = static_cast<int>(rnd.Uniform(3));  // 0, 1 or 2 more names
    for (int l = 0; l < links; ++l) {
      const std::string other = tree_ + "/" + dirs[rnd.Uniform(4)] + "/" +
                                name("-l" + std::to_string(i) + "-" + std::to_string(l));
      ASSERT_EQ(::link(first.c_str(), other.c_str()), 0) << other;
    }
  }
  CliResult imp = Cli({"import", tree_, "--state", dir_.path() + "/import.state"});
  ASSERT_EQ(imp.code, 0) << imp.err;
  auto find = [&](const std::string& scope, const std::vector<std::string>& expr) {
    std::string cmd = "find '" + scope + "' -type f";
    for (const std::string& e : expr) cmd += " '" + e + "'";
    FILE* p = ::popen(cmd.c_str(), "r");
    std::string out;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
    ::pclose(p);
    return Sorted(Lines(out));
  };
  auto keyword = [&](const std::string& scope, const std::string& word) {
    std::vector<std::string> out;
    for (const std::string& p : find(scope, {})) {
      if (PathHasKeyword(p.substr(tree_.size()), word)) out.push_back(p);
    }
    return out;
  };
  struct Case {
    std::string query;
    std::vector<std::string> find;  // empty: the keyword oracle
    std::string word;
  };
  const std::vector<Case> cases = {
      {"type=f & name=git-add1", {"-name", "git-add1"}, ""},
      {"type=f & name~git*", {"-name", "git*"}, ""},
      {"type=f & name~*-l*", {"-name", "*-l*"}, ""},
      {"type=f & ext=c", {"-name", "*.c"}, ""},
      {"type=f & ext=txt", {"-iname", "*.txt"}, ""},
      {"type=f & path~*/b/*", {"-path", "*/b/*"}, ""},
      {"type=f & path~*/c/sub/*.h*", {"-path", "*/c/sub/*.h*"}, ""},
      {"type=f & !(name~git*)", {"!", "-name", "git*"}, ""},
      {"type=f & nlink>=3", {"-links", "+2"}, ""},
      {"type=f & keyword=sub", {}, "sub"},
      {"type=f & keyword=csv", {}, "csv"},
  };
  for (const std::string& scope : {tree_, tree_ + "/a", tree_ + "/b", tree_ + "/c"}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(c.query + " in " + scope);
      const std::vector<std::string> want =
          c.find.empty() ? keyword(scope, c.word) : find(scope, c.find);
      EXPECT_EQ(Sorted(Search(c.query, {"--scope", scope})), want);
    }
  }
  // --json lists every link of a hit.
  CliResult json = Cli({"search", "type=f & nlink>=2", "--json", "--scope", tree_});
  ASSERT_EQ(json.code, 0) << json.err;
  for (const std::string& line : Lines(json.out)) {
    EXPECT_NE(line.find("\"links\":[\"" + tree_), std::string::npos) << line;
  }
}

// propeller volume list|remove: a removed volume's records are gone, its root is no longer
// searchable, and importing it again makes a new volume that matches the tree.
TEST_F(CliTest, AVolumeIsListedRemovedAndImportedAgain) {
  BuildTree(tree_, TestSeed(), 200);
  ASSERT_EQ(Cli({"import", tree_, "--state", dir_.path() + "/import.state"}).code, 0);
  const std::string other = dir_.path() + "/other";
  BuildTree(other, TestSeed() + 1, 50);
  ASSERT_EQ(Cli({"import", other, "--state", dir_.path() + "/import2.state"}).code, 0);
  CliResult list = Cli({"volume", "list"});
  ASSERT_EQ(list.code, 0) << list.err;
  EXPECT_EQ(Lines(list.out), (std::vector<std::string>{"1\t" + tree_, "2\t" + other}));
  const size_t other_before = Search("size>=0", {"--scope", other}).size();
  ASSERT_GT(other_before, 50u);

  CliResult removed = Cli({"volume", "remove", tree_});
  ASSERT_EQ(removed.code, 0) << removed.err;
  EXPECT_NE(removed.out.find("removed volume 1"), std::string::npos) << removed.out;
  EXPECT_EQ(Lines(Cli({"volume", "list"}).out), (std::vector<std::string>{"2\t" + other}));
  CliResult gone = Cli({"search", "size>=0", "--scope", tree_});
  EXPECT_EQ(gone.code, 1);
  EXPECT_NE(gone.err.find("not inside an indexed volume"), std::string::npos) << gone.err;
  // The other volume is untouched; nothing of the removed one is left anywhere.
  std::vector<std::string> all = Search("size>=0");
  EXPECT_EQ(all.size(), other_before);
  for (const std::string& p : all) EXPECT_EQ(p.rfind(tree_, 0), std::string::npos) << p;
  EXPECT_EQ(Cli({"volume", "remove", "1"}).code, 1);  // no such volume any more

  ASSERT_EQ(Cli({"import", tree_, "--state", dir_.path() + "/import3.state"}).code, 0);
  std::vector<std::string> want;
  for (const Entry& e : WalkOracle(tree_)) want.push_back(e.path);
  EXPECT_EQ(Sorted(Search("size>=0", {"--scope", tree_})), Sorted(want));
  EXPECT_EQ(Cli({"volume", "frobnicate"}).code, 2);
}

// The traps of the query language (docs/query.md), through `propeller up` against a tree
// whose modes, names and times are set here: each answer is compared with what the tree holds.
TEST_F(CliTest, TyposAreErrorsAndModesDatesCaseAndRegexMeanWhatTheySay) {
  fs::create_directories(tree_ + "/Src");
  auto make = [&](const std::string& rel, mode_t mode, const char* date) {
    const std::string path = tree_ + "/" + rel;
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ASSERT_GE(fd, 0) << path;
    ::close(fd);
    ASSERT_EQ(::chmod(path.c_str(), mode), 0);
    struct tm tm = {};
    ASSERT_NE(::strptime(date, "%Y-%m-%dT%H:%M:%S", &tm), nullptr);
    const struct timespec times[2] = {{::timegm(&tm), 0}, {::timegm(&tm), 0}};
    ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
  };
  make("Src/Main.C", 0644, "2026-03-05T23:59:59");
  make("Src/util.c", 0664, "2026-03-06T00:00:00");
  make("Src/run.sh", 0755, "2026-03-05T00:00:00");
  make("notes.TXT", 0600, "2025-01-01T12:00:00");
  ASSERT_EQ(Cli({"import", tree_}).code, 0);
  auto names = [&](const std::string& query) {
    std::vector<std::string> out;
    for (const std::string& p : Search(query, {"--scope", tree_})) {
      out.push_back(p.substr(tree_.size() + 1));
    }
    return Sorted(out);
  };
  using V = std::vector<std::string>;
  // Modes are octal with or without the 0; perm reads as find -perm.
  EXPECT_EQ(names("mode=644 & type=f"), (V{"Src/Main.C"}));
  EXPECT_EQ(names("perm=-664 & type=f"), (V{"Src/util.c"}));
  EXPECT_EQ(names("perm=/111 & type=f"), (V{"Src/run.sh"}));
  // = with a date is that day (UTC).
  EXPECT_EQ(names("mtime=2026-03-05"), (V{"Src/Main.C", "Src/run.sh"}));
  EXPECT_EQ(names("mtime=2026-03-05T23:59"), (V{"Src/Main.C"}));
  // Ages count back from now: > is older.
  EXPECT_EQ(names("mtime>1y & type=f"), (V{"notes.TXT"}));
  // Case and regular expressions.
  EXPECT_EQ(names("iname=main.c"), (V{"Src/Main.C"}));
  EXPECT_EQ(names("iname~*.txt"), (V{"notes.TXT"}));
  EXPECT_EQ(names("name=~\"^[a-z]+\\.(c|sh)$\""), (V{"Src/run.sh", "Src/util.c"}));
  EXPECT_EQ(names("user=root & name~*.c"), (V{"Src/util.c"}));
  // A typo is an error naming the nearest attribute, with exit status 1; so is a built-in
  // name given as a user attribute.
  for (const char* typo : {"sise>1m", "mtiem<1d", "projet=alpha"}) {
    CliResult r = Cli({"search", typo});
    EXPECT_EQ(r.code, 1) << typo;
    EXPECT_NE(r.err.find("unknown attribute"), std::string::npos) << typo << ": " << r.err;
  }
  EXPECT_NE(Cli({"search", "sise>1m"}).err.find("did you mean size?"), std::string::npos);
  CliResult shadow = Cli({"attr", "set", tree_ + "/notes.TXT", "size", "7"});
  EXPECT_EQ(shadow.code, 1);
  EXPECT_NE(shadow.err.find("built-in"), std::string::npos) << shadow.err;
  EXPECT_NE(Cli({"index", "create", "perm"}).code, 0);
  // A name becomes known once set: then it is searched, not refused.
  ASSERT_EQ(Cli({"attr", "set", tree_ + "/notes.TXT", "projet", "alpha"}).code, 0);
  EXPECT_EQ(names("projet=alpha"), (V{"notes.TXT"}));
}

TEST_F(CliTest, OutputFormsKeepEveryByteAndFormatPrintsWhatFindPrints) {
  // A file for every byte but NUL and '/', in a name and in a directory's name.
  fs::create_directories(tree_ + "/d");
  std::vector<std::string> want;
  for (int b = 1; b < 256; ++b) {
    if (b == '/') continue;
    const std::string name = std::string("n") + static_cast<char>(b) + "x";
    const std::string path = tree_ + "/d/" + name;
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0640);
    ASSERT_GE(fd, 0) << b;
    ASSERT_EQ(::write(fd, "abc", static_cast<size_t>(b % 4)), b % 4);
    ::close(fd);
    want.push_back(path);
  }
  ASSERT_EQ(::symlink("d/n\x01x", (tree_ + "/link").c_str()), 0);
  ASSERT_EQ(Cli({"import", tree_}).code, 0);
  want = Sorted(want);
  // -0: the exact bytes.
  CliResult nul = Cli({"search", "type=f", "--scope", tree_, "-0"});
  ASSERT_EQ(nul.code, 0) << nul.err;
  EXPECT_EQ(Sorted(Lines(nul.out, '\0')), want);
  // --json: valid UTF-8 lines whose paths decode to the same bytes.
  CliResult json = Cli({"search", "type=f", "--scope", tree_, "--json"});
  ASSERT_EQ(json.code, 0) << json.err;
  std::vector<std::string> decoded;
  for (const std::string& line : Lines(json.out)) decoded.push_back(JsonPathBytes(line));
  EXPECT_EQ(Sorted(decoded), want);
  // --count.
  CliResult count = Cli({"search", "type=f", "--scope", tree_, "--count"});
  EXPECT_EQ(count.out, std::to_string(want.size()) + "\n");
  // --format against GNU find -printf on the same tree (names with newlines excepted: both
  // print them raw, which a line-based comparison cannot split).
  const std::string fmt = "%p|%f|%h|%s|%m|%u|%g|%U|%G|%n|%y|%t|%T@\\n";
  CliResult ours = Cli({"search", "size>=0", "--scope", tree_, "--format", fmt});
  ASSERT_EQ(ours.code, 0) << ours.err;
  CliResult find = RunArgv({"/usr/bin/find", tree_, "-printf", fmt});
  ASSERT_EQ(find.code, 0) << find.err;
  auto records = [](const std::string& text) {
    std::vector<std::string> out;
    for (const std::string& l : Lines(text)) {
      if (l.find("|") != std::string::npos && l.rfind('|') > l.find('|')) out.push_back(l);
    }
    return Sorted(out);
  };
  const std::vector<std::string> find_lines = records(find.out);
  EXPECT_GE(find_lines.size(), want.size());
  EXPECT_EQ(records(ours.out), find_lines);
  // Options go anywhere; contradictory output forms are refused.
  CliResult after = RunArgv({PROPELLER_CLI_BIN, "search", "type=l", "--scope", tree_,
                             "--master", master_, "--count"});
  EXPECT_EQ(after.code, 0) << after.err;
  EXPECT_EQ(after.out, "1\n");
  EXPECT_EQ(Cli({"search", "size>0", "--json", "-0"}).code, 2);
  EXPECT_EQ(Cli({"search", "size>0", "--count", "--long"}).code, 2);
  EXPECT_EQ(Cli({"search", "size>0", "--desc"}).code, 2);
  EXPECT_EQ(Cli({"search", "size>0", "--format", "%Q"}).code, 2);
}

// `up` has options of the same names as global ones (--cluster-key, --insecure): after `up`
// they are its own, not taken as global options (a regression of "options anywhere").
TEST(CliUpTest, UpKeepsItsOwnClusterKeyOption) {
  TempDir dir;
  const std::string key = dir.path() + "/my.key";
  ChildProcess up({PROPELLER_CLI_BIN, "up", "--data", dir.path() + "/data", "--listen",
                   "tcp://127.0.0.1:0", "--node-listen", "ipc://" + dir.path() + "/n.sock",
                   "--cluster-key", key, "--ready-file", dir.path() + "/ready", "--log-level",
                   "warning"},
                  dir.path() + "/up.log");
  ASSERT_TRUE(up.Start());
  for (int i = 0; i < 300 && !fs::exists(dir.path() + "/ready"); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(fs::exists(dir.path() + "/ready"));
  struct stat st;
  ASSERT_EQ(::stat(key.c_str(), &st), 0) << "up did not make its key at --cluster-key";
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(up.Terminate(), 0);
}

TEST_F(CliTest, ErrorsAreOneLineWithDocumentedExitCodes) {
  CliResult bad_query = Cli({"search", "size>>1m"});
  EXPECT_EQ(bad_query.code, 1);
  EXPECT_NE(bad_query.err.find("error at"), std::string::npos) << bad_query.err;
  EXPECT_EQ(Lines(bad_query.err).size(), 1u);
  EXPECT_EQ(Cli({"frobnicate"}).code, 2);
  EXPECT_EQ(Cli({"search"}).code, 2);
  EXPECT_EQ(Cli({"search", "size>1", "--limit", "ten"}).code, 2);
  EXPECT_EQ(Cli({"index", "create", "x", "--type", "trie"}).code, 2);
  // A command given options only: a usage error, not a crash (these two read a missing
  // first argument and died of SIGSEGV).
  for (const char* command : {"index", "attr", "volume", "acg", "watch", "search", "import"}) {
    CliResult r = Cli({command, "--json"});
    EXPECT_EQ(r.code, 2) << command << ": " << r.err;
    EXPECT_FALSE(r.err.empty()) << command;
  }
  CliResult no_dir = Cli({"import", dir_.path() + "/does-not-exist"});
  EXPECT_EQ(no_dir.code, 1);
  EXPECT_NE(no_dir.err.find("does-not-exist"), std::string::npos);
  CliResult outside = Cli({"search", "size>1", "--scope", "/definitely/not/indexed"});
  EXPECT_EQ(outside.code, 1);
  EXPECT_NE(outside.err.find("not inside an indexed volume"), std::string::npos) << outside.err;
  // Nobody listening: a clear error after the timeout, not a hang.
  CliResult down = RunCli({"--timeout-ms", "300", "status"}, "ipc://" + dir_.path() + "/none.sock");
  EXPECT_EQ(down.code, 1);
  EXPECT_EQ(Lines(down.err).size(), 1u) << down.err;
  EXPECT_EQ(Cli({"--help"}).code, 0);
  EXPECT_EQ(Cli({"search", "--help"}).code, 0);
}

}  // namespace
}  // namespace propeller::testing
