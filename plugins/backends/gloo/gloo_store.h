// Gloo's rendezvous store (gloo::rendezvous::Store) on top of a dist store,
// so that Gloo's own address exchange (connectFullMesh) runs over it: the
// plugin's over the store the rendezvous plugin made, distbench's raw-Gloo
// baseline over its own. The one copy (//plugins/backends/gloo:gloo_store).
#ifndef DIST_PLUGINS_BACKENDS_GLOO_GLOO_STORE_H_
#define DIST_PLUGINS_BACKENDS_GLOO_GLOO_STORE_H_

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "dist/cpp/store.hpp"
#include "gloo/rendezvous/store.h"

namespace dist_gloo {

class GlooStore : public gloo::rendezvous::Store {
 public:
  // Borrows `store`; every key gets `prefix`. A failed call throws
  // gloo::IoException with the store's message.
  GlooStore(const dist_store_t* store, absl::Duration timeout, std::string prefix = "")
      : store_(store), timeout_(timeout), prefix_(std::move(prefix)) {}

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

  // The first store error, with the keys Gloo was waiting for (Gloo's keys
  // are rank numbers), or OK. Gloo only sees a gloo::IoException.
  absl::Status first_error() const;

 private:
  void Fail(absl::Status status);
  // "Gloo rendezvous timed out ... waiting for the address of rank(s) ..."
  absl::Status Explain(absl::Status status, const std::vector<std::string>& keys,
                       absl::Duration timeout) const;

  dist::StoreView store_;
  absl::Duration timeout_;
  const std::string prefix_;
  // A one-key wait is left to the get that Gloo always sends next (the
  // store's get itself waits for the key): one round trip per peer instead
  // of two at start-up (README.md, "Start-up").
  std::string deferred_key_;
  absl::Duration deferred_timeout_;
  mutable absl::Mutex mu_;
  absl::Status first_error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace dist_gloo

#endif  // DIST_PLUGINS_BACKENDS_GLOO_GLOO_STORE_H_
