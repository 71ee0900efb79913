// libFuzzer target: configuration resolution (core/config.*). The input
// becomes a TOML config file (DIST_CONFIG) resolved with dist_init's
// precedence; its first line is also tried as a device map and a timeout.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/config.h"
#include "dist/dist.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = [] {
    const char* dir = getenv("TMPDIR");
    return absl::StrCat(dir ? dir : "/tmp", "/dist_config_fuzz.", getpid(), ".toml");
  }();
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
  dist_init_options_t options = dist_init_options_default();
  options.config_file = path.c_str();
  (void)dist::ResolveConfig(&options);
  const std::string line = text.substr(0, text.find('\n'));
  (void)dist::ParseDeviceMap(line, "fuzz");
  (void)dist::ParseTimeout(line, "fuzz");
  return 0;
}
