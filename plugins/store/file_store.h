// A store kept in one file on a shared (possibly NFS) filesystem.
//
// The file is an append-only log of records (header, set, remove, join,
// leave). Every operation takes flock() on the file (Linux maps it to POSIX
// locks on NFS), replays the records it has not seen yet, and, for a change,
// appends one record. Waiting is polling with backoff, not inotify, which
// does not see writes made on other NFS clients.
//
// Membership (world_size > 0): the first rank writes a header with the world
// size and a timestamp; every rank appends a join record, and on release a
// leave record; the rank whose leave completes the world removes the file.
// A stale file from an earlier, crashed job is refused at join time; the
// rule is at StaleReason in file_store.cc and in plugins/rendezvous/README.md.
// A file whose rendezvous failed (FileStoreOptions::failure_key is set in
// it) is refused with that failure's reason.
#ifndef DIST_PLUGINS_STORE_FILE_STORE_H_
#define DIST_PLUGINS_STORE_FILE_STORE_H_

#include <memory>
#include <map>
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
  // The key under which the store's users record why a rendezvous over the
  // file failed (the file:// rendezvous names the core's join-check key). A
  // rank that arrives after ranks have left such a file is told that reason
  // rather than "stale". Empty: the store knows no such key.
  std::string failure_key;
};

class FileStore : public Store {
 public:
  static absl::StatusOr<std::unique_ptr<FileStore>> Open(FileStoreOptions options);
  // Appends the leave record; the last rank out removes the file.
  ~FileStore() override;

  absl::Status Set(const std::string& key, const std::string& value) override;
  absl::StatusOr<std::string> Get(const std::string& key,
                                  absl::Duration timeout) override;
  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta) override;
  absl::StatusOr<std::string> CompareSet(const std::string& key,
                                         const std::optional<std::string>& expected,
                                         const std::string& desired) override;
  absl::StatusOr<bool> Remove(const std::string& key) override;
  absl::StatusOr<bool> Check(const std::vector<std::string>& keys) override;
  absl::Status Wait(const std::vector<std::string>& keys,
                    absl::Duration timeout) override;
  absl::StatusOr<int64_t> NumKeys() override;

 private:
  struct Header {
    int world_size = 0;
    int64_t created_ms = 0;
    std::string creator;  // host:pid
  };
  class Lock;

  explicit FileStore(FileStoreOptions options) : options_(std::move(options)) {}
  absl::Status OpenAndJoin();
  absl::Status Join();
  absl::Status Leave();
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
  bool joined_self_ = false;
};

}  // namespace dist::store

#endif  // DIST_PLUGINS_STORE_FILE_STORE_H_
