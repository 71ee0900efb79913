#include "core/rendezvous.h"

#include <cstddef>
#include <functional>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/join_check.h"
#include "core/logging.h"
#include "core/plugin_loader.h"
#include "dist/cpp/status.hpp"

namespace dist {
namespace {

void ReleaseFailed(dist_store_t* store, const absl::Status& why) {
  ReleaseStoreFailed(store, std::string(why.message()));
}

}  // namespace

void ReleaseStoreFailed(dist_store_t* store, const std::string& reason) {
  constexpr size_t kNeeded =
      offsetof(dist_store_t, release_failed) + sizeof(dist_store_t::release_failed);
  if (store->struct_size >= kNeeded && store->release_failed != nullptr) {
    store->release_failed(store->ctx, reason.c_str());
  } else {
    store->release(store->ctx);
  }
}

absl::StatusOr<std::string> UrlScheme(const std::string& url) {
  const size_t separator = url.find("://");
  std::string scheme = separator == std::string::npos ? "" : url.substr(0, separator);
  bool valid = !scheme.empty();
  for (char c : scheme) valid = valid && (absl::ascii_isalnum(c) || c == '+' || c == '-');
  if (!valid) {
    return absl::InvalidArgumentError(absl::StrCat(
        "init method '", url, "' is not a URL; use env://, tcp://host:port or file:///path"));
  }
  return absl::AsciiStrToLower(scheme);
}

namespace {

// What a rendezvous and a joining process share: the scheme's plugin (which
// `check` may refuse), its resolve, and a store in the result.
absl::StatusOr<dist_rendezvous_result_t> Resolve(
    const std::string& url, const dist_rendezvous_hints_t& hints, absl::Duration timeout,
    const std::function<absl::Status(const PluginRecord&)>& check) {
  absl::StatusOr<std::string> scheme = UrlScheme(url);
  if (!scheme.ok()) return scheme.status();
  absl::StatusOr<const PluginRecord*> plugin = PluginRegistry::Get().LoadRendezvous(*scheme);
  if (!plugin.ok()) return plugin.status();
  DIST_RETURN_IF_ERROR(check(**plugin));
  dist_rendezvous_result_t result{};
  result.struct_size = sizeof(result);
  result.local_rank = -1;
  result.local_world_size = -1;
  LogLine(DIST_LOG_DEBUG, "core", absl::StrCat("rendezvous ", url, " via ", (*plugin)->path));
  DIST_RETURN_IF_ERROR(TakeError((*plugin)->rendezvous.resolve(
      url.c_str(), &hints, absl::ToInt64Milliseconds(timeout), &result)));
  if (result.store == nullptr) {
    return absl::InternalError(
        absl::StrCat("rendezvous plugin ", (*plugin)->path, " returned no store for ", url));
  }
  return result;
}

}  // namespace

absl::StatusOr<dist_rendezvous_result_t> Rendezvous(const std::string& url,
                                                    const dist_rendezvous_hints_t& hints,
                                                    absl::Duration timeout) {
  // One deadline for resolving and joining together.
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + timeout;
  absl::StatusOr<dist_rendezvous_result_t> result =
      Resolve(url, hints, timeout, [](const PluginRecord&) { return absl::OkStatus(); });
  if (!result.ok()) return result.status();
  if (result->world_size <= 0 || result->rank < 0 || result->rank >= result->world_size) {
    result->store->release(result->store->ctx);
    return absl::InvalidArgumentError(absl::StrCat("rendezvous ", url, " gave rank ", result->rank,
                                                   " of world size ", result->world_size,
                                                   "; rank must be in [0, world_size)"));
  }
  const absl::Time resolved = absl::Now();
  absl::Status joined =
      RunJoinCheck(result->store, result->rank, result->world_size, url, timeout, deadline);
  if (!joined.ok()) {
    ReleaseFailed(result->store, joined);
    return joined;
  }
  const absl::Time now = absl::Now();
  LogLine(DIST_LOG_DEBUG, "core",
          absl::StrCat("rendezvous ", url, ": rank ", result->rank, " resolved in ",
                       absl::FormatDuration(absl::Trunc(resolved - start, absl::Microseconds(100))),
                       ", join check ",
                       absl::FormatDuration(absl::Trunc(now - resolved, absl::Microseconds(100)))));
  return result;
}

absl::StatusOr<dist_store_t*> OpenStoreToJoin(const std::string& url,
                                              const dist_rendezvous_hints_t& hints,
                                              absl::Duration timeout) {
  // The caller's options, and the one that says this process joins.
  std::vector<dist_kv_t> options(hints.options, hints.options + hints.num_options);
  options.push_back({"dist.join", "1"});
  dist_rendezvous_hints_t joining = hints;
  joining.rank = -1;
  joining.world_size = -1;
  joining.options = options.data();
  joining.num_options = options.size();
  absl::StatusOr<dist_rendezvous_result_t> result =
      Resolve(url, joining, timeout, [](const PluginRecord& plugin) {
        if (plugin.abi_minor >= 2) return absl::OkStatus();
        return absl::FailedPreconditionError(absl::StrCat(
            "DIST_JOIN: rendezvous plugin ", plugin.path, " (ABI ", plugin.abi_major, ".",
            plugin.abi_minor, ") cannot open a running job's store for a joining process; ",
            "it needs rendezvous ABI 1.2 (rebuild it against the current SDK)"));
      });
  if (!result.ok()) return result.status();
  return result->store;
}

}  // namespace dist
