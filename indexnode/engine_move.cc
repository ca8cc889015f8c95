// Engine::Impl (engine_impl.h): moving ACGs between nodes (engine.h: FreezeAndCopyAcg,
// AdoptAcg, DropMovedAcg) and the record of the ACGs that moved away (<data>/moved).
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/crc32c.h"
#include "common/lmdb_check.h"
#include "common/logging.h"
#include "common/secure_dir.h"
#include "indexnode/engine_impl.h"
#include "schemas/keys.h"

namespace propeller {

Status Engine::Impl::FreezeAndCopyAcg(uint64_t id, const std::string& path) {
  if (crashed_) return Status::Aborted("engine crashed");
  MutexLock split_lock(&split_mu_);
  Acg* acg = FindAcg(id);
  if (acg == nullptr) return NotHere(id);
  PROPELLER_RETURN_IF_ERROR(CheckMovable(acg));
  if (!frozen_.Freeze(id)) {
    return Status::InvalidArgument("ACG " + std::to_string(id) + " is being moved already");
  }
  // Every Apply from here on sees the mark; the ones that may not have are waited for, so
  // the commit below holds every update acknowledged before this call returns.
  apply_gate_.Drain();
  Status s = CommitAcg(acg);
  if (s.ok() && acg->cached() != 0) {
    s = Status::Internal("updates were cached after the ACG was frozen");
  }
  if (s.ok() && !path.empty()) s = acg->CopyTo(path);
  if (!s.ok()) {
    frozen_.Thaw(id);
    if (!path.empty()) (void)options_.env->RemoveFile(path);  // a partial copy; gone or not
    return s.WithContext("copying ACG " + std::to_string(id) + " for a move");
  }
  return Status::OK();
}

Status Engine::Impl::ThawAcg(uint64_t id) {
  if (!frozen_.IsFrozen(id)) {
    return Status::InvalidArgument("ACG " + std::to_string(id) + " is not being moved");
  }
  frozen_.Thaw(id);
  return Status::OK();
}

Status Engine::Impl::DropMovedAcg(uint64_t id, uint64_t destination, const std::string& set_aside) {
  if (crashed_) return Status::Aborted("engine crashed");
  MutexLock split_lock(&split_mu_);
  Acg* acg = FindAcg(id);
  if (acg == nullptr) {
    if (MovedTo(id) == destination && destination != 0) return Status::OK();  // asked again
    return NotHere(id);
  }
  if (!frozen_.IsFrozen(id)) {
    return Status::InvalidArgument("ACG " + std::to_string(id) +
                                   " is not frozen: FreezeAndCopyAcg comes first");
  }
  // The commit point: from here the ACG is not this node's, also after a crash.
  std::map<uint64_t, uint64_t> moved;
  {
    ReaderLock lock(&acgs_mu_);
    moved = moved_;
  }
  moved[id] = destination;
  PROPELLER_RETURN_IF_ERROR(WriteMoved(moved).WithContext("recording the move of ACG " +
                                                          std::to_string(id)));
  {
    WriterLock lock(&acgs_mu_);
    moved_ = std::move(moved);
    any_moved_.store(true, std::memory_order_release);
  }
  // A failure below leaves the ACG frozen-in-place until restart; searches still see it
  // until the retirement, and report it as moved once it is gone.
  {
    // No search is running while the ACG leaves: each one saw it whole or not at all.
    WriterLock gate(&search_gate_);
    acg->Retire();
    WriterLock lock(&acgs_mu_);
    PruneRecentMovesLocked();
    moved_at_[id] = options_.env->MonotonicNanos();
    adopted_at_.erase(id);
    any_recent_moves_.store(true, std::memory_order_release);
  }
  Status s;
  if (set_aside.empty()) {
    s = RemoveAcgData(id);
  } else {
    // The control directory with the ACG's data beside it (a file Store::IngestAcg takes).
    const size_t slash = set_aside.rfind('/');
    s = MakeDirs(slash == std::string::npos ? "." : set_aside.substr(0, slash), 0700);
    if (s.ok()) s = options_.env->RenameFile(AcgDir(id), set_aside);
    if (s.ok()) s = store_->ExportAcg(id, JoinPath(set_aside, "data.mdb"));
    if (s.ok()) s = store_->DropAcg(id);
  }
  if (!s.ok()) {
    // Moved all the same (recorded above); Open removes what is left.
    Log(LogLevel::kWarning, "ACG %llu moved, but its directory stays until restart: %s",
        static_cast<unsigned long long>(id), s.ToString().c_str());
  }
  frozen_.Thaw(id);
  Log(LogLevel::kInfo, "ACG %llu moved to %llu", static_cast<unsigned long long>(id),
      static_cast<unsigned long long>(destination));
  return Status::OK();
}

Status Engine::Impl::AdoptAcg(uint64_t id, const std::string& path, bool frozen) {
  if (crashed_) return Status::Aborted("engine crashed");
  if (id == 0) return Status::InvalidArgument("ACG ids start at 1");
  MutexLock split_lock(&split_mu_);
  if (FindAcg(id) != nullptr) {
    return Status::AlreadyExists("ACG " + std::to_string(id) + " exists on this node");
  }
  Env* env = options_.env;
  const std::string dir = AcgDir(id);
  const std::string staging = dir + kAdoptSuffix;
  const std::string what = "adopting ACG " + std::to_string(id);
  PROPELLER_RETURN_IF_ERROR(RemoveDir(staging).WithContext(what));
  PROPELLER_RETURN_IF_ERROR(env->CreateDirs(staging).WithContext(what));
  // A copy that came over the network is read whole before LMDB maps it (lmdb_check.h).
  PROPELLER_RETURN_IF_ERROR(CheckLmdbFile(path, /*deep=*/true).WithContext(what));
  PROPELLER_RETURN_IF_ERROR(
      WriteFileAtomically(env, JoinPath(staging, kAdoptMarker), "").WithContext(what));
  PROPELLER_RETURN_IF_ERROR(RemoveDir(dir).WithContext(what));  // a drop's leftover
  PROPELLER_RETURN_IF_ERROR(env->RenameFile(staging, dir).WithContext(what));
  PROPELLER_RETURN_IF_ERROR(env->SyncDir(JoinPath(options_.data_dir, "acg")).WithContext(what));
  auto undo = [&](const Status& s) {
    // Best effort: Open removes an unfinished adoption (its marker stays).
    (void)store_->DropAcg(id);
    (void)env->RemoveRecursively(dir);
    return s.WithContext(what);
  };
  // Into the store under the marker: until the marker goes, a restart drops it again.
  if (Status s = store_->IngestAcg(id, path); !s.ok()) return undo(s);
  (void)env->RemoveFile(path);  // the copy is in the store now
  Result<std::unique_ptr<Acg>> opened = Acg::Open(id, dir, &ctx_);
  if (!opened.ok()) return undo(opened.status());
  Acg* acg = opened->get();
  if (acg->has_routes() || acg->cleanup_pending()) {
    return undo(Status::InvalidArgument("the copy is of an ACG with routes, which cannot move"));
  }
  // Records logged here before now are not this ACG's (it was elsewhere): replay must give
  // it only what comes after.
  Status s = acg->SetAppliedLsn(wal_->next_lsn() - 1);
  std::vector<FileRecord> dirs;
  if (s.ok()) s = acg->ListDirectories(&dirs);
  std::map<uint64_t, uint64_t> moved;
  bool was_moved = false;
  {
    ReaderLock lock(&acgs_mu_);
    moved = moved_;
  }
  was_moved = moved.erase(id) != 0;
  if (s.ok() && was_moved) s = WriteMoved(moved);
  if (!s.ok()) return undo(s);
  for (const FileRecord& d : dirs) dir_table_.Put(d);
  if (frozen) frozen_.Freeze(id);  // before any Apply can find it
  {
    WriterLock lock(&acgs_mu_);
    PruneRecentMovesLocked();
    adopted_at_[id] = options_.env->MonotonicNanos();
    moved_at_.erase(id);
    any_recent_moves_.store(true, std::memory_order_release);
    auto it = acgs_.find(id);
    if (it != acgs_.end()) retired_.push_back(std::move(it->second));  // keep its pointers valid
    acgs_[id] = std::move(*opened);
    ++acgs_changes_;
    moved_ = std::move(moved);
  }
  // The commit point. Failing here leaves the marker: the next Open discards the copy,
  // which is right, since no one was told it arrived.
  PROPELLER_RETURN_IF_ERROR(env->RemoveFile(JoinPath(dir, kAdoptMarker)).WithContext(what));
  PROPELLER_RETURN_IF_ERROR(env->SyncDir(dir).WithContext(what));
  OnAcgOpened(acg);
  return Status::OK();
}

uint64_t Engine::Impl::MovedTo(uint64_t id) {
  ReaderLock lock(&acgs_mu_);
  auto it = moved_.find(id);
  return it == moved_.end() ? 0 : it->second;
}

Status Engine::Impl::NotHere(uint64_t id) {
  const uint64_t to = MovedTo(id);
  if (to != 0) return MovedStatus(id, to);
  return Status::NotFound("no ACG " + std::to_string(id));
}

Status Engine::Impl::MovedError(uint64_t id) {
  const uint64_t to = MovedTo(id);
  return MovedStatus(id, to);
}

Status Engine::Impl::MovedStatus(uint64_t id, uint64_t destination) {
  return Status::Redirect("ACG " + std::to_string(id) + " moved to node " +
                          std::to_string(destination));
}

Status Engine::Impl::CheckMovable(Acg* acg) {
  const std::string name = "ACG " + std::to_string(acg->id());
  {
    ReaderLock lock(&acgs_mu_);
    if (hidden_acg_ == acg->id()) return Status::InvalidArgument(name + " is being split into");
  }
  if (acg->has_routes() || acg->merged_into() != 0 || acg->cleanup_pending()) {
    return Status::InvalidArgument(name +
                                   " has routes from a split or merge and cannot move");
  }
  if (const uint64_t source = reports_.AnyInto(acg->id()); source != 0) {
    return Status::InvalidArgument(name + " holds the unreported split of ACG " +
                                   std::to_string(source) + "; report it first");
  }
  return Status::OK();
}

Status Engine::Impl::WriteMoved(const std::map<uint64_t, uint64_t>& moved) {
  std::string text = "PMV1\n";
  for (const auto& [acg, to] : moved) {
    text += std::to_string(acg) + " " + std::to_string(to) + "\n";
  }
  char crc[32];
  std::snprintf(crc, sizeof(crc), "crc %08x\n", Crc32cMask(Crc32c(text)));
  text += crc;
  return WriteFileAtomically(options_.env, MovedPath(), text);
}

Status Engine::Impl::ReadMoved(std::map<uint64_t, uint64_t>* moved) {
  moved->clear();
  if (!options_.env->FileExists(MovedPath())) return Status::OK();
  std::string text;
  PROPELLER_RETURN_IF_ERROR(ReadFileToString(options_.env, MovedPath(), &text));
  const Status bad = Status::Corruption(MovedPath() + ": not a valid record of moved ACGs");
  const size_t crc_at = text.rfind("crc ");
  if (text.compare(0, 5, "PMV1\n") != 0 || crc_at == std::string::npos) return bad;
  unsigned crc = 0;
  if (std::sscanf(text.c_str() + crc_at, "crc %8x\n", &crc) != 1 ||
      crc != Crc32cMask(Crc32c(std::string_view(text).substr(0, crc_at)))) {
    return bad;
  }
  size_t at = 5;
  while (at < crc_at) {
    const size_t eol = text.find('\n', at);
    if (eol == std::string::npos || eol > crc_at) return bad;
    unsigned long long acg = 0, to = 0;
    char extra = 0;
    if (std::sscanf(text.substr(at, eol - at).c_str(), "%llu %llu%c", &acg, &to, &extra) != 2 ||
        acg == 0) {
      return bad;
    }
    (*moved)[acg] = to;
    at = eol + 1;
  }
  return Status::OK();
}

}  // namespace propeller
