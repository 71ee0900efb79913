// dist: a DDP-style gradient reducer (the third layer, like
// torch.nn.parallel.DistributedDataParallel's Reducer), header-only C++17.
//
//   dist::GradientReducer reducer(group);
//   reducer.AddBucketedGradient("w1", n1, DIST_FLOAT32);  // lives in its bucket
//   reducer.AddGradient("b1", dist::View(b1_grad));       // copied in and out
//   reducer.Finalize();
//   float* w1_grad = reducer.BucketedData<float>("w1").value();
//   for each step:
//     backward pass: after each gradient is final, reducer.MarkReady("w1") ...
//     reducer.Finish();   // waits for every bucket; gradients are now averaged
//
// Gradients are grouped into buckets in reverse registration order (the
// order a backward pass produces them): the first bucket small (about 1 MiB)
// so communication starts early, later ones up to about 25 MiB. When every
// gradient of a bucket is ready, the bucket's all-reduce starts
// asynchronously and overlaps the rest of the backward pass. Buckets are
// always launched in bucket order, so every rank issues the same sequence of
// collectives whatever order its gradients become ready in.
//
// Buckets live in host memory by default. For gradients on a GPU (backend
// nccl), set Options::memory to a dist::CudaBucketMemory (see
// dist/cuda_bucket_memory.hpp): buckets then live on that GPU and every copy
// and all-reduce is queued on its stream.
#ifndef DIST_GRADIENT_REDUCER_HPP_
#define DIST_GRADIENT_REDUCER_HPP_

#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "dist/bucket_memory.hpp"
#include "dist/dist.hpp"

namespace dist {

class GradientReducer {
 public:
  struct Options {
    size_t first_bucket_bytes = size_t{1} << 20;
    size_t bucket_bytes = size_t{25} << 20;
    // When false, a gradient never marked ready by Finish() is an error that
    // names it. When true it is reduced as zeros, as DDP's
    // find_unused_parameters does.
    bool allow_unused = false;
    // Where the buckets live; every gradient must be on its device. Null:
    // host memory (HostBucketMemory).
    std::shared_ptr<BucketMemory> memory;
  };

