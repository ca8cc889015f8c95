// Shared output helpers of the CLI: errors, JSON, times, --format.
#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <cinttypes>
#include <climits>
#include <cstdlib>
#include <cstdio>
#include <ctime>

#include "client/cli/commands.h"
#include "client/lib/mount_registry.h"

namespace propeller::cli {

int ReportError(const Status& status, bool usage) {
  std::string text = status.message().empty() ? status.ToString() : status.message();
  // The hint only where nothing answered at all (not for a damaged ACG, a node reported
  // down or a busy queue, which are Unavailable too).
  const bool unreached = status.code() == StatusCode::kTimeout ||
                         (status.code() == StatusCode::kUnavailable &&
                          status.message().find("no connection to ") != std::string::npos);
  if (unreached && !IsIndexCatchingUp(status)) {
    text += " (is Propeller running? `propeller up` starts it; --master or $PROPELLER_MASTER "
            "names another master)";
  }
  std::fprintf(stderr, "propeller: %s\n", text.c_str());
  return usage ? kExitUsage : kExitError;
}

std::unique_ptr<Client> ConnectOrReport(const GlobalOptions& global) {
  auto client = Client::Connect(global.client);
  if (!client.ok()) {
    ReportError(client.status());
    return nullptr;
  }
  return std::move(client).value();
}

std::string Counted(uint64_t n, std::string_view noun, std::string_view plural) {
  std::string out = std::to_string(n) + " ";
  if (n == 1) return out.append(noun);
  return plural.empty() ? out.append(noun).append("s") : out.append(plural);
}

Result<Format> Format::Parse(std::string_view text) {
  Format f;
  std::string literal;
  auto flush = [&] {
    if (!literal.empty()) f.pieces_.push_back(Piece{0, std::move(literal)});
    literal.clear();
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\\') {
      if (i + 1 == text.size()) return Status::InvalidArgument("--format ends with '\\'");
      const char e = text[++i];
      switch (e) {
        case 'n': literal += '\n'; break;
        case 't': literal += '\t'; break;
        case '0': literal += '\0'; break;
        case '\\': literal += '\\'; break;
        default:
          return Status::InvalidArgument(std::string("--format: unknown escape '\\") + e +
                                         "' (\\n \\t \\0 \\\\)");
      }
      continue;
    }
    if (c != '%') {
      literal += c;
      continue;
    }
    if (i + 1 == text.size()) return Status::InvalidArgument("--format ends with '%'");
    const char d = text[++i];
    if (d == '%') {
      literal += '%';
      continue;
    }
    if (d == 'T') {  // only %T@ (seconds since the epoch)
      if (i + 1 == text.size() || text[i + 1] != '@') {
        return Status::InvalidArgument("--format: only %T@ of find's %T forms");
      }
      ++i;
      flush();
      f.pieces_.push_back(Piece{'@', ""});
      continue;
    }
    if (std::string_view("pfhsmugUGnyt").find(d) == std::string_view::npos) {
      return Status::InvalidArgument(std::string("--format: unknown directive '%") + d +
                                     "' (%p %f %h %s %m %u %g %U %G %n %y %t %T@ %%)");
    }
    flush();
    f.pieces_.push_back(Piece{d, ""});
  }
  flush();
  return f;
}

void Format::Append(const std::string& path, const FileRecord& r, std::string* out) const {
  for (const Piece& p : pieces_) {
    switch (p.directive) {
      case 0: *out += p.literal; break;
      case 'p': *out += path; break;
      case 'f': out->append(PathBaseName(path)); break;
      case 'h': {
        const size_t slash = path.rfind('/');
        *out += slash == 0 ? "/" : slash == std::string::npos ? "." : path.substr(0, slash);
        break;
      }
      case 's': *out += std::to_string(r.size); break;
      case 'm': {
        char buf[16];
        std::snprintf(buf, sizeof(buf), "%o", r.mode & 07777);
        *out += buf;
        break;
      }
      case 'u': *out += NameOf(r.uid, /*user=*/true); break;
      case 'g': *out += NameOf(r.gid, /*user=*/false); break;
      case 'U': *out += std::to_string(r.uid); break;
      case 'G': *out += std::to_string(r.gid); break;
      case 'n': *out += std::to_string(r.nlink); break;
      case 'y': *out += static_cast<char>(r.type); break;
      case 't': {  // as find's %t: ctime(3)'s form in local time, ten digits of fraction
        const time_t secs = static_cast<time_t>(FileTimeSeconds(r.mtime));
        struct tm tm;
        localtime_r(&secs, &tm);
        char head[64], year[16], frac[16];
        std::strftime(head, sizeof(head), "%a %b %e %H:%M:%S", &tm);
        std::strftime(year, sizeof(year), "%Y", &tm);
        std::snprintf(frac, sizeof(frac), ".%09lld0 ",
                      static_cast<long long>(FileTimeNanos(r.mtime)));
        *out += std::string(head) + frac + year;
        break;
      }
      case '@': {  // as GNU find prints %T@: seconds, '.', ten digits
        char buf[48];
        std::snprintf(buf, sizeof(buf), "%lld.%09lld0",
                      static_cast<long long>(FileTimeSeconds(r.mtime)),
                      static_cast<long long>(FileTimeNanos(r.mtime)));
        *out += buf;
        break;
      }
    }
  }
}

