// The hidden flags of the self-test worker mode. They live apart from
// main.cc so that --help (which lists main.cc's flags) does not show them.
#include <cstdint>
#include <string>

#include "absl/flags/flag.h"

ABSL_FLAG(std::string, selftest_worker, "", "Internal: run as one self-test rank of this backend.");
ABSL_FLAG(std::string, selftest_init, "env://", "Internal: the self-test worker's init method.");
ABSL_FLAG(int64_t, selftest_timeout_ms, 30000, "Internal: the self-test worker's dist timeout.");
