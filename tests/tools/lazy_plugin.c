/* A backend plugin that accepts every operation and does nothing: its
 * all-reduce leaves each rank's data as it was. distinfo's self-test must
 * catch the wrong results. */
#include <stddef.h>

#include "tests/tools/minimal_backend.h"

static int the_comm, the_work;

static void GetCapabilities(dist_backend_capabilities_t* caps) {
  caps->device_types = 1u << DIST_DEVICE_CPU;
  caps->dtypes = 1u << DIST_FLOAT32;
  caps->collectives =
      (1u << DIST_COLL_ALL_REDUCE) | (1u << DIST_COLL_BROADCAST) | (1u << DIST_COLL_BARRIER);
  caps->all_reduce_ops = 1u << DIST_SUM;
  caps->reduce_ops = 0;
  caps->reduce_scatter_ops = 0;
  caps->flags = 0;
  caps->notes = "does nothing, on purpose";
}

static dist_error_t* CommCreate(const dist_comm_config_t* config, dist_backend_comm_t** comm) {
  (void)config;
  *comm = (dist_backend_comm_t*)&the_comm;
  return NULL;
}

static void CommAbort(dist_backend_comm_t* comm, const char* reason) {
  (void)comm;
  (void)reason;
}

static void CommDestroy(dist_backend_comm_t* comm) { (void)comm; }

static dist_error_t* Nothing(dist_backend_comm_t* comm, const dist_op_args_t* args,
                             dist_backend_work_t** work) {
  (void)comm;
  (void)args;
  *work = (dist_backend_work_t*)&the_work;
  return NULL;
}

static dist_error_t* WorkTest(dist_backend_work_t* work, int* done) {
  (void)work;
  *done = 1;
  return NULL;
}

/* The minimal table, with communicators whose operations do nothing. */
DIST_EXPORT const dist_backend_plugin_t* dist_backend_plugin_v1(void) {
  static dist_backend_plugin_t table;
  FillMinimalBackend(&table, "lazy", NULL);
  table.get_capabilities = GetCapabilities;
  table.comm_create = CommCreate;
  table.comm_abort = CommAbort;
  table.comm_destroy = CommDestroy;
  table.all_reduce = Nothing;
  table.broadcast = Nothing;
  table.barrier = Nothing;
  table.work_test = WorkTest;
  return &table;
}
