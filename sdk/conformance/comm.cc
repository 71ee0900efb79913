#include "sdk/conformance/comm.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "dist/cpp/sendrecv_order.hpp"
#include "dist/cpp/status.hpp"
#include "dist/dist.h"
#include "dist/registry.h"

namespace dist::conformance {
namespace {

// ---- The raw ABI --------------------------------------------------------------

dist_backend_op_fn OpFn(const dist_backend_plugin_t& t, dist_collective_t coll) {
  switch (coll) {
    case DIST_COLL_ALL_REDUCE:
      return t.all_reduce;
    case DIST_COLL_BROADCAST:
      return t.broadcast;
    case DIST_COLL_REDUCE:
      return t.reduce;
    case DIST_COLL_ALL_GATHER:
      return t.all_gather;
    case DIST_COLL_GATHER:
      return t.gather;
    case DIST_COLL_SCATTER:
      return t.scatter;
    case DIST_COLL_REDUCE_SCATTER:
      return t.reduce_scatter;
    case DIST_COLL_ALL_TO_ALL:
      return t.all_to_all;
    case DIST_COLL_BARRIER:
      return t.barrier;
    case DIST_COLL_SEND:
      return t.send;
    case DIST_COLL_RECV:
      return t.recv;
    default:
      return nullptr;
  }
}

class AbiWork : public Work {
 public:
  AbiWork(const dist_backend_plugin_t* table, dist_backend_work_t* work)
      : table_(table), work_(work) {}
  ~AbiWork() override { table_->work_destroy(work_); }

  absl::Status Wait(int64_t timeout_ms) override {
    return TakeError(table_->work_wait(work_, timeout_ms));
  }
  absl::Status Test(bool* done) override {
    int flag = 0;
    absl::Status status = TakeError(table_->work_test(work_, &flag));
    *done = flag != 0;
    return status;
  }

 private:
  const dist_backend_plugin_t* table_;
  dist_backend_work_t* work_;
};

// What every communicator of one run shares: the plugin and the store the
// rendezvous returned (each communicator gets its own prefix of it).
struct AbiShared {
  LoadedPlugin plugin;
  const dist_host_api_t* host = nullptr;
  dist_store_t* root_store = nullptr;
  int64_t timeout_ms = 60000;
  ~AbiShared() {
    if (root_store != nullptr) root_store->release(root_store->ctx);
  }
};

class StoreRef {
 public:
  StoreRef() = default;
  explicit StoreRef(dist_store_t* store) : store_(store) {}
  StoreRef(StoreRef&& other) noexcept : store_(std::exchange(other.store_, nullptr)) {}
  ~StoreRef() {
    if (store_ != nullptr) store_->release(store_->ctx);
  }
  dist_store_t* get() const { return store_; }

