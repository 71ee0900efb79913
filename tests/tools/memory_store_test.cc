// The shared fixture store (memory_store.h) through its dist_store_t table,
// as the core sees it; expected results follow store.h.
#include "support/memory_store.h"

#include <string>
#include <thread>

#include "absl/time/clock.h"
#include "dist/cpp/store.hpp"
#include "gtest/gtest.h"

namespace {

// Whether `text` contains `part` (gtest's EXPECT_THAT needs gmock).
::testing::AssertionResult Contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << text << "' lacks '" << part << "'";
}

class MemoryStoreTest : public ::testing::Test {
 protected:
  MemoryStoreTest() { dist::FillMemoryStoreTable(new dist::MemoryStore("test store"), &table_); }
  ~MemoryStoreTest() override { table_.release(table_.ctx); }

  // compare_set with the raw pointers (StoreView turns "" into NULL).
  std::string RawCompareSet(const char* key, const char* expected, size_t expected_size,
                            const std::string& desired) {
    void* actual = nullptr;
    size_t actual_size = 0;
    dist_error_t* error = table_.compare_set(table_.ctx, key, expected, expected_size,
                                             desired.data(), desired.size(), &actual, &actual_size);
    EXPECT_EQ(error, nullptr);
    dist_error_destroy(error);
    std::string now(static_cast<const char*>(actual), actual_size);
    table_.free_value(table_.ctx, actual);
    return now;
  }

  int64_t NumKeys() { return store_.NumKeys().value(); }

  dist_store_t table_;
  dist::StoreView store_{&table_};
};

// The operations themselves are called by the tests below.
TEST_F(MemoryStoreTest, FillsTheTableButNothingPastRelease) {
  EXPECT_EQ(table_.struct_size, sizeof(dist_store_t));
  EXPECT_NE(table_.ctx, nullptr);
  EXPECT_EQ(table_.release_failed, nullptr);
}

TEST_F(MemoryStoreTest, GetsWhatWasSetIncludingEmptyAndBinaryValues) {
  const std::string binary("a\0b", 3);
  ASSERT_TRUE(store_.Set("k", binary).ok());
  ASSERT_TRUE(store_.Set("empty", "").ok());
  EXPECT_EQ(store_.Get("k", absl::Seconds(1)).value(), binary);
  EXPECT_EQ(store_.Get("empty", absl::Seconds(1)).value(), "");
  ASSERT_TRUE(store_.Set("k", "again").ok());
  EXPECT_EQ(store_.Get("k", absl::Seconds(1)).value(), "again");
  EXPECT_EQ(NumKeys(), 2);
}

TEST_F(MemoryStoreTest, GetWaitsForASetFromAnotherThread) {
  std::thread setter([this] {
    absl::SleepFor(absl::Milliseconds(50));
    ASSERT_TRUE(store_.Set("late", "here").ok());
  });
  EXPECT_EQ(store_.Get("late", absl::Seconds(10)).value(), "here");
  setter.join();
}

TEST_F(MemoryStoreTest, GetTimesOutNamingTheKey) {
  const absl::StatusOr<std::string> got = store_.Get("absent", absl::Milliseconds(20));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(Contains(std::string(got.status().message()),
                       "test store: key 'absent' not set within 20ms"));
  EXPECT_EQ(NumKeys(), 0);
}

TEST_F(MemoryStoreTest, AddCountsFromZeroAndRefusesANonNumber) {
  EXPECT_EQ(store_.Add("n", 5).value(), 5);
  EXPECT_EQ(store_.Add("n", -7).value(), -2);
  EXPECT_EQ(store_.Get("n", absl::Seconds(1)).value(), "-2");
  ASSERT_TRUE(store_.Set("word", "seven").ok());
  const absl::StatusOr<int64_t> added = store_.Add("word", 1);
  ASSERT_FALSE(added.ok());
  EXPECT_EQ(added.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(std::string(added.status().message()),
                       "key 'word' holds 'seven', not a decimal integer"));
  EXPECT_EQ(store_.Get("word", absl::Seconds(1)).value(), "seven");
}

TEST_F(MemoryStoreTest, CompareSetWithNullExpectedClaimsOnlyAMissingKey) {
  EXPECT_EQ(RawCompareSet("owner", nullptr, 0, "first"), "first");
  EXPECT_EQ(RawCompareSet("owner", nullptr, 0, "second"), "first");
  // A present empty value is not "missing".
  ASSERT_TRUE(store_.Set("blank", "").ok());
  EXPECT_EQ(RawCompareSet("blank", nullptr, 0, "x"), "");
}

TEST_F(MemoryStoreTest, CompareSetSwapsOnlyOnAMatch) {
  ASSERT_TRUE(store_.Set("k", "old").ok());
  EXPECT_EQ(RawCompareSet("k", "other", 5, "new"), "old");
  EXPECT_EQ(RawCompareSet("k", "old", 3, "new"), "new");
  EXPECT_EQ(store_.Get("k", absl::Seconds(1)).value(), "new");
  // An expected value on a missing key neither swaps nor creates the key.
  EXPECT_EQ(RawCompareSet("absent", "old", 3, "new"), "");
  EXPECT_EQ(RawCompareSet("absent", "", 0, "new"), "");
  EXPECT_FALSE(store_.Check({"absent"}).value());
  EXPECT_EQ(NumKeys(), 1);
}

TEST_F(MemoryStoreTest, RemoveTellsWhetherTheKeyExisted) {
  ASSERT_TRUE(store_.Set("k", "v").ok());
  EXPECT_TRUE(store_.Remove("k").value());
  EXPECT_FALSE(store_.Remove("k").value());
  // existed may be NULL.
  dist_error_t* error = table_.remove(table_.ctx, "k", nullptr);
  EXPECT_EQ(error, nullptr);
  dist_error_destroy(error);
  EXPECT_EQ(NumKeys(), 0);
}

TEST_F(MemoryStoreTest, CheckAndWaitNeedEveryKey) {
  ASSERT_TRUE(store_.Set("a", "1").ok());
  EXPECT_TRUE(store_.Check({"a"}).value());
  EXPECT_FALSE(store_.Check({"a", "b"}).value());
  EXPECT_TRUE(store_.Check({}).value());
  EXPECT_TRUE(store_.Wait({"a"}, absl::Seconds(1)).ok());
  const absl::Status waited = store_.Wait({"a", "b", "c"}, absl::Milliseconds(20));
  EXPECT_EQ(waited.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(
      Contains(std::string(waited.message()), "test store: keys not set within 20ms: b, c"));
}

}  // namespace
