/* libpropeller C ABI: search and attribute calls for other languages (docs/architecture.md §9).
 *
 * A thin, stable wrapper over the C++ Client (client/lib/propeller.h). Every function returns
 * 0 on success or a StatusCode number (common/status.h: 1 not found, 2 invalid argument,
 * 8 unavailable, 9 timeout, ...) and, when `error` is not NULL, stores a malloc'd one-line
 * message there that the caller frees with propeller_free(). Strings passed in are
 * NUL-terminated UTF-8 (or any bytes); strings handed to callbacks live until the callback
 * returns. A propeller_client may be used from several threads at once.
 */
#ifndef PROPELLER_CLIENT_LIB_PROPELLER_C_H_
#define PROPELLER_CLIENT_LIB_PROPELLER_C_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct propeller_client propeller_client;

/* One search hit. Valid only during the callback. */
typedef struct propeller_hit {
  const char* path; /* host path: volume root + in-volume path */
  uint32_t volume;
  uint64_t ino;
  char type; /* 'f', 'd', 'l', 'o' */
  uint64_t size;
  int64_t mtime_ns;
  int64_t ctime_ns;
  int64_t atime_ns;
  uint32_t uid;
  uint32_t gid;
  uint32_t mode;
  uint32_t nlink;
} propeller_hit;

/* Return non-zero to continue, 0 to stop the search. */
typedef int (*propeller_hit_fn)(void* ctx, const propeller_hit* hit);

/* master_endpoint NULL or "" = $PROPELLER_MASTER, else a local `propeller up`'s unix socket,
 * else tcp://127.0.0.1:7470 (propeller.h, DefaultMasterEndpoint). tcp:// endpoints need the
 * cluster key ($PROPELLER_CLUSTER_KEY; docs/security.md). */
int propeller_connect(const char* master_endpoint, propeller_client** out, char** error);
void propeller_close(propeller_client* client);

/* scope NULL = everything; limit 0 = none; sort_by NULL or "" = unordered. Results are
 * filtered by the calling process's credentials. */
int propeller_search(propeller_client* client, const char* query, const char* scope,
                     size_t limit, const char* sort_by, int descending, propeller_hit_fn fn,
                     void* ctx, char** error);

/* A live query (propeller.h, Client::Watch; docs/cli.md `propeller watch`): `fn` is called on
 * the calling thread with kind
 *   '+' a path started matching, '-' it stopped matching, '~' a match changed
 *       (`hit`: the path and the record after the change, before it for '-'),
 *   'r' once, when every index node registered the watch (`hit` NULL): every change
 *       acknowledged after this call is reported,
 *   'i' about once a second while nothing changes (`hit` NULL),
 * until it returns 0 (then propeller_watch returns 0) or the watch ends with an error
 * (8 unavailable: a node or the mount stopped answering; 11 resource exhausted: the watch fell
 * behind because `fn` was too slow, or too many watches). scope NULL = everything. */
typedef int (*propeller_watch_fn)(void* ctx, char kind, const propeller_hit* hit);
int propeller_watch(propeller_client* client, const char* query, const char* scope,
                    propeller_watch_fn fn, void* ctx, char** error);

/* User attributes of the file at host path `path` (stat'ed here to find its inode). */
int propeller_set_attr_int(propeller_client* client, const char* path, const char* name,
                           int64_t value, char** error);
int propeller_set_attr_string(propeller_client* client, const char* path, const char* name,
                              const char* value, char** error);
int propeller_remove_attr(propeller_client* client, const char* path, const char* name,
                          char** error);

void propeller_free(void* p);

#ifdef __cplusplus
}
#endif

#endif /* PROPELLER_CLIENT_LIB_PROPELLER_C_H_ */
