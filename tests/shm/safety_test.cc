// The shm backend never trusts a size blindly: options are bounded (a
// slot_bytes of 2^63 used to crash a rank) and a segment header that another
// process wrote is validated before anything is located through it; ring
// positions written out of turn fail the communicator instead of looping.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "dist/cpp/store.hpp"
#include "gtest/gtest.h"
#include "plugins/backends/shm/layout.h"
#include "tests/shm/shm_suite.h"

namespace dist_test {
namespace {

void ExpectCreateError(const std::string& key, const std::string& value) {
  static int calls = 0;
  const std::string dir = TempDir(absl::StrCat("options", ++calls));
  auto results = RunRanks(1, absl::Seconds(60), [&](int rank) {
    dist_store_t* store = OpenStore(dir + "/store", rank, 1);
    CommOptions options;
    options.options = {{key, value}};
    dist_backend_comm_t* comm = nullptr;
    dist_error_t* error = CreateComm(store, rank, 1, options, &comm);
    RANK_CHECK(rank, error != nullptr);
    RANK_CHECK(rank, dist_error_code(error) == DIST_INVALID_ARGUMENT);
    std::fprintf(stderr, "%s\n", dist_error_message(error));
    const bool named = absl::StrContains(dist_error_message(error), key);
    dist_error_destroy(error);
    return named ? 0 : 2;
  });
  EXPECT_TRUE(results[0].ok()) << key << "=" << value << ": " << results[0].Describe();
}

TEST(ShmSafety, OptionsOutsideTheirBoundsAreErrorsNotCrashes) {
  ExpectCreateError("shm.slot_bytes", "9223372036854775808");  // 2^63
  ExpectCreateError("shm.ring_bytes", "9223372036854775808");
  ExpectCreateError("shm.slot_bytes", "2147483648");  // 2 GiB, over the 1 GiB bound
  ExpectCreateError("shm.spin_us", "18446744073709551615");
}

TEST(ShmSafety, ACorruptSegmentHeaderIsRefused) {
  const std::string dir = TempDir("corrupt");
  const std::string name = absl::StrCat("/dist-shm-test-corrupt-", getpid());
  constexpr size_t kSize = 1 << 20;
  auto results = RunRanks(2, absl::Seconds(60), [&](int rank) {
    dist_store_t* store = OpenStore(dir + "/store", rank, 2);
    if (rank == 0) {
      // A rogue rank 0: publishes a segment whose header claims slots of
      // 2^62 bytes in a 1 MiB segment.
      const dist::StoreView view(store);
      absl::StatusOr<std::string> host = view.Get("shm/host/1", absl::Seconds(30));
      RANK_CHECK(rank, host.ok());
      RANK_CHECK(rank, view.Set("shm/host/0", *host).ok());
      const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
      RANK_CHECK(rank, fd >= 0);
      RANK_CHECK(rank, ftruncate(fd, kSize) == 0);
      // The right magic and layout version: only the sizes are wrong.
      dist_shm::Header header{};
      header.magic = dist_shm::kMagic;
      header.version = dist_shm::kLayoutVersion;
      header.world_size = 2;
      header.slot_bytes = uint64_t{1} << 62;
      header.ring_bytes = 4096;
      header.total_bytes = kSize;
      header.eager_depth = dist_shm::kEagerDepth;
      RANK_CHECK(rank, pwrite(fd, &header, sizeof(header), 0) == sizeof(header));
      close(fd);
      RANK_CHECK(rank, view.Set("shm/segment", name).ok());
      return 0;
    }
    CommOptions options;
    options.timeout_ms = 10000;
    dist_backend_comm_t* comm = nullptr;
    dist_error_t* error = CreateComm(store, rank, 2, options, &comm);
    RANK_CHECK(rank, error != nullptr);
    std::fprintf(stderr, "rank %d: %s\n", rank, dist_error_message(error));
    RANK_CHECK(rank, absl::StrContains(dist_error_message(error), "has a corrupt header"));
    RANK_CHECK(rank, absl::StrContains(dist_error_message(error), name));
    dist_error_destroy(error);
    return 0;
  });
  shm_unlink(name.c_str());
  EXPECT_TRUE(results[0].ok()) << results[0].Describe();
  EXPECT_TRUE(results[1].ok()) << results[1].Describe();
}

// The control block of the ring from rank `from` to rank `to` in the shm
// segment this process maps: where a stray write of the process, or another
// process of the user that opened the segment, would land. Null if no
// segment is mapped.
dist_shm::RingControl* MappedRing(int from, int to) {
  std::ifstream maps("/proc/self/maps");  // "start-end perms offset dev inode path"
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find("/dev/shm/dist-shm-") == std::string::npos) continue;
    char* base = reinterpret_cast<char*>(std::stoull(line.substr(0, line.find('-')), nullptr, 16));
    const auto* header = reinterpret_cast<const dist_shm::Header*>(base);
    dist_shm::Offsets offsets{};
    if (header->magic != dist_shm::kMagic ||
        !dist_shm::ComputeOffsets(header->world_size, header->slot_bytes, header->ring_bytes,
                                  &offsets)) {
      continue;
    }
    auto* rings = reinterpret_cast<dist_shm::RingControl*>(base + offsets.rings);
    return &rings[from * header->world_size + to];
  }
  return nullptr;
}

