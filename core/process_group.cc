#include "core/process_group.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/config.h"
#include "core/join_check.h"
#include "core/lock_checks.h"
#include "core/logging.h"
#include "core/mpi_flavor.h"
#include "core/op_sizes.h"
#include "core/prefix_store.h"
#include "core/rendezvous.h"
#include "dist/cpp/sendrecv_order.hpp"
#include "dist/cpp/status.hpp"
#include "dist/cpp/store.hpp"
#include "dist/cpp/validate.hpp"

namespace dist {
namespace {

std::atomic<uint64_t> next_group_id{1};

dist_backend_op_fn OpFunction(const dist_backend_plugin_t& plugin, dist_collective_t kind) {
  switch (kind) {
    case DIST_COLL_ALL_REDUCE:
      return plugin.all_reduce;
    case DIST_COLL_BROADCAST:
      return plugin.broadcast;
    case DIST_COLL_REDUCE:
      return plugin.reduce;
    case DIST_COLL_ALL_GATHER:
      return plugin.all_gather;
    case DIST_COLL_GATHER:
      return plugin.gather;
    case DIST_COLL_SCATTER:
      return plugin.scatter;
    case DIST_COLL_REDUCE_SCATTER:
      return plugin.reduce_scatter;
    case DIST_COLL_ALL_TO_ALL:
      return plugin.all_to_all;
    case DIST_COLL_BARRIER:
      return plugin.barrier;
    case DIST_COLL_SEND:
      return plugin.send;
    case DIST_COLL_RECV:
      return plugin.recv;
    default:
      return nullptr;
  }
}

uint32_t OpsMask(const dist_backend_capabilities_t& caps, dist_collective_t kind) {
  switch (kind) {
    case DIST_COLL_ALL_REDUCE:
      return caps.all_reduce_ops;
    case DIST_COLL_REDUCE:
      return caps.reduce_ops;
    case DIST_COLL_REDUCE_SCATTER:
      return caps.reduce_scatter_ops;
    default:
      return ~0u;
  }
}

// The device whose backend runs the operation on this rank.
dist_device_type_t OpDevice(dist_collective_t kind, const dist_op_args_t& args, int rank) {
  switch (kind) {
    case DIST_COLL_RECV:
      return args.recv.device.type;
    case DIST_COLL_BROADCAST:
    case DIST_COLL_SCATTER:
      return args.root == rank ? args.send.device.type : args.recv.device.type;
    default:
      return args.send.device.type;
  }
}

std::string SupportedDevices(uint32_t mask) {
  std::vector<std::string> names;
  for (int d = 0; d < DIST_DEVICE_TYPE_COUNT; ++d) {
    if (mask & (1u << d))
      names.push_back(dist_device_type_name(static_cast<dist_device_type_t>(d)));
  }
  return names.empty() ? "none" : absl::StrJoin(names, ", ");
}

dist_comm_config_t MakeCommConfig(int32_t rank, int32_t world_size, int32_t local_rank,
                                  int32_t local_world_size, dist_store_t* store,
                                  absl::Duration timeout, const std::vector<dist_kv_t>& options,
                                  const std::string& group_name) {
  dist_comm_config_t config{};
  config.struct_size = sizeof(config);
  config.rank = rank;
  config.world_size = world_size;
  config.local_rank = local_rank;
  config.local_world_size = local_world_size;
  config.store = store;
  config.timeout_ms = absl::ToInt64Milliseconds(timeout);
  config.options = options.empty() ? nullptr : options.data();
  config.num_options = options.size();
  config.group_name = group_name.c_str();
  config.device_index = -1;
  return config;
}

// Whether `plugin`'s comm_split makes a communicator of `ranks` (member i
// being ranks[i]): any split of ascending ranks, others where the backend
// declares DIST_CAP_SPLIT_ORDERED (backend ABI 1.6).
bool SplitsFromParent(const PluginRecord& plugin, const std::vector<int32_t>& ranks) {
  if (plugin.backend.comm_split == nullptr) return false;
  return std::is_sorted(ranks.begin(), ranks.end()) ||
         (plugin.abi_minor >= 6 && (plugin.capabilities.flags & DIST_CAP_SPLIT_ORDERED) != 0);
}

// "12.3 ms": start-up phases are milliseconds long.
std::string FormatMs(absl::Duration d) {
  return absl::StrFormat("%.1f ms", absl::ToDoubleMilliseconds(d));
}

// The rendezvous of a host that brings its own store: the join check alone
// (every rank there, with matching versions), then the host's rank and size.
absl::StatusOr<dist_rendezvous_result_t> JoinThroughHostStore(StoreOwner& store,
                                                              const ResolvedConfig& config,
                                                              absl::Duration timeout) {
  absl::Status joined = RunJoinCheck(store.get(), config.rank, config.world_size,
                                     config.init_method.value, timeout, absl::Now() + timeout);
  if (!joined.ok()) {
    store.MarkFailed(std::string(joined.message()));
    return joined;
  }
  dist_rendezvous_result_t result{};
  result.struct_size = sizeof(result);
  result.rank = config.rank;
  result.world_size = config.world_size;
  result.local_rank = -1;
  result.local_world_size = -1;
  return result;
}

}  // namespace

StoreOwner::~StoreOwner() {
  if (store_ == nullptr) return;
  std::string failure;
  {
    absl::MutexLock lock(&mu_);
    failure = failure_;
  }
  if (failure.empty()) {
    store_->release(store_->ctx);
  } else {
    ReleaseStoreFailed(store_, failure);
  }
}

void StoreOwner::MarkFailed(const std::string& reason) {
  absl::MutexLock lock(&mu_);
  if (failure_.empty()) failure_ = reason.empty() ? "an operation failed" : reason;
}

void StoreOwner::ClearFailure() {
  absl::MutexLock lock(&mu_);
  failure_.clear();
}

absl::StatusOr<std::unique_ptr<ProcessGroup>> ProcessGroup::Create(
    const dist_init_options_t* options) {
  // Where start-up time goes, for the "ready" line (operators asking why
  // dist_init is slow look there first).
  const absl::Time start = absl::Now();
  // A store from the host is the core's from the call on (dist.h), so it is
  // owned before anything can fail.
  std::shared_ptr<StoreOwner> host_store;
  if (dist_store_t* store = HostStoreOf(options)) host_store = std::make_shared<StoreOwner>(store);
  absl::StatusOr<ResolvedConfig> config = ResolveConfig(options);
  if (!config.ok()) return config.status();
  SetLogLevel(config->log_level_value);
  ConfigureAbslLockChecks();

  std::unique_ptr<ProcessGroup> group(new ProcessGroup());
  group->name_ = config->group_name;
  group->timeout_ = config->timeout_duration;
  group->timeout_ms_ = absl::ToInt64Milliseconds(group->timeout_);
  group->comm_for_device_.fill(-1);
  for (const ConfigOption& option : config->options) {
    if (option.key == DIST_OPTION_INIT_METHOD) continue;  // the core's to set, below
    group->options_.emplace_back(option.key, option.value);
  }
  // Backends that look for the rendezvous host read the init method the
  // job really uses, not only the environment's.
  group->options_.emplace_back(DIST_OPTION_INIT_METHOD, config->init_method.value);
  for (const auto& [key, value] : group->options_) {
    group->option_views_.push_back({key.c_str(), value.c_str()});
  }

  // Backends first: a missing or unusable backend should fail before the
  // rendezvous makes other ranks wait.
  for (const DeviceAssignment& assignment : config->device_map) {
    absl::StatusOr<const PluginRecord*> plugin =
        PluginRegistry::Get().LoadBackend(assignment.backend);
    if (!plugin.ok()) {
      return absl::Status(
          plugin.status().code(),
          absl::StrCat(plugin.status().message(), " [backend from ", config->backend.source, "]"));
    }
    const uint32_t devices = (*plugin)->capabilities.device_types;
    int index = -1;
    for (size_t i = 0; i < group->comms_.size(); ++i) {
      if (group->comms_[i].plugin == *plugin) index = static_cast<int>(i);
    }
    if (index < 0) {
      group->comms_.push_back(BackendComm{*plugin, nullptr, nullptr});
      index = static_cast<int>(group->comms_.size() - 1);
    }
    if (assignment.device.has_value()) {
      if ((devices & (1u << *assignment.device)) == 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "backend '", (*plugin)->name, "' does not take ",
            dist_device_type_name(*assignment.device),
            " buffers (it takes: ", SupportedDevices(devices), "); fix the device map '",
            config->backend.value, "' (", config->backend.source, ")"));
      }
      group->comm_for_device_[*assignment.device] = index;
    } else {
      for (int d = 0; d < DIST_DEVICE_TYPE_COUNT; ++d) {
        if ((devices & (1u << d)) && group->comm_for_device_[d] < 0)
          group->comm_for_device_[d] = index;
      }
    }
  }

  const absl::Time plugins_loaded = absl::Now();
  dist_rendezvous_hints_t hints{};
  hints.struct_size = sizeof(hints);
  hints.rank = config->rank;
  hints.world_size = config->world_size;
  hints.options = group->option_views_.empty() ? nullptr : group->option_views_.data();
  hints.num_options = group->option_views_.size();
  group->join_prefix_ = absl::StrCat("dist/", group->name_, "/join/");
  if (config->join_enabled) {
    DIST_RETURN_IF_ERROR(group->JoinRunningGroup(*config, hints, host_store));
  } else {
    absl::StatusOr<dist_rendezvous_result_t> joined =
        host_store ? JoinThroughHostStore(*host_store, *config, group->timeout_)
                   : Rendezvous(config->init_method.value, hints, group->timeout_);
    if (!joined.ok()) return joined.status();
    group->store_ = host_store ? host_store : std::make_shared<StoreOwner>(joined->store);
    group->rank_ = joined->rank;
    group->world_size_ = joined->world_size;
    group->local_rank_ = joined->local_rank;
    group->local_world_size_ = joined->local_world_size;
    group->parent_rank_ = joined->rank;
    group->store_prefix_ = absl::StrCat("dist/", group->name_, "/");
  }
  SetLogRank(group->rank_);
  group->global_rank_ = group->rank_;
  const absl::Time joined_at = absl::Now();

  for (BackendComm& comm : group->comms_) {
    absl::StatusOr<dist_store_t*> store = MakePrefixStore(
        group->store_->get(), absl::StrCat(group->store_prefix_, comm.plugin->name, "/"));
    if (!store.ok()) return store.status();
    comm.store = *store;
    const dist_comm_config_t comm_config = MakeCommConfig(
        group->rank_, group->world_size_, group->local_rank_, group->local_world_size_, comm.store,
        group->timeout_, group->option_views_, group->name_);
    absl::Status created = TakeError(comm.plugin->backend.comm_create(&comm_config, &comm.comm));
    if (!created.ok()) {
      return absl::Status(created.code(),
                          absl::StrCat("backend '", comm.plugin->name, "': ", created.message()));
    }
  }
  DIST_RETURN_IF_ERROR(group->StartTracing(
      {config->debug_detail, config->trace_entries_value, config->trace_dir.value}));
  group->survival_settings_ = {config->survival_enabled, config->failure_detect,
                               config->failure_detect / 5};
  DIST_RETURN_IF_ERROR(group->SetUpHierarchy(config->hierarchical_auto));
  DIST_RETURN_IF_ERROR(group->StartSurvival());
  const absl::Time ready = absl::Now();
  LogLine(DIST_LOG_INFO, "core",
          absl::StrCat("group '", group->name_, "' ready: rank ", group->rank_, " of ",
                       group->world_size_, " via ", config->init_method.value, " in ",
                       FormatMs(ready - start), " (config and plugins ",
                       FormatMs(plugins_loaded - start), ", rendezvous and join check ",
                       FormatMs(joined_at - plugins_loaded), ", backend set-up ",
                       FormatMs(ready - joined_at), ")"));
  return group;
}

