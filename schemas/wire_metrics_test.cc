// PeekReplyCode against EncodeReply for every status code, and the label tables.
#include "schemas/wire_metrics.h"

#include <gtest/gtest.h>

namespace propeller::wire {
namespace {

TEST(WireMetricsTest, PeekReplyCodeMatchesEncodeReply) {
  EXPECT_EQ(PeekReplyCode(EncodeReply(Status::OK(), "body")), 0);
  for (int c = 1; c <= static_cast<int>(StatusCode::kRedirect); ++c) {
    const Status st(static_cast<StatusCode>(c), "message");
    EXPECT_EQ(PeekReplyCode(EncodeReply(st, {})), c) << StatusCodeName(st.code());
  }
  EXPECT_EQ(PeekReplyCode(""), -1);
  EXPECT_EQ(PeekReplyCode("\x95\x02"), -1);
  EXPECT_EQ(PeekReplyCode("garbage"), -1);
}

TEST(WireMetricsTest, LabelTables) {
  const metrics::CounterVec types = MakeTypeCounters();
  EXPECT_EQ(types.label_value(TypeIndex(MsgType::kApply)), "apply");
  EXPECT_EQ(types.label_value(TypeIndex(MsgType::kPing)), "ping");
  EXPECT_EQ(TypeIndex(static_cast<MsgType>(1000)), 0u);
  const metrics::CounterVec codes = MakeCodeCounters();
  EXPECT_EQ(codes.label_value(static_cast<size_t>(StatusCode::kNotFound)), "not_found");
}

}  // namespace
}  // namespace propeller::wire
