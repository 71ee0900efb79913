// dist_store_t.release_failed (rendezvous ABI 1.1) through
// the real core: a store of a rendezvous plugin built against the frozen 1.0
// headers (struct_size 96, no release_failed) is still released after a
// failed join, and the core reads nothing beyond its struct_size; a current
// store is handed back with release_failed and the join check's message.
// The fixture plugins (store_release_rendezvous.cc) log what happens to
// their stores into a file named in the URL.
#include <cstddef>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

#include "absl/strings/str_cat.h"
#include "dist/registry.h"
#include "dist/store.h"
#include "gtest/gtest.h"

namespace {

std::string FixtureDir() { return std::string(std::getenv("TEST_SRCDIR")) + "/dist/tests/abi"; }

std::string LogPath(const std::string& name) {
  return std::string(std::getenv("TEST_TMPDIR")) + "/" + name + ".log";
}

std::string ReadLog(const std::string& path) {
  std::ifstream file(path);
  return std::string((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
}

struct Outcome {
  dist_error_code_t code = DIST_OK;
  std::string message;
  dist_rendezvous_result_t result{};
};

Outcome Rendezvous(const std::string& scheme, const std::string& log, int world_size,
                   size_t result_size = sizeof(dist_rendezvous_result_t)) {
  setenv("DIST_PLUGIN_PATH", FixtureDir().c_str(), 1);
  const std::string url = absl::StrCat(scheme, "://", log, "?world_size=", world_size);
  Outcome out;
  out.result.struct_size = result_size;
  dist_error_t* error = dist_rendezvous(url.c_str(), nullptr, 300, &out.result);
  if (error != nullptr) {
    out.code = dist_error_code(error);
    out.message = dist_error_message(error);
    dist_error_destroy(error);
  }
  return out;
}

constexpr size_t kAbi10StoreSize = offsetof(dist_store_t, release_failed);

TEST(StoreRelease, TheAbi10TableEndsWhereReleaseFailedBegins) {
  EXPECT_EQ(kAbi10StoreSize, 96u);
  EXPECT_GT(sizeof(dist_store_t), kAbi10StoreSize);
}

TEST(StoreRelease, AnAbi10StoreIsReleasedAfterAFailedJoin) {
  const std::string log = LogPath("frozen_failed");
  const Outcome out = Rendezvous("frozenstore", log, 2);
  EXPECT_EQ(out.code, DIST_DEADLINE_EXCEEDED) << out.message;
  EXPECT_NE(out.message.find("1 of 2 ranks joined, missing rank 1"), std::string::npos)
      << out.message;
  // Released exactly once, and the poisoned word after its 96 bytes (where
  // release_failed would be) was never called.
  EXPECT_EQ(ReadLog(log), "created struct_size=96\nrelease\n");
}

TEST(StoreRelease, AnAbi10StoreWorksForAJoinThatSucceeds) {
  const std::string log = LogPath("frozen_ok");
  const Outcome out = Rendezvous("frozenstore", log, 1);
  ASSERT_EQ(out.code, DIST_OK) << out.message;
  ASSERT_NE(out.result.store, nullptr);
  EXPECT_EQ(out.result.store->struct_size, kAbi10StoreSize);
  out.result.store->release(out.result.store->ctx);
  EXPECT_EQ(ReadLog(log), "created struct_size=96\nrelease\n");
}

TEST(StoreRelease, ACurrentStoreHearsTheJoinChecksMessage) {
  const std::string log = LogPath("current_failed");
  const Outcome out = Rendezvous("currentstore", log, 2);
  EXPECT_EQ(out.code, DIST_DEADLINE_EXCEEDED) << out.message;
  EXPECT_NE(out.message.find("1 of 2 ranks joined, missing rank 1"), std::string::npos)
      << out.message;
  // release_failed instead of release (never both), with the very message
  // the caller got.
  EXPECT_EQ(ReadLog(log), absl::StrCat("created struct_size=", sizeof(dist_store_t),
                                       "\nrelease_failed: ", out.message, "\n"));
}

TEST(StoreRelease, ACurrentStoreOfAJoinThatSucceedsIsTheCallersToRelease) {
  const std::string log = LogPath("current_ok");
  const Outcome out = Rendezvous("currentstore", log, 1);
  ASSERT_EQ(out.code, DIST_OK) << out.message;
  ASSERT_NE(out.result.store, nullptr);
  EXPECT_EQ(ReadLog(log), absl::StrCat("created struct_size=", sizeof(dist_store_t), "\n"));
  out.result.store->release(out.result.store->ctx);
  EXPECT_EQ(ReadLog(log),
            absl::StrCat("created struct_size=", sizeof(dist_store_t), "\nrelease\n"));
}

// A result too small to hold `store` would leave the caller no way to
// release the store the join opened: refused before any store exists.
TEST(StoreRelease, AResultWithoutRoomForTheStoreIsRefusedBeforeJoining) {
  const std::string log = LogPath("small_result");
  const Outcome out = Rendezvous("currentstore", log, 1, offsetof(dist_rendezvous_result_t, store));
  EXPECT_EQ(out.code, DIST_INVALID_ARGUMENT) << out.message;
  EXPECT_NE(out.message.find("result->struct_size is"), std::string::npos) << out.message;
  EXPECT_NE(out.message.find("sizeof(dist_rendezvous_result_t)"), std::string::npos) << out.message;
  EXPECT_EQ(ReadLog(log), "");  // no store was created
  EXPECT_EQ(out.result.store, nullptr);
}

}  // namespace
