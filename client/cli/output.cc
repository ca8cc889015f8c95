// Shared output helpers of the CLI: errors, JSON, times.
#include <cinttypes>
#include <cstdio>
#include <ctime>

#include "client/cli/commands.h"

namespace propeller::cli {

int ReportError(const Status& status, bool usage) {
  std::string text = status.message().empty() ? status.ToString() : status.message();
  if ((status.code() == StatusCode::kUnavailable || status.code() == StatusCode::kTimeout) &&
      !IsIndexCatchingUp(status)) {
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

namespace {

// Length of the valid UTF-8 sequence at s[i], or 0.
size_t Utf8Length(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  size_t n = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c <= 0xDF ? 2 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 0;
  }
  return n;
}

}  // namespace

std::string JsonString(std::string_view s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
      ++i;
    } else if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
      ++i;
    } else if (c < 0x80) {
      out += static_cast<char>(c);
      ++i;
    } else if (size_t n = Utf8Length(s, i); n != 0) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
      ++i;
    }
  }
  return out + "\"";
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
