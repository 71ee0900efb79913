/* A backend plugin whose probe dereferences NULL (like a driver library that
 * segfaults on a broken install): distinfo must list it as crashed, with the
 * signal and the file, and list every other plugin as usual. */
#include <signal.h>
#include <stddef.h>

#include "tests/tools/minimal_backend.h"

/* volatile: the compiler must not see the NULL and turn the store into a
 * trap (SIGILL) or drop it. */
static int* volatile target = NULL;

/* Under --config=asan the crash must still be a SIGSEGV: UBSan must not
 * report the NULL store first, nor ASan's handler turn the fault into an
 * abort. */
__attribute__((no_sanitize("undefined"))) static dist_error_t* Probe(void) {
  signal(SIGSEGV, SIG_DFL);
  *target = 1;
  return NULL;
}

DIST_EXPORT const dist_backend_plugin_t* dist_backend_plugin_v1(void) {
  static dist_backend_plugin_t table;
  FillMinimalBackend(&table, "crashing_probe", Probe);
  return &table;
}
