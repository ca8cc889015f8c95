// The mount over its backing tree, on real FUSE mounts (issue 25 item 5, docs/security.md
// "The backing tree"): paths of every length the backing file system takes, open files whose
// names are gone served from their handles, and symbolic links planted in the backing tree
// never followed. The oracle is the same sequence of calls on a plain directory.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "client/lib/propeller.h"
#include "common/dir_fd.h"
#include "tests/cluster_harness.h"
#include "tests/mount_harness.h"

namespace propeller {
namespace {

using testing::InChildAs;
using testing::List;
using testing::Mount;
using testing::ReadAll;
using testing::RemoveTreeAt;
using testing::ScopedFd;
using testing::SearchMount;
using testing::WriteFile;

// ---- paths of every length ---------------------------------------------------------------

// A tree deeper than PATH_MAX is reached through descriptors only: std::filesystem and the
// path calls stop at 4,096 bytes. These helpers work relative to an open directory.

// The outcome of a call returning -1 and errno on failure, for comparing two trees.
std::string Outcome(long rc) { return rc < 0 ? std::string("error ") + std::strerror(errno) : "ok"; }

// The names in the directory open as `dir` (no . and ..), sorted, space-separated; or the
// error.
std::string ListAt(int dir) {
  const int fd = ::openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Outcome(-1);
  DIR* d = ::fdopendir(fd);
  if (d == nullptr) {
    ::close(fd);
    return Outcome(-1);
  }
  std::vector<std::string> names;
  while (struct dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n.size() > 16 ? n.substr(0, 16) + "..." : n);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  std::string out = "[";
  for (const std::string& n : names) out += " " + n;
  return out + " ]";
}

// What a test compares of a file: type, permission bits, size, links, owner; or the error.
std::string StatAt(int dir, const char* name, int flags = AT_SYMLINK_NOFOLLOW) {
  struct stat st;
  if (::fstatat(dir, name, &st, flags) != 0) return Outcome(-1);
  std::ostringstream out;
  out << "type " << (st.st_mode & S_IFMT) << " mode 0" << std::oct << (st.st_mode & 07777)
      << std::dec << " size " << st.st_size << " nlink " << st.st_nlink << " uid " << st.st_uid
      << " gid " << st.st_gid;
  return out.str();
}

// The content of `name` in the directory open as `dir`, or the error.
std::string ReadAt(int dir, const char* name) {
  ScopedFd fd(::openat(dir, name, O_RDONLY | O_CLOEXEC));
  if (fd.fd < 0) return Outcome(-1);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd.fd, buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  return n < 0 ? Outcome(-1) : out;
}


// One tree the deep sequence runs on: the directory it starts in and the chain's
// directories, open (levels[0] = the start, levels[i] holds the chain's i-th name).
struct DeepTree {
  std::string start;
  std::vector<int> levels;
  int deep() const { return levels.size() == 17 ? levels.back() : -1; }
  ~DeepTree() {
    for (int fd : levels) ::close(fd);
  }
};

// Removes `name` in directory `dir` (a path) at scope exit, at any depth: the test's
// directories are removed with std::filesystem, which stops at paths of 4,096 bytes.
struct RemoveTreeOnExit {
  std::string dir, name;
  ~RemoveTreeOnExit() {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;
    RemoveTreeAt(fd, name);
    ::close(fd);
  }
};

// Through the mount, every call works on a directory chain whose relative path is 4,095 bytes
// (16 names of 255 bytes) under a backing directory of 240 bytes: mkdir, create, write, read,
// stat, rename, link, symlink and readlink, chmod, chown, times, truncate, xattrs, list,
// unlink, rmdir, a rename of the chain's top — with the results and errors of the same calls
// on a plain directory of the same depth (the oracle), the data in the backing files, and
// every deep file in the index with its size and attributes.
void PathsBeyondPathMaxWorkAsOnAPlainDirectory(const std::vector<std::string>& mount_flags) {
  // 218 bytes: with the shortest test root ("/tmp/propeller-fuse-test-<pid>-<n>", 28 bytes
  // for a one-digit pid) the backing path is at least 247 bytes, whatever the pid.
  const std::string long_name = "backing-" + std::string(210, 'L');
  Mount m(mount_flags, {}, long_name);
  ASSERT_GE(m.backing().size(), 240u);
  ASSERT_TRUE(m.Start());
  const std::string plain_start = m.root() + "/plain-" + std::string(200, 'L');
  ASSERT_EQ(::mkdir(plain_start.c_str(), 0755), 0);
  const RemoveTreeOnExit plain_cleanup{m.root(), plain_start.substr(m.root().size() + 1)};
  const std::string mine_start = m.mnt() + "/t";
  ASSERT_EQ(::mkdir(mine_start.c_str(), 0755), 0);
  const RemoveTreeOnExit mine_cleanup{m.backing(), "t"};
  std::vector<std::string> chain;
  std::string rel;  // the chain's relative path
  for (int i = 0; i < 16; ++i) {
    chain.push_back(std::string(255, static_cast<char>('a' + i)));
    rel += (i == 0 ? "" : "/") + chain.back();
  }
  ASSERT_EQ(rel.size(), 4095u);
  DeepTree trees[2];
  trees[0].start = plain_start;
  trees[1].start = mine_start;
  for (DeepTree& t : trees) {
    t.levels.push_back(::open(t.start.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    ASSERT_GE(t.levels[0], 0) << t.start << ": " << std::strerror(errno);
  }
  // Runs `step` on both trees: the outcomes must be equal.
  auto both = [&](const std::string& what, const std::function<std::string(DeepTree&)>& step) {
    const std::string plain = step(trees[0]);
    const std::string mine = step(trees[1]);
    EXPECT_EQ(mine, plain) << what;
    return plain;
  };
  both("mkdir the chain", [&](DeepTree& t) {
    std::string out;
    for (const std::string& name : chain) {
      const int dir = t.levels.back();
      out += Outcome(::mkdirat(dir, name.c_str(), 0755)) + " ";
      const int fd = ::openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      out += Outcome(fd) + ", ";
      if (fd < 0) break;
      t.levels.push_back(fd);
    }
    return out;
  });
  ASSERT_GE(trees[0].deep(), 0);
  ASSERT_GE(trees[1].deep(), 0) << "the chain could not be made through the mount";
  const std::string content = std::string(3000, 'd') + "the deepest file";
  both("create and write", [&](DeepTree& t) {
    ScopedFd fd(::openat(t.deep(), "file", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640));
    if (fd.fd < 0) return Outcome(-1);
    const ssize_t n = ::write(fd.fd, content.data(), content.size());
    return Outcome(n) + " " + std::to_string(n) + " " + Outcome(fd.Close());
  });
  both("read", [&](DeepTree& t) { return ReadAt(t.deep(), "file"); });
  both("stat", [&](DeepTree& t) { return StatAt(t.deep(), "file"); });
  both("rename", [&](DeepTree& t) {
    return Outcome(::renameat(t.deep(), "file", t.deep(), "renamed")) + " " +
           StatAt(t.deep(), "file") + " " + StatAt(t.deep(), "renamed");
  });
  both("link", [&](DeepTree& t) {
    return Outcome(::linkat(t.deep(), "renamed", t.deep(), "hard", 0)) + " " +
           StatAt(t.deep(), "hard") + " " + StatAt(t.deep(), "renamed");
  });
  both("symlink, readlink", [&](DeepTree& t) {
    std::string out =
        Outcome(::symlinkat("renamed", t.deep(), "sym")) + " " + StatAt(t.deep(), "sym");
    char target[64];
    const ssize_t n = ::readlinkat(t.deep(), "sym", target, sizeof(target));
    out += " " + (n < 0 ? Outcome(-1) : std::string(target, static_cast<size_t>(n)));
    return out + " " + StatAt(t.deep(), "sym", 0);  // followed: the file
  });
  both("chmod", [&](DeepTree& t) {
    return Outcome(::fchmodat(t.deep(), "renamed", 0604, 0)) + " " + StatAt(t.deep(), "renamed");
  });
  both("chown", [&](DeepTree& t) {
    return Outcome(::fchownat(t.deep(), "renamed", 4321, 4322, AT_SYMLINK_NOFOLLOW)) + " " +
           StatAt(t.deep(), "renamed");
  });
  both("times", [&](DeepTree& t) {
    const struct timespec tv[2] = {{1700000000, 0}, {1600000000, 5000}};
    std::string out = Outcome(::utimensat(t.deep(), "renamed", tv, AT_SYMLINK_NOFOLLOW));
    struct stat st;
    if (::fstatat(t.deep(), "renamed", &st, AT_SYMLINK_NOFOLLOW) != 0) return out + Outcome(-1);
    return out + " mtime " + std::to_string(st.st_mtim.tv_sec) + "." +
           std::to_string(st.st_mtim.tv_nsec);
  });
  // truncate(2) and the xattr calls have no *at() form: a path through /proc/self/fd.
  both("truncate", [&](DeepTree& t) {
    return Outcome(::truncate(ProcFdPath(t.deep(), "renamed").c_str(), 1234)) + " " +
           StatAt(t.deep(), "renamed");
  });
  both("setxattr, getxattr, listxattr", [&](DeepTree& t) {
    const std::string p = ProcFdPath(t.deep(), "renamed");
    std::string out = Outcome(::lsetxattr(p.c_str(), "user.depth", "4095", 4, 0));
    char buf[256];
    ssize_t n = ::lgetxattr(p.c_str(), "user.depth", buf, sizeof(buf));
    out += " " + (n < 0 ? Outcome(-1) : std::string(buf, static_cast<size_t>(n)));
    n = ::llistxattr(p.c_str(), buf, sizeof(buf));
    out += " " + (n < 0 ? Outcome(-1) : std::string(buf, static_cast<size_t>(n)));
    n = ::lgetxattr(p.c_str(), "user.missing", buf, sizeof(buf));
    return out + " " + Outcome(n);
  });
  both("mkdir, list", [&](DeepTree& t) {
    return Outcome(::mkdirat(t.deep(), "sub", 0750)) + " " + StatAt(t.deep(), "sub") + " " +
           ListAt(t.deep());
  });
  // The data is in the backing files, reached independently of the mount.
  DeepTree in_backing;
  in_backing.levels.push_back(::open((m.backing() + "/t").c_str(), O_RDONLY | O_DIRECTORY));
  ASSERT_GE(in_backing.levels[0], 0) << std::strerror(errno);
  for (const std::string& name : chain) {
    const int fd = ::openat(in_backing.levels.back(), name.c_str(), O_RDONLY | O_DIRECTORY);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    in_backing.levels.push_back(fd);
  }
  EXPECT_EQ(ReadAt(in_backing.levels.back(), "renamed"), content.substr(0, 1234));
  EXPECT_EQ(StatAt(in_backing.levels.back(), "renamed"), StatAt(trees[0].deep(), "renamed"));

  // The index has the deep file, with both its names, its size and its attribute; the
  // directory gained `sub`.
  auto indexed = [&](const std::string& query, std::vector<ClientHit>* hits) {
    ASSERT_NO_FATAL_FAILURE(SearchMount(query, m.mnt(), hits));
  };
  std::vector<ClientHit> hits;
  ASSERT_NO_FATAL_FAILURE(indexed("name=renamed", &hits));
  ASSERT_EQ(hits.size(), 1u);
  const std::string deep_dir = "/t/" + rel;
  EXPECT_EQ(hits[0].record.paths,
            (std::vector<std::string>{deep_dir + "/hard", deep_dir + "/renamed"}));
  EXPECT_EQ(hits[0].record.size, 1234u);
  EXPECT_EQ(hits[0].record.mode & 07777, 0604u);
  EXPECT_EQ(hits[0].record.uid, 4321u);
  struct stat backing_st;
  ASSERT_EQ(::fstatat(in_backing.levels.back(), "renamed", &backing_st, 0), 0);
  EXPECT_EQ(hits[0].record.mtime,
            backing_st.st_mtim.tv_sec * 1'000'000'000LL + backing_st.st_mtim.tv_nsec);
  ASSERT_EQ(hits[0].record.attrs.count("depth"), 1u);
  EXPECT_EQ(std::get<int64_t>(hits[0].record.attrs.at("depth")), 4095);
  ASSERT_NO_FATAL_FAILURE(indexed("name=sub", &hits));
  ASSERT_EQ(hits.size(), 1u);
  EXPECT_EQ(hits[0].record.paths, (std::vector<std::string>{deep_dir + "/sub"}));
  ASSERT_NO_FATAL_FAILURE(indexed("name=" + chain.back(), &hits));
  ASSERT_EQ(hits.size(), 1u);
  EXPECT_EQ(hits[0].record.nlink, 3u);  // the deep directory: ., .. of sub

  // A rename of the chain's top moves every deep path in the index (the subtree is read
  // again from the backing tree).
  both("rename the chain's top", [&](DeepTree& t) {
    return Outcome(::renameat(t.levels[0], chain[0].c_str(), t.levels[0], "moved")) + " " +
           ListAt(t.levels[0]) + " " + StatAt(t.deep(), "renamed");
  });
  const std::string top = chain[0];
  chain[0] = "moved";
  const std::string moved_dir = "/t/moved" + rel.substr(255);
  ASSERT_NO_FATAL_FAILURE(indexed("name=renamed", &hits));
  ASSERT_EQ(hits.size(), 1u);
  EXPECT_EQ(hits[0].record.paths,
            (std::vector<std::string>{moved_dir + "/hard", moved_dir + "/renamed"}));
  EXPECT_EQ(hits[0].record.size, 1234u);
  ASSERT_NO_FATAL_FAILURE(indexed("size>=0", &hits));
  for (const ClientHit& h : hits) {
    for (const std::string& p : h.record.paths) {
      EXPECT_NE(p.rfind("/t/" + top, 0), 0u) << "a record keeps an old path";
    }
  }

  both("unlink, rmdir", [&](DeepTree& t) {
    std::string out;
    for (const char* name : {"hard", "sym", "renamed"}) {
      out += Outcome(::unlinkat(t.deep(), name, 0)) + " ";
    }
    out += Outcome(::unlinkat(t.deep(), "sub", AT_REMOVEDIR)) + " ";
    out += Outcome(::unlinkat(t.deep(), "renamed", 0)) + " " + ListAt(t.deep());
    return out;
  });
  ASSERT_NO_FATAL_FAILURE(indexed("name=renamed", &hits));
  EXPECT_TRUE(hits.empty());
  both("rmdir the chain", [&](DeepTree& t) {
    std::string out;
    for (size_t i = chain.size(); i-- > 0;) {
      out += Outcome(::unlinkat(t.levels[i], chain[i].c_str(), AT_REMOVEDIR)) + " ";
    }
    return out + ListAt(t.levels[0]);
  });
  ASSERT_NO_FATAL_FAILURE(indexed("type=d", &hits));
  std::set<std::string> dirs;
  for (const ClientHit& h : hits) dirs.insert(h.record.paths.begin(), h.record.paths.end());
  EXPECT_EQ(dirs, (std::set<std::string>{"/", "/t"}));
}

TEST(FuseTest, PathsBeyondPathMaxWorkAsOnThePlainFileSystemAndAreIndexed) {
  PathsBeyondPathMaxWorkAsOnAPlainDirectory({});
}

// Without kept directories every call resolves its directory's whole path, in pieces.
TEST(FuseTest, PathsBeyondPathMaxWorkWithoutTheDirectoryCache) {
  PathsBeyondPathMaxWorkAsOnAPlainDirectory({"--dir-cache", "0"});
}

// ---- open files whose names are gone -----------------------------------------------------

// fstat, fchmod, fchown, ftruncate, futimens, truncate through /proc/self/fd, xattrs and a
// second open through /proc/self/fd of an open file after its unlink, through the mount and
// on a plain directory (the oracle): the same results. Then a file with a second link the
// mount never looked up (made before the mount): after its name here is unlinked, changes
// through the open descriptor reach the index under the other name.
void OpenUnlinkedFilesWorkAsOnAPlainDirectory(const std::vector<std::string>& mount_flags) {
  Mount m(mount_flags);
  ASSERT_EQ(::mkdir((m.backing() + "/pre").c_str(), 0755), 0);
  WriteFile(m.backing() + "/pre/x", "linked before the mount");
  ASSERT_EQ(::link((m.backing() + "/pre/x").c_str(), (m.backing() + "/pre/y").c_str()), 0);
  ASSERT_TRUE(m.Start());
  const std::string plain = m.root() + "/plain";
  const std::string mine = m.mnt() + "/u";
  ASSERT_EQ(::mkdir(plain.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(mine.c_str(), 0755), 0);
  std::string outcome[2];
  for (int side = 0; side < 2; ++side) {
    const std::string path = (side == 0 ? plain : mine) + "/tmp";
    std::string& out = outcome[side];
    ScopedFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
    ASSERT_GE(fd.fd, 0) << path << ": " << std::strerror(errno);
    ASSERT_EQ(::write(fd.fd, "0123456789abcdef", 16), 16);
    ScopedFd ro(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    ASSERT_GE(ro.fd, 0) << std::strerror(errno);
    ASSERT_EQ(::unlink(path.c_str()), 0);
    auto attrs = [&](int f) {
      struct stat st;
      if (::fstat(f, &st) != 0) return Outcome(-1);
      std::ostringstream s;
      s << "mode 0" << std::oct << (st.st_mode & 07777) << std::dec << " size " << st.st_size
        << " nlink " << st.st_nlink << " uid " << st.st_uid << " gid " << st.st_gid;
      // Set explicitly (futimens) or the time of the last change, which differs per tree.
      if (st.st_mtim.tv_sec < 1700000000) {
        s << " mtime " << st.st_mtim.tv_sec << "." << st.st_mtim.tv_nsec;
      } else {
        s << " mtime now";
      }
      return s.str();
    };
    auto step = [&](const std::string& what, long rc) {
      out += what + ": " + Outcome(rc) + " -> " + attrs(fd.fd) + "\n";
    };
    step("after unlink (fstat)", 0);
    step("fchmod", ::fchmod(fd.fd, 0600));
    step("fchown", ::fchown(fd.fd, 12345, 23456));
    step("ftruncate", ::ftruncate(fd.fd, 10));
    const struct timespec tv[2] = {{1700000000, 0}, {1600000000, 700}};
    step("futimens", ::futimens(fd.fd, tv));
    step("fchmod of the read-only descriptor", ::fchmod(ro.fd, 0640));
    step("truncate through /proc of the read-only descriptor",
         ::truncate(("/proc/self/fd/" + std::to_string(ro.fd)).c_str(), 5));
    step("futimens of the read-only descriptor", ::futimens(ro.fd, tv));
    out += "fstat of the read-only descriptor: " + attrs(ro.fd) + "\n";
    step("fsetxattr", ::fsetxattr(fd.fd, "user.gone", "yes", 3, 0));
    char buf[64];
    ssize_t n = ::fgetxattr(ro.fd, "user.gone", buf, sizeof(buf));
    out += "fgetxattr: " + (n < 0 ? Outcome(-1) : std::string(buf, static_cast<size_t>(n))) + "\n";
    {
      // A second open of the file, which has no name: through its descriptor's /proc link.
      ScopedFd again(::open(("/proc/self/fd/" + std::to_string(fd.fd)).c_str(), O_RDWR));
      out += "open through /proc: " + Outcome(again.fd);
      if (again.fd >= 0) {
        n = ::pread(again.fd, buf, sizeof(buf), 0);
        out += " reads " + (n < 0 ? Outcome(-1) : std::string(buf, static_cast<size_t>(n)));
        out += " writes " + Outcome(::pwrite(again.fd, "ZZ", 2, 0));
      }
      out += "\n";
    }
    n = ::pread(fd.fd, buf, sizeof(buf), 0);
    out += "pread: " + (n < 0 ? Outcome(-1) : std::string(buf, static_cast<size_t>(n))) + "\n";
    out += "close: " + Outcome(fd.Close()) + "\n";
    out += "close of the read-only descriptor: " + Outcome(ro.Close()) + "\n";
  }
  EXPECT_EQ(outcome[1], outcome[0]);
  EXPECT_NE(outcome[0].find("fchmod: ok -> mode 0600"), std::string::npos) << outcome[0];

  // pre/x and pre/y are one file; the mount has looked up pre/x only.
  ScopedFd fd(::open((m.mnt() + "/pre/x").c_str(), O_RDWR | O_APPEND | O_CLOEXEC));
  ASSERT_GE(fd.fd, 0) << std::strerror(errno);
  ASSERT_EQ(::unlink((m.mnt() + "/pre/x").c_str()), 0);
  EXPECT_EQ(::fchmod(fd.fd, 0614), 0) << std::strerror(errno);
  struct stat st;
  ASSERT_EQ(::fstat(fd.fd, &st), 0) << std::strerror(errno);
  EXPECT_EQ(st.st_nlink, 1u);
  std::vector<ClientHit> hits;
  ASSERT_NO_FATAL_FAILURE(SearchMount("name=y", m.mnt(), &hits));
  ASSERT_EQ(hits.size(), 1u);
  EXPECT_EQ(hits[0].record.paths, (std::vector<std::string>{"/pre/y"}));
  EXPECT_EQ(hits[0].record.mode & 07777, 0614u);
  // A write and close through it: the other name's record has the new size.
  ASSERT_EQ(::write(fd.fd, " and after", 10), 10);
  ASSERT_EQ(fd.Close(), 0);
  ASSERT_NO_FATAL_FAILURE(SearchMount("name=y", m.mnt(), &hits));
  ASSERT_EQ(hits.size(), 1u);
  ASSERT_EQ(::lstat((m.backing() + "/pre/y").c_str(), &st), 0);
  EXPECT_EQ(hits[0].record.size, static_cast<uint64_t>(st.st_size));
  EXPECT_EQ(st.st_size, 33);
  ASSERT_NO_FATAL_FAILURE(SearchMount("name=x", m.mnt(), &hits));
  EXPECT_TRUE(hits.empty());
}

TEST(FuseTest, OpenUnlinkedFilesAreServedFromTheirHandlesAsOnAPlainDirectory) {
  OpenUnlinkedFilesWorkAsOnAPlainDirectory({});
}

TEST(FuseTest, OpenUnlinkedFilesAreServedFromTheirHandlesWithoutPassthrough) {
  OpenUnlinkedFilesWorkAsOnAPlainDirectory({"--no-passthrough"});
}


// ---- symbolic links planted in the backing tree ------------------------------------------

// Someone who may write in the backing tree directly (not through the mount) swaps a
// directory the kernel knows for a symbolic link to a directory elsewhere, and a file for a
// link to a file elsewhere, while the kernel still holds their entries; then an ordinary user
// works on the old names through the mount. Their calls never reach the links' targets,
// which the user may not change themselves: the daemon (root) follows no link in the backing
// tree (docs/security.md, "The backing tree"). A call fails (ELOOP: a link on the way, or
// where a file was) or, from a directory the mount keeps open, acts on the original files,
// wherever they are now. Returns the errno of each call on d/f, in order.
std::vector<int> PlantedLinksAreNeverFollowed(const std::vector<std::string>& mount_flags) {
  constexpr uid_t kUser = 12345;
  std::vector<int> errors;
  Mount m(mount_flags);
  if (!m.Start()) return errors;
  const std::string outside = m.root() + "/outside";
  EXPECT_EQ(::mkdir(outside.c_str(), 0755), 0);
  WriteFile(outside + "/f", "outside");
  EXPECT_EQ(::chmod((outside + "/f").c_str(), 0644), 0);
  const std::string d = m.mnt() + "/d", g = m.mnt() + "/g";
  EXPECT_EQ(::mkdir(d.c_str(), 0755), 0);
  WriteFile(d + "/f", "inside");
  WriteFile(g, "inside g");
  for (const std::string& p : {d, d + "/f", g}) {
    EXPECT_EQ(::chown(p.c_str(), kUser, kUser), 0) << p;
  }
  // The user looks them up: the kernel holds d, d/f and g (for a day: --cache-timeout).
  EXPECT_EQ(InChildAs(kUser, kUser, [&] {
              struct stat st;
              return ::stat((d + "/f").c_str(), &st) == 0 && ::stat(g.c_str(), &st) == 0 ? 0 : 1;
            }),
            0);
  const std::string b = m.backing();
  EXPECT_EQ(::rename((b + "/d").c_str(), (b + "/d.away").c_str()), 0);
  EXPECT_EQ(::symlink(outside.c_str(), (b + "/d").c_str()), 0);
  EXPECT_EQ(::rename((b + "/g").c_str(), (b + "/g.away").c_str()), 0);
  EXPECT_EQ(::symlink((outside + "/f").c_str(), (b + "/g").c_str()), 0);

  // Every call on the old names, as the user; each errno is recorded (0: it succeeded).
  const std::vector<std::function<int()>> calls = {
      [&] { return ::chmod((d + "/f").c_str(), 0666); },
      [&] { return ::chown((d + "/f").c_str(), kUser, kUser); },
      [&] { return ::truncate((d + "/f").c_str(), 1); },
      [&] { return ::setxattr((d + "/f").c_str(), "user.planted", "x", 1, 0); },
      [&] {
        ScopedFd fd(::open((d + "/f").c_str(), O_WRONLY | O_APPEND));
        return fd.fd < 0 ? -1 : ::write(fd.fd, "+", 1) == 1 ? 0 : -1;
      },
      [&] {
        return ScopedFd(::open((d + "/new").c_str(), O_WRONLY | O_CREAT, 0644)).fd < 0 ? -1 : 0;
      },
      [&] { return ::mkdir((d + "/newdir").c_str(), 0755); },
      [&] { return ::symlink("x", (d + "/newlink").c_str()); },
      [&] { return ::rename((d + "/f").c_str(), (d + "/f2").c_str()); },
      [&] { return ::unlink((d + "/f2").c_str()); },
  };
  for (const auto& call : calls) {
    errors.push_back(InChildAs(kUser, kUser, [&] { return call() == 0 ? 0 : errno; }));
  }
  // A link where the file g was: never opened, changed or read through.
  const std::vector<std::function<int()>> on_g = {
      [&] { return ::chmod(g.c_str(), 0666); },
      [&] { return ::truncate(g.c_str(), 0); },
      [&] { return ::setxattr(g.c_str(), "user.planted", "x", 1, 0); },
      [&] { return ScopedFd(::open(g.c_str(), O_WRONLY | O_APPEND)).fd < 0 ? -1 : 0; },
      [&] { return ScopedFd(::open(g.c_str(), O_RDONLY)).fd < 0 ? -1 : 0; },
  };
  for (size_t i = 0; i < on_g.size(); ++i) {
    EXPECT_NE(InChildAs(kUser, kUser, [&] { return on_g[i]() == 0 ? 0 : errno; }), 0)
        << "call " << i << " on g succeeded";
  }

  // The targets are as they were.
  EXPECT_EQ(List(outside), std::vector<std::string>{"f"});
  struct stat st;
  EXPECT_EQ(::lstat((outside + "/f").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(st.st_size, 7);
  EXPECT_EQ(ReadAll(outside + "/f"), "outside");
  EXPECT_EQ(::lgetxattr((outside + "/f").c_str(), "user.planted", nullptr, 0), -1);
  EXPECT_EQ(ReadAll(b + "/g.away"), "inside g");
  return errors;
}

TEST(FuseTest, LinksPlantedInTheBackingTreeAreNeverFollowed) {
  // The directory is kept open (the DirCache): the calls act on the original files.
  const std::vector<int> errors = PlantedLinksAreNeverFollowed({"--cache-timeout", "86400"});
  EXPECT_EQ(errors, std::vector<int>(10, 0));
}

// Without kept directories every call walks the path again and meets the link: ELOOP.
TEST(FuseTest, LinksPlantedInTheBackingTreeStopThePathWalk) {
  const std::vector<int> errors =
      PlantedLinksAreNeverFollowed({"--cache-timeout", "86400", "--dir-cache", "0"});
  EXPECT_EQ(errors, std::vector<int>(10, ELOOP));
}

}  // namespace
}  // namespace propeller