ProcessGroup::~ProcessGroup() {
  revocation_->SetPoll(nullptr);  // work handles that outlive the group stop asking
  survival_.reset();              // its thread may abort the communicators
  hierarchy_.reset();             // subgroups: before the communicators they came from
  {
    absl::MutexLock lock(&variable_count_mu_);
    variable_count_group_.reset();  // a subgroup: before the communicators it came from
  }
  for (BackendComm& comm : comms_) {
    if (comm.comm != nullptr) comm.plugin->backend.comm_destroy(comm.comm);
    if (comm.store != nullptr) comm.store->release(comm.store->ctx);
  }
}

absl::StatusOr<std::unique_ptr<ProcessGroup>> ProcessGroup::NewGroup(std::vector<int32_t> ranks) {
  if (rank_ < 0) return NotMemberError();
  if (ranks.empty()) return absl::InvalidArgumentError("new_group: the rank list is empty");
  std::sort(ranks.begin(), ranks.end());
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] < 0 || ranks[i] >= world_size_) {
      return absl::InvalidArgumentError(
          absl::StrCat("new_group: rank ", ranks[i], " is outside [0, ", world_size_, ")"));
    }
    if (i > 0 && ranks[i] == ranks[i - 1]) {
      return absl::InvalidArgumentError(
          absl::StrCat("new_group: rank ", ranks[i], " is listed twice"));
    }
  }
  const int id = ++subgroup_counter_;
  return MakeChild(ranks, absl::StrCat(name_, ".", id), absl::StrCat(store_prefix_, "sub", id, "/"),
                   /*may_split=*/true, timeout_);
}

