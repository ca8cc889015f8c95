// Link security of daemons and clients: the cluster key and the per-member key files (rpc.h,
// docs/security.md).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>

#include "common/env.h"
#include "common/secure_dir.h"
#include "common/rpc/rpc.h"

namespace propeller::rpc {
namespace {

// Makes a fresh key pair at `path` unless a file is there already (also one another process
// made meanwhile). *made says whether this call did.
Status CreateKeyFileIfMissing(const std::string& path, bool* made) {
  *made = false;
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  PROPELLER_RETURN_IF_ERROR(MakeDirs(dir, 0700));
  PROPELLER_ASSIGN_OR_RETURN(CurveKeys keys, GenerateCurveKeys());
  const std::string tmp = path + ".new-" + std::to_string(::getpid());
  ::unlink(tmp.c_str());
  PROPELLER_RETURN_IF_ERROR(WriteKeyFile(tmp, keys));
  // link() never replaces: a key another process made first wins, and every member reads
  // the same one.
  const int rc = ::link(tmp.c_str(), path.c_str());
  const int err = errno;
  ::unlink(tmp.c_str());
  if (rc != 0 && err != EEXIST) return Status::IOError("create " + path, err);
  *made = rc == 0;
  return Env::Default()->SyncDir(dir);
}

std::string NeedKeyMessage(const std::string& file) {
  return "tcp:// links are authenticated with the cluster key, and " + file +
         " does not exist: copy the master's cluster key there (it makes one at its first "
         "start; mode 0600), or name it with --cluster-key FILE. --insecure runs without "
         "authentication (anyone who reaches the port controls the index)";
}

}  // namespace

bool IsTcpEndpoint(std::string_view endpoint) { return endpoint.rfind("tcp://", 0) == 0; }

std::string DefaultClusterKeyFile() {
  if (const char* env = std::getenv("PROPELLER_CLUSTER_KEY"); env != nullptr && *env != '\0') {
    return env;
  }
  if (::geteuid() == 0) return "/etc/propeller/cluster.key";
  if (const char* x = std::getenv("XDG_CONFIG_HOME"); x != nullptr && *x == '/') {
    return std::string(x) + "/propeller/cluster.key";
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home == '/') {
    return std::string(home) + "/.config/propeller/cluster.key";
  }
  return "/etc/propeller/cluster.key";
}

Result<CurveKeys> LoadClusterKey(const std::string& path, bool create, bool* created) {
  if (created != nullptr) *created = false;
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == EACCES) {
      return Status::PermissionDenied("cannot read the cluster key " + path +
                                      ": permission denied (only root and the service's user "
                                      "may)");
    }
    if (errno != ENOENT) return Status::IOError("stat " + path, errno);
    if (!create) return Status::NotFound(NeedKeyMessage(path));
    bool made = false;
    PROPELLER_RETURN_IF_ERROR(CreateKeyFileIfMissing(path, &made));
    if (created != nullptr) *created = made;
  }
  Result<CurveKeys> keys = ReadKeyFile(path);
  if (!keys.ok()) return keys.status().WithContext("cluster key");
  if (keys->secret_key.empty()) {
    return Status::InvalidArgument(path + " holds a public key only; the cluster key file "
                                   "needs the secret line too");
  }
  return keys;
}

Result<LinkSecurity> ResolveLinkSecurity(const LinkSecurityOptions& options, bool serves_tcp,
                                         bool dials_tcp, bool create_cluster_key) {
  LinkSecurity out;
  if (!serves_tcp && !dials_tcp) return out;
  const bool per_member = !options.curve_key_file.empty();
  if (!per_member && !options.server_key_file.empty()) {
    // With the cluster key the server's key is the cluster's; an allowlist only widens who
    // is admitted (administrators' own keys, say).
    return Status::InvalidArgument("a server key file goes with this member's own key pair "
                                   "(--curve-key), not with the cluster key");
  }
  if (options.insecure) {
    if (per_member || !options.cluster_key_file.empty()) {
      return Status::InvalidArgument("--insecure contradicts the CURVE key options given");
    }
    out.insecure = true;
    return out;
  }
  if (per_member) {
    Result<CurveKeys> keys = ReadKeyFile(options.curve_key_file);
    if (!keys.ok()) return keys.status().WithContext("this member's key pair");
    if (keys->secret_key.empty()) {
      return Status::InvalidArgument(options.curve_key_file +
                                     ": no secret key (a key pair file is needed)");
    }
    out.keys = std::move(keys).value();
    if (serves_tcp) {
      if (options.allow_file.empty()) {
        return Status::InvalidArgument("serving tcp:// with this member's own key pair needs an "
                                       "allowlist of client keys (--allow FILE)");
      }
      PROPELLER_ASSIGN_OR_RETURN(out.allowed, ReadAllowlistFile(options.allow_file));
      if (out.allowed.empty()) {
        return Status::InvalidArgument(options.allow_file + ": no keys listed");
      }
    }
    if (dials_tcp) {
      if (options.server_key_file.empty()) {
        return Status::InvalidArgument("dialing tcp:// with this member's own key pair needs the "
                                       "server's public key file");
      }
      Result<CurveKeys> server = ReadKeyFile(options.server_key_file);
      if (!server.ok()) return server.status().WithContext("the server's public key");
      out.server_public_key = server->public_key;
    }
    return out;
  }
  out.cluster_key_file =
      options.cluster_key_file.empty() ? DefaultClusterKeyFile() : options.cluster_key_file;
  PROPELLER_ASSIGN_OR_RETURN(
      CurveKeys keys, LoadClusterKey(out.cluster_key_file, create_cluster_key, &out.created));
  out.allowed.push_back(keys.public_key);
  if (!options.allow_file.empty()) {
    PROPELLER_ASSIGN_OR_RETURN(std::vector<std::string> more,
                               ReadAllowlistFile(options.allow_file));
    for (std::string& k : more) {
      if (k != keys.public_key) out.allowed.push_back(std::move(k));
    }
  }
  out.server_public_key = keys.public_key;
  out.keys = std::move(keys);
  return out;
}

void LinkSecurity::Apply(ServerOptions* options) const {
  if (!IsTcpEndpoint(options->endpoint) || !keys) return;
  options->curve = keys;
  options->allowed_clients = allowed;
}

void LinkSecurity::Apply(ChannelOptions* options) const {
  if (!IsTcpEndpoint(options->endpoint) || !keys || server_public_key.empty()) return;
  options->curve = keys;
  options->server_public_key = server_public_key;
}

}  // namespace propeller::rpc
