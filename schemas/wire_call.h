// WireCall: one typed request/reply over an rpc::Channel — encode the request envelope, call,
// decode the reply envelope and body. Shared by the client library, the index node (talking to
// the master) and tests, so every caller maps wire errors the same way.
//
// Thread-safe as far as the channel is (rpc::Channel is).
#ifndef PROPELLER_SCHEMAS_WIRE_CALL_H_
#define PROPELLER_SCHEMAS_WIRE_CALL_H_

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/rpc/rpc.h"
#include "common/status.h"
#include "schemas/messages.h"

namespace propeller::wire {

// A remote peer's error as the caller reports it: about the request itself (a bad argument,
// something missing or existing, no permission, not supported) as the peer worded it — the
// user asked, and which socket answered is noise — and otherwise (the peer's disk, data or
// state failed) with "<endpoint>: " before it, so an operator knows which node to look at.
inline Status RemoteError(Status st, std::string_view endpoint) {
  switch (st.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
    case StatusCode::kAlreadyExists:
    case StatusCode::kPermissionDenied:
    case StatusCode::kNotSupported:
    case StatusCode::kRedirect:
      return st;
    default:
      return st.WithContext(std::string(endpoint));
  }
}

// Sends `request` as `type` on `channel` and decodes the final reply into *reply. Returns the
// transport's error (Timeout, Unavailable), Corruption for undecodable bytes, or the remote
// status (RemoteError). With StatusCode::kRedirect the owners are
// stored in *redirects when it is not null. Partial frames go to `on_chunk` (raw bytes).
template <typename Req, typename Rep>
Status WireCall(rpc::Channel& channel, MsgType type, const Req& request, Rep* reply,
                const rpc::CallOptions& options = {},
                std::vector<AcgLocation>* redirects = nullptr,
                const std::function<bool(std::string_view)>& on_chunk = nullptr) {
  const std::string bytes = EncodeRequest(type, request);
  Result<std::string> raw = channel.Call(bytes, options, on_chunk);
  if (!raw.ok()) {
    // The transport's messages usually name the endpoint already ("no connection to X").
    const Status& st = raw.status();
    return st.message().find(channel.endpoint()) != std::string::npos
               ? st
               : st.WithContext(channel.endpoint());
  }
  ReplyEnvelope envelope;
  Status st = DecodeReply(*raw, &envelope);
  if (!st.ok()) return st.WithContext(channel.endpoint());
  if (!envelope.status.ok()) {
    if (redirects != nullptr) *redirects = std::move(envelope.redirects);
    return RemoteError(std::move(envelope.status), channel.endpoint());
  }
  st = Decode(envelope.body, reply);
  if (!st.ok()) return st.WithContext(std::string(channel.endpoint()) + ": " + MsgTypeName(type));
  return Status::OK();
}

}  // namespace propeller::wire

#endif  // PROPELLER_SCHEMAS_WIRE_CALL_H_
