#include "tests/nccl/emulation/clique.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "tests/nccl/emulation/reduction.h"

namespace dist::emulation {
namespace {

const char* KindName(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllReduce: return "ncclAllReduce";
    case CollectiveKind::kBroadcast: return "ncclBroadcast";
    case CollectiveKind::kReduce: return "ncclReduce";
    case CollectiveKind::kAllGather: return "ncclAllGather";
    case CollectiveKind::kReduceScatter: return "ncclReduceScatter";
  }
  return "?";
}

bool Reduces(CollectiveKind kind) {
  return kind == CollectiveKind::kAllReduce || kind == CollectiveKind::kReduce ||
         kind == CollectiveKind::kReduceScatter;
}

bool Rooted(CollectiveKind kind) {
  return kind == CollectiveKind::kBroadcast || kind == CollectiveKind::kReduce;
}

std::string Describe(const Collective& c) {
  return absl::StrCat(KindName(c.kind), "(count ", c.count, ", type ", c.type, ", op ", c.op,
                      ", root ", c.root, ")");
}

}  // namespace

Clique::Clique(int nranks)
    : nranks_(nranks),
      joined_(static_cast<size_t>(nranks), false),
      gone_(static_cast<size_t>(nranks), false) {}

Outcome Clique::Join(int rank) {
  std::lock_guard<std::mutex> lock(mu_);
  if (joined_[static_cast<size_t>(rank)]) {
    return {ncclInvalidUsage,
            absl::StrCat("emulated NCCL: rank ", rank, " joined this ncclUniqueId twice")};
  }
  joined_[static_cast<size_t>(rank)] = true;
  cv_.notify_all();
  return {};
}

void Clique::JoinAll() {
  std::lock_guard<std::mutex> lock(mu_);
  std::fill(joined_.begin(), joined_.end(), true);
}

Outcome Clique::AwaitMembers(int rank) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] {
    return gone_[static_cast<size_t>(rank)] ||
           std::all_of(joined_.begin(), joined_.end(), [](bool j) { return j; });
  });
  return {};  // left: the caller's comm is gone, nobody reads the result
}

void Clique::Leave(int rank) {
  std::lock_guard<std::mutex> lock(mu_);
  gone_[static_cast<size_t>(rank)] = true;
  cv_.notify_all();
}

int Clique::GonePeer(int rank) const {
  for (int r = 0; r < nranks_; ++r) {
    if (r != rank && gone_[static_cast<size_t>(r)]) return r;
  }
  return -1;
}

Outcome Clique::PeerGone(int rank, int peer, const char* what) const {
  return {ncclRemoteError,
          absl::StrCat("emulated NCCL: rank ", peer, " aborted its communicator while rank ",
                       rank, " was in ", what)};
}

