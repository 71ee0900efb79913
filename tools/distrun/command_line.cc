#include "tools/distrun/command_line.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace dist::distrun {
namespace {

// "-n" -> "nproc_per_node", "node-rank" -> "node_rank".
std::string NormalizeName(absl::string_view name) {
  if (name == "n") return "nproc_per_node";
  std::string out(name);
  std::replace(out.begin(), out.end(), '-', '_');
  return out;
}

}  // namespace

SplitCommandLine SplitArgs(const std::vector<std::string>& args,
                           const std::function<bool(absl::string_view)>& takes_value) {
  SplitCommandLine split;
  if (args.empty()) return split;
  split.own.push_back(args[0]);
  size_t i = 1;
  for (; i < args.size(); ++i) {
    absl::string_view arg = args[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') break;  // the program
    absl::string_view body = arg.substr(arg[1] == '-' ? 2 : 1);
    size_t eq = body.find('=');
    std::string name = NormalizeName(body.substr(0, eq));
    if (eq != absl::string_view::npos) {
      split.own.push_back(absl::StrCat("--", name, body.substr(eq)));
      continue;
    }
    split.own.push_back(absl::StrCat("--", name));
    if (takes_value(name) && i + 1 < args.size()) {
      split.own.push_back(args[++i]);
    }
  }
  for (; i < args.size(); ++i) split.program.push_back(args[i]);
  return split;
}

}  // namespace dist::distrun
