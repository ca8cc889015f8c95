// MakeSystem (eval_system.h): the system of a name.
#include "bench/eval/eval_system.h"

namespace propeller::eval {

Result<std::unique_ptr<System>> MakeSystem(const std::string& name, const SystemConfig& config) {
  if (name == "propeller-cluster") return MakePropellerCluster(config);
  if (name == "propeller-engine") return MakePropellerEngine(config);
  if (name == "mariadb") return MakeMariaDb(config);
  if (name == "postgres") return MakePostgres(config);
  if (name == "sqlite") return MakeSqlite(config);
  return Status::InvalidArgument("unknown system '" + name +
                                 "' (propeller-cluster, propeller-engine, mariadb, postgres, "
                                 "sqlite)");
}

}  // namespace propeller::eval
