#include "plugins/backends/gloo/device.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <exception>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "dist/cpp/store.hpp"
#include "gloo/transport/tcp/device.h"
#include "support/descriptors.h"
#include "support/slurm.h"
#include "support/url.h"

namespace dist_gloo {

std::string FindOption(const dist_comm_config_t& config, const char* key) {
  for (size_t i = 0; i < config.num_options; ++i) {
    const dist_kv_t& kv = config.options[i];
    if (kv.key != nullptr && kv.value != nullptr && std::strcmp(kv.key, key) == 0) return kv.value;
  }
  return "";
}

namespace {

// Where ranks on other hosts leave the address at which they reached the
// rendezvous host, for the ranks on that host that see it as loopback.
constexpr char kSeenAsKey[] = "rendezvous_host_address";

const char kFix[] =
    "set DIST_GLOO_IFNAME to the interface that reaches the other hosts (e.g. eth0)";

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

std::string ThisHostName() {
  char name[256] = {0};
  if (gethostname(name, sizeof(name) - 1) != 0) return "";
  return name;
}

bool IsLoopback(const sockaddr* address) {
  if (address->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(address);
    return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
  }
  if (address->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(address);
    if (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr)) return true;
    return IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr) && in6->sin6_addr.s6_addr[12] == 127;
  }
  return false;
}

std::string Text(const sockaddr* address) {
  char text[INET6_ADDRSTRLEN] = {0};
  const void* raw =
      address->sa_family == AF_INET
          ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in*>(address)->sin_addr)
          : static_cast<const void*>(&reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr);
  if (inet_ntop(address->sa_family, raw, text, sizeof(text)) == nullptr) return "";
  return text;
}

bool IsLoopbackText(const std::string& text) {
  sockaddr_storage storage{};
  auto* in = reinterpret_cast<sockaddr_in*>(&storage);
  auto* in6 = reinterpret_cast<sockaddr_in6*>(&storage);
  if (inet_pton(AF_INET, text.c_str(), &in->sin_addr) == 1) {
    in->sin_family = AF_INET;
  } else if (inet_pton(AF_INET6, text.c_str(), &in6->sin6_addr) == 1) {
    in6->sin6_family = AF_INET6;
  } else {
    return false;
  }
  return IsLoopback(reinterpret_cast<sockaddr*>(&storage));
}

struct Interface {
  std::string name;
  std::string address;
  bool loopback = false;
};

// Every address of an up interface, IPv4 first (Gloo and most clusters
// prefer it), without IPv6 link-local ones (they need a scope to be used).
std::vector<Interface> Interfaces() {
  std::vector<Interface> v4, v6;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return {};
  for (ifaddrs* entry = list; entry != nullptr; entry = entry->ifa_next) {
    if (entry->ifa_addr == nullptr || (entry->ifa_flags & IFF_UP) == 0) continue;
    const int family = entry->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    if (family == AF_INET6 &&
        IN6_IS_ADDR_LINKLOCAL(&reinterpret_cast<sockaddr_in6*>(entry->ifa_addr)->sin6_addr)) {
      continue;
    }
    Interface item{entry->ifa_name, Text(entry->ifa_addr),
                   (entry->ifa_flags & IFF_LOOPBACK) != 0 || IsLoopback(entry->ifa_addr)};
    (family == AF_INET ? v4 : v6).push_back(item);
  }
  freeifaddrs(list);
  v4.insert(v4.end(), v6.begin(), v6.end());
  return v4;
}

std::optional<Interface> InterfaceWithAddress(const std::string& address) {
  for (const Interface& item : Interfaces()) {
    if (item.address == address) return item;
  }
  return std::nullopt;
}

std::vector<sockaddr_storage> Resolve(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  std::vector<sockaddr_storage> addresses;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0) return addresses;
  for (addrinfo* entry = found; entry != nullptr; entry = entry->ai_next) {
    if (entry->ai_family != AF_INET && entry->ai_family != AF_INET6) continue;
    sockaddr_storage storage{};
    std::memcpy(&storage, entry->ai_addr, entry->ai_addrlen);
    addresses.push_back(storage);
  }
  freeaddrinfo(found);
  return addresses;
}

// The local address the kernel would use towards `destination`. Connecting
// a UDP socket only looks up the route; nothing is sent.
std::optional<std::string> RouteSource(sockaddr_storage destination) {
  socklen_t length = sizeof(sockaddr_in);
  if (destination.ss_family == AF_INET) {
    reinterpret_cast<sockaddr_in*>(&destination)->sin_port = htons(9);
  } else {
    reinterpret_cast<sockaddr_in6*>(&destination)->sin6_port = htons(9);
    length = sizeof(sockaddr_in6);
  }
  const int fd = socket(destination.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::nullopt;
  std::optional<std::string> source;
  sockaddr_storage local{};
  socklen_t local_length = sizeof(local);
  if (connect(fd, reinterpret_cast<sockaddr*>(&destination), length) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_length) == 0) {
    source = Text(reinterpret_cast<sockaddr*>(&local));
  }
  close(fd);
  return source;
}

