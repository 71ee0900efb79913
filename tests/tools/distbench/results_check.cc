// Checks distbench's files for distbench_test.sh (so the test needs no
// Python): the JSON and CSV of a run, and a free loopback port for mpirun.
//
//   results_check free_port
//   results_check all RUN.json RUN.csv TABLE_ROWS
//   results_check baseline RUN.json
//   results_check ceiling RUN.json
//
// Prints what is wrong and exits 1, or exits 0.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "support/free_port.h"

namespace {

int failures = 0;

void Expect(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "results_check: %s\n", what.c_str());
    ++failures;
  }
}

nlohmann::json Load(const std::string& path) {
  std::ifstream in(path);
  nlohmann::json doc = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.contains("results")) {
    std::fprintf(stderr, "results_check: %s is not a distbench JSON file\n", path.c_str());
    std::exit(1);
  }
  return doc;
}

int FreePort() {
  absl::StatusOr<int> port = dist::PickFreePort();
  if (!port.ok()) return 1;
  std::printf("%d\n", *port);
  return 0;
}

std::vector<nlohmann::json> OfOp(const nlohmann::json& doc, const std::string& op) {
  std::vector<nlohmann::json> rows;
  for (const nlohmann::json& r : doc["results"]) {
    if (r["op"] == op) rows.push_back(r);
  }
  return rows;
}

bool Near(double a, double b) { return std::fabs(a - b) <= 1e-9 * std::max(1.0, std::fabs(b)); }

// --op all -b 8 -e 64K on 2 ranks with --check.
int CheckAll(const std::string& json_path, const std::string& csv_path, int table_rows) {
  const nlohmann::json doc = Load(json_path);
  const nlohmann::json& results = doc["results"];
  Expect(doc["backend"] == "gloo", "backend is not gloo");
  Expect(doc["world_size"] == 2, "world_size is not 2");
  Expect(static_cast<int>(results.size()) == table_rows, "JSON rows differ from the table's");
  // dist_init counted from the last rank's call can be no longer than the
  // slowest rank's whole dist_init, and no shorter than nothing. It is a
  // difference of milliseconds since the epoch (about 1.7e12, which a
  // double holds to 2.4e-4 ms), so it may exceed init_ms by that much: a
  // run failed with 29.344482 against 29.344439 at a 1e-6 tolerance.
  const double init_ms = doc["init_ms"];
  const double after_last = doc["init_ms_after_last_call"];
  Expect(init_ms > 0 && after_last >= -1e-3 && after_last <= init_ms + 1e-3,
         "init_ms_after_last_call " + std::to_string(after_last) + " is not within 0.." +
             std::to_string(init_ms));

  // all_reduce of float32 from 8 B to 64 KiB by 2: 14 sizes, 2 elements up.
  const std::vector<nlohmann::json> ar = OfOp(doc, "all_reduce");
  Expect(ar.size() == 14, "all_reduce does not have 14 sizes");
  for (size_t i = 0; i < ar.size(); ++i) {
    Expect(ar[i]["size"] == (uint64_t{8} << i), "all_reduce size " + std::to_string(i));
    Expect(ar[i]["count"] == (uint64_t{2} << i), "all_reduce count " + std::to_string(i));
    // busbw = algbw * 2(n-1)/n = algbw on 2 ranks.
    Expect(Near(ar[i]["busbw_gbps"], ar[i]["algbw_gbps"]), "all_reduce busbw != algbw");
  }
  // all_gather: size is the gathered buffer (8 B: one float per rank);
  // busbw = algbw / 2.
  const std::vector<nlohmann::json> ag = OfOp(doc, "all_gather");
  Expect(!ag.empty() && ag[0]["size"] == 8 && ag[0]["count"] == 2, "all_gather's first row");
  for (const nlohmann::json& r : ag) {
    Expect(Near(r["busbw_gbps"], r["algbw_gbps"].get<double>() / 2), "all_gather busbw");
  }
  for (const nlohmann::json& r : results) {
    Expect(r["wrong"] == 0, "a row has wrong elements: " + r.dump());
    Expect(r["time_us"].get<double>() > 0, "a row has no time: " + r.dump());
    if (r["op"] != "barrier") Expect(r["busbw_gbps"].get<double>() > 0, "no busbw: " + r.dump());
  }

  std::ifstream csv(csv_path);
  std::string line;
  std::getline(csv, line);
  Expect(line.rfind("backend,world_size,op,size_bytes,count,", 0) == 0, "CSV header: " + line);
  size_t row = 0;
  while (std::getline(csv, line)) {
    const std::vector<std::string> cells = absl::StrSplit(line, ',');
    Expect(cells.size() == 17, "CSV line without 17 cells: " + line);
    if (cells.size() != 17 || row >= results.size()) break;
    uint64_t size = 0;
    Expect(cells[2] == results[row]["op"].get<std::string>(), "CSV op differs: " + line);
    Expect(absl::SimpleAtoi(cells[3], &size) && size == results[row]["size"], "CSV size: " + line);
    Expect(cells[11] == "0", "CSV wrong is not 0: " + line);
    ++row;
  }
  Expect(static_cast<int>(row) == table_rows, "CSV rows differ from the table's");
  return failures == 0 ? 0 : 1;
}

