// dist SDK, C++ side: the exception guard of every plugin entry point. No C++
// exception crosses the C ABI; one that escapes a plugin's code becomes a
// DIST_INTERNAL error naming the plugin and the entry point.
#ifndef DIST_CPP_GUARD_HPP_
#define DIST_CPP_GUARD_HPP_

#include <exception>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "dist/cpp/host_log.hpp"
#include "dist/cpp/status.hpp"

namespace dist {

inline absl::Status UnexpectedException(const char* plugin, const char* where, const char* what) {
  return absl::InternalError(absl::StrCat(plugin, ": unexpected exception in ", where, ": ", what,
                                          "; this is a bug in the ", plugin,
                                          " plugin, please report it"));
}

// Runs `body` (returning absl::Status) and converts the result to an error
// the caller owns; an exception becomes DIST_INTERNAL.
template <typename Body>
dist_error_t* Guard(const char* plugin, const char* where, Body&& body) {
  try {
    return ToError(body());
  } catch (const std::exception& e) {
    return ToError(UnexpectedException(plugin, where, e.what()));
  } catch (...) {
    return ToError(UnexpectedException(plugin, where, "unknown exception"));
  }
}

// For entry points that return nothing (abort, destroy): an exception is
// logged as an error, since there is no one to return it to.
template <typename Body>
void GuardVoid(const char* plugin, const char* where, Body&& body) {
  absl::Status status = absl::OkStatus();
  try {
    body();
    return;
  } catch (const std::exception& e) {
    status = UnexpectedException(plugin, where, e.what());
  } catch (...) {
    status = UnexpectedException(plugin, where, "unknown exception");
  }
  try {
    Log(DIST_LOG_ERROR, std::string(status.message()));
  } catch (...) {
  }
}

}  // namespace dist

#endif  // DIST_CPP_GUARD_HPP_
