#include "core/host_hierarchy.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/logging.h"
#include "core/process_group.h"
#include "dist/cpp/host_identity.hpp"
#include "dist/cpp/status.hpp"
#include "dist/cpp/store.hpp"

namespace dist {
namespace {

// Which path an operation takes (hosts of equal size; elsewhere the
// leaders, and all_gather runs flat):
//   broadcast   the root's rail, then every host from the root's place
//   below kEveryRailBelowBytes: all_reduce, all_gather within the host, then
//               on every rail at once, each rail the whole buffer (two
//               steps instead of three, for L times the network bytes)
//   from kShareRailsFromBytes: all_reduce reduce-scattered within the host,
//               each rail its share, all-gathered within the host again;
//               all_gather on every rail, then within the host
//   between     the leaders: into the leader, across, back out
//   barrier     within the host, then every rail
// Measured on 2 namespace hosts x 2 and x 4 ranks (docs/performance.md,
// "Several hosts").
constexpr uint64_t kEveryRailBelowBytes = 64 << 10;
constexpr uint64_t kShareRailsFromBytes = 1 << 20;

dist_op_args_t OpArgs(const dist_buffer_t& send, const dist_buffer_t& recv) {
  dist_op_args_t args{};
  args.struct_size = sizeof(args);
  args.send = send;
  args.recv = recv;
  return args;
}

dist_buffer_t Unused(const dist_buffer_t& like) {
  dist_buffer_t buffer = like;
  buffer.data = nullptr;
  buffer.count = 0;
  return buffer;
}

dist_buffer_t HostBuffer(std::vector<char>& bytes, uint64_t count, const dist_buffer_t& like) {
  dist_buffer_t buffer = like;
  buffer.data = bytes.data();
  buffer.count = count;
  buffer.stream = nullptr;
  return buffer;
}

}  // namespace

HostLayout HostLayout::FromDigests(const std::vector<uint64_t>& digests) {
  HostLayout layout;
  std::map<uint64_t, int32_t> index_of;  // digest -> host index
  layout.host_of.resize(digests.size());
  layout.local_index_of.resize(digests.size());
  for (size_t r = 0; r < digests.size(); ++r) {
    auto [it, added] = index_of.emplace(digests[r], static_cast<int32_t>(layout.hosts.size()));
    if (added) layout.hosts.emplace_back();
    std::vector<int32_t>& ranks = layout.hosts[it->second];
    layout.host_of[r] = it->second;
    layout.local_index_of[r] = static_cast<int32_t>(ranks.size());
    ranks.push_back(static_cast<int32_t>(r));
  }
  const size_t per_host = layout.hosts.empty() ? 0 : layout.hosts[0].size();
  layout.equal_hosts = true;
  layout.contiguous = true;
  for (size_t h = 0; h < layout.hosts.size(); ++h) {
    const std::vector<int32_t>& ranks = layout.hosts[h];
    layout.equal_hosts = layout.equal_hosts && ranks.size() == per_host;
    for (size_t i = 0; i < ranks.size(); ++i) {
      layout.contiguous = layout.contiguous && ranks[i] == static_cast<int32_t>(h * per_host + i);
    }
  }
  layout.contiguous = layout.contiguous && layout.equal_hosts;
  return layout;
}

std::vector<int32_t> HostLayout::Rail(int32_t index) const {
  std::vector<int32_t> ranks;
  for (const std::vector<int32_t>& host : hosts) {
    if (static_cast<size_t>(index) < host.size()) ranks.push_back(host[index]);
  }
  return ranks;
}

bool HostLayout::WorthIt() const {
  if (hosts.size() < 2) return false;
  for (const std::vector<int32_t>& ranks : hosts) {
    if (ranks.size() < 2) return false;
  }
  return true;
}

std::string HostLayout::Describe() const {
  if (equal_hosts) return absl::StrCat(hosts.size(), " hosts x ", hosts[0].size(), " ranks");
  std::string sizes;
  for (const std::vector<int32_t>& ranks : hosts) {
    absl::StrAppend(&sizes, sizes.empty() ? "" : "+", ranks.size());
  }
  return absl::StrCat(hosts.size(), " hosts (", sizes, " ranks)");
}

HostHierarchy::HostHierarchy(HostLayout layout, int32_t rank, std::unique_ptr<ProcessGroup> local,
                             std::unique_ptr<ProcessGroup> rail)
    : layout_(std::move(layout)),
      rank_(rank),
      host_(layout_.host_of[rank]),
      local_index_(layout_.local_index_of[rank]),
      local_(std::move(local)),
      rail_(std::move(rail)) {}

HostHierarchy::~HostHierarchy() = default;

// Decided by what every rank passes alike (the kind, op, counts, the
// buffers every rank uses), so that all ranks take the same path.
bool HostHierarchy::Takes(dist_collective_t kind, const dist_op_args_t& args) const {
  // Device maps send other devices to other backends (cpu:gloo,cuda:nccl).
  const bool on_cpu = args.recv.device.type == DIST_DEVICE_CPU;
  switch (kind) {
    case DIST_COLL_BARRIER:
      return true;
    case DIST_COLL_ALL_REDUCE:
      return on_cpu && args.send.device.type == DIST_DEVICE_CPU && args.op != DIST_AVG &&
             args.send.count > 0;
    case DIST_COLL_BROADCAST:
      // The send buffer is the root's alone.
      return on_cpu && args.recv.count > 0;
    case DIST_COLL_ALL_GATHER:
      return on_cpu && args.send.device.type == DIST_DEVICE_CPU && layout_.equal_hosts &&
             args.send.count > 0;
    default:
      return false;
  }
}

absl::Status HostHierarchy::Run(dist_collective_t kind, const dist_op_args_t& args) {
  absl::Status status;
  switch (kind) {
    case DIST_COLL_ALL_REDUCE:
      status = AllReduce(args);
      break;
    case DIST_COLL_BROADCAST:
      status = Broadcast(args);
      break;
    case DIST_COLL_ALL_GATHER:
      status = AllGather(args);
      break;
    case DIST_COLL_BARRIER:
      status = Barrier();
      break;
    default:
      return absl::InternalError("hierarchical collectives: not an operation they run");
  }
  if (!status.ok()) {
    // The ranks of this host wait on the leader in the shm phase, and the
    // other leaders on this one: tell both at once (shm's abort reaches the
    // peers through the segment, gloo's closes the pairs).
    Abort(absl::StrCat("hierarchical ", dist_collective_name(kind), " failed on rank ", rank_, ": ",
                       status.message()));
    // The subgroups' messages count ranks their own way: give the map.
    const auto map = [](const std::string& group, const std::vector<int32_t>& ranks) {
      std::vector<int32_t> own(ranks.size());
      for (size_t i = 0; i < own.size(); ++i) own[i] = static_cast<int32_t>(i);
      return absl::StrCat("in group '", group, "' ranks ", absl::StrJoin(own, ","), " are ranks ",
                          absl::StrJoin(ranks, ","));
    };
    return absl::Status(
        status.code(),
        absl::StrCat("hierarchical ", dist_collective_name(kind), " (", layout_.Describe(), "; ",
                     map(local_->name_, layout_.hosts[host_]), ", ",
                     map(rail_->name_, layout_.Rail(local_index_)), "): ", status.message()));
  }
  return status;
}

void HostHierarchy::Abort(const std::string& reason) {
  local_->AbortComms(reason);
  rail_->AbortComms(reason);
}

absl::Status HostHierarchy::AllReduce(const dist_op_args_t& args) {
  const uint64_t per_host = layout_.hosts[host_].size();
  const uint64_t bytes = args.send.count * dist_dtype_size(args.send.dtype);
  if (layout_.equal_hosts && bytes < kEveryRailBelowBytes) {
    // Every rank of a host holds the host's sum, and every rail adds the
    // hosts' sums in the same order: the same bits on every rank.
    dist_op_args_t within = OpArgs(args.send, args.recv);
    within.op = args.op;
    DIST_RETURN_IF_ERROR(local_->Run(DIST_COLL_ALL_REDUCE, within));
    dist_op_args_t across = OpArgs(args.recv, args.recv);
    across.op = args.op;
    return rail_->Run(DIST_COLL_ALL_REDUCE, across);
  }
  if (layout_.equal_hosts && args.send.count % per_host == 0 && bytes >= kShareRailsFromBytes) {
    return AllReduceOnRails(args);
  }
  // The host's ranks reduce onto their leader; the leaders all-reduce; each
  // leader broadcasts the result to its host.
  dist_op_args_t reduce = OpArgs(args.send, args.recv);
  reduce.op = args.op;
  reduce.root = 0;
  DIST_RETURN_IF_ERROR(local_->Run(DIST_COLL_REDUCE, reduce));
  if (leader()) {
    dist_op_args_t across = OpArgs(args.recv, args.recv);
    across.op = args.op;
    DIST_RETURN_IF_ERROR(rail_->Run(DIST_COLL_ALL_REDUCE, across));
  }
  dist_op_args_t share = OpArgs(args.recv, args.recv);
  share.root = 0;
  return local_->Run(DIST_COLL_BROADCAST, share);
}

// Each rank of a host reduces its share of the buffer (reduce_scatter over
// shm), all-reduces that share with the same share of the other hosts on
// its rail, and the host all-gathers the shares: every rank moves 1/L of
// the bytes across hosts, all rails at once.
absl::Status HostHierarchy::AllReduceOnRails(const dist_op_args_t& args) {
  const uint64_t share = args.send.count / layout_.hosts[host_].size();
  dist_buffer_t mine = args.recv;
  mine.data =
      static_cast<char*>(args.recv.data) + local_index_ * share * dist_dtype_size(args.recv.dtype);
  mine.count = share;
  dist_op_args_t scatter = OpArgs(args.send, mine);
  scatter.op = args.op;
  DIST_RETURN_IF_ERROR(local_->Run(DIST_COLL_REDUCE_SCATTER, scatter));
  dist_op_args_t across = OpArgs(mine, mine);
  across.op = args.op;
  DIST_RETURN_IF_ERROR(rail_->Run(DIST_COLL_ALL_REDUCE, across));
  return local_->Run(DIST_COLL_ALL_GATHER, OpArgs(mine, args.recv));
}

// Hosts of equal size: the root's rail, then every host. Else the root's
// host first gets the data to its leader (all of that host at once, by
// broadcast), the leaders pass it on, and each other leader broadcasts it to
// its host.
absl::Status HostHierarchy::Broadcast(const dist_op_args_t& args) {
  const int32_t root_host = layout_.host_of[args.root];
  const int32_t root_local = layout_.local_index_of[args.root];
  const bool root_leads = root_local == 0;
  const dist_buffer_t& payload = rank_ == args.root ? args.send : args.recv;
  if (layout_.equal_hosts) {
    // The root's rail carries the data to the root's place on every host;
    // each host broadcasts it from there. Two steps, and the bytes cross
    // between hosts once per host, for any root.
    if (local_index_ == root_local) {
      dist_op_args_t across = OpArgs(payload, args.recv);
      across.root = root_host;
      DIST_RETURN_IF_ERROR(rail_->Run(DIST_COLL_BROADCAST, across));
    }
    dist_op_args_t within = OpArgs(args.recv, args.recv);
    within.root = root_local;
    return local_->Run(DIST_COLL_BROADCAST, within);
  }
  if (host_ == root_host && !root_leads) {
    dist_op_args_t within = OpArgs(payload, args.recv);
    within.root = root_local;
    DIST_RETURN_IF_ERROR(local_->Run(DIST_COLL_BROADCAST, within));
  }
  if (leader()) {
    // After the step above the root host's leader holds the data in recv;
    // a root that leads sends from its send buffer.
    dist_op_args_t across = OpArgs(rank_ == args.root ? args.send : args.recv, args.recv);
    across.root = root_host;
    DIST_RETURN_IF_ERROR(rail_->Run(DIST_COLL_BROADCAST, across));
  }
  if (host_ != root_host || root_leads) {
    dist_op_args_t within = OpArgs(args.recv, args.recv);
    within.root = 0;
    return local_->Run(DIST_COLL_BROADCAST, within);
  }
  return absl::OkStatus();
}

// Each host gathers its blocks on its leader; the leaders exchange the host
// blocks; each leader broadcasts the whole result to its host. Hosts of
// equal size only (Takes).
absl::Status HostHierarchy::AllGather(const dist_op_args_t& args) {
  const uint64_t block = args.send.count;
  const uint64_t per_host = layout_.hosts[0].size();
  const size_t element = dist_dtype_size(args.send.dtype);
  const size_t host_bytes = block * per_host * element;
  absl::MutexLock lock(&scratch_mu_);
  if (host_bytes < kEveryRailBelowBytes) return AllGatherOnEveryRail(args);
  if (host_bytes * layout_.hosts.size() >= kShareRailsFromBytes) return AllGatherOnRails(args);
  if (leader()) {
    if (gathered_.size() < host_bytes) gathered_.resize(host_bytes);
  }
  dist_op_args_t gather = OpArgs(
      args.send, leader() ? HostBuffer(gathered_, block * per_host, args.send) : Unused(args.send));
  gather.root = 0;
  DIST_RETURN_IF_ERROR(local_->Run(DIST_COLL_GATHER, gather));
  if (leader()) {
    const dist_buffer_t host_blocks = HostBuffer(gathered_, block * per_host, args.send);
    if (layout_.contiguous) {
      // Host h's blocks are ranks h*L..h*L+L-1: exactly recv's h-th part.
      DIST_RETURN_IF_ERROR(rail_->Run(DIST_COLL_ALL_GATHER, OpArgs(host_blocks, args.recv)));
    } else {
      const size_t all_bytes = host_bytes * layout_.hosts.size();
      if (exchanged_.size() < all_bytes) exchanged_.resize(all_bytes);
      DIST_RETURN_IF_ERROR(rail_->Run(
          DIST_COLL_ALL_GATHER,
          OpArgs(host_blocks,
                 HostBuffer(exchanged_, block * per_host * layout_.hosts.size(), args.send))));
      Unpermute(args, /*rail_by_rail=*/false);
    }
  }
  dist_op_args_t share = OpArgs(args.recv, args.recv);
  share.root = 0;
  return local_->Run(DIST_COLL_BROADCAST, share);
}

// Every rank all-gathers its host's blocks over shm, then every rail
// all-gathers the host blocks (each rail all of them).
absl::Status HostHierarchy::AllGatherOnEveryRail(const dist_op_args_t& args) {
  const uint64_t block = args.send.count;
  const uint64_t per_host = layout_.hosts[0].size();
  const size_t element = dist_dtype_size(args.send.dtype);
  const size_t host_bytes = block * per_host * element;
  if (layout_.contiguous) {
    // This host's part of recv holds its blocks, in place for the rail.
    dist_buffer_t host_part = args.recv;
    host_part.data = static_cast<char*>(args.recv.data) + host_ * host_bytes;
    host_part.count = block * per_host;
    DIST_RETURN_IF_ERROR(local_->Run(DIST_COLL_ALL_GATHER, OpArgs(args.send, host_part)));
    return rail_->Run(DIST_COLL_ALL_GATHER, OpArgs(host_part, args.recv));
  }
  if (gathered_.size() < host_bytes) gathered_.resize(host_bytes);
  const size_t all_bytes = host_bytes * layout_.hosts.size();
  if (exchanged_.size() < all_bytes) exchanged_.resize(all_bytes);
  const dist_buffer_t host_blocks = HostBuffer(gathered_, block * per_host, args.send);
  DIST_RETURN_IF_ERROR(local_->Run(DIST_COLL_ALL_GATHER, OpArgs(args.send, host_blocks)));
  DIST_RETURN_IF_ERROR(rail_->Run(
      DIST_COLL_ALL_GATHER,
      OpArgs(host_blocks,
             HostBuffer(exchanged_, block * per_host * layout_.hosts.size(), args.send))));
  Unpermute(args, /*rail_by_rail=*/false);
  return absl::OkStatus();
}

// Rail i gathers the i-th block of every host, the host all-gathers what
// its rails gathered, and a copy puts the blocks in rank order: every rank
// sends its own block across hosts, all rails at once.
absl::Status HostHierarchy::AllGatherOnRails(const dist_op_args_t& args) {
  const uint64_t block = args.send.count;
  const uint64_t hosts = layout_.hosts.size();
  const uint64_t per_host = layout_.hosts[0].size();
  const size_t block_bytes = block * dist_dtype_size(args.send.dtype);
  if (gathered_.size() < hosts * block_bytes) gathered_.resize(hosts * block_bytes);
  if (exchanged_.size() < per_host * hosts * block_bytes) {
    exchanged_.resize(per_host * hosts * block_bytes);
  }
  const dist_buffer_t rail_blocks = HostBuffer(gathered_, hosts * block, args.send);
  DIST_RETURN_IF_ERROR(rail_->Run(DIST_COLL_ALL_GATHER, OpArgs(args.send, rail_blocks)));
  DIST_RETURN_IF_ERROR(local_->Run(
      DIST_COLL_ALL_GATHER,
      OpArgs(rail_blocks, HostBuffer(exchanged_, per_host * hosts * block, args.send))));
  Unpermute(args, /*rail_by_rail=*/true);
  return absl::OkStatus();
}

// exchanged_ into recv's rank order. It holds the blocks host by host, each
// host's ranks in order, or (rail_by_rail) rail by rail, each rail's blocks
// host by host.
void HostHierarchy::Unpermute(const dist_op_args_t& args, bool rail_by_rail) {
  const size_t hosts = layout_.hosts.size();
  const size_t per_host = layout_.hosts[0].size();
  const size_t block_bytes = args.send.count * dist_dtype_size(args.send.dtype);
  char* out = static_cast<char*>(args.recv.data);
  for (size_t h = 0; h < hosts; ++h) {
    for (size_t i = 0; i < per_host; ++i) {
      const size_t from = rail_by_rail ? i * hosts + h : h * per_host + i;
      std::memcpy(out + layout_.hosts[h][i] * block_bytes, exchanged_.data() + from * block_bytes,
                  block_bytes);
    }
  }
}

// Nobody leaves before every rank arrived: a rank passes the last host
// barrier only after its leader passed the leaders' barrier, which every
// leader enters only after its whole host did.
absl::Status HostHierarchy::Barrier() {
  const dist_op_args_t none = OpArgs(dist_buffer_t{}, dist_buffer_t{});
  DIST_RETURN_IF_ERROR(local_->Run(DIST_COLL_BARRIER, none));
  // With hosts of equal size every rail has a rank of every host, which
  // enters its rail's barrier only after its whole host arrived.
  if (layout_.equal_hosts) return rail_->Run(DIST_COLL_BARRIER, none);
  if (leader()) DIST_RETURN_IF_ERROR(rail_->Run(DIST_COLL_BARRIER, none));
  return local_->Run(DIST_COLL_BARRIER, none);
}

// ProcessGroup's side (process_group.h): deciding, at dist_init, whether the
// default group runs hierarchically, and making its two subgroups.
absl::Status ProcessGroup::SetUpHierarchy(bool wanted) {
  if (!wanted || survival_settings_.enabled || rank_ < 0 || world_size_ < 4) {
    return absl::OkStatus();
  }
  const int cpu = comm_for_device_[DIST_DEVICE_CPU];
  if (cpu < 0 || comms_[cpu].plugin->name != "gloo") return absl::OkStatus();
  // The rendezvous said all ranks share this host (LOCAL_WORLD_SIZE).
  if (local_world_size_ >= world_size_) return absl::OkStatus();

  // Every rank's host, and whether it can load shm: the decision must be
  // the same on every rank, as the subgroups are made by all of them.
  absl::StatusOr<const PluginRecord*> shm = PluginRegistry::Get().LoadBackend("shm");
  const std::string prefix = absl::StrCat(store_prefix_, "hierarchy/");
  const StoreView store(store_->get());
  DIST_RETURN_IF_ERROR(
      store.Set(absl::StrCat(prefix, "rank", rank_),
                absl::StrCat(HostIdentityDigest(HostIdentity()), " ", shm.ok() ? 1 : 0)));
  std::vector<uint64_t> digests(world_size_);
  int32_t without_shm = -1;
  for (int32_t r = 0; r < world_size_; ++r) {
    absl::StatusOr<std::string> entry = store.Get(absl::StrCat(prefix, "rank", r), timeout_);
    if (!entry.ok()) {
      return absl::Status(entry.status().code(),
                          absl::StrCat("dist_init: rank ", r, " did not say which host it is on: ",
                                       entry.status().message()));
    }
    const std::vector<std::string> parts = absl::StrSplit(*entry, ' ');
    int shm_loads = 0;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &digests[r]) ||
        !absl::SimpleAtoi(parts[1], &shm_loads)) {
      return absl::DataLossError(absl::StrCat("dist_init: rank ", r, "'s host entry '", *entry,
                                              "' in the store is not 'digest 0|1'"));
    }
    if (shm_loads == 0 && without_shm < 0) without_shm = r;
  }
  HostLayout layout = HostLayout::FromDigests(digests);
  if (!layout.WorthIt()) return absl::OkStatus();
  if (without_shm >= 0) {
    if (rank_ == 0) {
      LogLine(DIST_LOG_WARN, "core",
              absl::StrCat("group '", name_, "' spans ", layout.Describe(), " but runs flat: rank ",
                           without_shm, " cannot load the shm backend",
                           shm.ok() ? "" : absl::StrCat(" (", shm.status().message(), ")")));
    }
    return absl::OkStatus();
  }

  const int32_t host = layout.host_of[rank_];
  absl::StatusOr<std::unique_ptr<ProcessGroup>> local =
      MakeChild(layout.hosts[host], absl::StrCat(name_, ".host", host),
                absl::StrCat(prefix, "host", host, "/"), /*may_split=*/false, timeout_, *shm);
  if (!local.ok()) {
    return absl::Status(local.status().code(),
                        absl::StrCat("hierarchical collectives: ", local.status().message()));
  }
  // Each rank's rail (rail 0: the hosts' leaders), made by its members.
  const int32_t index = layout.local_index_of[rank_];
  absl::StatusOr<std::unique_ptr<ProcessGroup>> rail = MakeChild(
      layout.Rail(index), absl::StrCat(name_, ".rail", index),
      absl::StrCat(prefix, "rail", index, "/"), /*may_split=*/false, timeout_, comms_[cpu].plugin);
  if (!rail.ok()) {
    return absl::Status(rail.status().code(),
                        absl::StrCat("hierarchical collectives: ", rail.status().message()));
  }
  if (rank_ == 0) {
    LogLine(DIST_LOG_INFO, "core",
            absl::StrCat("group '", name_, "': hierarchical all_reduce, broadcast, all_gather ",
                         "and barrier on ", layout.Describe(), ": shm within a host, ",
                         comms_[cpu].plugin->name, " between ", layout.hosts.size(),
                         " leaders (DIST_HIERARCHICAL=off runs them flat)"));
  }
  hierarchy_ = std::make_unique<HostHierarchy>(std::move(layout), rank_, *std::move(local),
                                               *std::move(rail));
  return absl::OkStatus();
}

}  // namespace dist
