// The process-wide MPI state behind every communicator of the plugin: who
// initialized MPI, at which thread level, and how MPI calls are serialized
// when that level is below MPI_THREAD_MULTIPLE.
#ifndef DIST_PLUGINS_BACKENDS_MPI_RUNTIME_H_
#define DIST_PLUGINS_BACKENDS_MPI_RUNTIME_H_

#include <mpi.h>

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "dist/cpp/no_sigpipe.hpp"
#include "dist/host.h"

namespace dist_mpi {

class Runtime {
 public:
  static Runtime& Get();

  // Called from the plugin's initialize() (the adapter keeps the host's
  // services for logging). Open MPI's library is made global later, right
  // before MPI_Init (PromoteLibrary).
  absl::Status Attach(const dist_host_api_t* host);

  // Initializes MPI on first use unless the host already did; idempotent.
  absl::Status EnsureInitialized();

  // Whether this process was started by an MPI launcher (mpirun, srun).
  static bool StartedByLauncher();

  // Empty, or why this build must not call MPI here: the program links (or
  // loaded globally) the other implementation, whose MPI_* would answer
  // this plugin's calls (its MPI_Get_library_version alone overflows Open
  // MPI's buffer). Listing tools load both builds side by side.
  static const std::string& ForeignMpi();

  bool initialized() const;
  bool thread_multiple() const;
  bool cuda_aware() const;
  // Static one-line description of the threading mode, for capabilities.
  const char* thread_notes() const;

  // "Open MPI v4.1.4, ..." (first line of MPI_Get_library_version).
  const char* library_version();

  // Held around every MPI call when MPI is not MPI_THREAD_MULTIPLE;
  // nullptr (no lock needed) when it is.
  absl::Mutex* serial_mutex() { return multiple_ ? nullptr : &serial_mu_; }

  void Log(dist_log_level_t level, const std::string& message) const;

  // At process exit: stops the progress thread and, when the plugin
  // initialized MPI, finalizes it (MPI_Finalize waits for every rank).
  void FinalizeAtExit();

 private:
  Runtime() = default;
  absl::Status PromoteLibrary();
  // MPI_COMM_SELF attribute delete callback: runs inside someone else's
  // MPI_Finalize.
  static int ReleaseAtFinalize(MPI_Comm comm, int keyval, void* value, void* extra);

  mutable absl::Mutex mu_;
  bool attempted_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status init_status_ ABSL_GUARDED_BY(mu_);
  bool initialized_ = false;  // written once under mu_ before comms exist
  bool owns_mpi_ = false;
  bool multiple_ = true;
  bool cuda_aware_ = false;
  int provided_ = MPI_THREAD_MULTIPLE;
  absl::Mutex serial_mu_;
};

// RAII: holds Runtime's serial mutex when MPI needs serialized calls.
class MpiCallGuard {
 public:
  MpiCallGuard() : mu_(Runtime::Get().serial_mutex()) {
    if (mu_ != nullptr) mu_->Lock();
  }
  ~MpiCallGuard() {
    if (mu_ != nullptr) mu_->Unlock();
  }
  MpiCallGuard(const MpiCallGuard&) = delete;
  MpiCallGuard& operator=(const MpiCallGuard&) = delete;

 private:
  absl::Mutex* mu_;
  // The MPI library may write to a dead peer's socket without MSG_NOSIGNAL.
  dist::ScopedSigpipeBlock no_sigpipe_;
};

}  // namespace dist_mpi

#endif  // DIST_PLUGINS_BACKENDS_MPI_RUNTIME_H_
