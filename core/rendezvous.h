// Runs an init-method URL through its rendezvous plugin and the join check.
#ifndef DIST_CORE_RENDEZVOUS_H_
#define DIST_CORE_RENDEZVOUS_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "dist/rendezvous_plugin.h"

namespace dist {

// "tcp://h:p?x" -> "tcp". Errors name the URL and the accepted forms.
absl::StatusOr<std::string> UrlScheme(const std::string& url);

// Hands a store back after its job failed and says why (release_failed), so
// a store shared through a file can tell ranks that arrive later, and a
// rank-0 TCP store stops waiting for ranks that may never disconnect. Stores
// built against ABI 1.0 end before release_failed (struct_size says so):
// they are released.
void ReleaseStoreFailed(dist_store_t* store, const std::string& reason);

// On success the caller owns result.store.
absl::StatusOr<dist_rendezvous_result_t> Rendezvous(const std::string& url,
                                                    const dist_rendezvous_hints_t& hints,
                                                    absl::Duration timeout);

// The store of a running job, for a process that joins it (dist.h: DIST_JOIN):
// the plugin opens it without claiming a rank (rendezvous ABI 1.2, the hint
// option dist.join=1), and no join check runs. The caller owns the store.
absl::StatusOr<dist_store_t*> OpenStoreToJoin(const std::string& url,
                                              const dist_rendezvous_hints_t& hints,
                                              absl::Duration timeout);

}  // namespace dist

#endif  // DIST_CORE_RENDEZVOUS_H_
