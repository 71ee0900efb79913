/* A backend plugin whose probe dereferences NULL (like a driver library that
 * segfaults on a broken install): distinfo must list it as crashed, with the
 * signal and the file, and list every other plugin as usual. */
#include <stddef.h>

#include "dist/backend_plugin.h"

/* volatile: the compiler must not see the NULL and turn the store into a
 * trap (SIGILL) or drop it. */
static int* volatile target = NULL;

static dist_error_t* Probe(void) {
  *target = 1;
  return NULL;
}

static dist_error_t* CommCreate(const dist_comm_config_t* config, dist_backend_comm_t** comm) {
  (void)config;
  *comm = NULL;
  return dist_error_new(DIST_UNIMPLEMENTED, "crashing_probe has no communicators");
}

static dist_error_t* WorkWait(dist_backend_work_t* work, int64_t timeout_ms) {
  (void)work;
  (void)timeout_ms;
  return NULL;
}

static void WorkDestroy(dist_backend_work_t* work) { (void)work; }

DIST_EXPORT const dist_backend_plugin_t* dist_backend_plugin_v1(void) {
  static dist_backend_plugin_t table;
  table.struct_size = sizeof(table);
  table.abi_major = DIST_BACKEND_ABI_MAJOR;
  table.abi_minor = DIST_BACKEND_ABI_MINOR;
  table.name = "crashing_probe";
  table.version = "0.0.1";
  table.probe = Probe;
  table.comm_create = CommCreate;
  table.work_wait = WorkWait;
  table.work_destroy = WorkDestroy;
  return &table;
}
