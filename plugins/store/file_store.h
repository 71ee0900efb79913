// A store kept in one file on a shared (possibly NFS) filesystem.
//
// The file is an append-only log of records (header, set, remove, join,
// leave, failed). Every operation takes flock() on the file (Linux maps it to POSIX
// locks on NFS), replays the records it has not seen yet, and, for a change,
// appends one record. Waiting is polling with backoff, not inotify, which
// does not see writes made on other NFS clients.
//
// Safety: the file store writes only to a file it created itself. The
// file is created atomically with its header (written under a private name
// and linked into place); an existing path is opened only when it is a
// regular file (no symlink is followed) of this user that starts with
// dist's header, and is refused untouched otherwise.
//
// Membership (world_size > 0): the first rank creates the file with a header
// holding the world size and a timestamp; every rank appends a join record, and on release a
// leave record; the rank whose leave completes the world removes the file.
// A stale file from an earlier, crashed job is refused at join time; the
// rule is at StaleReason in file_store.cc and in plugins/rendezvous/README.md.
// A rank whose rendezvous failed appends a failed record with the reason
// (Abandon, from dist_store_t.release_failed); a rank that opens the file
// later is refused at once with that reason.
#ifndef DIST_PLUGINS_STORE_FILE_STORE_H_
#define DIST_PLUGINS_STORE_FILE_STORE_H_

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "plugins/store/kv_table.h"
#include "plugins/store/store.h"

namespace dist::store {

struct FileStoreOptions {
  std::string path;
  int rank = -1;
  int world_size = 0;  // 0: a plain store without join/leave records
  // Bounds taking the lock and the join; also the age after which an
  // unfinished rendezvous in the file counts as stale.
  absl::Duration timeout = absl::Seconds(30);
  absl::Duration max_poll_interval = absl::Milliseconds(50);
};

class FileStore : public Store {
 public:
  static absl::StatusOr<std::unique_ptr<FileStore>> Open(FileStoreOptions options);
  // Appends the leave record; the last rank out removes the file.
  ~FileStore() override;

  absl::Status Set(const std::string& key, const std::string& value) override;
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) override;
  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta) override;
  absl::StatusOr<std::string> CompareSet(const std::string& key,
                                         const std::optional<std::string>& expected,
                                         const std::string& desired) override;
  absl::StatusOr<bool> Remove(const std::string& key) override;
  absl::StatusOr<bool> Check(const std::vector<std::string>& keys) override;
  absl::Status Wait(const std::vector<std::string>& keys, absl::Duration timeout) override;
  absl::StatusOr<int64_t> NumKeys() override;
  // Appends a failed record (this rank, `reason`) that later joiners are
  // refused with; then the destructor leaves as usual. Not for a file of
  // format version 1, whose readers would not know the record.
  void Abandon(const std::string& reason) override;

 private:
  struct Header {
    int version = 0;  // the file format version
    int world_size = 0;
    int64_t created_ms = 0;
    std::string creator;  // host:pid
  };
  class Lock;

  explicit FileStore(FileStoreOptions options) : options_(std::move(options)) {}
  absl::Status OpenAndJoin();
  // A descriptor of a dist store file at the path: an existing one only
  // when it is a regular file of this user that starts with dist's header
  // (a link, another user's file or a foreign file is refused untouched);
  // a missing one is created atomically, header included.
  absl::StatusOr<int> OpenFile(absl::Time deadline);
  // -1 when the path appeared meanwhile (another rank created it).
  absl::StatusOr<int> Create();
  std::string HeaderRecord() const;
  // The error for an existing path that is not ours to touch.
  absl::Status Refuse(const std::string& why) const;
  absl::Status Join();
  absl::Status Leave();
  absl::Status Fail(const std::string& reason);
  // Replays records appended since the last call. Must hold the lock.
  absl::Status CatchUp(bool exclusive) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Append(const std::string& record) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status ApplyRecord(absl::string_view payload, int64_t at)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckSameFile() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string StaleReason() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Polls until `keys` exist or the deadline; returns the missing ones.
  absl::StatusOr<std::vector<std::string>> PollFor(const std::vector<std::string>& keys,
                                                   absl::Duration timeout);

  FileStoreOptions options_;
  absl::Mutex mu_;  // guards the fd's offset and the replayed state
  int fd_ ABSL_GUARDED_BY(mu_) = -1;
  int64_t offset_ ABSL_GUARDED_BY(mu_) = 0;
  KvTable table_ ABSL_GUARDED_BY(mu_);
  bool has_header_ ABSL_GUARDED_BY(mu_) = false;
  Header header_ ABSL_GUARDED_BY(mu_);
  struct JoinInfo {
    std::string host;
    int64_t pid = 0;
    int64_t time_ms = 0;
  };
  std::map<int, JoinInfo> joined_ ABSL_GUARDED_BY(mu_);
  std::set<int> left_ ABSL_GUARDED_BY(mu_);
  struct Failure {
    int rank = -1;
    int64_t time_ms = 0;
    std::string who;  // host:pid
    std::string reason;
  };
  std::optional<Failure> failure_ ABSL_GUARDED_BY(mu_);  // the first failed record
  bool joined_self_ = false;
};

}  // namespace dist::store

#endif  // DIST_PLUGINS_STORE_FILE_STORE_H_
