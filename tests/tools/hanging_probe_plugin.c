/* A backend plugin whose probe never returns (like a wedged GPU driver):
 * distinfo must give up after --load_timeout instead of hanging. */
#include <unistd.h>

#include "dist/backend_plugin.h"

static dist_error_t* Probe(void) {
  for (;;) pause();
  return NULL;
}

static dist_error_t* CommCreate(const dist_comm_config_t* config, dist_backend_comm_t** comm) {
  (void)config;
  *comm = NULL;
  return dist_error_new(DIST_UNIMPLEMENTED, "hanging_probe has no communicators");
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
  table.name = "hanging_probe";
  table.version = "0.0.1";
  table.probe = Probe;
  table.comm_create = CommCreate;
  table.work_wait = WorkWait;
  table.work_destroy = WorkDestroy;
  return &table;
}
