// The state behind the emulated CUDA runtime: devices, their memory and
// streams. A stream is a worker thread that runs its tasks in order, so the
// nccl plugin's stream and event logic (ordering, waiting, timeouts) runs
// for real on the CPU; "device memory" is host memory that is registered,
// so an NCCL call on an unregistered (CPU) pointer is caught.
//
// Everything here lives for the whole process (never freed), because
// stream threads may still run while static destructors would run.
#ifndef DIST_TESTS_NCCL_EMULATION_DEVICE_RUNTIME_H_
#define DIST_TESTS_NCCL_EMULATION_DEVICE_RUNTIME_H_

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace dist::emulation {

// DIST_CUDA_EMULATION_DEVICES (default 4; 0 means no device).
int DeviceCount();
// The calling thread's current device (cudaSetDevice), 0 at first.
int& CurrentDevice();

class Stream : public std::enable_shared_from_this<Stream> {
 public:
  // `implicit_sync`: a stream created without cudaStreamNonBlocking, or a
  // device's legacy default stream; see Device::Enqueue.
  Stream(int device, bool implicit_sync, bool legacy);
  ~Stream();

  // Runs `task` after everything enqueued before; returns its ticket.
  uint64_t Enqueue(std::function<void()> task);
  // The ticket of the last task enqueued (0 when none ever was).
  uint64_t Tail();
  bool Done(uint64_t ticket);
  void WaitFor(uint64_t ticket);
  // No more tasks; the thread ends once the queue is drained.
  void Close();

  int device() const { return device_; }
  bool implicit_sync() const { return implicit_sync_; }
  bool legacy() const { return legacy_; }

 private:
  void Run();

  const int device_;
  const bool implicit_sync_;
  const bool legacy_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  uint64_t enqueued_ = 0;
  uint64_t completed_ = 0;
  bool closed_ = false;
  bool started_ = false;
};

// The legacy default stream of the calling thread's current device.
std::shared_ptr<Stream> LegacyStream(int device);
// Registers a created stream with its device (for implicit ordering and
// cudaDeviceSynchronize).
void RegisterStream(const std::shared_ptr<Stream>& stream);
// Enqueues with CUDA's legacy-stream semantics: work on the legacy stream
// waits for all implicitly synchronizing streams of its device, and work on
// those waits for the legacy stream.
uint64_t EnqueueOrdered(const std::shared_ptr<Stream>& stream, std::function<void()> task);
// Waits for every stream of `device`.
void SynchronizeDevice(int device);

// Device allocations.
void* Allocate(size_t bytes, int device);
// False when `pointer` was not allocated here.
bool Free(void* pointer);
// The device whose allocation holds [pointer, pointer + bytes), or -1.
int DeviceOf(const void* pointer, size_t bytes);

}  // namespace dist::emulation

#endif  // DIST_TESTS_NCCL_EMULATION_DEVICE_RUNTIME_H_
