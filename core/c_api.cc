// The C entry points of dist.h and registry.h. Each converts at the
// boundary: absl::Status inside, dist_error_t outside, nothing thrown.
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/config.h"
#include "core/fork_guard.h"
#include "core/host_api.h"
#include "core/plugin_loader.h"
#include "core/process_group.h"
#include "core/rendezvous.h"
#include "core/version.h"
#include "dist/cpp/abi_struct.hpp"
#include "dist/cpp/status.hpp"
#include "dist/dist.h"
#include "dist/registry.h"

using dist::ProcessGroup;
using dist::ToError;

namespace {

dist_error_t* NullArgument(const char* function, const char* argument) {
  return dist_error_new(DIST_INVALID_ARGUMENT, "%s: %s is NULL", function, argument);
}

// Runs `body` (returning dist_error_t*), so that no exception crosses the C
// ABI: one that escapes the core (std::bad_alloc, a bug) becomes
// DIST_INTERNAL naming the function.
template <typename Body>
dist_error_t* Guarded(const char* function, Body&& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    return dist_error_new(DIST_INTERNAL, "%s: unexpected exception: %s", function, e.what());
  } catch (...) {
    return dist_error_new(DIST_INTERNAL, "%s: unexpected exception", function);
  }
}

dist_buffer_t EmptyBuffer() {
  dist_buffer_t buffer{};
  buffer.device = dist_cpu();
  return buffer;
}

// Not null when `group` belongs to the process this is a fork() child of
// (core/fork_guard.h).
dist_error_t* ForkedChildError(const char* function, const dist::ProcessGroup& group) {
  if (!group.fork_owner().InForkedChild()) return nullptr;
  return ToError(group.fork_owner().ChildError(function, group.Description()));
}
dist_error_t* ForkedChildError(const char* function, const dist_work_t& work) {
  if (!work.fork_owner.InForkedChild()) return nullptr;
  return ToError(work.fork_owner.ChildError(
      function, absl::StrCat("this ", dist_collective_name(work.kind), "'s work handle")));
}

// Runs or submits one operation, depending on whether `work` is wanted.
dist_error_t* Dispatch(const char* function, dist_process_group_t* group, dist_collective_t kind,
                       const dist_op_args_t& args, dist_work_t** work) {
  if (group == nullptr || !group->group) return NullArgument(function, "group");
  if (dist_error_t* error = ForkedChildError(function, *group->group)) return error;
  return Guarded(function, [&]() -> dist_error_t* {
    if (work == nullptr) return ToError(group->group->Run(kind, args));
    *work = nullptr;
    absl::StatusOr<dist_work_t*> submitted = group->group->Submit(kind, args);
    if (!submitted.ok()) return ToError(submitted.status());
    *work = *submitted;
    return nullptr;
  });
}

// Completes the work's flight recorder entry; a failure also dumps it.
void TraceWorkEnd(dist_work_t* work, const dist_error_t* error) {
  if (work->recorder == nullptr || work->trace_id == 0) return;
  const absl::Status status = dist::ErrorToStatus(error);
  work->recorder->End(work->trace_id, status);
  if (!status.ok()) work->recorder->DumpAfterFailure(std::string(status.message()));
}

dist_op_args_t MakeArgs(const dist_buffer_t* send, const dist_buffer_t* recv) {
  dist_op_args_t args{};
  args.struct_size = sizeof(args);
  args.send = send != nullptr ? *send : EmptyBuffer();
  args.recv = recv != nullptr ? *recv : EmptyBuffer();
  return args;
}

}  // namespace