absl::StatusOr<std::unique_ptr<ProcessGroup>> ProcessGroup::Split(int32_t color, int32_t key) {
  if (rank_ < 0) return NotMemberError();
  const int id = ++subgroup_counter_;  // the same on every rank: splits are collective
  const std::string prefix = absl::StrCat(store_prefix_, "split", id, "/");
  // Every rank's (colour, key), through the store: it works the same on
  // every backend, and a split is set-up, not a hot path.
  const StoreView store(store_->get());
  DIST_RETURN_IF_ERROR(
      store.Set(absl::StrCat(prefix, "rank", rank_), absl::StrCat(color, " ", key)));
  std::map<int32_t, std::vector<std::pair<int32_t, int32_t>>> members;  // colour -> (key, rank)
  for (int32_t r = 0; r < world_size_; ++r) {
    absl::StatusOr<std::string> entry = store.Get(absl::StrCat(prefix, "rank", r), timeout_);
    if (!entry.ok()) {
      return absl::Status(entry.status().code(),
                          absl::StrCat("split_group: rank ", r, " of ", Description(),
                                       " did not give its colour: ", entry.status().message(),
                                       "; every rank of the group must call split_group"));
    }
    int32_t their_color = 0, their_key = 0;
    const std::vector<std::string> parts = absl::StrSplit(*entry, ' ');
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &their_color) ||
        !absl::SimpleAtoi(parts[1], &their_key)) {
      return absl::DataLossError(absl::StrCat("split_group: rank ", r, "'s entry '", *entry,
                                              "' in the store is not 'colour key'"));
    }
    if (their_color >= 0) members[their_color].push_back({their_key, r});
  }
  std::unique_ptr<ProcessGroup> mine;
  // Colours in ascending order on every rank. A colour is split from the
  // parent's communicators where a backend can (mpi: MPI_Comm_split with the
  // keys), which every parent rank joins; else it is created anew by its
  // members alone.
  for (auto& [group_color, entries] : members) {
    std::sort(entries.begin(), entries.end());
    std::vector<int32_t> ranks;
    for (const auto& entry : entries) ranks.push_back(entry.second);
    bool splits = false;
    for (const BackendComm& comm : comms_) splits = splits || SplitsFromParent(*comm.plugin, ranks);
    const bool member = group_color == color;
    if (!member && !splits) continue;
    absl::StatusOr<std::unique_ptr<ProcessGroup>> child =
        MakeChild(ranks, absl::StrCat(name_, ".split", id, ".", group_color),
                  absl::StrCat(prefix, "color", group_color, "/"), /*may_split=*/splits, timeout_);
    if (!child.ok()) {
      return absl::Status(child.status().code(), absl::StrCat("split_group (colour ", group_color,
                                                              "): ", child.status().message()));
    }
    if (member) mine = *std::move(child);
  }
  return mine;
}

