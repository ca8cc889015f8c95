// A small command-line parser for the propeller CLI: flags anywhere, "--flag value" or
// "--flag=value", "--" ends the flags. Unknown flags are usage errors naming the flag.
// Not thread-safe; one per command invocation.
#ifndef PROPELLER_CLIENT_CLI_ARGS_H_
#define PROPELLER_CLIENT_CLI_ARGS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"

namespace propeller::cli {

class Args {
 public:
  // `value_flags` take a value; `bool_flags` do not. Both include the dashes ("--limit", "-0").
  // InvalidArgument for an unknown flag or a missing value.
  static Result<Args> Parse(const std::vector<std::string>& argv,
                            const std::set<std::string>& value_flags,
                            const std::set<std::string>& bool_flags);

  bool Has(const std::string& flag) const { return values_.count(flag) != 0; }
  std::optional<std::string> Get(const std::string& flag) const;
  std::string GetOr(const std::string& flag, const std::string& fallback) const;
  // A non-negative integer flag; InvalidArgument naming the flag when malformed.
  Result<uint64_t> GetUint(const std::string& flag, uint64_t fallback) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  std::map<std::string, std::string> values_;  // bool flags map to ""
  std::vector<std::string> positional_;
};

}  // namespace propeller::cli

#endif  // PROPELLER_CLIENT_CLI_ARGS_H_
