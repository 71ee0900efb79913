// Pointing a Gloo buffer at other memory between operations, so that a
// cached algorithm instance sends from and receives into the caller's
// buffers instead of copying them in and out of its own.
//
// Why it is safe on the synchronous pairs only: there Gloo touches a
// buffer's memory only inside send() (a blocking write) and waitRecv() (the
// read), so memory set before those calls is the memory used, and nothing
// refers to it once they return. On Gloo's asynchronous pairs the device
// thread reads into a buffer whenever a message arrives, possibly before
// the next operation has pointed it anywhere.
#ifndef DIST_PLUGINS_BACKENDS_GLOO_BUFFER_MEMORY_H_
#define DIST_PLUGINS_BACKENDS_GLOO_BUFFER_MEMORY_H_

#include <utility>

#include "absl/container/inlined_vector.h"
#include "gloo/transport/buffer.h"

namespace dist_gloo {

// Lends the caller's memory to buffers for one operation: each buffer
// points at it until this goes out of scope, thrown out of or not, and
// then back at its own memory. So no cached buffer keeps a pointer to
// memory the caller may free, whatever comes later.
class LentMemory {
 public:
  LentMemory() = default;
  LentMemory(const LentMemory&) = delete;
  LentMemory& operator=(const LentMemory&) = delete;
  ~LentMemory() {
    for (const auto& [buffer, own] : lent_) buffer->setPtr(own);
  }

  // Points `buffer`, whose own memory is `own`, at `memory`.
  void Lend(gloo::transport::Buffer& buffer, void* own, void* memory) {
    buffer.setPtr(memory);
    lent_.emplace_back(&buffer, own);
  }

 private:
  absl::InlinedVector<std::pair<gloo::transport::Buffer*, void*>, 8> lent_;
};

}  // namespace dist_gloo

#endif  // DIST_PLUGINS_BACKENDS_GLOO_BUFFER_MEMORY_H_