 private:
  dist_store_t* store_ = nullptr;
};

absl::StatusOr<StoreRef> PrefixedStore(const AbiShared& shared, const std::string& name) {
  dist_store_t* out = nullptr;
  const std::string prefix = absl::StrCat("conformance/", name, "/");
  DIST_RETURN_IF_ERROR(
      TakeError(shared.host->store_with_prefix(shared.root_store, prefix.c_str(), &out)));
  return StoreRef(out);
}

dist_comm_config_t MakeConfig(int32_t rank, int32_t world, dist_store_t* store, int64_t timeout_ms,
                              const std::string& name) {
  dist_comm_config_t config;
  std::memset(&config, 0, sizeof(config));
  config.struct_size = sizeof(config);
  config.rank = rank;
  config.world_size = world;
  config.local_rank = -1;
  config.local_world_size = -1;
  config.store = store;
  config.timeout_ms = timeout_ms;
  config.group_name = name.c_str();
  config.device_index = -1;
  return config;
}

// `value` as a caller of another 1.x SDK would pass it: struct_size says
// `struct_size`, and what lies past the fields (to the end of the block) is
// garbage the callee must not read.
template <typename T>
std::vector<unsigned char> SizedBlock(const T& value, size_t struct_size) {
  std::vector<unsigned char> block(std::max(struct_size, sizeof(T)), 0x7f);
  std::memcpy(block.data(), &value, std::min(struct_size, sizeof(T)));
  std::memcpy(block.data(), &struct_size, sizeof(struct_size));
  return block;
}

}  // namespace

absl::Status Comm::SendRecv(const dist_op_args_t& send, const dist_op_args_t& recv,
                            int64_t timeout_ms) {
  absl::StatusOr<std::unique_ptr<Work>> sent = absl::UnknownError("not started");
  absl::StatusOr<std::unique_ptr<Work>> received = absl::UnknownError("not started");
  if (SendRecvSendsFirst(rank(), send.peer)) {
    sent = Start(DIST_COLL_SEND, send);
    received = Start(DIST_COLL_RECV, recv);
  } else {
    received = Start(DIST_COLL_RECV, recv);
    sent = Start(DIST_COLL_SEND, send);
  }
  absl::Status status = sent.ok() ? (*sent)->Wait(timeout_ms) : sent.status();
  absl::Status recv_status = received.ok() ? (*received)->Wait(timeout_ms) : received.status();
  return status.ok() ? recv_status : status;
}

namespace {

class AbiComm : public Comm {
 public:
  AbiComm(std::shared_ptr<AbiShared> shared, StoreRef store, dist_backend_comm_t* comm,
          int32_t rank, int32_t world, int64_t timeout_ms)
      : shared_(std::move(shared)),
        store_(std::move(store)),
        comm_(comm),
        rank_(rank),
        world_(world),
        timeout_ms_(timeout_ms) {}
  // The communicator goes before its store (comm_destroy may still use it).
  ~AbiComm() override { table().comm_destroy(comm_); }

  int32_t rank() const override { return rank_; }
  int32_t world_size() const override { return world_; }

  absl::StatusOr<std::unique_ptr<Work>> Start(dist_collective_t coll,
                                              const dist_op_args_t& args) override {
    dist_backend_op_fn fn = OpFn(table(), coll);
    if (fn == nullptr) {
      return absl::UnimplementedError(
          absl::StrCat("the plugin's table has no ", dist_collective_name(coll)));
    }
    dist_op_args_t copy = args;
    copy.struct_size = sizeof(copy);
    dist_backend_work_t* work = nullptr;
    DIST_RETURN_IF_ERROR(TakeError(fn(comm_, &copy, &work)));
    if (work == nullptr) {
      return absl::InternalError(
          absl::StrCat(dist_collective_name(coll), " returned success but no work handle"));
    }
    return std::unique_ptr<Work>(new AbiWork(&table(), work));
  }

  // The table's `run` (ABI 1.2) when it has one, else Start and Wait.
  absl::Status Run(dist_collective_t coll, const dist_op_args_t& args,
                   int64_t timeout_ms) override {
    if (table().run == nullptr) return Comm::Run(coll, args, timeout_ms);
    dist_op_args_t copy = args;
    copy.struct_size = sizeof(copy);
    return TakeError(table().run(comm_, coll, &copy, timeout_ms));
  }

  absl::Status SendRecv(const dist_op_args_t& send, const dist_op_args_t& recv,
                        int64_t timeout_ms) override {
    if (table().run_sendrecv == nullptr) return Comm::SendRecv(send, recv, timeout_ms);
    dist_op_args_t send_copy = send;
    send_copy.struct_size = sizeof(send_copy);
    dist_op_args_t recv_copy = recv;
    recv_copy.struct_size = sizeof(recv_copy);
    return TakeError(table().run_sendrecv(comm_, &send_copy, &recv_copy, timeout_ms));
  }

