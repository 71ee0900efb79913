// A byte count written the way nccl-tests takes them: 8, 1K, 1M, 64M, 1G.
#ifndef DIST_TOOLS_DISTBENCH_BYTE_SIZE_H_
#define DIST_TOOLS_DISTBENCH_BYTE_SIZE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace distbench {

// Suffixes are binary (K = 1024) as in nccl-tests; "B" may follow.
absl::StatusOr<uint64_t> ParseByteSize(absl::string_view text);

// 1048576 -> "1M", 1000 -> "1000": the shortest exact spelling.
std::string FormatByteSize(uint64_t bytes);

// The flag type for -b and -e.
struct ByteSize {
  uint64_t bytes = 0;
};
bool AbslParseFlag(absl::string_view text, ByteSize* size, std::string* error);
std::string AbslUnparseFlag(ByteSize size);

}  // namespace distbench

#endif  // DIST_TOOLS_DISTBENCH_BYTE_SIZE_H_
