// Turns a child's output stream into whole lines, each prefixed with the
// rank ("[3] "), written to one of distrun's own descriptors.
#ifndef DIST_TOOLS_DISTRUN_LINE_PREFIXER_H_
#define DIST_TOOLS_DISTRUN_LINE_PREFIXER_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace dist::distrun {

class LinePrefixer {
 public:
  // A line longer than this is written in pieces, so that a child that never
  // prints a newline cannot make distrun grow without bound.
  static constexpr size_t kMaxLine = 64 * 1024;

  LinePrefixer(std::string prefix, int fd);

  // Writes every complete line in `data` (together with what an earlier call
  // left over); keeps the unterminated tail for later.
  void Append(absl::string_view data);

  // Writes the unterminated tail, if any, ending it with a newline.
  void Flush();

 private:
  std::string prefix_;
  int fd_;
  std::string partial_;
};

// Writes all of `data` to `fd`, retrying after EINTR, short writes and
// EAGAIN. Whole lines go out in one call, so ranks never interleave within a
// line. Gives up silently when the reader went away (EPIPE).
void WriteAll(int fd, absl::string_view data);

}  // namespace dist::distrun

#endif  // DIST_TOOLS_DISTRUN_LINE_PREFIXER_H_
