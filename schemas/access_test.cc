// schemas/access.h: the role each transport proves, and the access level of every message
// type (docs/security.md's tables, checked entry by entry).
#include "schemas/access.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace propeller::wire {
namespace {

rpc::PeerInfo Peer(rpc::PeerTransport t, std::optional<uint32_t> uid = std::nullopt,
                   std::string key = "") {
  rpc::PeerInfo p;
  p.transport = t;
  p.uid = uid;
  p.gid = uid;
  p.curve_public_key = std::move(key);
  return p;
}

TEST(AccessTest, TheTransportAloneDecidesTheRole) {
  AccessPolicy policy;
  policy.service_uid = 990;
  using T = rpc::PeerTransport;
  EXPECT_EQ(IdentifyCaller(Peer(T::kInProcess), policy).role, Role::kMember);
  EXPECT_EQ(IdentifyCaller(Peer(T::kTcp, std::nullopt, "k"), policy).role, Role::kMember);
  EXPECT_EQ(IdentifyCaller(Peer(T::kTcp), policy).role, Role::kNobody);
  EXPECT_EQ(IdentifyCaller(Peer(T::kIpc), policy).role, Role::kNobody);  // no kernel word
  EXPECT_EQ(IdentifyCaller(Peer(T::kIpc, 0), policy).role, Role::kAdmin);
  EXPECT_EQ(IdentifyCaller(Peer(T::kIpc, 990), policy).role, Role::kAdmin);
  const Caller user = IdentifyCaller(Peer(T::kIpc, 1000), policy);
  EXPECT_EQ(user.role, Role::kUser);
  ASSERT_TRUE(user.creds.has_value());
  EXPECT_EQ(user.creds->uid, 1000u);
  EXPECT_TRUE(user.filtered());
  EXPECT_FALSE(IdentifyCaller(Peer(T::kIpc, 0), policy).filtered());
  EXPECT_FALSE(IdentifyCaller(Peer(T::kInProcess), policy).filtered());
  // --insecure: plain tcp peers are members; an ipc peer's uid still decides.
  policy.trust_plain_tcp = true;
  EXPECT_EQ(IdentifyCaller(Peer(T::kTcp), policy).role, Role::kMember);
  EXPECT_EQ(IdentifyCaller(Peer(T::kIpc, 1000), policy).role, Role::kUser);
  EXPECT_EQ(DefaultAccessPolicy().service_uid, static_cast<uint32_t>(::geteuid()));
  EXPECT_FALSE(DefaultAccessPolicy().trust_plain_tcp);
}

TEST(AccessTest, EveryMessageTypeHasItsLevel) {
  const std::set<MsgType> reads = {
      MsgType::kLookupFiles, MsgType::kLocateAcgs, MsgType::kListNodes,  MsgType::kListIndexes,
      MsgType::kClusterStatus, MsgType::kListVolumes, MsgType::kIndexHolders, MsgType::kSearch,
      MsgType::kGetRecord,   MsgType::kNodeStatus, MsgType::kListEdges,  MsgType::kPing,
      MsgType::kMountStatus, MsgType::kWatch};
  const Caller member{Role::kMember, std::nullopt};
  const Caller admin{Role::kAdmin, Credentials{0, 0, {}}};
  const Caller user{Role::kUser, Credentials{1000, 1000, {}}};
  const Caller nobody{Role::kNobody, std::nullopt};
  int named = 0;
  for (int n = 0; n < 256; ++n) {
    const MsgType type = static_cast<MsgType>(n);
    SCOPED_TRACE(std::string(MsgTypeName(type)) + " " + std::to_string(n));
    const Access want = reads.count(type)           ? Access::kRead
                        : type == MsgType::kApply   ? Access::kUserAttr
                                                    : Access::kWrite;  // unknown types too
    EXPECT_EQ(AccessOf(type), want);
    EXPECT_TRUE(Authorize(member, type).ok());
    EXPECT_TRUE(Authorize(admin, type).ok());
    EXPECT_EQ(Authorize(user, type).ok(), want != Access::kWrite);
    EXPECT_EQ(Authorize(nobody, type).ok(), type == MsgType::kPing);
    if (std::string(MsgTypeName(type)) != "unknown") ++named;
    if (!Authorize(user, type).ok()) {
      EXPECT_EQ(Authorize(user, type).code(), StatusCode::kPermissionDenied);
    }
  }
  EXPECT_EQ(named, 29);  // a new message type must be placed in the table above
}

}  // namespace
}  // namespace propeller::wire
