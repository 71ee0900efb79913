#include "plugins/backends/gloo/device.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <exception>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gloo/transport/tcp/device.h"

namespace dist_gloo {

std::string FindOption(const dist_comm_config_t& config, const char* key) {
  for (size_t i = 0; i < config.num_options; ++i) {
    const dist_kv_t& kv = config.options[i];
    if (kv.key != nullptr && kv.value != nullptr && std::strcmp(kv.key, key) == 0) return kv.value;
  }
  return "";
}

namespace {

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

std::string ThisHostName() {
  char name[256] = {0};
  if (gethostname(name, sizeof(name) - 1) != 0) return "";
  return name;
}

}  // namespace

absl::StatusOr<std::shared_ptr<gloo::transport::Device>> CreateDevice(
    const dist_comm_config_t& config, std::string* description) {
  gloo::transport::tcp::attr attr;
  std::string source;
  if (std::string ifname = FindOption(config, "gloo.ifname"); !ifname.empty()) {
    attr.iface = ifname;
    source = "option gloo.ifname";
  } else if (std::string env_ifname = Env("DIST_GLOO_IFNAME"); !env_ifname.empty()) {
    attr.iface = env_ifname;
    source = "DIST_GLOO_IFNAME";
  } else if (std::string host = FindOption(config, "gloo.hostname"); !host.empty()) {
    attr.hostname = host;
    source = "option gloo.hostname";
  } else if (std::string env_host = Env("DIST_GLOO_HOSTNAME"); !env_host.empty()) {
    attr.hostname = env_host;
    source = "DIST_GLOO_HOSTNAME";
  } else if (config.local_world_size > 0 && config.local_world_size == config.world_size) {
    // Every rank is on this host: loopback is always there and fastest.
    attr.hostname = "127.0.0.1";
    source = "loopback, all ranks on this host";
  } else {
    attr.hostname = ThisHostName();
    source = "this host's name";
    if (attr.hostname.empty()) attr.hostname = "127.0.0.1";
  }
  try {
    std::shared_ptr<gloo::transport::Device> device = gloo::transport::tcp::CreateDevice(attr);
    *description = absl::StrCat(device->str(), " (", source, ")");
    return device;
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat(
        "Gloo cannot open a TCP device on ",
        attr.iface.empty() ? absl::StrCat("host '", attr.hostname, "'")
                           : absl::StrCat("interface '", attr.iface, "'"),
        " (from ", source, "): ", e.what(),
        "; set DIST_GLOO_IFNAME to an interface that reaches the other ranks (e.g. eth0, or lo on one host)"));
  }
}

}  // namespace dist_gloo
