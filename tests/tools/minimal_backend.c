#include "tests/tools/minimal_backend.h"

#include <stddef.h>

/* One fixture per .so, so one name per copy of this file. */
static const char* backend_name = "";

static dist_error_t* CommCreate(const dist_comm_config_t* config, dist_backend_comm_t** comm) {
  (void)config;
  *comm = NULL;
  return dist_error_new(DIST_UNIMPLEMENTED, "%s has no communicators", backend_name);
}

static dist_error_t* WorkWait(dist_backend_work_t* work, int64_t timeout_ms) {
  (void)work;
  (void)timeout_ms;
  return NULL;
}

static void WorkDestroy(dist_backend_work_t* work) { (void)work; }

void FillMinimalBackend(dist_backend_plugin_t* table, const char* name,
                        dist_error_t* (*probe)(void)) {
  backend_name = name;
  table->struct_size = sizeof(*table);
  table->abi_major = DIST_BACKEND_ABI_MAJOR;
  table->abi_minor = DIST_BACKEND_ABI_MINOR;
  table->name = name;
  table->version = "0.0.1";
  table->probe = probe;
  table->comm_create = CommCreate;
  table->work_wait = WorkWait;
  table->work_destroy = WorkDestroy;
}
