#include "tools/distbench/report.h"

#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace distbench {
namespace {

std::string RootText(const Case& c) { return c.op->rooted ? absl::StrCat(c.root) : "-1"; }
std::string RedopText(const Case& c) {
  return c.op->reduces ? dist_reduce_op_name(c.redop) : "none";
}
std::string WrongText(int64_t wrong) { return wrong < 0 ? "N/A" : absl::StrCat(wrong); }
// 0 means undefined (a barrier moves no bytes, so it has no busbw ratio).
std::string RatioText(double ratio) {
  return ratio > 0 ? absl::StrFormat("%.3f", ratio) : std::string("-");
}
nlohmann::json RatioJson(double ratio) {
  return ratio > 0 ? nlohmann::json(ratio) : nlohmann::json(nullptr);
}

}  // namespace

void TablePrinter::PrintHeader() {
  absl::FPrintF(out_, "# distbench: dist %s, backend %s", info_.dist_version, info_.backend);
  if (!info_.backend_version.empty()) absl::FPrintF(out_, " %s", info_.backend_version);
  if (!info_.library_version.empty()) {
    // "Open MPI v4.1.4, package: Debian OpenMPI, ..." -> "Open MPI v4.1.4".
    const std::string library = info_.library_version.substr(0, info_.library_version.find(','));
    absl::FPrintF(out_, " on %s", library);
  }
  absl::FPrintF(out_, "\n# world size %d, host %s, device %s, init %s\n", info_.world_size,
                info_.host, info_.device, info_.init_method);
  if (info_.init_ms_max >= 0) {
    absl::FPrintF(out_, "# dist_init %.1f ms (slowest rank), %.1f ms (fastest)", info_.init_ms_max,
                  info_.init_ms_min);
    if (info_.init_ms_after_last_call >= 0) {
      absl::FPrintF(out_, ", %.1f ms after the last rank called it", info_.init_ms_after_last_call);
    }
    absl::FPrintF(out_, "\n");
  }
  absl::FPrintF(out_, "# warmup %d, iters %d x %d rounds (median round, slowest rank), check %s\n",
                info_.warmup, info_.iters, info_.rounds, info_.check ? "on" : "off");
  if (!info_.baseline.empty()) {
    absl::FPrintF(out_,
                  "# baseline: %s, same processes; each round times the plugin and every "
                  "raw variant, starting one later each round; raw = the fastest variant by "
                  "median (raw_fastest); ratio = plugin / raw, median of per-round ratios\n",
                  info_.baseline_library);
  } else if (info_.baseline_requested) {
    absl::FPrintF(out_, "# baseline: skipped: %s\n", info_.baseline_skipped);
  }
  if (with_ceiling()) {
    absl::FPrintF(out_,
                  "# ceiling: %s (%s), same rounds; each rank moves busbw's bytes; tcp_busbw its "
                  "busbw, of_tcp = plugin busbw / tcp_busbw, median of per-round ratios\n",
                  kCeilingName, info_.ceiling);
  } else if (info_.ceiling_requested) {
    absl::FPrintF(out_, "# ceiling: skipped: %s\n", info_.ceiling_skipped);
  }
  absl::FPrintF(out_, "# %s\n", info_.date);
  std::fflush(out_);
}

