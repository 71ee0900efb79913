// A store view that prepends a prefix to every key: how subgroups and the
// communicators of one process group get namespaces of their own in one
// shared store.
#ifndef DIST_CORE_PREFIX_STORE_H_
#define DIST_CORE_PREFIX_STORE_H_

#include <string>

#include "absl/status/statusor.h"
#include "dist/store.h"

namespace dist {

// Returns a new store the caller owns (release it). `base` must outlive it.
absl::StatusOr<dist_store_t*> MakePrefixStore(const dist_store_t* base, std::string prefix);

}  // namespace dist

#endif  // DIST_CORE_PREFIX_STORE_H_
