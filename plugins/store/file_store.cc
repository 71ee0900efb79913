#include "plugins/store/file_store.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "dist/cpp/status.hpp"
#include "plugins/store/limits.h"
#include "plugins/store/protocol.h"

namespace dist::store {
namespace {

using protocol::Reader;
using protocol::Writer;

constexpr uint32_t kFileMagic = 0x53465344;  // "DSFS"
// 2 added the failed record. Version 1 files are still read and joined;
// nothing is appended to them that a version 1 reader would not know.
constexpr uint16_t kFileVersion = 2;
constexpr uint16_t kOldestFileVersion = 1;
constexpr uint16_t kFirstVersionWithFailed = 2;
constexpr size_t kMaxRecordBytes = kMaxKeyBytes + kMaxValueBytes + 64;
constexpr size_t kMaxReasonBytes = 16 * 1024;  // a failure's one-line reason

enum class Record : uint8_t {
  kHeader = 1,  // magic, version, world_size, created_ms, creator
  kSet = 2,     // key, value
  kRemove = 3,  // key
  kJoin = 4,    // rank, time_ms, who
  kLeave = 5,   // rank
  kFailed = 6,  // rank, time_ms, who, reason (version 2)
};

std::string LocalHost() {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  return host;
}

std::string Who() { return absl::StrCat(LocalHost(), ":", getpid()); }

// kill(pid, 0) probes without signalling; EPERM means it exists.
bool ProcessAlive(int64_t pid) {
  return pid > 0 && (kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM);
}

std::string ErrnoText(int error) { return strerror(error); }

// What the first bytes of an existing file say about it.
enum class HeaderCheck { kDist, kIncomplete, kForeign };

// Whether `bytes` (the start of a file) begin with a complete dist header
// record. Nothing but this decides that a file is ours to write to.
HeaderCheck CheckHeaderBytes(absl::string_view bytes) {
  if (bytes.size() < protocol::kFrameHeaderBytes) {
    return bytes.empty() ? HeaderCheck::kIncomplete : HeaderCheck::kForeign;
  }
  const uint32_t length = protocol::DecodeLength(bytes.data());
  // type, magic, version, world size, time, creator (at most 1 KiB)
  constexpr uint32_t kMinHeader = 1 + 4 + 2 + 8 + 8 + 4;
  if (length < kMinHeader || length > kMinHeader + 1024) return HeaderCheck::kForeign;
  // A partial header can be judged on what is there: type and magic first.
  const absl::string_view payload = bytes.substr(protocol::kFrameHeaderBytes);
  if (!payload.empty() && static_cast<uint8_t>(payload[0]) != 1) return HeaderCheck::kForeign;
  if (payload.size() >= 5) {
    Reader reader(payload.substr(1, 4));
    uint32_t magic = 0;
    if (!reader.U32(&magic) || magic != kFileMagic) return HeaderCheck::kForeign;
  }
  if (payload.size() < length) return HeaderCheck::kIncomplete;
  return HeaderCheck::kDist;
}

std::string RandomHex(size_t bytes) {
  std::string raw(bytes, '\0');
  size_t got = 0;
  const int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  while (fd >= 0 && got < bytes) {
    const ssize_t n = read(fd, raw.data() + got, bytes - got);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  if (fd >= 0) close(fd);
  // Without /dev/urandom the name only has to be unlikely to collide.
  for (size_t i = got; i < bytes; ++i)
    raw[i] = static_cast<char>(absl::ToUnixNanos(absl::Now()) >> (i % 8));
  static const char kDigits[] = "0123456789abcdef";
  std::string hex;
  for (char c : raw) {
    hex.push_back(kDigits[static_cast<uint8_t>(c) >> 4]);
    hex.push_back(kDigits[static_cast<uint8_t>(c) & 15]);
  }
  return hex;
}

bool WriteAllAt(int fd, absl::string_view bytes, off_t at) {
  size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = pwrite(fd, bytes.data() + written, bytes.size() - written,
                             at + static_cast<off_t>(written));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    written += static_cast<size_t>(n);
  }
  return true;
}

std::string FormatTime(int64_t unix_ms) {
  return absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", absl::FromUnixMillis(unix_ms),
                          absl::UTCTimeZone());
}

}  // namespace

