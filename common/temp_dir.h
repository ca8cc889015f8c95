// Test support for files: a fresh directory removed with everything in it on destruction
// (TempDir), whole-file reads and writes, and a removal that works below PATH_MAX. Test-only.
#ifndef PROPELLER_COMMON_TEMP_DIR_H_
#define PROPELLER_COMMON_TEMP_DIR_H_

#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

namespace propeller::testing {

// Made under $TMPDIR (or /tmp) as <prefix>-XXXXXX; path() is "" when that failed.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "propeller-test") {
    const char* base = getenv("TMPDIR");
    std::string tmpl = std::string(base ? base : "/tmp") + "/" + prefix + "-XXXXXX";
    path_ = mkdtemp(tmpl.data()) ? tmpl : "";
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The whole file ("" when it cannot be read).
inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Replaces the file's contents with `data` (creating it).
inline void WriteFile(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::trunc | std::ios::binary);
  out << data;
}

// Removes `name` in the directory open as `dir`, at any depth (std::filesystem stops at
// PATH_MAX).
inline void RemoveTreeAt(int dir, const std::string& name) {
  struct stat st;
  if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return;
  if (S_ISDIR(st.st_mode)) {
    const int fd = ::openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (DIR* d = fd >= 0 ? ::fdopendir(fd) : nullptr) {
      std::vector<std::string> names;
      while (struct dirent* e = ::readdir(d)) {
        if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) {
          names.push_back(e->d_name);
        }
      }
      for (const std::string& n : names) RemoveTreeAt(::dirfd(d), n);
      ::closedir(d);
    }
  }
  ::unlinkat(dir, name.c_str(), S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0);
}

}  // namespace propeller::testing

#endif  // PROPELLER_COMMON_TEMP_DIR_H_
