// A store of its own for raw baselines that need one (Gloo): a tcp://
// rendezvous, separate from the group's, at a free port rank 0 picks.
#ifndef DIST_TOOLS_DISTBENCH_BASELINE_STORE_H_
#define DIST_TOOLS_DISTBENCH_BASELINE_STORE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "dist/store.h"
#include "tools/distbench/baseline.h"

namespace distbench {

// Releases the store on destruction.
class OwnedStore {
 public:
  explicit OwnedStore(dist_store_t* store) : store_(store) {}
  ~OwnedStore() {
    if (store_ != nullptr) store_->release(store_->ctx);
  }
  OwnedStore(const OwnedStore&) = delete;
  OwnedStore& operator=(const OwnedStore&) = delete;
  dist_store_t* get() const { return store_; }

 private:
  dist_store_t* store_;
};

// The address other ranks reach rank 0 at: MASTER_ADDR, else 127.0.0.1 when
// every rank is on this host, else this host's name.
std::string RankZeroAddress(const BaselineSetup& setup);

// Collective: runs dist_rendezvous on a fresh tcp:// URL with this rank and
// world size. Errors name the URL.
absl::StatusOr<std::unique_ptr<OwnedStore>> MakeBaselineStore(const BaselineSetup& setup);

}  // namespace distbench

#endif  // DIST_TOOLS_DISTBENCH_BASELINE_STORE_H_
