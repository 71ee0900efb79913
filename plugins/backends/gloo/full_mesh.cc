#include "plugins/backends/gloo/full_mesh.h"

#include <sys/resource.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <exception>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gloo/transport/context.h"
#include "gloo/transport/tcp/address.h"
#include "gloo/transport/tcp/pair.h"
#include "plugins/backends/gloo/loop_kicker.h"
#include "plugins/backends/gloo/pair_access.h"
#include "plugins/backends/gloo/pair_proof.h"
#include "support/auth.h"
#include "support/descriptors.h"

namespace dist_gloo {
namespace {

// How often a wait that can be cancelled checks.
constexpr absl::Duration kCancelPoll = absl::Milliseconds(50);

// The store's get, in slices of kCancelPoll when it can be cancelled.
absl::StatusOr<std::string> GetWhenSet(const dist::StoreView& store, const std::string& key,
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

// What a rank publishes in place of its addresses when it could not open
// its ends of the pairs, followed by why: its peers fail at once, naming
// it, instead of waiting their whole timeout for addresses that never come.
// (Addresses are sockaddr bytes, which never begin so.)
constexpr absl::string_view kSetupFailed = "dist-gloo: no addresses: ";

// The failure a peer published in place of its addresses, if one did. A
// connect that failed meanwhile (another peer saw that record first and
// closed its end) is only a symptom, so the error names this cause.
absl::Status PublishedSetupFailure(const dist::StoreView& store, const std::string& prefix,
                                   int rank, int size) {
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    const std::string key = absl::StrCat(prefix, peer);
    absl::StatusOr<bool> exists = store.Check({key});
    if (!exists.ok() || !*exists) continue;
    absl::StatusOr<std::string> theirs = store.Get(key, absl::Milliseconds(1));
    if (theirs.ok() && absl::StartsWith(*theirs, kSetupFailed)) {
      return absl::FailedPreconditionError(
          absl::StrCat("rank ", peer, " ", theirs->substr(kSetupFailed.size())));
    }
  }
  return absl::OkStatus();
}

// Gloo's exception from opening this rank's ends of the pairs (socket,
// bind, listen), as one line, with the fix where it is known.
absl::Status SetupFailure(const char* what, int world_size) {
  std::string message = absl::StrCat("could not open its Gloo sockets (", what, ")");
  if (absl::StrContains(what, "Too many open files in system")) {
    absl::StrAppend(&message, ": the host is out of file descriptors (fs.file-max)");
  } else if (absl::StrContains(what, "Too many open files")) {
    // A pair is a socket, and a listening one until its peer connects; the
    // synchronous pairs are a second mesh.
    absl::StrAppend(&message, ": ", dist::support::DescribeDescriptors(), "; a Gloo group of ",
                    world_size, " ranks needs up to 4 per peer while connecting (",
                    4 * static_cast<int64_t>(world_size - 1),
                    " here) besides the program's own; raise the limit");
  }
  return absl::ResourceExhaustedError(message);
}

// Where `other`'s pair is in the list of addresses `owner` publishes: in
// rank order, with `owner` itself skipped.
size_t SlotOf(int owner, int other) {
  return static_cast<size_t>(other < owner ? other : other - 1);
}

// Whether this rank's end of a pair makes the connection in connect()
// (true) or waits there for the peer's (false), by Gloo's own rule
// (tcp::Pair::isClient). The other end's listening socket accepts in the
// device thread, whether or not its connect() has been called yet. So a
// rank that makes all its own connects before waiting on any accept can
// connect every pair from one thread, and no rank waits on another's wait.
// Takes both ends' addresses as published: the pair's own copy changes in
// the device thread once the peer connects.
bool WeConnect(const std::vector<char>& self_bytes, const std::vector<char>& peer_bytes) {
  try {
    return gloo::transport::tcp::Pair::isClient(gloo::transport::tcp::Address(self_bytes),
                                                gloo::transport::tcp::Address(peer_bytes));
  } catch (const std::exception&) {
    return true;  // connect() reports the mismatch itself
  }
}

// Connects the pairs of one transport context on a few threads. A few, not
// one per pair: at 64 ranks on 2 cores, creating and tearing down 63
// threads a rank was most of dist_init (README.md, "Start-up"). More than
// one, because Gloo's connect() on the connecting end unregisters the
// pair's listening socket and then waits for the device thread to finish
// its current turn, up to 10 ms when no other event wakes it; in parallel
// those waits overlap. Pairs are connected in the order they are
// started, so the connects this rank makes all come before its waits for peers'.
class Connector {
 public:
  Connector(gloo::transport::Context& transport, int rank, int size, LoopKicker* kicker)
      : transport_(transport), rank_(rank), size_(size), kicker_(kicker) {}
  ~Connector() { (void)Finish(); }

