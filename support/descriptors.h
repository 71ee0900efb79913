// How this process uses its file descriptors, for the messages that must
// say who holds them when a socket or file cannot be opened ("Too many open
// files"): a rank that hosts the store can find its table filled by the
// store's clients, and "check the interface" is then the wrong advice.
#ifndef DIST_SUPPORT_DESCRIPTORS_H_
#define DIST_SUPPORT_DESCRIPTORS_H_

#include <cstdint>
#include <string>

namespace dist::support {

struct DescriptorCensus {
  int64_t open = 0;    // descriptors open now (/proc/self/fd)
  int64_t limit = -1;  // the soft RLIMIT_NOFILE (ulimit -n); -1 when unlimited
  // The local TCP port on which this process listens and holds the most
  // accepted connections (a store hosted here, typically), and how many.
  int port = 0;
  int64_t accepted = 0;
};

// Counts this process's descriptors and finds which listening port holds
// the most of them (from /proc/self/fd and /proc/self/net/tcp{,6}). Reads
// at most a bounded number of lines; what it cannot read counts as nothing.
DescriptorCensus TakeDescriptorCensus();

// Whether this process cannot open one more descriptor now (EMFILE): what
// a library that swallowed the errno (Gloo's address lookup says "Unable to
// find address") failed on.
bool AtDescriptorLimit();

// One clause for an error message, e.g. "this process has 1021 of its 1024
// descriptors open (ulimit -n), 1003 of them connections accepted on port
// 29500, which this process listens on (the dist store when this rank
// hosts it)".
std::string DescribeDescriptors(const DescriptorCensus& census);
std::string DescribeDescriptors();

}  // namespace dist::support

#endif  // DIST_SUPPORT_DESCRIPTORS_H_
