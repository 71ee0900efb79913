#include "tests/nccl/emulation/clique.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/nccl/emulation/reduction.h"

namespace dist::emulation {

namespace {

constexpr uint32_t kMagic = 0x44454d55;  // "DEMU": the segment is initialized
constexpr int kCollectiveSlots = 8;      // operations in flight per clique
constexpr int kMessageSlots = 8;         // sends in flight per pair of ranks
constexpr int kSplitSlots = 4;

enum MemberState : int32_t { kAbsent = 0, kJoined = 1, kAborted = 2, kDied = 3 };
enum MessageState : int32_t { kFree = 0, kPosted = 1, kConsumed = 2 };

struct Member {
  int32_t state;
  int32_t pid;
};

struct Entry {
  int32_t kind;
  int32_t type;
  int32_t op;
  int32_t root;
  uint64_t count;
  uint64_t send;  // address in the rank's process
  int32_t pid;
};

struct CollectiveSlot {
  int32_t in_use;
  uint64_t seq;
  int32_t arrived;
  int32_t read;  // ranks done reading their peers' inputs
  int32_t left;
  Entry entries[kMaxRanks];
};

struct Message {
  int32_t state;
  int32_t pid;
  uint64_t seq;
  uint64_t data;
  uint64_t bytes;
};

struct SplitSlot {
  int32_t in_use;
  uint64_t seq;
  int32_t arrived;
  int32_t ready;
  int32_t left;
  int32_t color[kMaxRanks];
  int32_t key[kMaxRanks];
  int32_t child_rank[kMaxRanks];
  int32_t child_size[kMaxRanks];
  char child_id[kMaxRanks][16];
};

}  // namespace

struct Shared {
  std::atomic<uint32_t> magic;
  int32_t nranks;
  int32_t joined;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  Member members[kMaxRanks];
  CollectiveSlot collectives[kCollectiveSlots];
  Message messages[kMaxRanks][kMaxRanks][kMessageSlots];  // [from][to][seq % slots]
  SplitSlot splits[kSplitSlots];
};

namespace {

// The segment's mutex; a process that died holding it leaves it
// recoverable (robust mutex).
class Lock {
 public:
  explicit Lock(Shared* shared) : shared_(shared) { Recover(pthread_mutex_lock(&shared_->mu)); }
  ~Lock() { pthread_mutex_unlock(&shared_->mu); }
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;

  // Waits until `done()`, checking every 20 ms whether peer processes died.
  template <typename Done>
  void Wait(Done done) {
    while (!done()) {
      timespec until{};
      clock_gettime(CLOCK_MONOTONIC, &until);
      until.tv_nsec += 20 * 1000 * 1000;
      if (until.tv_nsec >= 1000000000) {
        until.tv_sec += 1;
        until.tv_nsec -= 1000000000;
      }
      Recover(pthread_cond_timedwait(&shared_->cv, &shared_->mu, &until));
      NoticeDeaths();
    }
  }
  void WakeAll() { pthread_cond_broadcast(&shared_->cv); }
  // Around work that must not hold the lock (copies from peers).
  void Unlock() { pthread_mutex_unlock(&shared_->mu); }
  void Relock() { Recover(pthread_mutex_lock(&shared_->mu)); }

 private:
  void Recover(int result) {
    if (result == EOWNERDEAD) pthread_mutex_consistent(&shared_->mu);
  }
  void NoticeDeaths() {
    for (int r = 0; r < shared_->nranks; ++r) {
      Member& m = shared_->members[r];
      if (m.state == kJoined && m.pid != getpid() && kill(m.pid, 0) != 0 && errno == ESRCH) {
        m.state = kDied;
        WakeAll();
      }
    }
  }

