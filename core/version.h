// The core's own version (independent of the ABI versions in the SDK).
#ifndef DIST_CORE_VERSION_H_
#define DIST_CORE_VERSION_H_

namespace dist {

inline constexpr char kCoreVersion[] = "1.0.0";

}  // namespace dist

#endif  // DIST_CORE_VERSION_H_
