// One rank of an end-to-end test through the core: dist_rendezvous() loads
// the plugin for the URL's scheme from the bundled plugin directory and
// runs the core's join check on top of the plugin's store. Then every rank
// sets its key and reads all the others'.
// Prints "joined rank=R world_size=N", "saw N keys", "OK"; or
// "ERROR <CODE>: <message>" and exits 1.
#include <stdio.h>

#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "dist/cpp/store.hpp"
#include "dist/registry.h"

ABSL_FLAG(std::string, url, "", "init method URL");
ABSL_FLAG(int, rank, -1, "rank hint");
ABSL_FLAG(int, world_size, -1, "world size hint");
ABSL_FLAG(int64_t, timeout_ms, 20000, "rendezvous timeout");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  setvbuf(stdout, nullptr, _IOLBF, 0);
  dist_rendezvous_hints_t hints = {sizeof(hints), absl::GetFlag(FLAGS_rank),
                                   absl::GetFlag(FLAGS_world_size), nullptr, 0};
  dist_rendezvous_result_t result{};
  result.struct_size = sizeof(result);
  const int64_t timeout_ms = absl::GetFlag(FLAGS_timeout_ms);
  const std::string url = absl::GetFlag(FLAGS_url);
  if (dist_error_t* error = dist_rendezvous(url.c_str(), &hints, timeout_ms, &result)) {
    printf("ERROR %s: %s\n", dist_error_code_name(dist_error_code(error)),
           dist_error_message(error));
    dist_error_destroy(error);
    return 1;
  }
  printf("joined rank=%d world_size=%d\n", result.rank, result.world_size);
  const dist::StoreView store(result.store);
  int code = 0;
  if (!store.Set(absl::StrCat("e2e/", result.rank), absl::StrCat("r", result.rank)).ok()) code = 1;
  int seen = 0;
  for (int r = 0; r < result.world_size && code == 0; ++r) {
    absl::StatusOr<std::string> value =
        store.Get(absl::StrCat("e2e/", r), absl::Milliseconds(timeout_ms));
    if (!value.ok()) {
      printf("ERROR %s\n", std::string(value.status().message()).c_str());
      code = 1;
    } else if (*value == absl::StrCat("r", r)) {
      ++seen;
    }
  }
  printf("saw %d keys\n", seen);
  result.store->release(result.store->ctx);
  printf(code == 0 && seen == result.world_size ? "OK\n" : "FAILED\n");
  return code;
}
