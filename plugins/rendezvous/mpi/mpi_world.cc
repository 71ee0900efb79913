#include "plugins/rendezvous/mpi/mpi_world.h"

#include <dlfcn.h>
#include <mpi.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "support/mpi_flavor.h"

namespace dist::rendezvous::mpi {
namespace {

namespace flavor = dist_mpi_flavor;

absl::Status MpiError(int rc, const char* call) {
  char text[MPI_MAX_ERROR_STRING] = {0};
  int length = 0;
  if (MPI_Error_string(rc, text, &length) != MPI_SUCCESS) length = 0;
  return absl::InternalError(absl::StrCat(
      flavor::kName, "://: ", call, " failed: ", std::string(text, static_cast<size_t>(length))));
}

// Buffers of broadcasts that timed out: MPI cannot cancel a collective, so
// it may still write into them; they are kept for the life of the process
// (one per timed-out dist_init at most), reachable rather than leaked.
void KeepForMpi(std::unique_ptr<std::vector<char>> buffer) {
  static std::mutex mu;
  static auto* kept = new std::vector<std::unique_ptr<std::vector<char>>>();
  std::lock_guard<std::mutex> lock(mu);
  kept->push_back(std::move(buffer));
}

absl::Status Initialize() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) {
    return absl::FailedPreconditionError(
        absl::StrCat(flavor::kName,
                     "://: MPI was already finalized in this process; call dist_init before "
                     "MPI_Finalize (MPI cannot be initialized twice)"));
  }
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return absl::OkStatus();  // the host's (or a backend's) MPI
  if (flavor::kNeedsGlobalSymbols) {
    // As the backend does (plugins/backends/mpi/README.md, Loading): Open
    // MPI's components look for libmpi's symbols globally. Kept forever.
    if (dlopen(flavor::kLibrary, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD) == nullptr) {
      const char* why = dlerror();
      return absl::FailedPreconditionError(absl::StrCat(flavor::kName, "://: cannot make ",
                                                        flavor::kLibrary, " global (",
                                                        why ? why : "unknown dlerror", ")"));
    }
  }
  int provided = 0;
  const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Init_thread");
  // Errors return instead of killing the job: the backend relies on it for
  // libnbc's failed schedules, as when it initializes MPI itself.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  // Registered before the backend's own exit handler, so it runs after it
  // (the backend stops its progress thread first).
  // Only in this process: a fork() child that exits runs it too, and its
  // MPI_Finalize would hang the child and speak for this rank.
  static const pid_t owner = getpid();
  std::atexit([] {
    if (getpid() != owner) return;
    int done = 0;
    MPI_Finalized(&done);
    if (!done) MPI_Finalize();
  });
  return absl::OkStatus();
}

}  // namespace

absl::Status EnsureMpi() {
  static std::once_flag once;
  static absl::Status* status = nullptr;
  std::call_once(once, [] { status = new absl::Status(Initialize()); });
  return *status;
}

absl::StatusOr<WorldPlace> World() {
  WorldPlace place;
  if (int rc = MPI_Comm_rank(MPI_COMM_WORLD, &place.rank); rc != MPI_SUCCESS) {
    return MpiError(rc, "MPI_Comm_rank");
  }
  if (int rc = MPI_Comm_size(MPI_COMM_WORLD, &place.size); rc != MPI_SUCCESS) {
    return MpiError(rc, "MPI_Comm_size");
  }
  return place;
}

absl::Status Broadcast(std::string* text, absl::Time deadline) {
  // A fixed-size, zero-padded buffer: sending the length first would cost
  // a second collective. Owned by MPI until the broadcast completes.
  auto buffer = std::make_unique<std::vector<char>>(kMaxBroadcast + 1, '\0');
  std::memcpy(buffer->data(), text->data(), std::min(text->size(), kMaxBroadcast));
  MPI_Request request = MPI_REQUEST_NULL;
  if (int rc = MPI_Ibcast(buffer->data(), static_cast<int>(buffer->size()), MPI_CHAR, 0,
                          MPI_COMM_WORLD, &request);
      rc != MPI_SUCCESS) {
    return MpiError(rc, "MPI_Ibcast");
  }
  for (int polls = 0;; ++polls) {
    int done = 0;
    if (int rc = MPI_Test(&request, &done, MPI_STATUS_IGNORE); rc != MPI_SUCCESS) {
      return MpiError(rc, "MPI_Test");
    }
    if (done) break;
    if (absl::Now() >= deadline) {
      KeepForMpi(std::move(buffer));
      return absl::DeadlineExceededError("the broadcast from rank 0 did not complete");
    }
    // Spin briefly (rank 0 is usually there already), then let a peer that
    // shares this core run.
    if (polls > 1000) sched_yield();
  }
  (*buffer)[kMaxBroadcast] = '\0';
  *text = buffer->data();
  return absl::OkStatus();
}

}  // namespace dist::rendezvous::mpi
