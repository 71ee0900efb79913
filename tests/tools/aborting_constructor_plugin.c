/* A backend plugin whose load-time constructor calls abort() (like a library
 * that asserts on a missing device file while dlopen runs it): distinfo must
 * list it as crashed while being loaded, and list every other plugin. */
#include <stdlib.h>

#include "dist/backend_plugin.h"

__attribute__((constructor)) static void AbortOnLoad(void) { abort(); }

static dist_error_t* CommCreate(const dist_comm_config_t* config, dist_backend_comm_t** comm) {
  (void)config;
  *comm = NULL;
  return dist_error_new(DIST_UNIMPLEMENTED, "aborting_constructor has no communicators");
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
  table.name = "aborting_constructor";
  table.version = "0.0.1";
  table.comm_create = CommCreate;
  table.work_wait = WorkWait;
  table.work_destroy = WorkDestroy;
  return &table;
}
