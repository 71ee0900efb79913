// A dist program whose last rank misbehaves at its third operation, for the
// desync tests (desync_test.sh):
//
//   desync_program SCENARIO
//     ok        every rank: all_reduce #1, broadcast #2, all_reduce #3, barrier #4
//     skip      the last rank skips all_reduce #3 and leaves
//     other_op  the last rank calls broadcast(root 0, 2048 x float32) as #3
//     count     the last rank all-reduces 2048 floats as #3
//     dtype     the last rank all-reduces 1024 int32 as #3
//     stop      the last rank stops itself (SIGSTOP) before #3 and, once
//               continued, calls all_reduce #3 late
//     p2p       rank 0 sends 1024 floats with tag 5 to the last rank, which
//               receives 2048 (send/recv are checked by pairing)
//     stuck     the last rank starts all_reduce #3 asynchronously and stops
//               itself inside it; once continued it writes its flight
//               recorder (as a watchdog would) and leaves without waiting
//               (not run on mpi and nccl: desync_test.sh says why)
//     subgroup  the same count mismatch on a subgroup of ranks 1 and 2 (a
//               group's own sequence numbers: its all_reduce is #1 there)
//
// DESYNC_DEVICE=cuda puts the buffers on GPU LOCAL_RANK (or RANK) through the
// CUDA runtime (the nccl backend; the CPU emulation in tests).
//
// Every rank writes its flight recorder on demand (dist_trace_dump) before it
// leaves, so that disttrace sees even the ranks that did not fail. Prints
// "rank R: FAILED op: message" and exits 3 when a dist call fails (0 with
// DESYNC_EXIT_ZERO set), "rank R: ok" and 0 otherwise.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "dist/cpp/cuda_runtime_loader.hpp"
#include "dist/dist.h"

namespace {

int Fail(int rank, const char* op, dist_error_t* err) {
  std::printf("rank %d: FAILED %s: %s\n", rank, op, dist_error_message(err));
  std::fflush(stdout);
  dist_error_destroy(err);
  return 3;
}

// 2048 elements of 4 bytes, in host or device memory.
class Memory {
 public:
  Memory(bool cuda, int device) : cuda_(cuda), device_(device), host_(2048) {
    if (!cuda_) return;
    const dist::CudaRuntimeLoader& rt = dist::CudaRuntimeLoader::Get();
    if (!rt.load_error().empty()) Die(rt.load_error());
    if (int rc = rt.set_device(device); rc != 0) Die(rt.Error("cudaSetDevice", rc));
    if (int rc = rt.malloc(&device_data_, host_.size() * 4); rc != 0) {
      Die(rt.Error("cudaMalloc", rc));
    }
  }
  float* host() { return host_.data(); }
  void Upload() {
    if (!cuda_) return;
    const dist::CudaRuntimeLoader& rt = dist::CudaRuntimeLoader::Get();
    if (int rc = rt.memcpy(device_data_, host_.data(), host_.size() * 4, rt.kHostToDevice)) {
      Die(rt.Error("cudaMemcpy", rc));
    }
  }
  void Download() {
    if (!cuda_) return;
    const dist::CudaRuntimeLoader& rt = dist::CudaRuntimeLoader::Get();
    if (int rc = rt.memcpy(host_.data(), device_data_, host_.size() * 4, rt.kDeviceToHost)) {
      Die(rt.Error("cudaMemcpy", rc));
    }
  }
  dist_buffer_t Buffer(uint64_t count, dist_dtype_t dtype) {
    return dist_make_buffer(cuda_ ? device_data_ : host_.data(), count, dtype,
                            cuda_ ? dist_cuda(device_) : dist_cpu());
  }

