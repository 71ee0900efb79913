// Whether a file is a complete ELF shared object for this machine, checked
// before dlopen. dlopen maps a truncated library and the process dies of
// SIGBUS when the loader touches a page past the end of the file; a library
// for another machine or class fails with a confusing message. Reading the
// headers first turns both into a one-line error naming the file.
#ifndef DIST_CORE_ELF_CHECK_H_
#define DIST_CORE_ELF_CHECK_H_

#include <string>

#include "absl/status/status.h"

namespace dist {

// OK, or FailedPrecondition "<path>: <what is wrong>; <fix>".
absl::Status CheckElfSharedObject(const std::string& path);

}  // namespace dist

#endif  // DIST_CORE_ELF_CHECK_H_
