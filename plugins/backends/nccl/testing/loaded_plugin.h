// Loads a backend plugin .so the way the core does (dlopen, the one entry
// symbol, initialize), for the nccl tests and the benchmark, which exercise
// the real built artifact rather than linking its sources.
#ifndef DIST_PLUGINS_BACKENDS_NCCL_TESTING_LOADED_PLUGIN_H_
#define DIST_PLUGINS_BACKENDS_NCCL_TESTING_LOADED_PLUGIN_H_

#include <string>

#include "absl/status/statusor.h"
#include "dist/backend_plugin.h"

namespace dist_nccl::testing {

// The table of the plugin at `path`, initialized with StderrHost(). The
// library stays loaded for the process (as in the core).
absl::StatusOr<const dist_backend_plugin_t*> LoadBackendPlugin(const std::string& path);

// Host services that print warnings and errors to stderr (all levels when
// DIST_LOG_LEVEL=debug). No store_with_prefix: tests use a fresh store per
// communicator.
const dist_host_api_t* StderrHost();

// The plugin path: `flag_value` when set, else the first existing of the
// usual places relative to the runfiles tree or to argv0.
std::string FindNcclPlugin(const std::string& flag_value, const char* argv0);

}  // namespace dist_nccl::testing

#endif  // DIST_PLUGINS_BACKENDS_NCCL_TESTING_LOADED_PLUGIN_H_
