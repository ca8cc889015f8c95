#include "indexnode/split_reports.h"

#include <cstdlib>

#include "common/crc32c.h"
#include "schemas/keys.h"

namespace propeller {
namespace {

constexpr char kMagic[] = "PSR1";
constexpr char kPrefix[] = "REPORT.";

}  // namespace

std::string SplitReports::DirOf(uint64_t target) const {
  return JoinPath(acg_root_, std::to_string(target));
}

std::string SplitReports::PathOf(uint64_t target, uint64_t source) const {
  return JoinPath(DirOf(target), kPrefix + std::to_string(source));
}

Status SplitReports::Write(uint64_t target, uint64_t source, std::span<const FileId> files) {
  return WriteFileAtomically(env_, PathOf(target, source), Encode(source, files));
}

void SplitReports::Note(uint64_t target, uint64_t source) {
  MutexLock lock(&mu_);
  noted_.emplace(target, source);
}

Status SplitReports::Forget(uint64_t target, uint64_t source) {
  const std::string path = PathOf(target, source);
  if (env_->FileExists(path)) PROPELLER_RETURN_IF_ERROR(env_->RemoveFile(path));
  MutexLock lock(&mu_);
  noted_.erase({target, source});
  return Status::OK();
}

Status SplitReports::Find(uint64_t id) {
  PROPELLER_ASSIGN_OR_RETURN(std::vector<std::string> names, env_->GetChildren(DirOf(id)));
  const std::string prefix = kPrefix;
  for (const std::string& name : names) {
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    char* end = nullptr;
    const unsigned long long source = std::strtoull(name.c_str() + prefix.size(), &end, 10);
    if (source != 0 && *end == '\0') Note(id, source);
  }
  return Status::OK();
}

Result<std::vector<SplitNotice>> SplitReports::Unreported(
    const std::function<bool(uint64_t source, uint64_t target)>& merged) {
  MutexLock lock(&mu_);
  std::vector<SplitNotice> out;
  for (const auto& [target, source] : noted_) {
    const std::string path = PathOf(target, source);
    std::string bytes;
    PROPELLER_RETURN_IF_ERROR(ReadFileToString(env_, path, &bytes));
    SplitNotice notice;
    notice.target = target;
    PROPELLER_RETURN_IF_ERROR(Decode(bytes, &notice).WithContext(path));
    if (notice.source != source) return Status::Corruption(path + ": names another source");
    notice.merged = merged(source, target);
    out.push_back(std::move(notice));
  }
  return out;
}

Status SplitReports::Reported(uint64_t source, uint64_t target) {
  MutexLock lock(&mu_);
  if (noted_.count({target, source}) == 0) return Status::OK();
  PROPELLER_RETURN_IF_ERROR(env_->RemoveFile(PathOf(target, source)));
  PROPELLER_RETURN_IF_ERROR(env_->SyncDir(DirOf(target)));
  noted_.erase({target, source});
  return Status::OK();
}

uint64_t SplitReports::AnyInto(uint64_t target) {
  MutexLock lock(&mu_);
  auto it = noted_.lower_bound({target, 0});
  return it != noted_.end() && it->first == target ? it->second : 0;
}

std::string SplitReports::Encode(uint64_t source, std::span<const FileId> files) {
  std::string out = kMagic;
  auto put64 = [&](uint64_t v) {
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
  };
  put64(source);
  put64(files.size());
  out.reserve(out.size() + files.size() * kFileIdKeySize + 4);
  for (const FileId& f : files) AppendFileIdKey(f, &out);
  const uint32_t crc = Crc32cMask(Crc32c(out));
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(crc >> (8 * i)));
  return out;
}

Status SplitReports::Decode(std::string_view bytes, SplitNotice* notice) {
  const size_t head = sizeof(kMagic) - 1 + 16;
  auto get = [&](size_t at, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= uint64_t{static_cast<uint8_t>(bytes[at + i])} << (8 * i);
    return v;
  };
  if (bytes.size() < head + 4 || bytes.substr(0, 4) != kMagic) {
    return Status::Corruption("not a split record");
  }
  const uint64_t count = get(12, 8);
  if (count > (bytes.size() - head - 4) / kFileIdKeySize ||
      bytes.size() != head + count * kFileIdKeySize + 4) {
    return Status::Corruption("split record of the wrong length");
  }
  const size_t body = bytes.size() - 4;
  if (Crc32cMask(Crc32c(bytes.substr(0, body))) != get(body, 4)) {
    return Status::Corruption("split record checksum mismatch");
  }
  notice->source = get(4, 8);
  notice->files.resize(count);
  for (uint64_t i = 0; i < count; ++i) {
    PROPELLER_RETURN_IF_ERROR(DecodeFileIdKey(
        bytes.substr(head + i * kFileIdKeySize, kFileIdKeySize), &notice->files[i]));
  }
  return Status::OK();
}

}  // namespace propeller