 private:
  static void Die(const std::string& message) {
    std::printf("desync_program: %s\n", message.c_str());
    std::exit(2);
  }
  bool cuda_;
  int device_;
  std::vector<float> host_;
  void* device_data_ = nullptr;
};

// The third operation of the scenario on `group`, where this rank is `odd`.
dist_error_t* ThirdOperation(const std::string& scenario, bool odd, dist_process_group_t* group,
                             Memory& memory) {
  dist_buffer_t b = memory.Buffer(1024, DIST_FLOAT32);
  if (odd && scenario == "other_op") {
    dist_buffer_t big = memory.Buffer(2048, DIST_FLOAT32);
    return dist_broadcast(group, &big, &big, 0, nullptr);
  }
  if (odd && (scenario == "count" || scenario == "subgroup")) {
    dist_buffer_t big = memory.Buffer(2048, DIST_FLOAT32);
    return dist_all_reduce(group, &big, &big, DIST_SUM, nullptr);
  }
  if (odd && scenario == "dtype") {
    dist_buffer_t ints = memory.Buffer(1024, DIST_INT32);
    return dist_all_reduce(group, &ints, &ints, DIST_SUM, nullptr);
  }
  return dist_all_reduce(group, &b, &b, DIST_SUM, nullptr);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "ok";
  // A rank continued after its peers left may have its backend write to a
  // closed socket; the write must fail, not kill the process (until every
  // backend guards against SIGPIPE itself).
  signal(SIGPIPE, SIG_IGN);
  dist_process_group_t* group = nullptr;
  dist_error_t* err = dist_init(nullptr, &group);
  if (err != nullptr) return Fail(-1, "dist_init", err);
  const int rank = dist_rank(group);
  const int size = dist_world_size(group);
  const bool odd = rank == size - 1;
  const char* device_env = std::getenv("DESYNC_DEVICE");
  const char* local_rank = std::getenv("LOCAL_RANK");
  Memory memory(device_env != nullptr && std::strcmp(device_env, "cuda") == 0,
                local_rank != nullptr ? std::atoi(local_rank) : rank);
  dist_process_group_t* subgroup = nullptr;
  int status = 0;
  auto run = [&]() -> int {
    for (int i = 0; i < 1024; ++i) memory.host()[i] = static_cast<float>(rank + i);
    memory.Upload();
    dist_buffer_t b = memory.Buffer(1024, DIST_FLOAT32);
    if ((err = dist_all_reduce(group, &b, &b, DIST_SUM, nullptr)) != nullptr) {
      return Fail(rank, "all_reduce #1", err);
    }
    memory.Download();
    // The sum over ranks r of (r + i).
    const float expected = static_cast<float>(size * (size - 1) / 2);
    if (memory.host()[0] != expected || memory.host()[5] != expected + 5.0f * size) {
      std::printf("rank %d: WRONG all_reduce #1: %g, expected %g\n", rank, memory.host()[0],
                  expected);
      return 4;
    }
    if ((err = dist_broadcast(group, &b, &b, 0, nullptr)) != nullptr) {
      return Fail(rank, "broadcast #2", err);
    }
    if (scenario == "subgroup") {
      const int32_t members[] = {1, 2};
      if ((err = dist_new_group(group, members, 2, &subgroup)) != nullptr) {
        return Fail(rank, "new_group", err);
      }
      if (dist_rank(subgroup) < 0) {
        std::printf("rank %d: ok (not in the subgroup)\n", rank);
        return 0;
      }
      if ((err = ThirdOperation(scenario, odd, subgroup, memory)) != nullptr) {
        return Fail(rank, "subgroup operation #1", err);
      }
      std::printf("rank %d: ok\n", rank);
      return 0;
    }
    if (scenario == "p2p") {
      if (rank == 0) {
        if ((err = dist_send(group, &b, size - 1, 5, nullptr)) != nullptr) {
          return Fail(rank, "send #1", err);
        }
      } else if (odd) {
        usleep(500 * 1000);  // usually after the send: then the recv side finds the mismatch
        dist_buffer_t big = memory.Buffer(2048, DIST_FLOAT32);
        if ((err = dist_recv(group, &big, 0, 5, nullptr)) != nullptr) {
          return Fail(rank, "recv #1", err);
        }
      }
      std::printf("rank %d: ok\n", rank);
      return 0;
    }
    if (odd && scenario == "stuck") {
      dist_work_t* work = nullptr;
      if ((err = dist_all_reduce(group, &b, &b, DIST_SUM, &work)) != nullptr) {
        return Fail(rank, "operation #3", err);
      }
      std::printf("rank %d: stopping inside all_reduce #3 (pid %d)\n", rank,
                  static_cast<int>(getpid()));
      std::fflush(stdout);
      raise(SIGSTOP);
      std::printf("rank %d: continued\n", rank);
      dist_work_destroy(work);  // never waited for: its entry stays "started"
      return 0;
    }
    if (odd && scenario == "skip") {
      std::printf("rank %d: skipping all_reduce #3\n", rank);
      return 0;
    }
    if (odd && scenario == "stop") {
      std::printf("rank %d: stopping before all_reduce #3 (pid %d)\n", rank,
                  static_cast<int>(getpid()));
      std::fflush(stdout);
      raise(SIGSTOP);
      std::printf("rank %d: continued\n", rank);
    }
    if ((err = ThirdOperation(scenario, odd, group, memory)) != nullptr) {
      return Fail(rank, "operation #3", err);
    }
    if ((err = dist_barrier(group, nullptr)) != nullptr) return Fail(rank, "barrier #4", err);
    std::printf("rank %d: ok\n", rank);
    return 0;
  };
  status = run();
  if (std::getenv("DIST_TRACE_DIR") != nullptr &&
      (err = dist_trace_dump(group, nullptr)) != nullptr) {
    std::printf("rank %d: FAILED dist_trace_dump: %s\n", rank, dist_error_message(err));
    dist_error_destroy(err);
  }
  std::fflush(stdout);
  dist_destroy(subgroup);
  dist_destroy(group);
  // Under mpirun a failing rank would end the job before a stopped one is
  // continued.
  const char* exit_zero = std::getenv("DESYNC_EXIT_ZERO");
  if (exit_zero != nullptr && *exit_zero != '\0') return 0;
  return status;
}
