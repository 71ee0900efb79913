// An in-process dist_store_t for the nccl tests and the benchmark, whose
// ranks are threads of one process (one GPU each). Thread-safe; get and
// wait block with their timeout like the real stores.
#ifndef DIST_PLUGINS_BACKENDS_NCCL_TESTING_MEMORY_STORE_H_
#define DIST_PLUGINS_BACKENDS_NCCL_TESTING_MEMORY_STORE_H_

#include "dist/store.h"

namespace dist_nccl::testing {

// A new empty store. Release it with store->release(store->ctx).
dist_store_t* NewMemoryStore();

}  // namespace dist_nccl::testing

#endif  // DIST_PLUGINS_BACKENDS_NCCL_TESTING_MEMORY_STORE_H_
