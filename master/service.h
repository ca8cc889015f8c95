// MasterService: the master's wire endpoint — turns one request frame body (schemas/
// messages.h envelope) into one final reply frame body by decoding it, checking the protocol
// version, dispatching to Master and encoding the result. Installed as the rpc::Server
// handler by MasterServer; tests call Handle() directly with bytes.
//
// Whatever the bytes, Handle() returns a well-formed reply envelope and never throws or
// crashes: a malformed envelope or body gets Corruption, another protocol major version gets
// NotSupported, a message type the master does not serve (index-node types, unknown numbers)
// gets NotSupported, a rejected request gets the Master's error. A request that is not
// decoded in full changes nothing.
//
// Access (schemas/access.h, docs/security.md): the sender's role comes from the transport
// (`peer`) and the policy; a change from a user or an unauthenticated peer gets
// PermissionDenied and changes nothing, and the volume roots a user is shown (ListVolumes,
// ClusterStatus) are those they could walk to.
//
// Threading: Handle() may be called from any number of threads at once.
#ifndef PROPELLER_MASTER_SERVICE_H_
#define PROPELLER_MASTER_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/rpc/rpc.h"
#include "common/metrics.h"
#include "master/master.h"
#include "schemas/wire_metrics.h"
#include "schemas/access.h"

namespace propeller::master {

class MasterService {
 public:
  // `master` must outlive this object.
  explicit MasterService(Master* master,
                         const wire::AccessPolicy& policy = wire::DefaultAccessPolicy())
      : master_(master), policy_(policy) {}
  MasterService(const MasterService&) = delete;
  MasterService& operator=(const MasterService&) = delete;

  // Answers one request (see above). `peer` is what the transport knows of the sender.
  std::string Handle(std::string_view request, const rpc::PeerInfo& peer);

  // Requests answered with a non-OK status, for tests and status pages.
  uint64_t errors() const { return errors_.load(std::memory_order_relaxed); }
  // Decoded requests by message type and error replies by status code (docs/metrics.md).
  const metrics::CounterVec& requests_by_type() const { return requests_by_type_; }
  const metrics::CounterVec& errors_by_code() const { return errors_by_code_; }

 private:
  std::string Dispatch(std::string_view request, const wire::Caller& caller);

  Master* const master_;
  const wire::AccessPolicy policy_;
  std::atomic<uint64_t> errors_{0};
  metrics::CounterVec requests_by_type_ = wire::MakeTypeCounters();
  metrics::CounterVec errors_by_code_ = wire::MakeCodeCounters();
};

}  // namespace propeller::master

#endif  // PROPELLER_MASTER_SERVICE_H_
