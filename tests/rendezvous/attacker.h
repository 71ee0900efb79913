// A hostile neighbour of the TCP store on loopback, by hand: raw
// connections, bytes sent and read with deadlines, and the version 3
// handshake, for the tests that flood or probe a store.
#ifndef DIST_TESTS_RENDEZVOUS_ATTACKER_H_
#define DIST_TESTS_RENDEZVOUS_ATTACKER_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace dist::testing {

// A connected, non-blocking socket to 127.0.0.1:`port`, or -1.
int RawConnect(int port);

// Sends what the socket takes of `bytes` until `deadline`; the bytes sent.
size_t SendUntil(int fd, const std::string& bytes, absl::Time deadline);

// Whether the server closed `fd` by `deadline` (reading and discarding what
// it sent).
bool ClosedBy(int fd, absl::Time deadline);

// Reads one frame's payload (blocking up to 10 s); "" on failure.
std::string ReadFrame(int fd);

// A client's hello frame with `nonce`.
std::string HelloFrame(const std::string& nonce);

// The version 3 handshake by hand with `token`: "welcomed" when the server
// let the client in, else the server's refusal.
std::string RefusalAfterProof(int fd, const std::string& token);

// True when the server welcomed us.
bool Handshake(int fd, const std::string& token);

// Closes every socket when the test ends, passed or not.
struct Sockets {
  std::vector<int> fds;
  ~Sockets();
};

// How a crowd behaves once connected.
enum class Crowd {
  kSilent,    // never says a word
  kLoggedIn,  // completes the handshake, then sits idle
};

// Opens `count` connections to 127.0.0.1:`port` (into `sockets`, which
// closes them), each logged in with `token` when `crowd` is kLoggedIn,
// within 60 s. The number that connected (kSilent) or were welcomed
// (kLoggedIn).
int OpenCrowd(int port, int count, Crowd crowd, const std::string& token, Sockets* sockets);

}  // namespace dist::testing

#endif  // DIST_TESTS_RENDEZVOUS_ATTACKER_H_
