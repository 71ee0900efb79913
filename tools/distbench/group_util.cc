#include "tools/distbench/group_util.h"

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dist/cpp/status.hpp"
#include "tools/distbench/device_memory.h"

namespace distbench {

namespace {
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
  DIST_RETURN_IF_ERROR((*buffer)->CopyFromHost(host));
  const dist_buffer_t b = dist_make_buffer((*buffer)->data(), kMaxString, DIST_UINT8, device);
  DIST_RETURN_IF_ERROR(dist::TakeError(dist_broadcast(pg, &b, &b, 0, nullptr)));
  absl::StatusOr<std::vector<char>> out = (*buffer)->CopyToHost();
  if (!out.ok()) return out.status();
  return std::string(out->data(), strnlen(out->data(), kMaxString));
}

absl::StatusOr<double> AllReduceDouble(dist_process_group_t* pg, dist_device_t device,
                                       double value, dist_reduce_op_t op) {
  absl::StatusOr<std::unique_ptr<DeviceBuffer>> buffer = DeviceBuffer::Allocate(device, sizeof(double));
  if (!buffer.ok()) return buffer.status();
  std::vector<char> host(sizeof(double));
  std::memcpy(host.data(), &value, sizeof(double));
  DIST_RETURN_IF_ERROR((*buffer)->CopyFromHost(host));
  const dist_buffer_t b = dist_make_buffer((*buffer)->data(), 1, DIST_FLOAT64, device);
  DIST_RETURN_IF_ERROR(dist::TakeError(dist_all_reduce(pg, &b, &b, op, nullptr)));
  absl::StatusOr<std::vector<char>> out = (*buffer)->CopyToHost();
  if (!out.ok()) return out.status();
  double result;
  std::memcpy(&result, out->data(), sizeof(double));
  return result;
}

}  // namespace distbench
