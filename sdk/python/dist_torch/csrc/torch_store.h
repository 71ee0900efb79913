// torch's c10d::Store seen as a dist_store_t, so that dist's ranks meet
// through the store torch.distributed already made (env://, tcp://, file://
// of init_process_group) instead of an init method of their own.
#ifndef DIST_TORCH_TORCH_STORE_H_
#define DIST_TORCH_TORCH_STORE_H_

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "dist/store.h"

namespace dist_torch {

// A new table over `store` (holding a reference to it); its release frees
// the table and drops the reference. Hand it to dist_init_options_t.store,
// which owns it from then on.
dist_store_t* NewTorchStore(const c10::intrusive_ptr<c10d::Store>& store);

}  // namespace dist_torch

#endif  // DIST_TORCH_TORCH_STORE_H_
