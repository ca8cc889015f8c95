// CURVE key generation and key/allowlist files (rpc.h).
//
// File format, one item per line, '#' comment lines and blank lines ignored, surrounding
// whitespace ignored:
//   public <40 Z85 characters>
//   secret <40 Z85 characters>
// A key file has exactly one public line and at most one secret line (which must belong to the
// public key); an allowlist has any number of public lines.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string>
#include <vector>

#include "common/env.h"
#include "common/rpc/rpc.h"
#include "common/rpc/rpc_internal.h"

namespace propeller::rpc {
namespace {

using internal::DecodeZ85Key;

struct KeyLine {
  size_t line_number;
  std::string keyword;  // "public" or "secret"
  std::string key;      // validated Z85
};

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r'; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

Status LineError(const std::string& path, size_t line, std::string_view what) {
  return Status::InvalidArgument(path + ":" + std::to_string(line) + ": " + std::string(what));
}

// Reads and checks every non-comment line of `path`.
Result<std::vector<KeyLine>> ReadKeyLines(const std::string& path) {
  std::string text;
  PROPELLER_RETURN_IF_ERROR(ReadFileToString(Env::Default(), path, &text));
  std::vector<KeyLine> lines;
  size_t line_number = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const std::string_view line = Trim(std::string_view(text).substr(pos, end - pos));
    pos = end + 1;
    ++line_number;
    if (line.empty() || line.front() == '#') continue;
    size_t split = 0;
    while (split < line.size() && !IsSpace(line[split])) ++split;
    const std::string_view keyword = line.substr(0, split);
    const std::string_view key = Trim(line.substr(split));
    if (keyword != "public" && keyword != "secret") {
      return LineError(path, line_number, "expected 'public <key>' or 'secret <key>'");
    }
    if (!DecodeZ85Key(key, nullptr)) {
      return LineError(path, line_number, "malformed key (want 40 Z85 characters)");
    }
    lines.push_back(KeyLine{line_number, std::string(keyword), std::string(key)});
  }
  return lines;
}

bool IsValidKeyPair(const CurveKeys& keys) {
  if (!DecodeZ85Key(keys.public_key, nullptr)) return false;
  if (keys.secret_key.empty()) return true;
  if (!DecodeZ85Key(keys.secret_key, nullptr)) return false;
  char derived[internal::kZ85KeyChars + 1];
  return zmq_curve_public(derived, keys.secret_key.c_str()) == 0 &&
         keys.public_key == std::string_view(derived, internal::kZ85KeyChars);
}

// Writes all of `data` to `fd`.
bool WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

}  // namespace

Result<CurveKeys> GenerateCurveKeys() {
  char public_key[internal::kZ85KeyChars + 1];
  char secret_key[internal::kZ85KeyChars + 1];
  if (zmq_curve_keypair(public_key, secret_key) != 0) {
    return Status::NotSupported("libzmq was built without CURVE");
  }
  return CurveKeys{std::string(public_key, internal::kZ85KeyChars),
                   std::string(secret_key, internal::kZ85KeyChars)};
}

// Not through Env: the file must be created with mode 0600 (a secret key must never exist with
// wider permissions, even briefly), which Env cannot express. Atomic like WriteFileAtomically:
// temporary file, fsync, rename, fsync of the directory.
Status WriteKeyFile(const std::string& path, const CurveKeys& keys) {
  if (!IsValidKeyPair(keys)) {
    return Status::InvalidArgument("not a valid CURVE key pair for " + path);
  }
  std::string text = "# Propeller CURVE key" + std::string(keys.secret_key.empty() ? "" : " pair") +
                     " (Z85). Keep the secret line private.\npublic " + keys.public_key + "\n";
  if (!keys.secret_key.empty()) text += "secret " + keys.secret_key + "\n";

  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Status::IOError("create " + tmp, errno);
  // O_CREAT keeps the mode of a stale temporary left by a crash; force 0600.
  bool ok = ::fchmod(fd, 0600) == 0 && WriteAll(fd, text) && ::fsync(fd) == 0;
  int err = errno;
  if (::close(fd) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    ::unlink(tmp.c_str());
    return Status::IOError("write " + tmp, err);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    err = errno;
    ::unlink(tmp.c_str());
    return Status::IOError("rename " + tmp + " to " + path, err);
  }
  const size_t slash = path.rfind('/');
  const std::string dir =
      slash == std::string::npos ? std::string(".") : (slash == 0 ? "/" : path.substr(0, slash));
  return Env::Default()->SyncDir(dir);
}

// A file holding a secret key must be private to its owner, as ssh requires of private keys:
// a regular file (not a link), owned by root or this process's user, without group or other
// permissions.
static Status CheckSecretFile(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return Status::IOError("stat " + path, errno);
  if (!S_ISREG(st.st_mode)) {
    return Status::InvalidArgument(path + " holds a secret key but is not a regular file (a "
                                   "symbolic link?); give the file itself");
  }
  if (st.st_uid != 0 && st.st_uid != ::geteuid()) {
    return Status::InvalidArgument(path + " holds a secret key but is owned by uid " +
                                   std::to_string(st.st_uid) + "; it must be this user's or root's");
  }
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return Status::InvalidArgument(path + " holds a secret key that others may access (mode " +
                                   mode + "); run chmod 600 " + path);
  }
  return Status::OK();
}

Result<CurveKeys> ReadKeyFile(const std::string& path) {
  PROPELLER_ASSIGN_OR_RETURN(std::vector<KeyLine> lines, ReadKeyLines(path));
  CurveKeys keys;
  for (const KeyLine& line : lines) {
    std::string& slot = line.keyword == "public" ? keys.public_key : keys.secret_key;
    if (!slot.empty()) return LineError(path, line.line_number, "second " + line.keyword + " key");
    slot = line.key;
  }
  if (keys.public_key.empty()) return Status::InvalidArgument(path + ": no 'public' line");
  if (!IsValidKeyPair(keys)) {
    return Status::InvalidArgument(path + ": the secret key does not belong to the public key");
  }
  if (!keys.secret_key.empty()) PROPELLER_RETURN_IF_ERROR(CheckSecretFile(path));
  return keys;
}

Result<std::vector<std::string>> ReadAllowlistFile(const std::string& path) {
  PROPELLER_ASSIGN_OR_RETURN(std::vector<KeyLine> lines, ReadKeyLines(path));
  std::vector<std::string> keys;
  for (const KeyLine& line : lines) {
    if (line.keyword != "public") continue;
    bool seen = false;
    for (const std::string& k : keys) seen = seen || k == line.key;
    if (!seen) keys.push_back(line.key);
  }
  return keys;
}

}  // namespace propeller::rpc
