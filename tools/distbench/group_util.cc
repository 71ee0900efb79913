#include "tools/distbench/group_util.h"

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dist/cpp/status.hpp"
#include "support/device_memory.h"

namespace distbench {

namespace {
using dist::DeviceBuffer;
constexpr size_t kMaxString = 1024;
}  // namespace

absl::StatusOr<std::string> BroadcastString(dist_process_group_t* pg, dist_device_t device,
                                            const std::string& value) {
  if (value.size() >= kMaxString) {
    return absl::InvalidArgumentError(absl::StrCat("string too long to broadcast: ", value));
  }
  std::vector<char> host(kMaxString, 0);
  std::memcpy(host.data(), value.data(), value.size());
  absl::StatusOr<std::unique_ptr<DeviceBuffer>> buffer = DeviceBuffer::Allocate(device, kMaxString);
  if (!buffer.ok()) return buffer.status();
  DIST_RETURN_IF_ERROR((*buffer)->CopyIn(host.data(), host.size()));
  const dist_buffer_t b = dist_make_buffer((*buffer)->data(), kMaxString, DIST_UINT8, device);
  DIST_RETURN_IF_ERROR(dist::TakeError(dist_broadcast(pg, &b, &b, 0, nullptr)));
  DIST_RETURN_IF_ERROR((*buffer)->CopyOut(host.data(), host.size()));
  return std::string(host.data(), strnlen(host.data(), kMaxString));
}

absl::StatusOr<std::vector<double>> AllReduceDoubles(dist_process_group_t* pg, dist_device_t device,
                                                     const std::vector<double>& values,
                                                     dist_reduce_op_t op) {
  const size_t bytes = values.size() * sizeof(double);
  absl::StatusOr<std::unique_ptr<DeviceBuffer>> buffer = DeviceBuffer::Allocate(device, bytes);
  if (!buffer.ok()) return buffer.status();
  DIST_RETURN_IF_ERROR((*buffer)->CopyIn(values.data(), bytes));
  const dist_buffer_t b = dist_make_buffer((*buffer)->data(), values.size(), DIST_FLOAT64, device);
  DIST_RETURN_IF_ERROR(dist::TakeError(dist_all_reduce(pg, &b, &b, op, nullptr)));
  std::vector<double> result(values.size());
  DIST_RETURN_IF_ERROR((*buffer)->CopyOut(result.data(), bytes));
  return result;
}

absl::StatusOr<double> AllReduceDouble(dist_process_group_t* pg, dist_device_t device, double value,
                                       dist_reduce_op_t op) {
  absl::StatusOr<std::vector<double>> result = AllReduceDoubles(pg, device, {value}, op);
  if (!result.ok()) return result.status();
  return (*result)[0];
}

}  // namespace distbench