  // Queues `peer`'s pair to be connected to `address`.
  void Start(int peer, std::vector<char> address) {
    absl::MutexLock lock(&mu_);
    if (!status_.ok()) return;
    queue_.push_back({peer, std::move(address)});
    pending_.insert(peer);
    if (threads_.size() < kThreads && threads_.size() < pending_.size()) {
      threads_.emplace_back([this] { Work(); });
    }
  }

  // Fails every pair with `status` (the first failure wins), which wakes
  // every connect still waiting.
  void Fail(const absl::Status& status) {
    {
      absl::MutexLock lock(&mu_);
      if (!status_.ok()) return;
      status_ = status;
      queue_.clear();
    }
    LoopKicker::Kick kick(kicker_);  // closing connected pairs waits for the device thread
    FailTransportPairs(transport_, rank_, size_, std::string(status.message()));
  }

  bool ok() {
    absl::MutexLock lock(&mu_);
    return status_.ok();
  }

  // Waits until every pair started is connected or one failed. At
  // `deadline` it fails the pairs still connecting, naming their peers:
  // Gloo itself gives a connect five times the pair's timeout. When
  // `cancelled` (may be null) turns true it fails them with ABORTED.
  void Await(absl::Time deadline, absl::Duration timeout, absl::string_view hint,
             const std::function<bool()>& cancelled) {
    for (;;) {
      const absl::Time until =
          cancelled == nullptr ? deadline : std::min(deadline, absl::Now() + kCancelPoll);
      std::string late;
      {
        absl::MutexLock lock(&mu_);
        if (mu_.AwaitWithDeadline(absl::Condition(this, &Connector::Settled), until)) return;
        late = absl::StrJoin(pending_, ", ");
      }
      // A wait that ran to `deadline` has timed out even when absl::Now()
      // reads a hair earlier than the clock the wait used; without a
      // `cancelled` that is the only way here, and calling the empty
      // function threw std::bad_function_call on the rank's thread.
      if (until >= deadline || absl::Now() >= deadline) {
        Fail(absl::DeadlineExceededError(
            absl::StrCat("Gloo rendezvous timed out after ", absl::FormatDuration(timeout),
                         " connecting to rank(s) ", late, "; ", hint)));
        return;
      }
      if (cancelled != nullptr && cancelled()) {
        Fail(absl::AbortedError(absl::StrCat("cancelled while connecting to rank(s) ", late)));
        return;
      }
    }
  }

  // Waits for the connecting threads; the first failure, if any.
  absl::Status Finish() {
    std::vector<std::thread> threads;
    {
      absl::MutexLock lock(&mu_);
      done_ = true;
      threads.swap(threads_);
    }
    for (std::thread& thread : threads) thread.join();
    absl::MutexLock lock(&mu_);
    return status_;
  }

 private:
  static constexpr size_t kThreads = 4;

  bool Settled() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return pending_.empty() || !status_.ok();
  }
  bool WorkOrDone() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !queue_.empty() || done_; }

