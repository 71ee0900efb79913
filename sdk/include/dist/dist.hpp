// dist: a header-only C++17 wrapper over the C host API (dist.h).
//
//   auto group = dist::ProcessGroup::Init();              // StatusOr
//   if (!group.ok()) { std::cerr << group.status() << "\n"; return 1; }
//   std::vector<float> grad(n);
//   absl::Status s = group->AllReduce(dist::View(grad), dist::View(grad), DIST_SUM);
//   dist::Work w = group->AllReduceAsync(...).value();  // overlap, then w.Wait()
//
// Handles are RAII (move-only). Errors come back as absl::Status; nothing is
// thrown unless you call the *OrThrow helpers. Only this header is C++: the
// library underneath has a C ABI, so any C++17 compiler works.
#ifndef DIST_DIST_HPP_
#define DIST_DIST_HPP_

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "dist/cpp/status.hpp"
#include "dist/dist.h"

namespace dist {

template <typename T>
constexpr dist_dtype_t DtypeOf() {
  if constexpr (std::is_same_v<T, int8_t>)
    return DIST_INT8;
  else if constexpr (std::is_same_v<T, uint8_t>)
    return DIST_UINT8;
  else if constexpr (std::is_same_v<T, int32_t>)
    return DIST_INT32;
  else if constexpr (std::is_same_v<T, int64_t>)
    return DIST_INT64;
  else if constexpr (std::is_same_v<T, float>)
    return DIST_FLOAT32;
  else if constexpr (std::is_same_v<T, double>)
    return DIST_FLOAT64;
  else
    static_assert(sizeof(T) == 0, "no dist dtype for this element type");
}

// A CPU buffer descriptor over contiguous memory (borrowed).
template <typename T>
dist_buffer_t View(T* data, size_t count) {
  return dist_make_buffer(const_cast<std::remove_const_t<T>*>(data), count,
                          DtypeOf<std::remove_const_t<T>>(), dist_cpu());
}

template <typename T>
dist_buffer_t View(std::vector<T>& values) {
  return View(values.data(), values.size());
}

// An outstanding operation. Destroying it does not cancel the operation.
class Work {
 public:
  Work() = default;
  explicit Work(dist_work_t* work) : work_(work) {}
  Work(Work&& other) noexcept : work_(std::exchange(other.work_, nullptr)) {}
  Work& operator=(Work&& other) noexcept {
    if (this != &other) {
      dist_work_destroy(work_);
      work_ = std::exchange(other.work_, nullptr);
    }
    return *this;
  }
  ~Work() { dist_work_destroy(work_); }

  // Waits up to `timeout` (default: the group's timeout).
  absl::Status Wait(absl::Duration timeout = absl::InfiniteDuration()) {
    const int64_t ms =
        timeout == absl::InfiniteDuration() ? -1 : absl::ToInt64Milliseconds(timeout);
    return TakeError(dist_work_wait(work_, ms));
  }

  // True once complete; the status is the operation's result.
  absl::StatusOr<bool> Test() {
    int done = 0;
    absl::Status status = TakeError(dist_work_test(work_, &done));
    if (!status.ok()) return status;
    return done != 0;
  }

  absl::Status WaitOnStream(void* stream) {
    return TakeError(dist_work_wait_stream(work_, stream));
  }

  dist_work_t* get() const { return work_; }

 private:
  dist_work_t* work_ = nullptr;
};

// What dist_init takes; every empty field falls back to the environment,
// the config file, then the default.
struct InitOptions {
  std::string backend;      // empty: DIST_BACKEND, config, "gloo"
  std::string init_method;  // empty: DIST_INIT_METHOD, config, "env://"
  int32_t rank = -1;        // used only with world_size > 0
  int32_t world_size = 0;
  absl::Duration timeout = absl::ZeroDuration();  // zero: DIST_TIMEOUT, config, 5 min
  std::string config_file;
  std::vector<std::pair<std::string, std::string>> options;
  std::string group_name;
};

class ProcessGroup {
 public:
  using Options = InitOptions;