// flock() held for one operation, taken with a deadline (LOCK_NB + polling,
// so a wedged peer cannot hang us).
class FileStore::Lock {
 public:
  static absl::StatusOr<Lock> Take(int fd, bool exclusive, absl::Time deadline,
                                   const std::string& path) {
    absl::Duration pause = absl::Microseconds(200);
    while (true) {
      if (flock(fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) == 0) return Lock(fd);
      if (errno != EWOULDBLOCK && errno != EINTR) {
        return absl::UnavailableError(
            absl::StrCat("cannot lock the store file ", path, ": ", ErrnoText(errno),
                         "; the filesystem must support flock (NFS needs its lock service)"));
      }
      if (absl::Now() >= deadline) {
        return absl::DeadlineExceededError(
            absl::StrCat("timed out waiting for the lock on the store file ", path,
                         "; another process holds it"));
      }
      absl::SleepFor(pause);
      pause = std::min(pause * 2, absl::Milliseconds(20));
    }
  }
  Lock(Lock&& other) : fd_(std::exchange(other.fd_, -1)) {}
  ~Lock() {
    if (fd_ >= 0) flock(fd_, LOCK_UN);
  }

 private:
  explicit Lock(int fd) : fd_(fd) {}
  int fd_;
};

absl::StatusOr<std::unique_ptr<FileStore>> FileStore::Open(FileStoreOptions options) {
  std::unique_ptr<FileStore> store(new FileStore(std::move(options)));
  DIST_RETURN_IF_ERROR(store->OpenAndJoin());
  return store;
}

FileStore::~FileStore() {
  if (joined_self_) Leave().IgnoreError();  // nothing to report to at release
  absl::MutexLock lock(&mu_);
  if (fd_ >= 0) close(fd_);
}

absl::Status FileStore::CheckSameFile() {
  struct stat by_fd, by_path;
  if (fstat(fd_, &by_fd) != 0) {
    return absl::UnavailableError(absl::StrCat("fstat ", options_.path, ": ", ErrnoText(errno)));
  }
  if (lstat(options_.path.c_str(), &by_path) != 0 || by_fd.st_ino != by_path.st_ino ||
      by_fd.st_dev != by_path.st_dev) {
    return absl::FailedPreconditionError(
        absl::StrCat("the store file ", options_.path,
                     " was removed or replaced while in use; the job's ranks finished, or "
                     "another job uses the same path: give each job its own file"));
  }
  return absl::OkStatus();
}

absl::Status FileStore::Refuse(const std::string& why) const {
  return absl::FailedPreconditionError(absl::StrCat(
      "file://", options_.path, ": ", why,
      "; the file store left it untouched: give the job a path that does not exist yet "
      "(for example in a directory of its own)"));
}

std::string FileStore::HeaderRecord() const {
  Writer header;
  header.U8(static_cast<uint8_t>(Record::kHeader));
  header.U32(kFileMagic);
  header.U16(kFileVersion);
  header.I64(std::max(options_.world_size, 0));
  header.I64(absl::ToUnixMillis(absl::Now()));
  header.Str(Who());
  return std::move(header).Finish();
}

absl::StatusOr<int> FileStore::Create() {
  const std::string& path = options_.path;
  // Written in full under a private name, then linked into place: link()
  // never replaces an existing path, and no rank ever sees a file without
  // its header.
  const std::string temp = absl::StrCat(path, ".", RandomHex(8), ".creating");
  int fd = open(temp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    const int error = errno;
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create the store file ", path, ": ", ErrnoText(error),
                     error == ENOENT ? "; create its directory on a filesystem every rank shares"
                                     : "; check the directory and its permissions"));
  }
  const std::string header = HeaderRecord();
  if (!WriteAllAt(fd, header, 0) || fsync(fd) != 0) {
    const int error = errno;
    unlink(temp.c_str());
    close(fd);
    return absl::UnavailableError(absl::StrCat("cannot write the store file ", temp, ": ",
                                               ErrnoText(error),
                                               "; is the filesystem full or read-only?"));
  }
  if (link(temp.c_str(), path.c_str()) == 0) {
    unlink(temp.c_str());
    return fd;
  }
  const int error = errno;
  unlink(temp.c_str());
  close(fd);
  if (error == EEXIST) return -1;
  if (error != EPERM && error != EOPNOTSUPP && error != ENOSYS && error != EMLINK) {
    return absl::UnavailableError(
        absl::StrCat("cannot create the store file ", path, ": ", ErrnoText(error)));
  }
  // A filesystem without hard links: create in place (still never over an
  // existing path); openers give an incomplete header a moment (OpenFile).
  fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    if (errno == EEXIST) return -1;
    return absl::UnavailableError(
        absl::StrCat("cannot create the store file ", path, ": ", ErrnoText(errno)));
  }
  if (!WriteAllAt(fd, header, 0)) {
    const int write_error = errno;
    unlink(path.c_str());  // ours: created with O_EXCL just now
    close(fd);
    return absl::UnavailableError(
        absl::StrCat("cannot write the store file ", path, ": ", ErrnoText(write_error)));
  }
  return fd;
}

