// dist_all_to_all_v, dist_all_gather_v and dist_reduce_scatter_v among four
// ranks (threads, real gloo), with uneven and zero counts, against results
// worked out here from what each rank sent.
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "tests/core/thread_ranks.h"

namespace {

using dist_test::Message;
constexpr int kRanks = 4;

// What rank i sends rank j: (i + 2j) % 3 elements, some of them none.
uint64_t Count(int i, int j) { return static_cast<uint64_t>((i + 2 * j) % 3); }

TEST(VariableCollectives, AllToAllVWithUnevenAndZeroCounts) {
  dist_test::OnEveryRank(kRanks, [](int rank, dist_process_group_t* group, std::string* failure) {
    std::vector<uint64_t> send_counts(kRanks), recv_counts(kRanks);
    std::vector<int64_t> send, want;
    for (int j = 0; j < kRanks; ++j) {
      send_counts[j] = Count(rank, j);
      send.insert(send.end(), send_counts[j], 100 * rank + j);
    }
    for (int i = 0; i < kRanks; ++i) {
      recv_counts[i] = Count(i, rank);
      want.insert(want.end(), recv_counts[i], 100 * i + rank);
    }
    std::vector<int64_t> recv(want.size(), -1);
    dist_buffer_t s = dist_make_buffer(send.data(), send.size(), DIST_INT64, dist_cpu());
    dist_buffer_t r = dist_make_buffer(recv.data(), recv.size(), DIST_INT64, dist_cpu());
    if (dist_error_t* error = dist_all_to_all_v(group, &s, send_counts.data(), nullptr, &r,
                                                recv_counts.data(), nullptr, nullptr)) {
      *failure = Message(error);
    } else if (recv != want) {
      *failure = "wrong blocks";
    }
  });
}

TEST(VariableCollectives, AllGatherVAndReduceScatterV) {
  dist_test::OnEveryRank(kRanks, [](int rank, dist_process_group_t* group, std::string* failure) {
    // all_gather_v: rank r gives r elements of value r (rank 0 gives none).
    std::vector<uint64_t> counts(kRanks);
    std::iota(counts.begin(), counts.end(), 0);
    std::vector<float> mine(rank, static_cast<float>(rank)), all(6, -1), want;
    for (int r = 0; r < kRanks; ++r) want.insert(want.end(), r, static_cast<float>(r));
    dist_buffer_t s = dist_make_buffer(mine.data(), mine.size(), DIST_FLOAT32, dist_cpu());
    dist_buffer_t r = dist_make_buffer(all.data(), all.size(), DIST_FLOAT32, dist_cpu());
    if (dist_error_t* error = dist_all_gather_v(group, &s, &r, counts.data(), nullptr, nullptr)) {
      *failure = "all_gather_v: " + Message(error);
      return;
    }
    if (all != want) *failure = "all_gather_v: wrong result";
    // reduce_scatter_v: element k of every rank's send is k + rank; rank r
    // keeps block r (r + 1 elements) of the sum.
    std::vector<uint64_t> blocks = {1, 2, 3, 4};
    std::vector<double> send(10), got(blocks[rank], -1);
    for (int k = 0; k < 10; ++k) send[k] = k + rank;
    dist_buffer_t in = dist_make_buffer(send.data(), send.size(), DIST_FLOAT64, dist_cpu());
    dist_buffer_t out = dist_make_buffer(got.data(), got.size(), DIST_FLOAT64, dist_cpu());
    if (dist_error_t* error =
            dist_reduce_scatter_v(group, &in, &out, blocks.data(), DIST_SUM, nullptr)) {
      *failure = "reduce_scatter_v: " + Message(error);
      return;
    }
    const int first = rank * (rank + 1) / 2;
    for (uint64_t k = 0; k < blocks[rank]; ++k) {
      if (got[k] != 4.0 * (first + k) + 6) *failure = "reduce_scatter_v: wrong sum";
    }
  });
}

TEST(VariableCollectives, BadCountsAreRefusedOnTheCallingRank) {
  dist_test::OnEveryRank(1, [](int, dist_process_group_t* group, std::string* failure) {
    int32_t x[4] = {};
    dist_buffer_t b = dist_make_buffer(x, 4, DIST_INT32, dist_cpu());
    const uint64_t too_many[1] = {5};
    dist_error_t* error =
        dist_all_to_all_v(group, &b, too_many, nullptr, &b, too_many, nullptr, nullptr);
    if (dist_error_code(error) != DIST_INVALID_ARGUMENT) *failure = "counts past the buffer";
    if (Message(error).find("ends past") == std::string::npos) *failure = "message";
    dist_work_t* work = nullptr;
    const uint64_t four[1] = {4};
    error = dist_all_gather_v(group, &b, &b, four, nullptr, &work);
    if (dist_error_code(error) != DIST_UNIMPLEMENTED || work != nullptr) *failure = "async";
    dist_error_destroy(error);
  });
}

// A peer that leaves instead of taking part: an error naming it, within
// the group's timeout, not a hang.
TEST(VariableCollectives, APeerThatLeavesIsAnErrorNamingIt) {
  dist_test::OnEveryRank(
      2,
      [](int rank, dist_process_group_t* group, std::string* failure) {
        if (rank == 1) return;  // destroys its group instead
        int32_t x[2] = {1, 2};
        const uint64_t counts[2] = {1, 1};
        dist_buffer_t b = dist_make_buffer(x, 2, DIST_INT32, dist_cpu());
        int32_t y[2] = {};
        dist_buffer_t r = dist_make_buffer(y, 2, DIST_INT32, dist_cpu());
        dist_error_t* error =
            dist_all_to_all_v(group, &b, counts, nullptr, &r, counts, nullptr, nullptr);
        if (error == nullptr) *failure = "no error with the peer gone";
        const std::string message = Message(error);
        if (message.find("rank 1") == std::string::npos &&
            message.find("rank(s) 1") == std::string::npos) {
          *failure = "does not name rank 1: " + message;
        }
        if (message.find("all_to_all_v") == std::string::npos) {
          *failure = "does not name the call: " + message;
        }
      },
      /*timeout_ms=*/3000);
}

}  // namespace
