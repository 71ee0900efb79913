// A backend plugin for distbench's own test that computes all_reduce WRONG
// on purpose (element 0 of every float32 result is off by one), so the test
// can see --check count wrong elements and distbench fail. One rank only;
// float64 (distbench's own bookkeeping) stays right.
#include <cstring>

#include "dist/backend_plugin.h"

namespace {

struct Comm {
  int unused = 0;
};

// Every operation completes before it returns: one shared finished handle.
dist_backend_work_t* Done() {
  static int done = 0;
  return reinterpret_cast<dist_backend_work_t*>(&done);
}

dist_error_t* Initialize(const dist_host_api_t*) { return nullptr; }
const char* LibraryVersion() { return "liar (wrong on purpose)"; }
dist_error_t* Probe() { return nullptr; }

void Capabilities(dist_backend_capabilities_t* caps) {
  caps->device_types = 1u << DIST_DEVICE_CPU;
  caps->dtypes = (1u << DIST_FLOAT32) | (1u << DIST_FLOAT64);
  caps->collectives = (1u << DIST_COLL_ALL_REDUCE) | (1u << DIST_COLL_BARRIER);
  caps->all_reduce_ops = (1u << DIST_SUM) | (1u << DIST_MAX);
  caps->reduce_ops = 0;
  caps->reduce_scatter_ops = 0;
  caps->flags = 0;
  caps->notes = "test plugin: all_reduce of float32 is wrong on purpose";
}

dist_error_t* CommCreate(const dist_comm_config_t* config, dist_backend_comm_t** comm) {
  if (config->world_size != 1) {
    return dist_error_new(DIST_UNIMPLEMENTED, "liar: runs on one rank only; use -n 1");
  }
  *comm = reinterpret_cast<dist_backend_comm_t*>(new Comm());
  return nullptr;
}

void CommAbort(dist_backend_comm_t*, const char*) {}
void CommDestroy(dist_backend_comm_t* comm) { delete reinterpret_cast<Comm*>(comm); }

dist_error_t* AllReduce(dist_backend_comm_t*, const dist_op_args_t* args,
                        dist_backend_work_t** work) {
  const size_t bytes = args->send.count * dist_dtype_size(args->send.dtype);
  if (args->recv.data != args->send.data && bytes > 0) {
    std::memcpy(args->recv.data, args->send.data, bytes);
  }
  if (args->recv.dtype == DIST_FLOAT32 && args->recv.count > 0) {
    static_cast<float*>(args->recv.data)[0] += 1.0f;  // the lie
  }
  *work = Done();
  return nullptr;
}

dist_error_t* Barrier(dist_backend_comm_t*, const dist_op_args_t*, dist_backend_work_t** work) {
  *work = Done();
  return nullptr;
}

dist_error_t* WorkWait(dist_backend_work_t*, int64_t) { return nullptr; }
dist_error_t* WorkTest(dist_backend_work_t*, int* done) {
  *done = 1;
  return nullptr;
}
void WorkDestroy(dist_backend_work_t*) {}

}  // namespace

extern "C" DIST_EXPORT const dist_backend_plugin_t* dist_backend_plugin_v1(void) {
  static const dist_backend_plugin_t table = [] {
    dist_backend_plugin_t t;
    std::memset(&t, 0, sizeof(t));
    t.struct_size = sizeof(t);
    t.abi_major = DIST_BACKEND_ABI_MAJOR;
    t.abi_minor = DIST_BACKEND_ABI_MINOR;
    t.name = "liar";
    t.version = "0.0.1";
    t.initialize = &Initialize;
    t.library_version = &LibraryVersion;
    t.probe = &Probe;
    t.get_capabilities = &Capabilities;
    t.comm_create = &CommCreate;
    t.comm_abort = &CommAbort;
    t.comm_destroy = &CommDestroy;
    t.all_reduce = &AllReduce;
    t.barrier = &Barrier;
    t.work_wait = &WorkWait;
    t.work_test = &WorkTest;
    t.work_destroy = &WorkDestroy;
    return t;
  }();
  return &table;
}
