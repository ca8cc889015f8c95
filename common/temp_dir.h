// A fresh directory for a test, removed with everything in it on destruction. Test-only.
#ifndef PROPELLER_COMMON_TEMP_DIR_H_
#define PROPELLER_COMMON_TEMP_DIR_H_

#include <stdlib.h>

#include <filesystem>
#include <string>
#include <system_error>

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

}  // namespace propeller::testing

#endif  // PROPELLER_COMMON_TEMP_DIR_H_
