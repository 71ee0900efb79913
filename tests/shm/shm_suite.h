// The shm suite's part of the rank harness (tests/common/rank_harness.h):
// the plugin loaded through the core's registry, as a host loads it, and
// ranks that meet through the core's file:// rendezvous (a real file store).
#ifndef DIST_TESTS_SHM_SHM_SUITE_H_
#define DIST_TESTS_SHM_SHM_SUITE_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "tests/common/rank_harness.h"

namespace dist_test {

// Joins the file:// rendezvous at `path` (the core's dist_rendezvous, a
// real file store) and returns its store; exits the rank on failure.
dist_store_t* OpenStore(const std::string& path, int rank, int world);

// A view of `base` with `prefix` before every key (the core's helper).
dist_store_t* PrefixStore(const dist_store_t* base, const std::string& prefix);

// One gtest failure per rank that did not exit 0, with its story.
void ExpectAllOk(const std::vector<RankResult>& results);

// Names under /dev/shm that a segment of a job led by `pid` would have.
std::vector<std::string> SegmentsOf(pid_t pid);

}  // namespace dist_test

#endif  // DIST_TESTS_SHM_SHM_SUITE_H_
