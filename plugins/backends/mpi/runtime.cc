#include "runtime.h"

#include <dlfcn.h>
#include <mpi.h>
#include <unistd.h>
#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h>  // MPIX_Query_cuda_support; MPICH has no such header
#endif

#include <cstdlib>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "comm.h"
#include "datatypes.h"
#include "dist/cpp/host_log.hpp"
#include "mpi_status.h"
#include "nbc_tuning.h"
#include "progress.h"
#include "support/mpi_flavor.h"

namespace dist_mpi {
namespace {

const char* ThreadLevelName(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE:
      return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED:
      return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED:
      return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE:
      return "MPI_THREAD_MULTIPLE";
    default:
      return "an unknown MPI thread level";
  }
}

}  // namespace

Runtime& Runtime::Get() {
  // Never destroyed: the atexit handler and late work handles still use it.
  static Runtime* runtime = new Runtime();
  return *runtime;
}

absl::Status Runtime::Attach(const dist_host_api_t* host) {
  (void)host;  // the adapter keeps the host's services (dist::Log)
  return absl::OkStatus();
}

// Done just before the plugin initializes MPI, not when it is loaded: a
// process that only lists plugins (distinfo) loads the Open MPI and the
// MPICH build side by side, and a global libmpi would answer the MPICH
// build's MPI_* lookups.
absl::Status Runtime::PromoteLibrary() {
  if (!dist_mpi_flavor::kNeedsGlobalSymbols) return absl::OkStatus();
  const char* library = dist_mpi_flavor::kLibrary;
  // The plugin links the library, so it is loaded already (RTLD_NOLOAD finds
  // it); reopening it RTLD_GLOBAL puts it and its dependencies in the global
  // scope, where Open MPI's own dlopen'ed components look for its symbols.
  // The handle is kept forever on purpose.
  void* handle = dlopen(library, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
  if (handle == nullptr) handle = dlopen(library, RTLD_NOW | RTLD_GLOBAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return absl::FailedPreconditionError(
        absl::StrCat(dist_mpi_flavor::kName, ": cannot load ", library, " with RTLD_GLOBAL (",
                     why ? why : "unknown dlerror", "); install ", dist_mpi_flavor::kImplementation,
                     " or use the gloo backend"));
  }
  return absl::OkStatus();
}

bool Runtime::StartedByLauncher() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"}) {
    if (std::getenv(name) != nullptr) return true;
  }
  return false;
}

const std::string& Runtime::ForeignMpi() {
  static const std::string* why = [] {
    // Where MPI_Init resolves for this plugin: the global scope comes first.
    void* symbol = dlsym(RTLD_DEFAULT, "MPI_Init");
    Dl_info info{};
    if (symbol == nullptr || dladdr(symbol, &info) == 0 || info.dli_fname == nullptr) {
      return new std::string();
    }
    const char* slash = std::strrchr(info.dli_fname, '/');
    const std::string file = slash != nullptr ? slash + 1 : info.dli_fname;
    if (file == dist_mpi_flavor::kLibrary) return new std::string();
    return new std::string(absl::StrCat(
        "the ", dist_mpi_flavor::kImplementation, " build (", dist_mpi_flavor::kLibrary,
        ") cannot run in this process: it already has another MPI (", file,
        ") in its global scope; use the build of that MPI (DIST_BACKEND=mpi picks it)"));
  }();
  return *why;
}

absl::Status Runtime::EnsureInitialized() {
  if (!ForeignMpi().empty()) {
    return absl::FailedPreconditionError(absl::StrCat(dist_mpi_flavor::kName, ": ", ForeignMpi()));
  }
  absl::MutexLock lock(&mu_);
  if (attempted_) return init_status_;
  attempted_ = true;
  auto fail = [&](absl::Status status) {
    init_status_ = status;
    return status;
  };
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) {
    return fail(absl::FailedPreconditionError(
        "mpi: MPI was already finalized in this process; create dist process groups before "
        "MPI_Finalize (MPI cannot be initialized twice)"));
  }
  int initialized = 0;
  MPI_Initialized(&initialized);
  int provided = MPI_THREAD_SINGLE;
  if (!initialized) {
    // Threads MPI starts now (progress, PMIx) inherit SIGPIPE blocked.
    dist::ScopedSigpipeBlock no_sigpipe;
    if (absl::Status s = PromoteLibrary(); !s.ok()) return fail(s);
    const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    if (rc != MPI_SUCCESS) return fail(MpiStatus(rc, "MPI_Init_thread"));
    owns_mpi_ = true;
    // libnbc reports a failed schedule (e.g. counts that differ between
    // ranks: MPI_ERR_TRUNCATE) through MPI_COMM_WORLD's handler, which by
    // default kills the job. The plugin owns MPI here, so errors return and
    // become dist errors instead.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    // Only in this process: a fork() child that exits runs it too, and
    // finalizing there would hang the child and speak for this rank.
    static const pid_t owner = getpid();
    std::atexit([] {
      if (getpid() == owner) Runtime::Get().FinalizeAtExit();
    });
  } else {
    MPI_Query_thread(&provided);
    // Whoever initialized MPI (the host, or the mpi:// rendezvous) finalizes
    // it. MPI_Finalize first deletes MPI_COMM_SELF's attributes, so this
    // one's delete callback is where the plugin stops its progress thread
    // and frees its datatypes, while MPI still works.
    int keyval = MPI_KEYVAL_INVALID;
    if (MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, &ReleaseAtFinalize, &keyval, nullptr) ==
        MPI_SUCCESS) {
      MPI_Comm_set_attr(MPI_COMM_SELF, keyval, nullptr);
    }
  }
  provided_ = provided;
  multiple_ = provided >= MPI_THREAD_MULTIPLE;
