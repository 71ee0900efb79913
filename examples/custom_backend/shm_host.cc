// A host program that knows nothing about shared memory: it uses only the
// host API (dist.h), and the person running it picks the third-party shm
// backend with DIST_BACKEND=shm. The same binary runs on gloo or mpi.
//
//   DIST_BACKEND=shm distrun -n 4 shm_host
//   distrun -n 4 --backend shm shm_host
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "dist/dist.h"

namespace {

int Fail(int rank, const char* what, dist_error_t* error) {
  std::fprintf(stderr, "rank %d: %s failed: %s: %s\n", rank, what,
               dist_error_code_name(dist_error_code(error)), dist_error_message(error));
  dist_error_destroy(error);
  return 1;
}

}  // namespace

int main() {
  // Backend, rendezvous and timeout all come from the environment
  // (DIST_BACKEND, DIST_INIT_METHOD, DIST_TIMEOUT) or the config file.
  dist_process_group_t* group = nullptr;
  dist_error_t* error = dist_init(nullptr, &group);
  if (error != nullptr) return Fail(-1, "dist_init", error);
  const int rank = dist_rank(group);
  const int size = dist_world_size(group);
  const char* backend = dist_backend_name(group, DIST_DEVICE_CPU);

  // all_reduce: rank r contributes (r + 1) * (i % 100) at index i.
  const size_t count = 1 << 20;  // 4 MiB of float32: streams through the segment
  std::vector<float> values(count);
  for (size_t i = 0; i < count; ++i) values[i] = static_cast<float>((rank + 1) * (i % 100));
  dist_buffer_t buffer = dist_make_buffer(values.data(), count, DIST_FLOAT32, dist_cpu());
  error = dist_all_reduce(group, &buffer, &buffer, DIST_SUM, nullptr);
  if (error != nullptr) return Fail(rank, "all_reduce", error);

  // broadcast from the last rank, asynchronously, then wait on the handle.
  int64_t token = rank == size - 1 ? 4242 : -1;
  dist_buffer_t token_buffer = dist_make_buffer(&token, 1, DIST_INT64, dist_cpu());
  dist_work_t* work = nullptr;
  error = dist_broadcast(group, &token_buffer, &token_buffer, size - 1, &work);
  if (error != nullptr) return Fail(rank, "broadcast", error);
  error = dist_work_wait(work, -1);
  dist_work_destroy(work);
  if (error != nullptr) return Fail(rank, "broadcast wait", error);

  // Check against values computed here: sum over r of (r + 1) = size(size+1)/2.
  const float ranks_sum = size * (size + 1) / 2.0f;
  size_t wrong = token == 4242 ? 0 : 1;
  for (size_t i = 0; i < count; ++i) wrong += values[i] != ranks_sum * (i % 100);
  std::printf("rank %d of %d on backend '%s': all_reduce of %zu floats and broadcast %s\n", rank,
              size, backend ? backend : "?", count, wrong == 0 ? "correct" : "WRONG");
  dist_destroy(group);
  return wrong == 0 ? 0 : 2;
}
