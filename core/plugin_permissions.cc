#include "core/plugin_permissions.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace dist {
namespace {

bool Allowed() {
  const char* value = std::getenv(kAllowWritablePluginsEnv);
  return value != nullptr && std::strcmp(value, "1") == 0;
}

}  // namespace

absl::Status CheckOnlyOwnerWrites(const std::string& path) {
  if (Allowed()) return absl::OkStatus();
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat(path, ": ", std::strerror(errno)));
  }
  const char* what = S_ISDIR(st.st_mode) ? "plugin directory" : "plugin file";
  std::string who;
  if (st.st_uid != 0 && st.st_uid != geteuid()) {
    who = absl::StrCat("its owner, uid ", st.st_uid, " (neither you nor root)");
  } else if ((st.st_mode & S_IWOTH) != 0) {
    who = "every user";
  } else if ((st.st_mode & S_IWGRP) != 0) {
    who = absl::StrCat("group ", st.st_gid);
  } else {
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(absl::StrCat(
      "refusing ", what, " ", path, ": it is writable by ", who,
      ", who could run code in this process; fix with chmod go-w (and chown to you or root), "
      "or set ",
      kAllowWritablePluginsEnv, "=1 to allow it for development"));
}

}  // namespace dist
