// The nccl backend's pure logic, on any machine: argument validation as the
// plugin runs it (the SDK's common checks, then nccl's own: CPU buffers
// refused with the fix, bitwise ops, devices, aliasing, streams),
// capabilities, device choice and the one-rank-per-GPU check.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "dist/backend_plugin.h"
#include "dist/cpp/abi_struct.hpp"
#include "dist/cpp/validate.hpp"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "plugins/backends/nccl/capabilities.h"
#include "plugins/backends/nccl/device_choice.h"
#include "plugins/backends/nccl/op_validation.h"
#include "plugins/backends/nccl/watchdog.h"

namespace dist_nccl {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// Fake device addresses: validation never dereferences them.
void* Address(uintptr_t value) { return reinterpret_cast<void*>(value); }

dist_buffer_t Cuda(uintptr_t address, uint64_t count, dist_dtype_t dtype = DIST_FLOAT32,
                   int32_t device = 0) {
  return dist_make_buffer(Address(address), count, dtype, dist_cuda(device));
}

dist_op_args_t Args(dist_buffer_t send, dist_buffer_t recv, dist_reduce_op_t op = DIST_SUM,
                    int32_t root = 0, int32_t peer = 0) {
  dist_op_args_t args{};
  args.struct_size = sizeof(args);
  args.send = send;
  args.recv = recv;
  args.op = op;
  args.root = root;
  args.peer = peer;
  return args;
}

const OpContext kRank1Of4{1, 4, 1};

// What an operation issued through the plugin's table meets: the plugin
// adapter's common checks (dist/cpp/validate.hpp), then nccl's own.
absl::Status Validate(dist_collective_t op, const dist_op_args_t& args, const OpContext& ctx) {
  absl::Status common = dist::ValidateOpArgs(op, args, ctx.rank, ctx.world_size);
  if (!common.ok()) return common;
  return ValidateOpArgs(op, args, ctx);
}

// ---- Variable-count collectives (run_v) -----------------------------------

dist_op_counts_t Counts(const std::vector<uint64_t>& recv_counts,
                        const std::vector<uint64_t>* recv_displs = nullptr,
                        const std::vector<uint64_t>* send_counts = nullptr,
                        const std::vector<uint64_t>* send_displs = nullptr) {
  dist_op_counts_t counts{};
  counts.struct_size = sizeof(counts);
  counts.recv_counts = recv_counts.data();
  counts.recv_displs = recv_displs != nullptr ? recv_displs->data() : nullptr;
  counts.send_counts = send_counts != nullptr ? send_counts->data() : nullptr;
  counts.send_displs = send_displs != nullptr ? send_displs->data() : nullptr;
  return counts;
}

TEST(CheckVariableArgs, AllToAllVFillsPackedDisplacementsAndSkipsNothingElse) {
  const std::vector<uint64_t> send_counts = {1, 0, 2, 3};
  const std::vector<uint64_t> recv_counts = {2, 0, 1, 0};
  const std::vector<uint64_t> recv_displs = {0, 5, 6, 9};
  const dist_op_counts_t counts = Counts(recv_counts, &recv_displs, &send_counts);
  absl::StatusOr<VariableBlocks> blocks = CheckVariableArgs(
      DIST_COLL_ALL_TO_ALL,
      Args(Cuda(0x1000, 6, DIST_FLOAT32, 1), Cuda(0x9000, 9, DIST_FLOAT32, 1)), counts, kRank1Of4);
  ASSERT_TRUE(blocks.ok()) << blocks.status();
  EXPECT_EQ(blocks->send_displs, (std::vector<uint64_t>{0, 1, 1, 3}));
  EXPECT_EQ(blocks->recv_displs, recv_displs);
  EXPECT_TRUE(blocks->uses_send);
  EXPECT_TRUE(blocks->uses_recv);
  EXPECT_FALSE(blocks->uniform);
}

TEST(CheckVariableArgs, RefusesABlockPastItsBufferAndSelfCountsThatDisagree) {
  const std::vector<uint64_t> send_counts = {1, 2, 2, 3};
  const std::vector<uint64_t> recv_counts = {2, 1, 1, 0};
  const dist_op_counts_t counts = Counts(recv_counts, nullptr, &send_counts);
  absl::Status status =
      CheckVariableArgs(DIST_COLL_ALL_TO_ALL,
                        Args(Cuda(0x1000, 7, DIST_FLOAT32, 1), Cuda(0x9000, 4, DIST_FLOAT32, 1)),
                        counts, kRank1Of4)
          .status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              AllOf(HasSubstr("nccl all_to_all_v: the send block of rank 3"),
                    HasSubstr("ends past the send buffer's 7 elements")));
  status =
      CheckVariableArgs(DIST_COLL_ALL_TO_ALL,
                        Args(Cuda(0x1000, 8, DIST_FLOAT32, 1), Cuda(0x9000, 4, DIST_FLOAT32, 1)),
                        counts, kRank1Of4)
          .status();
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("rank 1 sends itself 2 elements but expects 1 from itself"));
}

