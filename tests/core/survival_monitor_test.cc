// The survivors' agreement of dist_shrink against records in the store that
// no survivor could have written: each is refused with what it was, never
// handed to the new group's set-up. One rank of a group of two, over an
// in-memory store, with the decision already written (as if by a peer).
#include <cstring>
#include <string>
#include <vector>

#include "core/survival.h"
#include "gtest/gtest.h"
#include "support/memory_store.h"

namespace dist {
namespace {

constexpr char kDecision[] = "shrink1/survivors";

absl::StatusOr<std::vector<int32_t>> AgreeWithRecord(const std::string& record) {
  dist_store_t* store = NewMemoryStore();
  EXPECT_EQ(store->set(store->ctx, kDecision, record.data(), record.size()), nullptr);
  SurvivalSettings settings;
  settings.enabled = true;
  // The monitor owns the store from here and releases it when it stops.
  SurvivalMonitor monitor(store, /*rank=*/0, /*world_size=*/2, "g", settings,
                          [](const std::string&) {});
  return monitor.AgreeOnSurvivors(1, absl::Seconds(5));
}

TEST(SurvivalMonitor, TakesAWellFormedDecision) {
  absl::StatusOr<std::vector<int32_t>> survivors = AgreeWithRecord("0,1");
  ASSERT_TRUE(survivors.ok()) << survivors.status();
  EXPECT_EQ(*survivors, (std::vector<int32_t>{0, 1}));
}

TEST(SurvivalMonitor, RefusesGarbledDecisions) {
  for (const char* record : {"0,2", "-1,0", "1,0", "0,0", "0,x", "0;1"}) {
    absl::StatusOr<std::vector<int32_t>> survivors = AgreeWithRecord(record);
    ASSERT_FALSE(survivors.ok()) << record;
    EXPECT_EQ(survivors.status().code(), absl::StatusCode::kDataLoss) << record;
    EXPECT_NE(survivors.status().message().find(std::string("garbled: '") + record + "'"),
              std::string::npos)
        << survivors.status();
  }
}

TEST(SurvivalMonitor, ALeftOutRankIsToldToExit) {
  absl::StatusOr<std::vector<int32_t>> survivors = AgreeWithRecord("1");
  ASSERT_FALSE(survivors.ok());
  EXPECT_EQ(survivors.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(survivors.status().message().find("this process should exit"), std::string::npos)
      << survivors.status();
}

}  // namespace
}  // namespace dist