absl::StatusOr<std::unique_ptr<ProcessGroup>> ProcessGroup::MakeChild(
    const std::vector<int32_t>& ranks, std::string name, std::string prefix, bool may_split,
    absl::Duration setup_timeout, const PluginRecord* only) {
  std::unique_ptr<ProcessGroup> group(new ProcessGroup());
  group->name_ = std::move(name);
  group->timeout_ = timeout_;
  group->timeout_ms_ = timeout_ms_;
  group->store_ = store_;
  group->store_prefix_ = std::move(prefix);
  group->join_prefix_ = absl::StrCat(group->store_prefix_, "join/");  // shrink, grow: the job's
  group->options_ = options_;
  for (const auto& [key, value] : group->options_) {
    group->option_views_.push_back({key.c_str(), value.c_str()});
  }
  group->comm_for_device_ = comm_for_device_;
  // The backends to make communicators of, and the parent's communicator of
  // each (nullptr: none to split from).
  std::vector<std::pair<const PluginRecord*, dist_backend_comm_t*>> backends;
  if (only != nullptr) {
    group->comm_for_device_.fill(-1);
    group->comm_for_device_[DIST_DEVICE_CPU] = 0;
    backends.push_back({only, nullptr});
  } else {
    for (const BackendComm& comm : comms_) backends.push_back({comm.plugin, comm.comm});
  }
  group->parent_ranks_ = ranks;
  group->parent_rank_ = rank_;
  const auto me = std::find(ranks.begin(), ranks.end(), rank_);
  group->rank_ = me == ranks.end() ? -1 : static_cast<int32_t>(me - ranks.begin());
  group->world_size_ = static_cast<int32_t>(ranks.size());
  for (const auto& [plugin, parent_comm] : backends) {
    BackendComm comm{plugin, nullptr, nullptr};
    absl::StatusOr<dist_store_t*> store =
        MakePrefixStore(store_->get(), absl::StrCat(group->store_prefix_, plugin->name, "/"));
    if (!store.ok()) return store.status();
    comm.store = *store;
    group->comms_.push_back(comm);
    BackendComm& made = group->comms_.back();
    const dist_comm_config_t config =
        MakeCommConfig(group->rank_, group->world_size_, -1, -1, made.store, setup_timeout,
                       group->option_views_, group->name_);
    absl::Status status;
    if (may_split && parent_comm != nullptr && SplitsFromParent(*plugin, ranks)) {
      status = TakeError(
          plugin->backend.comm_split(parent_comm, ranks.data(), ranks.size(), &config, &made.comm));
    } else if (group->rank_ >= 0) {
      status = TakeError(plugin->backend.comm_create(&config, &made.comm));
    }
    if (!status.ok()) {
      const std::string what = only != nullptr ? absl::StrCat("group '", group->name_, "' [")
                               : may_split     ? "new_group ["
                                               : "shrink to [";
      return absl::Status(status.code(),
                          absl::StrCat(what, absl::StrJoin(ranks, ","), "] on backend '",
                                       plugin->name, "': ", status.message()));
    }
  }
  group->global_rank_ = global_rank_;
  DIST_RETURN_IF_ERROR(group->StartTracing(tracing_->options()));
  group->survival_settings_ = survival_settings_;
  DIST_RETURN_IF_ERROR(group->StartSurvival());
  return group;
}

