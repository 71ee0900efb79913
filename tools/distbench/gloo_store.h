// gloo::rendezvous::Store over a dist_store_t, so a raw Gloo context can
// meet through the same kind of store the gloo plugin uses.
#ifndef DIST_TOOLS_DISTBENCH_GLOO_STORE_H_
#define DIST_TOOLS_DISTBENCH_GLOO_STORE_H_

#include <chrono>
#include <string>
#include <vector>

#include "dist/store.h"
#include "gloo/rendezvous/store.h"

namespace distbench {

// Borrows `store`; keys get `prefix`. Gloo expects failures as exceptions:
// each failed call throws gloo::EnforceNotMet with the store's message.
class GlooStore : public gloo::rendezvous::Store {
 public:
  GlooStore(dist_store_t* store, std::string prefix, int64_t timeout_ms)
      : store_(store), prefix_(std::move(prefix)), timeout_ms_(timeout_ms) {}

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

 private:
  dist_store_t* store_;
  std::string prefix_;
  int64_t timeout_ms_;
};

}  // namespace distbench

#endif  // DIST_TOOLS_DISTBENCH_GLOO_STORE_H_
