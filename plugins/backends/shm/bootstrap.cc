#include "bootstrap.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "abort_state.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "dist/cpp/host_identity.hpp"
#include "dist/cpp/job_cpus.hpp"
#include "dist/cpp/status.hpp"
#include "dist/cpp/store.hpp"
#include "process_identity.h"
#include "waiter.h"

namespace dist_shm {
namespace {

constexpr char kErrorPrefix[] = "error:";
constexpr uint64_t kMaxSpinUs = 1000000;

uint64_t RoundDown4K(uint64_t value) { return std::max<uint64_t>(4096, value / 4096 * 4096); }

// The staging chunk for two ranks: a chunk's working set (the send chunk,
// both slots, the recv chunk) about fills one core's L2 cache, so that the
// reduce-scatter and all-gather steps hit it. On this project's machine
// (1 MiB L2) 256 KiB chunks made 2-8 MiB all_reduce 1.7-1.9x faster than
// 1 MiB ones.
uint64_t PairSlotBytes() {
  const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  const uint64_t cache = l2 > 0 ? static_cast<uint64_t>(l2) : (1u << 20);
  return std::clamp<uint64_t>(cache / 4, 64u << 10, 1u << 20);
}

Geometry ChooseGeometry(int32_t world, const Tuning& tuning) {
  const uint64_t w = static_cast<uint64_t>(world);
  Geometry g;
  g.world_size = world;
  // Collective staging: for two ranks by the L2 cache (PairSlotBytes); else
  // 1 MiB per rank and half up to 8 ranks, then shrink so the two halves
  // stay within 16 MiB.
  if (tuning.slot_bytes != 0) {
    g.slot_bytes = tuning.slot_bytes;
  } else if (w == 2) {
    g.slot_bytes = RoundDown4K(PairSlotBytes());
  } else {
    g.slot_bytes = RoundDown4K(std::clamp<uint64_t>((16u << 20) / (2 * w), 64u << 10, 1u << 20));
  }
  // Eager entries (layout.h): more where ranks share CPUs.
  g.eager_depth = tuning.spin_yields ? kMaxEagerDepth : kEagerDepth;
  // Point-to-point rings: w*w of them, 16 MiB in all at most.
  g.ring_bytes =
      tuning.ring_bytes
          ? tuning.ring_bytes
          : RoundDown4K(std::clamp<uint64_t>((16u << 20) / (w * w), 16u << 10, 1u << 20));
  return g;
}

// What is left of comm_create's time budget (every step shares one timeout).
absl::Duration Remaining(absl::Time deadline) {
  return std::max(deadline - absl::Now(), absl::Milliseconds(1));
}

// Keys of one comm_create. A store namespace may serve several creations in
// turn; each rank counts its own, and all ranks create in the same order, so
// the count names this creation on every rank and stale keys are never read.
struct Keys {
  std::string prefix;
  std::string Host(int rank) const { return absl::StrCat(prefix, "host/", rank); }
  std::string Segment() const { return absl::StrCat(prefix, "segment"); }
};

absl::StatusOr<Keys> KeysFor(const dist::StoreView& store, int rank) {
  absl::StatusOr<int64_t> creation = store.Add(absl::StrCat("shm/creations/", rank), 1);
  if (!creation.ok()) return creation.status();
  // The first creation uses plain keys ("shm/host/1", "shm/segment").
  return Keys{*creation == 1 ? std::string("shm/") : absl::StrCat("shm/", *creation, "/")};
}

// Rank 0: every rank's host identity must equal ours.
absl::Status CheckHosts(const dist::StoreView& store, const Keys& keys,
                        const dist_comm_config_t& config, const std::string& mine,
                        absl::Time deadline) {
  for (int r = 1; r < config.world_size; ++r) {
    absl::StatusOr<std::string> theirs = store.Get(keys.Host(r), Remaining(deadline));
    if (!theirs.ok()) {
      return absl::Status(
          theirs.status().code(),
          absl::StrCat("shm: rank ", r, " did not publish its host: ", theirs.status().message()));
    }
    if (*theirs != mine) {
      return absl::FailedPreconditionError(
          absl::StrCat("shm: the shm backend needs every rank on one host with a shared /dev/shm, "
                       "but rank 0 runs on [",
                       mine, "] and rank ", r, " on [", *theirs,
                       "]; use gloo (DIST_BACKEND=gloo) for ranks on several hosts"));
    }
  }
  return absl::OkStatus();
}

// Marks this rank attached and waits for the others.
absl::Status Register(Segment& segment, const dist_comm_config_t& config, const std::string& group,
                      absl::Time deadline) {
  const ProcessIdentity self = SelfIdentity();
  RankControl& me = segment.rank(config.rank);
  me.pid = self.pid;
  me.start_time = self.start_time;
  PublishProbe(me);
  me.state.store(kActive, std::memory_order_release);
  segment.header().attached.fetch_add(1, std::memory_order_acq_rel);
  AbortState never_aborted;
  Waiter waiter(&segment, config.rank, group, &never_aborted, absl::ZeroDuration(),
                /*spin_yields=*/false);
  waiter.NotifyOthers();
  auto ready = [&]() {
    return segment.header().attached.load(std::memory_order_acquire) == config.world_size;
  };
  auto pending = [&](std::vector<int>* out) {
    for (int r = 0; r < config.world_size; ++r) {
      if (segment.rank(r).state.load(std::memory_order_acquire) == kJoining) out->push_back(r);
    }
  };
  OpContext context{"comm_create (attaching the shared memory segment)", deadline,
                    config.timeout_ms};
  return waiter.Wait(ready, pending, context);
}

}  // namespace

absl::StatusOr<Tuning> ParseTuning(const dist_comm_config_t& config) {
  Tuning tuning;
  tuning.spin_yields = config.world_size > dist::JobCpus();  // dist/cpp/job_cpus.hpp
  tuning.stream_from_bytes = tuning.spin_yields ? kSharedCpuStreamBytes : kStreamCopyBytes;
  for (size_t i = 0; i < config.num_options; ++i) {
    const dist_kv_t& kv = config.options[i];
    if (kv.key == nullptr || kv.value == nullptr || !absl::StartsWith(kv.key, "shm.")) continue;
    const absl::string_view key = kv.key;
    uint64_t value = 0;
    if (!absl::SimpleAtoi(kv.value, &value)) {
      return absl::InvalidArgumentError(
          absl::StrCat("shm: option ", key, "=\"", kv.value, "\" is not a non-negative integer"));
    }
    if (key == "shm.slot_bytes" || key == "shm.ring_bytes") {
      if (value < kMinSlotBytes || value > kMaxSlotBytes || value % 64 != 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("shm: option ", key, "=", value, " must be a multiple of 64 in [",
                         kMinSlotBytes, ", ", kMaxSlotBytes, "] (4 KiB to 1 GiB)"));
      }
      (key == "shm.slot_bytes" ? tuning.slot_bytes : tuning.ring_bytes) = value;
    } else if (key == "shm.spin_us") {
      if (value > kMaxSpinUs) {
        return absl::InvalidArgumentError(absl::StrCat(
            "shm: option ", key, "=", value, " must be at most ", kMaxSpinUs, " (one second)"));
      }
      tuning.spin = absl::Microseconds(static_cast<int64_t>(value));
    } else if (key == "shm.stream_stores") {
      tuning.stream_from_bytes = value != 0 ? kStreamCopyBytes : kNeverStream;
    } else if (key == "shm.single_copy_bytes") {
      tuning.single_copy_from_bytes = value != 0 ? value : kNeverSingleCopy;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("shm: unknown option ", key,
                       "; known: shm.slot_bytes, shm.ring_bytes, shm.spin_us, shm.stream_stores, "
                       "shm.single_copy_bytes"));
    }
  }
  return tuning;
}

