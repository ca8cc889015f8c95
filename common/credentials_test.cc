// credentials.h: the permission class rules, the kernel's peer credentials with their groups,
// the walk check against a real tree, and the user.* xattr rule against real files (as root,
// which CI is, so that other uids can own them).
#include "common/credentials.h"

#include <fcntl.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace propeller {
namespace {

namespace fs = std::filesystem;

TEST(CredentialsTest, PermissionClassesAreThoseOfPosix) {
  const Credentials alice{1000, 1000, {50}};
  EXPECT_TRUE(CanReadAndSearch(1000, 1000, 0700, alice));
  EXPECT_FALSE(CanReadAndSearch(1000, 1000, 0077, alice));  // owner class decides, not others
  EXPECT_TRUE(CanReadAndSearch(0, 50, 0750, alice));         // supplementary group
  EXPECT_FALSE(CanReadAndSearch(0, 50, 0705, alice));        // group class, not other
  EXPECT_TRUE(CanReadAndSearch(0, 0, 0755, alice));
  EXPECT_FALSE(CanReadAndSearch(0, 0, 0711, alice));         // x without r
  EXPECT_TRUE(CanReadAndSearch(5, 5, 0, Credentials{0, 0, {}}));
}

TEST(CredentialsTest, PeerGroupsComeFromTheProcessOnlyWhileItIsThePeer) {
  const Credentials self = PeerCredentials(::getuid(), ::getgid(), ::getpid());
  EXPECT_EQ(self.uid, ::getuid());
  std::vector<gid_t> groups(static_cast<size_t>(::getgroups(0, nullptr)));
  ::getgroups(static_cast<int>(groups.size()), groups.data());
  EXPECT_EQ(self.groups, std::vector<uint32_t>(groups.begin(), groups.end()));
  // A pid whose process has other ids (reused by someone else): no groups at all.
  const Credentials other = PeerCredentials(::getuid() + 4242, ::getgid(), ::getpid());
  EXPECT_TRUE(other.groups.empty());
  EXPECT_EQ(other.uid, ::getuid() + 4242);
  EXPECT_TRUE(PeerCredentials(7, 7, std::nullopt).groups.empty());
}

class CredentialsFsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to make files of other users";
    std::string tmpl = "/tmp/propeller-creds-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    ASSERT_EQ(::chmod(dir_.c_str(), 0755), 0);
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }
  uint64_t Make(const std::string& rel, uid_t uid, mode_t mode, bool dir = false) {
    const std::string p = dir_ + "/" + rel;
    if (dir) {
      fs::create_directories(p);
    } else {
      std::ofstream(p) << "x";
    }
    EXPECT_EQ(::chown(p.c_str(), uid, uid), 0);
    EXPECT_EQ(::chmod(p.c_str(), mode), 0);
    struct stat st;
    EXPECT_EQ(::lstat(p.c_str(), &st), 0);
    return st.st_ino;
  }
  std::string dir_;
};

TEST_F(CredentialsFsTest, WalkableMeansEveryAncestorGrantsReadAndSearch) {
  Make("home", 0, 0755, true);
  Make("home/bob", 2002, 0700, true);
  Make("home/bob/file", 2002, 0644);
  Make("drop", 0, 0711, true);
  Make("drop/in", 0, 0755, true);
  const Credentials alice{2001, 2001, {}}, bob{2002, 2002, {}};
  EXPECT_TRUE(HostPathWalkable(dir_ + "/home/bob", alice));  // its parent is open
  EXPECT_FALSE(HostPathWalkable(dir_ + "/home/bob/file", alice));
  EXPECT_TRUE(HostPathWalkable(dir_ + "/home/bob/file", bob));
  EXPECT_FALSE(HostPathWalkable(dir_ + "/drop/in/x", alice));  // x only: cannot list it
  EXPECT_FALSE(HostPathWalkable(dir_ + "/missing/x", alice));
  EXPECT_TRUE(HostPathWalkable("/", alice));
}

TEST_F(CredentialsFsTest, UserXattrRuleFollowsTheKernel) {
  const Credentials alice{2001, 2001, {}};
  const uint64_t mine = Make("mine", 2001, 0644);
  const uint64_t roots = Make("roots", 0, 0644);
  const uint64_t shared = Make("shared", 0, 0666);
  const uint64_t readonly = Make("readonly", 2001, 0444);
  const uint64_t sticky = Make("sticky", 0, 01777, true);
  const uint64_t own_dir = Make("own-dir", 2001, 0755, true);
  ASSERT_EQ(::symlink("mine", (dir_ + "/link").c_str()), 0);
  struct stat st;
  ASSERT_EQ(::lstat((dir_ + "/link").c_str(), &st), 0);
  EXPECT_TRUE(CheckUserXattrWrite(dir_ + "/mine", mine, alice).ok());
  EXPECT_EQ(CheckUserXattrWrite(dir_ + "/roots", roots, alice).code(),
            StatusCode::kPermissionDenied);
  EXPECT_TRUE(CheckUserXattrWrite(dir_ + "/shared", shared, alice).ok());
  EXPECT_FALSE(CheckUserXattrWrite(dir_ + "/readonly", readonly, alice).ok());
  EXPECT_FALSE(CheckUserXattrWrite(dir_ + "/sticky", sticky, alice).ok());  // not hers
  EXPECT_TRUE(CheckUserXattrWrite(dir_ + "/own-dir", own_dir, alice).ok());
  EXPECT_FALSE(CheckUserXattrWrite(dir_ + "/link", st.st_ino, alice).ok());  // not reg/dir
  EXPECT_EQ(CheckUserXattrWrite(dir_ + "/mine", mine + 1, alice).code(), StatusCode::kNotFound);
  EXPECT_EQ(CheckUserXattrWrite(dir_ + "/gone", mine, alice).code(), StatusCode::kNotFound);
  // Behind a directory she may not search, not even her own file.
  Make("closed", 0, 0700, true);
  const uint64_t inside = Make("closed/hers", 2001, 0644);
  EXPECT_FALSE(CheckUserXattrWrite(dir_ + "/closed/hers", inside, alice).ok());
  EXPECT_TRUE(CheckUserXattrWrite(dir_ + "/closed/hers", inside, Credentials{0, 0, {}}).ok());
}

TEST_F(CredentialsFsTest, ScopedFsCredentialsRestoresTheThread) {
  const uid_t before_uid = static_cast<uid_t>(::setfsuid(static_cast<uid_t>(-1)));
  Make("closed", 0, 0700, true);
  {
    ScopedFsCredentials as(Credentials{2001, 2001, {7}});
    ASSERT_TRUE(as.active());
    EXPECT_EQ(static_cast<uid_t>(::setfsuid(static_cast<uid_t>(-1))), 2001u);
    // The kernel checks as her now.
    EXPECT_NE(::faccessat(AT_FDCWD, (dir_ + "/closed/.").c_str(), F_OK, AT_EACCESS), 0);
  }
  EXPECT_EQ(static_cast<uid_t>(::setfsuid(static_cast<uid_t>(-1))), before_uid);
  EXPECT_EQ(::faccessat(AT_FDCWD, (dir_ + "/closed/.").c_str(), F_OK, AT_EACCESS), 0);
}

}  // namespace
}  // namespace propeller