  static absl::StatusOr<ProcessGroup> Init(const Options& options = Options()) {
    dist_init_options_t raw = dist_init_options_default();
    raw.backend = options.backend.empty() ? nullptr : options.backend.c_str();
    raw.init_method = options.init_method.empty() ? nullptr : options.init_method.c_str();
    raw.rank = options.rank;
    raw.world_size = options.world_size;
    raw.timeout_ms = absl::ToInt64Milliseconds(options.timeout);
    raw.config_file = options.config_file.empty() ? nullptr : options.config_file.c_str();
    std::vector<dist_kv_t> kvs;
    for (const auto& [key, value] : options.options) kvs.push_back({key.c_str(), value.c_str()});
    raw.options = kvs.empty() ? nullptr : kvs.data();
    raw.num_options = kvs.size();
    raw.group_name = options.group_name.empty() ? nullptr : options.group_name.c_str();
    dist_process_group_t* group = nullptr;
    absl::Status status = TakeError(dist_init(&raw, &group));
    if (!status.ok()) return status;
    return ProcessGroup(group);
  }

  ProcessGroup(ProcessGroup&& other) noexcept : group_(std::exchange(other.group_, nullptr)) {}
  ProcessGroup& operator=(ProcessGroup&& other) noexcept {
    if (this != &other) {
      dist_destroy(group_);
      group_ = std::exchange(other.group_, nullptr);
    }
    return *this;
  }
  ~ProcessGroup() { dist_destroy(group_); }

  int32_t rank() const { return dist_rank(group_); }
  int32_t world_size() const { return dist_world_size(group_); }
  const char* backend(dist_device_type_t device = DIST_DEVICE_CPU) const {
    return dist_backend_name(group_, device);
  }
  dist_process_group_t* get() const { return group_; }

  // Collective: every rank of this group calls it with the same ranks.
  absl::StatusOr<ProcessGroup> NewGroup(const std::vector<int32_t>& ranks) {
    dist_process_group_t* group = nullptr;
    absl::Status status = TakeError(dist_new_group(group_, ranks.data(), ranks.size(), &group));
    if (!status.ok()) return status;
    return ProcessGroup(group);
  }

  void Abort(const std::string& reason) { dist_abort(group_, reason.c_str()); }

  // Surviving a failed rank (docs/survival.md): dist_revoke, dist_shrink,
  // dist_grow.
  absl::Status Revoke(const std::string& reason) {
    return TakeError(dist_revoke(group_, reason.c_str()));
  }
  // The survivors' new group; zero `timeout`: this group's.
  absl::StatusOr<ProcessGroup> Shrink(absl::Duration timeout = absl::ZeroDuration()) {
    const dist_shrink_options_t options{sizeof(dist_shrink_options_t),
                                        absl::ToInt64Milliseconds(timeout)};
    dist_process_group_t* group = nullptr;
    absl::Status status = TakeError(dist_shrink(group_, &options, &group));
    if (!status.ok()) return status;
    return ProcessGroup(group);
  }

  // The group grown by `joiners` joining processes (0: every one waiting;
  // dist_grow); zero `timeout`: this group's.
  absl::StatusOr<ProcessGroup> Grow(int32_t joiners,
                                    absl::Duration timeout = absl::ZeroDuration()) {
    const dist_grow_options_t options{sizeof(dist_grow_options_t),
                                      absl::ToInt64Milliseconds(timeout), joiners};
    dist_process_group_t* group = nullptr;
    absl::Status status = TakeError(dist_grow(group_, &options, &group));
    if (!status.ok()) return status;
    return ProcessGroup(group);
  }

  // This rank's flight recorder as JSON (dist_trace_dump); empty `path`:
  // DIST_TRACE_DIR/rank-<rank>.json.
  absl::Status TraceDump(const std::string& path = "") const {
    return TakeError(dist_trace_dump(group_, path.empty() ? nullptr : path.c_str()));
  }