void TablePrinter::BeginOp(const OpInfo& op) {
  absl::FPrintF(out_, "#\n# %s\n", op.name);
  absl::FPrintF(out_, "# %12s %12s %9s %7s %5s %11s %11s %11s %7s", "size(B)", "count", "type",
                "redop", "root", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong");
  // Before the raw columns, whose last one may be free text.
  if (with_ceiling()) absl::FPrintF(out_, " %11s %7s", "tcp_busbw", "of_tcp");
  if (with_raw()) {
    absl::FPrintF(out_, " %11s %11s %10s %11s  %s", "raw_us", "raw_busbw", "time_ratio",
                  "busbw_ratio", "raw_fastest");
  }
  absl::FPrintF(out_, "\n");
  std::fflush(out_);
}

void TablePrinter::PrintRow(const Row& row) {
  const Case& c = row.c;
  absl::FPrintF(out_, "  %12d %12d %9s %7s %5s %11.2f %11.3f %11.3f %7s", c.bytes(), c.count(),
                dist_dtype_name(c.dtype), RedopText(c), RootText(c), row.plugin.time_us,
                row.plugin.algbw, row.plugin.busbw, WrongText(row.plugin.wrong));
  if (with_ceiling()) {
    if (row.ceiling.has_value()) {
      absl::FPrintF(out_, " %11.3f %7s", row.ceiling->busbw, RatioText(row.ceiling_fraction));
    } else {
      absl::FPrintF(out_, " %11s %7s", "-", "-");
    }
  }
  if (with_raw()) {
    if (row.raw.has_value()) {
      const Measurement& raw = *row.raw;
      absl::FPrintF(out_, " %11.2f %11.3f %10s %11s  %s", raw.time_us, raw.busbw,
                    RatioText(row.time_ratio), RatioText(row.busbw_ratio),
                    row.raw_variant.empty() ? "-" : row.raw_variant);
      if (raw.wrong > 0) absl::FPrintF(out_, "  (raw #wrong %d)", raw.wrong);
    } else {
      absl::FPrintF(out_, "  raw skipped: %s", row.raw_skipped);
    }
  }
  absl::FPrintF(out_, "\n");
  std::fflush(out_);
}

void TablePrinter::PrintSkipped(const OpInfo& op, const std::string& reason) {
  absl::FPrintF(out_, "#\n# %s: skipped: %s\n", op.name, reason);
  std::fflush(out_);
}

void TablePrinter::PrintFooter(const std::vector<Row>& rows) {
  double busbw = 0;
  int64_t wrong = 0;
  int counted = 0;
  bool checked = false;
  for (const Row& row : rows) {
    if (row.c.op->op == Op::kBarrier) continue;
    busbw += row.plugin.busbw;
    ++counted;
    if (row.plugin.wrong >= 0) {
      checked = true;
      wrong += row.plugin.wrong;
    }
  }
  absl::FPrintF(out_, "#\n# Out of bounds values : %s\n",
                checked ? absl::StrCat(wrong, wrong == 0 ? " OK" : " FAILED") : "N/A (no --check)");
  absl::FPrintF(out_, "# Avg bus bandwidth    : %.3f GB/s\n", counted ? busbw / counted : 0.0);
  std::fflush(out_);
}

nlohmann::json ToJson(const RunInfo& info, const std::vector<Row>& rows) {
  nlohmann::json results = nlohmann::json::array();
  for (const Row& row : rows) {
    const Case& c = row.c;
    nlohmann::json r = {
        {"op", c.op->name},
        {"size", c.bytes()},
        {"count", c.count()},
        {"dtype", dist_dtype_name(c.dtype)},
        {"redop", RedopText(c)},
        {"root", c.op->rooted ? c.root : -1},
        {"time_us", row.plugin.time_us},
        {"algbw_gbps", row.plugin.algbw},
        {"busbw_gbps", row.plugin.busbw},
        {"wrong",
         row.plugin.wrong < 0 ? nlohmann::json(nullptr) : nlohmann::json(row.plugin.wrong)},
    };
    if (row.raw.has_value()) {
      r["raw"] = {
          {"time_us", row.raw->time_us},
          {"algbw_gbps", row.raw->algbw},
          {"busbw_gbps", row.raw->busbw},
          {"wrong", row.raw->wrong < 0 ? nlohmann::json(nullptr) : nlohmann::json(row.raw->wrong)},
          {"time_ratio", RatioJson(row.time_ratio)},
          {"busbw_ratio", RatioJson(row.busbw_ratio)},
          {"variant", row.raw_variant},
      };
      nlohmann::json variants = nlohmann::json::object();
      for (const auto& [name, us] : row.raw_variant_us) variants[name] = us;
      r["raw"]["variants_us"] = variants;
    } else if (!row.raw_skipped.empty()) {
      r["raw_skipped"] = row.raw_skipped;
    }
    if (row.ceiling.has_value()) {
      r["ceiling"] = {
          {"name", kCeilingName},
          {"time_us", row.ceiling->time_us},
          {"algbw_gbps", row.ceiling->algbw},
          {"busbw_gbps", row.ceiling->busbw},
          {"fraction", RatioJson(row.ceiling_fraction)},
      };
    } else if (!row.ceiling_skipped.empty()) {
      r["ceiling_skipped"] = row.ceiling_skipped;
    }
    results.push_back(std::move(r));
  }
  nlohmann::json baseline = nullptr;
  if (!info.baseline.empty()) {
    baseline = {{"name", info.baseline}, {"library", info.baseline_library}};
  } else if (info.baseline_requested) {
    baseline = {{"skipped", info.baseline_skipped}};
  }
  nlohmann::json ceiling = nullptr;
  if (!info.ceiling.empty()) {
    ceiling = {{"name", kCeilingName}, {"description", info.ceiling}};
  } else if (info.ceiling_requested) {
    ceiling = {{"skipped", info.ceiling_skipped}};
  }
  return {
      {"tool", "distbench"},
      {"dist_version", info.dist_version},
      {"backend", info.backend},
      {"backend_version", info.backend_version},
      {"library_version", info.library_version},
      {"init_method", info.init_method},
      {"device", info.device},
      {"host", info.host},
      {"world_size", info.world_size},
      {"warmup", info.warmup},
      {"iters", info.iters},
      {"rounds", info.rounds},
      {"check", info.check},
      {"baseline", baseline},
      {"ceiling", ceiling},
      {"date", info.date},
      {"init_ms", info.init_ms_max},
      {"init_ms_after_last_call", info.init_ms_after_last_call},
      {"results", results},
  };
}

absl::Status WriteJson(const std::string& path, const RunInfo& info, const std::vector<Row>& rows) {
  std::ofstream out(path);
  out << ToJson(info, rows).dump(2) << "\n";
  out.close();
  if (!out) return absl::UnavailableError(absl::StrCat("cannot write --json file ", path));
  return absl::OkStatus();
}

absl::Status WriteCsv(const std::string& path, const RunInfo& info, const std::vector<Row>& rows) {
  std::ofstream out(path);
  out << "backend,world_size,op,size_bytes,count,dtype,redop,root,time_us,algbw_gbps,busbw_gbps,"
         "wrong,raw_time_us,raw_busbw_gbps,time_ratio,busbw_ratio,raw_variant\n";
  for (const Row& row : rows) {
    const Case& c = row.c;
    out << absl::StrFormat("%s,%d,%s,%d,%d,%s,%s,%s,%.3f,%.4f,%.4f,%s", info.backend,
                           info.world_size, c.op->name, c.bytes(), c.count(),
                           dist_dtype_name(c.dtype), RedopText(c), RootText(c), row.plugin.time_us,
                           row.plugin.algbw, row.plugin.busbw,
                           row.plugin.wrong < 0 ? "" : absl::StrCat(row.plugin.wrong));
    if (row.raw.has_value()) {
      out << absl::StrFormat(",%.3f,%.4f,%s,%s", row.raw->time_us, row.raw->busbw,
                             row.time_ratio > 0 ? absl::StrFormat("%.4f", row.time_ratio) : "",
                             row.busbw_ratio > 0 ? absl::StrFormat("%.4f", row.busbw_ratio) : "");
      out << "," << row.raw_variant;
    } else {
      out << ",,,,,";
    }
    out << "\n";
  }
  out.close();
  if (!out) return absl::UnavailableError(absl::StrCat("cannot write --csv file ", path));
  return absl::OkStatus();
}

absl::StatusOr<nlohmann::json> ReadJson(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  nlohmann::json data = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (data.is_discarded()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is not JSON; pass files written by distbench --json"));
  }
  if (!data.is_object() || !data.contains("results") || !data["results"].is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " has no \"results\" array; pass files written by distbench --json"));
  }
  return data;
}

}  // namespace distbench
