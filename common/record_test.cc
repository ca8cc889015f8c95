// Tests for the path helpers of record.h, including the edge cases their contracts name.
#include "common/record.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common/random.h"

namespace propeller {
namespace {

using Tokens = std::vector<std::string>;

TEST(RecordPathTest, BaseName) {
  EXPECT_EQ(PathBaseName("/a/b.txt"), "b.txt");
  EXPECT_EQ(PathBaseName("/a"), "a");
  EXPECT_EQ(PathBaseName("/"), "");
  EXPECT_EQ(PathBaseName("name"), "name");
  EXPECT_EQ(PathBaseName(""), "");
  EXPECT_EQ(PathBaseName("/a/.bashrc"), ".bashrc");
}

TEST(RecordPathTest, Parent) {
  EXPECT_EQ(PathParent("/a/b.txt"), "/a");
  EXPECT_EQ(PathParent("/a/b/c"), "/a/b");
  EXPECT_EQ(PathParent("/a"), "/");
  EXPECT_EQ(PathParent("/"), "/");
  EXPECT_EQ(PathParent("name"), "");
}

TEST(RecordPathTest, Extension) {
  EXPECT_EQ(NameExtension("x.TAR.gz"), "gz");
  EXPECT_EQ(NameExtension("photo.JPG"), "jpg");
  EXPECT_EQ(NameExtension("Makefile"), "");
  EXPECT_EQ(NameExtension(".bashrc"), "");
  EXPECT_EQ(NameExtension("..bashrc"), "");
  EXPECT_EQ(NameExtension(".config.json"), "json");
  EXPECT_EQ(NameExtension("trailing."), "");
  EXPECT_EQ(NameExtension("."), "");
  EXPECT_EQ(NameExtension(".."), "");
  EXPECT_EQ(NameExtension(""), "");
  EXPECT_EQ(NameExtension("a.b.c.d"), "d");
  EXPECT_EQ(NameExtension("/dir.d/file"), "");  // a whole path: only the name counts
  EXPECT_EQ(NameExtension("caf\xC3\xA9.\xC3\x89T\xC3\x89"), "\xC3\x89t\xC3\x89");  // bytes kept
}

TEST(RecordPathTest, InScope) {
  EXPECT_TRUE(PathInScope("/a", "/a"));
  EXPECT_TRUE(PathInScope("/a/b", "/a"));
  EXPECT_TRUE(PathInScope("/a/b/c", "/a"));
  EXPECT_FALSE(PathInScope("/ab", "/a"));
  EXPECT_FALSE(PathInScope("/", "/a"));
  EXPECT_FALSE(PathInScope("/b", "/a"));
  EXPECT_TRUE(PathInScope("/a/b", "/a/"));  // a trailing slash on the scope is tolerated
  EXPECT_TRUE(PathInScope("/", "/"));
  EXPECT_TRUE(PathInScope("/anything/at/all", "/"));
  EXPECT_FALSE(PathInScope("/a", "/a/b"));
}

TEST(RecordPathTest, KeywordsOfTheContractExample) {
  EXPECT_EQ(PathKeywords("/home/Ann/firefox-bin/x.tar.gz"),
            (Tokens{"home", "ann", "firefox", "bin", "x", "tar", "gz"}));
}

TEST(RecordPathTest, KeywordsEdgeCases) {
  EXPECT_EQ(PathKeywords("/"), Tokens{});
  EXPECT_EQ(PathKeywords(""), Tokens{});
  EXPECT_EQ(PathKeywords("/..."), Tokens{});
  EXPECT_EQ(PathKeywords("/a/file..."), (Tokens{"a", "file"}));
  EXPECT_EQ(PathKeywords("/home/.bashrc"), (Tokens{"home", "bashrc"}));
  EXPECT_EQ(PathKeywords("/SRC/Src/src"), Tokens{"src"});  // lowercased, then deduplicated
  EXPECT_EQ(PathKeywords("/a_b-c d"), (Tokens{"a", "b", "c", "d"}));
  EXPECT_EQ(PathKeywords("/v2/lib64/x86_64"), (Tokens{"v2", "lib64", "x86", "64"}));
  // UTF-8 bytes stay inside tokens; only ASCII letters are lowercased.
  EXPECT_EQ(PathKeywords("/donn\xC3\xA9" "es/\xC3\x89T\xC3\x89.txt"),
            (Tokens{"donn\xC3\xA9" "es", "\xC3\x89t\xC3\x89", "txt"}));
  EXPECT_EQ(PathKeywords("/\xE6\x97\xA5\xE6\x9C\xAC/x"), (Tokens{"\xE6\x97\xA5\xE6\x9C\xAC", "x"}));
  // First-seen order survives deduplication.
  EXPECT_EQ(PathKeywords("/b/a/b/c/a"), (Tokens{"b", "a", "c"}));
}

// PathHasKeyword against the token list it must agree with, on random paths over an alphabet
// with separators, upper case, digits and UTF-8 bytes, probed with their own tokens, with
// near misses (a prefix, an upper-case copy) and with random strings.
TEST(RecordPathTest, HasKeywordAgreesWithKeywords) {
  const std::string alphabet = "aAbB1/._- \xC3\xA9";
  Random rng(TestSeed());
  auto random_string = [&](size_t max_len) {
    std::string s;
    const size_t n = rng.Uniform(max_len + 1);
    for (size_t i = 0; i < n; ++i) s += alphabet[rng.Uniform(alphabet.size())];
    return s;
  };
  for (int round = 0; round < 20000; ++round) {
    const std::string path = "/" + random_string(24);
    const Tokens tokens = PathKeywords(path);
    std::vector<std::string> probes = {random_string(4), ""};
    for (const std::string& t : tokens) {
      probes.push_back(t);
      probes.push_back(t.substr(0, t.size() - 1));
      probes.push_back(t + "a");
      std::string upper = t;
      for (char& c : upper) c = (c >= 'a' && c <= 'z') ? static_cast<char>(c - 32) : c;
      probes.push_back(upper);
    }
    for (const std::string& probe : probes) {
      const bool listed = std::find(tokens.begin(), tokens.end(), probe) != tokens.end();
      ASSERT_EQ(PathHasKeyword(path, probe), listed) << "path " << path << " probe " << probe;
    }
  }
  EXPECT_TRUE(PathHasKeyword("/home/Ann/firefox-bin/x.tar.gz", "firefox"));
  EXPECT_TRUE(PathHasKeyword("/home/Ann/firefox-bin/x.tar.gz", "ann"));
  EXPECT_FALSE(PathHasKeyword("/home/Ann/firefox-bin/x.tar.gz", "Ann"));
  EXPECT_FALSE(PathHasKeyword("/home/Ann/firefox-bin/x.tar.gz", "fire"));
}

TEST(RecordPathTest, ValidatePath) {
  EXPECT_EQ(ValidatePath("/"), "");
  EXPECT_EQ(ValidatePath("/a"), "");
  EXPECT_EQ(ValidatePath("/a/b.c/.hidden/..x/x.."), "");
  EXPECT_NE(ValidatePath(""), "");
  EXPECT_NE(ValidatePath("a/b"), "");
  EXPECT_NE(ValidatePath("/a/"), "");
  EXPECT_NE(ValidatePath("//a"), "");
  EXPECT_NE(ValidatePath("/a//b"), "");
  EXPECT_NE(ValidatePath("/a/./b"), "");
  EXPECT_NE(ValidatePath("/a/../b"), "");
  EXPECT_NE(ValidatePath("/."), "");
  EXPECT_NE(ValidatePath("/.."), "");
  EXPECT_NE(ValidatePath("/a/.."), "");
  EXPECT_NE(ValidatePath(std::string("/a\0b", 4)), "");
  // Deeper than PATH_MAX is a path too (names of 255 bytes at any depth); 64 KiB is the bound.
  std::string deep;
  while (deep.size() + 256 < 65536) deep += "/" + std::string(255, 'x');
  EXPECT_EQ(ValidatePath(deep), "");
  std::string longest = deep + "/" + std::string(65536 - deep.size() - 1, 'y');
  ASSERT_EQ(longest.size(), 65536u);
  EXPECT_EQ(ValidatePath(longest), "");
  EXPECT_NE(ValidatePath(longest + "y"), "");
  // The reason names the problem.
  EXPECT_NE(ValidatePath("relative").find("absolute"), std::string::npos);
}

}  // namespace
}  // namespace propeller
