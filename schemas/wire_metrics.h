// Metric labels of the wire protocol, shared by the daemons' request metrics
// (docs/metrics.md): requests by message type and errors by status code.
//
// Threading: plain functions; any thread.
#ifndef PROPELLER_SCHEMAS_WIRE_METRICS_H_
#define PROPELLER_SCHEMAS_WIRE_METRICS_H_

#include <string_view>

#include "common/metrics.h"
#include "common/status.h"
#include "schemas/messages.h"

namespace propeller::wire {

// A counter per message type, label type="apply" (MsgTypeName); index with TypeIndex. Message
// types this build does not know share index 0, type="unknown".
metrics::CounterVec MakeTypeCounters();
size_t TypeIndex(MsgType type);

// A counter per status code other than OK, label code="not_found" (StatusCodeName with '_'
// for ' '); index with the StatusCode's value.
metrics::CounterVec MakeCodeCounters();

// The status code of an encoded reply (EncodeReply) read from its first bytes — the envelope
// is the array [version, code, ...], the version an unsigned integer and the code a positive
// fixint — without decoding the rest: 0 for OK, the StatusCode value for an error, -1 when the bytes do not start like
// EncodeReply's.
int PeekReplyCode(std::string_view reply);

}  // namespace propeller::wire

#endif  // PROPELLER_SCHEMAS_WIRE_METRICS_H_
