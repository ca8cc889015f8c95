// kSearch on an index node (node_service.h).
#include <algorithm>
#include <optional>
#include <string>

#include "indexnode/server/node_service.h"
#include "schemas/messages.h"

namespace propeller {

std::string NodeService::HandleSearch(std::string_view body, CallerAccess& caller,
                                      rpc::ReplyStream& out) {
  wire::SearchQuery q;
  Status st = wire::Decode(body, &q);
  if (!st.ok()) return BadRequest("search", st);
  if (options_.search_gate) {
    if (Status gate = options_.search_gate(q); !gate.ok()) return wire::EncodeReply(gate, {});
  }

  SearchRequest req;
  req.query = std::move(q.query);
  req.scope = std::move(q.scope);
  req.volume = q.volume;
  std::optional<Credentials> claimed;
  if (q.creds) claimed = Credentials{q.creds->uid, q.creds->gid, std::move(q.creds->groups)};
  // Only a member's claim counts; an admin or user is who the kernel says.
  req.creds = caller.SearchCredentials(std::move(claimed));
  if (caller.filtered()) {
    req.volume_visible = [&caller](uint32_t volume) { return caller.VolumeVisible(volume); };
  }
  req.limit = static_cast<size_t>(q.limit);
  req.sort_by = std::move(q.sort_by);
  req.descending = q.descending;
  req.now_ns = q.now_ns;
  req.acgs = std::move(q.acgs);
  for (wire::VolumeInfo& v : q.roots) req.volume_roots[v.volume] = std::move(v.root);
  // Another node may know an attribute this one does not: the client decides (SearchDone).
  req.report_unknown_attrs = true;
  {
    // An adoption whose flip is unsettled stays out of searches that do not name it: the
    // source may own and update the ACG meanwhile. A search that names it follows a source's
    // report that the ACG moved here (SearchDone.moved), so the move did happen.
    MutexLock lock(&adopted_mu_);
    for (uint64_t acg : unsettled_) {
      if (std::find(req.acgs.begin(), req.acgs.end(), acg) == req.acgs.end()) {
        req.exclude.push_back(acg);
      }
    }
  }

  wire::SearchHitsChunkEncoder chunk;
  bool stream_closed = false;
  std::string frame;
  auto flush = [&]() -> bool {
    if (chunk.hits() == 0) return true;
    chunk.Finish(&frame);
    if (!out.Send(frame)) {
      stream_closed = true;
      return false;
    }
    return true;
  };
  SearchStats stats;
  st = engine_->Search(
      req,
      [&](const SearchHit& hit) {
        // Each hit is encoded as it arrives; a chunk ends at max_chunk_hits or once its
        // encoded size reaches max_chunk_bytes.
        chunk.Add(hit.path, hit.record, hit.acg);
        if (chunk.hits() >= options_.max_chunk_hits || chunk.bytes() >= options_.max_chunk_bytes) {
          return flush();
        }
        return true;
      },
      &stats);
  if (!st.ok()) return wire::EncodeReply(st, {});
  if (Status v = caller.volume_error(); !v.ok()) {
    return wire::EncodeReply(
        Status::Unavailable("cannot check which volumes you may see: " + v.ToString()), {});
  }
  if (stream_closed || !flush()) {
    return wire::EncodeReply(Status::Aborted("search: server stopping"), {});
  }
  wire::SearchDone done;
  done.acgs_total = stats.acgs_total;
  done.acgs_skipped = stats.acgs_skipped;
  done.candidates = stats.candidates;
  done.hits = stats.hits;
  if (req.creds && req.creds->uid != 0) {
    // Records verified and partitions skipped count files the caller may not see ("1
    // candidate" for name=secret.txt says such a file exists): withheld (docs/security.md).
    done.candidates = done.hits;
    done.acgs_skipped = 0;
  }
  for (const auto& [acg, to] : stats.moved) {
    done.moved.push_back(wire::AcgLocation{acg, static_cast<uint32_t>(to), ""});
  }
  done.adopted = std::move(stats.adopted);
  done.unknown_attrs = std::move(stats.unknown_attrs);
  return wire::EncodeOkReply(done);
}

}  // namespace propeller
