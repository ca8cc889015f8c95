/* Compiled as C: the C ABI header must be valid C on its own, and usable from C. */
#include "client/lib/propeller_c.h"

static int count_hit(void* ctx, const propeller_hit* hit) {
  (void)hit;
  ++*(size_t*)ctx;
  return 1;
}

/* Counts the matches of `query` under `scope`; -1 on error (message freed). */
long propeller_c_count(const char* master, const char* query, const char* scope) {
  propeller_client* client = NULL;
  char* error = NULL;
  size_t n = 0;
  if (propeller_connect(master, &client, &error) != 0) {
    propeller_free(error);
    return -1;
  }
  int rc = propeller_search(client, query, scope, 0, NULL, 0, count_hit, &n, &error);
  propeller_close(client);
  if (rc != 0) {
    propeller_free(error);
    return -1;
  }
  return (long)n;
}
