// mpirun + env:// through the core (libdist.so): the env rendezvous reads
// OMPI_COMM_WORLD_RANK/SIZE and MASTER_ADDR/PORT, the core loads the MPI
// backend (RTLD_LOCAL) and runs the join check; the plugin checks that the
// ranks agree with MPI's. Then collectives and a subgroup through dist.h.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "dist/dist.h"

namespace {

int g_rank = -1;
int g_failures = 0;

#define CHECK_TRUE(cond)                                                                     \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      std::fprintf(stderr, "[rank %d] CHECK FAILED line %d: %s\n", g_rank, __LINE__, #cond); \
      ++g_failures;                                                                          \
    }                                                                                        \
  } while (0)

#define CHECK_OK(expr)                                                                    \
  do {                                                                                    \
    dist_error_t* e_ = (expr);                                                            \
    if (e_ != nullptr) {                                                                  \
      std::fprintf(stderr, "[rank %d] FAILED line %d: %s: %s\n", g_rank, __LINE__, #expr, \
                   dist_error_message(e_));                                               \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)

}  // namespace

int main() {
  const char* rank_env = std::getenv("OMPI_COMM_WORLD_RANK");
  g_rank = rank_env ? std::atoi(rank_env) : -1;
  dist_init_options_t options = dist_init_options_default();
  options.backend = "mpi";
  options.init_method = "env://";
  options.timeout_ms = 30000;
  dist_process_group_t* world = nullptr;
  CHECK_OK(dist_init(&options, &world));
  const int rank = dist_rank(world);
  const int size = dist_world_size(world);
  CHECK_TRUE(rank == g_rank);
  CHECK_TRUE(size == std::atoi(std::getenv("OMPI_COMM_WORLD_SIZE")));
  const char* backend = dist_backend_name(world, DIST_DEVICE_CPU);
  // "mpi" resolves to the launcher's build.
  CHECK_TRUE(backend != nullptr && std::string(backend) == "openmpi");

  std::vector<double> x(1000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = rank * 1000.0 + i;
  dist_buffer_t b = dist_make_buffer(x.data(), x.size(), DIST_FLOAT64, dist_cpu());
  dist_work_t* work = nullptr;
  CHECK_OK(dist_all_reduce(world, &b, &b, DIST_AVG, &work));
  CHECK_OK(dist_work_wait(work, 30000));
  dist_work_destroy(work);
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = 1000.0 * (size - 1) / 2.0 + i;
    if (x[i] != want) {
      CHECK_TRUE(x[i] == want);
      break;
    }
  }

  // Subgroup of ranks {size-1, 0} (any order at this API): the core sorts
  // and calls the plugin's comm_split on every rank.
  std::vector<int32_t> members = {size - 1, 0};
  if (size == 1) members = {0};
  dist_process_group_t* sub = nullptr;
  CHECK_OK(dist_new_group(world, members.data(), members.size(), &sub));
  const bool member = rank == 0 || rank == size - 1;
  CHECK_TRUE((dist_rank(sub) >= 0) == member);
  if (member) {
    int32_t v = rank + 5;
    dist_buffer_t vb = dist_make_buffer(&v, 1, DIST_INT32, dist_cpu());
    CHECK_OK(dist_all_reduce(sub, &vb, &vb, DIST_MAX, nullptr));
    CHECK_TRUE(v == size - 1 + 5);
  } else {
    int32_t v = 0;
    dist_buffer_t vb = dist_make_buffer(&v, 1, DIST_INT32, dist_cpu());
    dist_error_t* error = dist_all_reduce(sub, &vb, &vb, DIST_SUM, nullptr);
    CHECK_TRUE(dist_error_code(error) == DIST_FAILED_PRECONDITION);
    dist_error_destroy(error);
  }
  dist_destroy(sub);
  CHECK_OK(dist_barrier(world, nullptr));
  dist_destroy(world);
  if (g_failures > 0) return 1;
  std::fprintf(stderr, "[rank %d] core env:// + mpi: all checks passed (world size %d)\n", rank,
               size);
  return 0;
}