  absl::StatusOr<std::unique_ptr<Comm>> Split(const std::vector<int32_t>& ranks,
                                              const std::string& name) override {
    const auto it = std::find(ranks.begin(), ranks.end(), rank_);
    const int32_t index = it == ranks.end() ? -1 : static_cast<int32_t>(it - ranks.begin());
    absl::StatusOr<StoreRef> store = PrefixedStore(*shared_, name);
    if (!store.ok()) return store.status();
    const int32_t size = static_cast<int32_t>(ranks.size());
    const dist_comm_config_t config = MakeConfig(index, size, store->get(), timeout_ms_, name);
    dist_backend_comm_t* comm = nullptr;
    if (table().comm_split != nullptr) {
      DIST_RETURN_IF_ERROR(
          TakeError(table().comm_split(comm_, ranks.data(), ranks.size(), &config, &comm)));
      if (index < 0) {
        if (comm != nullptr) {
          table().comm_destroy(comm);
          return absl::InternalError(
              "comm_split handed a communicator to a non-member; it must set *comm = NULL");
        }
        return std::unique_ptr<Comm>();
      }
      if (comm == nullptr) {
        return absl::InternalError("comm_split returned success but no communicator on a member");
      }
    } else {
      if (index < 0) return std::unique_ptr<Comm>();  // the core creates on members only
      DIST_RETURN_IF_ERROR(TakeError(table().comm_create(&config, &comm)));
    }
    return std::unique_ptr<Comm>(
        new AbiComm(shared_, std::move(*store), comm, index, size, timeout_ms_));
  }

  absl::StatusOr<std::unique_ptr<Comm>> Duplicate(const std::string& name,
                                                  int64_t timeout_ms) override {
    absl::StatusOr<StoreRef> store = PrefixedStore(*shared_, name);
    if (!store.ok()) return store.status();
    const dist_comm_config_t config = MakeConfig(rank_, world_, store->get(), timeout_ms, name);
    dist_backend_comm_t* comm = nullptr;
    DIST_RETURN_IF_ERROR(TakeError(table().comm_create(&config, &comm)));
    return std::unique_ptr<Comm>(
        new AbiComm(shared_, std::move(*store), comm, rank_, world_, timeout_ms));
  }

  absl::StatusOr<std::unique_ptr<Comm>> DuplicateSized(const std::string& name, int64_t timeout_ms,
                                                       size_t struct_size) override {
    absl::StatusOr<StoreRef> store = PrefixedStore(*shared_, name);
    if (!store.ok()) return store.status();
    const std::vector<unsigned char> block =
        SizedBlock(MakeConfig(rank_, world_, store->get(), timeout_ms, name), struct_size);
    dist_backend_comm_t* comm = nullptr;
    DIST_RETURN_IF_ERROR(TakeError(
        table().comm_create(reinterpret_cast<const dist_comm_config_t*>(block.data()), &comm)));
    return std::unique_ptr<Comm>(
        new AbiComm(shared_, std::move(*store), comm, rank_, world_, timeout_ms));
  }

  absl::StatusOr<std::unique_ptr<Work>> StartSized(dist_collective_t coll,
                                                   const dist_op_args_t& args,
                                                   size_t struct_size) override {
    dist_backend_op_fn fn = OpFn(table(), coll);
    if (fn == nullptr) {
      return absl::UnimplementedError(
          absl::StrCat("the plugin's table has no ", dist_collective_name(coll)));
    }
    const std::vector<unsigned char> block = SizedBlock(args, struct_size);
    dist_backend_work_t* work = nullptr;
    DIST_RETURN_IF_ERROR(
        TakeError(fn(comm_, reinterpret_cast<const dist_op_args_t*>(block.data()), &work)));
    if (work == nullptr) {
      return absl::InternalError(
          absl::StrCat(dist_collective_name(coll), " returned success but no work handle"));
    }
    return std::unique_ptr<Work>(new AbiWork(&table(), work));
  }

  void Abort(const std::string& reason) override { table().comm_abort(comm_, reason.c_str()); }

  bool HasOperation(dist_collective_t coll) const override {
    return OpFn(table(), coll) != nullptr;
  }

 private:
  const dist_backend_plugin_t& table() const { return *shared_->plugin.table; }

