#!/usr/bin/env bash
# libpropeller_abi_test (client/CMakeLists.txt): the shared library has the SONAME of its ABI,
# exports every function of propeller_c.h under the version node PROPELLER_1 and nothing
# outside propeller_* and the propeller namespace, needs no symbol it does not link, and a C
# program links against it alone and runs (an error path: no service at a bogus endpoint).
#   usage: abi_test.sh LIBPROPELLER_SO CLIENT_LIB_SOURCE_DIR
set -euo pipefail
lib="$1"
src="$2"
fail() { echo "abi_test: $*" >&2; exit 1; }

soname="$(objdump -p "$lib" | awk '/SONAME/ {print $2}')"
[[ "$soname" =~ ^libpropeller\.so\.[0-9]+$ ]] || fail "SONAME is '$soname', not libpropeller.so.N"

# Every function the C header declares is exported, versioned.
mapfile -t declared < <(grep -oE '\bpropeller_[a-z_]+\(' "$src/propeller_c.h" | tr -d '(' | sort -u)
[ "${#declared[@]}" -ge 8 ] || fail "found only ${#declared[@]} functions in propeller_c.h"
dyn="$(objdump -T "$lib")"
for f in "${declared[@]}"; do
  grep -qE "PROPELLER_1 +$f\$" <<<"$dyn" || fail "$f is not exported as $f@@PROPELLER_1"
done
# Nothing else leaks: every defined dynamic symbol is propeller_* or in namespace propeller
# (demangled), e.g. no msgpack:: or std:: instantiations of our own copies.
leaked="$(nm -D -C --defined-only "$lib" | cut -d' ' -f3- \
          | grep -vE '^(propeller_|propeller::|PROPELLER_1$)' \
          | grep -vE '^(typeinfo|typeinfo name|vtable|VTT|guard variable|construction vtable) for propeller::' \
          || true)"
[ -z "$leaked" ] || fail "exports symbols outside propeller: $(head -5 <<<"$leaked")"

# A C program links against the library alone (-Wl,--no-undefined: all it needs is in it).
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/include/propeller"
cp "$src/propeller_c.h" "$tmp/include/propeller/"
cat >"$tmp/t.c" <<'C'
#include <propeller/propeller_c.h>
#include <stdio.h>
#include <string.h>
static int on_hit(void* ctx, const propeller_hit* hit) { (void)ctx; (void)hit; return 1; }
int main(void) {
  propeller_client* c = NULL;
  char* err = NULL;
  /* Nothing listens there: connect or search must fail with a message, not crash. */
  int rc = propeller_connect("ipc:///nonexistent/propeller-abi-test.sock", &c, &err);
  if (rc == 0) {
    rc = propeller_search(c, "size>0", NULL, 0, NULL, 0, on_hit, NULL, &err);
    propeller_close(c);
  }
  if (rc == 0 || err == NULL || strlen(err) == 0) { puts("expected an error"); return 1; }
  printf("error as expected (%d): %s\n", rc, err);
  propeller_free(err);
  return 0;
}
C
# ABI_TEST_CFLAGS: the sanitizer flags of an instrumented library (its runtime must come first).
# shellcheck disable=SC2086
cc -std=c11 -Wall -Werror ${ABI_TEST_CFLAGS:-} -I"$tmp/include" "$tmp/t.c" -o "$tmp/t" \
   -L"$(dirname "$lib")" -lpropeller
LD_LIBRARY_PATH="$(dirname "$lib")" timeout 60 "$tmp/t"
echo "abi_test: $soname exports ${#declared[@]} C functions; a C program links and runs"
