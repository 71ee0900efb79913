// Exposes a C++ Store through the C ABI (dist_store_t).
#ifndef DIST_PLUGINS_STORE_ABI_STORE_H_
#define DIST_PLUGINS_STORE_ABI_STORE_H_

#include <functional>
#include <memory>

#include "absl/time/time.h"
#include "dist/store.h"
#include "plugins/store/store.h"

namespace dist::store {

// Returns a heap-allocated dist_store_t that owns `store`. Its release()
// destroys the store, then runs after_release(false) (a rank-0 TCP store uses
// it to let its server linger until the other ranks have left);
// release_failed(reason) first calls store->Abandon(reason), then releases
// and runs after_release(true) (the job failed: linger only briefly).
// `default_timeout` serves get/wait calls that pass timeout_ms < 0.
dist_store_t* MakeAbiStore(std::unique_ptr<Store> store, absl::Duration default_timeout,
                           std::function<void(bool failed)> after_release = nullptr);

}  // namespace dist::store

#endif  // DIST_PLUGINS_STORE_ABI_STORE_H_
