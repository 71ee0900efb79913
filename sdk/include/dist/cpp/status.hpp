// dist SDK, C++ side: converting between absl::Status and dist_error_t.
// Header-only; C++ code keeps absl::Status inside and converts at the ABI.
#ifndef DIST_CPP_STATUS_HPP_
#define DIST_CPP_STATUS_HPP_

#include <string>

#include "absl/status/status.h"
#include "dist/error.h"

namespace dist {

// Converts a status into an error the caller owns (NULL for OK).
inline dist_error_t* ToError(const absl::Status& status) {
  if (status.ok()) return nullptr;
  const std::string message(status.message());
  return dist_error_new(static_cast<dist_error_code_t>(status.code()), "%s", message.c_str());
}

// Converts an error into a status and destroys the error (takes ownership).
inline absl::Status TakeError(dist_error_t* error) {
  if (error == nullptr) return absl::OkStatus();
  absl::Status status(static_cast<absl::StatusCode>(error->code), error->message);
  dist_error_destroy(error);
  return status;
}

// Like TakeError, but leaves the error alive.
inline absl::Status ErrorToStatus(const dist_error_t* error) {
  if (error == nullptr) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(error->code), error->message);
}

}  // namespace dist

// Returns from the enclosing function with the status when it is not OK.
#define DIST_RETURN_IF_ERROR(expr)                           \
  do {                                                       \
    ::absl::Status dist_status_macro_ = (expr);              \
    if (!dist_status_macro_.ok()) return dist_status_macro_; \
  } while (0)

#endif  // DIST_CPP_STATUS_HPP_
