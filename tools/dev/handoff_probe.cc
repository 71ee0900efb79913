// handoff_probe: how fast this machine hands memory from one core to another.
//
// Two processes pinned to CPUs 0 and 1 take turns on a shared buffer: the
// writer fills it, the reader copies it out; every half second the writer
// switches between a plain memcpy and non-temporal stores. It prints the
// time per turn pair for each. On the project's virtual machine this moved
// between two phases, from run to run and within runs: a 16 KiB hand-off
// took 1.5-2 us in one and 7-10 us in the other with memcpy, 2.3-2.9 us in
// both with non-temporal stores (256 KiB: 36 against 132-164 us, 25 in
// both). Benchmarks of the shm plugin that copy through the segment move
// with the phase (plugins/backends/shm/README.md, "Against Open MPI's
// shared memory"), so run this next to them.
//
//   bazel run -c opt //tools/dev:handoff_probe -- [seconds=4] [bytes=16384]
#include <emmintrin.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

namespace {

void StreamCopy(char* dst, const char* src, size_t bytes) {
  size_t i = 0;
  for (; i + 64 <= bytes; i += 64) {
    for (size_t k = 0; k < 64; k += 16) {
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + k),
                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + k)));
    }
  }
  std::memcpy(dst + i, src + i, bytes - i);
  _mm_sfence();
}

void Pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof(set), &set) != 0) std::perror("handoff_probe: sched_setaffinity");
}

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 4;
  const size_t bytes = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 16384;
  if (bytes == 0 || bytes > (64u << 20) || seconds <= 0 || seconds > 600) {
    std::fprintf(stderr, "usage: handoff_probe [seconds 0-600] [bytes 1-64M]\n");
    return 2;
  }
  // Page-aligned: the buffer starts on a cache line, as the segment's slots do.
  const size_t mapped = 4096 + ((bytes + 4095) & ~size_t{4095});
  void* shared = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  void* local = nullptr;
  if (shared == MAP_FAILED || posix_memalign(&local, 4096, bytes) != 0) {
    std::perror("handoff_probe: cannot allocate");
    return 1;
  }
  auto* turn = new (shared) std::atomic<long>(0);  // whose turn: even writer, odd reader
  auto* stream = new (static_cast<char*>(shared) + 64) std::atomic<int>(0);
  char* data = static_cast<char*>(shared) + 4096;
  std::memset(local, 3, bytes);
  const pid_t child = fork();
  if (child < 0) {
    std::perror("handoff_probe: fork");
    return 1;
  }
  const bool writer = child != 0;
  Pin(writer ? 0 : 1);
  constexpr long kStop = -1;
  long mine = writer ? 0 : 1;
  const auto start = std::chrono::steady_clock::now();
  auto last = start;
  long last_turn = 0;
  while (true) {
    long now_turn;
    while ((now_turn = turn->load(std::memory_order_acquire)) != mine && now_turn != kStop) {
    }
    if (now_turn == kStop) break;
    if (!writer) {
      std::memcpy(local, data, bytes);
    } else if (stream->load(std::memory_order_relaxed) != 0) {
      StreamCopy(data, static_cast<const char*>(local), bytes);
    } else {
      std::memcpy(data, local, bytes);
    }
    mine += 2;
    if (writer && (mine & 255) == 0) {
      const auto now = std::chrono::steady_clock::now();
      const double span = std::chrono::duration<double>(now - last).count();
      if (span >= 0.5) {
        const int mode = stream->load(std::memory_order_relaxed);
        std::printf("%s %.2f us  ", mode != 0 ? "stream" : "memcpy",
                    span * 1e6 / static_cast<double>((mine - last_turn) / 2));
        std::fflush(stdout);
        last = now;
        last_turn = mine;
        stream->store(1 - mode, std::memory_order_relaxed);
      }
      if (std::chrono::duration<double>(now - start).count() > seconds) {
        turn->store(kStop, std::memory_order_release);
        break;
      }
    }
    turn->store(mine - 1, std::memory_order_release);
  }
  if (writer) {
    std::printf("\n");
    waitpid(child, nullptr, 0);
  }
  return 0;
}