  std::shared_ptr<AbiShared> shared_;
  StoreRef store_;
  dist_backend_comm_t* comm_;
  int32_t rank_;
  int32_t world_;
  int64_t timeout_ms_;
};

// ---- Through the core ---------------------------------------------------------

// dist.h's call for `coll`; a NULL `work` makes it the blocking form.
dist_error_t* CallCore(dist_process_group_t* group, dist_collective_t coll, const dist_op_args_t& a,
                       dist_work_t** work) {
  switch (coll) {
    case DIST_COLL_ALL_REDUCE:
      return dist_all_reduce(group, &a.send, &a.recv, a.op, work);
    case DIST_COLL_BROADCAST:
      return dist_broadcast(group, &a.send, &a.recv, a.root, work);
    case DIST_COLL_REDUCE:
      return dist_reduce(group, &a.send, &a.recv, a.op, a.root, work);
    case DIST_COLL_ALL_GATHER:
      return dist_all_gather(group, &a.send, &a.recv, work);
    case DIST_COLL_GATHER:
      return dist_gather(group, &a.send, &a.recv, a.root, work);
    case DIST_COLL_SCATTER:
      return dist_scatter(group, &a.send, &a.recv, a.root, work);
    case DIST_COLL_REDUCE_SCATTER:
      return dist_reduce_scatter(group, &a.send, &a.recv, a.op, work);
    case DIST_COLL_ALL_TO_ALL:
      return dist_all_to_all(group, &a.send, &a.recv, work);
    case DIST_COLL_BARRIER:
      return dist_barrier(group, work);
    case DIST_COLL_SEND:
      return dist_send(group, &a.send, a.peer, a.tag, work);
    case DIST_COLL_RECV:
      return dist_recv(group, &a.recv, a.peer, a.tag, work);
    default:
      return dist_error_new(DIST_INVALID_ARGUMENT, "unknown collective");
  }
}

class CoreWork : public Work {
 public:
  explicit CoreWork(dist_work_t* work) : work_(work) {}
  ~CoreWork() override { dist_work_destroy(work_); }
  absl::Status Wait(int64_t timeout_ms) override {
    return TakeError(dist_work_wait(work_, timeout_ms));
  }
  absl::Status Test(bool* done) override {
    int flag = 0;
    absl::Status status = TakeError(dist_work_test(work_, &flag));
    *done = flag != 0;
    return status;
  }

 private:
  dist_work_t* work_;
};

class CoreComm : public Comm {
 public:
  explicit CoreComm(dist_process_group_t* group) : group_(group) {}
  ~CoreComm() override { dist_destroy(group_); }

  int32_t rank() const override { return dist_rank(group_); }
  int32_t world_size() const override { return dist_world_size(group_); }
  dist_process_group_t* core_group() override { return group_; }

  absl::StatusOr<std::unique_ptr<Work>> Start(dist_collective_t coll,
                                              const dist_op_args_t& a) override {
    dist_work_t* work = nullptr;
    dist_error_t* error = CallCore(group_, coll, a, &work);
    DIST_RETURN_IF_ERROR(TakeError(error));
    if (work == nullptr) {
      return absl::InternalError(absl::StrCat("dist_", dist_collective_name(coll),
                                              " returned success but no work handle"));
    }
    return std::unique_ptr<Work>(new CoreWork(work));
  }

  absl::StatusOr<std::unique_ptr<Comm>> Split(const std::vector<int32_t>& ranks,
                                              const std::string& name) override {
    dist_process_group_t* group = nullptr;
    DIST_RETURN_IF_ERROR(TakeError(dist_new_group(group_, ranks.data(), ranks.size(), &group)));
    auto sub = std::make_unique<CoreComm>(group);
    if (dist_rank(group) >= 0) return std::unique_ptr<Comm>(std::move(sub));
    // dist.h: on non-members every operation fails with FAILED_PRECONDITION.
    absl::Status status = TakeError(dist_barrier(group, nullptr));
    if (status.code() != absl::StatusCode::kFailedPrecondition) {
      return absl::InternalError(absl::StrCat(
          "an operation on a subgroup this rank is not in should fail with FAILED_PRECONDITION, "
          "got: ",
          status.ToString()));
    }
    return std::unique_ptr<Comm>();
  }

  absl::StatusOr<std::unique_ptr<Comm>> Duplicate(const std::string& name,
                                                  int64_t timeout_ms) override {
    std::vector<int32_t> all(world_size());
    for (int32_t r = 0; r < world_size(); ++r) all[r] = r;
    return Split(all, name);
  }

