#include "core/own_file.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"

namespace dist {
namespace {

// Whether `path` may be replaced: nothing there, or a regular file of ours.
absl::Status MayReplace(const std::string& path,
                        absl::FunctionRef<bool(absl::string_view head)> ours,
                        absl::string_view what) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return absl::UnavailableError(
        absl::StrCat(what, ": cannot check ", path, ": ", std::strerror(errno)));
  }
  const std::string leave = "; it was left as it is: move it away or write somewhere else";
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, ": not replacing ", path, ": it is not a regular file (a link, a directory)", leave));
  }
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat(what, ": cannot read ", path, " to check it: ", std::strerror(errno)));
  }
  std::vector<char> head(4096);
  ssize_t n;
  do {
    n = read(fd, head.data(), head.size());
  } while (n < 0 && errno == EINTR);
  close(fd);
  if (n < 0 || !ours(absl::string_view(head.data(), static_cast<size_t>(n)))) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, ": not replacing ", path, ": it exists and dist did not write it", leave));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteOwnFile(const std::string& path, absl::string_view contents,
                          absl::FunctionRef<bool(absl::string_view head)> ours,
                          absl::string_view what) {
  if (absl::Status may = MayReplace(path, ours, what); !may.ok()) return may;
  // O_EXCL: a new file or nothing (a planted link is not followed), under
  // a name nobody can guess; the mode is the user's umask, as for any file.
  std::string temporary;
  int fd = -1;
  for (int attempt = 0; attempt < 8 && fd < 0; ++attempt) {
    uint64_t random = 0;
    if (getrandom(&random, sizeof(random), 0) != sizeof(random)) break;
    temporary = absl::StrCat(path, ".tmp.", absl::Hex(random, absl::kZeroPad16));
    fd = open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat(what, ": cannot create a file beside ", path, ": ", std::strerror(errno)));
  }
  size_t done = 0;
  int error = 0;
  while (done < contents.size()) {
    const ssize_t n = write(fd, contents.data() + done, contents.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      error = errno;
      break;
    }
    done += static_cast<size_t>(n);
  }
  if (close(fd) != 0 && error == 0) error = errno;
  if (error == 0 && std::rename(temporary.c_str(), path.c_str()) != 0) error = errno;
  if (error != 0) {
    std::remove(temporary.c_str());
    return absl::UnavailableError(
        absl::StrCat(what, ": writing ", path, " failed: ", std::strerror(error)));
  }
  return absl::OkStatus();
}

}  // namespace dist
