// dist_split_group: four ranks (threads with real gloo communicators) split
// one group by colour and key; each new group is checked by who is in it,
// in which order (all_gather of the parent ranks) and by a sum.
#include <string>
#include <vector>

#include "tests/core/thread_ranks.h"

namespace {

using dist_test::Message;

constexpr int kRanks = 4;

// The parent ranks of `group`'s members in its rank order.
std::vector<int32_t> Members(dist_process_group_t* group, int32_t parent_rank,
                             std::string* failure) {
  std::vector<int32_t> members(dist_world_size(group), -1);
  dist_buffer_t send = dist_make_buffer(&parent_rank, 1, DIST_INT32, dist_cpu());
  dist_buffer_t recv = dist_make_buffer(members.data(), members.size(), DIST_INT32, dist_cpu());
  if (dist_error_t* error = dist_all_gather(group, &send, &recv, nullptr)) {
    *failure = "all_gather: " + Message(error);
  }
  return members;
}

TEST(SplitGroup, ColoursMakeGroupsNumberedByKey) {
  dist_test::OnEveryRank(kRanks, [](int rank, dist_process_group_t* parent, std::string* failure) {
    // Evens and odds; a descending key reverses each group's order.
    dist_process_group_t* group = nullptr;
    if (dist_error_t* error = dist_split_group(parent, rank % 2, -rank, &group)) {
      *failure = "split: " + Message(error);
      return;
    }
    const std::vector<int32_t> want =
        rank % 2 == 0 ? std::vector<int32_t>{2, 0} : std::vector<int32_t>{3, 1};
    const std::vector<int32_t> got = Members(group, rank, failure);
    if (got != want) *failure = "wrong members or order";
    if (dist_rank(group) != (rank < 2 ? 1 : 0)) *failure = "wrong new rank";
    dist_destroy(group);
  });
}

TEST(SplitGroup, ANegativeColourJoinsNoGroupAndTheRestSplitInOrder) {
  dist_test::OnEveryRank(kRanks, [](int rank, dist_process_group_t* parent, std::string* failure) {
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

// A rank that never calls: the caller gets a timeout naming it, within the
// group's timeout, not a hang.
TEST(SplitGroup, ARankThatNeverCallsIsATimeoutNamingIt) {
  dist_test::OnEveryRank(
      2,
      [](int rank, dist_process_group_t* parent, std::string* failure) {
        if (rank == 1) return;  // leaves without splitting
        dist_process_group_t* group = nullptr;
        dist_error_t* error = dist_split_group(parent, 0, 0, &group);
        if (dist_error_code(error) != DIST_DEADLINE_EXCEEDED) *failure = "want a timeout";
        const std::string message = Message(error);
        if (message.find("rank 1") == std::string::npos)
          *failure = "does not name rank 1: " + message;
        if (group != nullptr) *failure = "got a group";
      },
      /*timeout_ms=*/3000);
}

}  // namespace
