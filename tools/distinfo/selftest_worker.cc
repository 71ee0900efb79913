#include "tools/distinfo/selftest_worker.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "dist/cpp/status.hpp"
#include "dist/dist.h"
#include "dist/registry.h"
#include "nlohmann/json.hpp"
#include "support/device_memory.h"
#include "tools/distinfo/selftest.h"

namespace dist::distinfo {
namespace {

constexpr uint64_t kCount = 4096;

int EnvInt(const char* name, int fallback) {
  const char* text = std::getenv(name);
  int value = 0;
  return text != nullptr && absl::SimpleAtoi(text, &value) ? value : fallback;
}

// Under mpirun the rank comes from Open MPI; env:// reads RANK & co.
void AdoptLauncherRank() {
  if (std::getenv("RANK") != nullptr) return;
  const struct {
    const char* ours;
    const char* mpi;
  } names[] = {{"RANK", "OMPI_COMM_WORLD_RANK"},
               {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE"},
               {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK"},
               {"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"}};
  for (const auto& n : names) {
    if (const char* value = std::getenv(n.mpi)) setenv(n.ours, value, 1);
  }
}

// The device the backend works on: CPU when it can, else CUDA LOCAL_RANK.
absl::StatusOr<dist_device_t> ChooseDevice(const std::string& backend) {
  const dist_backend_plugin_t* plugin = nullptr;
  DIST_RETURN_IF_ERROR(TakeError(dist_load_backend(backend.c_str(), &plugin)));
  dist_backend_capabilities_t caps{};
  caps.struct_size = sizeof(caps);
  if (plugin->get_capabilities != nullptr) plugin->get_capabilities(&caps);
  if (caps.device_types & (1u << DIST_DEVICE_CPU)) return dist_cpu();
  if (caps.device_types & (1u << DIST_DEVICE_CUDA)) {
    return dist_cuda(EnvInt("LOCAL_RANK", 0));
  }
  return absl::FailedPreconditionError(
      absl::StrCat("backend ", backend, " declares no device type"));
}

class Worker {
 public:
  Worker(std::string backend, std::string init, int64_t timeout_ms)
      : backend_(std::move(backend)), init_(std::move(init)), timeout_ms_(timeout_ms) {}
  ~Worker() { dist_destroy(group_); }

  int Run() {
    AdoptLauncherRank();
    rank_ = EnvInt("RANK", -1);
    report_["rank"] = rank_;
    report_["backend"] = backend_;
    bool ok = Step("init", [&] { return Init(); });
    // A wrong result leaves the group usable, so the next steps still run;
    // any other failure (a lost peer, a timeout) ends the test.
    const std::pair<const char*, std::function<absl::Status()>> steps[] = {
        {"all_reduce", [&] { return AllReduce(); }},
        {"broadcast", [&] { return Broadcast(); }},
        {"barrier", [&] { return TakeError(dist_barrier(group_, nullptr)); }},
    };
    for (const auto& [name, body] : steps) {
      if (!ok && !wrong_result_only_) break;
      ok = Step(name, body) && ok;
    }
    std::printf("%s%s\n", kWorkerMarker, report_.dump().c_str());
    std::fflush(stdout);
    return ok ? 0 : 1;
  }

 private:
  bool Step(const char* name, const std::function<absl::Status()>& body) {
    absl::Time start = absl::Now();
    absl::Status status = body();
    nlohmann::json step = {{"name", name},
                           {"ok", status.ok()},
                           {"ms", absl::ToDoubleMilliseconds(absl::Now() - start)}};
    if (!status.ok()) step["error"] = std::string(status.message());
    if (!status.ok() && !absl::IsDataLoss(status)) wrong_result_only_ = false;
    report_["steps"].push_back(step);
    return status.ok();
  }

  absl::Status Init() {
    std::string url = init_;
    if (absl::StartsWith(url, "tcp://") && !absl::StrContains(url, "?")) {
      absl::StrAppend(&url, "?rank=", rank_, "&world_size=", EnvInt("WORLD_SIZE", 2));
    }
    dist_init_options_t options = dist_init_options_default();
    options.backend = backend_.c_str();
    options.init_method = url.c_str();
    options.timeout_ms = timeout_ms_;
    options.group_name = "distinfo-selftest";
    DIST_RETURN_IF_ERROR(TakeError(dist_init(&options, &group_)));
    rank_ = dist_rank(group_);
    world_ = dist_world_size(group_);
    report_["rank"] = rank_;
    report_["world_size"] = world_;
    absl::StatusOr<dist_device_t> device = ChooseDevice(backend_);
    if (!device.ok()) return device.status();
    device_ = *device;
    report_["device"] = absl::StrCat(dist_device_type_name(device_.type), ":", device_.index);
    return absl::OkStatus();
  }

  absl::StatusOr<dist_buffer_t> Upload(const std::vector<float>& host) {
    absl::StatusOr<std::unique_ptr<DeviceBuffer>> buffer =
        DeviceBuffer::Allocate(device_, host.size() * sizeof(float));
    if (!buffer.ok()) return buffer.status();
    DIST_RETURN_IF_ERROR((*buffer)->CopyIn(host.data(), host.size() * sizeof(float)));
    buffers_.push_back(*std::move(buffer));
    return dist_make_buffer(buffers_.back()->data(), host.size(), DIST_FLOAT32, device_);
  }

  // The buffer of Upload that `data` points into.
  DeviceBuffer& BufferAt(const void* data) {
    for (const std::unique_ptr<DeviceBuffer>& b : buffers_) {
      if (b->data() == data) return *b;
    }
    return *buffers_.back();
  }

  absl::Status Check(const char* what, const dist_buffer_t& buffer,
                     const std::function<float(uint64_t)>& expected) {
    std::vector<float> got(buffer.count);
    DIST_RETURN_IF_ERROR(BufferAt(buffer.data).CopyOut(got.data(), got.size() * sizeof(float)));
    for (uint64_t i = 0; i < got.size(); ++i) {
      if (got[i] != expected(i)) {
        return absl::DataLossError(absl::StrCat(what, " gave a wrong result: element ", i, " is ",
                                                got[i], ", expected ", expected(i), " (", backend_,
                                                ", ", world_, " ranks)"));
      }
    }
    return absl::OkStatus();
  }

  // Rank r contributes (r + 1) * (i % 13 + 1); small integers, so the sum
  // is exact in float32 whatever the reduction order.
  absl::Status AllReduce() {
    std::vector<float> host(kCount);
    for (uint64_t i = 0; i < kCount; ++i) host[i] = float((rank_ + 1) * int(i % 13 + 1));
    absl::StatusOr<dist_buffer_t> buffer = Upload(host);
    if (!buffer.ok()) return buffer.status();
    DIST_RETURN_IF_ERROR(TakeError(dist_all_reduce(group_, &*buffer, &*buffer, DIST_SUM, nullptr)));
    const int triangle = world_ * (world_ + 1) / 2;
    return Check("all_reduce(sum)", *buffer,
                 [&](uint64_t i) { return float(triangle * int(i % 13 + 1)); });
  }

  absl::Status Broadcast() {
    auto pattern = [](uint64_t i) { return float(i) * 0.5f - 7.0f; };
    std::vector<float> host(kCount);
    for (uint64_t i = 0; i < kCount; ++i) host[i] = rank_ == 0 ? pattern(i) : -1.0f;
    absl::StatusOr<dist_buffer_t> buffer = Upload(host);
    if (!buffer.ok()) return buffer.status();
    DIST_RETURN_IF_ERROR(TakeError(dist_broadcast(group_, &*buffer, &*buffer, 0, nullptr)));
    return Check("broadcast(root 0)", *buffer, pattern);
  }

  std::string backend_, init_;
  int64_t timeout_ms_;
  int rank_ = -1, world_ = 0;
  dist_process_group_t* group_ = nullptr;
  dist_device_t device_ = dist_cpu();
  std::vector<std::unique_ptr<DeviceBuffer>> buffers_;  // of Upload, freed at the end
  nlohmann::json report_;
  bool wrong_result_only_ = true;  // every failure so far was a wrong result
};

}  // namespace

int RunSelftestWorker(const std::string& backend, const std::string& init_method,
                      int64_t timeout_ms) {
  Worker worker(backend, init_method, timeout_ms);
  return worker.Run();
}

}  // namespace dist::distinfo
