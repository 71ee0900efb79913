#include "plugins/backends/gloo/pair_access.h"

#include <fcntl.h>

#include <algorithm>

#include "gloo/transport/context.h"
#include "gloo/transport/tcp/pair.h"

namespace dist_gloo {
namespace {

namespace tcp = ::gloo::transport::tcp;

tcp::Pair* TcpPair(gloo::Context& context, int rank) {
  if (rank == context.rank || rank < 0 || rank >= context.size) return nullptr;
  return dynamic_cast<tcp::Pair*>(context.getPair(rank).get());
}

}  // namespace

std::string PeerAddress(gloo::Context& context, int rank) {
  try {
    tcp::Pair* pair = TcpPair(context, rank);
    return pair == nullptr ? std::string() : pair->peer().str();
  } catch (...) {
    return std::string();
  }
}

void FailAllPairs(gloo::Context& context, const std::string& reason) {
  for (int rank = 0; rank < context.size; ++rank) {
    try {
      tcp::Pair* pair = TcpPair(context, rank);
      if (pair != nullptr) pair->signalExceptionExternal(reason);
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
      if (pair != nullptr) pair->signalExceptionExternal(reason);
    } catch (...) {
    }
  }
}

void AdoptTransport(gloo::Context& context, std::shared_ptr<gloo::transport::Context> transport,
                    std::shared_ptr<gloo::transport::Device> device) {
  context.setTransport(std::move(device), std::move(transport));
}

int DuplicatePairSocket(gloo::Context& context, int rank) {
  try {
    tcp::Pair* pair = TcpPair(context, rank);
    if (pair == nullptr) return -1;
    const int fd = pair->fd();
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
      granted = std::max(pair->setSendBufferSize(bytes), 0);
    } catch (...) {
      granted = 0;
    }
    if (smallest < 0 || granted < smallest) smallest = granted;
  }
  return smallest < 0 ? 0 : smallest;
}

void SetNextSlot(gloo::Context& context, int slot) { context.setNextSlot(slot); }

void SetTransportTimeout(gloo::Context& context, std::chrono::milliseconds timeout) {
  try {
    context.setTimeout(timeout);  // the pinned Gloo passes it on to the transport
  } catch (...) {
  }
}

}  // namespace dist_gloo
