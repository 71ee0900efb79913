#include "support/descriptors.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace dist::support {
namespace {

// /proc/net/tcp lists every socket of the network namespace: on a busy
// host that can be many; an error message reads no more than this.
constexpr int kMaxLines = 1 << 20;
constexpr char kListen[] = "0A";  // TCP_LISTEN in /proc/net/tcp's "st" column

struct Socket {
  int port = 0;
  bool listening = false;
};

// inode -> local port and state, for the sockets of `inodes`.
void ReadTcpTable(const char* path, const absl::flat_hash_set<uint64_t>& inodes,
                  absl::flat_hash_map<uint64_t, Socket>* sockets) {
  std::ifstream table(path);
  std::string line;
  std::getline(table, line);  // the header
  for (int n = 0; n < kMaxLines && std::getline(table, line); ++n) {
    // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
    std::vector<absl::string_view> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (fields.size() < 10) continue;
    uint64_t inode = 0;
    if (!absl::SimpleAtoi(fields[9], &inode) || !inodes.contains(inode)) continue;
    const absl::string_view local = fields[1];
    const size_t colon = local.rfind(':');
    if (colon == absl::string_view::npos) continue;
    const std::string port_hex(local.substr(colon + 1));
    Socket socket;
    socket.port = static_cast<int>(std::strtol(port_hex.c_str(), nullptr, 16));
    socket.listening = fields[3] == kListen;
    (*sockets)[inode] = socket;
  }
}

// Counts `dir` (/proc/self/fd, opened) into `census`; the inodes of its
// sockets.
absl::flat_hash_set<uint64_t> Count(DIR* dir, DescriptorCensus* census) {
  absl::flat_hash_set<uint64_t> inodes;
  const int own = dirfd(dir);
  char target[64];
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    int fd = -1;
    if (!absl::SimpleAtoi(entry->d_name, &fd) || fd == own) continue;
    ++census->open;
    const std::string link = absl::StrCat("/proc/self/fd/", entry->d_name);
    const ssize_t n = readlink(link.c_str(), target, sizeof(target) - 1);
    if (n <= 0) continue;
    uint64_t inode = 0;
    absl::string_view text(target, static_cast<size_t>(n));
    if (absl::ConsumePrefix(&text, "socket:[") && absl::ConsumeSuffix(&text, "]") &&
        absl::SimpleAtoi(text, &inode)) {
      inodes.insert(inode);
    }
  }
  return inodes;
}

// Finds the listening port of this process that holds the most accepted
// connections among `inodes`.
void CountAccepted(const absl::flat_hash_set<uint64_t>& inodes, DescriptorCensus* census) {
  if (inodes.empty()) return;
  absl::flat_hash_map<uint64_t, Socket> sockets;
  ReadTcpTable("/proc/self/net/tcp", inodes, &sockets);
  ReadTcpTable("/proc/self/net/tcp6", inodes, &sockets);
  absl::flat_hash_set<int> listening;
  absl::flat_hash_map<int, int64_t> accepted;
  for (const auto& [inode, socket] : sockets) {
    if (socket.listening) listening.insert(socket.port);
  }
  // An accepted connection has the listening socket's local port.
  for (const auto& [inode, socket] : sockets) {
    if (!socket.listening && listening.contains(socket.port)) ++accepted[socket.port];
  }
  for (const auto& [port, count] : accepted) {
    if (count > census->accepted) {
      census->port = port;
      census->accepted = count;
    }
  }
}

}  // namespace

DescriptorCensus TakeDescriptorCensus() {
  DescriptorCensus census;
  rlimit files{};
  const bool known = getrlimit(RLIMIT_NOFILE, &files) == 0;
  if (known && files.rlim_cur != RLIM_INFINITY) census.limit = static_cast<int64_t>(files.rlim_cur);
  DIR* dir = opendir("/proc/self/fd");
  // Reading the table takes a few descriptors itself, and the caller is
  // out of them: lend a few above the soft limit for the count, when the
  // hard limit allows, and take them back (a descriptor another thread
  // opens meanwhile stays valid).
  const bool lend = dir == nullptr && errno == EMFILE && known && files.rlim_cur < files.rlim_max;
  if (lend) {
    rlimit raised = files;
    raised.rlim_cur = std::min<rlim_t>(files.rlim_max, files.rlim_cur + 8);
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) dir = opendir("/proc/self/fd");
  }
  if (dir != nullptr) {
    const absl::flat_hash_set<uint64_t> inodes = Count(dir, &census);
    closedir(dir);  // first: the TCP tables take a descriptor too
    CountAccepted(inodes, &census);
  }
  if (lend) setrlimit(RLIMIT_NOFILE, &files);
  return census;
}

bool AtDescriptorLimit() {
  const int probe = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (probe >= 0) {
    close(probe);
    return false;
  }
  return errno == EMFILE;
}

std::string DescribeDescriptors(const DescriptorCensus& census) {
  const std::string limit =
      census.limit < 0 ? "no limit" : absl::StrCat("a limit of ", census.limit, " (ulimit -n)");
  std::string text =
      census.open > 0
          ? absl::StrCat("this process has ", census.open, " descriptors open against ", limit)
          : absl::StrCat("this process is at its open-files limit (", limit, ")");
  if (census.accepted > 0) {
    absl::StrAppend(&text, ", ", census.accepted, " of them connections accepted on port ",
                    census.port,
                    ", where this process listens (the dist store, when this rank hosts it)");
  }
  return text;
}

std::string DescribeDescriptors() { return DescribeDescriptors(TakeDescriptorCensus()); }

}  // namespace dist::support
