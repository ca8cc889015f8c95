// AttrNames: the names of the user attributes this node has accepted, kept in DATA/attrs.
//
// The query language refuses a name that is neither built in nor known (docs/query.md
// "Unknown attributes"): `sise>1m` or `projet=x` must be an error, never a search that
// silently matches nothing. The list only grows (a name stays known after its last file
// lost it, as an empty index would). It is written, durably, before the first update that
// carries a new name is acknowledged, so every name a record holds here is in it.
//
// Data directories written before the list existed have no file: the list is then
// "incomplete" and every valid name is taken as known (the old behaviour) — the same when the
// file is damaged, which must not keep the node from starting. An ACG adopted from another
// node brings names this list may lack; the node it came from still knows them, and a
// cluster search (Client::Search) refuses a name only when no node knows it.
// Thread-safe.
#ifndef PROPELLER_INDEXNODE_ATTR_NAMES_H_
#define PROPELLER_INDEXNODE_ATTR_NAMES_H_

#include <string>
#include <vector>

#include "common/env.h"
#include "common/mutex.h"
#include "common/record.h"
#include "common/status.h"

namespace propeller {

class AttrNames {
 public:
  // Reads `path`. A missing file starts an empty complete list when `fresh` (a new data
  // directory), else an incomplete one.
  Status Open(Env* env, std::string path, bool fresh);

  // Makes every name of `record.attrs` known, writing the file first when one is new.
  Status Note(const FileRecord& record);

  // The names of `names` (user attribute names of a query) that are not known: empty when
  // the list is incomplete.
  std::vector<std::string> Unknown(const std::vector<std::string>& names) const;

  // Every known name, sorted.
  std::vector<std::string> Known() const;
  bool complete() const;

 private:
  Env* env_ = nullptr;
  std::string path_;
  mutable Mutex mu_;
  std::vector<std::string> names_ PROPELLER_GUARDED_BY(mu_);  // sorted, unique
  bool complete_ PROPELLER_GUARDED_BY(mu_) = false;
};

}  // namespace propeller

#endif  // PROPELLER_INDEXNODE_ATTR_NAMES_H_