  Shared* const shared_;
};

bool Gone(const Shared* s, int rank) {
  const int32_t state = s->members[rank].state;
  return state == kAborted || state == kDied;
}

// The first peer (not `rank`) whose communicator was aborted or whose
// process died, or -1.
int GonePeer(const Shared* s, int rank) {
  for (int r = 0; r < s->nranks; ++r) {
    if (r != rank && Gone(s, r)) return r;
  }
  return -1;
}

enum class Entered { kTaken, kSelfGone, kPeerGone };

// Takes `slot` (of the collective or split ring) for operation `seq` once
// the operation that used it before has left it; the first rank to come
// clears it. kSelfGone: this rank's communicator was aborted (its work
// quits quietly); kPeerGone: a peer's was, or its process died.
template <typename Slot>
Entered EnterSlot(Lock& lock, const Shared* s, Slot& slot, uint64_t seq, int rank) {
  lock.Wait(
      [&] { return !slot.in_use || slot.seq == seq || Gone(s, rank) || GonePeer(s, rank) >= 0; });
  if (Gone(s, rank)) return Entered::kSelfGone;
  if (slot.in_use && slot.seq != seq) return Entered::kPeerGone;
  if (!slot.in_use) {
    slot = Slot{};
    slot.in_use = 1;
    slot.seq = seq;
  }
  return Entered::kTaken;
}

Outcome PeerGone(const Shared* s, int rank, int peer, const char* what) {
  const bool died = s->members[peer].state == kDied;
  return {ncclRemoteError,
          absl::StrCat("emulated NCCL: rank ", peer,
                       died ? absl::StrCat(" (pid ", s->members[peer].pid, ") died")
                            : std::string(" aborted its communicator"),
                       " while rank ", rank, " was in ", what)};
}

// Reads `bytes` at `address` of process `pid` (single copy, as NCCL's
// P2P/CMA transports do).
bool ReadFrom(int32_t pid, uint64_t address, void* out, size_t bytes) {
  if (bytes == 0) return true;
  if (pid == getpid()) {
    std::memcpy(out, reinterpret_cast<const void*>(address), bytes);
    return true;
  }
  size_t done = 0;
  while (done < bytes) {
    iovec local{static_cast<char*>(out) + done, bytes - done};
    iovec remote{reinterpret_cast<void*>(address + done), bytes - done};
    const ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

const char* KindName(int32_t kind) {
  switch (static_cast<CollectiveKind>(kind)) {
    case CollectiveKind::kAllReduce:
      return "ncclAllReduce";
    case CollectiveKind::kBroadcast:
      return "ncclBroadcast";
    case CollectiveKind::kReduce:
      return "ncclReduce";
    case CollectiveKind::kAllGather:
      return "ncclAllGather";
    case CollectiveKind::kReduceScatter:
      return "ncclReduceScatter";
  }
  return "?";
}

bool Reduces(int32_t kind) {
  return kind == static_cast<int32_t>(CollectiveKind::kAllReduce) ||
         kind == static_cast<int32_t>(CollectiveKind::kReduce) ||
         kind == static_cast<int32_t>(CollectiveKind::kReduceScatter);
}

bool Rooted(int32_t kind) {
  return kind == static_cast<int32_t>(CollectiveKind::kBroadcast) ||
         kind == static_cast<int32_t>(CollectiveKind::kReduce);
}

std::string Describe(const Entry& e) {
  return absl::StrCat(KindName(e.kind), "(count ", e.count, ", type ", e.type, ", op ", e.op,
                      ", root ", e.root, ")");
}

// "" when every rank called the same collective, else what differs.
std::string Mismatch(const CollectiveSlot& slot, int nranks) {
  const Entry& first = slot.entries[0];
  for (int r = 1; r < nranks; ++r) {
    const Entry& other = slot.entries[r];
    const bool same = other.kind == first.kind && other.type == first.type &&
                      other.count == first.count &&
                      (!Reduces(first.kind) || other.op == first.op) &&
                      (!Rooted(first.kind) || other.root == first.root);
    if (!same) {
      return absl::StrCat("emulated NCCL: mismatched collectives: rank 0 called ", Describe(first),
                          ", rank ", r, " called ", Describe(other),
                          " (a real GPU would hang or corrupt data here)");
    }
  }
  return "";
}

// This rank's result of the collective in `slot` (read from the peers'
// buffers while they wait); empty when this rank receives nothing.
Outcome Compute(const CollectiveSlot& slot, int nranks, int rank, std::vector<char>* result) {
  const Entry& e = slot.entries[rank];
  const auto kind = static_cast<CollectiveKind>(e.kind);
  const auto type = static_cast<ncclDataType_t>(e.type);
  const auto op = static_cast<ncclRedOp_t>(e.op);
  const size_t n = e.count;
  const size_t bytes = n * ElementSize(type);
  auto read = [&](int from, size_t offset, size_t size, char* out) -> Outcome {
    const Entry& peer = slot.entries[from];
    if (ReadFrom(peer.pid, peer.send + offset, out, size)) return {};
    return {ncclRemoteError,
            absl::StrCat("emulated NCCL: cannot read rank ", from, "'s buffer (pid ", peer.pid,
                         "): ", std::strerror(errno))};
  };
  if (kind == CollectiveKind::kReduce && rank != e.root) return {};
  if (kind == CollectiveKind::kBroadcast) {
    result->resize(bytes);
    return read(e.root, 0, bytes, result->data());
  }
  if (kind == CollectiveKind::kAllGather) {
    result->resize(bytes * static_cast<size_t>(nranks));
    for (int r = 0; r < nranks; ++r) {
      Outcome got = read(r, 0, bytes, result->data() + static_cast<size_t>(r) * bytes);
      if (got.result != ncclSuccess) return got;
    }
    return {};
  }
  // Reductions: all-reduce and reduce over whole buffers, reduce-scatter
  // over this rank's block.
  const size_t offset =
      kind == CollectiveKind::kReduceScatter ? static_cast<size_t>(rank) * bytes : 0;
  std::vector<std::vector<char>> inputs(static_cast<size_t>(nranks), std::vector<char>(bytes));
  std::vector<const void*> pointers;
  for (int r = 0; r < nranks; ++r) {
    Outcome got = read(r, offset, bytes, inputs[static_cast<size_t>(r)].data());
    if (got.result != ncclSuccess) return got;
    pointers.push_back(inputs[static_cast<size_t>(r)].data());
  }
  result->resize(bytes);
  Reduce(type, op, pointers, n, result->data());
  return {};
}

}  // namespace

Clique::Clique(Shared* shared, std::string name) : shared_(shared), name_(std::move(name)) {}

int Clique::nranks() const { return shared_->nranks; }

Outcome Clique::Join(int rank) {
  Lock lock(shared_);
  Member& me = shared_->members[rank];
  if (me.state != kAbsent) {
    return {ncclInvalidUsage,
            absl::StrCat("emulated NCCL: rank ", rank, " joined this ncclUniqueId twice")};
  }
  me.state = kJoined;
  me.pid = getpid();
  // Everyone is in: nobody opens the segment by name any more.
  if (++shared_->joined == shared_->nranks) shm_unlink(name_.c_str());
  lock.WakeAll();
  return {};
}

Outcome Clique::AwaitMembers(int rank) {
  Lock lock(shared_);
  lock.Wait([&] { return shared_->joined == shared_->nranks || Gone(shared_, rank); });
  return {};  // left: the caller's comm is gone, nobody reads the result
}

void Clique::Leave(int rank) {
  Lock lock(shared_);
  shared_->members[rank].state = kAborted;
  lock.WakeAll();
}

Outcome Clique::RunCollective(uint64_t seq, int rank, const Collective& mine) {
  const int n = shared_->nranks;
  CollectiveSlot& slot = shared_->collectives[seq % kCollectiveSlots];
  Lock lock(shared_);
  switch (EnterSlot(lock, shared_, slot, seq, rank)) {
    case Entered::kSelfGone:
      return {};  // aborted: the kernel quits
    case Entered::kPeerGone:
      return PeerGone(shared_, rank, GonePeer(shared_, rank),
                      KindName(static_cast<int32_t>(mine.kind)));
    case Entered::kTaken:
      break;
  }
  slot.entries[rank] = Entry{static_cast<int32_t>(mine.kind),
                             static_cast<int32_t>(mine.type),
                             static_cast<int32_t>(mine.op),
                             mine.root,
                             mine.count,
                             reinterpret_cast<uint64_t>(mine.send),
                             static_cast<int32_t>(getpid())};
  ++slot.arrived;
  lock.WakeAll();
  // 1. Everyone arrives (their inputs are then ready and stay so).
  lock.Wait(
      [&] { return slot.arrived == n || Gone(shared_, rank) || GonePeer(shared_, rank) >= 0; });
  if (Gone(shared_, rank)) return {};
  if (slot.arrived != n) {
    return PeerGone(shared_, rank, GonePeer(shared_, rank),
                    KindName(static_cast<int32_t>(mine.kind)));
  }
  const std::string mismatch = Mismatch(slot, n);
  std::vector<char> result;
  Outcome outcome = mismatch.empty() ? Outcome{} : Outcome{ncclInvalidUsage, mismatch};
  if (mismatch.empty()) {
    // 2. Each rank reads what it needs from the others, unlocked.
    lock.Unlock();
    outcome = Compute(slot, n, rank, &result);
    lock.Relock();
  }
  ++slot.read;
  lock.WakeAll();
  // 3. Only when everyone has read may anyone write: for in-place calls
  // recv is this rank's input.
  lock.Wait([&] { return slot.read == n || GonePeer(shared_, rank) >= 0 || Gone(shared_, rank); });
  if (outcome.result == ncclSuccess && slot.read != n && !Gone(shared_, rank)) {
    outcome =
        PeerGone(shared_, rank, GonePeer(shared_, rank), KindName(static_cast<int32_t>(mine.kind)));
  }
  if (outcome.result == ncclSuccess && !result.empty() && mine.recv != nullptr) {
    std::memcpy(mine.recv, result.data(), result.size());
  }
  if (++slot.left == n) slot.in_use = 0;
  lock.WakeAll();
  return outcome;
}

Outcome Clique::RunPointToPoint(int rank, const std::vector<PointToPoint>& ops) {
  Lock lock(shared_);
  auto slot_of = [&](int from, int to, uint64_t seq) -> Message& {
    return shared_->messages[from][to][seq % kMessageSlots];
  };
  auto withdraw = [&] {
    for (const PointToPoint& op : ops) {
      Message& m = slot_of(rank, op.peer, op.seq);
      if (op.is_send && m.seq == op.seq && m.state == kPosted) m.state = kFree;
    }
    lock.WakeAll();
  };
  auto stop = [&](int peer) { return Gone(shared_, rank) || Gone(shared_, peer); };
  auto ended = [&](int peer, const char* what) -> Outcome {
    withdraw();
    if (Gone(shared_, rank)) return {};
    return PeerGone(shared_, rank, peer, what);
  };
  // All sends of the group are posted before any receive waits, so a group
  // that sends to and receives from the same peers cannot deadlock.
  for (const PointToPoint& op : ops) {
    if (!op.is_send) continue;
    Message& m = slot_of(rank, op.peer, op.seq);
    lock.Wait([&] { return m.state == kFree || stop(op.peer); });
    if (m.state != kFree) return ended(op.peer, "ncclSend");
    m = Message{kPosted, static_cast<int32_t>(getpid()), op.seq,
                reinterpret_cast<uint64_t>(op.buffer), op.bytes};
  }
  lock.WakeAll();
  for (const PointToPoint& op : ops) {
    if (op.is_send) continue;
    Message& m = slot_of(op.peer, rank, op.seq);
    lock.Wait([&] { return (m.state == kPosted && m.seq == op.seq) || stop(op.peer); });
    if (!(m.state == kPosted && m.seq == op.seq)) return ended(op.peer, "ncclRecv");
    if (m.bytes != op.bytes) {
      withdraw();
      return {ncclInvalidUsage,
              absl::StrCat("emulated NCCL: rank ", op.peer, " sent ", m.bytes, " bytes but rank ",
                           rank, " receives ", op.bytes, " bytes")};
    }
    // The sender's task waits for kConsumed, so its buffer stays valid.
    const int32_t pid = m.pid;
    const uint64_t data = m.data;
    lock.Unlock();
    const bool read = ReadFrom(pid, data, op.buffer, op.bytes);
    lock.Relock();
    if (!read) {
      withdraw();
      return {ncclRemoteError, absl::StrCat("emulated NCCL: cannot read rank ", op.peer,
                                            "'s buffer (pid ", pid, ")")};
    }
    m.state = kConsumed;
    lock.WakeAll();
  }
  for (const PointToPoint& op : ops) {
    if (!op.is_send) continue;
    Message& m = slot_of(rank, op.peer, op.seq);
    lock.Wait([&] { return m.state == kConsumed || stop(op.peer); });
    if (m.state != kConsumed) return ended(op.peer, "ncclSend");
    m.state = kFree;
  }
  lock.WakeAll();
  return {};
}

Outcome Clique::Split(uint64_t seq, int rank, int color, int key, SplitResult* result) {
  const int n = shared_->nranks;
  SplitSlot& slot = shared_->splits[seq % kSplitSlots];
  Lock lock(shared_);
  switch (EnterSlot(lock, shared_, slot, seq, rank)) {
    case Entered::kSelfGone:
      return {};
    case Entered::kPeerGone:
      return PeerGone(shared_, rank, GonePeer(shared_, rank), "ncclCommSplit");
    case Entered::kTaken:
      break;
  }
  slot.color[rank] = color;
  slot.key[rank] = key;
  if (++slot.arrived == n) {
    // The last to arrive forms the children: per color, ranks ordered by
    // (key, old rank), each child with a fresh id.
    std::map<int, std::vector<std::pair<int, int>>> by_color;
    for (int r = 0; r < n; ++r) {
      slot.child_size[r] = 0;
      if (slot.color[r] != NCCL_SPLIT_NOCOLOR) by_color[slot.color[r]].emplace_back(slot.key[r], r);
    }
    std::random_device random;
    for (auto& [c, members] : by_color) {
      std::sort(members.begin(), members.end());
      char id[16];
      for (size_t i = 0; i < sizeof(id); i += sizeof(unsigned)) {
        const unsigned word = random();
        std::memcpy(id + i, &word, sizeof(word));
      }
      for (size_t i = 0; i < members.size(); ++i) {
        const int r = members[i].second;
        std::memcpy(slot.child_id[r], id, sizeof(id));
        slot.child_rank[r] = static_cast<int32_t>(i);
        slot.child_size[r] = static_cast<int32_t>(members.size());
      }
    }
    slot.ready = 1;
  }
  lock.WakeAll();
  lock.Wait([&] { return slot.ready || Gone(shared_, rank) || GonePeer(shared_, rank) >= 0; });
  if (!slot.ready) {
    if (Gone(shared_, rank)) return {};
    return PeerGone(shared_, rank, GonePeer(shared_, rank), "ncclCommSplit");
  }
  result->member = slot.child_size[rank] > 0;
  if (result->member) {
    std::memset(result->child.internal, 0, sizeof(result->child.internal));
    std::memcpy(result->child.internal, slot.child_id[rank], 16);
    result->rank = slot.child_rank[rank];
    result->nranks = slot.child_size[rank];
  }
  if (++slot.left == n) slot.in_use = 0;
  lock.WakeAll();
  return {};
}

std::shared_ptr<Clique> CliqueFor(const ncclUniqueId& id, int nranks, std::string* error) {
  if (nranks > kMaxRanks) {
    *error =
        absl::StrCat("emulated NCCL: ", nranks, " ranks; the emulation has at most ", kMaxRanks);
    return nullptr;
  }
  std::string name = "/dist-cuda-emulation-";
  for (int i = 0; i < 16; ++i) {
    absl::StrAppend(&name, absl::Hex(static_cast<uint8_t>(id.internal[i]), absl::kZeroPad2));
  }
  // Threads of one process share one mapping.
  static std::mutex* mu = new std::mutex();
  static auto* open = new std::map<std::string, std::shared_ptr<Clique>>();
  std::lock_guard<std::mutex> guard(*mu);
  auto found = open->find(name);
  if (found != open->end()) {
    if (found->second->nranks() != nranks) {
      *error = absl::StrCat("emulated NCCL: ", nranks,
                            " ranks given, but another rank of this "
                            "ncclUniqueId said ",
                            found->second->nranks());
      return nullptr;
    }
    return found->second;
  }
  bool creator = true;
  int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0 && errno == EEXIST) {
    creator = false;
    fd = shm_open(name.c_str(), O_RDWR, 0600);
  }
  if (fd < 0) {
    *error = absl::StrCat("emulated NCCL: shm_open(", name, "): ", std::strerror(errno));
    return nullptr;
  }
  if (creator && ftruncate(fd, sizeof(Shared)) != 0) {
    *error = absl::StrCat("emulated NCCL: ftruncate(", name, "): ", std::strerror(errno));
    close(fd);
    return nullptr;
  }
  // A joiner may come before the creator has sized the segment.
  for (int tries = 0; !creator; ++tries) {
    struct stat st {};
    if (fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) >= sizeof(Shared)) break;
    if (tries > 5000) {
      *error = absl::StrCat("emulated NCCL: ", name, " was never sized by its creator");
      close(fd);
      return nullptr;
    }
    usleep(1000);
  }
  void* memory = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (memory == MAP_FAILED) {
    *error = absl::StrCat("emulated NCCL: mmap(", name, "): ", std::strerror(errno));
    return nullptr;
  }
  auto* shared = static_cast<Shared*>(memory);  // zero-filled by ftruncate
  if (creator) {
    shared->nranks = nranks;
    pthread_mutexattr_t mattr;
    pthread_mutexattr_init(&mattr);
    pthread_mutexattr_setpshared(&mattr, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&mattr, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&shared->mu, &mattr);
    pthread_condattr_t cattr;
    pthread_condattr_init(&cattr);
    pthread_condattr_setpshared(&cattr, PTHREAD_PROCESS_SHARED);
    pthread_condattr_setclock(&cattr, CLOCK_MONOTONIC);
    pthread_cond_init(&shared->cv, &cattr);
    shared->magic.store(kMagic, std::memory_order_release);
  } else {
    for (int tries = 0; shared->magic.load(std::memory_order_acquire) != kMagic; ++tries) {
      if (tries > 5000) {
        *error = absl::StrCat("emulated NCCL: ", name, " was never initialized by its creator");
        return nullptr;
      }
      usleep(1000);
    }
    if (shared->nranks != nranks) {
      *error = absl::StrCat("emulated NCCL: ", nranks,
                            " ranks given, but another rank of this "
                            "ncclUniqueId said ",
                            shared->nranks);
      return nullptr;
    }
  }
  auto clique = std::make_shared<Clique>(shared, name);
  (*open)[name] = clique;
  return clique;
}

}  // namespace dist::emulation
