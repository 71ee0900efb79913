// The host initializes MPI itself (MPI_THREAD_SERIALIZED) before the plugin
// is used: the plugin must take that thread level (no THREAD_MULTIPLE flag,
// every MPI call serialized), work normally, and leave MPI_Finalize to the
// host. Run under mpirun:  host_init_driver <libdist-backend-mpi.so>
#include <mpi.h>

#include <cstring>
#include <vector>

#include "harness.h"

int main(int argc, char** argv) {
  using namespace mpitest;
  if (argc < 2) return 2;
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  g_rank = rank;
  const dist_backend_plugin_t* plugin = LoadPlugin(argv[1]);

  dist_comm_config_t config = MakeConfig(rank, size, nullptr, 30000, "default");
  dist_backend_comm_t* comm = nullptr;
  MT_OK(plugin->comm_create(&config, &comm));

  dist_backend_capabilities_t caps;
  std::memset(&caps, 0, sizeof(caps));
  caps.struct_size = sizeof(caps);
  plugin->get_capabilities(&caps);
  MT_CHECK(provided == MPI_THREAD_SERIALIZED);
  MT_CHECK(!(caps.flags & DIST_CAP_THREAD_MULTIPLE));
  MT_CHECK(caps.notes != nullptr && std::strstr(caps.notes, "MPI_THREAD_SERIALIZED") != nullptr);

  // A few async ops in flight at once, completed in order.
  std::vector<int32_t> a(1000, rank + 1), b(1000, 0);
  dist_op_args_t sum = MakeArgs(dist_make_buffer(a.data(), a.size(), DIST_INT32, dist_cpu()),
                                dist_make_buffer(b.data(), b.size(), DIST_INT32, dist_cpu()));
  sum.op = DIST_SUM;
  int64_t root_value = rank == 0 ? 77 : 0;
  dist_op_args_t bcast = MakeArgs(dist_make_buffer(&root_value, 1, DIST_INT64, dist_cpu()),
                                  dist_make_buffer(&root_value, 1, DIST_INT64, dist_cpu()));
  dist_backend_work_t *w1 = nullptr, *w2 = nullptr;
  MT_OK(plugin->all_reduce(comm, &sum, &w1));
  MT_OK(plugin->broadcast(comm, &bcast, &w2));
  MT_OK(plugin->work_wait(w2, 30000));
  int done = 0;
  MT_OK(plugin->work_test(w1, &done));
  MT_CHECK(done == 1);  // issue order: the earlier all_reduce finished first
  plugin->work_destroy(w1);
  plugin->work_destroy(w2);
  MT_CHECK(b[0] == size * (size + 1) / 2 && b[999] == b[0]);
  MT_CHECK(root_value == 77);

  // all_gather is the plugin's own schedule of point-to-point steps: its
  // MPI calls are serialized too. 70001 elements: past the eager limit.
  std::vector<int32_t> mine(70001), all(mine.size() * size, -1);
  for (size_t i = 0; i < mine.size(); ++i) mine[i] = static_cast<int32_t>(rank * 100000 + i);
  MT_OK(RunAndWait(plugin, plugin->all_gather, comm,
                   MakeArgs(dist_make_buffer(mine.data(), mine.size(), DIST_INT32, dist_cpu()),
                            dist_make_buffer(all.data(), all.size(), DIST_INT32, dist_cpu()))));
  for (int r = 0; r < size; ++r) {
    for (size_t i = 0; i < mine.size(); i += 997) {
      MT_CHECK(all[r * mine.size() + i] == static_cast<int32_t>(r * 100000 + i));
    }
    MT_CHECK(all[(r + 1) * mine.size() - 1] == static_cast<int32_t>(r * 100000 + mine.size() - 1));
  }
  plugin->comm_destroy(comm);

  // MPI is still the host's: usable, not finalized.
  int finalized = 1;
  MPI_Finalized(&finalized);
  MT_CHECK(finalized == 0);
  int one = 1;
  int total = 0;
  MPI_Allreduce(&one, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MT_CHECK(total == size);
  MPI_Finalize();
  if (g_failures > 0) return 1;
  std::fprintf(stderr, "[rank %d] host_init: all checks passed (world size %d)\n", rank, size);
  return 0;
}
