// file:///path?rank=R&world_size=N — a store in one file on a filesystem all
// ranks share (see plugins/store/file_store.h for the format and the rule
// that detects a stale file). When the core's join fails it hands the store
// back with release_failed; the file keeps the reason for later ranks.
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "dist/cpp/rendezvous_adapter.hpp"
#include "dist/rendezvous_plugin.h"
#include "plugins/rendezvous/common/plugin_support.h"
#include "plugins/rendezvous/common/ranks.h"
#include "plugins/store/abi_store.h"
#include "plugins/store/file_store.h"
#include "support/url.h"

namespace dist::rendezvous {

using support::ParseUrl;
namespace {

const char* const kSchemes[] = {"file", nullptr};

absl::Status Bad(const Url& url, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(
      "malformed init method URL '", url.text, "': ", why,
      "; expected file:///absolute/path/on/shared/fs?rank=R&world_size=N (three slashes)"));
}

absl::Status ResolveFile(const char* text, const dist_rendezvous_hints_t* hints, int64_t timeout_ms,
                         dist_rendezvous_result_t* result) {
  absl::StatusOr<Url> url = ParseUrl(text);
  if (!url.ok()) return url.status();
  if (url->scheme != "file") return Bad(*url, "the file plugin handles only file://");
  if ((!url->host.empty() && url->host != "localhost") || url->port >= 0) {
    return Bad(*url,
               absl::StrCat("'", url->host, "' would be a host name; file:// takes only a path"));
  }
  if (url->path.empty() || url->path == "/" || url->path.back() == '/') {
    return Bad(*url, "no file name");
  }
  absl::StatusOr<Query> query =
      Query::From(*url, {"rank", "world_size", "local_rank", "local_world_size"});
  if (!query.ok()) return query.status();
  absl::StatusOr<RankInfo> ranks = ResolveRanks(*url, *query, hints);
  if (!ranks.ok()) return ranks.status();

  store::FileStoreOptions options;
  options.path = url->path;
  options.rank = ranks->rank;
  options.world_size = ranks->world_size;
  options.timeout = absl::Milliseconds(timeout_ms);
  absl::StatusOr<std::unique_ptr<store::FileStore>> file_store = store::FileStore::Open(options);
  if (!file_store.ok()) {
    // Messages from the store already name the file.
    return file_store.status();
  }
  dist::Log(DIST_LOG_DEBUG, absl::StrCat(ranks->rank >= 0 ? absl::StrCat("rank ", ranks->rank)
                                                          : "a joining process",
                                         " opened the store file ", url->path));
  FillResult(*ranks, store::MakeAbiStore(*std::move(file_store), options.timeout), result);
  return absl::OkStatus();
}

}  // namespace
}  // namespace dist::rendezvous

DIST_EXPORT_RENDEZVOUS_PLUGIN("file", dist::rendezvous::kSchemes, dist::rendezvous::ResolveFile)
