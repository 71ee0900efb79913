// dist_init through a store the host brings (dist_init_options_t.store, host
// API 1.4), as the torch.distributed backend does with torch's own store:
// real gloo communicators among threads that meet only through that store,
// and the store released exactly once per rank, on success and on failure.
#include <atomic>
#include <cstddef>
#include <string>
#include <thread>
#include <vector>

#include "dist/dist.h"
#include "gtest/gtest.h"
#include "support/memory_store.h"

namespace {

// One in-memory store that every rank (a thread) reaches through its own
// table; each test swaps in a release that counts instead of deleting.
struct SharedStore {
  dist::MemoryStore store{"host store"};
};

dist_store_t TableFor(SharedStore& shared) {
  dist_store_t table{};
  dist::FillMemoryStoreTable(&shared.store, &table);
  return table;
}

dist_init_options_t Options(dist_store_t* store, int rank, int world_size) {
  dist_init_options_t options = dist_init_options_default();
  options.backend = "gloo";
  options.rank = rank;
  options.world_size = world_size;
  options.timeout_ms = 20000;
  options.store = store;
  return options;
}

std::string Message(dist_error_t* error) {
  std::string text = dist_error_message(error);
  dist_error_destroy(error);
  return text;
}

TEST(HostStore, RanksMeetThroughTheHostsStoreAndEachReleasesItOnce) {
  constexpr int kRanks = 3;
  SharedStore shared;
  std::atomic<int> counter{0};
  // release is called with ctx = the MemoryStore: count through a static.
  static std::atomic<int>* releases = nullptr;
  releases = &counter;
  std::vector<dist_store_t> tables(kRanks);
  for (dist_store_t& table : tables) {
    table = TableFor(shared);
    table.release = [](void*) { (*releases)++; };
  }
  std::vector<std::string> failures(kRanks);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kRanks; ++rank) {
    threads.emplace_back([&, rank] {
      dist_init_options_t options = Options(&tables[rank], rank, kRanks);
      dist_process_group_t* group = nullptr;
      if (dist_error_t* error = dist_init(&options, &group)) {
        failures[rank] = "init: " + Message(error);
        return;
      }
      if (dist_rank(group) != rank || dist_world_size(group) != kRanks) failures[rank] = "rank";
      int32_t values[4] = {rank, rank * 10, 1, -rank};
      dist_buffer_t buffer = dist_make_buffer(values, 4, DIST_INT32, dist_cpu());
      if (dist_error_t* error = dist_all_reduce(group, &buffer, &buffer, DIST_SUM, nullptr)) {
        failures[rank] = "all_reduce: " + Message(error);
      } else if (values[0] != 3 || values[1] != 30 || values[2] != 3 || values[3] != -3) {
        failures[rank] = "wrong sum";
      }
      // A subgroup lives in the same store, under its own prefix.
      const int32_t members[2] = {0, 2};
      dist_process_group_t* pair = nullptr;
      if (dist_error_t* error = dist_new_group(group, members, 2, &pair)) {
        failures[rank] = "new_group: " + Message(error);
      } else if (dist_rank(pair) >= 0) {
        int64_t x = rank + 1;
        dist_buffer_t b = dist_make_buffer(&x, 1, DIST_INT64, dist_cpu());
        if (dist_error_t* error = dist_all_reduce(pair, &b, &b, DIST_SUM, nullptr)) {
          failures[rank] = "subgroup: " + Message(error);
        } else if (x != 4) {
          failures[rank] = "wrong subgroup sum";
        }
      }
      dist_destroy(pair);
      dist_destroy(group);
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int rank = 0; rank < kRanks; ++rank) EXPECT_EQ(failures[rank], "") << "rank " << rank;
  EXPECT_EQ(counter.load(), kRanks) << "every rank releases the store it was given, once";
}

TEST(HostStore, AStoreWithoutRankAndSizeIsRefusedAndStillReleased) {
  SharedStore shared;
  dist_store_t table = TableFor(shared);
  static std::atomic<int> releases{0};
  table.release = [](void*) { releases++; };
  dist_init_options_t options = Options(&table, -1, 0);
  dist_process_group_t* group = nullptr;
  dist_error_t* error = dist_init(&options, &group);
  ASSERT_NE(error, nullptr);
  EXPECT_EQ(dist_error_code(error), DIST_INVALID_ARGUMENT);
  EXPECT_NE(Message(error).find("rank and world_size"), std::string::npos);
  EXPECT_EQ(group, nullptr);
  EXPECT_EQ(releases.load(), 1);
}

TEST(HostStore, AMissingRankIsATimeoutThatReleasesTheStore) {
  SharedStore shared;
  dist_store_t table = TableFor(shared);
  static std::atomic<int> releases{0};
  table.release = [](void*) { releases++; };
  table.release_failed = [](void*, const char*) { releases++; };
  dist_init_options_t options = Options(&table, 0, 2);
  options.timeout_ms = 300;
  dist_process_group_t* group = nullptr;
  dist_error_t* error = dist_init(&options, &group);
  ASSERT_NE(error, nullptr);
  EXPECT_EQ(dist_error_code(error), DIST_DEADLINE_EXCEEDED) << dist_error_message(error);
  const std::string message = Message(error);
  EXPECT_NE(message.find("1"), std::string::npos) << message;  // names the missing rank
  EXPECT_EQ(releases.load(), 1);
}

}  // namespace