#if defined(OMPI_HAVE_MPI_EXT_CUDA) && OMPI_HAVE_MPI_EXT_CUDA
  cuda_aware_ = MPIX_Query_cuda_support() == 1;
#else
  cuda_aware_ = false;
#endif
  if (absl::Status s = InitDatatypes(); !s.ok()) return fail(s);
  NbcTuning::Get().Init();
  // Below SERIALIZED only the threads the host uses may call MPI, so no
  // background thread then.
  if (provided >= MPI_THREAD_SERIALIZED) ProgressEngine::Get().Start();
  initialized_ = true;
  Log(DIST_LOG_INFO,
      absl::StrCat("MPI initialized by ", owns_mpi_ ? "the plugin" : "the host", " at ",
                   ThreadLevelName(provided), "; CUDA-aware: ", cuda_aware_ ? "yes" : "no"));
  if (!owns_mpi_ && provided < MPI_THREAD_SERIALIZED) {
    Log(DIST_LOG_WARN, absl::StrCat("the host initialized MPI at ", ThreadLevelName(provided),
                                    "; call dist only from the thread(s) MPI allows, or "
                                    "initialize MPI with MPI_THREAD_MULTIPLE"));
  }
  init_status_ = absl::OkStatus();
  return init_status_;
}

int Runtime::ReleaseAtFinalize(MPI_Comm, int, void*, void*) {
  ProgressEngine::Get().Stop();
  NbcTuning::Get().Finalize();
  FreeDatatypes();
  return MPI_SUCCESS;
}

bool Runtime::initialized() const {
  absl::MutexLock lock(&mu_);
  return initialized_;
}

bool Runtime::thread_multiple() const { return initialized() ? multiple_ : true; }

bool Runtime::cuda_aware() const {
  if (initialized()) return cuda_aware_;
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
  return true;
#else
  return false;
#endif
}

const char* Runtime::thread_notes() const {
  if (!initialized()) {
    return "MPI_THREAD_MULTIPLE is requested when the first communicator initializes MPI; "
           "without it, one lock serializes every MPI call";
  }
  switch (provided_) {
    case MPI_THREAD_MULTIPLE:
      return "MPI_THREAD_MULTIPLE: callers issue and poll MPI directly; a background thread "
             "progresses work nobody is waiting on";
    case MPI_THREAD_SERIALIZED:
      return "MPI_THREAD_SERIALIZED: one process-wide lock serializes every MPI call; a "
             "background thread progresses work nobody is waiting on";
    default:
      return "MPI below MPI_THREAD_SERIALIZED (host's choice): MPI calls are serialized and "
             "made only from the threads that call dist; no background progress";
  }
}

const char* Runtime::library_version() {
  static const std::string* version = [] {
    if (!ForeignMpi().empty()) {
      return new std::string(absl::StrCat(dist_mpi_flavor::kImplementation, " (",
                                          dist_mpi_flavor::kLibrary, "; another MPI is loaded)"));
    }
    char text[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
    int length = 0;
    // Allowed before MPI_Init.
    if (MPI_Get_library_version(text, &length) != MPI_SUCCESS) length = 0;
    std::string all(text, static_cast<size_t>(length));
    const size_t end = all.find_first_of("\r\n");
    while (!all.empty() && (all.back() == '\n' || all.back() == '\r')) all.pop_back();
    std::string first = end == std::string::npos ? all : all.substr(0, end);
    // MPICH's is "MPICH Version:\t4.0.2"; say "MPICH 4.0.2" like "Open MPI v4.1.4".
    constexpr absl::string_view kMpich = "MPICH Version:";
    if (absl::StartsWith(first, kMpich)) {
      first = absl::StrCat("MPICH ", absl::StripAsciiWhitespace(first.substr(kMpich.size())));
    }
    return new std::string(first);
  }();
  return version->c_str();
}

void Runtime::Log(dist_log_level_t level, const std::string& message) const {
  dist::Log(level, message);
}

void Runtime::FinalizeAtExit() {
  ProgressEngine::Get().Stop();
  if (!owns_mpi_) return;  // the host's MPI is the host's to finalize
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  const size_t pending = Comm::TotalPendingOps();
  if (pending > 0) {
    // Operations of aborted or undestroyed groups that MPI still holds.
    // Finalizing anyway is what lets mpirun see a clean exit; Open MPI
    // drops such requests at MPI_Finalize.
    Log(DIST_LOG_WARN, absl::StrCat("finalizing MPI at exit with ", pending,
                                    " operation(s) never completed (aborted groups or work "
                                    "not waited for)"));
  }
  NbcTuning::Get().Finalize();
  FreeDatatypes();
  MPI_Finalize();
}

}  // namespace dist_mpi
