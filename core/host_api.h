// The services table the core hands to every plugin's initialize().
#ifndef DIST_CORE_HOST_API_H_
#define DIST_CORE_HOST_API_H_

#include "dist/host.h"

namespace dist {

// Lives for the whole process.
const dist_host_api_t* HostApi();

}  // namespace dist

#endif  // DIST_CORE_HOST_API_H_
