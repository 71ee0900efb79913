/* A backend plugin whose probe never returns (like a wedged GPU driver):
 * distinfo must give up after --load_timeout instead of hanging. */
#include <stddef.h>
#include <unistd.h>

#include "tests/tools/minimal_backend.h"

static dist_error_t* Probe(void) {
  for (;;) pause();
  return NULL;
}

DIST_EXPORT const dist_backend_plugin_t* dist_backend_plugin_v1(void) {
  static dist_backend_plugin_t table;
  FillMinimalBackend(&table, "hanging_probe", Probe);
  return &table;
}
