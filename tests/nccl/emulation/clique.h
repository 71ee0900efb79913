// The ranks of one emulated NCCL communicator meeting each other: init,
// collectives, grouped send/recv and split. Each operation runs as a task
// on the issuing rank's stream (see nccl_api.cc) and blocks that stream
// until its peers arrive, as an NCCL kernel would; it returns early only
// when this rank's communicator is aborted (quietly, as killed kernels do)
// or a peer's is (ncclRemoteError, as NCCL's network transports report).
#ifndef DIST_TESTS_NCCL_EMULATION_CLIQUE_H_
#define DIST_TESTS_NCCL_EMULATION_CLIQUE_H_

#include <nccl.h>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace dist::emulation {

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

class Clique;

struct SplitResult {
  std::shared_ptr<Clique> clique;  // null for NCCL_SPLIT_NOCOLOR
  int rank = -1;
  int nranks = 0;
};

class Clique {
 public:
  explicit Clique(int nranks);

  int nranks() const { return nranks_; }
  // ncclCommInitRank: registers `rank` (invalid usage if taken).
  Outcome Join(int rank);
  // Waits until every rank joined, or this rank left (aborted).
  Outcome AwaitMembers(int rank);
  // Marks every rank joined (a clique made by a split).
  void JoinAll();
  // ncclCommAbort: this rank's waiting work ends; peers waiting for it fail.
  void Leave(int rank);

  Outcome RunCollective(uint64_t seq, int rank, const Collective& mine);
  Outcome RunPointToPoint(int rank, const std::vector<PointToPoint>& ops);
  Outcome Split(uint64_t seq, int rank, int color, int key, SplitResult* result);

 private:
  struct CollectiveSlot {
    std::vector<Collective> entries;
    int arrived = 0;
    bool ready = false;
    std::string failure;
    std::vector<std::vector<char>> results;  // per rank; empty: nothing to write
    int left = 0;
  };
  struct Message {
    const void* data;
    size_t bytes;
    bool consumed = false;
  };
  struct SplitSlot {
    std::vector<std::pair<int, int>> entries;  // (color, key) per rank
    int arrived = 0;
    bool ready = false;
    std::vector<SplitResult> results;
    int left = 0;
  };

  // Under mu_: the first aborted rank other than `rank`, or -1.
  int GonePeer(int rank) const;
  Outcome PeerGone(int rank, int peer, const char* what) const;
  void ComputeLocked(CollectiveSlot& slot);
  void Withdraw(int rank, const std::vector<PointToPoint>& ops);

  const int nranks_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<bool> joined_;
  std::vector<bool> gone_;
  std::map<uint64_t, CollectiveSlot> collectives_;
  std::map<std::pair<int, int>, std::map<uint64_t, Message>> channels_;  // (from, to)
  std::map<uint64_t, SplitSlot> splits_;
};

// The clique of an ncclUniqueId (made by the first rank that names it).
std::shared_ptr<Clique> CliqueFor(const ncclUniqueId& id, int nranks);

}  // namespace dist::emulation

#endif  // DIST_TESTS_NCCL_EMULATION_CLIQUE_H_
