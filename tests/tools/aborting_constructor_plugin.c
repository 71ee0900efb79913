/* A backend plugin whose load-time constructor calls abort() (like a library
 * that asserts on a missing device file while dlopen runs it): distinfo must
 * list it as crashed while being loaded, and list every other plugin. */
#include <stddef.h>
#include <stdlib.h>

#include "tests/tools/minimal_backend.h"

__attribute__((constructor)) static void AbortOnLoad(void) { abort(); }

DIST_EXPORT const dist_backend_plugin_t* dist_backend_plugin_v1(void) {
  static dist_backend_plugin_t table;
  FillMinimalBackend(&table, "aborting_constructor", NULL);
  return &table;
}
