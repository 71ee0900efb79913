// Refuses plugin files and directories that users other than this one (or
// root) can write: whoever can write them can run code in every process that
// loads dist. The fix is named in the error; DIST_ALLOW_WRITABLE_PLUGINS=1
// allows them anyway, for development only.
#ifndef DIST_CORE_PLUGIN_PERMISSIONS_H_
#define DIST_CORE_PLUGIN_PERMISSIONS_H_

#include <string>

#include "absl/status/status.h"

namespace dist {

inline constexpr char kAllowWritablePluginsEnv[] = "DIST_ALLOW_WRITABLE_PLUGINS";

// OK when `path` (a plugin file or a directory plugins are taken from) is
// owned by root or this user and writable by neither group nor others, or
// when DIST_ALLOW_WRITABLE_PLUGINS=1. Otherwise PermissionDenied naming the
// path, who can write it, and the fix.
absl::Status CheckOnlyOwnerWrites(const std::string& path);

}  // namespace dist

#endif  // DIST_CORE_PLUGIN_PERMISSIONS_H_