struct Choice {
  std::string iface;    // Gloo binds to this interface's address when set
  std::string address;  // else to this address
  std::string source;   // why, for messages
};

// Step 4 of the header's order: what this host says about itself.
absl::StatusOr<Choice> HostChoice(bool spans_hosts) {
  const std::string name = ThisHostName();
  const std::vector<Interface> interfaces = Interfaces();
  for (const sockaddr_storage& resolved : Resolve(name)) {
    const sockaddr* address = reinterpret_cast<const sockaddr*>(&resolved);
    if (IsLoopback(address)) continue;
    for (const Interface& item : interfaces) {
      if (item.address == Text(address)) {
        return Choice{"", item.address, absl::StrCat("this host's name '", name, "'")};
      }
    }
  }
  // One address per interface, IPv4 first (Interfaces() lists it first).
  std::vector<Interface> candidates;
  for (const Interface& item : interfaces) {
    if (item.loopback) continue;
    bool seen = false;
    for (const Interface& other : candidates) seen = seen || other.name == item.name;
    if (!seen) candidates.push_back(item);
  }
  if (candidates.size() == 1) {
    return Choice{"", candidates[0].address,
                  absl::StrCat("the only interface besides loopback, ", candidates[0].name)};
  }
  if (candidates.empty() || !spans_hosts) {
    // Nothing says that other hosts take part (no LOCAL_WORLD_SIZE or
    // launcher variable): loopback works for ranks on this host.
    return Choice{"", "127.0.0.1",
                  candidates.empty() ? "loopback, this host has no other address"
                                     : "loopback, no rendezvous host to route towards and no "
                                       "sign of ranks on other hosts"};
  }
  std::vector<std::string> names;
  for (const Interface& item : candidates) names.push_back(item.name + " " + item.address);
  return absl::FailedPreconditionError(absl::StrCat(
      "this host's name '", name,
      "' does not resolve to an address of this host other "
      "than loopback, no rendezvous host is known (MASTER_ADDR or tcp://) to route towards, "
      "and there are several interfaces (",
      absl::StrJoin(names, ", "), "); ", kFix));
}

// Whether the ranks really run on several hosts. The launcher's
// local_world_size < world_size says so, but one machine may play several
// nodes (distrun --nnodes 2 twice with --master_addr 127.0.0.1), where
// loopback is right. So every rank of such a world announces its host name
// in the store: the first one is kept, a rank with another name marks the
// world as spanning, and each host counts its ranks.
constexpr char kFirstHostKey[] = "hosts/first";
constexpr char kSpanningKey[] = "hosts/spanning";
constexpr absl::Duration kPollSlice = absl::Milliseconds(50);

bool ClaimsToSpanHosts(const dist_comm_config_t& config) {
  return config.store != nullptr && config.local_world_size > 0 &&
         config.local_world_size < config.world_size;
}

std::string CountKey() { return absl::StrCat("hosts/count/", ThisHostName()); }

void AnnounceHost(const dist_comm_config_t& config) {
  const dist::StoreView store(config.store);
  const std::string host = ThisHostName();
  absl::StatusOr<std::string> first = store.CompareSet(kFirstHostKey, "", host);
  if (first.ok() && *first != host) (void)store.Set(kSpanningKey, host);
  (void)store.Add(CountKey(), 1);
}

// True once every rank of the world has counted itself on this host.
bool AllRanksOnThisHost(const dist_comm_config_t& config) {
  absl::StatusOr<int64_t> count = dist::StoreView(config.store).Add(CountKey(), 0);
  return count.ok() && *count >= config.world_size;
}

// Waits until the world is known to span hosts (true) or to run on this
// host alone (false).
absl::StatusOr<bool> SpansHosts(const dist_comm_config_t& config) {
  const dist::StoreView store(config.store);
  const absl::Time deadline = absl::Now() + absl::Milliseconds(config.timeout_ms);
  while (true) {
    absl::Status spanning = store.Wait({kSpanningKey}, kPollSlice);
    if (spanning.ok()) return true;
    if (AllRanksOnThisHost(config)) return false;
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("not every rank announced its host within ",
                       absl::FormatDuration(absl::Milliseconds(config.timeout_ms)),
                       "; check that every rank was started"));
    }
  }
}

