#include "tests/nccl/emulation/device_runtime.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <utility>

namespace dist::emulation {
namespace {

struct Device {
  std::mutex mu;
  std::shared_ptr<Stream> legacy;
  std::vector<std::weak_ptr<Stream>> streams;
};

struct Allocation {
  size_t bytes;
  int device;
};

struct Runtime {
  std::mutex mu;
  std::vector<Device*> devices;
  std::map<uintptr_t, Allocation> allocations;  // by start address
};

Runtime& TheRuntime() {
  static Runtime* runtime = [] {
    auto* r = new Runtime();
    for (int d = 0; d < DeviceCount(); ++d) r->devices.push_back(new Device());
    return r;
  }();
  return *runtime;
}

// Live streams of `device` (dropping dead entries).
std::vector<std::shared_ptr<Stream>> StreamsOf(Device& device) {
  std::vector<std::shared_ptr<Stream>> live;
  std::lock_guard<std::mutex> lock(device.mu);
  std::vector<std::weak_ptr<Stream>> kept;
  for (const std::weak_ptr<Stream>& weak : device.streams) {
    if (std::shared_ptr<Stream> stream = weak.lock()) {
      live.push_back(stream);
      kept.push_back(weak);
    }
  }
  device.streams.swap(kept);
  return live;
}

}  // namespace

int DeviceCount() {
  static const int count = [] {
    const char* text = std::getenv("DIST_CUDA_EMULATION_DEVICES");
    if (text == nullptr || *text == '\0') return 4;
    const int value = std::atoi(text);
    return value < 0 ? 0 : (value > 64 ? 64 : value);
  }();
  return count;
}

int& CurrentDevice() {
  thread_local int device = 0;
  return device;
}

Stream::Stream(int device, bool implicit_sync, bool legacy)
    : device_(device), implicit_sync_(implicit_sync), legacy_(legacy) {}

Stream::~Stream() = default;

uint64_t Stream::Enqueue(std::function<void()> task) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!started_) {
    started_ = true;
    // The thread keeps the stream alive until its queue is drained.
    std::thread([self = shared_from_this()] { self->Run(); }).detach();
  }
  queue_.push_back(std::move(task));
  ++enqueued_;
  cv_.notify_all();
  return enqueued_;
}

uint64_t Stream::Tail() {
  std::lock_guard<std::mutex> lock(mu_);
  return enqueued_;
}

bool Stream::Done(uint64_t ticket) {
  std::lock_guard<std::mutex> lock(mu_);
  return completed_ >= ticket;
}

void Stream::WaitFor(uint64_t ticket) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return completed_ >= ticket; });
}

void Stream::Close() {
  std::lock_guard<std::mutex> lock(mu_);
  closed_ = true;
  cv_.notify_all();
}

void Stream::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return !queue_.empty() || closed_; });
    if (queue_.empty()) return;  // closed and drained
    std::function<void()> task = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    task();
    lock.lock();
    ++completed_;
    cv_.notify_all();
  }
}

std::shared_ptr<Stream> LegacyStream(int device) {
  Device& d = *TheRuntime().devices.at(static_cast<size_t>(device));
  std::lock_guard<std::mutex> lock(d.mu);
  if (d.legacy == nullptr) {
    d.legacy = std::make_shared<Stream>(device, /*implicit_sync=*/true, /*legacy=*/true);
    d.streams.push_back(d.legacy);
  }
  return d.legacy;
}

void RegisterStream(const std::shared_ptr<Stream>& stream) {
  Device& d = *TheRuntime().devices.at(static_cast<size_t>(stream->device()));
  std::lock_guard<std::mutex> lock(d.mu);
  d.streams.push_back(stream);
}

uint64_t EnqueueOrdered(const std::shared_ptr<Stream>& stream, std::function<void()> task) {
  // The tickets to wait for are taken now, so the order is the order of the
  // host calls, as in CUDA.
  std::vector<std::pair<std::shared_ptr<Stream>, uint64_t>> before;
  if (stream->legacy()) {
    Device& d = *TheRuntime().devices.at(static_cast<size_t>(stream->device()));
    for (const std::shared_ptr<Stream>& other : StreamsOf(d)) {
      if (other != stream && other->implicit_sync()) before.emplace_back(other, other->Tail());
    }
  } else if (stream->implicit_sync()) {
    std::shared_ptr<Stream> legacy = LegacyStream(stream->device());
    before.emplace_back(legacy, legacy->Tail());
  }
  if (before.empty()) return stream->Enqueue(std::move(task));
  return stream->Enqueue([before = std::move(before), task = std::move(task)] {
    for (const auto& [other, ticket] : before) other->WaitFor(ticket);
    task();
  });
}

void SynchronizeDevice(int device) {
  Device& d = *TheRuntime().devices.at(static_cast<size_t>(device));
  for (const std::shared_ptr<Stream>& stream : StreamsOf(d)) stream->WaitFor(stream->Tail());
}

void* Allocate(size_t bytes, int device) {
  const size_t rounded = ((bytes == 0 ? 1 : bytes) + 255) / 256 * 256;
  void* pointer = std::aligned_alloc(256, rounded);
  if (pointer == nullptr) return nullptr;
  // Fresh device memory is not zero on a GPU either: garbage shows bugs.
  std::memset(pointer, 0xA5, rounded);
  Runtime& runtime = TheRuntime();
  std::lock_guard<std::mutex> lock(runtime.mu);
  runtime.allocations[reinterpret_cast<uintptr_t>(pointer)] = {bytes, device};
  return pointer;
}

bool Free(void* pointer) {
  Runtime& runtime = TheRuntime();
  {
    std::lock_guard<std::mutex> lock(runtime.mu);
    auto it = runtime.allocations.find(reinterpret_cast<uintptr_t>(pointer));
    if (it == runtime.allocations.end()) return false;
    runtime.allocations.erase(it);
  }
  std::free(pointer);
  return true;
}

int DeviceOf(const void* pointer, size_t bytes) {
  Runtime& runtime = TheRuntime();
  const uintptr_t start = reinterpret_cast<uintptr_t>(pointer);
  std::lock_guard<std::mutex> lock(runtime.mu);
  auto it = runtime.allocations.upper_bound(start);
  if (it == runtime.allocations.begin()) return -1;
  --it;
  const uintptr_t end = it->first + it->second.bytes;
  if (start + bytes > end) return -1;
  return it->second.device;
}

}  // namespace dist::emulation