int CheckBaseline(const std::string& json_path) {
  const nlohmann::json doc = Load(json_path);
  Expect(doc["baseline"].is_object() && doc["baseline"]["name"] == "gloo", "baseline is not gloo");
  for (const nlohmann::json& r : doc["results"]) {
    Expect(r.contains("raw"), "a row has no raw result: " + r.dump());
    if (!r.contains("raw")) continue;
    const nlohmann::json& raw = r["raw"];
    Expect(raw["wrong"] == 0 && raw["time_us"].get<double>() > 0, "raw row: " + r.dump());
    // Ratios are medians of per-round ratios; busbw's is the inverse of time's.
    const double time_ratio = raw["time_ratio"];
    Expect(time_ratio > 0, "time_ratio: " + r.dump());
    Expect(std::fabs(raw["busbw_ratio"].get<double>() * time_ratio - 1) < 1e-9, "busbw_ratio");
    // Every raw variant was timed and the row's baseline is the fastest.
    const nlohmann::json& variants = raw["variants_us"];
    Expect(variants.is_object() && !variants.empty(), "no raw variants: " + r.dump());
    if (r["op"] == "all_reduce") {
      Expect(variants.size() >= 6, "all_reduce is not compared with every Gloo algorithm");
    }
    double fastest = 0;
    std::string fastest_name;
    for (const auto& [name, us] : variants.items()) {
      if (fastest_name.empty() || us.get<double>() < fastest) {
        fastest = us.get<double>();
        fastest_name = name;
      }
    }
    Expect(raw["variant"] == fastest_name, "raw variant is not the fastest: " + r.dump());
    Expect(std::fabs(raw["time_us"].get<double>() - fastest) < 1e-6 * fastest, "raw time_us");
  }
  return failures == 0 ? 0 : 1;
}

// --op all_reduce,all_gather,barrier on 2 ranks with --ceiling.
int CheckCeiling(const std::string& json_path) {
  const nlohmann::json doc = Load(json_path);
  Expect(doc["ceiling"].is_object() && doc["ceiling"]["name"] == "loopback_tcp" &&
             doc["ceiling"]["description"].is_string(),
         "the run does not name the loopback ceiling: " + doc["ceiling"].dump());
  int measured = 0;
  for (const nlohmann::json& r : doc["results"]) {
    if (r["op"] == "barrier") {
      Expect(!r.contains("ceiling") && r.value("ceiling_skipped", "") == "moves no bytes",
             "a barrier has a ceiling: " + r.dump());
      continue;
    }
    Expect(r.contains("ceiling"), "a row has no ceiling: " + r.dump());
    if (!r.contains("ceiling")) continue;
    const nlohmann::json& ceiling = r["ceiling"];
    ++measured;
    const double time_us = ceiling["time_us"];
    const double busbw = ceiling["busbw_gbps"];
    Expect(ceiling["name"] == "loopback_tcp" && time_us > 0 && busbw > 0,
           "ceiling row: " + r.dump());
    // Each rank moved busbw's bytes: size x 1 for all_reduce on 2 ranks,
    // size x 1/2 for all_gather; busbw is those bytes over the time.
    const double factor = r["op"] == "all_reduce" ? 1.0 : 0.5;
    Expect(std::fabs(busbw * time_us * 1e3 / (r["size"].get<double>() * factor) - 1) < 1e-6,
           "ceiling busbw is not its bytes over its time: " + r.dump());
    Expect(ceiling["fraction"].is_number() && ceiling["fraction"].get<double>() > 0,
           "no fraction: " + r.dump());
  }
  Expect(measured == 4, "expected 4 rows with a ceiling, got " + std::to_string(measured));
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  int rows = 0;
  if (args.size() == 1 && args[0] == "free_port") return FreePort();
  if (args.size() == 4 && args[0] == "all" && absl::SimpleAtoi(args[3], &rows)) {
    return CheckAll(args[1], args[2], rows);
  }
  if (args.size() == 2 && args[0] == "baseline") return CheckBaseline(args[1]);
  if (args.size() == 2 && args[0] == "ceiling") return CheckCeiling(args[1]);
  std::fprintf(
      stderr,
      "usage: results_check free_port | all JSON CSV ROWS | baseline JSON | ceiling JSON\n");
  return 2;
}
