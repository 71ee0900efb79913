// The shm backend never trusts a size blindly: options are bounded (a
// slot_bytes of 2^63 used to crash a rank) and a segment header that another
// process wrote is validated before anything is located through it.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
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

}  // namespace
}  // namespace dist_test
