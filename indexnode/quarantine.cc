#include "indexnode/quarantine.h"

#include "common/lmdb_check.h"
#include "common/logging.h"
#include "common/secure_dir.h"
#include "indexnode/acg.h"

namespace propeller {
namespace {

constexpr char kRebuildMark[] = "REBUILD";

std::string TrimLine(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

std::string Quarantine::AcgDir(uint64_t id) const {
  return JoinPath(JoinPath(data_dir_, "acg"), std::to_string(id));
}

Status Quarantine::CheckAtOpen(uint64_t id) {
  const std::string dir = AcgDir(id);
  const std::string data = JoinPath(dir, "data.mdb");
  std::string text;
  if (ReadFileToString(env_, JoinPath(dir, kRebuildMark), &text).ok()) {
    MutexLock lock(&mu_);
    rebuilding_[id] = TrimLine(text);
    any_.store(true, std::memory_order_release);
    return Status::OK();
  }
  if (ReadFileToString(env_, JoinPath(dir, Acg::kDamagedMark), &text).ok()) {
    return Put(id, TrimLine(text));
  }
  if (!env_->FileExists(data)) return Status::OK();
  const bool clean = LmdbFileMatchesMark(data, JoinPath(dir, Acg::kCleanMark));
  Status check = CheckLmdbFile(data, /*deep=*/!clean);
  if (check.code() == StatusCode::kCorruption) return Put(id, check.message());
  return check;
}

Status Quarantine::Put(uint64_t id, const std::string& why, bool keep_data) {
  const std::string root = JoinPath(data_dir_, "quarantine");
  const std::string base = JoinPath(
      root, "acg-" + std::to_string(id) + "-" + std::to_string(env_->NowNanos() / 1'000'000'000));
  std::string to = base;
  for (int n = 2; env_->FileExists(to); ++n) to = base + "-" + std::to_string(n);
  PROPELLER_RETURN_IF_ERROR(MakeDirs(root, 0700));
  PROPELLER_RETURN_IF_ERROR(
      env_->RenameFile(AcgDir(id), to).WithContext("moving damaged " + AcgDir(id)));
  if (store_ != nullptr && !env_->FileExists(JoinPath(to, "data.mdb"))) {
    // Its data in the store, kept beside it (best effort: damaged records may not read), and
    // then gone from the store, so the rebuild starts empty.
    Status kept = keep_data ? store_->ExportAcg(id, JoinPath(to, "data.mdb")) : Status::OK();
    if (!kept.ok()) {
      Log(LogLevel::kWarning, "ACG %llu: its damaged data was not kept: %s",
          static_cast<unsigned long long>(id), kept.ToString().c_str());
    }
    PROPELLER_RETURN_IF_ERROR(store_->DropAcg(id));
  }
  const std::string reason = why + "; quarantined in " + to;
  Log(LogLevel::kError, "ACG %llu is damaged: %s. Searches that need it fail until it is "
                        "rebuilt (a mount rebuilds it from its backing tree; docs/faults.md)",
      static_cast<unsigned long long>(id), reason.c_str());
  PROPELLER_RETURN_IF_ERROR(MakeDirs(AcgDir(id), 0700));
  PROPELLER_RETURN_IF_ERROR(
      WriteFileAtomically(env_, JoinPath(AcgDir(id), kRebuildMark), reason + "\n"));
  MutexLock lock(&mu_);
  rebuilding_[id] = reason;
  any_.store(true, std::memory_order_release);
  return Status::OK();
}

std::string Quarantine::WhyOf(uint64_t id) {
  // Searches ask for every ACG they touch: with nothing quarantined (the usual case) that is
  // one load, not a lock and a lookup per ACG (100,000 ACGs at 100 M files).
  if (!any_.load(std::memory_order_acquire)) return std::string();
  MutexLock lock(&mu_);
  auto it = rebuilding_.find(id);
  return it == rebuilding_.end() ? std::string() : it->second;
}

std::map<uint64_t, std::string> Quarantine::All() {
  MutexLock lock(&mu_);
  return rebuilding_;
}

Status Quarantine::MarkRebuilt(uint64_t id) {
  {
    MutexLock lock(&mu_);
    if (rebuilding_.erase(id) == 0) {
      return Status::NotFound("ACG " + std::to_string(id) + " is not being rebuilt");
    }
  }
  Status s = env_->RemoveFile(JoinPath(AcgDir(id), kRebuildMark));
  if (s.ok()) Log(LogLevel::kInfo, "ACG %llu rebuilt", static_cast<unsigned long long>(id));
  return s;
}

}  // namespace propeller