absl::Status ProcessGroup::StartTracing(const TraceOptions& options) {
  std::vector<std::string> backends;
  for (const BackendComm& comm : comms_) backends.push_back(comm.plugin->name);
  dist_store_t* check_store = nullptr;
  if (options.debug_detail && rank_ >= 0) {
    absl::StatusOr<dist_store_t*> store =
        MakePrefixStore(store_->get(), absl::StrCat(store_prefix_, "check/"));
    if (!store.ok()) return store.status();
    check_store = *store;
  }
  tracing_ = std::make_unique<GroupTracing>(options, name_, global_rank_, rank_, world_size_,
                                            absl::StrJoin(backends, ","), check_store, timeout_);
  return absl::OkStatus();
}

absl::Status ProcessGroup::NotMemberError() const {
  return absl::FailedPreconditionError(absl::StrCat(
      "this process (rank ", parent_rank_, " of the parent group) is not a member of group '",
      name_, "' (ranks ", absl::StrJoin(parent_ranks_, ","), "); only members may use it"));
}

std::string ProcessGroup::Description() const {
  return absl::StrCat("process group '", name_, "'");
}

const char* ProcessGroup::BackendName(dist_device_type_t device) const {
  if (static_cast<int>(device) < 0 || device >= DIST_DEVICE_TYPE_COUNT) return nullptr;
  const int index = comm_for_device_[device];
  return index < 0 ? nullptr : comms_[index].plugin->name.c_str();
}

