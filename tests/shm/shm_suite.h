// The shm suite's part of the rank harness (tests/common/rank_harness.h):
// the plugin loaded through the core's registry, as a host loads it, and
// ranks that meet through the core's file:// rendezvous (a real file store).
#ifndef DIST_TESTS_SHM_SHM_SUITE_H_
#define DIST_TESTS_SHM_SHM_SUITE_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "tests/common/rank_harness.h"

namespace dist_test {

// Joins the file:// rendezvous at `path` (the core's dist_rendezvous, a
// real file store) and returns its store; exits the rank on failure.
dist_store_t* OpenStore(const std::string& path, int rank, int world);

// A view of `base` with `prefix` before every key (the core's helper).
dist_store_t* PrefixStore(const dist_store_t* base, const std::string& prefix);

// One gtest failure per rank that did not exit 0, with its story.
void ExpectAllOk(const std::vector<RankResult>& results);

// Runs `body(rank, comm)` on `world` forked ranks, each on a communicator
// with `options` over a fresh file store named after `name`, and expects
// every rank to succeed; ranks still running after `limit` are killed.
template <typename Body>
void OnRanks(int world, const std::string& name, const CommOptions& options, Body body,
             absl::Duration limit = absl::Seconds(60)) {
  const std::string store = TempDir(name) + "/store";
  auto results = RunRanks(world, limit, [&](int rank) {
    dist_store_t* s = OpenStore(store, rank, world);
    dist_backend_comm_t* comm = nullptr;
    RANK_OK(rank, CreateComm(s, rank, world, options, &comm));
    body(rank, comm);
    Plugin()->comm_destroy(comm);
    s->release(s->ctx);
    return 0;
  });
  ExpectAllOk(results);
}

// Issues `op` and returns its work; exits the rank if the issue fails.
dist_backend_work_t* Issue(int rank, dist_backend_op_fn op, dist_backend_comm_t* comm,
                           const dist_op_args_t& args);

// Waits for every work in `works`, in order (each up to `timeout_ms`), and
// destroys it; exits the rank at the first failure.
void WaitAll(int rank, const std::vector<dist_backend_work_t*>& works, int64_t timeout_ms = 10000);

// Names under /dev/shm that a segment of a job led by `pid` would have.
std::vector<std::string> SegmentsOf(pid_t pid);

}  // namespace dist_test

#endif  // DIST_TESTS_SHM_SHM_SUITE_H_
