// dist SDK, C++ side: the adapter between the rendezvous plugin table of
// rendezvous_plugin.h and a plugin's C++ resolve function. A plugin writes
//
//     absl::Status Resolve(const char* url, const dist_rendezvous_hints_t* hints,
//                          int64_t timeout_ms, dist_rendezvous_result_t* result);
//     const char* const kSchemes[] = {"tcp", nullptr};
//     DIST_EXPORT_RENDEZVOUS_PLUGIN("tcp", kSchemes, Resolve)
//
// and the adapter owns, as for backends (dist/cpp/backend_adapter.hpp): the
// table filled field by field, the struct_size rule of sdk/ABI.md for the
// hints and the result (dist/cpp/abi_struct.hpp; a caller built against an
// older or newer 1.x SDK works), the exception guard, host logging and the
// argument checks. Resolve gets non-NULL hints that cover every field of
// this SDK (a caller's NULL reads as rank and world size -1, no options) and
// a zeroed full-size result, which the adapter copies back as far as the
// caller's struct_size allows.
#ifndef DIST_CPP_RENDEZVOUS_ADAPTER_HPP_
#define DIST_CPP_RENDEZVOUS_ADAPTER_HPP_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "dist/cpp/abi_struct.hpp"
#include "dist/cpp/guard.hpp"
#include "dist/cpp/host_log.hpp"
#include "dist/rendezvous_plugin.h"

namespace dist {

using RendezvousResolveFn = absl::Status (*)(const char* url, const dist_rendezvous_hints_t* hints,
                                             int64_t timeout_ms, dist_rendezvous_result_t* result);

namespace internal {

inline const char*& RendezvousName() {
  static const char* name = "rendezvous";
  return name;
}

inline dist_error_t* InitializeRendezvous(const dist_host_api_t* host) {
  SetHost(host, RendezvousName());
  return nullptr;
}

template <RendezvousResolveFn kResolve>
dist_error_t* Resolve(const char* url, const dist_rendezvous_hints_t* hints, int64_t timeout_ms,
                      dist_rendezvous_result_t* result) {
  const char* name = RendezvousName();
  return Guard(name, "resolve", [&]() -> absl::Status {
    if (url == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(name,
                       " rendezvous: the URL is NULL; pass an init method such as env:// or "
                       "tcp://host:port"));
    }
    if (result == nullptr || result->struct_size < AbiStruct<dist_rendezvous_result_t>::kV1_0Size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rendezvous ", url, ": result is NULL or its struct_size is below the ABI 1.0 size ",
          AbiStruct<dist_rendezvous_result_t>::kV1_0Size,
          "; set result.struct_size = sizeof(dist_rendezvous_result_t)"));
    }
    if (timeout_ms <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rendezvous ", url, ": timeout_ms=", timeout_ms, "; pass a positive timeout"));
    }
    dist_rendezvous_hints_t read{};
    read.struct_size = sizeof(read);
    read.rank = -1;
    read.world_size = -1;
    if (hints != nullptr) {
      absl::StatusOr<dist_rendezvous_hints_t> copied = ReadCallerStruct(hints, "hints");
      if (!copied.ok()) {
        return absl::Status(copied.status().code(),
                            absl::StrCat("rendezvous ", url, ": ", copied.status().message()));
      }
      read = *copied;
    }
    dist_rendezvous_result_t full{};
    full.struct_size = sizeof(full);
    DIST_RETURN_IF_ERROR(kResolve(url, &read, timeout_ms, &full));
    WriteCallerStruct(full, result);
    return absl::OkStatus();
  });
}

}  // namespace internal

// The table of a rendezvous plugin named `name` (static) for URLs of
// `schemes` (static, NULL-terminated), resolving with kResolve; filled field
// by field over a zeroed table so that fields appended later stay NULL.
template <RendezvousResolveFn kResolve>
const dist_rendezvous_plugin_t* RendezvousTable(const char* name, const char* const* schemes) {
  static const dist_rendezvous_plugin_t table = [&] {
    internal::RendezvousName() = name;
    dist_rendezvous_plugin_t t{};
    t.struct_size = sizeof(t);
    t.abi_major = DIST_RENDEZVOUS_ABI_MAJOR;
    t.abi_minor = DIST_RENDEZVOUS_ABI_MINOR;
    t.name = name;
    t.version = "1.0.0";
    t.schemes = schemes;
    t.initialize = &internal::InitializeRendezvous;
    t.resolve = &internal::Resolve<kResolve>;
    return t;
  }();
  return &table;
}

}  // namespace dist

// Defines the entry symbol dist_rendezvous_plugin_v1. Use once per plugin,
// at file scope.
#define DIST_EXPORT_RENDEZVOUS_PLUGIN(name, schemes, resolve)                              \
  extern "C" DIST_EXPORT const dist_rendezvous_plugin_t* dist_rendezvous_plugin_v1(void) { \
    return ::dist::RendezvousTable<&resolve>(name, schemes);                               \
  }

#endif  // DIST_CPP_RENDEZVOUS_ADAPTER_HPP_
