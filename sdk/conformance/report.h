// dist conformance kit: the results table. Each rank records one row per
// check, in the same order on every rank; the launcher merges the ranks'
// rows (a check fails if it failed on any rank) and prints the table.
#ifndef DIST_SDK_CONFORMANCE_REPORT_H_
#define DIST_SDK_CONFORMANCE_REPORT_H_

#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace dist::conformance {

enum class Outcome { kPass, kFail, kSkip };

struct Row {
  std::string check;  // e.g. "reduce root=1 in-place"
  std::string dtype;  // "-" when not applicable
  std::string op;
  std::string size;
  Outcome outcome = Outcome::kPass;
  std::string detail;  // why it failed or was skipped; "rank 2: ..." once merged
};

const char* OutcomeName(Outcome outcome);

class Report {
 public:
  // Rows are appended to `path` as they are recorded (so a crash still leaves
  // the rows before it); "" keeps them in memory only.
  explicit Report(std::string path = "");
  ~Report();

  void Add(Row row);
  // Marks the start of a section in the file ("# section NAME"), so that a
  // rank that dies mid-section can be named with it.
  void Note(const std::string& section);
  const std::vector<Row>& rows() const { return rows_; }
  int failed() const;
  int passed() const;

 private:
  std::vector<Row> rows_;
  std::FILE* file_ = nullptr;
};

// One row as a tab-separated line, and back.
std::string FormatRow(const Row& row);
absl::StatusOr<Row> ParseRow(const std::string& line);
absl::StatusOr<std::vector<Row>> ReadRows(const std::string& path);
// The last section a results file noted; "" if none.
std::string LastSection(const std::string& path);

// Merges the ranks' rows. Rows match by position; a rank that has fewer rows
// (it crashed or timed out) fails the rows it is missing.
std::vector<Row> MergeRanks(const std::vector<std::vector<Row>>& per_rank);

// Prints the table (failures only when `only_failures`) and the final line
// "N passed, N failed".
void PrintTable(const std::vector<Row>& rows, bool only_failures, std::FILE* out);

}  // namespace dist::conformance

#endif  // DIST_SDK_CONFORMANCE_REPORT_H_