  explicit GradientReducer(ProcessGroup& group) : GradientReducer(group, Options()) {}
  GradientReducer(ProcessGroup& group, Options options)
      : group_(group),
        options_(options),
        memory_(options.memory != nullptr ? options.memory : std::make_shared<HostBucketMemory>()) {
  }
  ~GradientReducer() {
    // Waits for buckets still being reduced before their memory goes.
    for (Bucket& bucket : buckets_) {
      if (bucket.work.get() != nullptr) (void)bucket.work.Wait();
      if (bucket.storage != nullptr) memory_->Free(bucket.storage);
    }
  }

  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  // A gradient in the application's own buffer: copied into its bucket when
  // marked ready and back when the bucket is reduced.
  absl::Status AddGradient(const std::string& name, const dist_buffer_t& buffer) {
    absl::MutexLock lock(&mu_);
    DIST_RETURN_IF_ERROR(CheckAdd(name));
    const dist_device_t buckets = memory_->device();
    if (buffer.device.type != buckets.type ||
        (buckets.type != DIST_DEVICE_CPU && buffer.device.index != buckets.index)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "gradient '", name, "' is on ", DeviceName(buffer.device),
          " but the reducer's buckets are on ", DeviceName(buckets),
          buffer.device.type == DIST_DEVICE_CUDA
              ? absl::StrCat("; set Options::memory = std::make_shared<dist::CudaBucketMemory>(",
                             buffer.device.index, ") (dist/cuda_bucket_memory.hpp)")
              : "; keep all of a reducer's gradients on one device"));
    }
    gradients_.push_back(Gradient{name, buffer, /*bucketed=*/false});
    return absl::OkStatus();
  }

  // A gradient that lives inside its bucket (no copies): after Finalize(),
  // BucketedData<T>(name) says where to write it.
  absl::Status AddBucketedGradient(const std::string& name, size_t count, dist_dtype_t dtype) {
    absl::MutexLock lock(&mu_);
    DIST_RETURN_IF_ERROR(CheckAdd(name));
    gradients_.push_back(Gradient{name, dist_make_buffer(nullptr, count, dtype, memory_->device()),
                                  /*bucketed=*/true});
    return absl::OkStatus();
  }

  // Groups the gradients into buckets. After it, bucketed gradients have
  // their storage: BucketedData() returns it.
  absl::Status Finalize() {
    absl::MutexLock lock(&mu_);
    if (finalized_) return absl::FailedPreconditionError("GradientReducer: Finalize called twice");
    if (gradients_.empty()) return absl::FailedPreconditionError("GradientReducer: no gradients");
    // Reverse registration order: the last layers' gradients come first.
    size_t limit = options_.first_bucket_bytes;
    for (size_t i = gradients_.size(); i-- > 0;) {
      Gradient& g = gradients_[i];
      const size_t bytes = g.buffer.count * dist_dtype_size(g.buffer.dtype);
      const bool start_new = buckets_.empty() || buckets_.back().dtype != g.buffer.dtype ||
                             (buckets_.back().bytes > 0 && buckets_.back().bytes + bytes > limit);
      if (start_new) {
        if (!buckets_.empty()) limit = options_.bucket_bytes;
        buckets_.push_back(Bucket{});
        buckets_.back().dtype = g.buffer.dtype;
      }
      Bucket& bucket = buckets_.back();
      g.bucket = buckets_.size() - 1;
      g.offset_bytes = bucket.bytes;
      bucket.bytes += bytes;
      bucket.members.push_back(i);
    }
    for (Bucket& bucket : buckets_) {
      const size_t bytes = bucket.bytes > 0 ? bucket.bytes : 1;
      absl::StatusOr<void*> storage = memory_->Allocate(bytes);
      if (!storage.ok()) return storage.status();
      bucket.storage = *storage;
      DIST_RETURN_IF_ERROR(memory_->Zero(bucket.storage, bytes));
      bucket.pending = bucket.members.size();
    }
    for (Gradient& g : gradients_) {
      if (g.bucketed) g.buffer.data = InBucket(g);
    }
    finalized_ = true;
    return absl::OkStatus();
  }

  // Where a bucketed gradient lives (after Finalize); valid for the
  // reducer's lifetime.
  template <typename T>
  absl::StatusOr<T*> BucketedData(const std::string& name) {
    absl::MutexLock lock(&mu_);
    absl::StatusOr<size_t> index = Find(name);
    if (!index.ok()) return index.status();
    if (!finalized_) return absl::FailedPreconditionError("GradientReducer: call Finalize first");
    if (!gradients_[*index].bucketed) {
      return absl::InvalidArgumentError(absl::StrCat("gradient '", name, "' is not bucketed"));
    }
    if (gradients_[*index].buffer.dtype != DtypeOf<T>()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "gradient '", name, "' is ", dist_dtype_name(gradients_[*index].buffer.dtype)));
    }
    return static_cast<T*>(gradients_[*index].buffer.data);
  }

  // Marks a gradient final for this step. Thread-safe.
  absl::Status MarkReady(const std::string& name) {
    absl::MutexLock lock(&mu_);
    if (!finalized_) return absl::FailedPreconditionError("GradientReducer: call Finalize first");
    absl::StatusOr<size_t> index = Find(name);
    if (!index.ok()) return index.status();
    Gradient& g = gradients_[*index];
    if (g.ready) {
      return absl::FailedPreconditionError(
          absl::StrCat("gradient '", name, "' marked ready twice in one step"));
    }
    g.ready = true;
    Bucket& bucket = buckets_[g.bucket];
    if (!g.bucketed) DIST_RETURN_IF_ERROR(memory_->Copy(InBucket(g), g.buffer.data, Bytes(g)));
    --bucket.pending;
    return LaunchReadyBuckets();
  }

  // Waits for every bucket and writes averaged gradients back. Then the
  // reducer is ready for the next step.
  absl::Status Finish() {
    absl::MutexLock lock(&mu_);
    if (!finalized_) return absl::FailedPreconditionError("GradientReducer: call Finalize first");
    std::vector<std::string> unused;
    for (Gradient& g : gradients_) {
      if (!g.ready) unused.push_back(g.name);
    }
    if (!unused.empty()) {
      if (!options_.allow_unused) {
        Reset();
        return absl::FailedPreconditionError(
            absl::StrCat("gradients never marked ready this step: ", absl::StrJoin(unused, ", "),
                         "; mark them, or set Options::allow_unused to reduce them as zeros"));
      }
      for (Gradient& g : gradients_) {
        if (g.ready) continue;
        g.ready = true;
        DIST_RETURN_IF_ERROR(memory_->Zero(InBucket(g), Bytes(g)));
        --buckets_[g.bucket].pending;
      }
      DIST_RETURN_IF_ERROR(LaunchReadyBuckets());
    }
    absl::Status result;
    for (Bucket& bucket : buckets_) {
      if (bucket.work.get() == nullptr) continue;  // never launched: error already returned
      absl::Status waited = bucket.work.Wait();
      if (result.ok() && !waited.ok()) result = waited;
      bucket.work = Work();
    }
    if (result.ok()) {
      for (Gradient& g : gradients_) {
        if (g.bucketed) continue;
        absl::Status copied = memory_->Copy(g.buffer.data, InBucket(g), Bytes(g));
        if (result.ok() && !copied.ok()) result = copied;
      }
    }
    Reset();
    return result;
  }

  size_t num_buckets() const {
    absl::MutexLock lock(&mu_);
    return buckets_.size();
  }

  // Gradient names per bucket, in bucket order (for tests and logs).
  std::vector<std::vector<std::string>> BucketLayout() const {
    absl::MutexLock lock(&mu_);
    std::vector<std::vector<std::string>> layout;
    for (const Bucket& bucket : buckets_) {
      layout.emplace_back();
      for (size_t i : bucket.members) layout.back().push_back(gradients_[i].name);
    }
    return layout;
  }

 private:
  struct Gradient {
    std::string name;
    dist_buffer_t buffer;
    bool bucketed = false;
    size_t bucket = 0;
    size_t offset_bytes = 0;
    bool ready = false;
  };
  struct Bucket {
    dist_dtype_t dtype = DIST_FLOAT32;
    size_t bytes = 0;
    void* storage = nullptr;  // from memory_
    std::vector<size_t> members;
    size_t pending = 0;
    bool launched = false;
    Work work;
  };

  absl::Status CheckAdd(const std::string& name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finalized_) {
      return absl::FailedPreconditionError("GradientReducer: add gradients before Finalize");
    }
    for (const Gradient& g : gradients_) {
      if (g.name == name) {
        return absl::InvalidArgumentError(absl::StrCat("gradient '", name, "' added twice"));
      }
    }
    return absl::OkStatus();
  }

  static std::string DeviceName(dist_device_t device) {
    return device.type == DIST_DEVICE_CPU ? "cpu" : absl::StrCat("cuda:", device.index);
  }

  uint8_t* InBucket(const Gradient& g) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return static_cast<uint8_t*>(buckets_[g.bucket].storage) + g.offset_bytes;
  }

  static size_t Bytes(const Gradient& g) {
    return g.buffer.count * dist_dtype_size(g.buffer.dtype);
  }

  absl::StatusOr<size_t> Find(const std::string& name) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (size_t i = 0; i < gradients_.size(); ++i) {
      if (gradients_[i].name == name) return i;
    }
    return absl::NotFoundError(absl::StrCat("no gradient named '", name, "'"));
  }

  // Starts every bucket that is complete and whose predecessors have all
  // started: the same collective order on every rank.
  absl::Status LaunchReadyBuckets() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    while (next_launch_ < buckets_.size() && buckets_[next_launch_].pending == 0) {
      Bucket& bucket = buckets_[next_launch_];
      const size_t count = bucket.bytes / dist_dtype_size(bucket.dtype);
      dist_buffer_t flat = dist_make_buffer(bucket.storage, count, bucket.dtype, memory_->device());
      flat.stream = memory_->stream();  // after the copies into the bucket
      absl::StatusOr<Work> work = group_.AllReduceAsync(flat, flat, DIST_AVG);
      if (!work.ok()) return work.status();
      bucket.work = *std::move(work);
      bucket.launched = true;
      ++next_launch_;
    }
    return absl::OkStatus();
  }

  void Reset() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (Gradient& g : gradients_) g.ready = false;
    for (Bucket& bucket : buckets_) {
      bucket.pending = bucket.members.size();
      bucket.launched = false;
    }
    next_launch_ = 0;
  }

  ProcessGroup& group_;
  const Options options_;
  const std::shared_ptr<BucketMemory> memory_;
  mutable absl::Mutex mu_;
  std::vector<Gradient> gradients_ ABSL_GUARDED_BY(mu_);
  std::vector<Bucket> buckets_ ABSL_GUARDED_BY(mu_);
  size_t next_launch_ ABSL_GUARDED_BY(mu_) = 0;
  bool finalized_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace dist

#endif  // DIST_GRADIENT_REDUCER_HPP_
