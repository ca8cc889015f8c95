#include "common/daemon/options.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <optional>
#include <set>

#include "common/daemon/metrics_server.h"

namespace propeller::daemon {

std::string OptionValue::Describe() const {
  return origin.empty() ? "--" + name : origin + ": " + name;
}

const OptionSpec* FindOption(const std::vector<OptionSpec>& specs, std::string_view name) {
  for (const OptionSpec& s : specs) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

namespace {

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string SuggestOption(const std::vector<OptionSpec>& specs, std::string_view name) {
  std::string best;
  size_t best_distance = name.size() / 3 + 1;  // "dta" -> "data", not "threads" -> "data"
  for (const OptionSpec& s : specs) {
    if (s.help.empty()) continue;  // never suggest a hidden test hook
    const size_t d = EditDistance(name, s.name);
    if (d < best_distance) {
      best_distance = d;
      best = std::string(s.name);
    }
  }
  return best;
}

Result<CommandLine> ParseCommandLine(const std::vector<OptionSpec>& specs,
                                     const std::vector<std::string>& args,
                                     bool allow_positional) {
  CommandLine out;
  std::set<std::string_view> seen;
  bool options_done = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (options_done || a.size() < 2 || a[0] != '-') {
      if (!allow_positional) return Status::InvalidArgument("unexpected argument '" + a + "'");
      out.positional.push_back(a);
      continue;
    }
    if (a == "--") {
      options_done = true;
      continue;
    }
    std::string name = a == "-h" ? "help" : a.rfind("--", 0) == 0 ? a.substr(2) : a;
    std::optional<std::string> inline_value;
    if (const size_t eq = name.find('='); eq != std::string::npos) {
      inline_value = name.substr(eq + 1);
      name.resize(eq);
    }
    const OptionSpec* spec = a.rfind("--", 0) == 0 || a == "-h" ? FindOption(specs, name) : nullptr;
    if (spec == nullptr || spec->scope == OptionScope::kFileOnly) {
      std::string message = "unknown option '" + a + "'";
      if (spec != nullptr) {
        message = "'" + name + "' is set in the configuration file, not on the command line";
      } else if (std::string near = SuggestOption(specs, name); !near.empty()) {
        message += " (did you mean --" + near + "?)";
      }
      return Status::InvalidArgument(message);
    }
    OptionValue v;
    v.name = std::string(spec->name);
    if (spec->kind == OptionKind::kFlag) {
      if (inline_value) return Status::InvalidArgument("--" + name + " takes no value");
    } else if (inline_value) {
      v.value = *inline_value;
    } else if (i + 1 < args.size()) {
      v.value = args[++i];
    } else {
      return Status::InvalidArgument("--" + name + " needs a value");
    }
    if (!seen.insert(spec->name).second && !spec->repeated && spec->kind != OptionKind::kFlag) {
      return Status::InvalidArgument("--" + name + " is given twice");
    }
    out.options.push_back(std::move(v));
  }
  return out;
}

std::string OptionHelp(const std::vector<OptionSpec>& specs) {
  constexpr size_t kColumn = 24, kWidth = 96;
  std::string out;
  for (const OptionSpec& s : specs) {
    if (s.help.empty() || s.scope == OptionScope::kFileOnly) continue;
    std::string left = "  --" + std::string(s.name);
    if (!s.value_name.empty()) left += " " + std::string(s.value_name);
    out += left;
    size_t column = left.size();
    if (column + 1 >= kColumn) {
      out += "\n";
      column = 0;
    }
    out.append(kColumn - column, ' ');
    column = kColumn;
    // Wrap the help at word boundaries.
    std::string_view rest = s.help;
    bool first = true;
    while (!rest.empty()) {
      const size_t space = rest.find(' ');
      const std::string_view word = rest.substr(0, space);
      rest = space == std::string_view::npos ? std::string_view() : rest.substr(space + 1);
      if (!first && column + 1 + word.size() > kWidth) {
        out += "\n";
        out.append(kColumn, ' ');
        column = kColumn;
        first = true;
      }
      if (!first) {
        out += ' ';
        ++column;
      }
      out += word;
      column += word.size();
      first = false;
    }
    out += "\n";
  }
  return out;
}

Result<long long> ParseIntOption(const std::string& what, const std::string& text, long long lo,
                                 long long hi) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || v < lo || v > hi) {
    return Status::InvalidArgument(what + " wants a whole number from " + std::to_string(lo) +
                                   " to " + std::to_string(hi) + ", not '" + text + "'");
  }
  return v;
}

Result<LogLevel> ParseLogLevelOption(const std::string& what, const std::string& text) {
  if (text == "debug") return LogLevel::kDebug;
  if (text == "info") return LogLevel::kInfo;
  if (text == "warning" || text == "warn") return LogLevel::kWarning;
  if (text == "error") return LogLevel::kError;
  return Status::InvalidArgument(what + " wants debug, info, warning or error, not '" + text +
                                 "'");
}

OptionSpec MetricsListenOption() {
  return {.name = "metrics-listen", .kind = OptionKind::kString, .value_name = "HOST:PORT",
          .help = "serve Prometheus metrics on http://HOST:PORT/metrics (default: no listener; "
                  "port 0 = any free port, logged at start). Counts, sizes and latencies only; "
                  "prefer 127.0.0.1 (docs/metrics.md)",
          .example = "127.0.0.1:9472"};
}

OptionSpec LogLevelOption() {
  return {.name = "log-level", .kind = OptionKind::kString, .value_name = "LEVEL",
          .help = "debug, info, warning or error (default info); SIGHUP re-reads it from the "
                  "configuration file",
          .example = "debug"};
}

OptionSpec HelpOption() {
  return {.name = "help", .kind = OptionKind::kFlag, .help = "this text",
          .scope = OptionScope::kCommandLineOnly};
}

Result<bool> ApplySharedOption(const OptionValue& v, const SharedOptionTargets& to) {
  if (v.name == "metrics-listen") {
    std::string host;
    int port = 0;
    PROPELLER_RETURN_IF_ERROR(ParseListenAddress(v.Describe(), v.value, &host, &port));
    *to.metrics_listen = v.value;
    return true;
  }
  if (v.name == "log-level") {
    PROPELLER_ASSIGN_OR_RETURN(*to.log_level, ParseLogLevelOption(v.Describe(), v.value));
    return true;
  }
  return false;
}

}  // namespace propeller::daemon