absl::StatusOr<Choice> DefaultChoice(const dist_comm_config_t& config) {
  const bool spans_hosts =
      config.local_world_size > 0 && config.local_world_size < config.world_size;
  if (config.local_world_size > 0 && config.local_world_size == config.world_size) {
    // Every rank is on this host: loopback is always there and fastest.
    return Choice{"", "127.0.0.1", "loopback, all ranks on this host"};
  }
  std::string variable;
  const std::string host = RendezvousHost(config, &variable);
  if (host.empty()) return HostChoice(spans_hosts);
  const std::vector<sockaddr_storage> resolved = Resolve(host);
  if (resolved.empty()) return HostChoice(spans_hosts);  // the rendezvous reports the bad name
  const std::optional<std::string> source = RouteSource(resolved[0]);
  const std::string named = absl::StrCat(variable, " '", host, "'");
  if (source && !IsLoopbackText(*source)) {
    std::optional<Interface> item = InterfaceWithAddress(*source);
    return Choice{"", *source,
                  absl::StrCat("the route to the rendezvous host ", named,
                               item ? absl::StrCat(", interface ", item->name) : "")};
  }
  if (!source || !ClaimsToSpanHosts(config)) return HostChoice(spans_hosts);
  // The rendezvous host is this host, and its name resolves to loopback
  // here: the ranks on other hosts say at which address they reached it,
  // unless there are none (every rank counted on this host).
  const dist::StoreView store(config.store);
  const absl::Duration timeout = absl::Milliseconds(config.timeout_ms);
  const absl::Time deadline = absl::Now() + timeout;
  absl::Status waited = absl::OkStatus();
  while (true) {
    waited = store.Wait({kSeenAsKey}, kPollSlice);
    if (waited.ok()) break;
    if (AllRanksOnThisHost(config)) {
      return Choice{"", "127.0.0.1", "loopback, every rank counted itself on this host"};
    }
    if (absl::Now() >= deadline) break;
  }
  absl::StatusOr<std::string> seen_as =
      waited.ok() ? store.Get(kSeenAsKey, timeout) : absl::StatusOr<std::string>(waited);
  if (!seen_as.ok()) {
    return absl::Status(
        seen_as.status().code(),
        absl::StrCat("the rendezvous host ", named, " is this host and resolves to loopback (",
                     Text(reinterpret_cast<const sockaddr*>(&resolved[0])),
                     ") here, and no rank on another "
                     "host told within ",
                     absl::FormatDuration(timeout), " which address reached it (",
                     seen_as.status().message(), "); ", kFix));
  }
  std::optional<Interface> item = InterfaceWithAddress(*seen_as);
  if (!item) return HostChoice(spans_hosts);  // reached through NAT or a proxy: not ours to bind
  return Choice{"", *seen_as,
                absl::StrCat("the address at which the other hosts reach the rendezvous host ",
                             named, ", interface ", item->name)};
}

// Leaves the address at which this rank reaches the rendezvous host for
// the ranks on that host that see it as loopback (DefaultChoice); whatever
// this rank itself binds. The first rank's answer is as good as any.
void PublishRendezvousHostAddress(const dist_comm_config_t& config) {
  std::string variable;
  const std::string host = RendezvousHost(config, &variable);
  if (host.empty()) return;
  const std::vector<sockaddr_storage> resolved = Resolve(host);
  if (resolved.empty()) return;
  const std::string reached = Text(reinterpret_cast<const sockaddr*>(&resolved[0]));
  const std::optional<std::string> source = RouteSource(resolved[0]);
  if (IsLoopbackText(reached) || !source || IsLoopbackText(*source)) return;
  (void)dist::StoreView(config.store).CompareSet(kSeenAsKey, "", reached);
}

}  // namespace

std::string RendezvousHost(const dist_comm_config_t& config, std::string* variable) {
  std::string method = FindOption(config, DIST_OPTION_INIT_METHOD);
  if (method.empty()) method = Env("DIST_INIT_METHOD");  // a core that predates the option
  const absl::StatusOr<dist::support::Url> url = dist::support::ParseUrl(method);
  if (url.ok() && url->scheme == "tcp" && !url->host.empty()) {
    *variable = absl::StrCat("the init method ", method);
    return url->host;
  }
  if (url.ok()) {
    for (const auto& [key, value] : url->query) {
      if (key == "master_addr" && !value.empty()) {
        *variable = absl::StrCat("the init method ", method);
        return value;
      }
    }
  }
  std::string host = Env("MASTER_ADDR");
  *variable = "MASTER_ADDR";
  if (host.empty()) {
    host = dist::support::SlurmMasterAddr().value_or("");
    *variable = "the first host of SLURM_JOB_NODELIST";
  }
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return host;
}