TEST(CheckVariableArgs, CpuBuffersAndBitwiseOpsAreInvalidNeverUnimplemented) {
  // run_v's UNIMPLEMENTED would hand the operation back to the core.
  const std::vector<uint64_t> recv_counts = {1, 1, 1, 1};
  dist_op_args_t args = Args(Cuda(0x1000, 4, DIST_INT32, 1), Cuda(0x9000, 1, DIST_INT32, 1));
  args.send.device = dist_cpu();
  absl::Status status =
      CheckVariableArgs(DIST_COLL_REDUCE_SCATTER, args, Counts(recv_counts), kRank1Of4).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("nccl reduce_scatter_v: the send buffer is on the CPU"));
  args = Args(Cuda(0x1000, 4, DIST_INT32, 1), Cuda(0x9000, 1, DIST_INT32, 1), DIST_BXOR);
  status =
      CheckVariableArgs(DIST_COLL_REDUCE_SCATTER, args, Counts(recv_counts), kRank1Of4).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("NCCL has no bitwise reductions"));
}

TEST(CheckVariableArgs, EmptyBlocksNeedNoBuffer) {
  // Rank 1 gives nothing to all_gather_v: its send may be a NULL CPU buffer.
  const std::vector<uint64_t> recv_counts = {2, 0, 1, 3};
  dist_op_args_t args = Args(dist_make_buffer(nullptr, 0, DIST_FLOAT32, dist_cpu()),
                             Cuda(0x9000, 6, DIST_FLOAT32, 1));
  absl::StatusOr<VariableBlocks> blocks =
      CheckVariableArgs(DIST_COLL_ALL_GATHER, args, Counts(recv_counts), kRank1Of4);
  ASSERT_TRUE(blocks.ok()) << blocks.status();
  EXPECT_FALSE(blocks->uses_send);
  EXPECT_EQ(blocks->recv_displs, (std::vector<uint64_t>{0, 2, 2, 3}));
}

TEST(CheckVariableArgs, InPlaceOnlyInNcclsLayouts) {
  const std::vector<uint64_t> even = {2, 2, 2, 2};
  // all_gather_v: send is recv's own block (rank 1: element 2).
  absl::StatusOr<VariableBlocks> blocks = CheckVariableArgs(
      DIST_COLL_ALL_GATHER,
      Args(Cuda(0x9000 + 8, 2, DIST_FLOAT32, 1), Cuda(0x9000, 8, DIST_FLOAT32, 1)), Counts(even),
      kRank1Of4);
  ASSERT_TRUE(blocks.ok()) << blocks.status();
  absl::Status status =
      CheckVariableArgs(DIST_COLL_ALL_GATHER,
                        Args(Cuda(0x9000, 2, DIST_FLOAT32, 1), Cuda(0x9000, 8, DIST_FLOAT32, 1)),
                        Counts(even), kRank1Of4)
          .status();
  EXPECT_THAT(std::string(status.message()), HasSubstr("not recv's own block (element 2)"));
  // reduce_scatter_v: recv is send's own block.
  EXPECT_TRUE(CheckVariableArgs(
                  DIST_COLL_REDUCE_SCATTER,
                  Args(Cuda(0x9000, 8, DIST_FLOAT32, 1), Cuda(0x9000 + 8, 2, DIST_FLOAT32, 1)),
                  Counts(even), kRank1Of4)
                  .ok());
  // all_to_all_v never runs in place.
  status =
      CheckVariableArgs(DIST_COLL_ALL_TO_ALL,
                        Args(Cuda(0x9000, 8, DIST_FLOAT32, 1), Cuda(0x9000, 8, DIST_FLOAT32, 1)),
                        Counts(even, nullptr, &even), kRank1Of4)
          .status();
  EXPECT_THAT(std::string(status.message()), HasSubstr("use separate send and recv buffers"));
}

