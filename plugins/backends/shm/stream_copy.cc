#include "stream_copy.h"

#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace dist_shm {

void CopyToShared(void* dst, const void* src, size_t bytes) {
#if defined(__SSE2__)
  if (bytes >= kStreamCopyBytes) {
    char* out = static_cast<char*>(dst);
    const char* in = static_cast<const char*>(src);
    // Up to the first 64-byte boundary of the destination with memcpy: the
    // streaming stores need 16-byte alignment, and whole lines are written
    // around the cache.
    const size_t head = (64 - (reinterpret_cast<uintptr_t>(out) & 63)) & 63;
    std::memcpy(out, in, head);
    size_t i = head;
    for (; i + 64 <= bytes; i += 64) {
      const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i + 16));
      const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i + 32));
      const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i + 48));
      _mm_stream_si128(reinterpret_cast<__m128i*>(out + i), a);
      _mm_stream_si128(reinterpret_cast<__m128i*>(out + i + 16), b);
      _mm_stream_si128(reinterpret_cast<__m128i*>(out + i + 32), c);
      _mm_stream_si128(reinterpret_cast<__m128i*>(out + i + 48), d);
    }
    std::memcpy(out + i, in + i, bytes - i);
    // Non-temporal stores are not ordered with later stores: fence them
    // before whatever publishes them.
    _mm_sfence();
    return;
  }
#endif
  std::memcpy(dst, src, bytes);
}

}  // namespace dist_shm
