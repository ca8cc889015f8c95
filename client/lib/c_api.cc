// The C ABI of propeller_c.h over the C++ Client. No exception or C++ type crosses it.
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "client/lib/propeller.h"
#include "client/lib/propeller_c.h"

struct propeller_client {
  std::unique_ptr<propeller::Client> client;
};

namespace {

int Fail(const propeller::Status& status, char** error) {
  if (error != nullptr) *error = ::strdup(status.ToString().c_str());
  return static_cast<int>(status.code());
}

int Done(const propeller::Status& status, char** error) {
  if (status.ok()) return 0;
  return Fail(status, error);
}

bool Missing(const void* p, const char* what, char** error, int* rc) {
  if (p != nullptr) return false;
  *rc = Fail(propeller::Status::InvalidArgument(std::string(what) + " must not be NULL"), error);
  return true;
}

}  // namespace

extern "C" {

int propeller_connect(const char* master_endpoint, propeller_client** out, char** error) {
  int rc = 0;
  if (Missing(out, "out", error, &rc)) return rc;
  propeller::ClientOptions options;
  if (master_endpoint != nullptr) options.master_endpoint = master_endpoint;
  auto client = propeller::Client::Connect(options);
  if (!client.ok()) return Fail(client.status(), error);
  *out = new propeller_client{std::move(client).value()};
  return 0;
}

void propeller_close(propeller_client* client) { delete client; }

// A record as the C ABI shows it (valid while `path` and `record` live).
static propeller_hit HitOf(const std::string& path, const propeller::FileRecord& record) {
  propeller_hit hit{};
  hit.path = path.c_str();
  hit.volume = record.id.volume;
  hit.ino = record.id.ino;
  hit.type = static_cast<char>(record.type);
  hit.size = record.size;
  // The C ABI keeps int64 nanoseconds: times beyond 1677..2262 are clamped.
  hit.mtime_ns = propeller::ClampToInt64(record.mtime);
  hit.ctime_ns = propeller::ClampToInt64(record.ctime);
  hit.atime_ns = propeller::ClampToInt64(record.atime);
  hit.uid = record.uid;
  hit.gid = record.gid;
  hit.mode = record.mode;
  hit.nlink = record.nlink;
  return hit;
}

int propeller_search(propeller_client* client, const char* query, const char* scope,
                     size_t limit, const char* sort_by, int descending, propeller_hit_fn fn,
                     void* ctx, char** error) {
  int rc = 0;
  if (Missing(client, "client", error, &rc) || Missing(query, "query", error, &rc) ||
      Missing(reinterpret_cast<const void*>(fn), "fn", error, &rc)) {
    return rc;
  }
  propeller::ClientSearchOptions options;
  if (scope != nullptr && *scope != '\0') options.scope = scope;
  options.limit = limit;
  if (sort_by != nullptr) options.sort_by = sort_by;
  options.descending = descending != 0;
  propeller::Status st = client->client->Search(
      query, options, [&](const propeller::ClientHit& h) {
        const propeller_hit hit = HitOf(h.path, h.record);
        return fn(ctx, &hit) != 0;
      });
  return Done(st, error);
}

int propeller_watch(propeller_client* client, const char* query, const char* scope,
                    propeller_watch_fn fn, void* ctx, char** error) {
  int rc = 0;
  if (Missing(client, "client", error, &rc) || Missing(query, "query", error, &rc) ||
      Missing(reinterpret_cast<const void*>(fn), "fn", error, &rc)) {
    return rc;
  }
  propeller::ClientWatchOptions options;
  if (scope != nullptr && *scope != '\0') options.scope = scope;
  bool stopped = false;
  options.on_ready = [&] { stopped = fn(ctx, 'r', nullptr) == 0; };
  options.on_idle = [&] { return fn(ctx, 'i', nullptr) != 0; };
  propeller::Status st = client->client->Watch(
      query, options, [&](const propeller::ClientWatchEvent& e) {
        if (stopped) return false;
        const propeller_hit hit = HitOf(e.path, e.record);
        return fn(ctx, e.kind, &hit) != 0;
      });
  return Done(st, error);
}

static int SetAttr(propeller_client* client, const char* path, const char* name,
                   const propeller::AttrValue& value, char** error) {
  int rc = 0;
  if (Missing(client, "client", error, &rc) || Missing(path, "path", error, &rc) ||
      Missing(name, "name", error, &rc)) {
    return rc;
  }
  auto id = client->client->FileIdOf(path);
  if (!id.ok()) return Fail(id.status(), error);
  return Done(client->client->SetAttr(*id, name, value), error);
}

int propeller_set_attr_int(propeller_client* client, const char* path, const char* name,
                           int64_t value, char** error) {
  return SetAttr(client, path, name, propeller::AttrValue(value), error);
}

int propeller_set_attr_string(propeller_client* client, const char* path, const char* name,
                              const char* value, char** error) {
  int rc = 0;
  if (Missing(value, "value", error, &rc)) return rc;
  return SetAttr(client, path, name, propeller::AttrValue(std::string(value)), error);
}

int propeller_remove_attr(propeller_client* client, const char* path, const char* name,
                          char** error) {
  int rc = 0;
  if (Missing(client, "client", error, &rc) || Missing(path, "path", error, &rc) ||
      Missing(name, "name", error, &rc)) {
    return rc;
  }
  auto id = client->client->FileIdOf(path);
  if (!id.ok()) return Fail(id.status(), error);
  return Done(client->client->RemoveAttr(*id, name), error);
}

void propeller_free(void* p) { std::free(p); }

}  // extern "C"
