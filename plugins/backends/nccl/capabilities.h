// What the nccl backend supports, as the capability masks of
// backend_plugin.h. Pure data, so it is tested without a GPU.
#ifndef DIST_PLUGINS_BACKENDS_NCCL_CAPABILITIES_H_
#define DIST_PLUGINS_BACKENDS_NCCL_CAPABILITIES_H_

#include "dist/backend_plugin.h"

namespace dist_nccl {

// Fills a zeroed, full-size struct (the plugin adapter copies what the
// caller has room for).
void FillCapabilities(dist_backend_capabilities_t& caps);

}  // namespace dist_nccl

#endif  // DIST_PLUGINS_BACKENDS_NCCL_CAPABILITIES_H_
