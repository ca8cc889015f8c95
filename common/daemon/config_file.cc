#include "common/daemon/config_file.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <toml++/toml.h>

namespace propeller::daemon {
namespace {

std::string Where(const std::string& path, const toml::source_region& source) {
  return path + ":" + std::to_string(source.begin.line);
}

std::string TypeName(toml::node_type type) {
  switch (type) {
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "a whole number";
    case toml::node_type::floating_point: return "a decimal number";
    case toml::node_type::boolean: return "true or false";
    case toml::node_type::array: return "an array";
    case toml::node_type::table: return "a table";
    default: return "a date or time";
  }
}

std::string Wanted(OptionKind kind) {
  switch (kind) {
    case OptionKind::kFlag: return "true or false";
    case OptionKind::kString: return "a string (in double quotes)";
    case OptionKind::kInteger: return "a whole number";
    case OptionKind::kNumber: return "a number";
  }
  return "";
}

// The command-line text of one scalar TOML value for `spec`; false for a flag set to false.
Result<std::optional<std::string>> ValueText(const OptionSpec& spec, const toml::node& node,
                                             const std::string& where) {
  auto wrong = [&] {
    return Status::InvalidArgument(where + ": " + std::string(spec.name) + " wants " +
                                   Wanted(spec.kind) + ", not " + TypeName(node.type()));
  };
  switch (spec.kind) {
    case OptionKind::kFlag:
      if (!node.is_boolean()) return wrong();
      if (!node.as_boolean()->get()) return std::optional<std::string>();
      return std::optional<std::string>(std::string());
    case OptionKind::kString:
      if (!node.is_string()) return wrong();
      return std::optional<std::string>(node.as_string()->get());
    case OptionKind::kInteger:
      if (!node.is_integer()) return wrong();
      return std::optional<std::string>(std::to_string(node.as_integer()->get()));
    case OptionKind::kNumber: {
      if (node.is_integer()) {
        return std::optional<std::string>(std::to_string(node.as_integer()->get()));
      }
      if (!node.is_floating_point()) return wrong();
      char buf[64];
      auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), node.as_floating_point()->get());
      if (ec != std::errc()) return wrong();
      return std::optional<std::string>(std::string(buf, end));
    }
  }
  return wrong();
}

Result<std::string> ReadWhole(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::NotFound("configuration file " + path + " does not exist");
    return Status::IOError("cannot read configuration file " + path, errno);
  }
  if (!S_ISREG(st.st_mode)) {
    return Status::InvalidArgument("configuration file " + path + " is not a regular file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::IOError("cannot read configuration file " + path, errno);
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return Status::IOError("cannot read configuration file " + path, errno);
  return text.str();
}

}  // namespace

Result<std::vector<OptionValue>> ReadConfigFile(const std::vector<OptionSpec>& specs,
                                                const std::string& path) {
  PROPELLER_ASSIGN_OR_RETURN(const std::string text, ReadWhole(path));
  toml::table table;
  // toml++ reports syntax errors by exception (docs/style.md rule 3: caught here, at the
  // adapter).
  try {
    table = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    return Status::InvalidArgument(Where(path, e.source()) + ": " + std::string(e.description()));
  }
  // toml::table iterates in key order; a file's order is the order of its lines.
  std::vector<std::pair<uint32_t, OptionValue>> out;
  for (auto&& [key, node] : table) {
    const std::string where = Where(path, key.source());
    const std::string name(key.str());
    const OptionSpec* spec = FindOption(specs, name);
    if (node.is_table()) {
      return Status::InvalidArgument(where + ": sections ([" + name +
                                     "]) are not used: write the options as key = value "
                                     "at the top level");
    }
    if (spec == nullptr) {
      std::string message = where + ": unknown key '" + name + "'";
      if (std::string near = SuggestOption(specs, name); !near.empty()) {
        message += " (did you mean '" + near + "'?)";
      }
      return Status::InvalidArgument(message);
    }
    if (spec->scope == OptionScope::kCommandLineOnly) {
      return Status::InvalidArgument(where + ": '" + name +
                                     "' is a command-line option and cannot be set in a file");
    }
    auto add = [&](const toml::node& item) -> Status {
      const std::string item_where = Where(path, item.source());
      PROPELLER_ASSIGN_OR_RETURN(std::optional<std::string> value,
                                 ValueText(*spec, item, item_where));
      if (value) {
        out.emplace_back(item.source().begin.line,
                         OptionValue{std::string(spec->name), std::move(*value), item_where});
      }
      return Status::OK();
    };
    if (const toml::array* array = node.as_array()) {
      if (!spec->repeated) {
        return Status::InvalidArgument(where + ": " + name + " is given once, not as an array");
      }
      for (const toml::node& item : *array) PROPELLER_RETURN_IF_ERROR(add(item));
    } else {
      PROPELLER_RETURN_IF_ERROR(add(node));
    }
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<OptionValue> values;
  for (auto& [line, v] : out) values.push_back(std::move(v));
  return values;
}

Result<LoadedOptions> LoadOptions(const std::vector<OptionSpec>& specs,
                                  const std::vector<std::string>& args,
                                  const std::string& default_config, bool allow_positional) {
  PROPELLER_ASSIGN_OR_RETURN(CommandLine line, ParseCommandLine(specs, args, allow_positional));
  LoadedOptions loaded;
  loaded.positional = std::move(line.positional);
  std::optional<std::string> explicit_config;
  for (const OptionValue& v : line.options) {
    if (v.name == "help") loaded.help = true;
    if (v.name == "config") explicit_config = v.value;
  }
  if (loaded.help) return loaded;
  if (explicit_config) {
    if (explicit_config->empty()) return Status::InvalidArgument("--config needs a file name");
    loaded.config_file = *explicit_config;
  } else if (!default_config.empty()) {
    struct stat st;
    if (::stat(default_config.c_str(), &st) == 0) loaded.config_file = default_config;
  }
  if (!loaded.config_file.empty()) {
    PROPELLER_ASSIGN_OR_RETURN(loaded.values, ReadConfigFile(specs, loaded.config_file));
  }
  // A repeated option on the command line replaces the file's list rather than adding to it.
  for (const OptionValue& v : line.options) {
    const OptionSpec* spec = FindOption(specs, v.name);
    if (spec->repeated) {
      std::erase_if(loaded.values,
                    [&](const OptionValue& f) { return f.name == v.name && !f.origin.empty(); });
    }
  }
  for (OptionValue& v : line.options) {
    if (v.name != "config" && v.name != "help") loaded.values.push_back(std::move(v));
  }
  return loaded;
}

}  // namespace propeller::daemon
