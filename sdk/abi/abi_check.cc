// abi_check: fails when the ABI drifted from the checked-in description
// (--expected) or is no longer a compatible extension of a frozen release
// (--baseline), and says what changed and what to do.
//
//   abi_check --actual=now.txt --expected=sdk/abi/abi_v1.txt
//   abi_check --actual=now.txt --baseline=v1_0.txt --baseline_name="ABI 1.0"
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "sdk/abi/abi_diff.h"

ABSL_FLAG(std::string, actual, "", "description of the headers and libdist.so being checked");
ABSL_FLAG(std::string, expected, "", "the checked-in description (must match exactly)");
ABSL_FLAG(std::string, expected_label, "sdk/abi/abi_v1.txt", "how to name --expected");
ABSL_FLAG(std::string, baseline, "", "a frozen release's description (must stay compatible)");
ABSL_FLAG(std::string, baseline_name, "the frozen ABI", "how to name --baseline");

namespace {

bool Load(const std::string& path, std::vector<dist::abi::Item>* items) {
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "abi_check: cannot read %s\n", path.c_str());
    return false;
  }
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<std::vector<dist::abi::Item>> parsed = dist::abi::ParseDescription(text.str());
  if (!parsed.ok()) {
    std::fprintf(stderr, "abi_check: %s: %s\n", path.c_str(), parsed.status().ToString().c_str());
    return false;
  }
  *items = *std::move(parsed);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("checks the dist ABI against its description; see sdk/ABI.md");
  absl::ParseCommandLine(argc, argv);
  std::vector<dist::abi::Item> actual;
  if (!Load(absl::GetFlag(FLAGS_actual), &actual)) return 2;
  int failures = 0;
  if (!absl::GetFlag(FLAGS_expected).empty()) {
    std::vector<dist::abi::Item> expected;
    if (!Load(absl::GetFlag(FLAGS_expected), &expected)) return 2;
    const std::string message = dist::abi::ExplainDrift(dist::abi::Compare(expected, actual),
                                                        absl::GetFlag(FLAGS_expected_label));
    if (!message.empty()) {
      std::fprintf(stderr, "%s", message.c_str());
      ++failures;
    } else {
      std::printf("ABI matches %s\n", absl::GetFlag(FLAGS_expected_label).c_str());
    }
  }
  if (!absl::GetFlag(FLAGS_baseline).empty()) {
    std::vector<dist::abi::Item> baseline;
    if (!Load(absl::GetFlag(FLAGS_baseline), &baseline)) return 2;
    const std::string message = dist::abi::ExplainIncompatibility(
        dist::abi::Compare(baseline, actual), absl::GetFlag(FLAGS_baseline_name));
    if (!message.empty()) {
      std::fprintf(stderr, "%s", message.c_str());
      ++failures;
    } else {
      std::printf("ABI is a compatible extension of %s\n",
                  absl::GetFlag(FLAGS_baseline_name).c_str());
    }
  }
  return failures == 0 ? 0 : 1;
}