TEST(CheckVariableArgs, UniformIsReduceScatterWithEqualNonEmptyBlocks) {
  const std::vector<uint64_t> zeros = {0, 0, 0, 0};
  absl::StatusOr<VariableBlocks> blocks =
      CheckVariableArgs(DIST_COLL_REDUCE_SCATTER,
                        Args(Cuda(0x1000, 0, DIST_FLOAT32, 1), Cuda(0x9000, 0, DIST_FLOAT32, 1)),
                        Counts(zeros), kRank1Of4);
  ASSERT_TRUE(blocks.ok()) << blocks.status();
  EXPECT_FALSE(blocks->uniform);
  const std::vector<uint64_t> even = {2, 2, 2, 2};
  blocks =
      CheckVariableArgs(DIST_COLL_REDUCE_SCATTER,
                        Args(Cuda(0x1000, 8, DIST_FLOAT32, 1), Cuda(0x9000, 2, DIST_FLOAT32, 1)),
                        Counts(even), kRank1Of4);
  ASSERT_TRUE(blocks.ok()) << blocks.status();
  EXPECT_TRUE(blocks->uniform);
  // all_gather_v never: its displacements are each rank's own.
  const std::vector<uint64_t> packed = {0, 2, 4, 6};
  blocks =
      CheckVariableArgs(DIST_COLL_ALL_GATHER,
                        Args(Cuda(0x1000, 2, DIST_FLOAT32, 1), Cuda(0x9000, 8, DIST_FLOAT32, 1)),
                        Counts(even, &packed), kRank1Of4);
  ASSERT_TRUE(blocks.ok()) << blocks.status();
  EXPECT_FALSE(blocks->uniform);
}

TEST(ValidateOpArgs, AcceptsEveryCollectiveWithTheDocumentedShapes) {
  const OpContext one{0, 1, 0};
  EXPECT_TRUE(Validate(DIST_COLL_ALL_REDUCE, Args(Cuda(0x1000, 8), Cuda(0x9000, 8)), one).ok());
  const OpContext ctx{1, 4, 1};
  auto cuda1 = [](uintptr_t address, uint64_t count) {
    return Cuda(address, count, DIST_FLOAT32, 1);
  };
  EXPECT_TRUE(Validate(DIST_COLL_ALL_GATHER, Args(cuda1(0x1000, 8), cuda1(0x9000, 32)), ctx).ok());
  EXPECT_TRUE(
      Validate(DIST_COLL_REDUCE_SCATTER, Args(cuda1(0x1000, 32), cuda1(0x9000, 8)), ctx).ok());
  EXPECT_TRUE(Validate(DIST_COLL_ALL_TO_ALL, Args(cuda1(0x1000, 32), cuda1(0x9000, 32)), ctx).ok());
  // Rooted ops off root: the unused buffer may be NULL and is not checked.
  EXPECT_TRUE(
      Validate(DIST_COLL_GATHER, Args(cuda1(0x1000, 8), Cuda(0, 0, DIST_FLOAT32, 0)), ctx).ok());
  EXPECT_TRUE(
      Validate(DIST_COLL_REDUCE,
               Args(cuda1(0x1000, 8), dist_make_buffer(nullptr, 0, DIST_FLOAT32, dist_cpu())), ctx)
          .ok());
  EXPECT_TRUE(
      Validate(DIST_COLL_SCATTER,
               Args(dist_make_buffer(nullptr, 0, DIST_FLOAT32, dist_cpu()), cuda1(0x9000, 8)), ctx)
          .ok());
  EXPECT_TRUE(Validate(DIST_COLL_BARRIER, Args({}, {}), ctx).ok());
  dist_op_args_t send = Args(cuda1(0x1000, 8), {}, DIST_SUM, 0, 3);
  EXPECT_TRUE(Validate(DIST_COLL_SEND, send, ctx).ok());
}

TEST(ValidateOpArgs, RefusesCpuBuffersNamingTheBackendsAndTheDeviceMap) {
  const dist_buffer_t cpu = dist_make_buffer(Address(0x1000), 8, DIST_FLOAT32, dist_cpu());
  const absl::Status status = Validate(DIST_COLL_ALL_REDUCE, Args(cpu, cpu), OpContext{0, 2, 0});
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(status.message()),
              AllOf(HasSubstr("nccl all_reduce"), HasSubstr("send buffer is on the CPU"),
                    HasSubstr("CUDA buffers only"), HasSubstr("gloo, mpi or shm"),
                    HasSubstr("DIST_BACKEND=cpu:gloo,cuda:nccl")));
  // The recv side too, for an op that only writes recv.
  const absl::Status recv =
      Validate(DIST_COLL_RECV, Args({}, cpu, DIST_SUM, 0, 1), OpContext{0, 2, 0});
  EXPECT_EQ(recv.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(recv.message()), HasSubstr("nccl recv: the recv buffer is on the CPU"));
  EXPECT_EQ(std::string(recv.message()), CpuBufferMessage(DIST_COLL_RECV, "recv"));
  EXPECT_EQ(std::string(recv.message()).find('\n'), std::string::npos);
}

