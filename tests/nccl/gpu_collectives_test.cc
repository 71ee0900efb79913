// The nccl plugin on real GPUs, through the built .so. Without a CUDA
// device every test prints "SKIPPED: no CUDA device: <reason>" and is
// reported as skipped by gtest (never as passed).
//
// Ranks are threads of this process, one GPU each (NCCL allows one rank per
// GPU): with one GPU the world size is 1, with N GPUs it is N (at most 8).
// Every result is checked against a reference computed on the host.
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "dist/backend_plugin.h"
#include "dist/cpp/status.hpp"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "plugins/backends/nccl/testing/loaded_plugin.h"
#include "support/memory_store.h"
#include "tests/nccl/host_reference.h"

namespace dist_nccl {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::HostBuffer;

std::string g_plugin_path;
constexpr int64_t kTimeoutMs = 30000;
constexpr size_t kGuardBytes = 256;
constexpr uint8_t kGuardByte = 0x5A;

int GpuCount() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}

// ---- Ranks as threads ------------------------------------------------------

struct Rank {
  const dist_backend_plugin_t* plugin = nullptr;
  dist_backend_comm_t* comm = nullptr;
  int rank = 0;
  int world = 1;
  int device = 0;
};

// Creates one communicator per rank (rank r on cuda:device_of(r)) through a
// fresh store, runs `body` on each rank that got one, and destroys them.
// Returns each rank's comm_create result.
std::vector<absl::Status> RunRanks(const dist_backend_plugin_t* plugin, int world,
                                   const std::function<int(int)>& device_of,
                                   const std::function<void(Rank&)>& body) {
  dist_store_t* store = dist::NewMemoryStore();
  std::vector<absl::Status> created(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      Rank rank;
      rank.plugin = plugin;
      rank.rank = r;
      rank.world = world;
      rank.device = device_of(r);
      cudaSetDevice(rank.device);
      dist_comm_config_t config{};
      config.struct_size = sizeof(config);
      config.rank = r;
      config.world_size = world;
      config.local_rank = -1;
      config.local_world_size = -1;
      config.store = store;
      config.timeout_ms = kTimeoutMs;
      config.group_name = "test";
      config.device_index = rank.device;
      created[static_cast<size_t>(r)] = dist::TakeError(plugin->comm_create(&config, &rank.comm));
      if (rank.comm == nullptr) return;
      body(rank);
      plugin->comm_destroy(rank.comm);
    });
  }
  for (std::thread& thread : threads) thread.join();
  store->release(store->ctx);
  return created;
}

int IdentityDevice(int rank) { return rank; }

// ---- Device memory ----------------------------------------------------------

