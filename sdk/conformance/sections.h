// dist conformance kit: what the suite's sections share; private to the kit.
//
// Each section of the suite (see SectionNames()) is one private member of
// Suite (suite.h), defined in its own file, section_<name>.cc; suite.cc runs
// them in order. The helpers several sections use are declared here and
// defined in sections_common.cc, with RunCase and Suite's own helpers.
#ifndef DIST_SDK_CONFORMANCE_SECTIONS_H_
#define DIST_SDK_CONFORMANCE_SECTIONS_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dist/backend_plugin.h"
#include "sdk/conformance/comm.h"
#include "support/device_memory.h"

namespace dist::conformance {

constexpr dist_collective_t kReducing[] = {DIST_COLL_ALL_REDUCE, DIST_COLL_REDUCE,
                                           DIST_COLL_REDUCE_SCATTER};
// Extra time a wait gets beyond the operation's own timeout, so that the
// backend's timeout error (which names the culprit) arrives first.
constexpr int64_t kWaitSlackMs = 10000;

// Buffer shapes of dist/backend_plugin.h, in elements.
void Shapes(dist_collective_t coll, uint64_t n, uint64_t world, uint64_t* send, uint64_t* recv);

// An argument block over `send` and `recv`: op DIST_SUM, the rest zero.
dist_op_args_t MakeArgs(dist_buffer_t send, dist_buffer_t recv, int64_t timeout_ms);

// Starts and waits, or runs (every other call); see sections_common.cc.
absl::Status StartAndWait(Comm& comm, dist_collective_t coll, const dist_op_args_t& args,
                          int64_t timeout_ms);

// A buffer of `bytes` on `device` whose host copy is all `pattern`.
absl::StatusOr<std::unique_ptr<DeviceBuffer>> Filled(dist_device_t device, size_t bytes,
                                                     unsigned char pattern);

#define CONFORMANCE_ASSIGN(lhs, expr)           \
  auto lhs##_or = (expr);                       \
  if (!lhs##_or.ok()) return lhs##_or.status(); \
  auto lhs = std::move(*lhs##_or)

#define CONFORMANCE_RETURN_IF_ERROR(expr)                      \
  do {                                                         \
    absl::Status conformance_status_ = (expr);                 \
    if (!conformance_status_.ok()) return conformance_status_; \
  } while (0)

// True when `text` names rank `rank` ("rank 3", "ranks 1, 3", "rank(s) [3]").
bool NamesRank(const std::string& text, int32_t rank);

// `status` with "what: " before its message; OK stays OK.
absl::Status Prefix(absl::Status status, const std::string& what);

}  // namespace dist::conformance

#endif  // DIST_SDK_CONFORMANCE_SECTIONS_H_
