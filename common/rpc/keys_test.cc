// Tests of CURVE key generation and the key/allowlist file formats (keys.cc), plus the small
// wire helpers of rpc_internal.h against known vectors.
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "common/env.h"
#include "common/rpc/rpc.h"
#include "common/rpc/rpc_internal.h"

namespace propeller::rpc {
namespace {

class KeysTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/propeller-rpc-keys-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { (void)Env::Default()->RemoveRecursively(dir_); }

  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  std::string WriteText(const std::string& name, const std::string& text) {
    const std::string path = Path(name);
    std::ofstream(path) << text;
    return path;
  }

  std::string dir_;
};

// ZeroMQ's own test vector (RFC 32): these 8 bytes are "HelloWorld"; and a key round trip.
TEST(Z85Test, KnownVectorAndKeyRoundTrip) {
  const uint8_t bytes[8] = {0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B};
  char text[11];
  ASSERT_NE(zmq_z85_encode(text, bytes, 8), nullptr);
  EXPECT_STREQ(text, "HelloWorld");

  std::string binary(32, '\0');
  for (int i = 0; i < 32; ++i) binary[static_cast<size_t>(i)] = static_cast<char>(i * 7 + 1);
  const std::string z85 = internal::EncodeZ85Key(binary);
  ASSERT_EQ(z85.size(), 40u);
  std::string back;
  ASSERT_TRUE(internal::DecodeZ85Key(z85, &back));
  EXPECT_EQ(back, binary);
  EXPECT_FALSE(internal::DecodeZ85Key(z85.substr(0, 39), nullptr));
  EXPECT_FALSE(internal::DecodeZ85Key(z85.substr(0, 35) + "~~~~~", nullptr));  // bad chars
  EXPECT_FALSE(internal::DecodeZ85Key(std::string(40, '"'), nullptr));
  EXPECT_EQ(internal::EncodeZ85Key("short"), "");
}

TEST(RequestIdTest, BigEndian) {
  char out[8];
  internal::EncodeRequestId(0x0102030405060708ull, out);
  EXPECT_EQ(std::string(out, 8), std::string("\x01\x02\x03\x04\x05\x06\x07\x08", 8));
  EXPECT_EQ(internal::DecodeRequestId(out), 0x0102030405060708ull);
  internal::EncodeRequestId(~0ull, out);
  EXPECT_EQ(internal::DecodeRequestId(out), ~0ull);
}

TEST_F(KeysTest, GeneratedKeysAreValidPairs) {
  auto a = GenerateCurveKeys();
  auto b = GenerateCurveKeys();
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(a->public_key.size(), 40u);
  EXPECT_EQ(a->secret_key.size(), 40u);
  EXPECT_NE(a->public_key, b->public_key);
  char derived[41];
  ASSERT_EQ(zmq_curve_public(derived, a->secret_key.c_str()), 0);
  EXPECT_EQ(a->public_key, derived);
}

TEST_F(KeysTest, KeyPairRoundTripWithMode0600) {
  auto keys = GenerateCurveKeys();
  ASSERT_TRUE(keys.ok());
  const std::string path = Path("node.key");
  ASSERT_TRUE(WriteKeyFile(path, *keys).ok());
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_FALSE(Env::Default()->FileExists(path + ".tmp"));

  auto read = ReadKeyFile(path);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read->public_key, keys->public_key);
  EXPECT_EQ(read->secret_key, keys->secret_key);

  // Overwriting replaces the content atomically.
  auto other = GenerateCurveKeys();
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE(WriteKeyFile(path, CurveKeys{other->public_key, ""}).ok());
  read = ReadKeyFile(path);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(read->public_key, other->public_key);
  EXPECT_EQ(read->secret_key, "");
}

