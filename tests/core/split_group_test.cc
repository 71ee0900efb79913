// dist_split_group: four ranks (threads with real gloo communicators) split
// one group by colour and key; each new group is checked by who is in it,
// in which order (all_gather of the parent ranks) and by a sum.
#include <string>
#include <thread>
#include <vector>

#include "dist/dist.h"
#include "gtest/gtest.h"
#include "support/memory_store.h"

namespace {

constexpr int kRanks = 4;

std::string Message(dist_error_t* error) {
  std::string text = dist_error_message(error);
  dist_error_destroy(error);
  return text;
}

// The parent ranks of `group`'s members in its rank order.
std::vector<int32_t> Members(dist_process_group_t* group, int32_t parent_rank, std::string* failure) {
  std::vector<int32_t> members(dist_world_size(group), -1);
  dist_buffer_t send = dist_make_buffer(&parent_rank, 1, DIST_INT32, dist_cpu());
  dist_buffer_t recv = dist_make_buffer(members.data(), members.size(), DIST_INT32, dist_cpu());
  if (dist_error_t* error = dist_all_gather(group, &send, &recv, nullptr)) {
    *failure = "all_gather: " + Message(error);
  }
  return members;
}

// Runs body(rank, group) on kRanks threads that share one group over gloo.
template <typename Body>
void OnEveryRank(Body body) {
  dist::MemoryStore store("split store");
  std::vector<dist_store_t> tables(kRanks);
  std::vector<std::string> failures(kRanks);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kRanks; ++rank) {
    dist::FillMemoryStoreTable(&store, &tables[rank]);
    tables[rank].release = [](void*) {};  // the store outlives the threads
    threads.emplace_back([&, rank] {
      dist_init_options_t options = dist_init_options_default();
      options.backend = "gloo";
      options.rank = rank;
      options.world_size = kRanks;
      options.timeout_ms = 20000;
      options.store = &tables[rank];
      dist_process_group_t* group = nullptr;
      if (dist_error_t* error = dist_init(&options, &group)) {
        failures[rank] = "init: " + Message(error);
        return;
      }
      body(rank, group, &failures[rank]);
      dist_destroy(group);
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int rank = 0; rank < kRanks; ++rank) EXPECT_EQ(failures[rank], "") << "rank " << rank;
}

TEST(SplitGroup, ColoursMakeGroupsNumberedByKey) {
  OnEveryRank([](int rank, dist_process_group_t* parent, std::string* failure) {
    // Evens and odds; a descending key reverses each group's order.
    dist_process_group_t* group = nullptr;
    if (dist_error_t* error = dist_split_group(parent, rank % 2, -rank, &group)) {
      *failure = "split: " + Message(error);
      return;
    }
    const std::vector<int32_t> want = rank % 2 == 0 ? std::vector<int32_t>{2, 0}
                                                    : std::vector<int32_t>{3, 1};
    const std::vector<int32_t> got = Members(group, rank, failure);
    if (got != want) *failure = "wrong members or order";
    if (dist_rank(group) != (rank < 2 ? 1 : 0)) *failure = "wrong new rank";
    dist_destroy(group);
  });
}

TEST(SplitGroup, ANegativeColourJoinsNoGroupAndTheRestSplitInOrder) {
  OnEveryRank([](int rank, dist_process_group_t* parent, std::string* failure) {
    dist_process_group_t* group = nullptr;
    const int32_t color = rank == 3 ? DIST_SPLIT_NONE : 7;
    if (dist_error_t* error = dist_split_group(parent, color, 0, &group)) {
      *failure = "split: " + Message(error);
      return;
    }
    if (rank == 3) {
      if (group != nullptr) *failure = "a negative colour got a group";
      return;
    }
    if (Members(group, rank, failure) != std::vector<int32_t>({0, 1, 2})) *failure = "members";
    int64_t x = rank + 1;
    dist_buffer_t b = dist_make_buffer(&x, 1, DIST_INT64, dist_cpu());
    if (dist_error_t* error = dist_all_reduce(group, &b, &b, DIST_SUM, nullptr)) {
      *failure = "all_reduce: " + Message(error);
    } else if (x != 6) {
      *failure = "wrong sum";
    }
    dist_destroy(group);
  });
}

}  // namespace
