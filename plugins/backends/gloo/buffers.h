// Small helpers shared by the collective implementations: byte sizes,
// aliasing checks, and Gloo's typed buffer setters chosen by element size.
#ifndef DIST_PLUGINS_BACKENDS_GLOO_BUFFERS_H_
#define DIST_PLUGINS_BACKENDS_GLOO_BUFFERS_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "dist/types.h"

namespace dist_gloo {

inline size_t Bytes(dist_dtype_t dtype, uint64_t count) {
  return dist_dtype_size(dtype) * static_cast<size_t>(count);
}

inline char* At(void* base, size_t offset_bytes) { return static_cast<char*>(base) + offset_bytes; }

// Gloo sizes segments in whole elements of sizeof(T); the values never
// matter to it, only the size, so any type of the right width does.
template <typename F>
void WithElementType(size_t element_size, F&& f) {
  switch (element_size) {
    case 1:
      f(uint8_t{});
      break;
    case 2:
      f(uint16_t{});
      break;
    case 4:
      f(uint32_t{});
      break;
    default:
      f(uint64_t{});
      break;
  }
}

// A private copy of `bytes` at `data`.
inline std::vector<char> CopyOf(const void* data, size_t bytes) {
  std::vector<char> copy(bytes);
  if (bytes > 0) std::memcpy(copy.data(), data, bytes);
  return copy;
}

}  // namespace dist_gloo

#endif  // DIST_PLUGINS_BACKENDS_GLOO_BUFFERS_H_
