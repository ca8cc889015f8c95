// secure_dir.h against the file system it guards: explicit modes whatever the umask, refusal of
// what another user could have planted, narrowing of what older versions left wider. Runs as
// root (CI does) to plant entries owned by another uid; skips those parts otherwise.
#include "common/secure_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace propeller {
namespace {

namespace fs = std::filesystem;

class SecureDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = "/tmp/propeller-securedir-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  static mode_t ModeOf(const std::string& p) {
    struct stat st;
    return ::lstat(p.c_str(), &st) == 0 ? st.st_mode & 07777 : 0;
  }
  std::string dir_;
};

TEST_F(SecureDirTest, MakeDirsSetsTheModeWhateverTheUmask) {
  const mode_t old = ::umask(0);
  ASSERT_TRUE(MakeDirs(dir_ + "/a/b", 0700).ok());
  ::umask(077);
  ASSERT_TRUE(MakeDirs(dir_ + "/c", 0755).ok());
  ::umask(old);
  EXPECT_EQ(ModeOf(dir_ + "/a"), 0700u);
  EXPECT_EQ(ModeOf(dir_ + "/a/b"), 0700u);
  EXPECT_EQ(ModeOf(dir_ + "/c"), 0755u);
  std::ofstream(dir_ + "/file") << "x";
  EXPECT_FALSE(MakeDirs(dir_ + "/file", 0700).ok());
}