absl::StatusOr<int> FileStore::OpenFile(absl::Time deadline) {
  const std::string& path = options_.path;
  // A header still being written in place (see Create) gets this long.
  const absl::Time incomplete_deadline = std::min(deadline, absl::Now() + absl::Seconds(2));
  constexpr int kProbeFlags = O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
  while (true) {
    // Look before writing: read-only, not following a link, and checked
    // (type, owner, header) before the file is opened for writing.
    const int probe = open(path.c_str(), O_RDONLY | kProbeFlags);
    if (probe < 0) {
      const int error = errno;
      if (error == ENOENT) {
        absl::StatusOr<int> created = Create();
        if (!created.ok() || *created >= 0) return created;
        continue;  // another rank created it first: open theirs
      }
      if (error == ELOOP) {
        return Refuse("the path is a symbolic link, and the file store does not follow links");
      }
      return absl::FailedPreconditionError(absl::StrCat("cannot open the store file ", path, ": ",
                                                        ErrnoText(error),
                                                        "; check the path and its permissions"));
    }
    struct stat seen;
    if (fstat(probe, &seen) != 0) {
      const int error = errno;
      close(probe);
      return absl::UnavailableError(absl::StrCat("fstat ", path, ": ", ErrnoText(error)));
    }
    if (!S_ISREG(seen.st_mode)) {
      close(probe);
      return Refuse("the path exists and is not a regular file");
    }
    if (seen.st_uid != geteuid()) {
      close(probe);
      return Refuse(absl::StrCat("the file belongs to user ID ", seen.st_uid,
                                 ", not to this user (", geteuid(), ")"));
    }
    std::string head(protocol::kFrameHeaderBytes + 1024 + 64, '\0');
    const ssize_t n = pread(probe, head.data(), head.size(), 0);
    close(probe);
    head.resize(n > 0 ? static_cast<size_t>(n) : 0);
    const HeaderCheck check = CheckHeaderBytes(head);
    if (check == HeaderCheck::kForeign ||
        (check == HeaderCheck::kIncomplete && absl::Now() >= incomplete_deadline)) {
      return Refuse(
          "the file exists and is not a dist rendezvous file (it does not start with "
          "dist's header)");
    }
    if (check == HeaderCheck::kIncomplete) {
      absl::SleepFor(absl::Milliseconds(10));
      continue;
    }
    const int fd = open(path.c_str(), O_RDWR | kProbeFlags);
    if (fd < 0) {
      if (errno == ENOENT) continue;  // removed since: start over
      return absl::FailedPreconditionError(absl::StrCat("cannot open the store file ", path,
                                                        " for writing: ", ErrnoText(errno),
                                                        "; check its permissions"));
    }
    struct stat opened;
    if (fstat(fd, &opened) != 0 || opened.st_dev != seen.st_dev || opened.st_ino != seen.st_ino) {
      close(fd);  // replaced between the look and the open: look again
      continue;
    }
    return fd;
  }
}

absl::Status FileStore::OpenAndJoin() {
  const absl::Time deadline = absl::Now() + options_.timeout;
  while (true) {
    {
      absl::StatusOr<int> fd = OpenFile(deadline);
      if (!fd.ok()) return fd.status();
      absl::MutexLock lock(&mu_);
      fd_ = *fd;
    }
    if (options_.world_size <= 0) return absl::OkStatus();
    absl::Status joined = Join();
    if (joined.ok()) return absl::OkStatus();
    absl::MutexLock lock(&mu_);
    close(fd_);
    fd_ = -1;
    // The last rank of the previous job removed the file between our open
    // and our lock: open the new one.
    if (!absl::IsAborted(joined) || absl::Now() >= deadline) return joined;
    offset_ = 0;
    table_ = KvTable();
    has_header_ = false;
    header_ = Header();
    joined_.clear();
    left_.clear();
    failure_.reset();
  }
}

