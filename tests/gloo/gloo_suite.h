// The Gloo suite's part of the rank harness (tests/common/rank_harness.h):
// the real plugin .so loaded through its ABI entry point with a minimal test
// host, and ranks that meet on a real file store (real Gloo, real TCP
// sockets on loopback).
#ifndef DIST_TESTS_GLOO_GLOO_SUITE_H_
#define DIST_TESTS_GLOO_GLOO_SUITE_H_

#include <string>

#include "tests/common/rank_harness.h"

namespace dist_test {

// A file-backed store at `path`, shared by every process that opens it.
dist_store_t* OpenStore(const std::string& path);

}  // namespace dist_test

#endif  // DIST_TESTS_GLOO_GLOO_SUITE_H_
