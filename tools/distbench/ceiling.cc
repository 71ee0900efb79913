#include "tools/distbench/ceiling.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dist/cpp/job_cpus.hpp"
#include "plugins/backends/gloo/pair_access.h"
#include "tools/distbench/group_util.h"

namespace distbench {
namespace {

// The plugin's ring chunk (RingChunkBytes in
// plugins/backends/gloo/ring_pipelined.h): large enough that a system call
// is small against its copy, small enough to stay in L2.
constexpr size_t kChunkBytes = size_t{256} << 10;

// How long the plugin polls a socket before it sleeps in a read, where
// every rank has a CPU of its own (plugins/backends/gloo/README.md,
// "Waiting awake"); elsewhere a polling rank starves the one it waits for.
constexpr absl::Duration kSpin = absl::Microseconds(50);

}  // namespace

LoopbackCeiling::LoopbackCeiling(std::unique_ptr<LoopbackRing> ring, int smallest_send_buffer,
                                 absl::Duration timeout, absl::Duration spin)
    : ring_(std::move(ring)),
      smallest_send_buffer_(smallest_send_buffer),
      timeout_(timeout),
      spin_(spin),
      send_chunk_(kChunkBytes, 1),
      recv_chunk_(kChunkBytes, 0) {}

absl::StatusOr<std::unique_ptr<LoopbackCeiling>> LoopbackCeiling::Make(const BaselineSetup& setup) {
  // What every rank decides alike, from the flags and the launcher's
  // variables: no collective is needed to agree on these.
  if (setup.world_size < 2) {
    return absl::UnimplementedError("the loopback ceiling needs 2 or more ranks");
  }
  if (setup.local_world_size != setup.world_size) {
    return absl::UnimplementedError(
        "the loopback ceiling needs every rank on this host (LOCAL_WORLD_SIZE equal to the "
        "world size, as distbench -n and distrun set it)");
  }
  // Every rank listens before any connects, so a connect always finds its
  // neighbour listening; the ports travel through the group under test.
  absl::StatusOr<std::unique_ptr<LoopbackListener>> listener = LoopbackListener::Open();
  std::vector<double> ports(setup.world_size, 0.0);
  if (listener.ok()) ports[setup.rank] = (*listener)->port();
  absl::StatusOr<std::vector<double>> all =
      AllReduceDoubles(setup.pg, setup.device, ports, DIST_MAX);
  if (!all.ok()) return all.status();
  if (!listener.ok()) return listener.status();
  std::vector<int> port_of(setup.world_size);
  for (int r = 0; r < setup.world_size; ++r) {
    if ((*all)[r] <= 0) {
      return absl::UnavailableError(absl::StrCat(
          "loopback_tcp: rank ", r, " could not listen on 127.0.0.1 (see its stderr)"));
    }
    port_of[r] = static_cast<int>((*all)[r]);
  }
  // Every rank is up (the group exists), so connecting takes moments; a
  // short bound keeps a failure from stalling the run.
  const absl::Duration connect_timeout =
      absl::Milliseconds(std::min<int64_t>(setup.timeout_ms, 60000));
  absl::StatusOr<std::unique_ptr<LoopbackRing>> ring =
      LoopbackRing::Connect(setup.rank, setup.world_size, port_of, **listener,
                            dist_gloo::kPairSendBufferBytes, connect_timeout);
  listener->reset();  // the ring is connected: nobody else may come in
  // Agree: a ceiling only some ranks have would hang the others. The same
  // reduction brings the smallest send buffer (as a maximum of negations).
  absl::StatusOr<std::vector<double>> agreed = AllReduceDoubles(
      setup.pg, setup.device,
      {ring.ok() ? 0.0 : 1.0, ring.ok() ? -static_cast<double>((*ring)->send_buffer_bytes()) : 0.0},
      DIST_MAX);
  if (!agreed.ok()) return agreed.status();
  if (!ring.ok()) return ring.status();
  if ((*agreed)[0] != 0.0) {
    return absl::UnavailableError("the loopback ceiling failed on another rank (see its stderr)");
  }
  const absl::Duration spin = setup.world_size <= dist::JobCpus() ? kSpin : absl::ZeroDuration();
  return std::unique_ptr<LoopbackCeiling>(
      new LoopbackCeiling(*std::move(ring), static_cast<int>(-(*agreed)[1]),
                          absl::Milliseconds(setup.timeout_ms), spin));
}

std::string LoopbackCeiling::description() const {
  return absl::StrCat(
      "plain TCP over 127.0.0.1, each rank sending to rank+1 while it receives "
      "from rank-1 in ",
      kChunkBytes >> 10, " KiB chunks, send buffers of ", dist_gloo::kPairSendBufferBytes >> 20,
      " MiB asked (SO_SNDBUF ", smallest_send_buffer_, " granted), ",
      spin_ > absl::ZeroDuration()
          ? absl::StrCat("polling ", absl::FormatDuration(spin_), " before a wait")
          : std::string("sleeping in every wait"),
      ", as the gloo plugin");
}

absl::Status LoopbackCeiling::Supports(const Case& c) const {
  if (RingShiftBytes(c) == 0) return absl::UnimplementedError("moves no bytes");
  return absl::OkStatus();
}

absl::Status LoopbackCeiling::Run(const Case& c) {
  return ring_->Shift(send_chunk_.data(), send_chunk_.size(), recv_chunk_.data(),
                      recv_chunk_.size(), RingShiftBytes(c), timeout_, spin_);
}

}  // namespace distbench