absl::StatusOr<std::shared_ptr<gloo::transport::Device>> CreateDevice(
    const dist_comm_config_t& config, std::string* description) {
  if (ClaimsToSpanHosts(config)) {
    AnnounceHost(config);
    PublishRendezvousHostAddress(config);
  }
  Choice choice;
  if (std::string ifname = FindOption(config, "gloo.ifname"); !ifname.empty()) {
    choice = {ifname, "", absl::StrCat("option gloo.ifname=", ifname)};
  } else if (std::string env_ifname = Env("DIST_GLOO_IFNAME"); !env_ifname.empty()) {
    choice = {env_ifname, "", absl::StrCat("DIST_GLOO_IFNAME=", env_ifname)};
  } else if (std::string host = FindOption(config, "gloo.hostname"); !host.empty()) {
    choice = {"", host, absl::StrCat("option gloo.hostname=", host)};
  } else if (std::string env_host = Env("DIST_GLOO_HOSTNAME"); !env_host.empty()) {
    choice = {"", env_host, absl::StrCat("DIST_GLOO_HOSTNAME=", env_host)};
  } else {
    absl::StatusOr<Choice> chosen = DefaultChoice(config);
    if (!chosen.ok()) {
      return absl::Status(
          chosen.status().code(),
          absl::StrCat("gloo backend: choosing this rank's address (rank ", config.rank, " on ",
                       ThisHostName(), "): ", chosen.status().message()));
    }
    choice = *std::move(chosen);
  }

  // A loopback address published to ranks on other hosts: they would try
  // to connect to themselves and fail with "Connection refused".
  bool loopback = false;
  std::string address_text = choice.address;
  if (!choice.iface.empty()) {
    for (const Interface& item : Interfaces()) {
      if (item.name != choice.iface) continue;
      loopback = loopback || item.loopback;
      if (address_text.empty()) address_text = item.address;
    }
  } else {
    for (const sockaddr_storage& resolved : Resolve(choice.address)) {
      loopback = loopback || IsLoopback(reinterpret_cast<const sockaddr*>(&resolved));
      if (address_text == choice.address && loopback) {
        address_text = Text(reinterpret_cast<const sockaddr*>(&resolved));
      }
    }
  }
  absl::StatusOr<bool> spans = false;
  if (loopback && ClaimsToSpanHosts(config)) spans = SpansHosts(config);
  if (!spans.ok()) {
    return absl::Status(spans.status().code(),
                        absl::StrCat("gloo backend: rank ", config.rank, " on ", ThisHostName(),
                                     ": ", spans.status().message()));
  }
  if (*spans) {
    return absl::FailedPreconditionError(
        absl::StrCat("gloo backend: rank ", config.rank, " on ", ThisHostName(),
                     " would publish the loopback "
                     "address ",
                     address_text, " (from ", choice.source, ") but only ", config.local_world_size,
                     " of ", config.world_size,
                     " ranks run on this host; the ranks "
                     "on other hosts cannot connect to it; ",
                     kFix,
                     ", or unset it to use the route to "
                     "MASTER_ADDR"));
  }

  gloo::transport::tcp::attr attr;
  attr.iface = choice.iface;
  if (choice.iface.empty()) attr.hostname = choice.address;
  try {
    std::shared_ptr<gloo::transport::Device> device = gloo::transport::tcp::CreateDevice(attr);
    *description = absl::StrCat(device->str(), " (", choice.source, ")");
    return device;
  } catch (const std::exception& e) {
    // Out of descriptors, not a wrong interface: say who holds them.
    if (absl::StrContains(e.what(), "Too many open files in system")) {
      return absl::ResourceExhaustedError(
          absl::StrCat("Gloo cannot open a TCP device: ", e.what(),
                       ": the host is out of file descriptors (fs.file-max)"));
    }
    if (absl::StrContains(e.what(), "Too many open files") || dist::support::AtDescriptorLimit()) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "Gloo cannot open a TCP device (", e.what(), "): out of file descriptors: ",
          dist::support::DescribeDescriptors(), "; raise the open-files limit (ulimit -n)"));
    }
    return absl::UnavailableError(
        absl::StrCat("Gloo cannot open a TCP device on ",
                     attr.iface.empty() ? absl::StrCat("address '", attr.hostname, "'")
                                        : absl::StrCat("interface '", attr.iface, "'"),
                     " (from ", choice.source, "): ", e.what(), "; ", kFix,
                     ", or lo when all ranks run on "
                     "one host"));
  }
}

}  // namespace dist_gloo