  // Blocking forms.
  absl::Status AllReduce(const dist_buffer_t& send, const dist_buffer_t& recv,
                         dist_reduce_op_t op) {
    return TakeError(dist_all_reduce(group_, &send, &recv, op, nullptr));
  }
  absl::Status Broadcast(const dist_buffer_t& send, const dist_buffer_t& recv, int32_t root) {
    return TakeError(dist_broadcast(group_, &send, &recv, root, nullptr));
  }
  absl::Status Reduce(const dist_buffer_t& send, const dist_buffer_t& recv, dist_reduce_op_t op,
                      int32_t root) {
    return TakeError(dist_reduce(group_, &send, &recv, op, root, nullptr));
  }
  absl::Status AllGather(const dist_buffer_t& send, const dist_buffer_t& recv) {
    return TakeError(dist_all_gather(group_, &send, &recv, nullptr));
  }
  absl::Status Gather(const dist_buffer_t& send, const dist_buffer_t& recv, int32_t root) {
    return TakeError(dist_gather(group_, &send, &recv, root, nullptr));
  }
  absl::Status Scatter(const dist_buffer_t& send, const dist_buffer_t& recv, int32_t root) {
    return TakeError(dist_scatter(group_, &send, &recv, root, nullptr));
  }
  absl::Status ReduceScatter(const dist_buffer_t& send, const dist_buffer_t& recv,
                             dist_reduce_op_t op) {
    return TakeError(dist_reduce_scatter(group_, &send, &recv, op, nullptr));
  }
  absl::Status AllToAll(const dist_buffer_t& send, const dist_buffer_t& recv) {
    return TakeError(dist_all_to_all(group_, &send, &recv, nullptr));
  }
  absl::Status Barrier() { return TakeError(dist_barrier(group_, nullptr)); }
  absl::Status Send(const dist_buffer_t& buffer, int32_t peer, int64_t tag = 0) {
    return TakeError(dist_send(group_, &buffer, peer, tag, nullptr));
  }
  absl::Status Recv(const dist_buffer_t& buffer, int32_t peer, int64_t tag = 0) {
    return TakeError(dist_recv(group_, &buffer, peer, tag, nullptr));
  }
  // Sends to `dst` while receiving from `src` (dist_sendrecv).
  absl::Status SendRecv(const dist_buffer_t& send, int32_t dst, const dist_buffer_t& recv,
                        int32_t src, int64_t tag = 0) {
    return TakeError(dist_sendrecv(group_, &send, dst, &recv, src, tag));
  }

  // Asynchronous forms: the buffers must stay valid until the work is done.
  absl::StatusOr<Work> AllReduceAsync(const dist_buffer_t& send, const dist_buffer_t& recv,
                                      dist_reduce_op_t op) {
    return Started([&](dist_work_t** w) { return dist_all_reduce(group_, &send, &recv, op, w); });
  }
  absl::StatusOr<Work> BroadcastAsync(const dist_buffer_t& send, const dist_buffer_t& recv,
                                      int32_t root) {
    return Started([&](dist_work_t** w) { return dist_broadcast(group_, &send, &recv, root, w); });
  }
  absl::StatusOr<Work> AllGatherAsync(const dist_buffer_t& send, const dist_buffer_t& recv) {
    return Started([&](dist_work_t** w) { return dist_all_gather(group_, &send, &recv, w); });
  }
  absl::StatusOr<Work> ReduceScatterAsync(const dist_buffer_t& send, const dist_buffer_t& recv,
                                          dist_reduce_op_t op) {
    return Started(
        [&](dist_work_t** w) { return dist_reduce_scatter(group_, &send, &recv, op, w); });
  }
  absl::StatusOr<Work> BarrierAsync() {
    return Started([&](dist_work_t** w) { return dist_barrier(group_, w); });
  }
  absl::StatusOr<Work> SendAsync(const dist_buffer_t& buffer, int32_t peer, int64_t tag = 0) {
    return Started([&](dist_work_t** w) { return dist_send(group_, &buffer, peer, tag, w); });
  }
  absl::StatusOr<Work> RecvAsync(const dist_buffer_t& buffer, int32_t peer, int64_t tag = 0) {
    return Started([&](dist_work_t** w) { return dist_recv(group_, &buffer, peer, tag, w); });
  }

 private:
  explicit ProcessGroup(dist_process_group_t* group) : group_(group) {}

  template <typename Start>
  absl::StatusOr<Work> Started(Start start) {
    dist_work_t* work = nullptr;
    absl::Status status = TakeError(start(&work));
    if (!status.ok()) return status;
    return Work(work);
  }

  dist_process_group_t* group_ = nullptr;
};

// For code that prefers exceptions: throws std::runtime_error with the
// status text. Only ever thrown on the C++ side of the ABI.
inline void ThrowIfError(const absl::Status& status) {
  if (!status.ok()) throw std::runtime_error(status.ToString());
}

}  // namespace dist

#endif  // DIST_DIST_HPP_
