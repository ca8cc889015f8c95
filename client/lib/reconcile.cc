#include "client/lib/reconcile.h"

#include <chrono>
#include <cstdio>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/tree_walk.h"

namespace propeller {
namespace {

constexpr size_t kBatch = 1000;

std::string Thousands(uint64_t n) {
  std::string s = std::to_string(n);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<size_t>(i), ",");
  return s;
}

// Whether the stored record `held` still describes the walked file `now`. User attributes are
// not compared: the index keeps only those with an index of their name, and setting or
// removing an extended attribute changes the ctime, which is. Nor is the access time: reading
// the tree (this walk, a search's listing, a backup) moves it, so every reconcile would rewrite
// the directories it read; an access-time change alone is picked up with the next other change.
bool Unchanged(const FileRecord& held, const FileRecord& now) {
  return held.paths == now.paths && held.parent_ino == now.parent_ino && held.type == now.type &&
         held.size == now.size && held.mtime == now.mtime && held.ctime == now.ctime &&
         held.uid == now.uid && held.gid == now.gid && held.mode == now.mode &&
         held.nlink == now.nlink;
}

}  // namespace

Status Reconcile(Client* client, const std::string& root, uint32_t volume,
                 ReconcileStats* stats) {
  *stats = ReconcileStats{};
  const auto start = std::chrono::steady_clock::now();
  // What the index holds: every record of the volume, once per file (a hit per link).
  ClientSearchOptions so;
  so.volume = volume;
  so.scope = "/";  // the caller's credentials: root (the mount, import) reads every record
  PROPELLER_ASSIGN_OR_RETURN(std::vector<ClientHit> hits, client->SearchAll("size>=0", so));
  std::unordered_map<FileId, FileRecord, FileIdHash> held;
  held.reserve(hits.size());
  for (ClientHit& h : hits) {
    const FileId id = h.record.id;
    held.try_emplace(id, std::move(h.record));
  }
  hits.clear();
  hits.shrink_to_fit();
  stats->indexed = held.size();

  std::vector<FileUpdate> batch;
  auto flush = [&]() -> Status {
    if (batch.empty()) return Status::OK();
    PROPELLER_RETURN_IF_ERROR(client->Update(batch));
    batch.clear();
    return Status::OK();
  };
  TreeWalkOptions wo;
  wo.volume = volume;
  TreeWalkStats ws;
  Status walked = WalkTree(root, wo, [&](FileRecord&& rec) -> Status {
    auto it = held.find(rec.id);
    if (it != held.end()) {
      const bool same = Unchanged(it->second, rec);
      held.erase(it);
      if (same) return Status::OK();
      ++stats->changed;
    } else {
      ++stats->added;
    }
    FileUpdate u;
    u.op = UpdateOp::kPut;
    u.record = std::move(rec);
    u.app = "reconcile";
    batch.push_back(std::move(u));
    return batch.size() >= kBatch ? flush() : Status::OK();
  }, &ws);
  stats->walked = ws.files + ws.dirs;
  stats->unreadable = ws.skipped;
  PROPELLER_RETURN_IF_ERROR(walked.WithContext("reconciling " + root));
  PROPELLER_RETURN_IF_ERROR(flush());
  // Records whose file the walk did not meet. An entry that could not be read is kept (it may
  // still exist); the delete is conditional (DeleteApplies: the stored paths and ctime), so a
  // file that took the number meanwhile keeps its record.
  if (ws.skipped == 0) {
    for (auto& [id, rec] : held) {
      FileUpdate u;
      u.op = UpdateOp::kDelete;
      u.record.id = id;
      u.record.paths = std::move(rec.paths);
      u.record.ctime = rec.ctime;
      batch.push_back(std::move(u));
      ++stats->removed;
      if (batch.size() >= kBatch) PROPELLER_RETURN_IF_ERROR(flush());
    }
  }
  PROPELLER_RETURN_IF_ERROR(flush());
  stats->seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return Status::OK();
}

std::string ReconcileSummary(const std::string& root, const ReconcileStats& s) {
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "reconciled %s: %s added, %s changed, %s removed of %s entries in %.1f s%s",
                root.c_str(), Thousands(s.added).c_str(), Thousands(s.changed).c_str(),
                Thousands(s.removed).c_str(), Thousands(s.walked).c_str(), s.seconds,
                s.unreadable != 0 ? (", " + Thousands(s.unreadable) +
                                     " unreadable entries (nothing removed)").c_str()
                                  : "");
  return buf;
}

}  // namespace propeller