extern "C" {

DIST_EXPORT dist_error_t* dist_init(const dist_init_options_t* options,
                                    dist_process_group_t** group) {
  if (group == nullptr) return NullArgument("dist_init", "group");
  *group = nullptr;
  return Guarded("dist_init", [&]() -> dist_error_t* {
    absl::StatusOr<std::unique_ptr<ProcessGroup>> created = ProcessGroup::Create(options);
    if (!created.ok()) return ToError(created.status());
    *group = new dist_process_group{*std::move(created)};
    return nullptr;
  });
}

DIST_EXPORT void dist_destroy(dist_process_group_t* group) {
  if (group != nullptr && group->group && group->group->fork_owner().InForkedChild()) {
    // The child's copy of its parent's group: destroying it would tell the
    // parent's peers this rank left and wait for the parent's threads. Left
    // unfreed instead (core/fork_guard.h).
    dist::LeaveUnfreedInChild(group->group.release());
  }
  delete group;
}

DIST_EXPORT int32_t dist_rank(const dist_process_group_t* group) {
  return group == nullptr ? -1 : group->group->rank();
}

DIST_EXPORT int32_t dist_world_size(const dist_process_group_t* group) {
  return group == nullptr ? 0 : group->group->world_size();
}

DIST_EXPORT const char* dist_backend_name(const dist_process_group_t* group,
                                          dist_device_type_t device_type) {
  return group == nullptr ? nullptr : group->group->BackendName(device_type);
}

DIST_EXPORT int64_t dist_timeout_ms(const dist_process_group_t* group) {
  return group == nullptr ? 0 : absl::ToInt64Milliseconds(group->group->timeout());
}

DIST_EXPORT dist_error_t* dist_all_reduce(dist_process_group_t* group, const dist_buffer_t* send,
                                          const dist_buffer_t* recv, dist_reduce_op_t op,
                                          dist_work_t** work) {
  if (send == nullptr || recv == nullptr) return NullArgument("dist_all_reduce", "buffer");
  dist_op_args_t args = MakeArgs(send, recv);
  args.op = op;
  return Dispatch("dist_all_reduce", group, DIST_COLL_ALL_REDUCE, args, work);
}

DIST_EXPORT dist_error_t* dist_broadcast(dist_process_group_t* group, const dist_buffer_t* send,
                                         const dist_buffer_t* recv, int32_t root,
                                         dist_work_t** work) {
  if (recv == nullptr) return NullArgument("dist_broadcast", "recv");
  dist_op_args_t args = MakeArgs(send != nullptr ? send : recv, recv);
  args.root = root;
  return Dispatch("dist_broadcast", group, DIST_COLL_BROADCAST, args, work);
}

DIST_EXPORT dist_error_t* dist_reduce(dist_process_group_t* group, const dist_buffer_t* send,
                                      const dist_buffer_t* recv, dist_reduce_op_t op, int32_t root,
                                      dist_work_t** work) {
  if (send == nullptr) return NullArgument("dist_reduce", "send");
  dist_op_args_t args = MakeArgs(send, recv);
  args.op = op;
  args.root = root;
  return Dispatch("dist_reduce", group, DIST_COLL_REDUCE, args, work);
}

DIST_EXPORT dist_error_t* dist_all_gather(dist_process_group_t* group, const dist_buffer_t* send,
                                          const dist_buffer_t* recv, dist_work_t** work) {
  if (send == nullptr || recv == nullptr) return NullArgument("dist_all_gather", "buffer");
  return Dispatch("dist_all_gather", group, DIST_COLL_ALL_GATHER, MakeArgs(send, recv), work);
}

DIST_EXPORT dist_error_t* dist_gather(dist_process_group_t* group, const dist_buffer_t* send,
                                      const dist_buffer_t* recv, int32_t root, dist_work_t** work) {
  if (send == nullptr) return NullArgument("dist_gather", "send");
  dist_op_args_t args = MakeArgs(send, recv);
  args.root = root;
  return Dispatch("dist_gather", group, DIST_COLL_GATHER, args, work);
}

DIST_EXPORT dist_error_t* dist_scatter(dist_process_group_t* group, const dist_buffer_t* send,
                                       const dist_buffer_t* recv, int32_t root,
                                       dist_work_t** work) {
  if (recv == nullptr) return NullArgument("dist_scatter", "recv");
  dist_op_args_t args = MakeArgs(send, recv);
  args.root = root;
  return Dispatch("dist_scatter", group, DIST_COLL_SCATTER, args, work);
}

DIST_EXPORT dist_error_t* dist_reduce_scatter(dist_process_group_t* group,
                                              const dist_buffer_t* send, const dist_buffer_t* recv,
                                              dist_reduce_op_t op, dist_work_t** work) {
  if (send == nullptr || recv == nullptr) return NullArgument("dist_reduce_scatter", "buffer");
  dist_op_args_t args = MakeArgs(send, recv);
  args.op = op;
  return Dispatch("dist_reduce_scatter", group, DIST_COLL_REDUCE_SCATTER, args, work);
}

DIST_EXPORT dist_error_t* dist_all_to_all(dist_process_group_t* group, const dist_buffer_t* send,
                                          const dist_buffer_t* recv, dist_work_t** work) {
  if (send == nullptr || recv == nullptr) return NullArgument("dist_all_to_all", "buffer");
  return Dispatch("dist_all_to_all", group, DIST_COLL_ALL_TO_ALL, MakeArgs(send, recv), work);
}

DIST_EXPORT dist_error_t* dist_barrier(dist_process_group_t* group, dist_work_t** work) {
  return Dispatch("dist_barrier", group, DIST_COLL_BARRIER, MakeArgs(nullptr, nullptr), work);
}

DIST_EXPORT dist_error_t* dist_send(dist_process_group_t* group, const dist_buffer_t* buffer,
                                    int32_t peer, int64_t tag, dist_work_t** work) {
  if (buffer == nullptr) return NullArgument("dist_send", "buffer");
  dist_op_args_t args = MakeArgs(buffer, nullptr);
  args.peer = peer;
  args.tag = tag;
  return Dispatch("dist_send", group, DIST_COLL_SEND, args, work);
}

DIST_EXPORT dist_error_t* dist_recv(dist_process_group_t* group, const dist_buffer_t* buffer,
                                    int32_t peer, int64_t tag, dist_work_t** work) {
  if (buffer == nullptr) return NullArgument("dist_recv", "buffer");
  dist_op_args_t args = MakeArgs(nullptr, buffer);
  args.peer = peer;
  args.tag = tag;
  return Dispatch("dist_recv", group, DIST_COLL_RECV, args, work);
}

DIST_EXPORT dist_error_t* dist_sendrecv(dist_process_group_t* group, const dist_buffer_t* send,
                                        int32_t dst, const dist_buffer_t* recv, int32_t src,
                                        int64_t tag) {
  if (group == nullptr || !group->group) return NullArgument("dist_sendrecv", "group");
  if (dist_error_t* error = ForkedChildError("dist_sendrecv", *group->group)) return error;
  if (send == nullptr) return NullArgument("dist_sendrecv", "send");
  if (recv == nullptr) return NullArgument("dist_sendrecv", "recv");
  dist_op_args_t send_args = MakeArgs(send, nullptr);
  send_args.peer = dst;
  send_args.tag = tag;
  dist_op_args_t recv_args = MakeArgs(nullptr, recv);
  recv_args.peer = src;
  recv_args.tag = tag;
  return Guarded("dist_sendrecv", [&]() -> dist_error_t* {
    return ToError(group->group->RunSendRecv(send_args, recv_args));
  });
}

namespace {

// An operation of a revoked group fails with the revoke's DIST_REVOKED, not
// with the abort the backend saw (a wait that merely timed out stays).
dist_error_t* RevokedInstead(const dist_work_t& work, dist_error_t* error) {
  if (error == nullptr || work.revocation == nullptr ||
      dist_error_code(error) == DIST_DEADLINE_EXCEEDED) {
    return error;
  }
  work.revocation->Poll();  // as a blocking call does (ProcessGroup::RevokedOr)
  if (!work.revocation->revoked()) return error;
  dist_error_destroy(error);
  return ToError(work.revocation->status());
}

}  // namespace

DIST_EXPORT dist_error_t* dist_work_wait(dist_work_t* work, int64_t timeout_ms) {
  if (work == nullptr) return NullArgument("dist_work_wait", "work");
  if (dist_error_t* error = ForkedChildError("dist_work_wait", *work)) return error;
  // Longer than kMaxTimeoutMs is as good as forever, and overflows plugins'
  // deadline arithmetic.
  if (timeout_ms > dist::kMaxTimeoutMs) timeout_ms = dist::kMaxTimeoutMs;
  dist_error_t* error =
      work->plugin->work_wait(work->work, timeout_ms < 0 ? work->default_timeout_ms : timeout_ms);
  error = RevokedInstead(*work, error);
  TraceWorkEnd(work, error);
  // A wait that merely timed out leaves the operation pending (the caller
  // may wait again); any other error means it failed.
  if (error != nullptr && dist_error_code(error) != DIST_DEADLINE_EXCEEDED && work->store) {
    work->store->MarkFailed(dist_error_message(error));
  }
  return error;
}

DIST_EXPORT dist_error_t* dist_work_test(dist_work_t* work, int* done) {
  if (work == nullptr) return NullArgument("dist_work_test", "work");
  if (done == nullptr) return NullArgument("dist_work_test", "done");
  if (dist_error_t* error = ForkedChildError("dist_work_test", *work)) return error;
  if (work->plugin->work_test == nullptr) {
    return dist_error_new(DIST_UNIMPLEMENTED, "dist_work_test: the backend has no work_test");
  }
  dist_error_t* error = RevokedInstead(*work, work->plugin->work_test(work->work, done));
  if (error != nullptr || *done) TraceWorkEnd(work, error);
  return error;
}

DIST_EXPORT dist_error_t* dist_work_wait_stream(dist_work_t* work, void* stream) {
  if (work == nullptr) return NullArgument("dist_work_wait_stream", "work");
  if (dist_error_t* error = ForkedChildError("dist_work_wait_stream", *work)) return error;
  if (work->plugin->work_wait_stream == nullptr) {
    return dist_error_new(DIST_UNIMPLEMENTED,
                          "dist_work_wait_stream: this backend has no stream-ordered wait; "
                          "use dist_work_wait");
  }
  return work->plugin->work_wait_stream(work->work, stream);
}

DIST_EXPORT void dist_work_destroy(dist_work_t* work) {
  if (work == nullptr) return;
  // A forked child's copy: left unfreed, as dist_destroy leaves its groups
  // (its store reference, released, could close the parent's connection).
  if (work->fork_owner.InForkedChild()) {
    dist::LeaveUnfreedInChild(work);
    return;
  }
  work->plugin->work_destroy(work->work);
  delete work;
}

DIST_EXPORT dist_error_t* dist_new_group(dist_process_group_t* parent, const int32_t* ranks,
                                         size_t num_ranks, dist_process_group_t** group) {
  if (parent == nullptr) return NullArgument("dist_new_group", "parent");
  if (group == nullptr) return NullArgument("dist_new_group", "group");
  if (ranks == nullptr && num_ranks > 0) return NullArgument("dist_new_group", "ranks");
  if (dist_error_t* error = ForkedChildError("dist_new_group", *parent->group)) return error;
  *group = nullptr;
  return Guarded("dist_new_group", [&]() -> dist_error_t* {
    absl::StatusOr<std::unique_ptr<ProcessGroup>> made =
        parent->group->NewGroup(std::vector<int32_t>(ranks, ranks + num_ranks));
    if (!made.ok()) return ToError(made.status());
    *group = new dist_process_group{*std::move(made)};
    return nullptr;
  });
}

DIST_EXPORT dist_error_t* dist_split_group(dist_process_group_t* parent, int32_t color, int32_t key,
                                           dist_process_group_t** group) {
  if (parent == nullptr) return NullArgument("dist_split_group", "parent");
  if (group == nullptr) return NullArgument("dist_split_group", "group");
  if (dist_error_t* error = ForkedChildError("dist_split_group", *parent->group)) return error;
  *group = nullptr;
  return Guarded("dist_split_group", [&]() -> dist_error_t* {
    absl::StatusOr<std::unique_ptr<ProcessGroup>> made = parent->group->Split(color, key);
    if (!made.ok()) return ToError(made.status());
    if (*made != nullptr) *group = new dist_process_group{*std::move(made)};
    return nullptr;
  });
}

namespace {

// The variable-count collectives are blocking in this version.
dist_error_t* BlockingOnly(const char* op, dist_process_group_t* group, dist_work_t** work) {
  if (group == nullptr || !group->group) return NullArgument(op, "group");
  if (dist_error_t* error = ForkedChildError(op, *group->group)) return error;
  if (work != nullptr) {
    *work = nullptr;
    return dist_error_new(DIST_UNIMPLEMENTED,
                          "%s runs blocking in this version: pass NULL for work (issue it from a "
                          "thread of your own to overlap it)",
                          op);
  }
  return nullptr;
}

}  // namespace

DIST_EXPORT dist_error_t* dist_all_to_all_v(dist_process_group_t* group, const dist_buffer_t* send,
                                            const uint64_t* send_counts,
                                            const uint64_t* send_displs, const dist_buffer_t* recv,
                                            const uint64_t* recv_counts,
                                            const uint64_t* recv_displs, dist_work_t** work) {
  if (dist_error_t* error = BlockingOnly("dist_all_to_all_v", group, work)) return error;
  if (send == nullptr || recv == nullptr) return NullArgument("dist_all_to_all_v", "buffer");
  return Guarded("dist_all_to_all_v", [&]() -> dist_error_t* {
    return ToError(
        group->group->AllToAllV(*send, send_counts, send_displs, *recv, recv_counts, recv_displs));
  });
}

DIST_EXPORT dist_error_t* dist_all_gather_v(dist_process_group_t* group, const dist_buffer_t* send,
                                            const dist_buffer_t* recv, const uint64_t* recv_counts,
                                            const uint64_t* recv_displs, dist_work_t** work) {
  if (dist_error_t* error = BlockingOnly("dist_all_gather_v", group, work)) return error;
  if (send == nullptr || recv == nullptr) return NullArgument("dist_all_gather_v", "buffer");
  return Guarded("dist_all_gather_v", [&]() -> dist_error_t* {
    return ToError(group->group->AllGatherV(*send, *recv, recv_counts, recv_displs));
  });
}

DIST_EXPORT dist_error_t* dist_reduce_scatter_v(dist_process_group_t* group,
                                                const dist_buffer_t* send,
                                                const dist_buffer_t* recv,
                                                const uint64_t* recv_counts, dist_reduce_op_t op,
                                                dist_work_t** work) {
  if (dist_error_t* error = BlockingOnly("dist_reduce_scatter_v", group, work)) return error;
  if (send == nullptr || recv == nullptr) return NullArgument("dist_reduce_scatter_v", "buffer");
  return Guarded("dist_reduce_scatter_v", [&]() -> dist_error_t* {
    return ToError(group->group->ReduceScatterV(*send, *recv, recv_counts, op));
  });
}

DIST_EXPORT dist_error_t* dist_revoke(dist_process_group_t* group, const char* reason) {
  if (group == nullptr) return NullArgument("dist_revoke", "group");
  if (dist_error_t* error = ForkedChildError("dist_revoke", *group->group)) return error;
  return Guarded("dist_revoke", [&]() -> dist_error_t* {
    group->group->Revoke(reason != nullptr && *reason != '\0' ? reason
                                                              : "revoked by the application");
    return nullptr;
  });
}

DIST_EXPORT dist_error_t* dist_failed_ranks(const dist_process_group_t* group, int32_t* ranks,
                                            size_t capacity, size_t* count) {
  if (group == nullptr) return NullArgument("dist_failed_ranks", "group");
  if (count == nullptr) return NullArgument("dist_failed_ranks", "count");
  if (ranks == nullptr && capacity > 0) return NullArgument("dist_failed_ranks", "ranks");
  return Guarded("dist_failed_ranks", [&]() -> dist_error_t* {
    const std::vector<dist::FailedRank> failed = group->group->FailedRanks();
    *count = failed.size();
    for (size_t i = 0; i < failed.size() && i < capacity; ++i) ranks[i] = failed[i].rank;
    return nullptr;
  });
}

namespace {

// An options struct of dist_shrink/dist_grow shorter than the fields read.
dist_error_t* CheckOptionsSize(const char* call, const char* type, size_t struct_size,
                               size_t needed) {
  if (struct_size >= needed) return nullptr;
  return dist_error_new(DIST_INVALID_ARGUMENT,
                        "%s: options->struct_size %zu is too small; set it to sizeof(%s)", call,
                        struct_size, type);
}

// A timeout_ms of dist_shrink/dist_grow: 0 is the group's.
dist_error_t* CheckGroupCallTimeout(const char* call, int64_t timeout_ms) {
  if (timeout_ms >= 0 && timeout_ms <= dist::kMaxTimeoutMs) return nullptr;
  return dist_error_new(DIST_INVALID_ARGUMENT,
                        "%s: timeout_ms %lld is outside [0, %lld]; 0 means the group's timeout",
                        call, static_cast<long long>(timeout_ms),
                        static_cast<long long>(dist::kMaxTimeoutMs));
}

}  // namespace

DIST_EXPORT dist_error_t* dist_shrink(dist_process_group_t* group,
                                      const dist_shrink_options_t* options,
                                      dist_process_group_t** new_group) {
  if (group == nullptr) return NullArgument("dist_shrink", "group");
  if (new_group == nullptr) return NullArgument("dist_shrink", "new_group");
  *new_group = nullptr;
  if (dist_error_t* error = ForkedChildError("dist_shrink", *group->group)) return error;
  dist_shrink_options_t read{};
  if (options != nullptr) {
    if (dist_error_t* error =
            CheckOptionsSize("dist_shrink", "dist_shrink_options_t", options->struct_size,
                             offsetof(dist_shrink_options_t, timeout_ms) + sizeof(int64_t))) {
      return error;
    }
    read.timeout_ms = options->timeout_ms;
  }
  if (dist_error_t* error = CheckGroupCallTimeout("dist_shrink", read.timeout_ms)) return error;
  return Guarded("dist_shrink", [&]() -> dist_error_t* {
    const absl::Duration timeout =
        read.timeout_ms > 0 ? absl::Milliseconds(read.timeout_ms) : group->group->timeout();
    absl::StatusOr<std::unique_ptr<ProcessGroup>> shrunk = group->group->Shrink(timeout);
    if (!shrunk.ok()) return ToError(shrunk.status());
    *new_group = new dist_process_group{*std::move(shrunk)};
    return nullptr;
  });
}

DIST_EXPORT dist_error_t* dist_grow(dist_process_group_t* group, const dist_grow_options_t* options,
                                    dist_process_group_t** new_group) {
  if (group == nullptr) return NullArgument("dist_grow", "group");
  if (new_group == nullptr) return NullArgument("dist_grow", "new_group");
  *new_group = nullptr;
  if (dist_error_t* error = ForkedChildError("dist_grow", *group->group)) return error;
  dist_grow_options_t read{};
  if (options != nullptr) {
    if (dist_error_t* error =
            CheckOptionsSize("dist_grow", "dist_grow_options_t", options->struct_size,
                             offsetof(dist_grow_options_t, joiners) + sizeof(int32_t))) {
      return error;
    }
    read.timeout_ms = options->timeout_ms;
    read.joiners = options->joiners;
  }
  if (dist_error_t* error = CheckGroupCallTimeout("dist_grow", read.timeout_ms)) return error;
  if (read.joiners < 0) {
    return dist_error_new(DIST_INVALID_ARGUMENT,
                          "dist_grow: joiners %d is negative; pass how many joining processes "
                          "to admit, or 0 for every one waiting",
                          static_cast<int>(read.joiners));
  }
  return Guarded("dist_grow", [&]() -> dist_error_t* {
    const absl::Duration timeout =
        read.timeout_ms > 0 ? absl::Milliseconds(read.timeout_ms) : group->group->timeout();
    absl::StatusOr<std::unique_ptr<ProcessGroup>> grown = group->group->Grow(read.joiners, timeout);
    if (!grown.ok()) return ToError(grown.status());
    *new_group = new dist_process_group{*std::move(grown)};
    return nullptr;
  });
}

DIST_EXPORT void dist_abort(dist_process_group_t* group, const char* reason) {
  if (group == nullptr) return;
  // Aborting the child's copy would abort the parent's job.
  if (group->group->fork_owner().InForkedChild()) return;
  // Nothing to return an error to; Abort only fails if memory runs out.
  dist_error_destroy(Guarded("dist_abort", [&]() -> dist_error_t* {
    group->group->Abort(reason != nullptr ? reason : "aborted by the application");
    return nullptr;
  }));
}

DIST_EXPORT const char* dist_version(void) { return dist::kCoreVersion; }

DIST_EXPORT dist_error_t* dist_trace_dump(const dist_process_group_t* group, const char* path) {
  if (group == nullptr || !group->group) return NullArgument("dist_trace_dump", "group");
  // The recorder's entry locks are as a parent's thread left them at fork.
  if (dist_error_t* error = ForkedChildError("dist_trace_dump", *group->group)) return error;
  return Guarded("dist_trace_dump", [&] {
    absl::StatusOr<std::string> written = group->group->recorder().Dump(
        path != nullptr ? path : "", "requested by the application (dist_trace_dump)");
    return ToError(written.status());
  });
}

// ---- registry.h ---------------------------------------------------------

DIST_EXPORT dist_error_t* dist_list_plugins(const dist_plugin_info_t** infos, size_t* count) {
  if (infos == nullptr || count == nullptr) return NullArgument("dist_list_plugins", "output");
  static absl::Mutex mu;
  static std::vector<dist_plugin_info_t>* list = nullptr;
  absl::MutexLock lock(&mu);
  return Guarded("dist_list_plugins", [&]() -> dist_error_t* {
    if (list == nullptr) {
      // Published whole, or not at all if building it throws.
      auto built = std::make_unique<std::vector<dist_plugin_info_t>>();
      for (const dist::PluginRecord* record : dist::PluginRegistry::Get().ListAll()) {
        dist_plugin_info_t info{};
        info.struct_size = sizeof(info);
        info.kind = record->kind;
        info.name = record->name.c_str();
        info.path = record->path.c_str();
        info.status = record->shadowed_by.empty() ? record->status : DIST_PLUGIN_SHADOWED;
        if (!record->shadowed_by.empty()) {
          auto* reason = new std::string(
              absl::StrCat("shadowed by ", record->shadowed_by, " (earlier in the search path)"));
          info.reason = reason->c_str();
        } else {
          info.reason = record->reason.empty() ? nullptr : record->reason.c_str();
        }
        info.abi_major = record->abi_major;
        info.abi_minor = record->abi_minor;
        info.version = record->version.empty() ? nullptr : record->version.c_str();
        info.library_version =
            record->library_version.empty() ? nullptr : record->library_version.c_str();
        info.capabilities = record->capabilities;
        info.schemes = record->scheme_pointers.data();
        built->push_back(info);
      }
      list = built.release();  // lives until exit, as documented
    }
    *infos = list->data();
    *count = list->size();
    return nullptr;
  });
}

DIST_EXPORT const char* const* dist_plugin_search_path(void) {
  static std::vector<std::string>* dirs =
      new std::vector<std::string>(dist::PluginRegistry::Get().SearchPath());
  static std::vector<const char*>* pointers = [] {
    auto* p = new std::vector<const char*>();
    for (const std::string& dir : *dirs) p->push_back(dir.c_str());
    p->push_back(nullptr);
    return p;
  }();
  return pointers->data();
}

DIST_EXPORT dist_error_t* dist_load_backend(const char* name_or_path,
                                            const dist_backend_plugin_t** plugin) {
  if (name_or_path == nullptr) return NullArgument("dist_load_backend", "name_or_path");
  if (plugin == nullptr) return NullArgument("dist_load_backend", "plugin");
  return Guarded("dist_load_backend", [&]() -> dist_error_t* {
    absl::StatusOr<const dist::PluginRecord*> record =
        dist::PluginRegistry::Get().LoadBackend(name_or_path);
    if (!record.ok()) return ToError(record.status());
    *plugin = &(*record)->backend;
    return nullptr;
  });
}

DIST_EXPORT dist_error_t* dist_load_rendezvous(const char* scheme,
                                               const dist_rendezvous_plugin_t** plugin) {
  if (scheme == nullptr) return NullArgument("dist_load_rendezvous", "scheme");
  if (plugin == nullptr) return NullArgument("dist_load_rendezvous", "plugin");
  return Guarded("dist_load_rendezvous", [&]() -> dist_error_t* {
    absl::StatusOr<const dist::PluginRecord*> record =
        dist::PluginRegistry::Get().LoadRendezvous(scheme);
    if (!record.ok()) return ToError(record.status());
    *plugin = &(*record)->rendezvous;
    return nullptr;
  });
}

DIST_EXPORT const dist_host_api_t* dist_host_api(void) { return dist::HostApi(); }

DIST_EXPORT dist_error_t* dist_rendezvous(const char* url, const dist_rendezvous_hints_t* hints,
                                          int64_t timeout_ms, dist_rendezvous_result_t* result) {
  if (url == nullptr) return NullArgument("dist_rendezvous", "url");
  if (result == nullptr) return NullArgument("dist_rendezvous", "result");
  if (timeout_ms <= 0) {
    return dist_error_new(DIST_INVALID_ARGUMENT, "dist_rendezvous: timeout_ms must be positive");
  }
  // Too small to receive `store` (a 1.0 field), the result would leak the
  // store the join opened: refused before joining.
  const size_t caller_size = result->struct_size;
  if (caller_size != 0 && caller_size < dist::AbiStruct<dist_rendezvous_result_t>::kV1_0Size) {
    return dist_error_new(DIST_INVALID_ARGUMENT,
                          absl::StrCat("dist_rendezvous: result->struct_size is ", caller_size,
                                       " but every 1.x caller passes at least ",
                                       dist::AbiStruct<dist_rendezvous_result_t>::kV1_0Size,
                                       "; set it to sizeof(dist_rendezvous_result_t)")
                              .c_str());
  }
  return Guarded("dist_rendezvous", [&]() -> dist_error_t* {
    dist_rendezvous_hints_t none{};
    none.struct_size = sizeof(none);
    none.rank = -1;
    none.world_size = -1;
    absl::StatusOr<dist_rendezvous_result_t> joined =
        dist::Rendezvous(url, hints != nullptr ? *hints : none, absl::Milliseconds(timeout_ms));
    if (!joined.ok()) return ToError(joined.status());
    std::memcpy(result, &*joined,
                caller_size != 0 && caller_size < sizeof(*result) ? caller_size : sizeof(*result));
    result->struct_size = caller_size != 0 ? caller_size : sizeof(*result);
    return nullptr;
  });
}

DIST_EXPORT dist_error_t* dist_resolve_config(const dist_init_options_t* options,
                                              dist_config_entry_t** entries, size_t* count) {
  if (entries == nullptr || count == nullptr) return NullArgument("dist_resolve_config", "output");
  *entries = nullptr;
  *count = 0;
  return Guarded("dist_resolve_config", [&]() -> dist_error_t* {
    absl::StatusOr<dist::ResolvedConfig> config = dist::ResolveConfig(options);
    if (!config.ok()) return ToError(config.status());
    const std::vector<dist::ConfigOption> rows = dist::ConfigRows(*config);
    auto* out = static_cast<dist_config_entry_t*>(calloc(rows.size(), sizeof(dist_config_entry_t)));
    if (out == nullptr)
      return dist_error_new(DIST_RESOURCE_EXHAUSTED, "dist_resolve_config: out of memory");
    for (size_t i = 0; i < rows.size(); ++i) {
      out[i].struct_size = sizeof(dist_config_entry_t);
      out[i].key = strdup(rows[i].key.c_str());
      out[i].value = strdup(rows[i].value.c_str());
      out[i].source = strdup(rows[i].source.c_str());
    }
    *entries = out;
    *count = rows.size();
    return nullptr;
  });
}

DIST_EXPORT void dist_config_entries_free(dist_config_entry_t* entries, size_t count) {
  if (entries == nullptr) return;
  for (size_t i = 0; i < count; ++i) {
    free(const_cast<char*>(entries[i].key));
    free(const_cast<char*>(entries[i].value));
    free(const_cast<char*>(entries[i].source));
  }
  free(entries);
}

}  // extern "C"
