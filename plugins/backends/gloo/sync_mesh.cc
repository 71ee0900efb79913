#include "plugins/backends/gloo/sync_mesh.h"

#include <sys/socket.h>
#include <unistd.h>

#include <exception>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "dist/cpp/host_log.hpp"
#include "dist/cpp/store.hpp"
#include "plugins/backends/gloo/full_mesh.h"
#include "plugins/backends/gloo/loop_kicker.h"
#include "plugins/backends/gloo/pair_access.h"
#include "plugins/backends/gloo/sync_limit.h"

namespace dist_gloo {
namespace {

// Under the communicator's store namespace, apart from the first mesh's
// keys (the bare ranks) and the failure notes (dist_gloo/failed/...).
constexpr absl::string_view kKeyPrefix = "dist_gloo/sync/";
constexpr absl::string_view kHint =
    "check that every rank issues the same collectives (the first small all_reduce, broadcast, "
    "all_gather or barrier connects the ranks a second time, for small messages)";

}  // namespace

SyncMesh::SyncMesh(int rank, int size, const dist_store_t* store,
                   std::shared_ptr<LoopKicker> device, std::chrono::milliseconds pair_timeout,
                   int send_buffer_bytes, size_t max_message_bytes)
    : rank_(rank),
      size_(size),
      store_(store),
      device_(std::move(device)),
      pair_timeout_(pair_timeout),
      send_buffer_bytes_(send_buffer_bytes),
      max_message_bytes_(max_message_bytes) {}

SyncMesh::~SyncMesh() {
  absl::MutexLock lock(&mu_);
  for (int fd : sockets_) {
    if (fd >= 0) close(fd);
  }
}

absl::StatusOr<std::shared_ptr<gloo::Context>> SyncMesh::Get() {
  {
    absl::MutexLock lock(&mu_);
    if (context_ != nullptr) return context_;
    if (!error_.ok()) return error_;
    if (!abort_reason_.empty()) return error_ = absl::AbortedError(abort_reason_);
  }
  const absl::Time start = absl::Now();
  auto context = std::make_shared<gloo::Context>(rank_, size_);
  context->setTimeout(pair_timeout_);
  MeshOptions options;
  options.key_prefix = kKeyPrefix;
  options.hint = kHint;
  options.kicker = device_.get();
  // An abort (comm_abort, a failure elsewhere) ends the wait for the others.
  options.cancelled = [this] {
    absl::MutexLock lock(&mu_);
    return !abort_reason_.empty();
  };
  absl::Status status = ConnectFullMesh(*context, dist::StoreView(store_), device_->device(),
                                        absl::FromChrono(pair_timeout_), options);
  // ConnectFullMesh cleans up after its own failure; from here on the
  // pairs exist and must be failed on the way out.
  const bool connected = status.ok();
  std::vector<int> sockets(size_, -1);
  std::vector<std::string> addresses(size_);
  size_t limit = 0;
  if (connected) {
    // setSync unregisters each pair from the device thread and waits for
    // that thread's next turn (loop_kicker.h).
    LoopKicker::Kick kick(device_.get());
    try {
      for (int peer = 0; peer < size_; ++peer) {
        if (peer == rank_) continue;
        context->getPair(peer)->setSync(/*sync=*/true, /*busyPoll=*/false);
        sockets[peer] = DuplicatePairSocket(*context, peer);
        addresses[peer] = PeerAddress(*context, peer);
      }
    } catch (const std::exception& e) {
      status = absl::UnavailableError(e.what());
    }
  }
  if (status.ok()) {
    // The duplicates first, so that an abort wakes the agreement below,
    // and the addresses, so that its errors name the peer's rank.
    absl::MutexLock lock(&mu_);
    if (!abort_reason_.empty()) {
      status = absl::AbortedError(abort_reason_);
    } else {
      sockets_ = sockets;
      peer_addresses_ = std::move(addresses);
    }
  }
  if (status.ok()) {
    try {
      limit = AgreeSyncMessageLimit(context, send_buffer_bytes_, max_message_bytes_);
    } catch (const std::exception& e) {
      status = absl::UnavailableError(e.what());
    }
  }
  absl::MutexLock lock(&mu_);
  if (status.ok() && !abort_reason_.empty()) status = absl::AbortedError(abort_reason_);
  if (!status.ok()) {
    sockets_.clear();
    for (int fd : sockets) {
      if (fd >= 0) close(fd);
    }
    if (connected) {
      LoopKicker::Kick kick(device_.get());  // so does closing one
      FailAllPairs(*context, std::string(status.message()));
    }
    error_ = absl::Status(
        status.code(), absl::StrCat("connecting the pairs for small messages: ", status.message()));
    return error_;
  }
  context_ = context;
  message_limit_ = limit;
  if (dist::LogEnabled(DIST_LOG_DEBUG)) {
    // The first small collective pays this (README.md, "Synchronous pairs").
    dist::Log(DIST_LOG_DEBUG, absl::StrCat("connected the pairs for small messages to ", size_ - 1,
                                           " ranks in ", absl::FormatDuration(absl::Now() - start),
                                           " (up to ", limit, " bytes a message)"));
  }
  return context;
}

size_t SyncMesh::message_limit() const {
  absl::MutexLock lock(&mu_);
  return message_limit_;
}

std::vector<int> SyncMesh::peer_sockets() const {
  absl::MutexLock lock(&mu_);
  return sockets_;
}

void SyncMesh::Abort(const std::string& reason) {
  std::shared_ptr<gloo::Context> context;
  {
    absl::MutexLock lock(&mu_);
    if (!abort_reason_.empty()) return;
    abort_reason_ = reason;
    // A thread reading a synchronous pair holds the pair's lock until its
    // recv returns, which shutdown makes happen now (FailAllPairs alone
    // would wait for the read to time out).
    for (int fd : sockets_) {
      if (fd >= 0) shutdown(fd, SHUT_RDWR);
    }
    context = context_;
  }
  if (context != nullptr) FailAllPairs(*context, reason);
}

std::vector<std::string> SyncMesh::PeerAddresses() const {
  absl::MutexLock lock(&mu_);
  return peer_addresses_;
}

}  // namespace dist_gloo