TEST_F(KeysTest, WriteRejectsInvalidPairs) {
  auto a = GenerateCurveKeys();
  auto b = GenerateCurveKeys();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(WriteKeyFile(Path("x"), CurveKeys{a->public_key, b->secret_key}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteKeyFile(Path("x"), CurveKeys{"short", ""}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_FALSE(Env::Default()->FileExists(Path("x")));
  EXPECT_EQ(WriteKeyFile(Path("no/such/dir/x"), *a).code(), StatusCode::kIOError);
}

TEST_F(KeysTest, CommentsBlankLinesAndWhitespaceAreAccepted) {
  auto keys = GenerateCurveKeys();
  ASSERT_TRUE(keys.ok());
  const std::string path = WriteText(
      "k", "# comment\n\n   public\t" + keys->public_key + "  \r\n  # another\nsecret " +
               keys->secret_key);  // no final newline
  ASSERT_EQ(::chmod(path.c_str(), 0600), 0);  // a secret key must be private
  auto read = ReadKeyFile(path);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read->public_key, keys->public_key);
  EXPECT_EQ(read->secret_key, keys->secret_key);
}

// As ssh does with private keys: a secret key others could read, or reached through a link,
// is refused with the fix in the message; a public key alone may be world-readable.
TEST_F(KeysTest, SecretKeyFilesMustBePrivate) {
  auto keys = GenerateCurveKeys();
  ASSERT_TRUE(keys.ok());
  const std::string path = Path("pair");
  ASSERT_TRUE(WriteKeyFile(path, *keys).ok());
  ASSERT_TRUE(ReadKeyFile(path).ok());
  for (mode_t mode : {0640, 0604, 0660, 0644}) {
    ASSERT_EQ(::chmod(path.c_str(), mode), 0);
    auto read = ReadKeyFile(path);
    ASSERT_FALSE(read.ok()) << std::oct << mode;
    EXPECT_EQ(read.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(read.status().message().find("chmod 600 " + path), std::string::npos)
        << read.status().ToString();
  }
  ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
  const std::string link = Path("link");
  ASSERT_EQ(::symlink(path.c_str(), link.c_str()), 0);
  EXPECT_EQ(ReadKeyFile(link).status().code(), StatusCode::kInvalidArgument);
  const std::string pub = Path("pub");
  ASSERT_TRUE(WriteKeyFile(pub, CurveKeys{keys->public_key, ""}).ok());
  ASSERT_EQ(::chmod(pub.c_str(), 0644), 0);
  EXPECT_TRUE(ReadKeyFile(pub).ok());
}

TEST_F(KeysTest, MalformedKeyFilesNameTheLine) {
  auto keys = GenerateCurveKeys();
  auto other = GenerateCurveKeys();
  ASSERT_TRUE(keys.ok() && other.ok());
  const std::string pub = "public " + keys->public_key + "\n";
  struct Case {
    std::string text;
    std::string want;  // substring of the error message
  };
  const Case cases[] = {
      {"# c\npublik " + keys->public_key + "\n", ":2: expected"},
      {pub + "secret abc\n", ":2: malformed key"},
      {"public " + keys->public_key.substr(0, 39) + "~\n", ":1: malformed key"},
      {"public " + keys->public_key + " extra\n", ":1: malformed key"},
      {pub + "\n" + pub, ":3: second public key"},
      {pub + "secret " + keys->secret_key + "\nsecret " + keys->secret_key + "\n",
       ":3: second secret key"},
      {"public\n", ":1: malformed key"},
      {"secret " + keys->secret_key + "\n", "no 'public' line"},
      {"", "no 'public' line"},
      {pub + "secret " + other->secret_key + "\n", "does not belong"},
      {std::string("public \0\n", 9), ":1: malformed key"},
  };
  int i = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE("case " + std::to_string(i));
    const std::string path = WriteText("bad" + std::to_string(i++), c.text);
    auto read = ReadKeyFile(path);
    ASSERT_FALSE(read.ok());
    EXPECT_EQ(read.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(read.status().message().find(path), std::string::npos) << read.status().ToString();
    EXPECT_NE(read.status().message().find(c.want), std::string::npos)
        << read.status().ToString();
  }
  EXPECT_EQ(ReadKeyFile(Path("missing")).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(ReadAllowlistFile(Path("missing")).status().code(), StatusCode::kNotFound);
}

TEST_F(KeysTest, AllowlistCollectsPublicKeysInOrder) {
  auto a = GenerateCurveKeys();
  auto b = GenerateCurveKeys();
  auto c = GenerateCurveKeys();
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  // A key-pair file is a valid one-entry allowlist (its secret line is ignored).
  ASSERT_TRUE(WriteKeyFile(Path("pair"), *c).ok());
  auto single = ReadAllowlistFile(Path("pair"));
  ASSERT_TRUE(single.ok());
  EXPECT_EQ(*single, std::vector<std::string>{c->public_key});

  const std::string path = WriteText(
      "allow", "# admitted clients\npublic " + b->public_key + "\npublic " + a->public_key +
                   "\nsecret " + c->secret_key + "\npublic " + b->public_key + "\n");
  auto list = ReadAllowlistFile(path);
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_EQ(*list, (std::vector<std::string>{b->public_key, a->public_key}));

  const std::string bad = WriteText("bad", "public " + a->public_key + "\nallow " +
                                               b->public_key + "\n");
  auto err = ReadAllowlistFile(bad);
  ASSERT_FALSE(err.ok());
  EXPECT_NE(err.status().message().find(":2:"), std::string::npos) << err.status().ToString();

  auto empty = ReadAllowlistFile(WriteText("empty", "# nobody\n"));
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

}  // namespace
}  // namespace propeller::rpc