  void Work() {
    for (;;) {
      Item next;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(this, &Connector::WorkOrDone));
        if (queue_.empty()) return;
        next = std::move(queue_.front());
        queue_.pop_front();
      }
      const int peer = next.peer;
      try {
        // Not kicked (loop_kicker.h): while the ranks connect, the device
        // thread has events enough; a timer on every rank's device cost
        // 64 ranks on 2 cores a third more time.
        transport_.getPair(peer)->connect(next.address);
      } catch (const std::exception& e) {
        Fail(absl::UnavailableError(
            absl::StrCat("could not connect to rank ", peer, ": ", e.what())));
      }
      absl::MutexLock lock(&mu_);
      pending_.erase(peer);
    }
  }

  struct Item {
    int peer = -1;
    std::vector<char> address;
  };

  gloo::transport::Context& transport_;
  const int rank_;
  const int size_;
  LoopKicker* const kicker_;
  absl::Mutex mu_;
  std::deque<Item> queue_ ABSL_GUARDED_BY(mu_);
  // Started and not yet connected, in rank order for the error message.
  std::set<int> pending_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
};

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
  try {
    for (int peer = 0; peer < size; ++peer) {
      if (peer == rank) continue;
      const std::vector<char> bytes = transport->createPair(peer)->address().bytes();
      address_bytes = bytes.size();
      mine.append(bytes.begin(), bytes.end());
    }
  } catch (const std::exception& e) {
    const absl::Status failed = SetupFailure(e.what(), size);
    // Best effort: a peer that cannot read it times out as before.
    store.Set(absl::StrCat(options.key_prefix, rank), absl::StrCat(kSetupFailed, failed.message()))
        .IgnoreError();
    return absl::Status(failed.code(), absl::StrCat("this rank ", failed.message()));
  }
  // The secret the pairs prove they know (pair_proof.h): rank 0's, set
  // before its addresses, so a rank that has those can have it at once.
  const std::string secret_key = absl::StrCat(options.key_prefix, "pair_secret");
  std::string secret;
  if (rank == 0) {
    secret = dist::support::auth::Nonce();  // 32 bytes from getrandom(2)
    if (secret.empty()) {
      return absl::InternalError(absl::StrCat(
          "could not draw the secret Gloo's pairs prove they know: getrandom: ", strerror(errno)));
    }
    if (absl::Status set = store.Set(secret_key, secret); !set.ok()) return set;
  }
  if (absl::Status set = store.Set(absl::StrCat(options.key_prefix, rank), mine); !set.ok())
    return set;

  const absl::Time deadline = absl::Now() + timeout;
  Connector connector(*transport, rank, size, options.kicker);
  // The pairs whose peer connects, started after every connect this rank
  // makes (see WeConnect).
  std::vector<std::pair<int, std::vector<char>>> accepting;
  accepting.reserve(size);
  std::vector<bool> connects(size, false);  // whether this rank's end connects
  absl::Status status;
  for (int peer = 0; peer < size && status.ok() && connector.ok(); ++peer) {
    if (peer == rank) continue;
    absl::StatusOr<std::string> theirs =
        GetWhenSet(store, absl::StrCat(options.key_prefix, peer), deadline, options.cancelled);
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
    if (absl::StartsWith(*theirs, kSetupFailed)) {
      // Not UNAVAILABLE: nothing about reaching that rank would help.
      status = absl::FailedPreconditionError(
          absl::StrCat("rank ", peer, " ", theirs->substr(kSetupFailed.size())));
      break;
    }
    // Their end of the pair with this rank.
    const size_t slot = SlotOf(peer, rank);
    if (theirs->size() < (slot + 1) * address_bytes) {
      status = absl::InternalError(absl::StrCat("rank ", peer, " published ", theirs->size(),
                                                " bytes of addresses; expected ",
                                                (size - 1) * address_bytes));
      break;
    }
    std::vector<char> address(theirs->begin() + slot * address_bytes,
                              theirs->begin() + (slot + 1) * address_bytes);
    const size_t own_slot = SlotOf(rank, peer);
    const std::vector<char> own(mine.begin() + own_slot * address_bytes,
                                mine.begin() + (own_slot + 1) * address_bytes);
    if (WeConnect(own, address)) {
      connects[peer] = true;
      connector.Start(peer, std::move(address));
    } else {
      accepting.emplace_back(peer, std::move(address));
    }
  }
  // A peer that never published its address will not connect either: wake
  // whatever is still connecting instead of waiting out its timeout.
  if (!status.ok()) connector.Fail(status);
  for (auto& [peer, address] : accepting) {
    connector.Start(peer, std::move(address));
  }
  connector.Await(deadline, timeout, options.hint, options.cancelled);
  if (absl::Status connected = connector.Finish(); !connected.ok()) {
    LoopKicker::Kick kick(options.kicker);  // closing the pairs waits for the device thread
    transport.reset();
    absl::Status cause = PublishedSetupFailure(store, std::string(options.key_prefix), rank, size);
    return cause.ok() ? connected : cause;
  }
  AdoptTransport(context, std::move(transport), device);
  if (rank != 0) {
    absl::StatusOr<std::string> got = GetWhenSet(store, secret_key, deadline, options.cancelled);
    if (!got.ok()) return got.status();
    secret = *std::move(got);
  }
  return ProvePairs(context, connects, secret,
                    std::max(deadline - absl::Now(), absl::Milliseconds(100)), options.hint);
}

}  // namespace dist_gloo
