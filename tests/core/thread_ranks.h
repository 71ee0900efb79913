// Ranks as threads of the test: each joins one gloo group through a shared
// in-memory store handed to dist_init (dist_init_options_t.store), runs
// `body`, and reports what went wrong in its failure string.
#ifndef DIST_TESTS_CORE_THREAD_RANKS_H_
#define DIST_TESTS_CORE_THREAD_RANKS_H_

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "dist/dist.h"
#include "gtest/gtest.h"
#include "support/memory_store.h"

namespace dist_test {

inline std::string Message(dist_error_t* error) {
  std::string text = dist_error_message(error);
  dist_error_destroy(error);
  return text;
}

// body(rank, group, &failure) on `ranks` threads, in a group with
// `timeout_ms`; every failure string must stay empty.
template <typename Body>
void OnEveryRank(int ranks, Body body, int64_t timeout_ms = 20000) {
  dist::MemoryStore store("thread ranks' store");
  std::vector<dist_store_t> tables(ranks);
  std::vector<std::string> failures(ranks);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < ranks; ++rank) {
    dist::FillMemoryStoreTable(&store, &tables[rank]);
    tables[rank].release = [](void*) {};  // the store outlives the threads
    threads.emplace_back([&, rank] {
      dist_init_options_t options = dist_init_options_default();
      options.backend = "gloo";
      options.rank = rank;
      options.world_size = ranks;
      options.timeout_ms = timeout_ms;
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
  for (int rank = 0; rank < ranks; ++rank) EXPECT_EQ(failures[rank], "") << "rank " << rank;
}

}  // namespace dist_test

#endif  // DIST_TESTS_CORE_THREAD_RANKS_H_