absl::StatusOr<std::unique_ptr<Segment>> JoinSegment(const dist_comm_config_t& config,
                                                     const Tuning& tuning,
                                                     const std::string& group) {
  const dist::StoreView store(config.store);
  const absl::Time deadline = absl::Now() + absl::Milliseconds(config.timeout_ms);
  const std::string host = dist::HostIdentity();
  absl::StatusOr<Keys> keys_or = KeysFor(store, config.rank);
  if (!keys_or.ok()) return keys_or.status();
  const Keys keys = *keys_or;
  DIST_RETURN_IF_ERROR(store.Set(keys.Host(config.rank), host));

  std::unique_ptr<Segment> segment;
  std::string name;
  if (config.rank == 0) {
    absl::Status hosts = CheckHosts(store, keys, config, host, deadline);
    if (!hosts.ok()) {
      // Tell the others why, instead of letting them time out.
      store.Set(keys.Segment(), absl::StrCat(kErrorPrefix, hosts.message())).IgnoreError();
      return hosts;
    }
    name = UniqueSegmentName("/dist-shm-");
    absl::StatusOr<std::unique_ptr<Segment>> created =
        Segment::Create(name, ChooseGeometry(config.world_size, tuning));
    if (!created.ok()) {
      store.Set(keys.Segment(), absl::StrCat(kErrorPrefix, created.status().message()))
          .IgnoreError();
      return created.status();
    }
    segment = *std::move(created);
    absl::Status published = store.Set(keys.Segment(), name);
    if (!published.ok()) {
      Segment::Unlink(name);
      return published;
    }
  } else {
    absl::StatusOr<std::string> value = store.Get(keys.Segment(), Remaining(deadline));
    if (!value.ok()) {
      return absl::Status(
          value.status().code(),
          absl::StrCat("shm: rank 0 did not publish the segment name: ", value.status().message()));
    }
    if (absl::StartsWith(*value, kErrorPrefix)) {
      return absl::FailedPreconditionError(value->substr(strlen(kErrorPrefix)));
    }
    name = *value;
    absl::StatusOr<std::string> host0 = store.Get(keys.Host(0), Remaining(deadline));
    if (host0.ok() && *host0 != host) {
      return absl::FailedPreconditionError(
          absl::StrCat("shm: the shm backend needs every rank on one host with a shared /dev/shm, "
                       "but rank 0 runs on [",
                       *host0, "] and rank ", config.rank, " on [", host,
                       "]; use gloo (DIST_BACKEND=gloo) for ranks on several hosts"));
    }
    absl::StatusOr<std::unique_ptr<Segment>> attached = Segment::Attach(name, config.world_size);
    if (!attached.ok()) return attached.status();
    segment = *std::move(attached);
  }
  absl::Status registered = Register(*segment, config, group, deadline);
  // Once everyone has mapped it (or we gave up), the name is not needed: a
  // crash from here on cannot leak the segment.
  Segment::Unlink(name);
  if (!registered.ok()) return registered;
  return segment;
}

}  // namespace dist_shm