TEST(ValidateOpArgs, BitwiseOpsAreUnimplementedOnIntegersAndInvalidOnFloats) {
  const OpContext ctx{0, 2, 0};
  const absl::Status on_int =
      Validate(DIST_COLL_ALL_REDUCE,
               Args(Cuda(0x1000, 8, DIST_INT32), Cuda(0x9000, 8, DIST_INT32), DIST_BXOR), ctx);
  EXPECT_EQ(on_int.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(on_int.message()),
              AllOf(HasSubstr("NCCL has no bitwise reductions (bxor)"), HasSubstr("gloo")));
  const absl::Status on_float =
      Validate(DIST_COLL_REDUCE_SCATTER, Args(Cuda(0x1000, 16), Cuda(0x9000, 8), DIST_BAND), ctx);
  EXPECT_EQ(on_float.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(on_float.message()), HasSubstr("floating point"));
  for (dist_reduce_op_t op : {DIST_SUM, DIST_PRODUCT, DIST_MIN, DIST_MAX, DIST_AVG}) {
    for (int dtype = 0; dtype < DIST_DTYPE_COUNT; ++dtype) {
      const dist_dtype_t d = static_cast<dist_dtype_t>(dtype);
      EXPECT_TRUE(
          Validate(DIST_COLL_REDUCE, Args(Cuda(0x1000, 8, d), Cuda(0x9000, 8, d), op), ctx).ok())
          << dist_reduce_op_name(op) << " " << dist_dtype_name(d);
    }
  }
}

TEST(ValidateOpArgs, ShapesFollowTheBufferTable) {
  const OpContext ctx{0, 4, 0};
  const absl::Status gather =
      Validate(DIST_COLL_ALL_GATHER, Args(Cuda(0x1000, 8), Cuda(0x9000, 31)), ctx);
  EXPECT_EQ(gather.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(gather.message()), HasSubstr("recv count is 31 but must be 32"));
  EXPECT_FALSE(Validate(DIST_COLL_ALL_REDUCE, Args(Cuda(0x1000, 8), Cuda(0x9000, 7)), ctx).ok());
  EXPECT_FALSE(
      Validate(DIST_COLL_REDUCE_SCATTER, Args(Cuda(0x1000, 8), Cuda(0x9000, 8)), ctx).ok());
  EXPECT_FALSE(Validate(DIST_COLL_SCATTER, Args(Cuda(0x1000, 30), Cuda(0x9000, 8)), ctx).ok());
  const absl::Status a2a =
      Validate(DIST_COLL_ALL_TO_ALL, Args(Cuda(0x1000, 30), Cuda(0x9000, 30)), ctx);
  EXPECT_THAT(std::string(a2a.message()), HasSubstr("not a multiple of the world size 4"));
  const absl::Status dtypes =
      Validate(DIST_COLL_ALL_REDUCE,
               Args(Cuda(0x1000, 8, DIST_FLOAT32), Cuda(0x9000, 8, DIST_FLOAT16)), ctx);
  EXPECT_THAT(std::string(dtypes.message()),
              HasSubstr("send dtype float32 differs from recv dtype float16"));
  const absl::Status null_data =
      Validate(DIST_COLL_ALL_REDUCE, Args(Cuda(0, 8), Cuda(0x9000, 8)), ctx);
  EXPECT_THAT(std::string(null_data.message()), HasSubstr("is NULL with count 8"));
  // count * W must not wrap around.
  EXPECT_FALSE(
      Validate(DIST_COLL_ALL_GATHER, Args(Cuda(0x1000, UINT64_MAX / 2), Cuda(0x9000, 4)), ctx)
          .ok());
}

TEST(ValidateOpArgs, BuffersMustBeOnThisRanksGpu) {
  const absl::Status status =
      Validate(DIST_COLL_ALL_REDUCE,
               Args(Cuda(0x1000, 8, DIST_FLOAT32, 0), Cuda(0x9000, 8, DIST_FLOAT32, 0)), kRank1Of4);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              AllOf(HasSubstr("on cuda:0"), HasSubstr("rank 1's communicator uses cuda:1")));
}

