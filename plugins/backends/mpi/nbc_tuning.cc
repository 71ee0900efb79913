#include "nbc_tuning.h"

namespace dist_mpi {
namespace {

constexpr int kIallreduceRing = 1;
constexpr int kIreduceBinomial = 2;
// Measured on 2 ranks over shared memory: the ring beats libnbc's binomial
// tree from about 1 KiB (4 KiB: 1.5 us vs 6 us; 1 MiB: 2x the bandwidth).
constexpr size_t kRingMinBytes = 1024;
// The binomial ireduce was measured from 4 KiB at 2-4 ranks; below that and
// on larger communicators libnbc keeps its own choice.
constexpr size_t kBinomialMinBytes = 4096;
constexpr int kBinomialMaxRanks = 4;

}  // namespace

void NbcAlgorithm::Init() {
  int index = -1;
  if (MPI_T_cvar_get_index(cvar_name_, &index) != MPI_SUCCESS) return;
  int count = 0;
  if (MPI_T_cvar_handle_alloc(index, nullptr, &handle_, &count) != MPI_SUCCESS || count != 1) {
    handle_ = MPI_T_CVAR_HANDLE_NULL;
    return;
  }
  int value = -1;
  if (MPI_T_cvar_read(handle_, &value) != MPI_SUCCESS) return;
  current_ = value;
  enabled_ = value == kDefault;  // set by the user: leave it alone
}

void NbcAlgorithm::Finalize() {
  if (handle_ != MPI_T_CVAR_HANDLE_NULL) MPI_T_cvar_handle_free(&handle_);
  enabled_ = false;
}

NbcTuning& NbcTuning::Get() {
  static NbcTuning* tuning = new NbcTuning();
  return *tuning;
}

void NbcTuning::Init() {}

// Open MPI's MPI_T_init_thread registers every MCA variable: 0.2 s, as long
// as MPI_Init itself on 2 ranks, and most jobs never issue a tuned call. So
// the tools interface starts with the first call that wants another
// algorithm; every rank of a communicator decides that from the same
// (size, bytes), so all build the same schedule. MPICH has no libnbc.
void NbcTuning::EnsureTools() {
#if defined(OPEN_MPI) && OPEN_MPI
  absl::call_once(tools_once_, [this] {
    int provided = 0;
    if (MPI_T_init_thread(MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) return;
    tools_ready_ = true;
    iallreduce_.Init();
    ireduce_.Init();
    tools_started_.store(true, std::memory_order_release);
  });
#endif
}

void NbcTuning::Finalize() {
  if (!tools_ready_) return;
  iallreduce_.Finalize();
  ireduce_.Finalize();
  MPI_T_finalize();
  tools_ready_ = false;
}

int NbcTuning::Iallreduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op,
                          MPI_Comm comm, int comm_size, size_t bytes, MPI_Request* request) {
  // libnbc's own choice is fine from 4 ranks up (Rabenseifner from 64 KiB)
  // and for tiny messages (latency-bound).
  const int wanted = comm_size > 1 && comm_size < 4 && bytes >= kRingMinBytes
                         ? kIallreduceRing
                         : NbcAlgorithm::kDefault;
  if (wanted == NbcAlgorithm::kDefault && !tools_started_.load(std::memory_order_acquire)) {
    return MPI_Iallreduce(send, recv, count, type, op, comm, request);
  }
  EnsureTools();
  return iallreduce_.With(
      wanted, [&] { return MPI_Iallreduce(send, recv, count, type, op, comm, request); });
}

int NbcTuning::Ireduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op,
                       int root, MPI_Comm comm, int comm_size, size_t bytes, MPI_Request* request) {
  const int wanted = comm_size > 1 && comm_size <= kBinomialMaxRanks && bytes >= kBinomialMinBytes
                         ? kIreduceBinomial
                         : NbcAlgorithm::kDefault;
  if (wanted == NbcAlgorithm::kDefault && !tools_started_.load(std::memory_order_acquire)) {
    return MPI_Ireduce(send, recv, count, type, op, root, comm, request);
  }
  EnsureTools();
  return ireduce_.With(
      wanted, [&] { return MPI_Ireduce(send, recv, count, type, op, root, comm, request); });
}

}  // namespace dist_mpi
