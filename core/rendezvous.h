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

// On success the caller owns result.store.
absl::StatusOr<dist_rendezvous_result_t> Rendezvous(const std::string& url,
                                                    const dist_rendezvous_hints_t& hints,
                                                    absl::Duration timeout);

}  // namespace dist

#endif  // DIST_CORE_RENDEZVOUS_H_