TEST(ValidateOpArgs, RootAndPeerMustBeInRange) {
  const OpContext ctx{0, 2, 0};
  EXPECT_THAT(std::string(Validate(DIST_COLL_BROADCAST,
                                   Args(Cuda(0x1000, 8), Cuda(0x1000, 8), DIST_SUM, 2), ctx)
                              .message()),
              HasSubstr("root 2 is outside"));
  EXPECT_THAT(
      std::string(
          Validate(DIST_COLL_SEND, Args(Cuda(0x1000, 8), {}, DIST_SUM, 0, -1), ctx).message()),
      HasSubstr("peer -1 must be another rank"));
  const absl::Status self =
      Validate(DIST_COLL_SEND, Args(Cuda(0x1000, 8), {}, DIST_SUM, 0, 0), ctx);
  EXPECT_EQ(self.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(self.message()), HasSubstr("this is rank 0"));
}

TEST(ValidateOpArgs, InPlaceOnlyWhereNcclAllowsIt) {
  const OpContext ctx{2, 4, 0};
  // Same pointer: fine for all_reduce, broadcast and reduce.
  EXPECT_TRUE(Validate(DIST_COLL_ALL_REDUCE, Args(Cuda(0x1000, 8), Cuda(0x1000, 8)), ctx).ok());
  EXPECT_FALSE(Validate(DIST_COLL_ALL_REDUCE, Args(Cuda(0x1000, 8), Cuda(0x1004, 8)), ctx).ok());
  // all_gather: send is this rank's block of recv (rank 2, 8 floats: +64 bytes).
  EXPECT_TRUE(
      Validate(DIST_COLL_ALL_GATHER, Args(Cuda(0x1000 + 64, 8), Cuda(0x1000, 32)), ctx).ok());
  EXPECT_FALSE(Validate(DIST_COLL_ALL_GATHER, Args(Cuda(0x1000, 8), Cuda(0x1000, 32)), ctx).ok());
  // reduce_scatter: recv is this rank's block of send.
  EXPECT_TRUE(
      Validate(DIST_COLL_REDUCE_SCATTER, Args(Cuda(0x1000, 32), Cuda(0x1000 + 64, 8)), ctx).ok());
  EXPECT_FALSE(
      Validate(DIST_COLL_REDUCE_SCATTER, Args(Cuda(0x1000, 32), Cuda(0x1000, 8)), ctx).ok());
  const absl::Status a2a =
      Validate(DIST_COLL_ALL_TO_ALL, Args(Cuda(0x1000, 32), Cuda(0x1000, 32)), ctx);
  EXPECT_THAT(std::string(a2a.message()), HasSubstr("does not run in place; use separate buffers"));
}

TEST(ResolveStream, PrefersTheBuffersStreamAndRefusesTwoDifferentOnes) {
  const OpContext ctx{0, 2, 0};
  dist_op_args_t args = Args(Cuda(0x1000, 8), Cuda(0x9000, 8));
  EXPECT_EQ(*ResolveStream(DIST_COLL_ALL_REDUCE, args, ctx), nullptr);
  args.send.stream = Address(0x77);
  EXPECT_EQ(*ResolveStream(DIST_COLL_ALL_REDUCE, args, ctx), Address(0x77));
  args.recv.stream = Address(0x77);
  EXPECT_EQ(*ResolveStream(DIST_COLL_ALL_REDUCE, args, ctx), Address(0x77));
  args.recv.stream = Address(0x88);
  EXPECT_FALSE(ResolveStream(DIST_COLL_ALL_REDUCE, args, ctx).ok());
  // A buffer the op does not use does not count (reduce off root: recv).
  args.root = 1;
  EXPECT_EQ(*ResolveStream(DIST_COLL_REDUCE, args, ctx), Address(0x77));
}

TEST(Capabilities, CudaOnlyEveryCollectiveNoBitwiseOps) {
  dist_backend_capabilities_t caps{};
  FillCapabilities(caps);
  EXPECT_EQ(caps.device_types, 1u << DIST_DEVICE_CUDA);
  EXPECT_EQ(caps.dtypes, (1u << DIST_DTYPE_COUNT) - 1);
  EXPECT_EQ(caps.collectives, (1u << DIST_COLLECTIVE_COUNT) - 1);
  const uint32_t ops = (1u << DIST_SUM) | (1u << DIST_PRODUCT) | (1u << DIST_MIN) |
                       (1u << DIST_MAX) | (1u << DIST_AVG);
  EXPECT_EQ(caps.all_reduce_ops, ops);
  EXPECT_EQ(caps.reduce_ops, ops);
  EXPECT_EQ(caps.reduce_scatter_ops, ops);
  EXPECT_EQ(caps.flags,
            DIST_CAP_SUBGROUPS | DIST_CAP_STREAM_WAIT | DIST_CAP_CUDA_AWARE | DIST_CAP_SHRINK);
  ASSERT_NE(caps.notes, nullptr);
}

