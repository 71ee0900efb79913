// An "old" plugin: the tutorial's kvstore backend as released with ABI 1.0
// (the frozen copy tests/abi/v1_0/kvstore_backend.cc) compiled against the
// FROZEN ABI 1.0 headers (tests/abi/v1_0/include), as a third party's plugin
// built before ABI 1.1 would be. Its table has no work_wait_stream and says
// abi_minor 0; the current core must load it and it must pass conformance.
#include "dist/backend_plugin.h"

static_assert(DIST_BACKEND_ABI_MINOR == 0, "this fixture must see the frozen 1.0 headers");

#include "tests/abi/v1_0/kvstore_backend.cc"
