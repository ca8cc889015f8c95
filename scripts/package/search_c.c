/* scripts/package.sh: a C program built against the installed libpropeller-dev with
 * pkg-config. Prints the paths matching QUERY through the local service (propeller_connect's
 * default: the running `propeller up`), one per line; exit 1 with the library's message on an
 * error. usage: search_c QUERY */
#include <propeller/propeller_c.h>
#include <stdio.h>

static int print_hit(void* ctx, const propeller_hit* hit) {
  (void)ctx;
  printf("%s\n", hit->path);
  return 1;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: search_c QUERY\n");
    return 2;
  }
  propeller_client* client = NULL;
  char* error = NULL;
  int rc = propeller_connect(NULL, &client, &error);
  if (rc == 0) {
    rc = propeller_search(client, argv[1], NULL, 0, NULL, 0, print_hit, NULL, &error);
    propeller_close(client);
  }
  if (rc != 0) {
    fprintf(stderr, "search_c: %s\n", error != NULL ? error : "(no message)");
    propeller_free(error);
    return 1;
  }
  return 0;
}