absl::StatusOr<const BackendComm*> ProcessGroup::CommFor(dist_collective_t kind,
                                                         const dist_op_args_t& args) const {
  int index = -1;
  if (kind == DIST_COLL_BARRIER) {
    index = comm_for_device_[DIST_DEVICE_CPU] >= 0 ? comm_for_device_[DIST_DEVICE_CPU] : 0;
  } else {
    const dist_device_type_t device = OpDevice(kind, args, rank_);
    if (static_cast<int>(device) < 0 || device >= DIST_DEVICE_TYPE_COUNT) {
      return absl::InvalidArgumentError(absl::StrCat(
          dist_collective_name(kind), ": unknown device type ", static_cast<int>(device)));
    }
    index = comm_for_device_[device];
    if (index < 0) {
      std::vector<std::string> served;
      for (const BackendComm& comm : comms_) served.push_back(comm.plugin->name);
      return absl::UnimplementedError(absl::StrCat(
          dist_collective_name(kind), ": no backend of group '", name_, "' takes ",
          dist_device_type_name(device), " buffers (backends: ", absl::StrJoin(served, ", "),
          "); add one with a device map, e.g. DIST_BACKEND=cpu:gloo,cuda:nccl"));
    }
  }
  return &comms_[index];
}

ProcessGroup::ProcessGroup() : id_(next_group_id.fetch_add(1, std::memory_order_relaxed)) {}

absl::StatusOr<ProcessGroup::Route> ProcessGroup::RouteOf(dist_collective_t kind,
                                                          const dist_op_args_t& args) const {
  // Training loops repeat the same calls; the checks cost about a third of
  // a small blocking operation's instructions. Per thread, so no lock; one
  // entry per operation kind, so that calls that alternate (a send and a
  // recv, an all_reduce and a broadcast) each find theirs.
  struct Last {
    uint64_t group = 0;  // 0: empty
    dist_op_args_t args;
    Route route;
  };
  thread_local Last last_of[DIST_COLLECTIVE_COUNT];
  if (static_cast<unsigned>(kind) >= DIST_COLLECTIVE_COUNT) return CheckAndRoute(kind, args);
  Last& last = last_of[kind];
  if (last.group == id_ && std::memcmp(&last.args, &args, sizeof(args)) == 0) return last.route;
  absl::StatusOr<Route> route = CheckAndRoute(kind, args);
  if (route.ok()) {
    last.group = id_;
    std::memcpy(&last.args, &args, sizeof(args));
    last.route = *route;
  }
  return route;
}

absl::StatusOr<ProcessGroup::Route> ProcessGroup::CheckAndRoute(dist_collective_t kind,
                                                                const dist_op_args_t& args) const {
  if (rank_ < 0) return NotMemberError();
  absl::StatusOr<const BackendComm*> comm = CommFor(kind, args);
  if (!comm.ok()) return comm.status();
  DIST_RETURN_IF_ERROR(CheckOpSizes(kind, args, rank_, world_size_));
  DIST_RETURN_IF_ERROR(ValidateOpArgs(kind, args, rank_, world_size_));
  const PluginRecord& plugin = *(*comm)->plugin;
  dist_backend_op_fn fn = OpFunction(plugin.backend, kind);
  if (fn == nullptr || (plugin.capabilities.collectives != 0 &&
                        (plugin.capabilities.collectives & (1u << kind)) == 0)) {
    return absl::UnimplementedError(absl::StrCat("backend '", plugin.name, "' does not implement ",
                                                 dist_collective_name(kind)));
  }
  if (kind != DIST_COLL_BARRIER) {
    const dist_dtype_t dtype = kind == DIST_COLL_RECV ? args.recv.dtype : args.send.dtype;
    if (plugin.capabilities.dtypes != 0 && (plugin.capabilities.dtypes & (1u << dtype)) == 0) {
      return absl::UnimplementedError(absl::StrCat("backend '", plugin.name, "' does not support ",
                                                   dist_dtype_name(dtype), " for ",
                                                   dist_collective_name(kind)));
    }
  }
  if (IsReducing(kind) && (OpsMask(plugin.capabilities, kind) & (1u << args.op)) == 0) {
    return absl::UnimplementedError(absl::StrCat("backend '", plugin.name, "' does not support ",
                                                 "reduce op ", dist_reduce_op_name(args.op),
                                                 " for ", dist_collective_name(kind)));
  }
  return Route{*comm, &plugin, fn};
}

