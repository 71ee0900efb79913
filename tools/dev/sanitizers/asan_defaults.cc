// Defaults for --config=asan, compiled into every binary (--custom_malloc)
// so that tests find them wherever Bazel runs them. Suppressions cover
// third-party code only, each with why.
#include <dlfcn.h>
#include <unistd.h>

// LeakSanitizer's stop-the-world tracer crashes ("Tracer caught signal 11")
// walking the dynamic TLS that it tracks through __tls_get_addr once MPICH
// (its libfabric providers) has been loaded and partly unloaded. Without
// the interception the blocks are still scanned, as the heap chunks they are.
extern "C" const char* __asan_default_options() { return "intercept_tls_get_addr=0"; }

extern "C" const char* __lsan_default_suppressions() {
  return
      // Open MPI keeps allocations from MPI_Init (component registries, PMIx
      // client state) until process exit without freeing them.
      "leak:libmpi.so\n"
      "leak:libopen-pal.so\n"
      "leak:libopen-rte.so\n"
      "leak:libpmix.so\n"
      "leak:libhwloc.so\n"
      "leak:libevent\n"
      // MPICH likewise keeps what MPI_Init allocated until exit.
      "leak:libmpich.so\n";
}

namespace {
const pid_t started_as = getpid();
}  // namespace

// Open MPI's components are shared objects that MPI_Finalize unloads: what
// they leave allocated is reported with "<unknown module>" frames that no
// suppression can name. In a process that loaded Open MPI the leak check is
// therefore off; every other AddressSanitizer and UBSan check stays on.
// So it is in a fork() child that exits normally (tests/core:
// fork_child_program): it holds objects that only its parent's threads
// reference, and has none of those threads.
extern "C" int __lsan_is_turned_off() {
  if (getpid() != started_as) return 1;
  void* mpi = dlopen("libmpi.so.40", RTLD_NOW | RTLD_NOLOAD);
  if (mpi == nullptr) return 0;
  dlclose(mpi);
  return 1;
}