// The rule that tells a file left by a crashed earlier job from a live
// rendezvous, checked when a rank joins (under the exclusive lock). A file
// with a failed record is refused first, with that failure's reason (see
// Join). Otherwise a file is refused as stale when
//  (a) this rank already joined it from a process of this host that is no
//      longer running;
//  (b) it has leave records: its job already ended (the last rank would
//      have removed it, so some rank of that job crashed);
//  (c) every process that joined it ran on this host and none is running;
//  (d) its rendezvous began longer ago than this rank's timeout and is
//      still incomplete: that job's ranks have timed out by now.
// Otherwise the rank joins. Two live processes on one rank (or one on
// another host, where liveness cannot be checked) and world sizes that
// disagree are then reported to every rank by the core's join check.
std::string FileStore::StaleReason() const {
  const std::string origin =
      absl::StrCat(" (created ", FormatTime(header_.created_ms), " by ", header_.creator, ")");
  auto mine = joined_.find(options_.rank);
  if (mine != joined_.end() && mine->second.host == LocalHost() &&
      !ProcessAlive(mine->second.pid)) {
    const JoinInfo& other = mine->second;
    return absl::StrCat("rank ", options_.rank, " already joined it from ", other.host, ":",
                        other.pid, " at ", FormatTime(other.time_ms),
                        ", which is no longer running: it is left over from a crashed job");
  }
  if (!left_.empty()) return absl::StrCat("ranks of an earlier job already left it", origin);
  bool all_local_and_gone = !joined_.empty();
  for (const auto& [rank, info] : joined_) {
    all_local_and_gone = all_local_and_gone && info.host == LocalHost() && !ProcessAlive(info.pid);
  }
  if (all_local_and_gone) {
    return absl::StrCat("every process that joined it", origin,
                        " ran on this host and is no longer running: it is left over "
                        "from a crashed job");
  }
  const absl::Duration age = absl::Now() - absl::FromUnixMillis(header_.created_ms);
  if (age > options_.timeout && static_cast<int>(joined_.size()) < header_.world_size) {
    return absl::StrCat("its rendezvous started ", absl::ToInt64Seconds(age), " s ago", origin,
                        ", longer than the timeout of ", absl::ToDoubleSeconds(options_.timeout),
                        " s, and only ", joined_.size(), " of ", header_.world_size,
                        " ranks joined: it is left over from a crashed job");
  }
  return "";
}

absl::Status FileStore::Join() {
  absl::MutexLock guard(&mu_);
  absl::StatusOr<Lock> lock =
      Lock::Take(fd_, /*exclusive=*/true, absl::Now() + options_.timeout, options_.path);
  if (!lock.ok()) return lock.status();
  absl::Status same = CheckSameFile();
  if (!same.ok()) return absl::AbortedError(same.message());  // reopen
  DIST_RETURN_IF_ERROR(CatchUp(/*exclusive=*/true));
  const int64_t now_ms = absl::ToUnixMillis(absl::Now());
  if (!has_header_) {
    // OpenFile checked the header; a file without one was swapped in since.
    return Refuse("the file no longer starts with dist's header");
  } else {
    if (failure_.has_value()) {
      // Checked before staleness: the ranks that failed leave at once, and
      // a rank arriving after them must hear why, not a misleading "stale".
      return absl::FailedPreconditionError(absl::StrCat(
          "file://", options_.path, ": the rendezvous in it already failed: ", failure_->reason,
          " (reported by rank ", failure_->rank, " on ", failure_->who, " at ",
          FormatTime(failure_->time_ms),
          "); delete the file (or use a fresh path) and start all ranks again"));
    }
    const std::string stale = StaleReason();
    if (!stale.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("file://", options_.path, " is stale: ", stale,
                       "; delete the file (or use a fresh path) and start all ranks again"));
    }
  }
  Writer join;
  join.U8(static_cast<uint8_t>(Record::kJoin));
  join.I64(options_.rank);
  join.I64(now_ms);
  join.Str(Who());
  DIST_RETURN_IF_ERROR(Append(std::move(join).Finish()));
  joined_self_ = true;
  return absl::OkStatus();
}

