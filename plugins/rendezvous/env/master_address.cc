#include "plugins/rendezvous/env/master_address.h"

#include <stdlib.h>

#include <optional>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "support/slurm.h"

namespace dist::rendezvous {

using support::SlurmMasterAddr;
using support::SlurmMasterPort;

absl::Status MasterAddress(const Url& url, const Query& query, std::string* host, int* port) {
  std::optional<std::string> addr = query.Get("master_addr");
  std::string addr_source = "URL parameter master_addr";
  if (!addr) {
    if (const char* env = getenv("MASTER_ADDR")) addr = env;
    addr_source = "MASTER_ADDR";
  }
  if (!addr && (addr = SlurmMasterAddr())) addr_source = "the first host of SLURM_JOB_NODELIST";
  if (!addr || addr->empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(url.text, ": MASTER_ADDR is ", addr ? "empty" : "not set",
                     "; set it to the host name or address of rank 0 (or use tcp://HOST:PORT)"));
  }
  if (addr->size() > 2 && addr->front() == '[' && addr->back() == ']') {
    *addr = addr->substr(1, addr->size() - 2);  // bracketed IPv6 literal
  }
  if (addr->find_first_of(" /?#") != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(url.text, ": ", addr_source, "='", *addr,
                     "' is not a host name or address; set it to rank 0's host"));
  }
  std::optional<std::string> port_text = query.Get("master_port");
  std::string port_source = "URL parameter master_port";
  if (!port_text) {
    if (const char* env = getenv("MASTER_PORT")) port_text = env;
    port_source = "MASTER_PORT";
  }
  if (!port_text) {
    if (std::optional<int> slurm_port = SlurmMasterPort()) {
      port_text = std::to_string(*slurm_port);
      port_source = "10000 + SLURM_JOB_ID % 20000";
    }
  }
  if (!port_text) {
    return absl::InvalidArgumentError(
        absl::StrCat(url.text,
                     ": MASTER_PORT is not set; set it to a free TCP port on rank 0's host "
                     "(e.g. 29500)"));
  }
  if (!absl::SimpleAtoi(*port_text, port) || *port < 1 || *port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat(url.text, ": ", port_source, "='", *port_text,
                     "' is malformed; it must be a TCP port number in 1..65535"));
  }
  *host = *addr;
  return absl::OkStatus();
}

}  // namespace dist::rendezvous
