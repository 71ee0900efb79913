#include "plugins/backends/gloo/pair_access.h"

#include <fcntl.h>
#include <sys/socket.h>

#include "gloo/config.h"
#include "gloo/transport/context.h"
#include "gloo/transport/tcp/pair.h"

static_assert(GLOO_VERSION == 500,
              "pair_access.cc reaches into Gloo 0.5's tcp::Pair; re-check it for this Gloo");

namespace dist_gloo {
namespace {

namespace tcp = ::gloo::transport::tcp;

class PairAccess : public tcp::Pair {
 public:
  static std::string Peer(tcp::Pair& pair) { return (pair.*(&PairAccess::peer))().str(); }
  static void Fail(tcp::Pair& pair, const std::string& reason) {
    (pair.*(&PairAccess::signalExceptionExternal))(reason);
  }
  static int Socket(tcp::Pair& pair) { return pair.*(&PairAccess::fd_); }
  static size_t& SendBufferSize(tcp::Pair& pair) { return pair.*(&PairAccess::sendBufferSize_); }
};

class ContextAccess : public gloo::Context {
 public:
  static std::shared_ptr<gloo::transport::Context>& Transport(gloo::Context& context) {
    return context.*(&ContextAccess::transportContext_);
  }
  static int& Slot(gloo::Context& context) { return context.*(&ContextAccess::slot_); }
  static std::shared_ptr<gloo::transport::Device>& Device(gloo::Context& context) {
    return context.*(&ContextAccess::device_);
  }
};

tcp::Pair* TcpPair(gloo::Context& context, int rank) {
  if (rank == context.rank || rank < 0 || rank >= context.size) return nullptr;
  return dynamic_cast<tcp::Pair*>(context.getPair(rank).get());
}

}  // namespace

std::string PeerAddress(gloo::Context& context, int rank) {
  try {
    tcp::Pair* pair = TcpPair(context, rank);
    return pair == nullptr ? std::string() : PairAccess::Peer(*pair);
  } catch (...) {
    return std::string();
  }
}

void FailAllPairs(gloo::Context& context, const std::string& reason) {
  for (int rank = 0; rank < context.size; ++rank) {
    try {
      tcp::Pair* pair = TcpPair(context, rank);
      if (pair != nullptr) PairAccess::Fail(*pair, reason);
    } catch (...) {
      // A pair that failed already keeps its first exception; nothing to do.
    }
  }
}

void FailTransportPairs(gloo::transport::Context& transport, int rank, int size,
                        const std::string& reason) {
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    try {
      auto* pair = dynamic_cast<tcp::Pair*>(transport.getPair(peer).get());
      if (pair != nullptr) PairAccess::Fail(*pair, reason);
    } catch (...) {
    }
  }
}

void AdoptTransport(gloo::Context& context, std::shared_ptr<gloo::transport::Context> transport,
                    std::shared_ptr<gloo::transport::Device> device) {
  ContextAccess::Device(context) = std::move(device);
  ContextAccess::Transport(context) = std::move(transport);
}

int DuplicatePairSocket(gloo::Context& context, int rank) {
  try {
    tcp::Pair* pair = TcpPair(context, rank);
    if (pair == nullptr) return -1;
    const int fd = PairAccess::Socket(*pair);
    return fd < 0 ? -1 : fcntl(fd, F_DUPFD_CLOEXEC, 0);
  } catch (...) {
    return -1;
  }
}

int EnlargeSendBuffers(gloo::Context& context, int bytes) {
  int smallest = -1;
  for (int rank = 0; rank < context.size; ++rank) {
    int granted = 0;
    try {
      tcp::Pair* pair = TcpPair(context, rank);
      if (pair == nullptr) continue;
      const int fd = PairAccess::Socket(*pair);
      socklen_t length = sizeof(granted);
      if (fd >= 0 && setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes)) == 0 &&
          getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &granted, &length) == 0) {
        // What Gloo's own Pair::send records after it sets the size (the
        // kernel's doubled figure); it only ever grows the buffer from here.
        PairAccess::SendBufferSize(*pair) = static_cast<size_t>(granted);
      } else {
        granted = 0;
      }
    } catch (...) {
      granted = 0;
    }
    if (smallest < 0 || granted < smallest) smallest = granted;
  }
  return smallest < 0 ? 0 : smallest;
}

void SetNextSlot(gloo::Context& context, int slot) { ContextAccess::Slot(context) = slot; }

void SetTransportTimeout(gloo::Context& context, std::chrono::milliseconds timeout) {
  try {
    context.setTimeout(timeout);
    std::shared_ptr<gloo::transport::Context>& transport = ContextAccess::Transport(context);
    if (transport != nullptr) transport->setTimeout(timeout);
  } catch (...) {
  }
}

}  // namespace dist_gloo
