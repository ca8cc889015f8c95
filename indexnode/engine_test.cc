// Engine API edge cases and bad input: every malformed option, update, query, scope, sort key
// and index request gets a clear error and leaves the engine working and its data unchanged.
#include "indexnode/engine.h"

#include <gtest/gtest.h>

#include "indexnode/engine_test_util.h"

namespace propeller {
namespace {

using testing::kNow;
using testing::TempDir;

Update Put(uint64_t acg, uint64_t ino, std::vector<std::string> paths, uint64_t size = 10) {
  Update u;
  u.acg = acg;
  u.record.id = FileId{1, ino};
  u.record.paths = std::move(paths);
  u.record.size = size;
  return u;
}

class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    options_.data_dir = dir_.path();
    auto e = Engine::Open(options_);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    engine_ = std::move(e).value();
    Update u = Put(1, 1, {"/a/x.c"});
    ASSERT_TRUE(engine_->Apply({&u, 1}).ok());
  }
  size_t Count(const std::string& query) {
    SearchRequest r;
    r.query = query;
    r.now_ns = kNow;
    auto hits = engine_->SearchAll(r);
    EXPECT_TRUE(hits.ok()) << hits.status().ToString();
    return hits.ok() ? hits->size() : 0;
  }

  TempDir dir_;
  EngineOptions options_;
  std::unique_ptr<Engine> engine_;
};

TEST_F(EngineTest, RejectsBadOptions) {
  EngineOptions o;
  EXPECT_EQ(Engine::Open(o).status().code(), StatusCode::kInvalidArgument);  // no data dir
  TempDir other;
  o.data_dir = other.path();
  o.wal_segment_bytes = 10;
  EXPECT_EQ(Engine::Open(o).status().code(), StatusCode::kInvalidArgument);
  o.wal_segment_bytes = 1 << 20;
  o.group_commit_interval_ns = 0;
  EXPECT_EQ(Engine::Open(o).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(EngineTest, RejectsBadUpdatesAtomically) {
  std::vector<Update> bad = {Put(1, 2, {"/ok"}), Put(0, 3, {"/acg-zero"})};
  EXPECT_EQ(engine_->Apply(bad).code(), StatusCode::kInvalidArgument);
  bad = {Put(1, 2, {"/ok"}), Put(1, 3, {"relative/path"})};
  EXPECT_EQ(engine_->Apply(bad).code(), StatusCode::kInvalidArgument);
  bad = {Put(1, 2, {"/ok"}), Put(1, 3, {"/b", "/a"})};  // unsorted hard-link paths
  EXPECT_EQ(engine_->Apply(bad).code(), StatusCode::kInvalidArgument);
  bad = {Put(1, 2, {"/ok"}), Put(1, 3, {})};
  EXPECT_EQ(engine_->Apply(bad).code(), StatusCode::kInvalidArgument);
  bad = {Put(1, 2, {"/a/../etc"})};
  EXPECT_EQ(engine_->Apply(bad).code(), StatusCode::kInvalidArgument);
  Update weird = Put(1, 4, {"/w"});
  weird.op = static_cast<UpdateOp>(99);
  EXPECT_EQ(engine_->Apply({&weird, 1}).code(), StatusCode::kInvalidArgument);
  // Nothing of the rejected batches was applied.
  EXPECT_EQ(Count("size>=0"), 1u);
}

TEST_F(EngineTest, RejectsBadSearches) {
  SearchRequest r;
  r.query = "size>>1m";
  Status s = engine_->SearchAll(r).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("error at 6"), std::string::npos) << s.ToString();
  r.query = "size>1";
  r.scope = "not/absolute";
  EXPECT_EQ(engine_->SearchAll(r).status().code(), StatusCode::kInvalidArgument);
  r.scope = "/";
  r.sort_by = "colour";
  EXPECT_EQ(engine_->SearchAll(r).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Count("size>1"), 1u);
}

TEST_F(EngineTest, IndexManagementErrorsAndPersistence) {
  EXPECT_EQ(engine_->CreateIndex("path", IndexType::kBTree).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(engine_->CreateIndex("Bad Name", IndexType::kHash).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(engine_->CreateIndex("size", IndexType::kHash).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(engine_->DropIndex("nosuch").code(), StatusCode::kNotFound);
  EXPECT_EQ(engine_->DropIndex("keyword").code(), StatusCode::kInvalidArgument);
  // A user index is built for existing records and survives a reopen.
  Update u = Put(1, 5, {"/p"});
  u.record.attrs["project"] = std::string("alpha");
  ASSERT_TRUE(engine_->Apply({&u, 1}).ok());
  ASSERT_TRUE(engine_->CreateIndex("project", IndexType::kHash).ok());
  EXPECT_EQ(engine_->CreateIndex("project", IndexType::kHash).code(),
            StatusCode::kAlreadyExists);
  EXPECT_EQ(Count("project=alpha"), 1u);
  engine_.reset();
  engine_ = std::move(Engine::Open(options_)).value();
  bool found = false;
  for (const IndexInfo& i : engine_->ListIndexes()) {
    found = found || (i.name == "project" && i.type == IndexType::kHash && !i.builtin);
  }
  EXPECT_TRUE(found);
  EXPECT_EQ(Count("project=alpha"), 1u);
  ASSERT_TRUE(engine_->DropIndex("project").ok());
  EXPECT_EQ(Count("project=alpha"), 1u) << "without the index the attribute is still searchable";
}

TEST_F(EngineTest, EdgesAccumulateAndGetSeesUncommittedUpdates) {
  Update e;
  e.op = UpdateOp::kAddEdge;
  e.acg = 1;
  e.record.id = FileId{1, 1};
  e.edge_dst = FileId{1, 2};
  e.edge_weight = 2;
  ASSERT_TRUE(engine_->Apply({&e, 1}).ok());
  ASSERT_TRUE(engine_->Apply({&e, 1}).ok());
  std::vector<std::tuple<FileId, FileId, uint64_t>> edges;
  ASSERT_TRUE(engine_->ListEdges(1, &edges).ok());
  ASSERT_EQ(edges.size(), 1u);
  EXPECT_EQ(std::get<2>(edges[0]), 4u);
  Update u = Put(1, 1, {"/a/x.c"}, 99);
  ASSERT_TRUE(engine_->Apply({&u, 1}).ok());
  auto got = engine_->Get(1, FileId{1, 1});
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->size, 99u);
  EXPECT_EQ(engine_->Get(1, FileId{1, 77}).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(engine_->Get(42, FileId{1, 1}).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace propeller