// What rank 1 writes out of turn into the rings it shares with rank 0.
enum class Corruption {
  kHeadBehindTail,   // ring 1->0: a head behind the receiver's read position
  kSkipPastHead,     // ring 1->0: a skip to the next lap, past the head
  kTailAheadOfHead,  // ring 0->1: a receiver's tail ahead of the sender's head
};

class ShmCorruptRing : public testing::TestWithParam<Corruption> {};

// Before, the first two made rank 0's engine walk the ring for up to 2^64
// bytes (it never returned), and the third let rank 0 overwrite bytes rank 1
// had not read. Now the operation that meets it fails at once, naming the
// ring, and the communicator with it.
TEST_P(ShmCorruptRing, FailsTheCommunicatorNamingTheRingInsteadOfLooping) {
  const Corruption corruption = GetParam();
  const std::string dir = TempDir(absl::StrCat("corrupt-ring", static_cast<int>(corruption)));
  auto results = RunRanks(2, absl::Seconds(30), [&](int rank) {
    dist_store_t* store = OpenStore(dir + "/store", rank, 2);
    const dist::StoreView view(store);
    dist_backend_comm_t* comm = nullptr;
    RANK_OK(rank, CreateComm(store, rank, 2, CommOptions(), &comm));
    // One message each way first: the rings are in use, not fresh.
    const int peer = 1 - rank;
    float out[4] = {1.0f + rank, 2, 3, 4};
    float in[4] = {};
    RANK_OK(rank, RunOp(Plugin()->send, comm, SendArgs(out, 4, DIST_FLOAT32, peer, 1)));
    RANK_OK(rank, RunOp(Plugin()->recv, comm, RecvArgs(in, 4, DIST_FLOAT32, peer, 1)));
    RANK_CHECK(rank, in[0] == 1.0f + peer && in[3] == 4.0f);
    RANK_OK(rank, RunOp(Plugin()->barrier, comm, Args()));
    if (rank == 1) {
      dist_shm::RingControl* to_0 = MappedRing(1, 0);
      dist_shm::RingControl* from_0 = MappedRing(0, 1);
      RANK_CHECK(rank, to_0 != nullptr && from_0 != nullptr);
      const uint64_t read = to_0->tail.load();  // rank 0 has read all of ring 1->0
      switch (corruption) {
        case Corruption::kHeadBehindTail:
          to_0->head.store(read - 16);
          break;
        case Corruption::kSkipPastHead:
          to_0->skip_from.store(read);
          to_0->head.store(read + 16);
          break;
        case Corruption::kTailAheadOfHead:
          from_0->tail.store(from_0->head.load() + (uint64_t{1} << 40));
          break;
      }
      RANK_CHECK(rank, view.Set("written", "1").ok());
      // Rank 0 says when it is done; this rank's communicator is left alone.
      RANK_CHECK(rank, view.Get("checked", absl::Seconds(25)).ok());
      Plugin()->comm_destroy(comm);
      return 0;
    }
    RANK_CHECK(rank, view.Get("written", absl::Seconds(25)).ok());
    dist_error_t* error = nullptr;
    if (corruption == Corruption::kTailAheadOfHead) {
      // A sender reads the receiver's tail only once the room it last saw
      // is used up: sends go on until then (fewer than a ring's worth).
      for (int i = 0; i < (1 << 20) / 16 && error == nullptr; ++i) {
        error = RunOp(Plugin()->send, comm, SendArgs(out, 4, DIST_FLOAT32, 1, 2));
      }
    } else {
      error = RunOp(Plugin()->recv, comm, RecvArgs(in, 4, DIST_FLOAT32, 1, 2));
    }
    RANK_CHECK(rank, error != nullptr);
    std::fprintf(stderr, "rank 0: %s\n", dist_error_message(error));
    const std::string ring = corruption == Corruption::kTailAheadOfHead
                                 ? "the ring from rank 0 to rank 1 on group 'test' is corrupt"
                                 : "the ring from rank 1 to rank 0 on group 'test' is corrupt";
    RANK_CHECK(rank, dist_error_code(error) == DIST_DATA_LOSS);
    RANK_CHECK(rank, absl::StrContains(dist_error_message(error), ring));
    dist_error_destroy(error);
    // The communicator stays failed, and says why.
    error = RunOp(Plugin()->barrier, comm, Args());
    RANK_CHECK(rank, error != nullptr);
    RANK_CHECK(rank, absl::StrContains(dist_error_message(error), "failed earlier"));
    RANK_CHECK(rank, absl::StrContains(dist_error_message(error), ring));
    dist_error_destroy(error);
    RANK_CHECK(rank, view.Set("checked", "1").ok());
    Plugin()->comm_destroy(comm);
    return 0;
  });
  EXPECT_TRUE(results[0].ok()) << results[0].Describe();
  EXPECT_TRUE(results[1].ok()) << results[1].Describe();
}

INSTANTIATE_TEST_SUITE_P(Writes, ShmCorruptRing,
                         testing::Values(Corruption::kHeadBehindTail, Corruption::kSkipPastHead,
                                         Corruption::kTailAheadOfHead));

}  // namespace
}  // namespace dist_test
