// Defaults for --config=asan, compiled into every binary (--custom_malloc)
// so that tests find them wherever Bazel runs them. Suppressions cover
// third-party code only, each with why.
extern "C" const char* __lsan_default_suppressions() {
  return
      // Open MPI keeps allocations from MPI_Init (component registries, PMIx
      // client state) until process exit without freeing them.
      "leak:libmpi.so\n"
      "leak:libopen-pal.so\n"
      "leak:libopen-rte.so\n"
      "leak:libpmix.so\n"
      "leak:libhwloc.so\n"
      "leak:libevent\n";
}