absl::Status ProcessGroup::Prepare(dist_collective_t kind, const dist_op_args_t& args,
                                   Prepared* out) {
  if (revocation_->revoked()) return revocation_->status();
  absl::StatusOr<Route> route = RouteOf(kind, args);
  if (!route.ok()) return route.status();
  out->route = *route;
  // Only calls that reach the backend count: a local argument error above
  // leaves the sequence numbers of all ranks in step.
  DIST_RETURN_IF_ERROR(tracing_->Enter(
      MakeFingerprint(kind, args,
                      kind == DIST_COLL_BARRIER ? DIST_DEVICE_CPU : OpDevice(kind, args, rank_)),
      [this](const std::string& reason) { AbortComms(reason); }, &out->op));
  tracing_->Started(out->op);
  out->args = args;
  out->args.struct_size = sizeof(out->args);
  out->args.flags |= DIST_OP_ARGS_CHECKED;
  return absl::OkStatus();
}

namespace {

absl::Status NoWork(const PluginRecord& plugin, dist_collective_t kind) {
  return absl::InternalError(absl::StrCat("backend '", plugin.name, "' returned no work for ",
                                          dist_collective_name(kind)));
}

}  // namespace

absl::StatusOr<dist_work_t*> ProcessGroup::Submit(dist_collective_t kind,
                                                  const dist_op_args_t& args) {
  Prepared prepared;
  DIST_RETURN_IF_ERROR(Prepare(kind, args, &prepared));
  const Route& route = prepared.route;
  dist_backend_work_t* work = nullptr;
  if (absl::Status started = Start(kind, prepared, &work); !started.ok()) {
    return tracing_->Failed(prepared.op, started);
  }
  auto* handle = new dist_work();
  handle->plugin = &route.plugin->backend;
  handle->work = work;
  handle->default_timeout_ms = timeout_ms_;
  handle->kind = kind;
  handle->recorder = tracing_->recorder();
  handle->trace_id = prepared.op.trace_id;
  handle->store = store_;
  handle->revocation = revocation_;
  return handle;
}

absl::Status ProcessGroup::Run(dist_collective_t kind, const dist_op_args_t& args) {
  Prepared prepared;
  DIST_RETURN_IF_ERROR(Prepare(kind, args, &prepared));
  const dist_backend_plugin_t& backend = prepared.route.plugin->backend;
  const int64_t timeout_ms = timeout_ms_;
  absl::Status status;
  if (hierarchy_ != nullptr && hierarchy_->Takes(kind, prepared.args)) {
    status = hierarchy_->Run(kind, prepared.args);
  } else if (backend.run != nullptr) {
    // One call, no work handle (ABI 1.2); its errors are reported as a
    // wait's, whether the backend refused the operation or it failed.
    status = TakeError(backend.run(prepared.route.comm->comm, kind, &prepared.args, timeout_ms));
    if (!status.ok()) status = tracing_->Explain(prepared.op, std::move(status));
  } else {
    bool issued = false;
    status = IssueAndWait(kind, prepared, timeout_ms, &issued);
    if (!issued) return status;  // recorded as it failed
  }
  if (status.ok()) {
    tracing_->recorder()->End(prepared.op.trace_id, status);  // every call's path: no helper
    return status;
  }
  status = RevokedOr(std::move(status));
  return FailBlocking(dist_collective_name(kind), std::move(status), {prepared.op.trace_id});
}

