// dist: where a GradientReducer keeps its buckets, header-only C++17.
//
// A reducer copies gradients into flat buckets and all-reduces each bucket.
// For CPU backends the buckets are host memory (HostBucketMemory, the
// default). For GPU backends (nccl) they must be device memory on the
// gradients' GPU: CudaBucketMemory in dist/cuda_bucket_memory.hpp, or your
// own BucketMemory for another allocator or device.
#ifndef DIST_BUCKET_MEMORY_HPP_
#define DIST_BUCKET_MEMORY_HPP_

#include <cstddef>
#include <cstring>
#include <new>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dist/types.h"

namespace dist {

class BucketMemory {
 public:
  virtual ~BucketMemory() = default;

  // The device of every bucket, and of every gradient the reducer takes.
  virtual dist_device_t device() const = 0;
  // The stream the copies are ordered on, handed to the all-reduce with the
  // bucket so that it runs after them (NULL: the device's default stream;
  // always NULL for host memory).
  virtual void* stream() const { return nullptr; }

  // `bytes` (> 0) of bucket memory, freed with Free.
  virtual absl::StatusOr<void*> Allocate(size_t bytes) = 0;
  virtual void Free(void* data) = 0;
  // Copies between a gradient and its bucket (both on device()), ordered
  // before the all-reduce that follows on stream().
  virtual absl::Status Copy(void* to, const void* from, size_t bytes) = 0;
  virtual absl::Status Zero(void* data, size_t bytes) = 0;
};

class HostBucketMemory : public BucketMemory {
 public:
  dist_device_t device() const override { return dist_cpu(); }
  absl::StatusOr<void*> Allocate(size_t bytes) override {
    void* data = ::operator new(bytes, std::nothrow);
    if (data == nullptr) {
      return absl::ResourceExhaustedError("GradientReducer: out of host memory for a bucket");
    }
    return data;
  }
  void Free(void* data) override { ::operator delete(data); }
  absl::Status Copy(void* to, const void* from, size_t bytes) override {
    std::memcpy(to, from, bytes);
    return absl::OkStatus();
  }
  absl::Status Zero(void* data, size_t bytes) override {
    std::memset(data, 0, bytes);
    return absl::OkStatus();
  }
};

}  // namespace dist

#endif  // DIST_BUCKET_MEMORY_HPP_