void Clique::ComputeLocked(CollectiveSlot& slot) {
  const Collective& first = slot.entries[0];
  for (int r = 1; r < nranks_; ++r) {
    const Collective& other = slot.entries[static_cast<size_t>(r)];
    const bool same = other.kind == first.kind && other.type == first.type &&
                      other.count == first.count && (!Reduces(first.kind) || other.op == first.op) &&
                      (!Rooted(first.kind) || other.root == first.root);
    if (!same) {
      slot.failure = absl::StrCat("emulated NCCL: mismatched collectives: rank 0 called ",
                                  Describe(first), ", rank ", r, " called ", Describe(other),
                                  " (a real GPU would hang or corrupt data here)");
      return;
    }
  }
  const size_t n = first.count;
  const size_t bytes = n * ElementSize(first.type);
  const size_t ranks = static_cast<size_t>(nranks_);
  slot.results.assign(ranks, {});
  std::vector<const void*> inputs;
  for (const Collective& c : slot.entries) inputs.push_back(c.send);
  switch (first.kind) {
    case CollectiveKind::kAllReduce:
    case CollectiveKind::kReduce: {
      std::vector<char> reduced(bytes);
      Reduce(first.type, first.op, inputs, n, reduced.data());
      for (size_t r = 0; r < ranks; ++r) {
        if (first.kind == CollectiveKind::kAllReduce || static_cast<int>(r) == first.root) {
          slot.results[r] = reduced;
        }
      }
      break;
    }
    case CollectiveKind::kBroadcast: {
      const char* root = static_cast<const char*>(inputs[static_cast<size_t>(first.root)]);
      for (size_t r = 0; r < ranks; ++r) slot.results[r].assign(root, root + bytes);
      break;
    }
    case CollectiveKind::kAllGather: {
      std::vector<char> gathered;
      for (const void* in : inputs) {
        const char* p = static_cast<const char*>(in);
        gathered.insert(gathered.end(), p, p + bytes);
      }
      for (size_t r = 0; r < ranks; ++r) slot.results[r] = gathered;
      break;
    }
    case CollectiveKind::kReduceScatter: {
      for (size_t r = 0; r < ranks; ++r) {
        std::vector<const void*> blocks;
        for (const void* in : inputs) blocks.push_back(static_cast<const char*>(in) + r * bytes);
        slot.results[r].resize(bytes);
        Reduce(first.type, first.op, blocks, n, slot.results[r].data());
      }
      break;
    }
  }
}

Outcome Clique::RunCollective(uint64_t seq, int rank, const Collective& mine) {
  std::unique_lock<std::mutex> lock(mu_);
  CollectiveSlot& slot = collectives_[seq];
  if (slot.entries.empty()) slot.entries.resize(static_cast<size_t>(nranks_));
  slot.entries[static_cast<size_t>(rank)] = mine;
  // The last rank to arrive reads everyone's input (all are still waiting,
  // so their buffers are intact) and makes every rank's result.
  if (++slot.arrived == nranks_ && GonePeer(-1) < 0) {
    ComputeLocked(slot);
    slot.ready = true;
    cv_.notify_all();
  }
  cv_.wait(lock, [&] { return slot.ready || gone_[static_cast<size_t>(rank)] || GonePeer(rank) >= 0; });
  Outcome outcome;
  if (!slot.ready) {
    const int peer = GonePeer(rank);
    if (gone_[static_cast<size_t>(rank)] || peer < 0) return {};  // aborted: the kernel quits
    return PeerGone(rank, peer, KindName(mine.kind));
  }
  if (!slot.failure.empty()) {
    outcome = {ncclInvalidUsage, slot.failure};
  } else {
    const std::vector<char>& result = slot.results[static_cast<size_t>(rank)];
    // Written only now: for in-place calls recv is this rank's input,
    // which the last arrival may have been reading until `ready`.
    if (!result.empty()) std::memcpy(mine.recv, result.data(), result.size());
  }
  if (++slot.left == nranks_) collectives_.erase(seq);
  return outcome;
}

void Clique::Withdraw(int rank, const std::vector<PointToPoint>& ops) {
  for (const PointToPoint& op : ops) {
    if (op.is_send) channels_[{rank, op.peer}].erase(op.seq);
  }
}

