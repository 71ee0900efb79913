#include "plugins/backends/gloo/full_mesh.h"

#include <algorithm>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gloo/transport/context.h"
#include "plugins/backends/gloo/pair_access.h"

namespace dist_gloo {
namespace {

// How often a wait that can be cancelled checks.
constexpr absl::Duration kCancelPoll = absl::Milliseconds(50);

// The store's get, in slices of kCancelPoll when it can be cancelled.
absl::StatusOr<std::string> GetAddresses(const dist::StoreView& store, const std::string& key,
                                         absl::Time deadline,
                                         const std::function<bool()>& cancelled) {
  const absl::Time start = absl::Now();
  for (;;) {
    const absl::Duration left = std::max(deadline - absl::Now(), absl::Milliseconds(1));
    if (cancelled == nullptr) return store.Get(key, left);
    absl::StatusOr<std::string> got = store.Get(key, std::min(left, kCancelPoll));
    if (got.ok() || !absl::IsDeadlineExceeded(got.status())) return got;
    if (cancelled()) return absl::AbortedError("cancelled while waiting for the other ranks");
    if (absl::Now() >= deadline) {
      // The last slice's own message would say "timed out after 1 ms".
      return absl::DeadlineExceededError(absl::StrCat(
          "store key '", key, "' not set within ",
          absl::FormatDuration(absl::Trunc(absl::Now() - start, absl::Milliseconds(1)))));
    }
  }
}

}  // namespace

absl::Status ConnectFullMesh(gloo::Context& context, const dist::StoreView& store,
                             const std::shared_ptr<gloo::transport::Device>& device,
                             absl::Duration timeout, const MeshOptions& options) {
  const int rank = context.rank;
  const int size = context.size;
  std::shared_ptr<gloo::transport::Context> transport = device->createContext(rank, size);
  transport->setTimeout(context.getTimeout());

  // This rank's end of every pair, in rank order (self skipped), as one
  // value: what Gloo's own connectFullMesh publishes.
  std::string mine;
  size_t address_bytes = 0;
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    const std::vector<char> bytes = transport->createPair(peer)->address().bytes();
    address_bytes = bytes.size();
    mine.append(bytes.begin(), bytes.end());
  }
  if (absl::Status set = store.Set(absl::StrCat(options.key_prefix, rank), mine); !set.ok())
    return set;

  const absl::Time deadline = absl::Now() + timeout;
  absl::Mutex mu;
  std::vector<int> failed;
  std::string first_error;
  std::vector<std::thread> connecting;
  connecting.reserve(size);
  absl::Status status;
  for (int peer = 0; peer < size && status.ok(); ++peer) {
    if (peer == rank) continue;
    absl::StatusOr<std::string> theirs =
        GetAddresses(store, absl::StrCat(options.key_prefix, peer), deadline, options.cancelled);
    if (!theirs.ok()) {
      status = theirs.status();
      if (absl::IsDeadlineExceeded(status)) {
        status = absl::DeadlineExceededError(
            absl::StrCat("Gloo rendezvous timed out after ", absl::FormatDuration(timeout),
                         " waiting for the address of rank(s) ", peer, "; ", options.hint, " (",
                         status.message(), ")"));
      }
      break;
    }
    // Their end of the pair with this rank: slot `rank` of their list,
    // minus one past their own rank.
    const size_t slot = static_cast<size_t>(rank < peer ? rank : rank - 1);
    if (theirs->size() < (slot + 1) * address_bytes) {
      status = absl::InternalError(absl::StrCat("rank ", peer, " published ", theirs->size(),
                                                " bytes of addresses; expected ",
                                                (size - 1) * address_bytes));
      break;
    }
    std::vector<char> address(theirs->begin() + slot * address_bytes,
                              theirs->begin() + (slot + 1) * address_bytes);
    gloo::transport::Pair* pair = transport->getPair(peer).get();
    connecting.emplace_back([pair, peer, address = std::move(address), &mu, &failed, &first_error] {
      try {
        pair->connect(address);
      } catch (const std::exception& e) {
        absl::MutexLock lock(&mu);
        failed.push_back(peer);
        if (first_error.empty()) first_error = e.what();
      }
    });
  }
  // A peer that never published its address will not connect either: wake
  // the threads still connecting instead of waiting out their timeouts.
  if (!status.ok()) FailTransportPairs(*transport, rank, size, std::string(status.message()));
  for (std::thread& thread : connecting) thread.join();
  if (!status.ok()) return status;
  if (!failed.empty()) {
    return absl::UnavailableError(absl::StrCat("could not connect to rank(s) ",
                                               absl::StrJoin(failed, ", "), ": ", first_error));
  }
  AdoptTransport(context, std::move(transport), device);
  return absl::OkStatus();
}

}  // namespace dist_gloo
