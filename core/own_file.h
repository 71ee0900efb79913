// Writing a file that dist owns into a directory it does not (trace dumps
// in DIST_TRACE_DIR, which may be /tmp or a user's working directory).
#ifndef DIST_CORE_OWN_FILE_H_
#define DIST_CORE_OWN_FILE_H_

#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace dist {

// Writes `contents` to `path` whole: into a temporary beside it, then
// renamed over it, so a reader never sees half of it. Two guards:
//  - the temporary is a new file (O_CREAT|O_EXCL) under a random name, so
//    a link planted under the name it would take in a shared directory is
//    never followed to someone else's file (it was `<path>.tmp.<pid>`);
//  - an existing `path` is replaced only if it is a regular file whose first
//    4 KiB `ours` accepts (dist wrote it: a dump of an earlier run); anything
//    else is someone's file, left as it is and named in the error.
// `what` starts the errors ("flight recorder").
absl::Status WriteOwnFile(const std::string& path, absl::string_view contents,
                          absl::FunctionRef<bool(absl::string_view head)> ours,
                          absl::string_view what);

}  // namespace dist

#endif  // DIST_CORE_OWN_FILE_H_
