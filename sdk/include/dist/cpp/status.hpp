// dist SDK, C++ side: converting between absl::Status and dist_error_t.
// Header-only; C++ code keeps absl::Status inside and converts at the ABI.
#ifndef DIST_CPP_STATUS_HPP_
#define DIST_CPP_STATUS_HPP_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/string_view.h"
#include "dist/error.h"

namespace dist {

// DIST_REVOKED has no absl::StatusCode: inside C++ it is ABORTED with this
// payload, and becomes DIST_REVOKED again at the C boundary.
inline constexpr char kRevokedPayload[] = "dist.revoked";

inline absl::Status RevokedError(absl::string_view message) {
  absl::Status status = absl::AbortedError(message);
  status.SetPayload(kRevokedPayload, absl::Cord("1"));
  return status;
}

inline bool IsRevoked(const absl::Status& status) {
  return !status.ok() && status.GetPayload(kRevokedPayload).has_value();
}

// The status of a dist error code and message.
inline absl::Status StatusOf(dist_error_code_t code, const char* message) {
  if (code == DIST_REVOKED) return RevokedError(message);
  return absl::Status(static_cast<absl::StatusCode>(code), message);
}

// Converts a status into an error the caller owns (NULL for OK).
inline dist_error_t* ToError(const absl::Status& status) {
  if (status.ok()) return nullptr;
  const std::string message(status.message());
  const dist_error_code_t code =
      IsRevoked(status) ? DIST_REVOKED : static_cast<dist_error_code_t>(status.code());
  return dist_error_new(code, "%s", message.c_str());
}

// Converts an error into a status and destroys the error (takes ownership).
inline absl::Status TakeError(dist_error_t* error) {
  if (error == nullptr) return absl::OkStatus();
  absl::Status status = StatusOf(error->code, error->message);
  dist_error_destroy(error);
  return status;
}

// Like TakeError, but leaves the error alive.
inline absl::Status ErrorToStatus(const dist_error_t* error) {
  if (error == nullptr) return absl::OkStatus();
  return StatusOf(error->code, error->message);
}

// A copy of `status` that shares nothing with it (code and message; no
// payloads but the revoked mark). For a status one thread keeps and hands to another, such as a
// work's result: copies of an absl::Status share its message through a
// reference count, and where Abseil is not built for ThreadSanitizer (as
// Debian's) TSan cannot see that count, so the keeper's last release looks
// like a race with the other thread's reads.
inline absl::Status UnsharedCopy(const absl::Status& status) {
  if (status.ok()) return absl::OkStatus();
  if (IsRevoked(status)) return RevokedError(std::string(status.message()));
  return absl::Status(status.code(), status.message());
}

}  // namespace dist

// Returns from the enclosing function with the status when it is not OK.
#define DIST_RETURN_IF_ERROR(expr)                           \
  do {                                                       \
    ::absl::Status dist_status_macro_ = (expr);              \
    if (!dist_status_macro_.ok()) return dist_status_macro_; \
  } while (0)

#endif  // DIST_CPP_STATUS_HPP_
