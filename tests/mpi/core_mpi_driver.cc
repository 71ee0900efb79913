// DIST_BACKEND=mpi under an MPI launcher with nothing else set, through the
// core (libdist.so): no init method, no MASTER_ADDR/PORT. The core must pick
// the plugin build of the launcher's implementation and the mpi://
// rendezvous; ranks must be the launcher's; a uint8 min and a float64 avg are
// checked against values computed here; a subgroup works. run_core_mpi.sh
// also runs it with gloo (over env:// or mpi://) under the same launchers.
//   core_mpi_driver ok <expected build: openmpi|mpich>
//   core_mpi_driver mismatch <backend or init method> <text...>: dist_init
//     must fail with an error containing every <text> (never hang or crash)
#include <cstdio>
#include <cstdlib>
#include <cstring>
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

// The launcher's rank: Open MPI's or MPICH's (Hydra) variable.
int LauncherVariable(const char* ompi, const char* pmi) {
  const char* v = std::getenv(ompi);
  if (v == nullptr) v = std::getenv(pmi);
  return v != nullptr ? std::atoi(v) : -1;
}

int Ok(const std::string& expected) {
  const int size_env = LauncherVariable("OMPI_COMM_WORLD_SIZE", "PMI_SIZE");
  dist_process_group_t* world = nullptr;
  CHECK_OK(dist_init(nullptr, &world));  // everything from the environment
  const int rank = dist_rank(world);
  const int size = dist_world_size(world);
  CHECK_TRUE(rank == g_rank);
  CHECK_TRUE(size == size_env);
  const char* backend = dist_backend_name(world, DIST_DEVICE_CPU);
  CHECK_TRUE(backend != nullptr && expected == backend);

  // uint8 min: MPICH 4.0.2's own MPI_MIN gets this wrong (signed compare).
  std::vector<uint8_t> u(300);
  for (size_t i = 0; i < u.size(); ++i) u[i] = static_cast<uint8_t>((i * 37 + rank * 101) % 256);
  dist_buffer_t ub = dist_make_buffer(u.data(), u.size(), DIST_UINT8, dist_cpu());
  CHECK_OK(dist_all_reduce(world, &ub, &ub, DIST_MIN, nullptr));
  for (size_t i = 0; i < u.size(); ++i) {
    int want = 255;
    for (int r = 0; r < size; ++r)
      want = std::min(want, static_cast<int>((i * 37 + r * 101) % 256));
    if (u[i] != want) {
      CHECK_TRUE(u[i] == want);
      break;
    }
  }
  std::vector<double> x(1000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = rank * 1000.0 + i;
  dist_buffer_t b = dist_make_buffer(x.data(), x.size(), DIST_FLOAT64, dist_cpu());
  CHECK_OK(dist_all_reduce(world, &b, &b, DIST_AVG, nullptr));
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = 1000.0 * (size - 1) / 2.0 + i;
    if (x[i] != want) {
      CHECK_TRUE(x[i] == want);
      break;
    }
  }
  std::vector<int32_t> members = {0, size - 1};
  if (size == 1) members = {0};
  dist_process_group_t* sub = nullptr;
  CHECK_OK(dist_new_group(world, members.data(), members.size(), &sub));
  if (rank == 0 || rank == size - 1) {
    int32_t v = rank + 5;
    dist_buffer_t vb = dist_make_buffer(&v, 1, DIST_INT32, dist_cpu());
    CHECK_OK(dist_all_reduce(sub, &vb, &vb, DIST_MAX, nullptr));
    CHECK_TRUE(v == size - 1 + 5);
  }
  dist_destroy(sub);
  CHECK_OK(dist_barrier(world, nullptr));
  dist_destroy(world);
  if (g_failures > 0) return 1;
  const char* init = std::getenv("DIST_INIT_METHOD");
  std::fprintf(stderr,
               "[rank %d] DIST_BACKEND=%s, init method %s: backend %s, all checks "
               "passed (world size %d)\n",
               rank, std::getenv("DIST_BACKEND"), init != nullptr ? init : "(default)", backend,
               size);
  return 0;
}

int Mismatch(const std::string& name, const std::vector<std::string>& texts) {
  dist_init_options_t options = dist_init_options_default();
  std::string url;
  if (name.find("://") != std::string::npos) {
    url = name;
    options.backend = "gloo";
    options.init_method = url.c_str();
  } else {
    options.backend = name.c_str();
  }
  options.timeout_ms = 20000;
  dist_process_group_t* world = nullptr;
  dist_error_t* error = dist_init(&options, &world);
  CHECK_TRUE(error != nullptr);
  if (error == nullptr) return 1;
  const std::string message = dist_error_message(error);
  CHECK_TRUE(dist_error_code(error) == DIST_FAILED_PRECONDITION);
  for (const std::string& text : texts) {
    if (message.find(text) == std::string::npos) {
      std::fprintf(stderr, "[rank %d] error lacks '%s': %s\n", g_rank, text.c_str(),
                   message.c_str());
      ++g_failures;
    }
  }
  dist_error_destroy(error);
  if (g_failures > 0) return 1;
  std::fprintf(stderr, "[rank %d] %s refused as expected: %s\n", g_rank, name.c_str(),
               message.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  g_rank = LauncherVariable("OMPI_COMM_WORLD_RANK", "PMI_RANK");
  if (argc >= 3 && std::strcmp(argv[1], "ok") == 0) return Ok(argv[2]);
  if (argc >= 4 && std::strcmp(argv[1], "mismatch") == 0) {
    return Mismatch(argv[2], std::vector<std::string>(argv + 3, argv + argc));
  }
  std::fprintf(stderr, "usage: core_mpi_driver ok <build> | mismatch <name> <text>...\n");
  return 2;
}
