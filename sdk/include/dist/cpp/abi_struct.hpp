// dist SDK, C++ side: the one struct_size rule of sdk/ABI.md, applied in one
// place for every plugin (the backend and rendezvous adapters use it).
//
// A struct the caller fills (dist_comm_config_t, dist_op_args_t,
// dist_rendezvous_hints_t) is read by copying min(struct_size, sizeof) bytes
// over a zeroed struct: fields an older caller lacks read as 0/NULL ("unset"),
// trailing fields a newer caller appended are ignored. Only a struct_size
// below the ABI 1.0 size is refused: no 1.x caller passes one. The current
// sizeof is never demanded, so a newer plugin still loads in an older 1.x core.
//
// A struct the callee fills (dist_backend_capabilities_t,
// dist_rendezvous_result_t) is written no further than its struct_size.
#ifndef DIST_CPP_ABI_STRUCT_HPP_
#define DIST_CPP_ABI_STRUCT_HPP_

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "dist/backend_plugin.h"
#include "dist/rendezvous_plugin.h"

namespace dist {

// The ABI 1.0 layout of each struct that crosses the ABI with a struct_size:
// the end of its last 1.0 field (trailing padding excluded), and its name.
template <typename T>
struct AbiStruct;

#define DIST_ABI_STRUCT_(type, last_v1_0_field)                                                 \
  template <>                                                                                   \
  struct AbiStruct<type> {                                                                      \
    static constexpr size_t kV1_0Size =                                                         \
        offsetof(type, last_v1_0_field) + sizeof(static_cast<type*>(nullptr)->last_v1_0_field); \
    static constexpr const char* kName = #type;                                                 \
  }
DIST_ABI_STRUCT_(dist_comm_config_t, device_index);
DIST_ABI_STRUCT_(dist_op_args_t, timeout_ms);
DIST_ABI_STRUCT_(dist_backend_capabilities_t, notes);
DIST_ABI_STRUCT_(dist_rendezvous_hints_t, num_options);
DIST_ABI_STRUCT_(dist_rendezvous_result_t, store);
#undef DIST_ABI_STRUCT_

// Reads a struct the caller filled (see the top of this file). `what` names
// the argument in the error ("config", "args").
template <typename T>
absl::StatusOr<T> ReadCallerStruct(const T* in, const char* what) {
  if (in == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(what, " is NULL; pass a ", AbiStruct<T>::kName));
  }
  if (in->struct_size < AbiStruct<T>::kV1_0Size) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, "->struct_size is ", in->struct_size, " but every 1.x caller passes at least ",
        AbiStruct<T>::kV1_0Size, "; set it to sizeof(", AbiStruct<T>::kName, ")"));
  }
  T out;
  if (in->struct_size >= sizeof(T)) {
    // A caller of this version or a later one (its appended fields are not
    // read): one whole copy, where zeroing first and copying a part made
    // the next read of the struct wait on mismatched stores.
    std::memcpy(&out, in, sizeof(T));
  } else {
    std::memset(&out, 0, sizeof(out));
    std::memcpy(&out, in, in->struct_size);
  }
  out.struct_size = sizeof(T);
  return out;
}

// Writes `full` into a struct the caller provides room for, no further than
// out->struct_size; out->struct_size keeps the caller's value.
template <typename T>
void WriteCallerStruct(const T& full, T* out) {
  T copy = full;
  copy.struct_size = out->struct_size;
  std::memcpy(out, &copy, std::min(out->struct_size, sizeof(T)));
}

}  // namespace dist

#endif  // DIST_CPP_ABI_STRUCT_HPP_
