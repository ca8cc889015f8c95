#include "client/lib/mount_registry.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "common/record.h"
#include "common/secure_dir.h"

namespace propeller {
namespace {

constexpr char kRootRegistry[] = "/run/propeller/mounts";

// A file name for a mount point.
std::string FileNameOf(const std::string& mountpoint) { return PathAsFileName(mountpoint); }

// /proc/self/mountinfo escapes ' ', '\t', '\n' and '\\' as \ooo.
std::string Unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      int v = (s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0');
      out += static_cast<char>(v);
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace

std::string PathAsFileName(std::string_view path) {
  std::string out;
  out.reserve(path.size() + 8);
  for (char c : path) {
    if (c == '%') {
      out += "%25";
    } else if (c == '/') {
      out += "%2F";
    } else {
      out += c;
    }
  }
  return out;
}

std::string MountRegistryDir() { return DefaultRuntimeDir() + "/mounts"; }

std::string EncodeMountRecord(const MountRecord& r) {
  return "mountpoint " + r.mountpoint + "\nbacking " + r.backing + "\nengine " +
         r.engine_endpoint + "\nmaster " + r.master_endpoint + "\nvolume " +
         std::to_string(r.volume) + "\npid " + std::to_string(r.pid) + "\n";
}

Status DecodeMountRecord(const std::string& text, MountRecord* r) {
  *r = MountRecord{};
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    size_t sp = line.find(' ');
    if (sp == std::string::npos) return Status::Corruption("mount record line without a value");
    std::string key = line.substr(0, sp), value = line.substr(sp + 1);
    if (key == "mountpoint") {
      r->mountpoint = value;
    } else if (key == "backing") {
      r->backing = value;
    } else if (key == "engine") {
      r->engine_endpoint = value;
    } else if (key == "master") {
      r->master_endpoint = value;
    } else if (key == "volume" || key == "pid") {
      char* end = nullptr;
      unsigned long v = std::strtoul(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || v > UINT32_MAX) {
        return Status::Corruption("mount record: bad " + key);
      }
      (key == "volume" ? r->volume : r->pid) = static_cast<uint32_t>(v);
    }  // unknown keys: written by a newer version; ignored
  }
  if (r->mountpoint.empty() || r->engine_endpoint.empty() || r->volume == 0) {
    return Status::Corruption("mount record lacks mountpoint, engine or volume");
  }
  return Status::OK();
}

Status MakeRegistryDirs() {
  PROPELLER_RETURN_IF_ERROR(PrepareRuntimeDir(DefaultRuntimeDir()));
  return PrepareRuntimeDir(MountRegistryDir());
}

Status WriteMountRecord(const MountRecord& record) {
  PROPELLER_RETURN_IF_ERROR(MakeRegistryDirs());
  const std::string path = MountRegistryDir() + "/" + FileNameOf(record.mountpoint);
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  ::unlink(tmp.c_str());
  // Exactly 0644 (every user's searches read it), never through a link.
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return Status::IOError("creating " + tmp, errno);
  const std::string text = EncodeMountRecord(record);
  const bool ok = ::fchmod(fd, 0644) == 0 &&
                  ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const int err = errno;
  ::close(fd);
  if (!ok) {
    ::unlink(tmp.c_str());
    return Status::IOError("writing " + tmp, err);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) return Status::IOError("renaming " + tmp, errno);
  return Status::OK();
}

void RemoveMountRecord(const std::string& mountpoint) {
  ::unlink((MountRegistryDir() + "/" + FileNameOf(mountpoint)).c_str());
}

namespace {

// The mount points of every Propeller file system in /proc/self/mountinfo.
std::vector<std::string> PropellerMountPoints() {
  std::vector<std::string> out;
  std::ifstream info("/proc/self/mountinfo");
  std::string line;
  while (std::getline(info, line)) {
    // "36 35 98:0 /root /mnt/x rw,noatime master:1 - fuse.propeller propeller:/src rw,..."
    std::istringstream in(line);
    std::vector<std::string> fields;
    std::string f;
    while (in >> f) fields.push_back(f);
    size_t dash = 0;
    while (dash < fields.size() && fields[dash] != "-") ++dash;
    if (fields.size() < 5 || dash + 1 >= fields.size()) continue;
    if (fields[dash + 1] != "fuse.propeller") continue;
    out.push_back(Unescape(fields[4]));
  }
  return out;
}

// The record of the mount at `mountpoint`: this user's registry, then root's (a mount root
// made for every user).
Result<MountRecord> RecordOf(const std::string& mountpoint) {
  std::vector<std::string> dirs = {MountRegistryDir()};
  if (MountRegistryDir() != kRootRegistry) dirs.push_back(kRootRegistry);
  for (const std::string& dir : dirs) {
    std::ifstream in(dir + "/" + FileNameOf(mountpoint));
    if (!in) continue;
    std::stringstream ss;
    ss << in.rdbuf();
    MountRecord r;
    PROPELLER_RETURN_IF_ERROR(DecodeMountRecord(ss.str(), &r).WithContext(dir));
    if (r.mountpoint != mountpoint) continue;
    return r;
  }
  return Status::NotFound("no query engine is registered for the Propeller mount at " +
                          mountpoint +
                          " (was it mounted by another propeller version or namespace?)");
}

}  // namespace

Result<std::optional<MountRecord>> FindMountFor(const std::string& path) {
  std::string best;
  for (const std::string& mp : PropellerMountPoints()) {
    if (PathInScope(path, mp) && mp.size() > best.size()) best = mp;
  }
  if (best.empty()) return std::optional<MountRecord>();
  PROPELLER_ASSIGN_OR_RETURN(MountRecord r, RecordOf(best));
  return std::optional<MountRecord>(std::move(r));
}

std::vector<MountRecord> ListMounts() {
  std::vector<MountRecord> out;
  for (const std::string& mp : PropellerMountPoints()) {
    Result<MountRecord> r = RecordOf(mp);
    if (r.ok()) out.push_back(std::move(r).value());
  }
  return out;
}

}  // namespace propeller
