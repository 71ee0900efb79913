// Tests of the results table: serialization and merging across ranks.
#include "sdk/conformance/report.h"

#include <cstdio>
#include <string>

#include "gtest/gtest.h"

namespace dist::conformance {
namespace {

TEST(ReportTest, RowsRoundTripThroughTheirLine) {
  Row row{"reduce root=1 in-place", "int8", "max", "1023", Outcome::kFail, "rank 1:\tbad\nvalue"};
  absl::StatusOr<Row> back = ParseRow(FormatRow(row));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->check, row.check);
  EXPECT_EQ(back->op, "max");
  EXPECT_EQ(back->outcome, Outcome::kFail);
  EXPECT_EQ(back->detail, "rank 1: bad value");  // one line, no tabs
  EXPECT_FALSE(ParseRow("too\tfew").ok());
  EXPECT_FALSE(ParseRow("a\tb\tc\td\tMAYBE\tf").ok());
}

TEST(ReportTest, MergeFailsARowIfAnyRankFailedOrIsMissing) {
  const Row pass{"all_reduce", "int32", "sum", "7", Outcome::kPass, ""};
  Row fail = pass;
  fail.outcome = Outcome::kFail;
  fail.detail = "wrong result";
  const Row skip{"send/recv", "-", "-", "-", Outcome::kSkip, "needs 2 ranks"};
  std::vector<Row> merged = MergeRanks({{pass, skip, pass}, {fail, skip}});
  ASSERT_EQ(merged.size(), 3u);
  EXPECT_EQ(merged[0].outcome, Outcome::kFail);
  EXPECT_EQ(merged[0].detail, "rank 1: wrong result");
  EXPECT_EQ(merged[1].outcome, Outcome::kSkip);
  EXPECT_EQ(merged[2].outcome, Outcome::kFail);  // rank 1 never got there
  EXPECT_NE(merged[2].detail.find("rank 1: did not get here"), std::string::npos);
}

TEST(ReportTest, TableEndsWithTheCounts) {
  Report report;
  report.Add(Row{"a", "-", "-", "-", Outcome::kPass, ""});
  report.Add(Row{"b", "-", "-", "-", Outcome::kFail, "why"});
  report.Add(Row{"c", "-", "-", "-", Outcome::kSkip, "why not"});
  EXPECT_EQ(report.passed(), 1);
  EXPECT_EQ(report.failed(), 1);
  char* text = nullptr;
  size_t size = 0;
  std::FILE* out = open_memstream(&text, &size);
  PrintTable(report.rows(), false, out);
  std::fclose(out);
  const std::string printed(text, size);
  free(text);
  EXPECT_NE(printed.find("b      -      -   -     FAIL   why"), std::string::npos) << printed;
  EXPECT_EQ(printed.substr(printed.rfind('\n', printed.size() - 2) + 1), "1 passed, 1 failed\n");
}

}  // namespace
}  // namespace dist::conformance
