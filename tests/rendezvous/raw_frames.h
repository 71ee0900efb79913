// The TCP store's wire by hand, for the tests that play a hostile client or
// a fake server: a listener on loopback and reading one length-prefixed
// frame (plugins/store/protocol.h) from a socket, bounded in time.
#ifndef DIST_TESTS_RENDEZVOUS_RAW_FRAMES_H_
#define DIST_TESTS_RENDEZVOUS_RAW_FRAMES_H_

#include <string>

#include "absl/time/time.h"

namespace dist::testing {

// A listening TCP socket on 127.0.0.1 at a port the kernel picked; -1 on
// failure. `*port` receives the port.
int ListenOnLoopback(int* port);

// Reads one frame's payload from `fd` into `*payload`. False at the end of
// the stream, on an error, or when the frame is not whole within `timeout`.
bool ReadFrame(int fd, std::string* payload, absl::Duration timeout = absl::Seconds(10));

}  // namespace dist::testing

#endif  // DIST_TESTS_RENDEZVOUS_RAW_FRAMES_H_
