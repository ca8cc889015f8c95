// The data-directory fixture of the upgrade test (engine_upgrade_test.cc): a deterministic
// workload, and a dump of what an engine answers about it. make_layout_fixture.cc runs the
// workload with the program of layout 3 and saves its data directory and its dump; the test
// opens that directory with this program (which converts it) and compares the dumps.
// Uses only the Engine API both programs share. Test-only.
#ifndef PROPELLER_INDEXNODE_TESTDATA_LAYOUT_FIXTURE_H_
#define PROPELLER_INDEXNODE_TESTDATA_LAYOUT_FIXTURE_H_

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "common/record.h"
#include "common/status.h"
#include "indexnode/engine.h"
#include "schemas/record_format.h"

namespace propeller::layout_fixture {

inline constexpr uint64_t kAcgs = 4;
inline constexpr uint64_t kFilesPerAcg = 150;
inline constexpr uint64_t kSplitTarget = 5;  // ACG 1's split goes here

inline FileRecord RecordOf(uint64_t acg, uint64_t i) {
  FileRecord r;
  r.id = FileId{1, acg * 10'000 + i};
  const std::string dir = "/p" + std::to_string(acg) + "/d" + std::to_string(i % 7);
  if (i % 50 == 0) {
    r.type = FileType::kDirectory;
    r.paths = {"/p" + std::to_string(acg) + "/sub" + std::to_string(i)};
    r.mode = 040755;
  } else {
    r.paths = {dir + "/f" + std::to_string(i) + (i % 3 == 0 ? ".c" : ".txt")};
    if (i % 41 == 0) r.paths.push_back(dir + "/link" + std::to_string(i));  // a hard link
    r.mode = 0100644;
    r.nlink = static_cast<uint32_t>(r.paths.size());
  }
  r.parent_ino = acg * 10'000 + 9'999;
  r.size = (i * 7919 + acg * 131) % 100'000;
  r.mtime = 1'700'000'000'000'000'000 + static_cast<int64_t>(i) * 1'000'000'007;
  r.ctime = r.mtime + 5;
  r.atime = r.mtime + 9;
  r.uid = 1000 + static_cast<uint32_t>(i % 3);
  r.gid = 100 + static_cast<uint32_t>(acg);
  r.inode_generation = static_cast<uint32_t>(i * 2 + 1);
  if (i % 5 == 0) r.attrs["proj"] = std::string("proj-") + std::to_string(i % 4);
  if (i % 9 == 0) r.attrs["tag"] = static_cast<int64_t>(i % 6);
  return r;
}

// The workload: user indexes, records, edges, deletes, attribute changes, and a split of ACG
// 1 (so routes are stored too). Leaves everything committed.
inline Status Run(Engine* e) {
  PROPELLER_RETURN_IF_ERROR(e->CreateIndex("proj", IndexType::kBTree));
  PROPELLER_RETURN_IF_ERROR(e->CreateIndex("tag", IndexType::kHash));
  std::vector<Update> batch;
  for (uint64_t acg = 1; acg <= kAcgs; ++acg) {
    for (uint64_t i = 0; i < kFilesPerAcg; ++i) {
      Update u;
      u.acg = acg;
      u.record = RecordOf(acg, i);
      batch.push_back(u);
    }
    for (uint64_t i = 1; i + 1 < kFilesPerAcg; i += 11) {  // edges src -> dst
      Update u;
      u.op = UpdateOp::kAddEdge;
      u.acg = acg;
      u.record.id = RecordOf(acg, i).id;
      u.record.inode_generation = RecordOf(acg, i).inode_generation;
      u.edge_dst = RecordOf(acg, i + 1).id;
      u.edge_dst_generation = RecordOf(acg, i + 1).inode_generation;
      u.edge_weight = static_cast<uint32_t>(1 + i % 4);
      batch.push_back(u);
    }
  }
  PROPELLER_RETURN_IF_ERROR(e->Apply(batch));
  batch.clear();
  for (uint64_t acg = 1; acg <= kAcgs; ++acg) {
    for (uint64_t i = 3; i < kFilesPerAcg; i += 17) {  // deletes
      Update u;
      u.op = UpdateOp::kDelete;
      u.acg = acg;
      u.record.id = RecordOf(acg, i).id;
      batch.push_back(u);
    }
    for (uint64_t i = 4; i < kFilesPerAcg; i += 23) {  // attribute changes
      Update u;
      u.op = UpdateOp::kSetAttrs;
      u.acg = acg;
      u.record.id = RecordOf(acg, i).id;
      u.record.attrs["proj"] = std::string("changed");
      batch.push_back(u);
    }
  }
  PROPELLER_RETURN_IF_ERROR(e->Apply(batch));
  PROPELLER_RETURN_IF_ERROR(e->CommitAll());
  std::vector<FileId> moving;
  for (uint64_t i = 0; i < kFilesPerAcg / 2; ++i) moving.push_back(RecordOf(1, i).id);
  PROPELLER_RETURN_IF_ERROR(e->SplitAcg(1, kSplitTarget, moving));
  return e->CommitAll();
}

// One line per hit of each query (ACG, path, a hash of the encoded record) and per edge of
// each ACG, sorted: what the engine answers, in a form two programs can compare.
inline Result<std::string> Dump(Engine* e) {
  std::vector<std::string> lines;
  auto hash = [](const std::string& bytes) {  // FNV-1a: the same in both programs
    uint64_t h = 14695981039346656037ull;
    for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
    return std::string(buf);
  };
  for (const char* q : {"size>=0", "proj=changed", "tag=3", "keyword=d3", "name=*.c",
                        "size>50000 & uid=1001", "path~/p2/*"}) {
    SearchRequest req;
    req.query = q;
    req.now_ns = 1'767'225'600'000'000'000;
    PROPELLER_ASSIGN_OR_RETURN(std::vector<SearchHit> hits, e->SearchAll(req));
    for (const SearchHit& h : hits) {
      std::string encoded;
      EncodeRecord(h.record, &encoded);
      lines.push_back(std::string("Q ") + q + " " + std::to_string(h.acg) + " " + h.path + " " +
                      hash(encoded));
    }
  }
  for (uint64_t acg = 1; acg <= kSplitTarget; ++acg) {
    std::vector<StoredEdge> edges;
    PROPELLER_RETURN_IF_ERROR(e->ListEdges(acg, &edges));
    for (const StoredEdge& x : edges) {
      lines.push_back("E " + std::to_string(acg) + " " + std::to_string(x.src.ino) + " " +
                      std::to_string(x.dst.ino) + " " + std::to_string(x.weight) + " " +
                      std::to_string(x.src_generation) + " " +
                      std::to_string(x.dst_generation));
    }
  }
  std::sort(lines.begin(), lines.end());
  std::string out;
  for (const std::string& l : lines) out += l + "\n";
  return out;
}

}  // namespace propeller::layout_fixture

#endif  // PROPELLER_INDEXNODE_TESTDATA_LAYOUT_FIXTURE_H_
