#include "plugins/backends/gloo/gloo_store.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gloo/common/error.h"

namespace dist_gloo {

void GlooStore::Fail(absl::Status status) {
  {
    absl::MutexLock lock(&mu_);
    if (first_error_.ok()) first_error_ = status;
  }
  throw gloo::IoException(std::string(status.message()));
}

absl::Status GlooStore::first_error() const {
  absl::MutexLock lock(&mu_);
  return first_error_;
}

void GlooStore::set(const std::string& key, const std::vector<char>& data) {
  absl::Status status = store_.Set(prefix_ + key, std::string(data.begin(), data.end()));
  if (!status.ok()) Fail(status);
}

absl::Status GlooStore::Explain(absl::Status status, const std::vector<std::string>& keys,
                                absl::Duration timeout) const {
  if (!absl::IsDeadlineExceeded(status)) return status;
  return absl::DeadlineExceededError(
      absl::StrCat("Gloo rendezvous timed out after ", absl::FormatDuration(timeout),
                   " waiting for the address of rank(s) ", absl::StrJoin(keys, ", "),
                   "; check that every rank creates this communicator (", status.message(), ")"));
}

std::vector<char> GlooStore::get(const std::string& key) {
  const absl::Duration timeout = key == deferred_key_ ? deferred_timeout_ : timeout_;
  deferred_key_.clear();
  absl::StatusOr<std::string> value = store_.Get(prefix_ + key, timeout);
  if (!value.ok()) Fail(Explain(value.status(), {key}, timeout));
  return std::vector<char>(value->begin(), value->end());
}

void GlooStore::wait(const std::vector<std::string>& keys) {
  wait(keys, absl::ToChronoMilliseconds(timeout_));
}

void GlooStore::wait(const std::vector<std::string>& keys,
                     const std::chrono::milliseconds& timeout) {
  if (keys.size() == 1) {
    deferred_key_ = keys[0];
    deferred_timeout_ = absl::FromChrono(timeout);
    return;
  }
  std::vector<std::string> full;
  for (const std::string& key : keys) full.push_back(prefix_ + key);
  absl::Status status = store_.Wait(full, absl::FromChrono(timeout));
  if (!status.ok()) Fail(Explain(status, keys, absl::FromChrono(timeout)));
}

}  // namespace dist_gloo
