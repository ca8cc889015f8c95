// Helpers declared in env.h that work on any Env.
#include <string>

#include "common/env.h"

namespace propeller {
namespace {

// Reads are done in chunks of this size: large enough that a system call per chunk is noise,
// small enough not to over-allocate for the many small metadata files.
constexpr size_t kReadChunk = 64 * 1024;

// The directory whose entry must be synced after creating `path`.
std::string DirOf(const std::string& path) {
  const size_t pos = path.rfind('/');
  if (pos == std::string::npos) return ".";
  if (pos == 0) return "/";
  return path.substr(0, pos);
}

}  // namespace

Status ReadFileToString(Env* env, const std::string& path, std::string* out) {
  out->clear();
  PROPELLER_ASSIGN_OR_RETURN(std::unique_ptr<SequentialFile> file, env->NewSequentialFile(path));
  std::string chunk;
  for (;;) {
    PROPELLER_RETURN_IF_ERROR(file->Read(kReadChunk, &chunk));
    if (chunk.empty()) return Status::OK();
    out->append(chunk);
  }
}

// The temporary name is fixed (path + ".tmp") rather than unique so a crash leaves at most one
// stale temporary per target, which the next write simply truncates. REQUIRES (documented in
// env.h's spirit): no two concurrent WriteFileAtomically calls on the same path.
Status WriteFileAtomically(Env* env, const std::string& path, std::string_view data) {
  const std::string tmp = path + ".tmp";
  Status s = [&]() -> Status {
    PROPELLER_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, env->NewWritableFile(tmp));
    PROPELLER_RETURN_IF_ERROR(file->Append(data));
    PROPELLER_RETURN_IF_ERROR(file->Sync());
    PROPELLER_RETURN_IF_ERROR(file->Close());
    return env->RenameFile(tmp, path);
  }();
  if (!s.ok()) {
    (void)env->RemoveFile(tmp);  // best effort; a leftover temporary is harmless
    return s;
  }
  // Without this the rename itself may be lost on power failure, resurrecting the old file.
  return env->SyncDir(DirOf(path));
}

Status CopyFile(Env* env, const std::string& from, const std::string& to) {
  Status s = [&]() -> Status {
    PROPELLER_ASSIGN_OR_RETURN(std::unique_ptr<SequentialFile> in, env->NewSequentialFile(from));
    PROPELLER_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> out, env->NewWritableFile(to));
    std::string chunk;
    for (;;) {
      PROPELLER_RETURN_IF_ERROR(in->Read(1 << 20, &chunk));
      if (chunk.empty()) break;
      PROPELLER_RETURN_IF_ERROR(out->Append(chunk));
    }
    PROPELLER_RETURN_IF_ERROR(out->Sync());
    return out->Close();
  }();
  if (!s.ok()) (void)env->RemoveFile(to);  // best effort
  return s.WithContext("copying " + from + " to " + to);
}

std::string JoinPath(std::string_view a, std::string_view b) {
  if (a.empty()) return std::string(b);
  if (b.empty()) return std::string(a);
  while (!a.empty() && a.back() == '/') a.remove_suffix(1);
  while (!b.empty() && b.front() == '/') b.remove_prefix(1);
  std::string out;
  out.reserve(a.size() + 1 + b.size());
  out.append(a);
  out += '/';
  out.append(b);
  return out;
}

}  // namespace propeller