  // The blocking form of dist.h's call (work == NULL), which goes through
  // the backend's `run` when it has one; the group's timeout applies.
  absl::Status Run(dist_collective_t coll, const dist_op_args_t& a, int64_t) override {
    return TakeError(CallCore(group_, coll, a, nullptr));
  }

  // dist_sendrecv, with the group's timeout.
  absl::Status SendRecv(const dist_op_args_t& send, const dist_op_args_t& recv, int64_t) override {
    return TakeError(dist_sendrecv(group_, &send.send, send.peer, &recv.recv, recv.peer, send.tag));
  }

  void Abort(const std::string& reason) override { dist_abort(group_, reason.c_str()); }
  bool HasOperation(dist_collective_t) const override { return true; }

 private:
  dist_process_group_t* group_;
};

}  // namespace

absl::StatusOr<LoadedPlugin> LoadPlugin(const std::string& name_or_path) {
  LoadedPlugin plugin;
  DIST_RETURN_IF_ERROR(TakeError(dist_load_backend(name_or_path.c_str(), &plugin.table)));
  if (plugin.table == nullptr) {
    return absl::InternalError("dist_load_backend returned success but no table");
  }
  std::memset(&plugin.caps, 0, sizeof(plugin.caps));
  plugin.caps.struct_size = sizeof(plugin.caps);
  plugin.table->get_capabilities(&plugin.caps);
  plugin.has_work_wait_stream =
      plugin.table->struct_size >=
      offsetof(dist_backend_plugin_t, work_wait_stream) + sizeof(plugin.table->work_wait_stream);
  return plugin;
}

absl::StatusOr<std::unique_ptr<Comm>> CreateAbiComm(const LoadedPlugin& plugin,
                                                    const Rendezvous& rendezvous) {
  auto shared = std::make_shared<AbiShared>();
  shared->plugin = plugin;
  shared->host = dist_host_api();
  shared->timeout_ms = rendezvous.timeout_ms;
  dist_rendezvous_hints_t hints;
  std::memset(&hints, 0, sizeof(hints));
  hints.struct_size = sizeof(hints);
  hints.rank = rendezvous.rank;
  hints.world_size = rendezvous.world_size;
  dist_rendezvous_result_t result;
  std::memset(&result, 0, sizeof(result));
  result.struct_size = sizeof(result);
  DIST_RETURN_IF_ERROR(
      TakeError(dist_rendezvous(rendezvous.url.c_str(), &hints, rendezvous.timeout_ms, &result)));
  shared->root_store = result.store;
  absl::StatusOr<StoreRef> store = PrefixedStore(*shared, "world");
  if (!store.ok()) return store.status();
  const std::string name = "conformance";
  dist_comm_config_t config =
      MakeConfig(result.rank, result.world_size, store->get(), rendezvous.group_timeout_ms, name);
  config.local_rank = result.local_rank;
  config.local_world_size = result.local_world_size;
  dist_backend_comm_t* comm = nullptr;
  DIST_RETURN_IF_ERROR(TakeError(plugin.table->comm_create(&config, &comm)));
  return std::unique_ptr<Comm>(new AbiComm(shared, std::move(*store), comm, result.rank,
                                           result.world_size, rendezvous.group_timeout_ms));
}

absl::StatusOr<std::unique_ptr<Comm>> CreateCoreComm(const std::string& plugin,
                                                     const Rendezvous& rendezvous) {
  dist_init_options_t options = dist_init_options_default();
  options.backend = plugin.c_str();
  options.init_method = rendezvous.url.c_str();
  if (rendezvous.world_size > 0) {
    options.rank = rendezvous.rank;
    options.world_size = rendezvous.world_size;
  }
  // One timeout for both: the rendezvous and every later operation.
  options.timeout_ms = rendezvous.group_timeout_ms;
  options.group_name = "conformance";
  dist_process_group_t* group = nullptr;
  DIST_RETURN_IF_ERROR(TakeError(dist_init(&options, &group)));
  return AdoptCoreGroup(group);
}

std::unique_ptr<Comm> AdoptCoreGroup(dist_process_group_t* group) {
  return std::unique_ptr<Comm>(new CoreComm(group));
}

}  // namespace dist::conformance
