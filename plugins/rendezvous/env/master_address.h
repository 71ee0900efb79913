// Where env:// finds rank 0's store: MASTER_ADDR and MASTER_PORT, from the
// URL query (master_addr, master_port), else the environment, else Slurm's
// defaults (the first host of SLURM_JOB_NODELIST, 10000 + SLURM_JOB_ID %
// 20000).
#ifndef DIST_PLUGINS_RENDEZVOUS_ENV_MASTER_ADDRESS_H_
#define DIST_PLUGINS_RENDEZVOUS_ENV_MASTER_ADDRESS_H_

#include <string>

#include "absl/status/status.h"
#include "support/url.h"

namespace dist::rendezvous {

using support::Query;
using support::Url;

// Sets *host (IPv6 brackets removed) and *port; an error names the variable
// or URL parameter that is missing or malformed and how to set it.
absl::Status MasterAddress(const Url& url, const Query& query, std::string* host, int* port);

}  // namespace dist::rendezvous

#endif  // DIST_PLUGINS_RENDEZVOUS_ENV_MASTER_ADDRESS_H_