TEST_F(SecureDirTest, AncestorsMustBeTrusted) {
  // /tmp is world-writable but sticky: a directory of ours below it is trusted. (This asked
  // about "/tmp/x/y" and so depended on /tmp/x existing, left there by whatever ran before.)
  EXPECT_TRUE(CheckAncestorsTrusted(dir_ + "/y").ok() || ::geteuid() != 0);
  ASSERT_TRUE(MakeDirs(dir_ + "/open/inner", 0700).ok());
  ASSERT_EQ(::chmod((dir_ + "/open").c_str(), 0777), 0);
  Status st = CheckAncestorsTrusted(dir_ + "/open/inner/data");
  EXPECT_EQ(st.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(st.message().find(dir_ + "/open may be written by other users"), std::string::npos)
      << st.ToString();
  ASSERT_EQ(::chmod((dir_ + "/open").c_str(), 01777), 0);  // sticky, like /tmp
  EXPECT_TRUE(CheckAncestorsTrusted(dir_ + "/open/inner/data").ok());
  ASSERT_EQ(::chmod((dir_ + "/open").c_str(), 0775), 0);
  EXPECT_FALSE(CheckAncestorsTrusted(dir_ + "/open/inner/data").ok());  // group-writable
}

TEST_F(SecureDirTest, TrustedDirIsCreatedCheckedAndSetToItsMode) {
  const std::string run = dir_ + "/run";
  ASSERT_TRUE(PrepareTrustedDir(run, 0755).ok());
  EXPECT_EQ(ModeOf(run), 0755u);
  ASSERT_EQ(::chmod(run.c_str(), 0700), 0);
  ASSERT_TRUE(PrepareTrustedDir(run, 0755).ok());
  EXPECT_EQ(ModeOf(run), 0755u);
  ASSERT_EQ(::chmod(run.c_str(), 0777), 0);
  Status st = PrepareTrustedDir(run, 0755);
  EXPECT_EQ(st.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(st.message().find("chmod go-w"), std::string::npos) << st.ToString();
  EXPECT_EQ(ModeOf(run), 0777u);  // refused, not silently changed
  if (::geteuid() != 0) return;
  ASSERT_EQ(::chmod(run.c_str(), 0755), 0);
  ASSERT_EQ(::chown(run.c_str(), 12345, 12345), 0);
  st = PrepareTrustedDir(run, 0755);
  EXPECT_EQ(st.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(st.message().find("owned by uid 12345"), std::string::npos) << st.ToString();
  // A symbolic link is followed only when root or this user made it.
  const std::string target = dir_ + "/target";
  ASSERT_TRUE(MakeDirs(target, 0700).ok());
  const std::string link = dir_ + "/link";
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  EXPECT_TRUE(PrepareTrustedDir(link, 0700).ok());
  ASSERT_EQ(::lchown(link.c_str(), 12345, 12345), 0);
  st = PrepareTrustedDir(link, 0700);
  EXPECT_NE(st.message().find("symbolic link owned by uid 12345"), std::string::npos)
      << st.ToString();
}

TEST_F(SecureDirTest, DataDirRefusesPlantedEntriesAndNarrowsItsOwn) {
  const std::string data = dir_ + "/data";
  ASSERT_TRUE(PrepareDataDir(data).ok());
  EXPECT_EQ(ModeOf(data), 0700u);
  // What an older version left: 0755 directories, 0644 files, a 0777 directory of a mount.
  ASSERT_TRUE(MakeDirs(data + "/node/acg/7", 0755).ok());
  ASSERT_EQ(::chmod((data + "/node/acg/7").c_str(), 0777), 0);
  std::ofstream(data + "/node/acg/7/data.mdb") << "x";
  ASSERT_EQ(::chmod((data + "/node/acg/7/data.mdb").c_str(), 0644), 0);
  ASSERT_EQ(::chmod(data.c_str(), 0755), 0);
  ASSERT_TRUE(PrepareDataDir(data).ok());
  for (const std::string& d : {data, data + "/node", data + "/node/acg", data + "/node/acg/7"}) {
    EXPECT_EQ(ModeOf(d), 0700u) << d;
  }
  EXPECT_EQ(ModeOf(data + "/node/acg/7/data.mdb"), 0600u);

  const std::string precious = dir_ + "/precious";
  std::ofstream(precious) << "root's";
  const std::string planted = data + "/node/acg/7/lock.mdb";
  auto refused = [&](const std::string& want) {
    Status st = PrepareDataDir(data);
    EXPECT_EQ(st.code(), StatusCode::kPermissionDenied) << want;
    EXPECT_NE(st.message().find(want), std::string::npos) << st.ToString();
    std::ifstream in(precious);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(text, "root's");
  };
  ASSERT_EQ(::symlink(precious.c_str(), planted.c_str()), 0);
  refused(planted + " is a symbolic link");
  ASSERT_EQ(::unlink(planted.c_str()), 0);
  ASSERT_EQ(::link(precious.c_str(), planted.c_str()), 0);
  refused(planted + " has 2 hard links");
  ASSERT_EQ(::unlink(planted.c_str()), 0);
  ASSERT_EQ(::mkfifo(planted.c_str(), 0600), 0);
  refused(planted + " is a device, fifo or socket");
  ASSERT_EQ(::unlink(planted.c_str()), 0);
  if (::geteuid() == 0) {
    std::ofstream(planted) << "";
    ASSERT_EQ(::chown(planted.c_str(), 12345, 12345), 0);
    refused(planted + " is owned by uid 12345");
    ASSERT_EQ(::unlink(planted.c_str()), 0);
  }
  ASSERT_EQ(::chmod(data.c_str(), 0770), 0);
  refused("other users may write it");
  ASSERT_EQ(::chmod(data.c_str(), 0700), 0);
  EXPECT_TRUE(PrepareDataDir(data).ok());
}

TEST_F(SecureDirTest, DefaultRuntimeDirFollowsTheEnvironment) {
  ::setenv("PROPELLER_RUNTIME_DIR", "/tmp/somewhere", 1);
  EXPECT_EQ(DefaultRuntimeDir(), "/tmp/somewhere");
  ::unsetenv("PROPELLER_RUNTIME_DIR");
  if (::geteuid() == 0) {
    EXPECT_EQ(DefaultRuntimeDir(), "/run/propeller");
  }
}

}  // namespace
}  // namespace propeller