absl::Status FileStore::Leave() {
  absl::MutexLock guard(&mu_);
  absl::StatusOr<Lock> lock =
      Lock::Take(fd_, /*exclusive=*/true, absl::Now() + options_.timeout, options_.path);
  if (!lock.ok()) return lock.status();
  DIST_RETURN_IF_ERROR(CheckSameFile());
  DIST_RETURN_IF_ERROR(CatchUp(/*exclusive=*/true));
  Writer leave;
  leave.U8(static_cast<uint8_t>(Record::kLeave));
  leave.I64(options_.rank);
  DIST_RETURN_IF_ERROR(Append(std::move(leave).Finish()));
  // The header's world size decides: ranks that disagreed on it still
  // count, and the core has already failed their rendezvous.
  const int world_size = has_header_ ? header_.world_size : options_.world_size;
  if (static_cast<int>(left_.size()) >= world_size) {
    // Last one out: unlinking under the lock means a rank of the next job
    // that opened the old file sees it replaced and reopens.
    unlink(options_.path.c_str());
  }
  return absl::OkStatus();
}

void FileStore::Abandon(const std::string& reason) {
  if (joined_self_) Fail(reason).IgnoreError();  // best effort: the holder is failing already
}

absl::Status FileStore::Fail(const std::string& reason) {
  absl::MutexLock guard(&mu_);
  absl::StatusOr<Lock> lock =
      Lock::Take(fd_, /*exclusive=*/true, absl::Now() + options_.timeout, options_.path);
  if (!lock.ok()) return lock.status();
  DIST_RETURN_IF_ERROR(CheckSameFile());
  DIST_RETURN_IF_ERROR(CatchUp(/*exclusive=*/true));
  // Ranks of the same job reading a version 1 file would not know the record.
  if (header_.version < kFirstVersionWithFailed) return absl::OkStatus();
  Writer failed;
  failed.U8(static_cast<uint8_t>(Record::kFailed));
  failed.I64(options_.rank);
  failed.I64(absl::ToUnixMillis(absl::Now()));
  failed.Str(Who());
  failed.Str(reason.substr(0, kMaxReasonBytes));
  return Append(std::move(failed).Finish());
}

absl::Status FileStore::CatchUp(bool exclusive) {
  struct stat info;
  if (fstat(fd_, &info) != 0) {
    return absl::UnavailableError(absl::StrCat("fstat ", options_.path, ": ", ErrnoText(errno)));
  }
  const int64_t size = info.st_size;
  if (size < offset_) {
    return absl::DataLossError(
        absl::StrCat("the store file ", options_.path, " shrank from ", offset_, " to ", size,
                     " bytes; something else writes to it: give the job its own file"));
  }
  if (size == offset_) return absl::OkStatus();
  std::string bytes(static_cast<size_t>(size - offset_), '\0');
  size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n =
        pread(fd_, bytes.data() + got, bytes.size() - got, static_cast<off_t>(offset_ + got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return absl::UnavailableError(
          absl::StrCat("read ", options_.path, ": ", n < 0 ? ErrnoText(errno) : "short read"));
    }
    got += static_cast<size_t>(n);
  }
  size_t at = 0;
  while (bytes.size() - at >= protocol::kFrameHeaderBytes) {
    const uint32_t length = protocol::DecodeLength(bytes.data() + at);
    if (length == 0 || length > kMaxRecordBytes) {
      return absl::DataLossError(absl::StrCat("the store file ", options_.path,
                                              " is corrupt at offset ", offset_, " (record of ",
                                              length, " bytes); delete it and restart the job"));
    }
    if (bytes.size() - at < protocol::kFrameHeaderBytes + length) break;
    DIST_RETURN_IF_ERROR(ApplyRecord(
        absl::string_view(bytes.data() + at + protocol::kFrameHeaderBytes, length), offset_));
    at += protocol::kFrameHeaderBytes + length;
    offset_ += protocol::kFrameHeaderBytes + length;
  }
  if (offset_ < size && exclusive) {
    // A writer died mid-append (writers hold the exclusive lock, so nobody
    // is writing now): cut the torn record off so later records parse.
    if (ftruncate(fd_, offset_) != 0) {
      return absl::UnavailableError(
          absl::StrCat("truncate ", options_.path, ": ", ErrnoText(errno)));
    }
  }
  return absl::OkStatus();
}

