// Names of attributes and operators, and the system name resolver.
#include "common/query/query.h"

#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <vector>

namespace propeller {
namespace {

// getpw/getgr buffers: start from sysconf's hint and grow on ERANGE up to 1 MiB (a group with
// thousands of members needs more than the usual 1 KiB hint).
constexpr size_t kMaxNssBuffer = 1 << 20;

size_t InitialBufferSize(int sysconf_name) {
  const long hint = sysconf(sysconf_name);
  return hint > 0 ? static_cast<size_t>(hint) : 1024;
}

std::optional<uint32_t> LookupUser(const std::string& name) {
  if (name.empty() || name.find('\0') != std::string::npos) return std::nullopt;
  for (size_t size = InitialBufferSize(_SC_GETPW_R_SIZE_MAX); size <= kMaxNssBuffer; size *= 2) {
    std::vector<char> buf(size);
    passwd entry{};
    passwd* result = nullptr;
    const int rc = getpwnam_r(name.c_str(), &entry, buf.data(), buf.size(), &result);
    if (rc == ERANGE) continue;
    if (rc != 0 || result == nullptr) return std::nullopt;
    return static_cast<uint32_t>(result->pw_uid);
  }
  return std::nullopt;
}

std::optional<uint32_t> LookupGroup(const std::string& name) {
  if (name.empty() || name.find('\0') != std::string::npos) return std::nullopt;
  for (size_t size = InitialBufferSize(_SC_GETGR_R_SIZE_MAX); size <= kMaxNssBuffer; size *= 2) {
    std::vector<char> buf(size);
    group entry{};
    group* result = nullptr;
    const int rc = getgrnam_r(name.c_str(), &entry, buf.data(), buf.size(), &result);
    if (rc == ERANGE) continue;
    if (rc != 0 || result == nullptr) return std::nullopt;
    return static_cast<uint32_t>(result->gr_gid);
  }
  return std::nullopt;
}

}  // namespace

const char* AttrName(Attr attr) {
  switch (attr) {
    case Attr::kSize: return "size";
    case Attr::kMtime: return "mtime";
    case Attr::kCtime: return "ctime";
    case Attr::kAtime: return "atime";
    case Attr::kUid: return "uid";
    case Attr::kGid: return "gid";
    case Attr::kMode: return "mode";
    case Attr::kNlink: return "nlink";
    case Attr::kType: return "type";
    case Attr::kName: return "name";
    case Attr::kExt: return "ext";
    case Attr::kPath: return "path";
    case Attr::kKeyword: return "keyword";
    case Attr::kUser: return "user attribute";
  }
  return "?";
}

const char* CmpOpName(CmpOp op) {
  switch (op) {
    case CmpOp::kEq: return "=";
    case CmpOp::kNe: return "!=";
    case CmpOp::kLt: return "<";
    case CmpOp::kLe: return "<=";
    case CmpOp::kGt: return ">";
    case CmpOp::kGe: return ">=";
    case CmpOp::kMatch: return "~";
    case CmpOp::kRegex: return "=~";
    case CmpOp::kBitsAll: return "=-";  // rendered as perm = -MODE
    case CmpOp::kBitsAny: return "=/";  // rendered as perm = /MODE
  }
  return "?";
}

NameResolver NameResolver::System() {
  NameResolver resolver;
  resolver.user = LookupUser;
  resolver.group = LookupGroup;
  return resolver;
}

namespace {

void CollectUserAttrs(const QueryNode& node, std::vector<std::string>* names) {
  if (node.kind == QueryNode::Kind::kPred) {
    if (node.pred.attr == Attr::kUser) names->push_back(node.pred.user_attr);
    return;
  }
  for (const auto& c : node.children) CollectUserAttrs(*c, names);
}

}  // namespace

std::vector<std::string> UserAttrNames(const Query& query) {
  std::vector<std::string> names;
  CollectUserAttrs(query.root(), &names);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

Status UnknownAttrError(std::string_view text, const std::vector<std::string>& unknown,
                        const ParseOptions& options) {
  Result<Query> lenient = Query::Parse(text, options);
  if (!lenient.ok()) return lenient.status();
  // Known: every user attribute the query names but these.
  std::vector<std::string> known = UserAttrNames(*lenient);
  std::erase_if(known, [&](const std::string& n) {
    return std::find(unknown.begin(), unknown.end(), n) != unknown.end();
  });
  ParseOptions strict = options;
  strict.user_attrs = &known;
  Result<Query> q = Query::Parse(text, strict);
  return q.ok() ? Status::OK() : q.status();
}

}  // namespace propeller
