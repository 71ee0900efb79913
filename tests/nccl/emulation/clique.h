// The ranks of one emulated NCCL communicator meeting each other: init,
// collectives, grouped send/recv and split, between threads of one process
// or between processes. Their meeting place is a shared-memory segment
// named after the ncclUniqueId (a process-shared robust mutex and condition
// variable, and a slot per operation); data moves straight from a peer's
// buffer with process_vm_readv (or memcpy within one process), as NCCL's
// single-copy transports would.
//
// Each operation runs as a task on the issuing rank's stream (see
// nccl_api.cc) and blocks that stream until its peers arrive, as an NCCL
// kernel would. It returns early only when this rank's communicator is
// aborted (quietly, as killed kernels do) or a peer's is aborted or its
// process died (ncclRemoteError, as NCCL's network transports report).
#ifndef DIST_TESTS_NCCL_EMULATION_CLIQUE_H_
#define DIST_TESTS_NCCL_EMULATION_CLIQUE_H_

#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dist::emulation {

// The most ranks one emulated communicator can have.
constexpr int kMaxRanks = 16;

struct Outcome {
  ncclResult_t result = ncclSuccess;
  std::string message;  // set when result is an error
};

enum class CollectiveKind { kAllReduce, kBroadcast, kReduce, kAllGather, kReduceScatter };

struct Collective {
  CollectiveKind kind;
  ncclDataType_t type;
  ncclRedOp_t op;
  size_t count;  // per rank: sendcount for all-gather, recvcount for reduce-scatter
  int root;
  const void* send;
  void* recv;
};

struct PointToPoint {
  bool is_send;
  int peer;
  void* buffer;  // read for a send
  size_t bytes;
  uint64_t seq;  // n-th send from this rank to `peer` (or recv from it)
};

struct SplitResult {
  bool member = false;  // false for NCCL_SPLIT_NOCOLOR
  ncclUniqueId child{};
  int rank = -1;
  int nranks = 0;
};

struct Shared;  // the shared-memory layout (clique.cc)

class Clique {
 public:
  // Use CliqueFor.
  Clique(Shared* shared, std::string name);

  int nranks() const;
  // ncclCommInitRank: registers `rank` of this process (invalid usage if
  // taken). The segment's name goes once every rank joined.
  Outcome Join(int rank);
  // Waits until every rank joined, or this rank left (aborted).
  Outcome AwaitMembers(int rank);
  // ncclCommAbort: this rank's waiting work ends; peers waiting for it fail.
  void Leave(int rank);

  Outcome RunCollective(uint64_t seq, int rank, const Collective& mine);
  Outcome RunPointToPoint(int rank, const std::vector<PointToPoint>& ops);
  Outcome Split(uint64_t seq, int rank, int color, int key, SplitResult* result);

 private:
  Shared* const shared_;
  const std::string name_;
};

// The clique of an ncclUniqueId with `nranks` ranks, created by the first
// caller in any process; nullptr and `error` when the segment cannot be made
// or says another number of ranks.
std::shared_ptr<Clique> CliqueFor(const ncclUniqueId& id, int nranks, std::string* error);

}  // namespace dist::emulation

#endif  // DIST_TESTS_NCCL_EMULATION_CLIQUE_H_