absl::Status FileStore::ApplyRecord(absl::string_view payload, int64_t at) {
  Reader reader(payload);
  uint8_t type = 0;
  reader.U8(&type);
  bool ok = false;
  switch (static_cast<Record>(type)) {
    case Record::kHeader: {
      uint32_t magic = 0;
      uint16_t version = 0;
      int64_t world_size = 0;
      ok = reader.U32(&magic) && magic == kFileMagic && reader.U16(&version) &&
           reader.I64(&world_size) && reader.I64(&header_.created_ms) &&
           reader.Str(1024, &header_.creator) && at == 0;
      if (ok && (version < kOldestFileVersion || version > kFileVersion)) {
        return absl::FailedPreconditionError(
            absl::StrCat("the store file ", options_.path, " has format version ", version,
                         " but this build reads versions ", kOldestFileVersion, " to ",
                         kFileVersion, "; run the same dist release on every rank"));
      }
      header_.version = version;
      header_.world_size = static_cast<int>(world_size);
      has_header_ = ok;
      break;
    }
    case Record::kSet: {
      std::string key, value;
      ok = reader.Str(kMaxKeyBytes, &key) && reader.Str(kMaxValueBytes, &value);
      if (ok) table_.Set(key, std::move(value));
      break;
    }
    case Record::kRemove: {
      std::string key;
      ok = reader.Str(kMaxKeyBytes, &key);
      if (ok) table_.Remove(key);
      break;
    }
    case Record::kJoin: {
      int64_t rank = 0, time_ms = 0;
      std::string who;
      ok = reader.I64(&rank) && reader.I64(&time_ms) && reader.Str(1024, &who);
      if (ok) {
        JoinInfo& info = joined_[static_cast<int>(rank)];
        const size_t colon = who.rfind(':');
        info.host = who.substr(0, colon);
        info.pid = colon == std::string::npos ? 0 : std::atoll(who.c_str() + colon + 1);
        info.time_ms = time_ms;
      }
      break;
    }
    case Record::kLeave: {
      int64_t rank = 0;
      ok = reader.I64(&rank);
      if (ok) left_.insert(static_cast<int>(rank));
      break;
    }
    case Record::kFailed: {
      Failure failure;
      int64_t rank = 0;
      ok = header_.version >= kFirstVersionWithFailed && reader.I64(&rank) &&
           reader.I64(&failure.time_ms) && reader.Str(1024, &failure.who) &&
           reader.Str(kMaxReasonBytes, &failure.reason);
      failure.rank = static_cast<int>(rank);
      // The first failure is the cause; later ones usually repeat it.
      if (ok && !failure_.has_value()) failure_ = std::move(failure);
      break;
    }
  }
  if (!ok || !reader.done()) {
    return absl::DataLossError(absl::StrCat(
        "the store file ", options_.path, " has a malformed record at offset ", at,
        at == 0 ? "; it is not a dist rendezvous file" : "", ": delete it and restart the job"));
  }
  return absl::OkStatus();
}

absl::Status FileStore::Append(const std::string& record) {
  size_t written = 0;
  while (written < record.size()) {
    const ssize_t n = pwrite(fd_, record.data() + written, record.size() - written,
                             static_cast<off_t>(offset_ + written));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return absl::UnavailableError(absl::StrCat("write to the store file ", options_.path, ": ",
                                                 ErrnoText(errno),
                                                 "; is the filesystem full or read-only?"));
    }
    written += static_cast<size_t>(n);
  }
  // Replay our own record so local state matches the file.
  return CatchUp(/*exclusive=*/true);
}

// ---- operations ------------------------------------------------------------

#define DIST_LOCKED(exclusive)                                                   \
  absl::MutexLock guard(&mu_);                                                   \
  absl::StatusOr<Lock> file_lock =                                               \
      Lock::Take(fd_, exclusive, absl::Now() + options_.timeout, options_.path); \
  if (!file_lock.ok()) return file_lock.status();                                \
  DIST_RETURN_IF_ERROR(CatchUp(exclusive))

absl::Status FileStore::Set(const std::string& key, const std::string& value) {
  DIST_RETURN_IF_ERROR(ValidateKey(key));
  DIST_RETURN_IF_ERROR(ValidateValue(key, value.size()));
  DIST_LOCKED(true);
  Writer record;
  record.U8(static_cast<uint8_t>(Record::kSet));
  record.Str(key);
  record.Str(value);
  return Append(std::move(record).Finish());
}

