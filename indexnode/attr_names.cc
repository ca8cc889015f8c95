#include "indexnode/attr_names.h"

#include <algorithm>

#include "common/logging.h"

namespace propeller {
namespace {

// One name per line, the first line a version header.
constexpr std::string_view kHeader = "propeller user attributes 1\n";

std::string Encode(const std::vector<std::string>& names) {
  std::string out(kHeader);
  for (const std::string& n : names) out += n + "\n";
  return out;
}

bool Decode(std::string_view text, std::vector<std::string>* names) {
  if (!text.starts_with(kHeader)) return false;
  text.remove_prefix(kHeader.size());
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    if (nl == std::string_view::npos) return false;  // a torn last line
    const std::string name(text.substr(0, nl));
    // Syntax only: a name that became built in later stays readable.
    if (!CheckUserAttrName(name).empty() && !IsBuiltinAttrName(name)) return false;
    names->push_back(name);
    text.remove_prefix(nl + 1);
  }
  std::sort(names->begin(), names->end());
  names->erase(std::unique(names->begin(), names->end()), names->end());
  return true;
}

}  // namespace

Status AttrNames::Open(Env* env, std::string path, bool fresh) {
  env_ = env;
  path_ = std::move(path);
  MutexLock lock(&mu_);
  names_.clear();
  complete_ = false;
  if (!env->FileExists(path_)) {
    if (!fresh) {
      Log(LogLevel::kInfo, "%s: no list of user attribute names (data written by an older "
          "version): every valid name is taken as known", path_.c_str());
      return Status::OK();
    }
    PROPELLER_RETURN_IF_ERROR(WriteFileAtomically(env, path_, Encode(names_)));
    complete_ = true;
    return Status::OK();
  }
  std::string text;
  PROPELLER_RETURN_IF_ERROR(ReadFileToString(env, path_, &text));
  std::vector<std::string> names;
  if (!Decode(text, &names)) {
    Log(LogLevel::kWarning, "%s is damaged: every valid user attribute name is taken as known "
        "(unknown names in queries are not reported)", path_.c_str());
    return Status::OK();
  }
  names_ = std::move(names);
  complete_ = true;
  return Status::OK();
}

Status AttrNames::Note(const FileRecord& record) {
  if (record.attrs.empty()) return Status::OK();
  MutexLock lock(&mu_);
  std::vector<std::string> next;
  for (const auto& [name, value] : record.attrs) {
    if (std::binary_search(names_.begin(), names_.end(), name)) continue;
    if (next.empty()) next = names_;
    next.insert(std::lower_bound(next.begin(), next.end(), name), name);
  }
  if (next.empty()) return Status::OK();
  // An incomplete list is kept in memory only: written, it would claim to be complete.
  if (complete_) {
    PROPELLER_RETURN_IF_ERROR(WriteFileAtomically(env_, path_, Encode(next))
                                  .WithContext("recording a new user attribute name"));
  }
  names_ = std::move(next);
  return Status::OK();
}

std::vector<std::string> AttrNames::Unknown(const std::vector<std::string>& names) const {
  std::vector<std::string> out;
  MutexLock lock(&mu_);
  if (!complete_) return out;
  for (const std::string& n : names) {
    if (!std::binary_search(names_.begin(), names_.end(), n)) out.push_back(n);
  }
  return out;
}

std::vector<std::string> AttrNames::Known() const {
  MutexLock lock(&mu_);
  return names_;
}

bool AttrNames::complete() const {
  MutexLock lock(&mu_);
  return complete_;
}

}  // namespace propeller
