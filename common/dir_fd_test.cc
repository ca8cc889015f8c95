// OpenDirBeneath and the xattr calls by directory and name, on trees deeper than PATH_MAX,
// with openat2 and the *xattrat calls and without them (one component at a time, /proc paths):
// the oracle is the same tree opened one component at a time by the test itself.
#include "common/dir_fd.h"
#include "common/temp_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

namespace propeller {
namespace {

using testing::RemoveTreeAt;

namespace fs = std::filesystem;


// A temporary directory holding a chain of `depth` directories named by 255-byte names
// (depth 20: a relative path of 5,119 bytes), a file at its end and a symbolic link to a
// directory half-way; run with and without openat2 / *xattrat (the parameter).
class DirFdTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    dir_fd_internal::UseNewSyscallsForTest(GetParam());
    std::string tmpl = (fs::temp_directory_path() / "dir-fd-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    root_path_ = tmpl;
    root_.Reset(::open(root_path_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    ASSERT_TRUE(root_.valid());
    UniqueFd cur(::fcntl(root_.get(), F_DUPFD_CLOEXEC, 0));
    for (int i = 0; i < kDepth; ++i) {
      const std::string name(255, static_cast<char>('a' + i));
      rel_ += (i == 0 ? "" : "/") + name;
      ASSERT_EQ(::mkdirat(cur.get(), name.c_str(), 0755), 0) << std::strerror(errno);
      if (i == kDepth / 2) {
        ASSERT_EQ(::symlinkat(".", cur.get(), "link"), 0);
        link_rel_ = rel_.substr(0, rel_.size() - name.size()) + "link/" + name;
      }
      cur.Reset(::openat(cur.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
      ASSERT_TRUE(cur.valid());
    }
    struct stat st;
    ASSERT_EQ(::fstat(cur.get(), &st), 0);
    deep_ino_ = st.st_ino;
    const int f = ::openat(cur.get(), "file", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    ASSERT_GE(f, 0);
    ::close(f);
    deep_ = std::move(cur);
  }
  void TearDown() override {
    deep_.Reset();
    RemoveTreeAt(root_.get(), std::string(255, 'a'));
    root_.Reset();
    ::rmdir(root_path_.c_str());
    dir_fd_internal::UseNewSyscallsForTest(true);
  }

  static constexpr int kDepth = 20;
  std::string root_path_, rel_, link_rel_;
  UniqueFd root_, deep_;
  ino_t deep_ino_ = 0;
};

TEST_P(DirFdTest, OpensDirectoriesBeyondPathMax) {
  ASSERT_GT(rel_.size(), 4096u);
  UniqueFd fd;
  ASSERT_EQ(OpenDirBeneath(root_.get(), rel_, &fd), 0);
  struct stat st;
  ASSERT_EQ(::fstat(fd.get(), &st), 0);
  EXPECT_EQ(st.st_ino, deep_ino_);
  EXPECT_EQ(::faccessat(fd.get(), "file", F_OK, AT_SYMLINK_NOFOLLOW), 0);
  EXPECT_NE(::fcntl(fd.get(), F_GETFL) & O_PATH, 0);
  // With `readable`, open O_RDONLY.
  bool readable = false;
  ASSERT_EQ(OpenDirBeneath(root_.get(), rel_ + "/", &fd, &readable), 0);
  EXPECT_TRUE(readable);
  EXPECT_EQ(::fcntl(fd.get(), F_GETFL) & (O_PATH | O_ACCMODE), O_RDONLY);
  char names[256];
  EXPECT_GE(::flistxattr(fd.get(), names, sizeof(names)), 0) << std::strerror(errno);
  // "" is the directory itself.
  ASSERT_EQ(OpenDirBeneath(deep_.get(), "", &fd), 0);
  ASSERT_EQ(::fstat(fd.get(), &st), 0);
  EXPECT_EQ(st.st_ino, deep_ino_);
}

TEST_P(DirFdTest, NeverFollowsALinkNorLeavesTheDirectory) {
  UniqueFd fd;
  EXPECT_EQ(OpenDirBeneath(root_.get(), link_rel_, &fd), ELOOP);
  EXPECT_EQ(OpenDirBeneath(root_.get(), link_rel_.substr(0, link_rel_.rfind('/')), &fd), ELOOP);
  EXPECT_EQ(OpenDirBeneath(deep_.get(), "..", &fd), EXDEV);
  EXPECT_EQ(OpenDirBeneath(root_.get(), rel_ + "/file", &fd), ENOTDIR);
  EXPECT_EQ(OpenDirBeneath(root_.get(), rel_ + "/missing", &fd), ENOENT);
  EXPECT_EQ(OpenDirBeneath(root_.get(), std::string(256, 'x'), &fd), ENAMETOOLONG);
}

TEST_P(DirFdTest, XattrCallsWorkByDirectoryAndName) {
  const int dir = deep_.get();
  EXPECT_EQ(SetXattrAt(dir, "file", "user.depth", "20", 2, 0), 0) << std::strerror(errno);
  EXPECT_EQ(SetXattrAt(dir, ".", "user.here", "yes", 3, 0), 0) << std::strerror(errno);
  char buf[64];
  ASSERT_EQ(GetXattrAt(dir, "file", "user.depth", buf, sizeof(buf)), 2);
  EXPECT_EQ(std::string(buf, 2), "20");
  EXPECT_EQ(GetXattrAt(dir, "file", "user.depth", nullptr, 0), 2);  // the size
  EXPECT_EQ(GetXattrAt(dir, "file", "user.none", buf, sizeof(buf)), -1);
  EXPECT_EQ(errno, ENODATA);
  ASSERT_EQ(ListXattrAt(dir, "file", buf, sizeof(buf)), 11);
  EXPECT_EQ(std::string(buf, 11), std::string("user.depth\0", 11));
  ASSERT_EQ(ListXattrAt(dir, ".", buf, sizeof(buf)), 10);
  EXPECT_EQ(fgetxattr(dir, "user.here", buf, sizeof(buf)), 3);
  EXPECT_EQ(RemoveXattrAt(dir, "file", "user.depth"), 0);
  EXPECT_EQ(ListXattrAt(dir, "file", buf, sizeof(buf)), 0);
  EXPECT_EQ(ListXattrAt(dir, "missing", buf, sizeof(buf)), -1);
  EXPECT_EQ(errno, ENOENT);
  // A symbolic link is not followed: user.* attributes are refused on links themselves.
  ASSERT_EQ(::symlinkat("file", dir, "sym"), 0);
  EXPECT_EQ(SetXattrAt(dir, "sym", "user.x", "1", 1, 0), -1);
  EXPECT_EQ(errno, EPERM);
  EXPECT_EQ(GetXattrAt(dir, "file", "user.x", buf, sizeof(buf)), -1);
}

TEST_P(DirFdTest, ChmodAtChangesFilesAndNeverFollowsALink) {
  const int dir = deep_.get();
  ASSERT_EQ(ChmodAt(dir, "file", 0604), 0) << std::strerror(errno);
  struct stat st;
  ASSERT_EQ(::fstatat(dir, "file", &st, 0), 0);
  EXPECT_EQ(st.st_mode & 07777, 0604u);
  ASSERT_EQ(::symlinkat("file", dir, "sym"), 0);
  EXPECT_EQ(ChmodAt(dir, "sym", 0600), -1);
  EXPECT_EQ(errno, EOPNOTSUPP);
  ASSERT_EQ(::fstatat(dir, "file", &st, 0), 0);
  EXPECT_EQ(st.st_mode & 07777, 0604u);
  EXPECT_EQ(ChmodAt(dir, "missing", 0600), -1);
  EXPECT_EQ(errno, ENOENT);
}

TEST(ProcFdPathTest, NamesTheDescriptorsLink) {
  EXPECT_EQ(ProcFdPath(7), "/proc/self/fd/7");
  EXPECT_EQ(ProcFdPath(7, "a b"), "/proc/self/fd/7/a b");
}

INSTANTIATE_TEST_SUITE_P(NewAndOldKernels, DirFdTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? std::string("WithOpenat2AndXattrat")
                                             : std::string("ComponentWiseAndProcPaths");
                         });

}  // namespace
}  // namespace propeller
