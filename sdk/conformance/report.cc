#include "sdk/conformance/report.h"

#include <algorithm>
#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"

namespace dist::conformance {
namespace {

std::string Clean(const std::string& text) {
  return absl::StrReplaceAll(text, {{"\t", " "}, {"\n", " "}, {"\r", " "}});
}

int Count(const std::vector<Row>& rows, Outcome outcome) {
  return static_cast<int>(
      std::count_if(rows.begin(), rows.end(), [&](const Row& r) { return r.outcome == outcome; }));
}

}  // namespace

const char* OutcomeName(Outcome outcome) {
  switch (outcome) {
    case Outcome::kPass:
      return "PASS";
    case Outcome::kFail:
      return "FAIL";
    case Outcome::kSkip:
      return "SKIP";
  }
  return "?";
}

Report::Report(std::string path) {
  if (!path.empty()) file_ = std::fopen(path.c_str(), "w");
}

Report::~Report() {
  if (file_ != nullptr) std::fclose(file_);
}

void Report::Add(Row row) {
  if (file_ != nullptr) {
    const std::string line = FormatRow(row) + "\n";
    std::fputs(line.c_str(), file_);
    std::fflush(file_);
  }
  rows_.push_back(std::move(row));
}

void Report::Note(const std::string& section) {
  if (file_ == nullptr) return;
  std::fprintf(file_, "# section %s\n", Clean(section).c_str());
  std::fflush(file_);
}

std::string LastSection(const std::string& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line)) {
    if (line.rfind("# section ", 0) == 0) last = line.substr(10);
  }
  return last;
}

int Report::failed() const { return Count(rows_, Outcome::kFail); }
int Report::passed() const { return Count(rows_, Outcome::kPass); }

std::string FormatRow(const Row& row) {
  return absl::StrCat(Clean(row.check), "\t", Clean(row.dtype), "\t", Clean(row.op), "\t",
                      Clean(row.size), "\t", OutcomeName(row.outcome), "\t", Clean(row.detail));
}

absl::StatusOr<Row> ParseRow(const std::string& line) {
  std::vector<std::string> parts = absl::StrSplit(line, '\t');
  if (parts.size() != 6) {
    return absl::DataLossError(absl::StrCat("bad result line (want 6 fields): ", line));
  }
  Row row{parts[0], parts[1], parts[2], parts[3], Outcome::kPass, parts[5]};
  if (parts[4] == "FAIL") {
    row.outcome = Outcome::kFail;
  } else if (parts[4] == "SKIP") {
    row.outcome = Outcome::kSkip;
  } else if (parts[4] != "PASS") {
    return absl::DataLossError(absl::StrCat("bad outcome '", parts[4], "' in: ", line));
  }
  return row;
}

absl::StatusOr<std::vector<Row>> ReadRows(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("no results file ", path));
  std::vector<Row> rows;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    absl::StatusOr<Row> row = ParseRow(line);
    if (!row.ok()) return row.status();
    rows.push_back(*std::move(row));
  }
  return rows;
}

std::vector<Row> MergeRanks(const std::vector<std::vector<Row>>& per_rank) {
  size_t longest = 0;
  for (const auto& rows : per_rank) longest = std::max(longest, rows.size());
  std::vector<Row> merged;
  for (size_t i = 0; i < longest; ++i) {
    Row row;
    bool have = false;
    std::vector<std::string> failures;
    bool all_skip = true;
    for (size_t r = 0; r < per_rank.size(); ++r) {
      if (i >= per_rank[r].size()) {
        failures.push_back(absl::StrCat("rank ", r, ": did not get here (crashed or timed out)"));
        all_skip = false;
        continue;
      }
      const Row& mine = per_rank[r][i];
      if (!have) {
        row = mine;
        have = true;
      }
      if (mine.outcome == Outcome::kFail) {
        failures.push_back(absl::StrCat("rank ", r, ": ", mine.detail));
      }
      if (mine.outcome != Outcome::kSkip) all_skip = false;
    }
    if (!failures.empty()) {
      row.outcome = Outcome::kFail;
      row.detail = failures.front();
      if (failures.size() > 1)
        absl::StrAppend(&row.detail, " (and ", failures.size() - 1, " more ranks)");
    } else if (all_skip) {
      row.outcome = Outcome::kSkip;
    } else {
      row.outcome = Outcome::kPass;
    }
    merged.push_back(std::move(row));
  }
  return merged;
}

void PrintTable(const std::vector<Row>& rows, bool only_failures, std::FILE* out) {
  size_t w_check = 5, w_dtype = 5, w_op = 2, w_size = 4;
  for (const Row& r : rows) {
    w_check = std::max(w_check, r.check.size());
    w_dtype = std::max(w_dtype, r.dtype.size());
    w_op = std::max(w_op, r.op.size());
    w_size = std::max(w_size, r.size.size());
  }
  auto line = [&](const std::string& c, const std::string& d, const std::string& o,
                  const std::string& s, const std::string& result, const std::string& detail) {
    std::fprintf(out, "%-*s  %-*s  %-*s  %-*s  %-6s %s\n", static_cast<int>(w_check), c.c_str(),
                 static_cast<int>(w_dtype), d.c_str(), static_cast<int>(w_op), o.c_str(),
                 static_cast<int>(w_size), s.c_str(), result.c_str(), detail.c_str());
  };
  line("check", "dtype", "op", "size", "result", "");
  for (const Row& r : rows) {
    if (only_failures && r.outcome != Outcome::kFail) continue;
    line(r.check, r.dtype, r.op, r.size, OutcomeName(r.outcome), r.detail);
  }
  const int skipped = Count(rows, Outcome::kSkip);
  if (skipped > 0) std::fprintf(out, "(%d skipped)\n", skipped);
  std::fprintf(out, "%d passed, %d failed\n", Count(rows, Outcome::kPass),
               Count(rows, Outcome::kFail));
  std::fflush(out);
}

}  // namespace dist::conformance