const std::string& Format::NameOf(uint32_t id, bool user) const {
  auto& cache = user ? users_ : groups_;
  auto it = cache.find(id);
  if (it != cache.end()) return it->second;
  std::string name = std::to_string(id);  // as find: the number when no name is known
  std::vector<char> buf(16384);
  if (user) {
    struct passwd pw, *found = nullptr;
    if (getpwuid_r(id, &pw, buf.data(), buf.size(), &found) == 0 && found) name = pw.pw_name;
  } else {
    struct group gr, *found = nullptr;
    if (getgrgid_r(id, &gr, buf.data(), buf.size(), &found) == 0 && found) name = gr.gr_name;
  }
  return cache.emplace(id, std::move(name)).first->second;
}

std::string ScopeArgument(const std::string& arg) {
  char resolved[PATH_MAX];
  std::string scope = ::realpath(arg.c_str(), resolved) != nullptr ? resolved : arg;
  if (scope.empty() || scope[0] != '/') {
    char cwd[PATH_MAX];
    if (::getcwd(cwd, sizeof(cwd)) != nullptr) scope = std::string(cwd) + "/" + arg;
  }
  return scope;
}

std::string DefaultScope(const GlobalOptions& global) {
  if (global.given.count("master") != 0 || !global.client.master_endpoint.empty()) return "";
  if (const char* env = std::getenv("PROPELLER_MASTER"); env != nullptr && *env != '\0') {
    return "";
  }
  char cwd[PATH_MAX];
  if (::getcwd(cwd, sizeof(cwd)) == nullptr) return "";
  Result<std::optional<MountRecord>> mount = FindMountFor(cwd);
  if (!mount.ok() || !*mount) return "";
  return (*mount)->mountpoint;
}

std::string FormatTime(FileTime ns) {
  const time_t secs = static_cast<time_t>(FileTimeSeconds(ns));
  struct tm tm;
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string RecordJson(const std::string& path, const FileRecord& r) {
  std::string out = "{\"path\":" + JsonString(path);
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                ",\"volume\":%" PRIu32 ",\"ino\":%" PRIu64 ",\"type\":\"%c\",\"size\":%" PRIu64
                ",\"mtime\":%s,\"ctime\":%s,\"atime\":%s"
                ",\"uid\":%" PRIu32 ",\"gid\":%" PRIu32 ",\"mode\":\"%04o\",\"nlink\":%" PRIu32,
                r.id.volume, r.id.ino, static_cast<char>(r.type), r.size,
                FileTimeToString(r.mtime).c_str(), FileTimeToString(r.ctime).c_str(),
                FileTimeToString(r.atime).c_str(), r.uid, r.gid, r.mode & 07777, r.nlink);
  out += buf;
  // Every link of the file the caller may see (docs/search.md "Hard links"), as paths like
  // "path": the hit's own path ends with one of the record's in-volume paths, and what comes
  // before that is the prefix of them all (the volume root, or the mount point).
  if (r.paths.size() > 1) {
    std::string prefix;
    bool found = false;
    for (const std::string& p : r.paths) {
      if (p != "/" && path.size() >= p.size() &&
          path.compare(path.size() - p.size(), p.size(), p) == 0) {
        prefix = path.substr(0, path.size() - p.size());
        found = true;
        break;
      }
    }
    if (found) {
      out += ",\"links\":[";
      for (size_t i = 0; i < r.paths.size(); ++i) {
        out += (i ? "," : "") + JsonString(prefix + r.paths[i]);
      }
      out += "]";
    }
  }
  if (!r.attrs.empty()) {
    out += ",\"attrs\":{";
    bool first = true;
    for (const auto& [name, value] : r.attrs) {
      if (!first) out += ",";
      first = false;
      out += JsonString(name) + ":";
      if (const auto* i = std::get_if<int64_t>(&value)) {
        out += std::to_string(*i);
      } else if (const auto* d = std::get_if<double>(&value)) {
        std::snprintf(buf, sizeof(buf), "%.17g", *d);
        out += buf;
      } else {
        out += JsonString(std::get<std::string>(value));
      }
    }
    out += "}";
  }
  return out + "}";
}

}  // namespace propeller::cli