TEST(Capabilities, AnOlderSmallerStructIsNotOverrun) {
  struct {
    dist_backend_capabilities_t caps;
    uint32_t canary;
  } older{};
  older.caps.struct_size = offsetof(dist_backend_capabilities_t, collectives);
  older.caps.collectives = 0xdeadbeef;
  older.canary = 0x12345678;
  dist_backend_capabilities_t full{};
  FillCapabilities(full);
  dist::WriteCallerStruct(full, &older.caps);  // what the plugin adapter does
  EXPECT_EQ(older.caps.device_types, 1u << DIST_DEVICE_CUDA);
  EXPECT_EQ(older.caps.collectives, 0xdeadbeefu);  // beyond struct_size: untouched
}

TEST(ChooseDevice, ExplicitIndexThenLocalRankThenRankModuloCount) {
  EXPECT_EQ(*ChooseDevice({5, 1, 3, 4}), 1);
  EXPECT_EQ(*ChooseDevice({5, -1, 3, 4}), 3);
  EXPECT_EQ(*ChooseDevice({5, -1, -1, 4}), 1);
  const absl::StatusOr<int> too_big_local = ChooseDevice({9, -1, 2, 2});
  EXPECT_EQ(too_big_local.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(too_big_local.status().message()),
              AllOf(HasSubstr("LOCAL_RANK 2"), HasSubstr("2 CUDA devices"),
                    HasSubstr("set a device per local rank")));
  EXPECT_FALSE(ChooseDevice({0, 7, -1, 2}).ok());
  EXPECT_EQ(ChooseDevice({0, -1, -1, 0}).status().code(), absl::StatusCode::kUnavailable);
}

TEST(CheckOneRankPerGpu, TwoRanksOnOneGpuAreNamedWithTheFix) {
  std::vector<GpuIdentity> ranks = {
      {"hostA", "0000:3B:00.0", 0},
      {"hostA", "0000:5E:00.0", 1},
      {"hostB", "0000:3B:00.0", 0},  // same bus id on another host: fine
      {"hostA", "0000:3B:00.0", 0}};
  const absl::Status status = CheckOneRankPerGpu(ranks);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()),
              AllOf(HasSubstr("ranks 0 and 3"), HasSubstr("0000:3B:00.0"), HasSubstr("hostA"),
                    HasSubstr("set a device per local rank")));
  ranks.pop_back();
  EXPECT_TRUE(CheckOneRankPerGpu(ranks).ok());
}

TEST(GpuIdentity, RoundTripsThroughTheStoreEncoding) {
  const GpuIdentity identity{"node-7", "0000:AF:00.0", 3};
  const absl::StatusOr<GpuIdentity> decoded = GpuIdentity::Decode(identity.Encode());
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->host, "node-7");
  EXPECT_EQ(decoded->bus_id, "0000:AF:00.0");
  EXPECT_EQ(decoded->device, 3);
  EXPECT_EQ(GpuIdentity::Decode("garbage").status().code(), absl::StatusCode::kDataLoss);
}

TEST(Watchdog, TicksUntilDestroyedAndStopsPromptly) {
  std::atomic<int> ticks{0};
  absl::Time stopped;
  {
    Watchdog watchdog([&ticks] { ticks.fetch_add(1); }, absl::Milliseconds(5));
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (ticks.load() < 3 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
    stopped = absl::Now();
  }
  // The destructor wakes the thread at once, not after a long interval.
  EXPECT_LT(absl::Now() - stopped, absl::Seconds(1));
  const int seen = ticks.load();
  EXPECT_GE(seen, 3);
  absl::SleepFor(absl::Milliseconds(30));
  EXPECT_EQ(ticks.load(), seen);  // no tick after destruction
  {
    Watchdog slow([] {}, absl::Hours(1));
    stopped = absl::Now();
  }
  EXPECT_LT(absl::Now() - stopped, absl::Seconds(1));
}

}  // namespace
}  // namespace dist_nccl