absl::Status ProcessGroup::RunSendRecv(const dist_op_args_t& send, const dist_op_args_t& recv) {
  // The recv's checks first: an argument error must reach neither the
  // trace nor the backend, so that every rank's sequence numbers stay in step.
  DIST_RETURN_IF_ERROR(RouteOf(DIST_COLL_RECV, recv).status());
  Prepared send_op;
  DIST_RETURN_IF_ERROR(Prepare(DIST_COLL_SEND, send, &send_op));
  Prepared recv_op;
  if (absl::Status status = Prepare(DIST_COLL_RECV, recv, &recv_op); !status.ok()) {
    // The send is numbered and recorded already: it ends with the recv's error.
    return tracing_->Failed(send_op.op, status);
  }
  const int64_t timeout_ms = timeout_ms_;
  const dist_backend_plugin_t& backend = send_op.route.plugin->backend;
  absl::Status status;
  if (backend.run_sendrecv != nullptr && send_op.route.comm == recv_op.route.comm) {
    status = TakeError(
        backend.run_sendrecv(send_op.route.comm->comm, &send_op.args, &recv_op.args, timeout_ms));
  } else {
    // As the host would do it: issue both, then wait for both, within one
    // timeout. Both are issued even when one fails to start (the peers'
    // operations need their matches), in an order that cannot deadlock on a
    // backend that runs them in issue order (sendrecv_order.hpp).
    const absl::Time deadline = absl::Now() + absl::Milliseconds(timeout_ms);
    dist_backend_work_t* works[2] = {nullptr, nullptr};
    const Prepared* ops[2] = {&send_op, &recv_op};
    constexpr dist_collective_t kKinds[2] = {DIST_COLL_SEND, DIST_COLL_RECV};
    absl::Status started[2];
    const bool send_first = SendRecvSendsFirst(rank_, send.peer);
    for (int i : {send_first ? 0 : 1, send_first ? 1 : 0}) {
      started[i] = Start(kKinds[i], *ops[i], &works[i]);
    }
    for (int i = 0; i < 2; ++i) {
      absl::Status done = started[i];
      if (works[i] != nullptr) {
        const dist_backend_plugin_t& table = ops[i]->route.plugin->backend;
        if (done.ok()) {
          const int64_t left =
              std::max<int64_t>(0, absl::ToInt64Milliseconds(deadline - absl::Now()));
          done = TakeError(table.work_wait(works[i], left));
        }
        table.work_destroy(works[i]);
      }
      if (status.ok()) status = std::move(done);
    }
  }
  if (status.ok()) {
    tracing_->recorder()->End(send_op.op.trace_id, status);
    tracing_->recorder()->End(recv_op.op.trace_id, status);
    return status;
  }
  status = tracing_->Explain(recv_op.op, tracing_->Explain(send_op.op, std::move(status)));
  status = RevokedOr(std::move(status));
  return FailBlocking("sendrecv", std::move(status), {send_op.op.trace_id, recv_op.op.trace_id});
}

absl::Status ProcessGroup::IssueAndWait(dist_collective_t kind, const Prepared& prepared,
                                        int64_t timeout_ms, bool* issued) {
  dist_backend_work_t* work = nullptr;
  absl::Status started = Start(kind, prepared, &work);
  *issued = started.ok();
  if (!started.ok()) return tracing_->Failed(prepared.op, started);
  const dist_backend_plugin_t& backend = prepared.route.plugin->backend;
  absl::Status status = TakeError(backend.work_wait(work, timeout_ms));
  backend.work_destroy(work);
  return status;
}

absl::Status ProcessGroup::Start(dist_collective_t kind, const Prepared& prepared,
                                 dist_backend_work_t** work) {
  const Route& route = prepared.route;
  absl::Status started = TakeError(route.fn(route.comm->comm, &prepared.args, work));
  if (started.ok() && *work == nullptr) started = NoWork(*route.plugin, kind);
  return started;
}

absl::Status ProcessGroup::FailBlocking(const char* what, absl::Status status,
                                        std::initializer_list<uint64_t> trace_ids) {
  if (store_ != nullptr) store_->MarkFailed(std::string(status.message()));
  if (status.code() == absl::StatusCode::kDeadlineExceeded) {
    // The operation is stuck somewhere in the group: abort so that this
    // rank's later calls fail at once instead of queueing behind it.
    const std::string reason = absl::StrCat(what, " on rank ", rank_, " did not finish within ",
                                            absl::FormatDuration(timeout_), ": ", status.message());
    AbortComms(reason);
    status = absl::DeadlineExceededError(absl::StrCat(reason, "; group '", name_, "' aborted"));
  }
  for (uint64_t trace_id : trace_ids) tracing_->recorder()->End(trace_id, status);
  tracing_->recorder()->DumpAfterFailure(std::string(status.message()));
  return status;
}

void ProcessGroup::Abort(const std::string& reason) {
  if (store_ != nullptr) store_->MarkFailed(reason);
  AbortComms(reason);
  tracing_->recorder()->DumpAfterFailure(absl::StrCat("group '", name_, "' aborted: ", reason));
}

void ProcessGroup::AbortComms(const std::string& reason) {
  if (hierarchy_ != nullptr) hierarchy_->Abort(reason);
  for (BackendComm& comm : comms_) {
    if (comm.comm != nullptr && comm.plugin->backend.comm_abort != nullptr) {
      comm.plugin->backend.comm_abort(comm.comm, reason.c_str());
    }
  }
}

}  // namespace dist
