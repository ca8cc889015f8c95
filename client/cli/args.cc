#include "client/cli/args.h"

#include <cerrno>
#include <cstdlib>

namespace propeller::cli {

Result<Args> Args::Parse(const std::vector<std::string>& argv,
                         const std::set<std::string>& value_flags,
                         const std::set<std::string>& bool_flags) {
  Args out;
  bool flags_done = false;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (flags_done || a.size() < 2 || a[0] != '-') {
      out.positional_.push_back(a);
      continue;
    }
    if (a == "--") {
      flags_done = true;
      continue;
    }
    std::string name = a;
    std::optional<std::string> inline_value;
    if (size_t eq = a.find('='); a.rfind("--", 0) == 0 && eq != std::string::npos) {
      name = a.substr(0, eq);
      inline_value = a.substr(eq + 1);
    }
    if (bool_flags.count(name) != 0) {
      if (inline_value) return Status::InvalidArgument(name + " takes no value");
      out.values_[name] = "";
    } else if (value_flags.count(name) != 0) {
      if (inline_value) {
        out.values_[name] = *inline_value;
      } else if (i + 1 < argv.size()) {
        out.values_[name] = argv[++i];
      } else {
        return Status::InvalidArgument(name + " needs a value");
      }
    } else {
      return Status::InvalidArgument("unknown option " + name + " (see --help)");
    }
  }
  return out;
}

std::optional<std::string> Args::Get(const std::string& flag) const {
  auto it = values_.find(flag);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::string Args::GetOr(const std::string& flag, const std::string& fallback) const {
  auto v = Get(flag);
  return v ? *v : fallback;
}

Result<uint64_t> Args::GetUint(const std::string& flag, uint64_t fallback) const {
  auto v = Get(flag);
  if (!v) return fallback;
  char* end = nullptr;
  errno = 0;
  unsigned long long n = std::strtoull(v->c_str(), &end, 10);
  if (v->empty() || *end != '\0' || errno != 0 || (*v)[0] == '-') {
    return Status::InvalidArgument(flag + " takes a non-negative integer, not '" + *v + "'");
  }
  return static_cast<uint64_t>(n);
}

}  // namespace propeller::cli