absl::StatusOr<int64_t> FileStore::Add(const std::string& key, int64_t delta) {
  DIST_RETURN_IF_ERROR(ValidateKey(key));
  DIST_LOCKED(true);
  KvTable scratch;  // compute on a copy of one entry, then log the result
  if (const std::string* value = table_.Find(key)) scratch.Set(key, *value);
  absl::StatusOr<int64_t> result = scratch.Add(key, delta);
  if (!result.ok()) return result.status();
  Writer record;
  record.U8(static_cast<uint8_t>(Record::kSet));
  record.Str(key);
  record.Str(std::to_string(*result));
  DIST_RETURN_IF_ERROR(Append(std::move(record).Finish()));
  return *result;
}

absl::StatusOr<std::string> FileStore::CompareSet(const std::string& key,
                                                  const std::optional<std::string>& expected,
                                                  const std::string& desired) {
  DIST_RETURN_IF_ERROR(ValidateKey(key));
  if (expected) DIST_RETURN_IF_ERROR(ValidateValue(key, expected->size()));
  DIST_RETURN_IF_ERROR(ValidateValue(key, desired.size()));
  DIST_LOCKED(true);
  const std::string* current = table_.Find(key);
  const bool matches =
      expected ? (current != nullptr && *current == *expected) : current == nullptr;
  if (!matches) return current == nullptr ? std::string() : *current;
  Writer record;
  record.U8(static_cast<uint8_t>(Record::kSet));
  record.Str(key);
  record.Str(desired);
  DIST_RETURN_IF_ERROR(Append(std::move(record).Finish()));
  return desired;
}

absl::StatusOr<bool> FileStore::Remove(const std::string& key) {
  DIST_RETURN_IF_ERROR(ValidateKey(key));
  DIST_LOCKED(true);
  if (table_.Find(key) == nullptr) return false;
  Writer record;
  record.U8(static_cast<uint8_t>(Record::kRemove));
  record.Str(key);
  DIST_RETURN_IF_ERROR(Append(std::move(record).Finish()));
  return true;
}

absl::StatusOr<bool> FileStore::Check(const std::vector<std::string>& keys) {
  for (const std::string& key : keys) DIST_RETURN_IF_ERROR(ValidateKey(key));
  DIST_LOCKED(false);
  return table_.Missing(keys).empty();
}

absl::StatusOr<int64_t> FileStore::NumKeys() {
  DIST_LOCKED(false);
  return table_.size();
}

absl::StatusOr<std::vector<std::string>> FileStore::PollFor(const std::vector<std::string>& keys,
                                                            absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::Duration pause = absl::Milliseconds(1);
  while (true) {
    std::vector<std::string> missing;
    {
      DIST_LOCKED(false);
      missing = table_.Missing(keys);
    }
    if (missing.empty() || absl::Now() >= deadline) return missing;
    absl::SleepFor(std::min(pause, deadline - absl::Now()));
    pause = std::min(pause * 2, options_.max_poll_interval);
  }
}

absl::StatusOr<std::string> FileStore::Get(const std::string& key, absl::Duration timeout) {
  DIST_RETURN_IF_ERROR(ValidateKey(key));
  absl::StatusOr<std::vector<std::string>> missing = PollFor({key}, timeout);
  if (!missing.ok()) return missing.status();
  if (!missing->empty()) {
    return absl::DeadlineExceededError(absl::StrCat(
        "timed out after ", absl::ToInt64Milliseconds(timeout), " ms waiting for store key '", key,
        "' in ", options_.path, " (not set by any rank yet)"));
  }
  absl::MutexLock guard(&mu_);
  const std::string* value = table_.Find(key);
  // Removed again between the poll and now: report it like a timeout.
  if (value == nullptr) {
    return absl::DeadlineExceededError(
        absl::StrCat("store key '", key, "' was removed while get() was reading it"));
  }
  return *value;
}

absl::Status FileStore::Wait(const std::vector<std::string>& keys, absl::Duration timeout) {
  for (const std::string& key : keys) DIST_RETURN_IF_ERROR(ValidateKey(key));
  absl::StatusOr<std::vector<std::string>> missing = PollFor(keys, timeout);
  if (!missing.ok()) return missing.status();
  if (!missing->empty()) {
    return absl::DeadlineExceededError(
        absl::StrCat("timed out after ", absl::ToInt64Milliseconds(timeout),
                     " ms waiting for store key", missing->size() == 1 ? " " : "s ",
                     DescribeKeys(*missing), " in ", options_.path, " (not set by any rank yet)"));
  }
  return absl::OkStatus();
}

}  // namespace dist::store