class DeviceMemory {
 public:
  explicit DeviceMemory(size_t bytes) : bytes_(bytes) {
    EXPECT_EQ(cudaMalloc(&data_, std::max<size_t>(bytes, 1)), cudaSuccess);
    EXPECT_EQ(cudaMemset(data_, kGuardByte, std::max<size_t>(bytes, 1)), cudaSuccess);
  }
  ~DeviceMemory() { cudaFree(data_); }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  char* at(size_t offset) { return static_cast<char*>(data_) + offset; }
  void Upload(size_t offset, const HostBuffer& host) {
    EXPECT_EQ(cudaMemcpy(at(offset), host.bytes.data(), host.bytes.size(), cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  std::vector<uint8_t> Download(size_t offset, size_t bytes) {
    std::vector<uint8_t> out(bytes);
    EXPECT_EQ(cudaMemcpy(out.data(), at(offset), bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    return out;
  }

 private:
  void* data_ = nullptr;
  size_t bytes_;
};

dist_backend_op_fn OpFunction(const dist_backend_plugin_t* plugin, dist_collective_t op) {
  switch (op) {
    case DIST_COLL_ALL_REDUCE:
      return plugin->all_reduce;
    case DIST_COLL_BROADCAST:
      return plugin->broadcast;
    case DIST_COLL_REDUCE:
      return plugin->reduce;
    case DIST_COLL_ALL_GATHER:
      return plugin->all_gather;
    case DIST_COLL_GATHER:
      return plugin->gather;
    case DIST_COLL_SCATTER:
      return plugin->scatter;
    case DIST_COLL_REDUCE_SCATTER:
      return plugin->reduce_scatter;
    case DIST_COLL_ALL_TO_ALL:
      return plugin->all_to_all;
    case DIST_COLL_BARRIER:
      return plugin->barrier;
    case DIST_COLL_SEND:
      return plugin->send;
    case DIST_COLL_RECV:
      return plugin->recv;
    default:
      return nullptr;
  }
}

// Starts an op and waits for it; the op's error or OK.
absl::Status RunAndWait(const Rank& r, dist_collective_t op, const dist_op_args_t& args) {
  dist_backend_work_t* work = nullptr;
  absl::Status status = dist::TakeError(OpFunction(r.plugin, op)(r.comm, &args, &work));
  if (!status.ok()) return status;
  status = dist::TakeError(r.plugin->work_wait(work, kTimeoutMs));
  r.plugin->work_destroy(work);
  return status;
}

dist_op_args_t BaseArgs() {
  dist_op_args_t args{};
  args.struct_size = sizeof(args);
  args.op = DIST_SUM;
  return args;
}

// ---- One collective, checked ------------------------------------------------

struct OpCase {
  dist_collective_t op;
  dist_dtype_t dtype;
  dist_reduce_op_t redop;
  int root;
  bool in_place;
  size_t n;

  std::string Name() const {
    return absl::StrCat(dist_collective_name(op), " ", dist_dtype_name(dtype), " ",
                        dist_reduce_op_name(redop), " root=", root, in_place ? " in-place" : "",
                        " n=", n);
  }
};

// Runs `c` on rank `r` and returns "" or what went wrong. Every rank of the
// world calls it with the same case.
std::string RunCase(const Rank& r, const OpCase& c) {
  const size_t n = c.n;
  const size_t w = static_cast<size_t>(r.world);
  const size_t elem = dist_dtype_size(c.dtype);
  const bool root = r.rank == c.root;
  size_t send_count = n;
  size_t recv_count = n;
  switch (c.op) {
    case DIST_COLL_ALL_GATHER:
    case DIST_COLL_GATHER:
      recv_count = n * w;
      break;
    case DIST_COLL_SCATTER:
    case DIST_COLL_REDUCE_SCATTER:
      send_count = n * w;
      break;
    case DIST_COLL_ALL_TO_ALL:
      send_count = recv_count = n * w;
      break;
    default:
      break;
  }
  // Expected result on this rank (no value: recv is unused here).
  std::vector<HostBuffer> expected;
  const dist_reduce_op_t redop = c.redop;
  auto input_of = [&](int rank, size_t count) {
    return testing::Input(c.dtype, redop, rank, count);
  };
  switch (c.op) {
    case DIST_COLL_ALL_REDUCE:
      expected.push_back(testing::Reduced(c.dtype, redop, r.world, n));
      break;
    case DIST_COLL_BROADCAST:
      expected.push_back(input_of(c.root, n));
      break;
    case DIST_COLL_REDUCE:
      if (root) expected.push_back(testing::Reduced(c.dtype, redop, r.world, n));
      break;
    case DIST_COLL_ALL_GATHER:
    case DIST_COLL_GATHER:
      if (c.op == DIST_COLL_ALL_GATHER || root) {
        std::vector<HostBuffer> blocks;
        for (int k = 0; k < r.world; ++k) blocks.push_back(input_of(k, n));
        expected.push_back(testing::Concat(blocks));
      }
      break;
    case DIST_COLL_SCATTER:
      expected.push_back(testing::Block(input_of(c.root, n * w), r.rank, n));
      break;
    case DIST_COLL_REDUCE_SCATTER:
      expected.push_back(
          testing::Block(testing::Reduced(c.dtype, redop, r.world, n * w), r.rank, n));
      break;
    case DIST_COLL_ALL_TO_ALL: {
      std::vector<HostBuffer> blocks;
      for (int k = 0; k < r.world; ++k)
        blocks.push_back(testing::Block(input_of(k, n * w), r.rank, n));
      expected.push_back(testing::Concat(blocks));
      break;
    }
    default:
      break;
  }
  const HostBuffer input = input_of(r.rank, send_count);
  const bool send_used = !((c.op == DIST_COLL_BROADCAST || c.op == DIST_COLL_SCATTER) && !root);
  const bool recv_used = !expected.empty();

  // Layout: recv region first (its guard after it), or for in-place the
  // shared region; a separate send region otherwise.
  const size_t region = std::max(send_count, recv_count) * elem;
  DeviceMemory main(region + kGuardBytes);
  DeviceMemory other(c.in_place ? 0 : send_count * elem + kGuardBytes);
  char* send_ptr = nullptr;
  char* recv_ptr = nullptr;
  if (c.in_place) {
    switch (c.op) {
      case DIST_COLL_ALL_GATHER:  // send is this rank's block of recv
        recv_ptr = main.at(0);
        send_ptr = main.at(static_cast<size_t>(r.rank) * n * elem);
        main.Upload(static_cast<size_t>(r.rank) * n * elem, input);
        break;
      case DIST_COLL_REDUCE_SCATTER:  // recv is this rank's block of send
        send_ptr = main.at(0);
        recv_ptr = main.at(static_cast<size_t>(r.rank) * n * elem);
        main.Upload(0, input);
        break;
      default:  // same pointer
        send_ptr = recv_ptr = main.at(0);
        main.Upload(0, input);
        break;
    }
  } else {
    recv_ptr = main.at(0);
    send_ptr = other.at(0);
    other.Upload(0, input);
  }
  dist_op_args_t args = BaseArgs();
  args.op = redop;
  args.root = c.root;
  args.send = dist_make_buffer(send_used ? send_ptr : nullptr, send_used ? send_count : 0, c.dtype,
                               dist_cuda(r.device));
  args.recv =
      dist_make_buffer(recv_used || c.in_place ? recv_ptr : nullptr,
                       recv_used || c.in_place ? recv_count : 0, c.dtype, dist_cuda(r.device));
  const absl::Status status = RunAndWait(r, c.op, args);
  if (!status.ok()) return absl::StrCat("rank ", r.rank, ": ", status.ToString());
  if (!recv_used) return "";
  HostBuffer actual;
  actual.dtype = c.dtype;
  const size_t recv_offset = static_cast<size_t>(recv_ptr - main.at(0));
  actual.bytes = main.Download(recv_offset, recv_count * elem);
  const std::string mismatch = testing::Compare(actual, expected.front());
  if (!mismatch.empty()) return absl::StrCat("rank ", r.rank, ": ", mismatch);
  // Nothing written past the result (catches a wrong element size).
  if (!c.in_place || c.op != DIST_COLL_REDUCE_SCATTER) {
    const std::vector<uint8_t> guard = main.Download(recv_offset + recv_count * elem, kGuardBytes);
    for (uint8_t byte : guard) {
      if (byte != kGuardByte)
        return absl::StrCat("rank ", r.rank, ": wrote past recv[", recv_count, "]");
    }
  }
  return "";
}

std::vector<OpCase> AllCases(int world) {
  const dist_reduce_op_t kReductions[] = {DIST_SUM, DIST_PRODUCT, DIST_MIN, DIST_MAX, DIST_AVG};
  const dist_collective_t kReducing[] = {DIST_COLL_ALL_REDUCE, DIST_COLL_REDUCE,
                                         DIST_COLL_REDUCE_SCATTER};
  const dist_collective_t kMoving[] = {DIST_COLL_BROADCAST, DIST_COLL_ALL_GATHER, DIST_COLL_GATHER,
                                       DIST_COLL_SCATTER, DIST_COLL_ALL_TO_ALL};
  const size_t n = 1031;  // odd: no vector-width luck
  const int last = world - 1;
  std::vector<OpCase> cases;
  for (int d = 0; d < DIST_DTYPE_COUNT; ++d) {
    const dist_dtype_t dtype = static_cast<dist_dtype_t>(d);
    for (dist_collective_t op : kReducing) {
      for (dist_reduce_op_t redop : kReductions) {
        for (bool in_place : {false, true}) {
          cases.push_back({op, dtype, redop, op == DIST_COLL_REDUCE ? last : 0, in_place, n});
        }
      }
    }
    for (dist_collective_t op : kMoving) {
      const bool can_be_in_place = op == DIST_COLL_BROADCAST || op == DIST_COLL_ALL_GATHER;
      for (bool in_place : {false, true}) {
        if (in_place && !can_be_in_place) continue;
        cases.push_back({op, dtype, DIST_SUM, last, in_place, n});
      }
    }
  }
  // One large message, so NCCL's multi-chunk pipeline is exercised too.
  cases.push_back({DIST_COLL_ALL_REDUCE, DIST_FLOAT32, DIST_SUM, 0, false, size_t{1} << 22});
  cases.push_back({DIST_COLL_ALL_REDUCE, DIST_BFLOAT16, DIST_AVG, 0, true, size_t{1} << 22});
  return cases;
}

// ---- Fixture: skips cleanly without a GPU ------------------------------------

class NcclGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<const dist_backend_plugin_t*> loaded = testing::LoadBackendPlugin(g_plugin_path);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    plugin_ = *loaded;
    dist_error_t* unavailable = plugin_->probe();
    if (unavailable != nullptr) {
      const std::string reason = dist_error_message(unavailable);
      dist_error_destroy(unavailable);
      std::printf("SKIPPED: %s\n", reason.c_str());
      GTEST_SKIP() << reason;
    }
    world_ = std::min(GpuCount(), 8);
  }

  const dist_backend_plugin_t* plugin_ = nullptr;
  int world_ = 1;
};

TEST_F(NcclGpuTest, EveryCollectiveDtypeAndReductionMatchesTheHostReference) {
  const std::vector<OpCase> cases = AllCases(world_);
  std::vector<std::string> failures(static_cast<size_t>(world_));
  const absl::Time start = absl::Now();
  std::vector<absl::Status> created = RunRanks(plugin_, world_, IdentityDevice, [&](Rank& r) {
    for (const OpCase& c : cases) {
      const std::string failure = RunCase(r, c);
      EXPECT_EQ(failure, "") << c.Name();
    }
  });
  for (const absl::Status& status : created) ASSERT_TRUE(status.ok()) << status;
  std::printf("checked %zu cases on world size %d in %s\n", cases.size(), world_,
              absl::FormatDuration(absl::Now() - start).c_str());
}

TEST_F(NcclGpuTest, BarrierCompletesOnEveryRank) {
  RunRanks(plugin_, world_, IdentityDevice, [&](Rank& r) {
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(RunAndWait(r, DIST_COLL_BARRIER, BaseArgs()).ok());
  });
}

TEST_F(NcclGpuTest, ManyOperationsInFlightAllCompleteWithTheirOwnResults) {
  // 48 all-reduces started before any wait (the pending list, one event
  // each), then waited for in reverse order.
  constexpr int kOps = 48;
  constexpr size_t kCount = 513;
  RunRanks(plugin_, world_, IdentityDevice, [&](Rank& r) {
    std::vector<std::unique_ptr<DeviceMemory>> buffers;
    std::vector<dist_backend_work_t*> works(kOps, nullptr);
    for (int i = 0; i < kOps; ++i) {
      buffers.push_back(std::make_unique<DeviceMemory>(kCount * sizeof(int32_t)));
      // Rank r's op i: every element is (r + 1) * (i + 1).
      HostBuffer input = testing::Zeros(DIST_INT32, kCount);
      for (size_t k = 0; k < kCount; ++k) input.Put(k, (r.rank + 1) * (i + 1));
      buffers.back()->Upload(0, input);
      dist_op_args_t args = BaseArgs();
      args.send = dist_make_buffer(buffers.back()->at(0), kCount, DIST_INT32, dist_cuda(r.device));
      args.recv = args.send;
      ASSERT_TRUE(dist::TakeError(r.plugin->all_reduce(r.comm, &args, &works[i])).ok());
    }
    const int rank_sum = r.world * (r.world + 1) / 2;
    for (int i = kOps - 1; i >= 0; --i) {
      ASSERT_TRUE(dist::TakeError(r.plugin->work_wait(works[i], kTimeoutMs)).ok()) << "op " << i;
      r.plugin->work_destroy(works[i]);
      HostBuffer got;
      got.dtype = DIST_INT32;
      got.bytes = buffers[i]->Download(0, kCount * sizeof(int32_t));
      HostBuffer want = testing::Zeros(DIST_INT32, kCount);
      for (size_t k = 0; k < kCount; ++k) want.Put(k, rank_sum * (i + 1));
      EXPECT_EQ(testing::Compare(got, want), "") << "rank " << r.rank << " op " << i;
    }
  });
}

TEST_F(NcclGpuTest, SendAndRecvBetweenPairsOfRanks) {
  if (world_ < 2) {
    std::printf("SKIPPED: send/recv needs 2 GPUs (this machine has %d)\n", world_);
    GTEST_SKIP() << "send/recv needs 2 GPUs";
  }
  RunRanks(plugin_, world_, IdentityDevice, [&](Rank& r) {
    const int partner = r.rank ^ 1;
    if (partner >= r.world) return;  // odd world: the last rank sits out
    const size_t n = 4099;
    DeviceMemory out(n * sizeof(float));
    DeviceMemory in(n * sizeof(float) + kGuardBytes);
    out.Upload(0, testing::Input(DIST_FLOAT32, DIST_SUM, r.rank, n));
    dist_op_args_t send = BaseArgs();
    send.peer = partner;
    send.send = dist_make_buffer(out.at(0), n, DIST_FLOAT32, dist_cuda(r.device));
    dist_op_args_t recv = BaseArgs();
    recv.peer = partner;
    recv.recv = dist_make_buffer(in.at(0), n, DIST_FLOAT32, dist_cuda(r.device));
    // Even ranks send first, odd ranks receive first: separate NCCL
    // send/recv calls pair up in order.
    if (r.rank % 2 == 0) {
      EXPECT_TRUE(RunAndWait(r, DIST_COLL_SEND, send).ok());
      EXPECT_TRUE(RunAndWait(r, DIST_COLL_RECV, recv).ok());
    } else {
      EXPECT_TRUE(RunAndWait(r, DIST_COLL_RECV, recv).ok());
      EXPECT_TRUE(RunAndWait(r, DIST_COLL_SEND, send).ok());
    }
    HostBuffer got;
    got.dtype = DIST_FLOAT32;
    got.bytes = in.Download(0, n * sizeof(float));
    EXPECT_EQ(testing::Compare(got, testing::Input(DIST_FLOAT32, DIST_SUM, partner, n)), "");
  });
}

TEST_F(NcclGpuTest, SendToSelfIsRefusedAtOnce) {
  RunRanks(plugin_, 1, IdentityDevice, [&](Rank& r) {
    DeviceMemory out(64);
    dist_op_args_t send = BaseArgs();
    send.peer = 0;
    send.send = dist_make_buffer(out.at(0), 4, DIST_FLOAT32, dist_cuda(r.device));
    const absl::Status status = RunAndWait(r, DIST_COLL_SEND, send);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(status.message()), HasSubstr("must be another rank"));
  });
}

TEST_F(NcclGpuTest, CpuBuffersAreRefusedWithTheFix) {
  RunRanks(plugin_, 1, IdentityDevice, [&](Rank& r) {
    std::vector<float> host(16, 1.0f);
    dist_op_args_t args = BaseArgs();
    args.send = dist_make_buffer(host.data(), host.size(), DIST_FLOAT32, dist_cpu());
    args.recv = args.send;
    const absl::Status status = RunAndWait(r, DIST_COLL_ALL_REDUCE, args);
    EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented);
    EXPECT_THAT(std::string(status.message()),
                AllOf(HasSubstr("CUDA buffers only"), HasSubstr("gloo, mpi or shm"),
                      HasSubstr("DIST_BACKEND=cpu:gloo,cuda:nccl")));
    // The communicator still works afterwards.
    EXPECT_TRUE(RunAndWait(r, DIST_COLL_BARRIER, BaseArgs()).ok());
  });
}

TEST_F(NcclGpuTest, TwoRanksOnOneGpuFailOnBothRanksWithTheFix) {
  std::vector<absl::Status> created = RunRanks(
      plugin_, 2, [](int) { return 0; }, [](Rank&) { ADD_FAILURE() << "no comm expected"; });
  for (const absl::Status& status : created) {
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
    EXPECT_THAT(std::string(status.message()), AllOf(HasSubstr("ranks 0 and 1 both use the GPU"),
                                                     HasSubstr("set a device per local rank")));
  }
}

// Holds `stream` on the host for `ms` milliseconds (a stalled producer).
void StallStream(cudaStream_t stream, int ms) {
  static int delays[64];
  static std::atomic<int> next{0};
  int* delay = &delays[next.fetch_add(1) % 64];
  *delay = ms;
  ASSERT_EQ(
      cudaLaunchHostFunc(
          stream, [](void* p) { usleep(static_cast<useconds_t>(*static_cast<int*>(p)) * 1000); },
          delay),
      cudaSuccess);
}

TEST_F(NcclGpuTest, WaitTimesOutWhileTheStreamIsHeldThenSucceeds) {
  RunRanks(plugin_, 1, IdentityDevice, [&](Rank& r) {
    cudaStream_t stream = nullptr;
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    DeviceMemory data(1024 * sizeof(float));
    data.Upload(0, testing::Input(DIST_FLOAT32, DIST_SUM, 0, 1024));
    StallStream(stream, 700);
    dist_op_args_t args = BaseArgs();
    args.send = dist_make_buffer(data.at(0), 1024, DIST_FLOAT32, dist_cuda(r.device));
    args.send.stream = stream;
    args.recv = args.send;
    dist_backend_work_t* work = nullptr;
    ASSERT_TRUE(dist::TakeError(r.plugin->all_reduce(r.comm, &args, &work)).ok());
    int done = -1;
    EXPECT_TRUE(dist::TakeError(r.plugin->work_test(work, &done)).ok());
    EXPECT_EQ(done, 0);
    const absl::Status early = dist::TakeError(r.plugin->work_wait(work, 50));
    EXPECT_EQ(early.code(), absl::StatusCode::kDeadlineExceeded) << early;
    EXPECT_THAT(std::string(early.message()),
                AllOf(HasSubstr("all_reduce"), HasSubstr("still pending")));
    EXPECT_TRUE(dist::TakeError(r.plugin->work_wait(work, 10000)).ok());
    EXPECT_TRUE(dist::TakeError(r.plugin->work_test(work, &done)).ok());
    EXPECT_EQ(done, 1);
    r.plugin->work_destroy(work);
    cudaStreamDestroy(stream);
  });
}

TEST_F(NcclGpuTest, StreamWaitOrdersAnotherStreamWithoutBlockingTheHost) {
  RunRanks(plugin_, 1, IdentityDevice, [&](Rank& r) {
    cudaStream_t producer = nullptr;
    cudaStream_t consumer = nullptr;
    ASSERT_EQ(cudaStreamCreateWithFlags(&producer, cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(cudaStreamCreateWithFlags(&consumer, cudaStreamNonBlocking), cudaSuccess);
    const size_t n = 1 << 16;
    DeviceMemory in(n * sizeof(float));
    DeviceMemory out(n * sizeof(float));
    in.Upload(0, testing::Input(DIST_FLOAT32, DIST_SUM, 0, n));
    StallStream(producer, 500);
    dist_op_args_t args = BaseArgs();
    args.send = dist_make_buffer(in.at(0), n, DIST_FLOAT32, dist_cuda(r.device));
    args.recv = dist_make_buffer(out.at(0), n, DIST_FLOAT32, dist_cuda(r.device));
    args.send.stream = args.recv.stream = producer;
    dist_backend_work_t* work = nullptr;
    ASSERT_TRUE(dist::TakeError(r.plugin->all_reduce(r.comm, &args, &work)).ok());
    const absl::Time before = absl::Now();
    ASSERT_TRUE(dist::TakeError(r.plugin->work_wait_stream(work, consumer)).ok());
    EXPECT_LT(absl::Now() - before, absl::Milliseconds(100)) << "work_wait_stream blocked the host";
    std::vector<float> host(n, -1.0f);
    ASSERT_EQ(cudaMemcpyAsync(host.data(), out.at(0), n * sizeof(float), cudaMemcpyDeviceToHost,
                              consumer),
              cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(consumer), cudaSuccess);
    // The consumer ran after the all-reduce: the work is done and the copy
    // saw its result.
    int done = 0;
    EXPECT_TRUE(dist::TakeError(r.plugin->work_test(work, &done)).ok());
    EXPECT_EQ(done, 1);
    HostBuffer got;
    got.dtype = DIST_FLOAT32;
    got.bytes.resize(n * sizeof(float));
    std::memcpy(got.bytes.data(), host.data(), got.bytes.size());
    EXPECT_EQ(testing::Compare(got, testing::Reduced(DIST_FLOAT32, DIST_SUM, 1, n)), "");
    r.plugin->work_destroy(work);
    cudaStreamDestroy(producer);
    cudaStreamDestroy(consumer);
  });
}

TEST_F(NcclGpuTest, OperationsWithoutAStreamWaitForTheDefaultStream) {
  // The caller produces the input on the legacy default stream, behind a
  // stall, and calls without a stream: the plugin's own (non-blocking)
  // stream must wait for that work, or it reads the input too early.
  RunRanks(plugin_, world_, IdentityDevice, [&](Rank& r) {
    const size_t n = 1 << 14;
    DeviceMemory source(n * sizeof(float));
    DeviceMemory data(n * sizeof(float));
    DeviceMemory out(n * sizeof(float));
    source.Upload(0, testing::Input(DIST_FLOAT32, DIST_SUM, r.rank, n));
    StallStream(cudaStreamLegacy, 300);
    ASSERT_EQ(cudaMemcpyAsync(data.at(0), source.at(0), n * sizeof(float), cudaMemcpyDeviceToDevice,
                              cudaStreamLegacy),
              cudaSuccess);
    dist_op_args_t args = BaseArgs();
    args.send = dist_make_buffer(data.at(0), n, DIST_FLOAT32, dist_cuda(r.device));
    args.recv = dist_make_buffer(out.at(0), n, DIST_FLOAT32, dist_cuda(r.device));
    ASSERT_TRUE(RunAndWait(r, DIST_COLL_ALL_REDUCE, args).ok());
    HostBuffer got;
    got.dtype = DIST_FLOAT32;
    got.bytes = out.Download(0, n * sizeof(float));
    EXPECT_EQ(testing::Compare(got, testing::Reduced(DIST_FLOAT32, DIST_SUM, r.world, n)), "");
  });
}

// An in-place all-reduce of 256 floats with `timeout_ms`, waited for; it
// must end (with whatever status) well within 10 s.
absl::Status AllReduceThatMustNotHang(const Rank& r, int64_t timeout_ms) {
  DeviceMemory data(256 * sizeof(float));
  dist_op_args_t args = BaseArgs();
  args.send = dist_make_buffer(data.at(0), 256, DIST_FLOAT32, dist_cuda(r.device));
  args.recv = args.send;
  args.timeout_ms = timeout_ms;
  const absl::Time before = absl::Now();
  const absl::Status status = RunAndWait(r, DIST_COLL_ALL_REDUCE, args);
  EXPECT_LT(absl::Now() - before, absl::Seconds(10)) << "rank " << r.rank << " hung";
  return status;
}

TEST_F(NcclGpuTest, ARankThatSkipsACollectiveTimesOutEveryOtherRank) {
  if (world_ < 2) {
    std::printf("SKIPPED: a missing peer needs 2 GPUs (this machine has %d)\n", world_);
    GTEST_SKIP() << "a missing peer needs 2 GPUs";
  }
  RunRanks(plugin_, world_, IdentityDevice, [&](Rank& r) {
    if (r.rank == 0) return;  // stalled or dead: never calls the all-reduce
    const absl::Status status = AllReduceThatMustNotHang(r, 500);
    // Each rank times out itself, or first hears that a rank that timed
    // out before it aborted (NCCL's network transports report that as a
    // remote error).
    if (status.code() == absl::StatusCode::kDeadlineExceeded) {
      EXPECT_THAT(std::string(status.message()),
                  AllOf(HasSubstr("all_reduce"), HasSubstr(absl::StrCat("rank ", r.rank)),
                        HasSubstr("did not complete by its timeout")));
    } else {
      EXPECT_EQ(status.code(), absl::StatusCode::kAborted) << status;
      EXPECT_THAT(std::string(status.message()),
                  AllOf(HasSubstr("all_reduce"), HasSubstr(absl::StrCat("rank ", r.rank)),
                        HasSubstr("aborted")));
    }
    // Either way the ranks compared notes: rank 0 is the one that never
    // reported a failure.
    EXPECT_THAT(std::string(status.message()), HasSubstr("rank 0 reported no failure within"));
    std::printf("rank %d heard: %s\n", r.rank, status.ToString().c_str());
  });
}

TEST_F(NcclGpuTest, ARankThatAbortsFailsEveryOtherRankWithinTheTimeout) {
  if (world_ < 2) {
    std::printf("SKIPPED: an aborting peer needs 2 GPUs (this machine has %d)\n", world_);
    GTEST_SKIP() << "an aborting peer needs 2 GPUs";
  }
  RunRanks(plugin_, world_, IdentityDevice, [&](Rank& r) {
    if (r.rank == 0) {
      absl::SleepFor(absl::Milliseconds(200));
      r.plugin->comm_abort(r.comm, "rank 0 gave up");
      return;
    }
    const absl::Status status = AllReduceThatMustNotHang(r, 3000);
    // NCCL reports the lost peer (a remote error) or the op times out;
    // either way this rank hears it, and where.
    EXPECT_FALSE(status.ok());
    // ...and why: rank 0 left its reason in the store when it aborted.
    EXPECT_THAT(std::string(status.message()),
                AllOf(HasSubstr("all_reduce"), HasSubstr(absl::StrCat("rank ", r.rank)),
                      HasSubstr("rank 0: aborted by the caller: rank 0 gave up")));
    std::printf("rank %d heard: %s\n", r.rank, status.ToString().c_str());
  });
}

TEST_F(NcclGpuTest, AnOperationPastItsTimeoutAbortsTheCommunicator) {
  RunRanks(plugin_, 1, IdentityDevice, [&](Rank& r) {
    cudaStream_t stream = nullptr;
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    DeviceMemory data(256 * sizeof(float));
    StallStream(stream, 1500);
    dist_op_args_t args = BaseArgs();
    args.send = dist_make_buffer(data.at(0), 256, DIST_FLOAT32, dist_cuda(r.device));
    args.send.stream = stream;
    args.recv = args.send;
    args.timeout_ms = 200;
    dist_backend_work_t* work = nullptr;
    ASSERT_TRUE(dist::TakeError(r.plugin->all_reduce(r.comm, &args, &work)).ok());
    const absl::Time before = absl::Now();
    const absl::Status status = dist::TakeError(r.plugin->work_wait(work, 10000));
    EXPECT_LT(absl::Now() - before, absl::Seconds(5));
    EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
    EXPECT_THAT(std::string(status.message()),
                AllOf(HasSubstr("all_reduce"), HasSubstr("rank 0"), HasSubstr("aborted")));
    r.plugin->work_destroy(work);
    // Later operations fail at once with the reason.
    const absl::Status later = RunAndWait(r, DIST_COLL_BARRIER, BaseArgs());
    EXPECT_EQ(later.code(), absl::StatusCode::kAborted) << later;
    EXPECT_THAT(std::string(later.message()), HasSubstr("timeout"));
    cudaStreamSynchronize(stream);
    cudaStreamDestroy(stream);
  });
}

TEST_F(NcclGpuTest, CommAbortFailsPendingWorkWithTheReason) {
  RunRanks(plugin_, 1, IdentityDevice, [&](Rank& r) {
    cudaStream_t stream = nullptr;
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    DeviceMemory data(256 * sizeof(float));
    StallStream(stream, 800);
    dist_op_args_t args = BaseArgs();
    args.send = dist_make_buffer(data.at(0), 256, DIST_FLOAT32, dist_cuda(r.device));
    args.send.stream = stream;
    args.recv = args.send;
    dist_backend_work_t* work = nullptr;
    ASSERT_TRUE(dist::TakeError(r.plugin->all_reduce(r.comm, &args, &work)).ok());
    r.plugin->comm_abort(r.comm, "the test pulled the plug");
    r.plugin->comm_abort(r.comm, "a second abort is a no-op");
    const absl::Status status = dist::TakeError(r.plugin->work_wait(work, 10000));
    EXPECT_EQ(status.code(), absl::StatusCode::kAborted) << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr("the test pulled the plug"));
    r.plugin->work_destroy(work);
    cudaStreamSynchronize(stream);
    cudaStreamDestroy(stream);
  });
}

TEST_F(NcclGpuTest, SplitMakesAWorkingSubgroupAndNullForNonMembers) {
  // Members: the even ranks (with one GPU: rank 0 alone).
  std::vector<int32_t> members;
  for (int r = 0; r < world_; r += 2) members.push_back(r);
  RunRanks(plugin_, world_, IdentityDevice, [&](Rank& r) {
    const bool member = r.rank % 2 == 0;
    dist_store_t* unused_store = dist::NewMemoryStore();
    dist_comm_config_t config{};
    config.struct_size = sizeof(config);
    config.rank = member ? r.rank / 2 : -1;
    config.world_size = static_cast<int32_t>(members.size());
    config.local_rank = -1;
    config.local_world_size = -1;
    config.store = unused_store;
    config.timeout_ms = kTimeoutMs;
    config.group_name = "evens";
    config.device_index = r.device;
    dist_backend_comm_t* child = reinterpret_cast<dist_backend_comm_t*>(0x1);
    ASSERT_TRUE(dist::TakeError(
                    r.plugin->comm_split(r.comm, members.data(), members.size(), &config, &child))
                    .ok());
    if (!member) {
      EXPECT_EQ(child, nullptr);
    } else {
      ASSERT_NE(child, nullptr);
      Rank sub = r;
      sub.comm = child;
      sub.rank = config.rank;
      sub.world = config.world_size;
      EXPECT_EQ(RunCase(sub, {DIST_COLL_ALL_REDUCE, DIST_INT32, DIST_SUM, 0, false, 999}), "");
      r.plugin->comm_destroy(child);
    }
    // The parent still works after the split.
    EXPECT_EQ(RunCase(r, {DIST_COLL_ALL_REDUCE, DIST_FLOAT32, DIST_MAX, 0, false, 999}), "");
    unused_store->release(unused_store->ctx);
  });
}

// ---- Variable-count collectives (the table's run_v) ---------------------------

constexpr int32_t kUntouched = 0x5A5A5A5A;  // kGuardByte in every byte

std::vector<int32_t> DownloadInts(DeviceMemory& memory, size_t count) {
  const std::vector<uint8_t> bytes = memory.Download(0, count * sizeof(int32_t));
  std::vector<int32_t> out(count);
  if (count > 0) std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

void UploadInts(DeviceMemory& memory, const std::vector<int32_t>& values) {
  if (values.empty()) return;
  EXPECT_EQ(cudaMemcpy(memory.at(0), values.data(), values.size() * sizeof(int32_t),
                       cudaMemcpyHostToDevice),
            cudaSuccess);
}

absl::Status RunVariable(const Rank& r, dist_collective_t kind, const dist_op_args_t& args,
                         const std::vector<uint64_t>& recv_counts,
                         const std::vector<uint64_t>* recv_displs,
                         const std::vector<uint64_t>* send_counts = nullptr,
                         const std::vector<uint64_t>* send_displs = nullptr) {
  dist_op_counts_t counts{};
  counts.struct_size = sizeof(counts);
  counts.recv_counts = recv_counts.data();
  counts.recv_displs = recv_displs != nullptr ? recv_displs->data() : nullptr;
  counts.send_counts = send_counts != nullptr ? send_counts->data() : nullptr;
  counts.send_displs = send_displs != nullptr ? send_displs->data() : nullptr;
  return dist::TakeError(r.plugin->run_v(r.comm, kind, &args, &counts, kTimeoutMs));
}

// Element k of what rank i gives rank j.
int32_t Element(int i, int j, uint64_t k) {
  return static_cast<int32_t>(i * 10000 + j * 100 + static_cast<int>(k));
}

TEST_F(NcclGpuTest, AllToAllVMovesUnevenAndEmptyBlocksToTheirDisplacements) {
  RunRanks(plugin_, world_, IdentityDevice, [&](Rank& r) {
    // Rank i sends rank j (i + 2j) % 3 elements, so some pairs send none;
    // recv blocks leave one untouched element after each.
    const size_t w = static_cast<size_t>(r.world);
    auto count = [](int i, int j) { return static_cast<uint64_t>((i + 2 * j) % 3); };
    std::vector<uint64_t> send_counts(w), send_displs(w), recv_counts(w), recv_displs(w);
    uint64_t send_total = 0, recv_end = 0;
    for (int p = 0; p < r.world; ++p) {
      send_counts[p] = count(r.rank, p);
      send_displs[p] = send_total;
      send_total += send_counts[p];
      recv_counts[p] = count(p, r.rank);
      recv_displs[p] = recv_end;
      recv_end += recv_counts[p] + 1;
    }
    std::vector<int32_t> input, want(recv_end, kUntouched);
    for (int p = 0; p < r.world; ++p) {
      for (uint64_t k = 0; k < send_counts[p]; ++k) input.push_back(Element(r.rank, p, k));
      for (uint64_t k = 0; k < recv_counts[p]; ++k) {
        want[recv_displs[p] + k] = Element(p, r.rank, k);
      }
    }
    DeviceMemory send(send_total * sizeof(int32_t));
    DeviceMemory recv(recv_end * sizeof(int32_t));
    UploadInts(send, input);
    dist_op_args_t args = BaseArgs();
    args.send = dist_make_buffer(send.at(0), send_total, DIST_INT32, dist_cuda(r.device));
    args.recv = dist_make_buffer(recv.at(0), recv_end, DIST_INT32, dist_cuda(r.device));
    const absl::Status status = RunVariable(r, DIST_COLL_ALL_TO_ALL, args, recv_counts,
                                            &recv_displs, &send_counts, &send_displs);
    ASSERT_TRUE(status.ok()) << status;
    EXPECT_EQ(DownloadInts(recv, recv_end), want) << "rank " << r.rank;
  });
}

TEST_F(NcclGpuTest, AllGatherVUnevenRankOwnDisplacementsAndInPlace) {
  RunRanks(plugin_, world_, IdentityDevice, [&](Rank& r) {
    const size_t w = static_cast<size_t>(r.world);
    // Uneven (rank p gives p % 3, rank 1's block one element late), then
    // equal blocks that odd ranks receive with gaps (displacements are each
    // rank's own: the ranks must still agree on the calls), then equal
    // blocks in place.
    for (const int layout : {0, 1, 2}) {
      std::vector<uint64_t> counts(w), displs(w);
      uint64_t end = 0;
      for (int p = 0; p < r.world; ++p) {
        counts[p] = layout == 0 ? static_cast<uint64_t>(p % 3) : 3;
        const bool gap = layout == 0 ? p == 1 : layout == 1 && r.rank % 2 == 1;
        displs[p] = end + (gap ? 1 : 0);
        end = displs[p] + counts[p];
      }
      std::vector<int32_t> mine, want(end, kUntouched);
      for (uint64_t k = 0; k < counts[r.rank]; ++k) mine.push_back(Element(r.rank, 0, k));
      for (int p = 0; p < r.world; ++p) {
        for (uint64_t k = 0; k < counts[p]; ++k) want[displs[p] + k] = Element(p, 0, k);
      }
      DeviceMemory send(mine.size() * sizeof(int32_t));
      DeviceMemory recv(end * sizeof(int32_t));
      dist_op_args_t args = BaseArgs();
      args.recv = dist_make_buffer(recv.at(0), end, DIST_INT32, dist_cuda(r.device));
      if (layout == 2) {
        std::vector<int32_t> staged(end, kUntouched);
        std::copy(mine.begin(), mine.end(), staged.begin() + displs[r.rank]);
        UploadInts(recv, staged);
        args.send = dist_make_buffer(recv.at(displs[r.rank] * sizeof(int32_t)), mine.size(),
                                     DIST_INT32, dist_cuda(r.device));
      } else {
        UploadInts(send, mine);
        args.send = dist_make_buffer(send.at(0), mine.size(), DIST_INT32, dist_cuda(r.device));
      }
      const absl::Status status = RunVariable(r, DIST_COLL_ALL_GATHER, args, counts, &displs);
      ASSERT_TRUE(status.ok()) << "layout " << layout << ": " << status;
      EXPECT_EQ(DownloadInts(recv, end), want) << "layout " << layout << " rank " << r.rank;
    }
  });
}

TEST_F(NcclGpuTest, ReduceScatterVUnevenUniformAndInPlace) {
  RunRanks(plugin_, world_, IdentityDevice, [&](Rank& r) {
    const int w = r.world;
    // Element k of every rank's send is k + rank: block r of the sum holds
    // (first + k) * W + W(W-1)/2. Uneven (rank p keeps p + 1, rank 0 also
    // none), equal blocks (NCCL's reduce_scatter), equal blocks in place.
    for (const int layout : {0, 1, 2, 3}) {
      std::vector<uint64_t> counts(static_cast<size_t>(w));
      for (int p = 0; p < w; ++p) {
        counts[p] = layout == 0 ? p + 1 : layout == 1 ? (p == 0 ? 0 : p) : 2;
      }
      const uint64_t total = std::accumulate(counts.begin(), counts.end(), uint64_t{0});
      const uint64_t first = std::accumulate(counts.begin(), counts.begin() + r.rank, uint64_t{0});
      const uint64_t own = counts[r.rank];
      std::vector<int32_t> input(total);
      for (uint64_t k = 0; k < total; ++k) input[k] = static_cast<int32_t>(k) + r.rank;
      DeviceMemory send(total * sizeof(int32_t));
      DeviceMemory recv(own * sizeof(int32_t));
      UploadInts(send, input);
      dist_op_args_t args = BaseArgs();
      args.send = dist_make_buffer(send.at(0), total, DIST_INT32, dist_cuda(r.device));
      char* out = layout == 3 ? send.at(first * sizeof(int32_t)) : recv.at(0);
      args.recv = dist_make_buffer(out, own, DIST_INT32, dist_cuda(r.device));
      const absl::Status status = RunVariable(r, DIST_COLL_REDUCE_SCATTER, args, counts, nullptr);
      ASSERT_TRUE(status.ok()) << "layout " << layout << ": " << status;
      std::vector<int32_t> got(own);
      if (own > 0) {
        ASSERT_EQ(cudaMemcpy(got.data(), out, own * sizeof(int32_t), cudaMemcpyDeviceToHost),
                  cudaSuccess);
      }
      for (uint64_t k = 0; k < own; ++k) {
        EXPECT_EQ(got[k], static_cast<int32_t>((first + k) * w + w * (w - 1) / 2))
            << "layout " << layout << " rank " << r.rank << " element " << k;
      }
    }
  });
}

TEST_F(NcclGpuTest, VariableCountsRefuseCpuBuffersAsInvalidArguments) {
  RunRanks(plugin_, 1, IdentityDevice, [&](Rank& r) {
    std::vector<int32_t> host(4, 0);
    dist_op_args_t args = BaseArgs();
    args.send = dist_make_buffer(host.data(), 2, DIST_INT32, dist_cpu());
    args.recv = dist_make_buffer(host.data() + 2, 2, DIST_INT32, dist_cpu());
    const std::vector<uint64_t> counts = {2};
    const absl::Status status = RunVariable(r, DIST_COLL_ALL_GATHER, args, counts, nullptr);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(status.message()), HasSubstr("CUDA buffers only"));
  });
}

}  // namespace
}  // namespace dist_nccl

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  dist_nccl::g_plugin_path = dist_nccl::testing::FindNcclPlugin(argc > 1 ? argv[1] : "", argv[0]);
  return RUN_ALL_TESTS();
}