Outcome Clique::RunPointToPoint(int rank, const std::vector<PointToPoint>& ops) {
  std::unique_lock<std::mutex> lock(mu_);
  // All sends of the group are posted before any receive waits, so a group
  // that sends to and receives from the same peers cannot deadlock.
  for (const PointToPoint& op : ops) {
    if (op.is_send) channels_[{rank, op.peer}][op.seq] = Message{op.buffer, op.bytes};
  }
  cv_.notify_all();
  auto self_gone = [&] { return static_cast<bool>(gone_[static_cast<size_t>(rank)]); };
  for (const PointToPoint& op : ops) {
    if (op.is_send) continue;
    std::map<uint64_t, Message>& channel = channels_[{op.peer, rank}];
    cv_.wait(lock, [&] {
      return channel.count(op.seq) > 0 || self_gone() || gone_[static_cast<size_t>(op.peer)];
    });
    auto it = channel.find(op.seq);
    if (it == channel.end()) {
      Withdraw(rank, ops);
      cv_.notify_all();
      if (self_gone()) return {};
      return PeerGone(rank, op.peer, "ncclRecv");
    }
    if (it->second.bytes != op.bytes) {
      Withdraw(rank, ops);
      cv_.notify_all();
      return {ncclInvalidUsage,
              absl::StrCat("emulated NCCL: rank ", op.peer, " sent ", it->second.bytes,
                           " bytes but rank ", rank, " receives ", op.bytes, " bytes")};
    }
    // Copied under the lock: the sender's task waits for `consumed`, so its
    // buffer is alive.
    std::memcpy(op.buffer, it->second.data, op.bytes);
    it->second.consumed = true;
    cv_.notify_all();
  }
  for (const PointToPoint& op : ops) {
    if (!op.is_send) continue;
    std::map<uint64_t, Message>& channel = channels_[{rank, op.peer}];
    cv_.wait(lock, [&] {
      auto it = channel.find(op.seq);
      return it == channel.end() || it->second.consumed || self_gone() ||
             gone_[static_cast<size_t>(op.peer)];
    });
    auto it = channel.find(op.seq);
    if (it != channel.end() && !it->second.consumed) {
      Withdraw(rank, ops);
      cv_.notify_all();
      if (self_gone()) return {};
      return PeerGone(rank, op.peer, "ncclSend");
    }
    if (it != channel.end()) channel.erase(it);
  }
  return {};
}

Outcome Clique::Split(uint64_t seq, int rank, int color, int key, SplitResult* result) {
  std::unique_lock<std::mutex> lock(mu_);
  SplitSlot& slot = splits_[seq];
  if (slot.entries.empty()) slot.entries.resize(static_cast<size_t>(nranks_));
  slot.entries[static_cast<size_t>(rank)] = {color, key};
  if (++slot.arrived == nranks_) {
    slot.results.assign(static_cast<size_t>(nranks_), {});
    std::map<int, std::vector<std::pair<int, int>>> by_color;  // color -> (key, old rank)
    for (int r = 0; r < nranks_; ++r) {
      const auto [c, k] = slot.entries[static_cast<size_t>(r)];
      if (c != NCCL_SPLIT_NOCOLOR) by_color[c].emplace_back(k, r);
    }
    for (auto& [c, members] : by_color) {
      std::sort(members.begin(), members.end());
      auto child = std::make_shared<Clique>(static_cast<int>(members.size()));
      child->JoinAll();
      for (size_t i = 0; i < members.size(); ++i) {
        slot.results[static_cast<size_t>(members[i].second)] = {
            child, static_cast<int>(i), static_cast<int>(members.size())};
      }
    }
    slot.ready = true;
    cv_.notify_all();
  }
  cv_.wait(lock, [&] { return slot.ready || gone_[static_cast<size_t>(rank)] || GonePeer(rank) >= 0; });
  if (!slot.ready) {
    const int peer = GonePeer(rank);
    if (peer < 0) return {};
    return PeerGone(rank, peer, "ncclCommSplit");
  }
  *result = slot.results[static_cast<size_t>(rank)];
  if (++slot.left == nranks_) splits_.erase(seq);
  return {};
}

std::shared_ptr<Clique> CliqueFor(const ncclUniqueId& id, int nranks) {
  static std::mutex* mu = new std::mutex();
  static auto* cliques = new std::map<std::string, std::shared_ptr<Clique>>();
  const std::string key(id.internal, sizeof(id.internal));
  std::lock_guard<std::mutex> lock(*mu);
  std::shared_ptr<Clique>& clique = (*cliques)[key];
  if (clique == nullptr) clique = std::make_shared<Clique>(nranks);
  return clique;
}

}  // namespace dist::emulation
