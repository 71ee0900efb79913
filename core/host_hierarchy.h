// Hierarchical collectives for a group whose ranks share hosts: the ranks of
// one host meet over shared memory (the shm backend), and the data crosses
// between hosts over the group's own CPU backend on "rails": rail i joins
// the i-th rank of every host, rail 0 being the hosts' leaders (their lowest
// ranks). all_reduce, broadcast, all_gather and barrier then send each byte
// across the network once per host instead of once per rank, as Open MPI's
// han and NCCL do. Which path each size takes is at the top of
// host_hierarchy.cc and in docs/launching.md ("Ranks that share a host").
//
// Where it runs: the default group of a job whose CPU backend is gloo, on
// two or more hosts with two or more ranks each, with survival off
// (DIST_HIERARCHICAL=auto, the default; off turns it off). Blocking calls
// only; asynchronous ones and the other operations take the flat path.
//
// Results: integer sums, min and max are the flat algorithm's bit for bit.
// A floating-point sum adds in another order (each host's ranks first),
// so it may differ from the flat one in the last bits, as any two of
// Gloo's algorithms may. Averages take the flat path (hosts of unequal
// size would weigh ranks unequally).
#ifndef DIST_CORE_HOST_HIERARCHY_H_
#define DIST_CORE_HOST_HIERARCHY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "dist/backend_plugin.h"

namespace dist {

class ProcessGroup;

// Which ranks share which host, from every rank's host identity
// (dist/cpp/host_identity.hpp).
struct HostLayout {
  std::vector<std::vector<int32_t>> hosts;  // ranks of each host, ascending;
                                            // hosts in order of their lowest rank
  std::vector<int32_t> host_of;             // rank -> index into hosts
  std::vector<int32_t> local_index_of;      // rank -> index into its host's ranks
  bool equal_hosts = false;                 // every host has as many ranks
  bool contiguous = false;                  // host h holds ranks [h*L, (h+1)*L)

  static HostLayout FromDigests(const std::vector<uint64_t>& digests);
  // Rail `index`: the index-th rank of every host that has one.
  std::vector<int32_t> Rail(int32_t index) const;
  // Two hosts or more, each with two ranks or more: then the hierarchy pays.
  bool WorthIt() const;
  std::string Describe() const;  // "2 hosts x 2 ranks"
};

class HostHierarchy {
 public:
  // `local`: this host's ranks, on shm; `rail`: this rank's rail, on the
  // group's CPU backend.
  HostHierarchy(HostLayout layout, int32_t rank, std::unique_ptr<ProcessGroup> local,
                std::unique_ptr<ProcessGroup> rail);
  ~HostHierarchy();

  // Whether the operation runs here (checked already by the group).
  bool Takes(dist_collective_t kind, const dist_op_args_t& args) const;
  // Runs it. On an error both subgroups are aborted, so that the ranks
  // waiting on this one in another phase hear of it at once.
  absl::Status Run(dist_collective_t kind, const dist_op_args_t& args);
  void Abort(const std::string& reason);

 private:
  bool leader() const { return local_index_ == 0; }
  absl::Status AllReduce(const dist_op_args_t& args);
  absl::Status AllReduceOnRails(const dist_op_args_t& args);
  absl::Status Broadcast(const dist_op_args_t& args);
  absl::Status AllGather(const dist_op_args_t& args);
  absl::Status AllGatherOnEveryRail(const dist_op_args_t& args)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(scratch_mu_);
  absl::Status AllGatherOnRails(const dist_op_args_t& args)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(scratch_mu_);
  void Unpermute(const dist_op_args_t& args, bool rail_by_rail)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(scratch_mu_);
  absl::Status Barrier();

  const HostLayout layout_;
  const int32_t rank_;
  const int32_t host_;         // this rank's host index
  const int32_t local_index_;  // its place on the host, and its rail
  std::unique_ptr<ProcessGroup> local_;
  std::unique_ptr<ProcessGroup> rail_;
  absl::Mutex scratch_mu_;  // all_gather's host blocks on the leader
  std::vector<char> gathered_ ABSL_GUARDED_BY(scratch_mu_);
  std::vector<char> exchanged_ ABSL_GUARDED_BY(scratch_mu_);
};

}  // namespace dist

#endif  // DIST_CORE_HOST_HIERARCHY_H_
